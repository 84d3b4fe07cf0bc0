"""Choosing the next token (attn_core.models.generation): next_token_distribution against a from-scratch
temperature / top-k / top-p and against Hugging Face's logits warpers; ties at the cut; no-ops; sampling;
the decode loop; errors.

Everything is float64 (the function computes in float64 whatever the logits' dtype). Where the kept set depends
on whether a running sum of probabilities reaches top_p, a case within 1e-9 of the boundary is skipped with
`assume`: there the answer depends on summation order (a rounding, not a rule), and both sides are right.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from attn_core.models.generation import generate_tokens, next_token_distribution, sample_next

F64 = torch.float64


def from_scratch(logits: list[float], temperature: float, top_k: int | None, top_p: float | None) -> list[float]:
    """One row, plain Python: divide, keep the k largest (ties kept), softmax, keep the most likely tokens until
    their mass reaches top_p (every token as likely as the last one kept stays too), renormalise."""
    scaled = [value / temperature for value in logits]
    if top_k is not None and top_k < len(scaled):
        kth = sorted(scaled, reverse=True)[top_k - 1]
        scaled = [value if value >= kth else -math.inf for value in scaled]
    top = max(scaled)
    exps = [math.exp(value - top) for value in scaled]
    probs = [e / math.fsum(exps) for e in exps]
    if top_p is not None and top_p < 1:
        mass, threshold = 0.0, None
        for p in sorted(probs, reverse=True):
            mass = math.fsum([mass, p])
            if mass >= top_p:
                threshold = p
                break
        kept = [p if threshold is None or p >= threshold else 0.0 for p in probs]
        probs = [p / math.fsum(kept) for p in kept]
    return probs


def near_the_cut(probs: list[float], top_p: float | None) -> bool:
    """True when an exact partial sum of the sorted probabilities lies within 1e-9 of top_p."""
    if top_p is None:
        return False
    mass = Fraction(0)
    for p in sorted(probs, reverse=True):
        mass += Fraction(p)
        if abs(mass - Fraction(top_p)) < Fraction(1, 10**9):
            return True
    return False


logit_rows = st.lists(st.floats(-20, 20, allow_nan=False), min_size=1, max_size=12)
settings = dict(
    temperature=st.floats(0.05, 5.0),
    top_k=st.none() | st.integers(1, 14),
    top_p=st.none() | st.floats(0.01, 1.0),
)


@given(rows=st.lists(logit_rows, min_size=1, max_size=3), **settings)
def test_distribution_equals_from_scratch(rows, temperature, top_k, top_p):
    width = len(rows[0])
    rows = [(row * width)[:width] for row in rows]  # every row as wide as the first
    softmaxed = [from_scratch(row, temperature, top_k, None) for row in rows]
    assume(not any(near_the_cut(row, top_p) for row in softmaxed))
    logits = torch.tensor(rows, dtype=F64)  # (B, vocab)
    probs = next_token_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)  # (B, vocab)
    expected = torch.tensor([from_scratch(row, temperature, top_k, top_p) for row in rows], dtype=F64)
    assert probs.dtype == F64 and probs.shape == logits.shape
    torch.testing.assert_close(probs, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(probs.sum(-1), torch.ones(len(rows), dtype=F64), rtol=0, atol=1e-12)


@given(
    logits=st.lists(st.floats(-20, 20, allow_nan=False), min_size=2, max_size=12, unique=True),
    temperature=st.floats(0.05, 5.0),
    top_k=st.integers(1, 14),
    top_p=st.floats(0.01, 0.99),
)
def test_distribution_equals_hugging_face_warpers(logits, temperature, top_k, top_p):
    """HF's order is the same (temperature, top-k, top-p); HF drops ties at the cut, so the probabilities must
    all differ (by more than rounding) for the two to agree."""
    probs = sorted(from_scratch(logits, temperature, None, None))
    assume(all(b - a > 1e-9 for a, b in zip(probs, probs[1:], strict=False)))
    assume(not near_the_cut(from_scratch(logits, temperature, top_k, None), top_p))
    scores = torch.tensor([logits], dtype=F64)  # (1, vocab)
    for warper in (TemperatureLogitsWarper(temperature), TopKLogitsWarper(top_k), TopPLogitsWarper(top_p)):
        scores = warper(None, scores)
    expected = scores.softmax(-1)  # (1, vocab)
    probs = next_token_distribution(
        torch.tensor([logits], dtype=F64), temperature=temperature, top_k=top_k, top_p=top_p
    )
    assert torch.equal(probs > 0, expected > 0)
    torch.testing.assert_close(probs, expected, rtol=0, atol=1e-12)


def test_ties_at_the_cut_are_kept():
    logits = torch.tensor([[3.0, 1.0, 1.0, 1.0, 0.0]], dtype=F64)
    kept = next_token_distribution(logits, top_k=2) > 0  # the 2nd largest is tied three ways: all stay
    assert kept.tolist() == [[True, True, True, True, False]]
    even = torch.log(torch.tensor([[0.4, 0.2, 0.2, 0.2]], dtype=F64))
    # 0.4 + 0.2 reaches 0.5 with any one of the tied tokens: whichever the sort picks, all three stay
    assert (next_token_distribution(even, top_p=0.5) > 0).all()
    assert (next_token_distribution(even, top_p=0.3) > 0).tolist() == [[True, False, False, False]]
    # the permutation of tied tokens cannot matter
    permuted = even[:, [1, 0, 3, 2]]
    torch.testing.assert_close(
        next_token_distribution(permuted, top_p=0.5), next_token_distribution(even, top_p=0.5)[:, [1, 0, 3, 2]]
    )


def test_top_p_one_and_top_k_vocab_are_no_ops():
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0), dtype=F64)
    plain = next_token_distribution(logits, temperature=0.7)
    assert torch.equal(plain, (logits / 0.7).softmax(-1))
    for kwargs in (dict(top_p=1.0), dict(top_k=50), dict(top_k=51), dict(top_k=50, top_p=1.0)):
        assert torch.equal(next_token_distribution(logits, temperature=0.7, **kwargs), plain), kwargs


def test_the_most_likely_token_always_stays():
    logits = torch.tensor([[5.0, 0.0, 0.0], [0.0, 0.0, 9.0]], dtype=F64)
    probs = next_token_distribution(logits, top_p=1e-9)
    assert probs.tolist() == [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]


def test_float32_logits_give_float64_probabilities():
    logits = torch.randn(2, 7, generator=torch.Generator().manual_seed(1))
    probs = next_token_distribution(logits, top_k=3, top_p=0.8)
    assert probs.dtype == F64
    expected = torch.tensor([from_scratch(row, 1.0, 3, 0.8) for row in logits.double().tolist()], dtype=F64)
    torch.testing.assert_close(probs, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(temperature=0.0), "temperature must be > 0"),
        (dict(temperature=-1.0), "temperature must be a number >= 0"),
        (dict(temperature=float("nan")), "temperature must be a number >= 0"),
        (dict(temperature="hot"), "temperature must be a number >= 0"),
        (dict(top_k=0), "top_k must be None or an int >= 1"),
        (dict(top_k=-2), "top_k must be None or an int >= 1"),
        (dict(top_k=2.0), "top_k must be None or an int >= 1"),
        (dict(top_k=True), "top_k must be None or an int >= 1"),
        (dict(top_p=0.0), r"top_p must be None or in \(0, 1\]"),
        (dict(top_p=-0.1), r"top_p must be None or in \(0, 1\]"),
        (dict(top_p=1.5), r"top_p must be None or in \(0, 1\]"),
        (dict(top_p=float("nan")), r"top_p must be None or in \(0, 1\]"),
        (dict(top_p=True), r"top_p must be None or in \(0, 1\]"),
    ],
)
def test_bad_settings_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        next_token_distribution(torch.zeros(1, 4), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(temperature="hot"), "temperature must be a number >= 0"),  # was a raw TypeError
        (dict(temperature=-0.5), "temperature must be a number >= 0"),  # was treated as a draw, then refused
        (dict(temperature=0, top_k=0), "top_k must be None or an int >= 1"),  # greedy skipped every check
        (dict(temperature=0, top_p=2.0), r"top_p must be None or in \(0, 1\]"),
    ],
)
def test_sample_next_checks_its_settings_also_when_greedy(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sample_next(torch.zeros(1, 4), **kwargs)


# --------------------------------------------------------------------------- sampling and the decode loop
def test_greedy_is_argmax():
    logits = torch.randn(4, 30, generator=torch.Generator().manual_seed(2))
    assert torch.equal(sample_next(logits), logits.argmax(-1))
    assert torch.equal(sample_next(logits, temperature=0.0, top_k=5, top_p=0.5), logits.argmax(-1))
    assert torch.equal(sample_next(logits, temperature=2.0, top_k=1), logits.argmax(-1))  # one token left


def test_samples_follow_the_distribution():
    """20 000 draws: every frequency within 5 standard deviations of its probability; nothing outside the cut."""
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -9.0]], dtype=F64).expand(20_000, -1)
    generator = torch.Generator().manual_seed(3)
    draws = sample_next(logits, temperature=0.8, top_k=4, top_p=0.95, generator=generator)  # (20000,)
    probs = next_token_distribution(logits[:1], temperature=0.8, top_k=4, top_p=0.95)[0]  # (vocab,)
    counts = torch.bincount(draws, minlength=6).double() / 20_000  # (vocab,)
    sigma = (probs * (1 - probs) / 20_000).sqrt()  # (vocab,)
    assert ((counts - probs).abs() <= 5 * sigma + 1e-12).all(), (counts, probs)
    assert counts[probs == 0].sum() == 0
    again = sample_next(logits, temperature=0.8, top_k=4, top_p=0.95, generator=torch.Generator().manual_seed(3))
    assert torch.equal(draws, again)  # the generator decides everything


def test_generate_tokens_prefills_once_then_feeds_one_token():
    seen = []

    def next_logits(ids):  # a "model" that always prefers token (last id + 1) % 10
        seen.append(ids.clone())
        return torch.nn.functional.one_hot((ids[:, -1] + 1) % 10, 10).double()  # (B, vocab)

    prompt = torch.tensor([[3, 4], [8, 9]])
    out = generate_tokens(next_logits, prompt, 4)
    assert out.tolist() == [[3, 4, 5, 6, 7, 8], [8, 9, 0, 1, 2, 3]]
    assert [tuple(ids.shape) for ids in seen] == [(2, 2), (2, 1), (2, 1), (2, 1)]
    assert torch.equal(generate_tokens(next_logits, prompt, 0), prompt)


@pytest.mark.parametrize("max_new_tokens", [-1, 1.5, True, None])
def test_bad_max_new_tokens_raise(max_new_tokens):
    with pytest.raises(ValueError, match="max_new_tokens must be an int >= 0"):
        generate_tokens(lambda ids: torch.zeros(1, 3), torch.tensor([[1]]), max_new_tokens)


def test_empty_prompt_raises():
    with pytest.raises(ValueError, match="the prompt is empty"):
        generate_tokens(lambda ids: torch.zeros(1, 3), torch.zeros(1, 0, dtype=torch.long), 2)


@pytest.mark.parametrize("input_ids", [[[1, 2]], torch.tensor([1, 2]), torch.tensor([[1.0, 2.0]])])
def test_prompt_must_be_an_integer_tensor_b_by_l(input_ids):
    """A list (was an AttributeError), a 1-D tensor or float ids get one clear message with an example."""
    with pytest.raises(ValueError, match=r"input_ids must be an integer tensor \(B, L\).*torch.tensor\(\[\["):
        generate_tokens(lambda ids: torch.zeros(1, 3), input_ids, 2)
