"""FlashAttention-4's two algorithmic changes to FA2, in PyTorch: exact results, with what they save counted.

FlashAttention-4 (Dao-AILab/flash-attention, ``flash_attn/cute``, written for NVIDIA Blackwell) keeps FA2's
algorithm: query tiles outside, key tiles inside, the online softmax with ``m``, ``l`` and ``acc`` in float32, lse
saved for the backward, and the exponential computed as ``exp2`` with ``log₂e`` folded into the softmax scale.
That last one is **not new in FA4**: FA1/FA2's CUDA softmax already computes ``exp2(s·scale·log₂e − m₂)``, and so
does Triton's fused-attention tutorial (``qk_scale *= 1.44269504``, then ``tl.math.exp2``): ``exp(x) = 2^(x·log₂e)``,
the hardware's instruction is ``ex2``, and folding ``log₂e`` into the scale once saves the multiply by ``log₂e``
that ``exp`` would do on every score. This module does it too (lse is then ``m₂·ln 2 + ln l``). What FA4
changes, for a GPU whose tensor cores outran its exponential unit:

1. **Software exp2 on the FMA units.** Some of the 2^x are computed with a **degree-3 polynomial**
   (``exp2_poly3``) instead of the busy special-function unit (MUFU): 2^x = 2^n · 2^f with n = ⌊x⌋ and
   f ∈ [0, 1), 2^f from a cubic (three FMAs), n written straight into the float's exponent bits. This module's
   minimax cubic has a relative error of 7.5e-5 (2⁻¹³·⁷; FA4's own coefficients, which pin p(0) = 1, 8.8e-5),
   below bfloat16's unit roundoff 2⁻⁸ (float16's 2⁻¹¹) with which P is rounded before ``P·V``: invisible in a
   16-bit kernel.
2. **Conditional rescaling.** The online softmax multiplies ``acc`` and ``l`` by ``2^(m_old − m_new)``
   whenever a row's max grows. FA4 keeps the stale reference unless the max grew by more than ``τ`` (log₂
   units; ``rescale_threshold = 8.0`` for 16-bit inputs in ``flash_fwd_sm100.py``): weights then stay ≤ 2^τ, and
   what bounds τ is the dtype P is cast to before ``P·V`` (2⁸ is far below float16's 65504; for fp8 FA4 sets
   τ = 0, since P would saturate). The final ``acc / l`` is the same whatever reference was used, so only
   rounding changes. How many rescales it saves depends on the scores: all of them on random N(0, 1) scores
   (notebook 12b), fewer on real attention with outlier logits.

The rest of FA4 (the Blackwell pipeline: tensor memory, warp specialisation, asynchronous MMA) is hardware, not
algorithm, and has no PyTorch counterpart here.
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
    """``2**x`` from a degree-3 polynomial: ``2^⌊x⌋ · p(x - ⌊x⌋)``, for any floating x.

    Relative error ≤ 7.5e-5 (``EXP2_POLY3_MAX_REL_ERROR``) where ``2**x`` is a normal number of x's dtype. Outside
    that range it gives what a GPU's flush-to-zero ``ex2`` gives: 0 below the smallest normal exponent
    (-126 for float32; -inf, a masked score, included) and +inf from the first exponent that
    overflows (128 for float32; +inf included). NaN stays NaN. Attention only ever feeds it
    ``s₂ − m₂ ≤ τ ≤ 64``, but the function is public, so every input gets the right answer.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"exp2_poly3 takes a floating-point tensor, got {getattr(x, 'dtype', type(x).__name__)}.")
    finfo = torch.finfo(x.dtype)
    min_exp = math.frexp(finfo.tiny)[1] - 1  # -126 for float32: 2^min_exp is the smallest normal number
    max_exp = math.frexp(finfo.max)[1]  # 128 for float32: 2^max_exp is the first power that overflows
    tiny = x < min_exp  # (…,) below the normal range (and -inf, a masked score): 0, as a GPU flushes it
    huge = x >= max_exp  # (…,) 2^x overflows the dtype (and +inf): inf
    x = x.clamp(min=min_exp, max=max_exp)  # (…,) keeps floor() and the int32 exponent in range
    whole = torch.floor(x)  # (…,)
    frac = x - whole  # (…,) in [0, 1)
    c0, c1, c2, c3 = EXP2_POLY3_COEFFS
    poly = ((c3 * frac + c2) * frac + c1) * frac + c0  # (…,) Horner: three FMAs on a GPU
    power = torch.ldexp(poly, whole.to(torch.int32))  # (…,) the exponent goes straight into the float's bits
    return torch.where(tiny, 0.0, torch.where(huge, math.inf, power))  # (…,)


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
    Computed in float32 (float64 stays float64) on q's device; out in q's dtype, lse in the compute dtype.
    The counts are summed on the device and read once at the end (one host sync); on the meta device (shapes
    only) there are no values to count, and ``RescaleCount`` holds meta tensors.
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
    query_pos = torch.arange(q_len, device=q.device).unsqueeze(-1)  # (Lq, 1)

    state = {"dtype": compute, "device": q.device}
    reference = torch.full((*batch, num_heads, q_len, 1), -math.inf, **state)  # (..., Hq, Lq, 1) m₂ in use
    row_sum = torch.zeros(*batch, num_heads, q_len, 1, **state)  # (..., Hq, Lq, 1)
    acc = torch.zeros(*batch, num_heads, q_len, values.shape[-1], **state)  # (..., Hq, Lq, Dv)
    rescaled = steps = torch.zeros((), dtype=torch.int64, device=q.device)  # () counts, read once at the end
    for start in range(0, k_len, block_size):
        stop = min(start + block_size, k_len)
        scores2 = q2 @ keys[..., start:stop, :].transpose(-1, -2)  # (..., Hq, Lq, Tk) in log₂ units
        if is_causal:
            future = torch.arange(start, stop, device=q.device) > query_pos + (k_len - q_len)  # (Lq, Tk)
            scores2 = scores2.masked_fill(future, -math.inf)  # (..., Hq, Lq, Tk)
        tile_max = scores2.amax(-1, keepdim=True)  # (..., Hq, Lq, 1)
        started = reference > -math.inf  # (..., Hq, Lq, 1): rows that already have a reference
        grows = tile_max > reference  # (..., Hq, Lq, 1)
        # Move the reference when a row has none yet, or its max grew by more than τ; otherwise keep it.
        move = grows & (~started | (tile_max > reference + rescale_threshold))  # (..., Hq, Lq, 1)
        rescaled = rescaled + (move & started).sum()
        steps = steps + started.sum()
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
    if q.device.type != "meta":
        rescaled, steps = int(rescaled), int(steps)
    return out.to(q.dtype), lse.squeeze(-1), RescaleCount(rescaled, steps)
