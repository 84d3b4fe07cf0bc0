"""``check_sdpa`` (notebook 16): scaled dot-product attention from a blank cell, and its usual mistakes.

See :mod:`attn_core.exercises.handwrite` for what each check diagnoses.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from attn_core import i18n
from attn_core.attention import scaled_dot_product_attention
from attn_core.exercises import NOT_DONE, call_learner, feedback, never_raises
from attn_core.exercises.handwrite_common import _DROPOUT_ON, _F64, _RTOL, _close, _is_random, _pair, _shape, _worst
from attn_core.masks import causal_mask, padding_mask

__all__ = ["check_sdpa"]


def _sdpa_reference(q, k, v, mask, scale):
    return scaled_dot_product_attention(q, k, v, mask, scale=scale)  # (..., Lq, Dv), (..., Lq, Lk)


def _sdpa_cases():
    gen = torch.Generator().manual_seed(0)

    def rand(*shape, std=1.0):
        return std * torch.randn(*shape, generator=gen, dtype=_F64)

    cases = []
    # (B, Lq, D) with Lq ≠ Lk: a transposed result has the wrong shape. std 2 makes a wrong scale obvious.
    cases.append(
        ("q (2, 3, 8), k/v (2, 5, 8), no mask", rand(2, 3, 8, std=2), rand(2, 5, 8, std=2), rand(2, 5, 8), None)
    )
    # (B, H, L, D), square: transposed weights keep their shape here, only the numbers catch them.
    q, k, v = rand(2, 3, 4, 16, std=2), rand(2, 3, 4, 16, std=2), rand(2, 3, 4, 6)
    cases.append(("q/k (2, 3, 4, 16), v (2, 3, 4, 6), no mask", q, k, v, None))
    # causal mask, Lq ≠ Lk, bottom-right aligned (2-D mask broadcast over batch and heads)
    q, k, v = rand(2, 2, 3, 8, std=2), rand(2, 2, 5, 8, std=2), rand(2, 2, 5, 8)
    cases.append(("q (2, 2, 3, 8), k/v (2, 2, 5, 8), causal mask (3, 5)", q, k, v, causal_mask(3, 5)))
    # per-sequence padding mask (B, 1, 1, Lk)
    q, k, v = rand(2, 2, 4, 8, std=2), rand(2, 2, 4, 8, std=2), rand(2, 2, 4, 8)
    cases.append(("q/k/v (2, 2, 4, 8), padding mask (2, 1, 1, 4) for lengths [4, 2]", q, k, v, padding_mask([4, 2], 4)))
    return cases


def _fully_masked_case():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 4, 8, generator=gen, dtype=_F64) for _ in range(3))  # (B, H, L, D)
    mask = causal_mask(4) & torch.tensor([True, False, True, True]).unsqueeze(-1)  # (4, 4): query 1 sees nothing
    return q, k, v, mask


def _sdpa_problem(fn, label, q, k, v, mask) -> str | None:
    where = f"[{label}]"
    args = (q.clone(), k.clone(), v.clone())
    result, problem = call_learner(fn, *args) if mask is None else call_learner(fn, *args, mask=mask.clone())
    if problem:
        return problem if problem == NOT_DONE or problem.startswith("pass the function") else f"{where} {problem}"
    pair, problem = _pair(result, "your function")
    if problem:
        return f"{where} {problem}"
    out, weights = pair
    d_k = q.shape[-1]
    expected_out, expected_w = _sdpa_reference(q, k, v, mask, 1 / math.sqrt(d_k))
    lq, lk = q.shape[-2], k.shape[-2]
    if out.shape == expected_w.shape and weights.shape == expected_out.shape and out.shape != weights.shape:
        return (
            f"{where} did you return (weights, out)? Your first tensor has the weights' shape (..., Lq, Lk) = "
            f"{tuple(expected_w.shape)}: return (out, weights), out first."
        )
    if weights.shape != expected_w.shape:
        if lq != lk and weights.shape == expected_w.transpose(-2, -1).shape:
            return (
                f"{where} weights have shape {_shape(weights)} = (..., Lk, Lq): transposed. The scores are "
                "Q Kᵀ = q @ k.transpose(-2, -1), one row per query, one column per key."
            )
        return f"{where} weights should have shape (..., Lq, Lk) = {tuple(expected_w.shape)}, got {_shape(weights)}."
    if out.shape != expected_out.shape:
        return (
            f"{where} out should have shape (..., Lq, Dv) = {tuple(expected_out.shape)}, got {_shape(out)}: "
            "out = weights @ v, one mixed value vector per query."
        )
    if _close(weights, expected_w) and _close(out, expected_out):
        return None
    if _is_random(fn, args, {} if mask is None else {"mask": mask}):
        return f"{where} {_DROPOUT_ON}"
    if _close(weights, expected_w):
        return f"{where} the weights are right but out is not ({_worst(out, expected_out)}): out = weights @ v."
    return f"{where} " + _sdpa_diagnosis(weights.to(_F64), q, k, v, mask, expected_w)


def _sdpa_diagnosis(weights, q, k, v, mask, expected_w) -> str:
    d_k = q.shape[-1]
    if q.shape[-2] == k.shape[-2] and mask is None:
        swapped = torch.softmax(k @ q.transpose(-2, -1) / math.sqrt(d_k), dim=-1)  # (..., Lk, Lq)
        if _close(weights, expected_w.transpose(-2, -1)) or _close(weights, swapped):
            return (
                "the weights are transposed: weights[..., i, j] must be how much query i attends to key j. "
                "Use q @ k.transpose(-2, -1), not k @ q.transpose(-2, -1)."
            )
    row_sums = weights.sum(-1)  # (..., Lq)
    col_sums = weights.sum(-2)  # (..., Lk)
    if not torch.allclose(row_sums, torch.ones_like(row_sums), atol=1e-6):
        if torch.allclose(col_sums, torch.ones_like(col_sums), atol=1e-6):
            return (
                "softmax over the wrong dim: your columns sum to 1, not your rows. Each query spreads one unit "
                "of attention over the keys: torch.softmax(scores, dim=-1)."
            )
    if mask is not None:
        unmasked = _sdpa_reference(q, k, v, None, 1 / math.sqrt(d_k))[1]  # (..., Lq, Lk)
        if _close(weights, unmasked):
            return "the mask is ignored: scores where the mask is False must be filled with -inf before the softmax."
        if _close(weights, unmasked * mask):
            return (
                "you applied the mask after the softmax: the blocked weights are zeroed, but the remaining ones "
                "no longer sum to 1 (the blocked keys still took their share). Fill the blocked *scores* with "
                "-inf before the softmax: scores.masked_fill(~mask, float('-inf')), then softmax."
            )
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)
        if _close(weights, torch.softmax(scores + mask.to(_F64), dim=-1)):
            return (
                "you added the mask to the scores as numbers (True -> +1, False -> 0): a blocked key only loses "
                "1 from its score and keeps most of its weight. A boolean mask selects: "
                "scores.masked_fill(~mask, float('-inf')) (an additive mask would hold 0 and -inf)."
            )
        flipped = ~mask
        sees = mask.any(-1) & flipped.any(-1)  # rows with visible keys under both conventions
        sees = sees.expand(expected_w.shape[:-1])  # (..., Lq)
        candidate = _sdpa_reference(q, k, v, flipped, 1 / math.sqrt(d_k))[1]
        if sees.any() and torch.allclose(weights[sees], candidate[sees], rtol=_RTOL, atol=1e-7):
            return (
                "the mask convention is flipped: you blocked the True positions. Here True = may attend "
                "(as in F.scaled_dot_product_attention), so fill where the mask is False: "
                "scores.masked_fill(~mask, float('-inf'))."
            )
    if torch.isnan(weights).any():
        return (
            "the weights contain NaN on rows that do see some key. Fill blocked scores with a large negative "
            "number (or -inf) *before* the softmax, and never where the mask is True."
        )
    scales = {
        "no scale: divide the scores by √d_k before the softmax.": 1.0,
        f"you divided by d_k = {d_k}; divide by √d_k = √{d_k} (math.sqrt(q.size(-1))).": 1 / d_k,
        "you multiplied by √d_k; divide by it.": math.sqrt(d_k),
    }
    d_v = v.shape[-1]
    if d_v != d_k:
        scales[
            f"you divided by √d_v = √{d_v} (the last dim of v); the scale belongs to the dot products q·k: "
            f"√d_k = √{d_k} (the last dim of q)."
        ] = 1 / math.sqrt(d_v)
    if q.ndim >= 4:
        d_model = q.shape[-3] * d_k
        scales[
            f"you scaled by √d_model = √(heads·d_k) = √{d_model}; the scale is per head: √d_k = √{d_k} "
            "(the last dim of q)."
        ] = 1 / math.sqrt(d_model)
    for message, scale in scales.items():
        if _close(weights, _sdpa_reference(q, k, v, mask, scale)[1]):
            return message
    return f"the weights differ from softmax(Q Kᵀ / √d_k) with the mask applied ({_worst(weights, expected_w)})."


@never_raises("check_sdpa")
def check_sdpa(fn: Callable) -> bool:
    """``fn(q, k, v, mask=None) -> (out, weights)``: scaled dot-product attention from scratch.

    q ``(..., Lq, d_k)``, k ``(..., Lk, d_k)``, v ``(..., Lk, d_v)``; ``mask`` boolean, True = may
    attend, broadcastable to ``(..., Lq, Lk)``. Graded on 3-D and 4-D inputs, Lq ≠ Lk, a causal
    and a padding mask; a fully masked row is an optional extra (NaN there only earns a note).
    """
    name = "check_sdpa"
    for case in _sdpa_cases():
        problem = _sdpa_problem(fn, *case)
        if problem:
            return feedback(name, problem)
    # Optional: a query that may attend to no key at all.
    q, k, v, mask = _fully_masked_case()
    result, problem = call_learner(fn, q.clone(), k.clone(), v.clone(), mask=mask)
    pair, _ = (None, None) if problem else _pair(result, "")
    ok = feedback(name, None)
    row = (slice(None), slice(None), 1)  # query 1, every batch and head
    if pair is not None and pair[1].shape == (1, 2, 4, 4):
        weights = pair[1]
        others = [0, 2, 3]
        expected_w = _sdpa_reference(q, k, v, mask, 1 / math.sqrt(q.shape[-1]))[1]
        if torch.isnan(weights[row]).any() and _close(weights[..., others, :], expected_w[..., others, :]):
            note = (
                "note: a query whose keys are ALL masked gets NaN weights (softmax of a row of -inf). "
                "Fine for a causal mask, but padding queries hit it. Fill with torch.finfo(dtype).min instead "
                "of -inf, or zero such rows afterwards (attn_core returns zero weights there)."
            )
            print("   " + i18n.localize(note))  # not a verdict: translated here (ac.set_language("zh"))
    return ok
