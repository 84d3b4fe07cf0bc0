"""``check_sink_softmax`` (the interview gym's drills, issue #38): softmax with a learned sink logit per head.

The learner writes ``sink_softmax(scores, sinks) -> weights``: ``scores`` ``(H, Lq, Lk)`` (``-inf`` = masked),
``sinks`` ``(H,)`` one learned logit per head (gpt-oss). The sink joins the softmax's denominator and has no value, so
``weights = e^s / (Σ_j e^s_j + e^sink_h)`` and a row may sum to less than 1; a fully masked row gives zeros, not NaN.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attn_core.exercises import call_learner, feedback, never_raises
from attn_core.i18n import _

__all__ = ["check_sink_softmax"]


def _reference(scores: torch.Tensor, sinks: torch.Tensor) -> torch.Tensor:
    column = sinks[:, None, None].expand(*scores.shape[:-1], 1)  # (H, Lq, 1)
    return torch.softmax(torch.cat([scores, column], dim=-1), dim=-1)[..., :-1]  # (H, Lq, Lk)


def _case(scale: float):
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(2, 3, 4, generator=g, dtype=torch.float64) * scale  # (H, Lq, Lk)
    scores[1, 2] = float("-inf")  # head 1, query 2: every key masked
    sinks = torch.tensor([0.5, -1.0], dtype=torch.float64) * scale  # (H,)
    return scores, sinks


def _close(got: torch.Tensor, expected: torch.Tensor) -> bool:
    # weights <= 1 from a float32 answer: exp, a sum over Lk + 1 terms and one division, <= (Lk + 4)·eps32.
    return bool(((got - expected).abs() <= (expected.shape[-1] + 5) * torch.finfo(torch.float32).eps).all())


def _diagnose(weights: torch.Tensor, scores: torch.Tensor, sinks: torch.Tensor) -> str | None:
    expected = _reference(scores, sinks)
    finite_rows = torch.isfinite(scores).any(-1)  # (H, Lq)
    if torch.isnan(weights[finite_rows]).any():
        return _("NaN in the weights: exp overflowed. Subtract each row's max (over the scores and the sink) first.")
    if _close(weights[finite_rows], expected[finite_rows]):
        if _close(weights, expected):
            return None
        return _(
            "a fully masked row gives NaN: with a sink it must give zeros (the sink takes all the mass). "
            "Take the max over the scores *and* the sink, or softmax over the scores with the sink appended."
        )
    plain = torch.softmax(scores, dim=-1)
    if _close(weights[finite_rows], plain[finite_rows]):
        return _(
            "each row sums to 1: the sink never took its share. Add e^sink to the denominator: "
            "weights = e^s / (Σ e^s + e^sink)."
        )
    if _close(weights[finite_rows], _reference(scores, torch.exp(sinks))[finite_rows]):
        return _("the sink is a logit: it enters the denominator as e^sink, not e^(e^sink).")
    if _close(weights[finite_rows], _reference(scores, -sinks)[finite_rows]):
        return _("the sink's sign is flipped: the denominator gets e^(+sink).")
    shifted = torch.exp(scores - scores.amax(-1, keepdim=True))  # (H, Lq, Lk): max over the scores only
    unshifted_sink = shifted / (shifted.sum(-1, keepdim=True) + torch.exp(sinks)[:, None, None])
    if _close(weights[finite_rows], unshifted_sink[finite_rows]):
        return _(
            "you subtracted the row max from the scores but not from the sink: use e^(sink - m) in the denominator."
        )
    return _("the weights differ from e^s / (Σ_j e^s_j + e^sink) per head.")


@never_raises(_("check_sink_softmax"))
def check_sink_softmax(fn: Callable) -> bool:
    """``fn(scores (H, Lq, Lk), sinks (H,)) -> weights (H, Lq, Lk)``: softmax whose denominator has ``e^sink``."""
    name = _("check_sink_softmax")
    for scale in (1.0, 300.0):  # 300: logits whose exp overflows float64 without the max subtracted
        scores, sinks = _case(scale)
        weights, problem = call_learner(fn, scores.clone(), sinks.clone())
        if problem:
            return feedback(name, problem)
        try:
            array = weights.detach().numpy() if isinstance(weights, torch.Tensor) else weights
            weights = torch.as_tensor(np.asarray(array, dtype=float)).to(torch.float64)
        except (TypeError, ValueError):
            return feedback(name, _("return the weights as a tensor, got {type}.").format(type=type(weights).__name__))
        if tuple(weights.shape) == (*scores.shape[:-1], scores.shape[-1] + 1):
            return feedback(name, _("drop the sink's column: it has no value, return weights of shape (H, Lq, Lk)."))
        if weights.shape != scores.shape:
            return feedback(
                name, _("the weights must have the shape of scores {shape}.").format(shape=tuple(scores.shape))
            )
        problem = _diagnose(weights, scores, sinks)
        if problem:
            return feedback(name, problem)
    return feedback(name, None)
