"""Prompt-lookup speculative decoding (attn_core.models.speculative): the same tokens as plain greedy decoding.

Two models. A tiny random Gemma 3 in float64 (3 layers, a 6-token window) runs sequences many times longer than
its window, so every local ring buffer wraps and is rolled back again and again; a position-dependent bias on
its logits makes the text repeat with variations, so drafts are both accepted and rejected. There the logits
behind every chosen token must equal those of a plain one-token-at-a-time loop to 1e-12: a rollback that left a
rejected draft's key in a cache, or evicted one the next query needs, changes them. Then the real Gemma 3 270M in
float32, against ``lm.generate``, on prompts where lookup helps and where it does not, and one longer than its
512-token window.
"""

from __future__ import annotations

import pytest
import torch

import attn_core as ac
from attn_core.models.gemma3 import Gemma3, Gemma3Config
from attn_core.models.generation import generate_tokens
from attn_core.models.speculative import SpeculativeStats, lookup_drafts, prompt_lookup_generate

TINY = Gemma3Config(
    vocab_size=12,
    hidden_dim=16,
    num_layers=3,  # layers 0, 1 local (window 6), layer 2 global
    num_heads=2,
    num_kv_heads=1,
    head_dim=8,
    ffn_dim=32,
    sliding_window=6,
    global_every=3,
    rope_base_local=1e4,
    rope_base_global=1e6,
    query_pre_attn_scalar=8.0,
    rms_norm_eps=1e-6,
    bos_token_id=2,
    eos_token_id=1,
    pad_token_id=0,
)
# The text the bias pushes towards: "3 4 5 3 4 6 ..." repeats with a variation, so the bigram "3 4" is followed
# by 5 or by 6 and lookup drafts are sometimes wrong.
PATTERN = [3, 4, 5, 3, 4, 6, 7, 3, 4, 5, 8]


class BiasedTiny(torch.nn.Module):
    """A random float64 Gemma 3 whose logits at absolute position p get +5 on PATTERN[p % len(PATTERN)] (logits of the
    random model, its final norm scaled by 1/4, are of size ~1: both count). It
    records the logits row computed last at every position (a rejected draft's row is overwritten on retry)."""

    def __init__(self, seed: int):
        super().__init__()
        torch.manual_seed(seed)
        self.inner = Gemma3(TINY).double().eval()
        with torch.no_grad():
            self.inner.final_norm.weight.mul_(0.25)  # logits of size ~1: the bias and the model both count
        self.rows: dict[int, torch.Tensor] = {}

    def new_caches(self, *, max_rollback: int = 0) -> list[ac.KVCache]:
        return self.inner.new_caches(max_rollback=max_rollback)

    def forward(self, ids: torch.Tensor, caches: list[ac.KVCache], *, last_only: bool = False) -> torch.Tensor:
        start = len(caches[0])  # the position of ids[:, 0]
        logits = self.inner(ids, caches).clone()  # (1, L, V)
        positions = torch.arange(start, start + ids.shape[1])  # (L,)
        favoured = torch.tensor(PATTERN)[positions % len(PATTERN)]  # (L,)
        logits[0, torch.arange(ids.shape[1]), favoured] += 5.0
        for i, position in enumerate(positions.tolist()):
            self.rows[position] = logits[0, i].clone()  # (V,)
        return logits[:, -1:] if last_only else logits  # (1, 1 or L, V)


def plain_greedy(lm: BiasedTiny, ids: torch.Tensor, n: int) -> torch.Tensor:
    caches = lm.new_caches()
    with torch.no_grad():
        return generate_tokens(lambda step: lm(step, caches, last_only=True)[:, -1], ids, n)  # (1, L + n)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("num_draft, ngram", [(1, 1), (3, 2), (5, 2), (4, 3)])
