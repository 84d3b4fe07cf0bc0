"""Checks for notebook 16's two short drills Chinese interview lists ask for: a safe softmax and RMSNorm.

- ``check_safe_softmax(fn)``: ``fn(scores, dim=-1) -> weights``, the softmax along ``dim`` written from
  ``exp`` and ``sum``, safe for large scores. Diagnoses an overflow (no max subtracted), the max of the whole
  tensor instead of each row's (a row far below it underflows to 0/0), the wrong dimension, ``dim`` ignored,
  a wrong shape, else the largest error.
- ``check_rms_norm(fn)``: ``fn(x, weight, eps=1e-6) -> x / sqrt(mean(x², -1) + eps) * weight``. Diagnoses the
  mean subtracted (LayerNorm), the sum instead of the mean, eps outside the square root, no eps (an all-zero
  row gives 0/0), the weight missing or used as ``1 + weight`` (Gemma's form), the wrong dimension, a wrong
  shape, else the largest error.

Both compare against torch (``torch.softmax``, ``torch.nn.functional.rms_norm``) in float64. A float64 answer is
exact to ~1e-15: the checks allow 1e-10. A float32 answer gets 1e-4: casting a score near 1000 to float32 already
moves it by up to half an ulp, 3.05e-5, and a weight by at most twice that; RMSNorm's outputs (|y| < 5, d = 8) are
within ~1e-6. Every diagnosed mistake is off by more than 1e-3.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from attn_core.exercises import call_learner, feedback, never_raises
from attn_core.i18n import _

__all__ = ["check_safe_softmax", "check_rms_norm"]

_F64 = torch.float64
_ATOL = {torch.float64: 1e-10, torch.float32: 1e-4}  # derived in the module docstring


def _close(result, expected) -> bool:
    return (
        isinstance(result, torch.Tensor)
        and result.shape == expected.shape
        and result.dtype in _ATOL
        and bool(torch.isfinite(result).all())
        and torch.allclose(result.to(_F64), expected, rtol=0, atol=_ATOL[result.dtype])
    )


def _shape_problem(result, expected, what: str) -> str | None:
    if not isinstance(result, torch.Tensor):
        return _("return {what} as a tensor of shape {shape}, got {type}.").format(
            what=what, shape=tuple(expected.shape), type=type(result).__name__
        )
    if result.shape != expected.shape:
        return _("{what} must keep the input's shape {shape}, got {got}.").format(
            what=what, shape=tuple(expected.shape), got=tuple(result.shape)
        )
    return None


# =============================================================================== check_safe_softmax


def _softmax_cases() -> list[tuple[torch.Tensor, int]]:
    generator = torch.Generator().manual_seed(0)
    small = torch.randn(2, 3, 5, generator=generator, dtype=_F64)  # (B, Lq, Lk)
    return [(small, -1), (small, 1)]


def _large_scores() -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(2, 4, generator=generator, dtype=_F64) * 3 + 1000.0  # (rows, Lk): exp(1000) overflows


def _far_apart_rows() -> torch.Tensor:
    generator = torch.Generator().manual_seed(2)
    rows = torch.randn(2, 4, generator=generator, dtype=_F64)  # (rows, Lk)
    rows[1] += 1000.0  # row 0 sits 1000 below row 1: exp(row 0 - global max) underflows to 0
    return rows


@never_raises(_("check_safe_softmax"))
def check_safe_softmax(fn: Callable) -> bool:
    """``fn(scores, dim=-1) -> weights``: softmax along ``dim`` from ``exp`` and ``sum``, safe for large scores."""
    name = _("check_safe_softmax")
    for scores, dim in _softmax_cases():
        expected = torch.softmax(scores, dim=dim)
        result, problem = call_learner(fn, scores.clone(), dim=dim)
        if problem:
            return feedback(name, problem)
        problem = _shape_problem(result, expected, _("the weights"))
        if problem:
            return feedback(name, problem)
        if _close(result, expected):
            continue
        if dim != -1 and _close(result, torch.softmax(scores, dim=-1)):
            return feedback(
                name,
                _("you ignored `dim`: with dim={dim} the weights must sum to 1 along dim {again}.").format(
                    dim=dim, again=dim
                ),
            )
        sums = result.to(_F64).sum(dim=dim)
        if not torch.allclose(sums, torch.ones_like(sums), atol=1e-6):
            return feedback(
                name, _("the weights do not sum to 1 along dim={dim}: normalise over that dimension.").format(dim=dim)
            )
        error = (result.to(_F64) - expected).abs().max().item()
        return feedback(
            name,
            _("the weights differ from torch.softmax by up to {error} (dim={dim}).").format(
                error=f"{error:.2e}", dim=dim
            ),
        )
    large = _large_scores()
    result, problem = call_learner(fn, large.clone(), dim=-1)
    if problem:
        return feedback(name, problem)
    if not bool(torch.isfinite(result).all()):
        return feedback(
            name,
            _(
                "NaN or inf for scores near 1000: exp overflowed. Subtract each row's max before exp "
                "(softmax(s) = softmax(s - max(s)), and exp(s - max) <= 1)."
            ),
        )
    if not _close(result, torch.softmax(large, dim=-1)):
        error = (result.to(_F64) - torch.softmax(large, dim=-1)).abs().max().item()
        return feedback(
            name,
            _("for scores near 1000 the weights differ from torch.softmax by up to {error}.").format(
                error=f"{error:.2e}"
            ),
        )
    apart = _far_apart_rows()
    result, problem = call_learner(fn, apart.clone(), dim=-1)
    if problem:
        return feedback(name, problem)
    if not _close(result, torch.softmax(apart, dim=-1)):
        return feedback(
            name,
            _(
                "a row 1000 below another one gives NaN or wrong weights: subtract the max of each row "
                "(amax(dim, keepdim=True)), not the max of the whole tensor, whose exp underflows to 0/0 there."
            ),
        )
    return feedback(name, None)


# =============================================================================== check_rms_norm


def _rms_variants(x: torch.Tensor, weight: torch.Tensor, eps: float) -> dict[str, torch.Tensor]:
    """The usual wrong answers, computed here so the check can name the one it sees."""
    mean_square = x.pow(2).mean(-1, keepdim=True)  # (..., 1)
    centred = x - x.mean(-1, keepdim=True)  # (..., d)
    return {
        "layer norm": centred / (centred.pow(2).mean(-1, keepdim=True) + eps).sqrt() * weight,
        "sum": x / (x.pow(2).sum(-1, keepdim=True) + eps).sqrt() * weight,
        "eps outside": x / (mean_square.sqrt() + eps) * weight,
        "no eps": x / mean_square.sqrt() * weight,
        "no weight": x / (mean_square + eps).sqrt(),
        "one plus weight": x / (mean_square + eps).sqrt() * (1 + weight),
        "wrong dim": x / (x.pow(2).mean(0, keepdim=True) + eps).sqrt() * weight,
    }


_RMS_MISTAKES = {
    "layer norm": _("you subtracted the mean: that is LayerNorm. RMSNorm only divides by sqrt(mean(x²) + eps)."),
    "sum": _("you used the sum of x², not its mean: the result is √d times too small."),
    "eps outside": _("eps goes inside the square root: x / sqrt(mean(x²) + eps), not x / (sqrt(mean(x²)) + eps)."),
    "no eps": _("add eps inside the square root: without it a quiet token is over-amplified and a zero one gives 0/0."),
    "no weight": _("multiply by `weight`, the learned per-feature scale."),
    "one plus weight": _(
        "you multiplied by (1 + weight): that is Gemma's RMSNorm; the usual one multiplies by weight."
    ),
    "wrong dim": _("take the mean over the last dimension (the features of each token), not over the batch."),
}


@never_raises(_("check_rms_norm"))
def check_rms_norm(fn: Callable) -> bool:
    """``fn(x, weight, eps=1e-6) -> x / sqrt(mean(x², dim=-1, keepdim=True) + eps) * weight``."""
    name = _("check_rms_norm")
    generator = torch.Generator().manual_seed(3)
    eps = 1e-6
    x = torch.randn(2, 3, 8, generator=generator, dtype=_F64)  # (B, L, d)
    x[0, 0] *= 1e-3  # a quiet token: eps inside or outside the root differ here
    weight = torch.rand(8, generator=generator, dtype=_F64) + 0.5  # (d,)
    expected = F.rms_norm(x, (8,), weight, eps)  # (B, L, d)
    result, problem = call_learner(fn, x.clone(), weight.clone(), eps=eps)
    if problem:
        return feedback(name, problem)
    problem = _shape_problem(result, expected, _("the normalised x"))
    if problem:
        return feedback(name, problem)
    if not _close(result, expected):
        for mistake, wrong in _rms_variants(x, weight, eps).items():
            if _close(result, wrong):
                return feedback(name, _RMS_MISTAKES[mistake])
        error = (result.to(_F64) - expected).abs().max().item()
        return feedback(
            name,
            _("the result differs from torch.nn.functional.rms_norm by up to {error}.").format(error=f"{error:.2e}"),
        )
    zeros = torch.zeros(1, 8, dtype=_F64)  # (1, d): an all-zero token (padding)
    result, problem = call_learner(fn, zeros.clone(), weight.clone(), eps=eps)
    if problem:
        return feedback(name, problem)
    if not _close(result, torch.zeros(1, 8, dtype=_F64)):
        return feedback(name, _("an all-zero row gives NaN: add eps inside the square root (0 / sqrt(0 + eps) = 0)."))
    return feedback(name, None)
