"""Notebook 16's safe-softmax and RMSNorm drills: the checks accept right answers (float64 and float32) and name
each usual mistake (attn_core/exercises/handwrite_norms.py); every message has its Chinese translation."""

from __future__ import annotations

import re

import pytest
import torch
from learner_answers import stub, verdict

from attn_core import i18n
from attn_core.exercises import NOT_DONE
from attn_core.exercises.handwrite_norms import check_rms_norm, check_safe_softmax

# ----------------------------------------------------------------------------- safe softmax


def safe_softmax(scores, dim=-1):
    shifted = scores - scores.amax(dim=dim, keepdim=True)  # (..., L): every entry <= 0
    weights = shifted.exp()  # (..., L)
    return weights / weights.sum(dim=dim, keepdim=True)  # (..., L)


def safe_softmax_float32(scores, dim=-1):
    return safe_softmax(scores.float(), dim=dim)


def no_max(scores, dim=-1):
    return scores.exp() / scores.exp().sum(dim=dim, keepdim=True)


def global_max(scores, dim=-1):
    weights = (scores - scores.max()).exp()
    return weights / weights.sum(dim=dim, keepdim=True)


def last_dim_only(scores, dim=-1):
    return safe_softmax(scores, dim=-1)


def wrong_dim(scores, dim=-1):
    return safe_softmax(scores, dim=0)


def no_normalisation(scores, dim=-1):
    return (scores - scores.amax(dim=dim, keepdim=True)).exp()


def sums_only(scores, dim=-1):
    return safe_softmax(scores, dim=dim).sum(dim=dim)


@pytest.mark.parametrize("answer", [safe_softmax, safe_softmax_float32])
def test_safe_softmax_accepts_right_answers(answer, capsys) -> None:
    ok, out = verdict(check_safe_softmax, answer, capsys)
    assert ok and "correct" in out, out


@pytest.mark.parametrize(
    "answer, says",
    [
        (no_max, "exp overflowed"),
        (global_max, "not the max of the whole tensor"),
        (last_dim_only, "you ignored `dim`"),
        (wrong_dim, "do not sum to 1 along dim=-1"),
        (no_normalisation, "do not sum to 1"),
        (sums_only, "must keep the input's shape"),
        (stub, NOT_DONE),
        (None, NOT_DONE),
    ],
)
def test_safe_softmax_names_the_mistake(answer, says, capsys) -> None:
    ok, out = verdict(check_safe_softmax, answer, capsys)
    assert not ok and says in out, out


# ----------------------------------------------------------------------------- RMSNorm


def rms_norm(x, weight, eps=1e-6):
    return x / (x.pow(2).mean(dim=-1, keepdim=True) + eps).sqrt() * weight  # (..., d)


def rms_norm_float32(x, weight, eps=1e-6):
    return rms_norm(x.float(), weight.float(), eps)


def layer_norm(x, weight, eps=1e-6):
    centred = x - x.mean(-1, keepdim=True)
    return centred / (centred.pow(2).mean(-1, keepdim=True) + eps).sqrt() * weight


def summed(x, weight, eps=1e-6):
    return x / (x.pow(2).sum(-1, keepdim=True) + eps).sqrt() * weight


def eps_outside(x, weight, eps=1e-6):
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * weight


def no_eps(x, weight, eps=1e-6):
    return x / x.pow(2).mean(-1, keepdim=True).sqrt() * weight


def no_weight(x, weight, eps=1e-6):
    return x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt()


def gemma_form(x, weight, eps=1e-6):
    return rms_norm(x, 1 + weight, eps)


def batch_dim(x, weight, eps=1e-6):
    return x / (x.pow(2).mean(0, keepdim=True) + eps).sqrt() * weight


def flattened(x, weight, eps=1e-6):
    return rms_norm(x, weight, eps).flatten()


@pytest.mark.parametrize("answer", [rms_norm, rms_norm_float32])
def test_rms_norm_accepts_right_answers(answer, capsys) -> None:
    ok, out = verdict(check_rms_norm, answer, capsys)
    assert ok and "correct" in out, out


@pytest.mark.parametrize(
    "answer, says",
    [
        (layer_norm, "that is LayerNorm"),
        (summed, "sum of x², not its mean"),
        (eps_outside, "eps goes inside the square root"),
        (no_eps, "add eps inside the square root"),
        (no_weight, "multiply by `weight`"),
        (gemma_form, "Gemma's RMSNorm"),
        (batch_dim, "over the last dimension"),
        (flattened, "must keep the input's shape"),
        (stub, NOT_DONE),
    ],
)
def test_rms_norm_names_the_mistake(answer, says, capsys) -> None:
    ok, out = verdict(check_rms_norm, answer, capsys)
    assert not ok and says in out, out


def test_the_reference_is_the_formula() -> None:
    x, weight = torch.randn(2, 3, 8, dtype=torch.float64), torch.rand(8, dtype=torch.float64)  # (B, L, d), (d,)
    torch.testing.assert_close(
        torch.nn.functional.rms_norm(x, (8,), weight, 1e-6), rms_norm(x, weight), rtol=0, atol=1e-15
    )
    torch.testing.assert_close(torch.softmax(x, -1), safe_softmax(x), rtol=0, atol=1e-15)


@pytest.mark.parametrize("answer", [no_max, global_max, last_dim_only, wrong_dim, no_normalisation, sums_only])
def test_softmax_verdicts_have_chinese(answer, capsys) -> None:
    i18n.set_language("zh")
    try:
        check_safe_softmax(answer)
    finally:
        i18n.set_language("en")
    out = capsys.readouterr().out
    assert "❌" in out and re.search(r"[\u4e00-\u9fff]", out.split("：", 1)[1]), out  # the diagnosis in Chinese


@pytest.mark.parametrize(
    "answer", [layer_norm, summed, eps_outside, no_eps, no_weight, gemma_form, batch_dim, flattened]
)
def test_rms_verdicts_have_chinese(answer, capsys) -> None:
    i18n.set_language("zh")
    try:
        check_rms_norm(answer)
    finally:
        i18n.set_language("en")
    out = capsys.readouterr().out
    assert "❌" in out and re.search(r"[\u4e00-\u9fff]", out.split("：", 1)[1]), out  # the diagnosis in Chinese
