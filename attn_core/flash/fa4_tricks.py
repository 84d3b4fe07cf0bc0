"""FlashAttention-4's two algorithmic tricks, in PyTorch: exact results, with what they save counted.

FlashAttention-4 (Dao et al., 2025, for NVIDIA Blackwell) is FA2's algorithm with two changes that matter
when the exponential and the rescaling, not the matrix multiplies, are the bottleneck:

1. **exp2 with log₂e folded into the scale.** ``exp(x) = 2^(x·log₂e)``, and the hardware computes 2^x
   (``ex2``) directly. Multiplying the scale by ``log₂e`` once, ``s₂ = (scale·log₂e)·q·k``, turns every
   ``exp(s - m)`` into ``exp2(s₂ - m₂)``: one multiply per score fewer. lse is then ``m₂·ln 2 + ln l``.
2. **Conditional rescaling.** The online softmax multiplies ``acc`` and ``l`` by ``2^(m_old - m_new)``
   whenever a row's max grows. FA4 keeps the old reference unless the max grew by more than ``τ``
   (in log₂ units, τ = 8: weights up to 2⁸, harmless in float32): the final ``acc / l`` is the same
   whatever reference was used, so the result does not change; only rounding differs.

FA4 also computes some of the 2^x with a **degree-3 polynomial** on the FMA units (``exp2_poly3``)
instead of the busy special-function unit: 2^x = 2^n · 2^f with n = ⌊x⌋ and f ∈ [0, 1), and 2^f from
a cubic. Its relative error (7.5e-5, about 2⁻¹³·⁷) is below bfloat16's rounding of P (2⁻⁹), so in a
bf16 kernel it is invisible.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from attn_core.attention import check_flag, check_qkv, check_scale, default_scale
from attn_core.flash.tiled import check_block_size

__all__ = ["exp2_poly3", "fa4_attention", "RescaleCount", "EXP2_POLY3_COEFFS", "EXP2_POLY3_MAX_REL_ERROR"]

LOG2E = math.log2(math.e)
# Minimax (in relative error) cubic for 2^f on [0, 1]: Lawson's iteratively reweighted least squares on
# 20001 points, coefficients rounded to float32 (constant term first).
EXP2_POLY3_COEFFS = (0.9999251365661621, 0.6958339810371399, 0.22606706619262695, 0.07802402973175049)
EXP2_POLY3_MAX_REL_ERROR = 7.5e-5  # the fit's max |p(f)/2^f - 1| over [0, 1] (measured: 7.49e-5)


class RescaleCount(NamedTuple):
    """How often ``acc`` and ``l`` were rescaled, out of the (query row, key tile) steps that could have been."""

    rescaled: int  # steps that multiplied acc and l by 2^(m_old - m_new)
    steps: int  # every (row, key tile) step after the row's first visible key tile


def exp2_poly3(x: torch.Tensor) -> torch.Tensor:
    """``2**x`` from a degree-3 polynomial: ``2^⌊x⌋ · p(x - ⌊x⌋)`` (relative error ≤ 7.5e-5; -inf gives 0)."""
    tiny = x < -126.0  # (…,) below float32's normal range (and -inf, a masked score): 0, as a GPU flushes it
    x = x.clamp(min=-126.0)  # (…,) keeps floor() and the int32 exponent finite
    whole = torch.floor(x)  # (…,)
    frac = x - whole  # (…,) in [0, 1)
    c0, c1, c2, c3 = EXP2_POLY3_COEFFS
    poly = ((c3 * frac + c2) * frac + c1) * frac + c0  # (…,) Horner: three FMAs on a GPU
    power = torch.ldexp(poly, whole.to(torch.int32))  # (…,) the exponent goes straight into the float's bits
    return torch.where(tiny, 0.0, power)  # (…,)


def fa4_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    block_size: int = 64,
    rescale_threshold: float = 8.0,
    polynomial_exp2: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, RescaleCount]:
    """Online-softmax attention with FA4's exp2 and conditional rescaling: ``(out, lse, RescaleCount)``.

    q ``(..., H, Lq, D)``, k and v ``(..., Hkv, Lk, D)`` / ``(..., Hkv, Lk, Dv)`` as ``ac.tiled_attention``
    (GQA; ``is_causal`` bottom-right; blind rows give 0 and lse -inf). ``rescale_threshold`` τ ≥ 0 in log₂
    units: 0 rescales whenever the max grows (FA2). ``polynomial_exp2`` uses ``exp2_poly3`` for the weights.
    Computed in float32 (float64 stays float64); out in q's dtype, lse in the compute dtype.
    """
    group = check_qkv(q, k, v)
    check_block_size(block_size)
    check_flag("is_causal", is_causal)
    check_flag("polynomial_exp2", polynomial_exp2)
    check_scale(scale)
    if isinstance(rescale_threshold, bool) or not isinstance(rescale_threshold, (int, float)):
        raise TypeError(f"rescale_threshold must be a number (log2 units, e.g. 8.0), got {rescale_threshold!r}.")
    if not 0.0 <= rescale_threshold <= 64.0:  # NaN fails too
        raise ValueError(
            f"rescale_threshold must be in [0, 64] (log2 units: weights grow up to 2^τ before a rescale), got "
            f"{rescale_threshold!r}. FA4 uses 8; 0 rescales at every growth, as FA2."
        )
    scale = default_scale(q.shape[-1]) if scale is None else scale
    exp2 = exp2_poly3 if polynomial_exp2 else torch.exp2
    compute = torch.promote_types(q.dtype, torch.float32)
    *batch, num_heads, q_len, _ = q.shape
    k_len = k.shape[-2]
    # GQA: query head h reads kv head h // group (repeated views, fine at the sizes this teaches)
    keys = k.to(compute).repeat_interleave(group, -3)  # (..., Hq, Lk, D)
    values = v.to(compute).repeat_interleave(group, -3)  # (..., Hq, Lk, Dv)
    q2 = q.to(compute) * (scale * LOG2E)  # (..., Hq, Lq, D): log₂e folded into the scale, once per query
    query_pos = torch.arange(q_len).unsqueeze(-1)  # (Lq, 1)

    reference = torch.full((*batch, num_heads, q_len, 1), -math.inf, dtype=compute)  # (..., Hq, Lq, 1) m₂ in use
    row_sum = torch.zeros(*batch, num_heads, q_len, 1, dtype=compute)  # (..., Hq, Lq, 1)
    acc = torch.zeros(*batch, num_heads, q_len, values.shape[-1], dtype=compute)  # (..., Hq, Lq, Dv)
    rescaled = steps = 0
    for start in range(0, k_len, block_size):
        stop = min(start + block_size, k_len)
        scores2 = q2 @ keys[..., start:stop, :].transpose(-1, -2)  # (..., Hq, Lq, Tk) in log₂ units
        if is_causal:
            future = torch.arange(start, stop) > query_pos + (k_len - q_len)  # (Lq, Tk)
            scores2 = scores2.masked_fill(future, -math.inf)  # (..., Hq, Lq, Tk)
        tile_max = scores2.amax(-1, keepdim=True)  # (..., Hq, Lq, 1)
        started = reference > -math.inf  # (..., Hq, Lq, 1): rows that already have a reference
        grows = tile_max > reference  # (..., Hq, Lq, 1)
        # Move the reference when a row has none yet, or its max grew by more than τ; otherwise keep it.
        move = grows & (~started | (tile_max > reference + rescale_threshold))  # (..., Hq, Lq, 1)
        rescaled += int((move & started).sum())
        steps += int(started.sum())
        new_reference = torch.where(move, tile_max, reference)  # (..., Hq, Lq, 1)
        safe = torch.where(new_reference == -math.inf, 0.0, new_reference)  # (..., Hq, Lq, 1) no (-inf) - (-inf)
        factor = torch.where(move & started, exp2(reference - safe), 1.0)  # (..., Hq, Lq, 1), 1 where kept
        probs = exp2(scores2 - safe)  # (..., Hq, Lq, Tk) ≤ 2^τ
        row_sum = row_sum * factor + probs.sum(-1, keepdim=True)  # (..., Hq, Lq, 1)
        acc = acc * factor + probs @ values[..., start:stop, :]  # (..., Hq, Lq, Dv)
        reference = new_reference

    seen = row_sum > 0  # (..., Hq, Lq, 1) blind rows (no visible key) keep 0 and get lse -inf
    out = acc / torch.where(seen, row_sum, 1.0)  # (..., Hq, Lq, Dv)
    lse = torch.where(seen, reference * math.log(2) + torch.log(torch.where(seen, row_sum, 1.0)), -math.inf)
    return out.to(q.dtype), lse.squeeze(-1), RescaleCount(rescaled, steps)
