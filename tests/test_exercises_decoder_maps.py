"""The checkers of ``attn_core.exercises.decoder_maps`` (notebooks 11 and 11b) accept right answers and name the
usual wrong ones.

For each checker: the stub fails, the reference passes (and equals Hugging Face's logits processors where one
exists), correct answers written differently pass, each usual mistake gets its own diagnosis (a phrase only that
diagnosis contains), junk gets one ❌ line.
"""

import pytest
import torch
from learner_answers import JUNK, one_red_line, stub, verdict

from attn_core.exercises import decoder_maps as ex


@pytest.mark.parametrize(
    "check, reference",
    [
        (ex.check_top_p, ex.top_p_filter),
        (ex.check_repetition_penalty, ex.repetition_penalty),
        (ex.check_first_token_share, ex.first_token_share),
    ],
)
def test_stub_fails_reference_passes(check, reference, capsys):
    assert not check(stub)
    assert "not attempted" in capsys.readouterr().out
    assert check(reference)
    assert "✅" in capsys.readouterr().out


# ----- top-p ---------------------------------------------------------------------------------------


def test_top_p_reference_matches_transformers():
    from transformers.generation.logits_process import TopPLogitsWarper

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 50, dtype=torch.float64, generator=g) * 2  # (B, vocab)
    for p in (0.3, 0.75, 0.95):
        warped = TopPLogitsWarper(p)(None, logits.clone())  # -inf on the removed tokens
        torch.testing.assert_close(ex.top_p_filter(logits.softmax(-1), p), warped.softmax(-1), rtol=0, atol=1e-12)


def top_p_loops(probs, p):
    out = torch.zeros_like(probs)
    for b, row in enumerate(probs):
        mass = 0.0
        for index in row.argsort(descending=True).tolist():
            if mass >= p:
                break
            out[b, index] = row[index]
            mass += float(row[index])
    return out / out.sum(-1, keepdim=True)


def top_p_ascending(probs, p):  # the tail of an ascending sort: everything whose mass from the top stays >= 1 - p
    sorted_probs, order = probs.sort(dim=-1)  # (B, vocab), ascending
    after = sorted_probs.flip(-1).cumsum(-1).flip(-1) - sorted_probs  # mass of the more likely tokens
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, after < p)
    return probs * keep / (probs * keep).sum(-1, keepdim=True)


def top_p_exclusive(probs, p):  # the mistake: cumsum < p drops the crossing token (an empty row when p_max > p)
    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, vocab)
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, sorted_probs.cumsum(-1) < p)
    return probs * keep / (probs * keep).sum(-1, keepdim=True)


def _nucleus_sorted(p_, p):
    return ex.top_p_filter(p_, p).sort(-1, descending=True).values


TOP_P_MISTAKES = {
    "did not renormalise": lambda p_, p: p_ * (ex.top_p_filter(p_, p) > 0),
    "dropped the token that crosses p": top_p_exclusive,
    "sorted order": _nucleus_sorted,
    "kept the tail": lambda p_, p: (lambda tail: p_ * tail / (p_ * tail).sum(-1, keepdim=True))(
        ex.top_p_filter(p_, p) == 0
    ),
    "returned a mask": lambda p_, p: ex.top_p_filter(p_, p) > 0,
    "keep the input's dtype": lambda p_, p: ex.top_p_filter(p_, p).to(torch.float16),
    "wrong numbers": lambda p_, p: p_,
}


@pytest.mark.parametrize("fn", [top_p_loops, top_p_ascending])
def test_top_p_variants(fn, capsys):
    assert ex.check_top_p(fn), capsys.readouterr().out


@pytest.mark.parametrize("phrase", list(TOP_P_MISTAKES))
def test_top_p_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_top_p, TOP_P_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


# ----- repetition penalty --------------------------------------------------------------------------


def test_repetition_penalty_matches_transformers():
    from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 50, dtype=torch.float64, generator=g) * 2  # (B, vocab)
    generated = torch.randint(0, 50, (3, 12), generator=g)  # (B, T), with repeats
    expected = RepetitionPenaltyLogitsProcessor(1.3)(generated, logits.clone())
    torch.testing.assert_close(ex.repetition_penalty(logits, generated, 1.3), expected, rtol=0, atol=0)