def test_tiny_model_same_tokens_and_logits_as_plain_greedy(seed, num_draft, ngram):
    prompt = torch.tensor([[2, *PATTERN[:7]]])  # (1, 8)
    reference_lm = BiasedTiny(seed)
    reference = plain_greedy(reference_lm, prompt, 40)  # 48 tokens through a 6-token window: the rings wrap
    speculative_lm = BiasedTiny(seed)
    ids, stats = prompt_lookup_generate(speculative_lm, prompt, 40, num_draft=num_draft, ngram=ngram)
    assert torch.equal(ids, reference)
    # Every logits row a token was chosen from (positions 7 .. 46) equals plain decoding's, to float64 rounding.
    for position in range(prompt.shape[1] - 1, reference.shape[1] - 1):
        torch.testing.assert_close(
            speculative_lm.rows[position], reference_lm.rows[position], rtol=0, atol=1e-12, msg=f"at {position}"
        )
    assert stats.accepted > 0
    if ngram < 3:  # drafts were rejected too (a trigram of this pattern predicts it perfectly for some seeds)
        assert stats.accepted < stats.drafted
    assert stats.new_tokens == 40 and stats.forwards < 40


def test_stats_are_consistent():
    prompt = torch.tensor([[2, *PATTERN]])  # (1, 12)
    lm = BiasedTiny(0)
    ids, stats = prompt_lookup_generate(lm, prompt, 25, num_draft=4, ngram=2)
    assert isinstance(stats, SpeculativeStats) and ids.shape == (1, 12 + 25)
    assert stats.new_tokens == 25 and 0 <= stats.accepted <= stats.drafted
    # Each pass after the prefill yields its accepted drafts plus one token; the prefill yields one.
    assert stats.new_tokens == stats.forwards + stats.accepted
    assert stats.tokens_per_forward == pytest.approx(25 / stats.forwards)
    assert stats.acceptance_rate == pytest.approx(stats.accepted / stats.drafted)
    assert 0 < stats.min_logit_gap < float("inf")
    # One (drafts, kept) pair per verify pass; alpha counts each checked draft: the kept ones and the first wrong one.
    assert len(stats.passes) == stats.forwards - 1
    assert sum(d for d, _ in stats.passes) == stats.drafted and sum(k for _, k in stats.passes) == stats.accepted
    rejections = sum(1 for d, k in stats.passes if k < d)
    assert 0 < rejections and stats.draft_acceptance == pytest.approx(stats.accepted / (stats.accepted + rejections))


def test_num_draft_zero_is_plain_greedy():
    prompt = torch.tensor([[2, 3, 4]])
    ids, stats = prompt_lookup_generate(BiasedTiny(1), prompt, 9, num_draft=0)
    assert torch.equal(ids, plain_greedy(BiasedTiny(1), prompt, 9))
    assert (stats.forwards, stats.drafted, stats.accepted, stats.tokens_per_forward) == (9, 0, 0, 1.0)


def test_zero_and_one_new_tokens():
    prompt = torch.tensor([[2, 3, 4, 3]])
    ids, stats = prompt_lookup_generate(BiasedTiny(0), prompt, 0)
    assert torch.equal(ids, prompt) and stats.forwards == 0 and stats.tokens_per_forward == 0.0
    ids, stats = prompt_lookup_generate(BiasedTiny(0), prompt, 1)
    assert torch.equal(ids, plain_greedy(BiasedTiny(0), prompt, 1)) and stats.forwards == 1 and stats.drafted == 0


@pytest.mark.parametrize(
    "tokens, ngram, num_draft, expected",
    [
        ([1, 2, 3, 9, 1, 2], 2, 3, [3, 9, 1]),  # "1 2" occurred at 0, followed by 3 9 1
        ([1, 2, 3, 1, 2, 4, 1, 2], 2, 2, [4, 1]),  # the LAST earlier occurrence wins
        ([5, 6, 5, 6, 5, 6], 2, 4, [5, 6]),  # overlapping the end: only what exists
        ([1, 2, 3, 4], 2, 3, []),  # "3 4" never occurred before
        ([7, 7], 2, 3, []),  # too short for an earlier bigram
        ([1, 2, 3, 1, 2], 2, 0, []),  # no drafts wanted
        ([4, 8, 4], 1, 2, [8, 4]),  # unigram lookup
    ],
)
def test_lookup_drafts(tokens, ngram, num_draft, expected):
    assert lookup_drafts(tokens, ngram, num_draft) == expected


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(input_ids=torch.tensor([2, 3])), r"shape \(1, seq_len\)"),
        (dict(input_ids=torch.tensor([[2.0, 3.0]])), "int64"),
        (dict(input_ids=torch.tensor([[2, 3], [2, 4]])), "once per sequence"),
        (dict(input_ids=torch.zeros(1, 0, dtype=torch.long)), "seq_len >= 1"),
        (dict(max_new_tokens=-1), "max_new_tokens must be an int >= 0"),
        (dict(max_new_tokens=2.0), "max_new_tokens must be an int >= 0"),
        (dict(num_draft=-1), "num_draft must be an int >= 0"),
        (dict(ngram=0), "ngram must be an int >= 1"),
        (dict(ngram=True), "ngram must be an int >= 1"),
    ],
)
def test_errors(kwargs, message):
    args = dict(input_ids=torch.tensor([[2, 3]]), max_new_tokens=3) | kwargs
    with pytest.raises(ValueError, match=message):
        prompt_lookup_generate(BiasedTiny(0), args.pop("input_ids"), args.pop("max_new_tokens"), **args)


