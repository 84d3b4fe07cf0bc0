"""The interview gym's new hand-write drills (issue #38): each grader rejects plausible wrong answers with the right
diagnosis and accepts equivalent correct ones (numpy, other dtypes, other formulations)."""

import numpy as np
import pytest
import torch

from attn_core.exercises.drills_speculative import check_speculative_verify


def _residual(p, q):
    excess = (p - q).clamp(min=0)
    return excess / excess.sum()


def right(p, q):
    return torch.clamp(p / q, max=1.0), _residual(p, q)


SPECULATIVE_WRONG = {
    "ratio not clipped": (lambda p, q: (p / q, _residual(p, q)), "exceeds 1"),
    "inverted ratio": (lambda p, q: (torch.clamp(q / p, max=1.0), _residual(p, q)), "inverted"),
    "accept = p": (lambda p, q: (p, _residual(p, q)), "is p(x) itself"),
    "always accept": (lambda p, q: (torch.ones_like(p), _residual(p, q)), "is 1 everywhere"),
    "accept = p - q": (lambda p, q: ((p - q).clamp(min=0), _residual(p, q)), "differs from min(1, p(x)/q(x))"),
    "residual = p": (lambda p, q: (right(p, q)[0], p), "resample from p"),
    "residual = q": (lambda p, q: (right(p, q)[0], q), "from the draft q"),
    "residual not normalised": (lambda p, q: (right(p, q)[0], (p - q).clamp(min=0)), "must be normalised"),
    "residual flipped": (lambda p, q: (right(p, q)[0], _residual(q, p)), "flipped"),
    "residual |p - q|": (lambda p, q: (right(p, q)[0], (p - q).abs() / (p - q).abs().sum()), "|p - q|"),
    "residual p - q unclamped": (lambda p, q: (right(p, q)[0], (p - q) / (p - q).sum()), "negative entries"),
    "one value returned": (lambda p, q: torch.clamp(p / q, max=1.0), "return a pair"),
    "wrong shape": (lambda p, q: (right(p, q)[0][None], right(p, q)[1]), "shape"),
    "stub": (lambda p, q: None, None),
}


@pytest.mark.parametrize("name", list(SPECULATIVE_WRONG))
def test_speculative_verify_rejects_with_the_diagnosis(name, capsys):
    fn, diagnosis = SPECULATIVE_WRONG[name]
    assert check_speculative_verify(fn) is False
    out = capsys.readouterr().out
    assert "❌" in out
    if diagnosis:
        assert diagnosis in out, out


SPECULATIVE_RIGHT = {
    "torch": right,
    "numpy": lambda p, q: (
        np.minimum(1.0, p.numpy() / np.where(q.numpy() > 0, q.numpy(), 1.0)),
        np.maximum(p.numpy() - q.numpy(), 0) / np.maximum(p.numpy() - q.numpy(), 0).sum(),
    ),
    "float32 and torch.where": lambda p, q: (
        torch.where(q > 0, torch.minimum(torch.ones_like(p), p / q), torch.zeros_like(p)).float(),
        _residual(p, q).float(),
    ),
    "lists, via 1 - min(p, q) total": lambda p, q: (
        [min(1.0, a / b) if b > 0 else 1.0 for a, b in zip(p.tolist(), q.tolist(), strict=True)],
        ((p - torch.minimum(p, q)) / (1 - torch.minimum(p, q).sum())).tolist(),
    ),
}


@pytest.mark.parametrize("name", list(SPECULATIVE_RIGHT))
def test_speculative_verify_accepts_correct_variants(name, capsys):
    assert check_speculative_verify(SPECULATIVE_RIGHT[name]) is True, capsys.readouterr().out


def test_speculative_verdicts_read_in_chinese(capsys):
    import attn_core as ac

    ac.set_language("zh")
    try:
        check_speculative_verify(SPECULATIVE_WRONG["residual flipped"][0])
        check_speculative_verify(right)
    finally:
        ac.set_language("en")
    out = capsys.readouterr().out
    assert "残差写反了" in out and "❌" in out and "✅" in out