def penalty_loops(logits, generated, penalty):
    out = logits.clone()
    for b in range(logits.shape[0]):
        for token in set(generated[b].tolist()):
            value = logits[b, token]
            out[b, token] = value * penalty if value < 0 else value / penalty
    return out


def penalty_mask(logits, generated, penalty):
    seen = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, generated, True)  # (B, vocab)
    factor = torch.where(logits < 0, torch.full_like(logits, penalty), 1 / penalty)  # (B, vocab)
    return torch.where(seen, logits * factor, logits)


def _seen(logits, generated):
    return torch.zeros_like(logits, dtype=torch.bool).scatter(-1, generated, True)


def _signed(logits, penalty):
    return torch.where(logits < 0, logits * penalty, logits / penalty)


def _per_count(logits, generated, penalty):
    counts = torch.zeros_like(logits).scatter_add(-1, generated, torch.ones_like(generated, dtype=logits.dtype))
    return torch.where(logits < 0, logits * penalty**counts, logits / penalty**counts)


PENALTY_MISTAKES = {
    "negative logit divided": lambda z, g, r: torch.where(_seen(z, g), z / r, z),
    "once per occurrence": _per_count,
    "tokens of every row": lambda z, g, r: torch.where(_seen(z, g).any(0, keepdim=True), _signed(z, r), z),
    "penalised every token": lambda z, g, r: _signed(z, r),
    "more likely": lambda z, g, r: torch.where(_seen(z, g), torch.where(z < 0, z / r, z * r), z),
    "keep the input's dtype": lambda z, g, r: ex.repetition_penalty(z, g, r).double().float().half(),
    "wrong numbers": lambda z, g, r: z + 1,
}


@pytest.mark.parametrize("fn", [penalty_loops, penalty_mask])
def test_repetition_penalty_variants(fn, capsys):
    assert ex.check_repetition_penalty(fn), capsys.readouterr().out


@pytest.mark.parametrize("phrase", list(PENALTY_MISTAKES))
def test_repetition_penalty_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_repetition_penalty, PENALTY_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


def test_repetition_penalty_answer_may_modify_its_input(capsys):
    def in_place(logits, generated, penalty):
        seen = logits.gather(-1, generated)
        return logits.scatter_(-1, generated, torch.where(seen < 0, seen * penalty, seen / penalty))

    assert ex.check_repetition_penalty(in_place), capsys.readouterr().out


# ----- first-token share ---------------------------------------------------------------------------


def share_loops(weights):
    layers, heads, length, _ = weights.shape
    out = torch.zeros(layers, heads, dtype=weights.dtype)
    for layer in range(layers):
        for head in range(heads):
            out[layer, head] = sum(weights[layer, head, i, 0] for i in range(1, length)) / (length - 1)
    return out


def share_sum(weights):
    return weights[..., 1:, 0].sum(-1) / (weights.shape[-1] - 1)


SHARE_MISTAKES = {
    "query 0 included": lambda w: w[..., 0].mean(-1),
    "summed the weights": lambda w: w[..., 1:, 0].sum(-1),
    "read a row": lambda w: w[..., 0, 1:].mean(-1),
    "divided by L": lambda w: w[..., 1:, 0].sum(-1) / w.shape[-1],
    "the last key": lambda w: w[..., -1].mean(-1),
    "wrong shape": lambda w: w[..., 1:, 0],
    "keep the input's dtype": lambda w: ex.first_token_share(w).half(),
    "wrong numbers": lambda w: w[..., 1:, 1].mean(-1),
}


@pytest.mark.parametrize("fn", [share_loops, share_sum])
def test_first_token_share_variants(fn, capsys):
    assert ex.check_first_token_share(fn), capsys.readouterr().out


@pytest.mark.parametrize("phrase", list(SHARE_MISTAKES))
def test_first_token_share_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_first_token_share, SHARE_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


# ----- junk ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("check", [ex.check_top_p, ex.check_repetition_penalty, ex.check_first_token_share])
@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_junk_gets_one_red_line(check, junk, capsys):
    assert not check(lambda *args, **kwargs: junk)
    out = capsys.readouterr().out
    assert one_red_line(out), out
