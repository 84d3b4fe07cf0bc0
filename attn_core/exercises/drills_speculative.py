"""``check_speculative_verify`` (the interview gym's drills, issue #38): speculative decoding's accept/reject step.

The learner writes ``verify(p, q) -> (accept, residual)`` for one position: ``p`` the target's and ``q`` the draft's
next-token probabilities (``(V,)`` each). ``accept[x] = min(1, p(x)/q(x))`` is the chance to keep a drafted ``x``;
``residual = max(0, p - q) / sum(max(0, p - q))`` is what to sample from after a rejection (Leviathan et al. 2023,
Chen et al. 2023). The check is against the exact distribution of the emitted token,
``q(x) accept(x) + (1 - sum_y q(y) accept(y)) residual(x) = p(x)``, and names the usual mistakes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attn_core.exercises import call_learner, feedback, never_raises
from attn_core.i18n import _

__all__ = ["check_speculative_verify"]

_EPS32 = torch.finfo(torch.float32).eps
# (V,) probabilities; q has a zero (the draft never proposes token 4) and p has one (token 5 is impossible).
_CASES = (
    ((0.40, 0.25, 0.15, 0.10, 0.10, 0.00), (0.20, 0.30, 0.30, 0.10, 0.00, 0.10)),
    ((0.05, 0.05, 0.60, 0.30), (0.25, 0.25, 0.25, 0.25)),
)


def _tolerance(vocab: int) -> float:
    # A float32 answer: each accept(x) is one division and one min (<= 2 roundings of eps/2 on a value <= 1); the
    # residual's normaliser sums V terms (<= V roundings), then one division: <= (V + 4)·eps32 covers both.
    return (vocab + 4) * _EPS32


def _as_vector(value, vocab: int) -> torch.Tensor | None:
    try:
        tensor = torch.as_tensor(np.asarray(value.detach() if isinstance(value, torch.Tensor) else value, dtype=float))
    except (TypeError, ValueError):
        return None
    return tensor.to(torch.float64) if tuple(tensor.shape) == (vocab,) else None


def _max_error(got: torch.Tensor, expected: torch.Tensor, where: torch.Tensor) -> float:
    return float((got - expected).abs()[where].max()) if where.any() else 0.0


def _accept_problem(accept: torch.Tensor, p: torch.Tensor, q: torch.Tensor, tol: float) -> str | None:
    proposed = q > 0  # accept(x) only matters where the draft can propose x
    if not torch.isfinite(accept[proposed]).all():
        return _("accept has NaN or inf where q(x) > 0: accept = min(1, p(x)/q(x)) is finite wherever q(x) > 0.")
    expected = torch.clamp(p / q.clamp(min=1e-300), max=1.0)
    if _max_error(accept, expected, proposed) <= tol:
        return None
    if accept[proposed].max() > 1 + tol:
        return _(
            "accept(x) exceeds 1 (max {max}): it is a probability, min(1, p(x)/q(x)), not the ratio p(x)/q(x)."
        ).format(max=f"{float(accept[proposed].max()):.3g}")
    both = proposed & (p > 0)
    if _max_error(accept, torch.clamp(q / p.clamp(min=1e-300), max=1.0), both) <= tol:
        return _(
            "accept is inverted: min(1, q(x)/p(x)) keeps the tokens the draft over-proposes. "
            "Keep x with probability min(1, p(x)/q(x))."
        )
    if _max_error(accept, p, proposed) <= tol:
        return _("accept is p(x) itself: the test compares target and draft, accept = min(1, p(x)/q(x)).")
    if _max_error(accept, torch.ones_like(p), proposed) <= tol:
        return _("accept is 1 everywhere: every drafted token is kept, so the output follows the draft q, not p.")
    return _("accept differs from min(1, p(x)/q(x)) by up to {error}.").format(
        error=f"{_max_error(accept, expected, proposed):.3g}"
    )


def _residual_problem(residual: torch.Tensor, p: torch.Tensor, q: torch.Tensor, tol: float) -> str | None:
    if not torch.isfinite(residual).all():
        return _("the residual has NaN or inf: normalise max(0, p - q) by its sum, which is > 0 whenever p ≠ q.")
    if residual.min() < -tol:
        return _(
            "the residual has negative entries: it is a distribution. Clamp p - q at 0 before normalising: "
            "max(0, p - q) / sum(max(0, p - q))."
        )
    excess = (p - q).clamp(min=0)
    expected = excess / excess.sum()
    everywhere = torch.ones_like(p, dtype=torch.bool)
    if _max_error(residual, expected, everywhere) <= tol:
        return None

    def normalised(x: torch.Tensor) -> torch.Tensor:
        return x / x.sum()

    if _max_error(residual, excess, everywhere) <= tol:
        return _("the residual max(0, p - q) must be normalised to sum to 1 (yours sums to {total}).").format(
            total=f"{float(residual.sum()):.3g}"
        )
    if _max_error(residual, p, everywhere) <= tol:
        return _(
            "after a rejection you resample from p: tokens the draft already proposed get counted twice. "
            "Resample from max(0, p - q), normalised."
        )
    if _max_error(residual, q, everywhere) <= tol:
        return _("after a rejection you resample from the draft q: resample from max(0, p - q), normalised.")
    if _max_error(residual, normalised((q - p).clamp(min=0)), everywhere) <= tol:
        return _(
            "the residual is flipped: max(0, q - p) favours the tokens the draft over-proposes; "
            "use max(0, p - q), normalised."
        )
    if _max_error(residual, normalised((p - q).abs()), everywhere) <= tol:
        return _("|p - q| also puts mass where q > p: the residual is max(0, p - q) (clamped at 0), normalised.")
    return _("the residual differs from max(0, p - q) / sum(max(0, p - q)) by up to {error}.").format(
        error=f"{_max_error(residual, expected, everywhere):.3g}"
    )


@never_raises(_("check_speculative_verify"))
def check_speculative_verify(fn: Callable) -> bool:
    """``fn(p, q) -> (accept, residual)``, both ``(V,)``: ``accept = min(1, p/q)`` and
    ``residual = max(0, p - q)`` normalised; together they emit exactly the target's distribution ``p``."""
    name = _("check_speculative_verify")
    for p_values, q_values in _CASES:
        p, q = torch.tensor(p_values, dtype=torch.float64), torch.tensor(q_values, dtype=torch.float64)
        vocab, tol = len(p_values), _tolerance(len(p_values))
        result, problem = call_learner(fn, p.clone(), q.clone())
        if problem:
            return feedback(name, problem)
        if not isinstance(result, tuple | list) or len(result) != 2:
            return feedback(name, _("return a pair (accept, residual), got {type}.").format(type=type(result).__name__))
        accept, residual = (_as_vector(part, vocab) for part in result)
        if accept is None or residual is None:
            return feedback(
                name, _("accept and residual must each be a vector of shape ({vocab},) like p.").format(vocab=vocab)
            )
        problem = _accept_problem(accept, p, q, tol) or _residual_problem(residual, p, q, tol)
        if problem:
            return feedback(name, problem)
        kept = torch.where(q > 0, q * accept, torch.zeros_like(q))  # (V,): P(draft says x and x is kept)
        emitted = kept + (1 - kept.sum()) * residual  # (V,): the exact distribution of the emitted token
        if (emitted - p).abs().max() > 2 * tol:
            return feedback(
                name,
                _("the emitted token is not distributed as p (off by {error}).").format(
                    error=f"{float((emitted - p).abs().max()):.3g}"
                ),
            )
    return feedback(name, None)