def test_lookup_drafts_errors():
    with pytest.raises(ValueError, match="ngram must be an int >= 1"):
        lookup_drafts([1, 2], 0, 2)
    with pytest.raises(ValueError, match="num_draft must be an int >= 0"):
        lookup_drafts([1, 2], 1, -2)


# ----------------------------------------------------------------------------- the real model


@pytest.fixture(scope="module")
def gemma():
    return ac.load_gemma3()


REAL_PROMPTS = {
    # lookup helps: the continuation copies a sentence of the prompt
    "copy": (
        "Copy the sentence.\nSentence: The keeper climbed the hundred and twelve steps to the lamp room and wiped "
        "the lens.\nCopy: The keeper climbed"
    ),
    # lookup rarely helps: little to copy
    "prose": "The capital of France is Paris, and the capital of Germany is",
}
# How far float32 rounding can move a logit: 4·sqrt(2048)·u per stage (a sum of 2048 terms, 4 standard deviations
# of a random walk of roundings, u = 2^-24) over 20 stages (embedding, 18 blocks, output), times the largest
# |logit| (below 50 here): notebook 11's bound. A top-1/top-2 gap above it cannot be flipped by rounding.
ROUNDING_BOUND = 4 * 2048**0.5 * 2.0**-24 * 20 * 50  # ≈ 0.011


@pytest.mark.parametrize("name", list(REAL_PROMPTS))
def test_gemma_same_tokens_as_generate(gemma, name):
    """float32: one forward over 1 + k tokens rounds differently from k + 1 single-token forwards. The
    assertion is exact on these prompts; min_logit_gap shows how far from a tie each choice was."""
    ids = torch.tensor([gemma.encode(REAL_PROMPTS[name])])
    num_new = 10 if name == "copy" else 6
    reference = gemma.generate(ids, num_new)
    out, stats = prompt_lookup_generate(gemma, ids, num_new, num_draft=4, ngram=2)
    assert torch.equal(out, reference), (gemma.decode(out[0]), gemma.decode(reference[0]))
    assert stats.min_logit_gap > ROUNDING_BOUND  # every choice was clear of a near-tie
    if name == "copy":
        assert stats.tokens_per_forward > 2


def test_gemma_longer_than_the_window(gemma):
    """A 539-token prompt: every local layer's ring (512 + num_draft slots) has wrapped before the first
    rollback. Counting repeats digits, so drafts are accepted and rejected."""
    text = "Counting: " + ", ".join(str(n) for n in range(1, 130))
    ids = torch.tensor([gemma.encode(text)])
    assert ids.shape[1] > gemma.config.sliding_window + 8
    reference = gemma.generate(ids, 6)
    out, stats = prompt_lookup_generate(gemma, ids, 6, num_draft=4, ngram=2)
    assert torch.equal(out, reference), gemma.decode(out[0, ids.shape[1] :])
    assert stats.accepted > 0 and stats.forwards < 6 and stats.min_logit_gap > ROUNDING_BOUND


def test_lookup_drafts_takes_a_tensor_like_a_list():
    """A 1-D tensor used to work only for ngram=1 (its slices compared element-wise); a 2-D one is refused."""
    ids = [5, 6, 7, 5, 6, 9, 5, 6]
    for ngram in (1, 2, 3):
        assert lookup_drafts(torch.tensor(ids), ngram, 3) == lookup_drafts(ids, ngram, 3)
    assert lookup_drafts(torch.tensor(ids), 2, 3) == [9, 5, 6]
    with pytest.raises(ValueError, match=r"1-D integer tensor, got a tensor \(1, 8\).*ids\[0\]"):
        lookup_drafts(torch.tensor([ids]), 2, 3)
