"""FlashAttention-2's backward pass as three Triton kernels (imported on the first backward: it imports triton).

With ``S = scale·Q Kᵀ``, ``P = exp(S - lse)`` (recomputed per tile from the saved lse, so already
normalised) and ``O = P V``, the gradients are (notebook 12, ``attn_core/flash/tiled_backward.py``):

- ``dV = Pᵀ dO``, ``dP = dO Vᵀ``, ``dS = P ∘ (dP − Δ)``, ``dQ = scale·dS K``, ``dK = scale·dSᵀ Q``,
- ``Δ = rowsum(dO ∘ O) − dlse`` (one number per query row; ``− dlse`` because ``∂lse/∂S = P``).

1. ``_delta_kernel``: Δ, before anything else (FA2's preprocessing step).
2. ``_grad_kv_kernel``: one program per (key tile, batch, **query** head); key tiles outer: it keeps its
   ``dK``/``dV`` tile in float32 registers, walks over the query tiles that see it and writes once. Under
   GQA/MQA the ``G = Hq / Hkv`` query heads of a group each get their own program and write their own
   contribution to a float32 ``(B, Hq, Lk, D)`` buffer, summed over the group afterwards (FlashAttention-2's
   ``dk_expanded``): ``B·Hq·⌈Lk/BN⌉`` programs instead of ``B·Hkv·⌈Lk/BN⌉`` each doing G times the work, which
   would leave most of a GPU idle with one kv head (MQA, Gemma 3). No two programs write the same place.
3. ``_grad_q_kernel``: one program per (query tile, batch, query head), the forward's loop with dQ as the
   accumulator. A second kernel instead of ``tl.atomic_add`` into dQ from kernel 2: it recomputes S and P
   once more, but the result is deterministic, and it does not depend on atomics, whose races the
   interpreter (which runs the grid one program after another) could never show.

As in the forward (``flash_forward.py``): exponentials are ``exp2`` with ``log₂e`` folded into the scale (the lse
is read in natural units and multiplied by log₂e once per row), offsets are int64, and only the tiles that need
one build a mask: the ones crossed by the causal diagonal and the last, partial key tile. Query rows past the end
read ``lse = +inf``, so their ``P`` is exactly 0 without a mask. Rows that see no key have ``lse = -inf`` (only
in masked tiles): their P is set to exactly 0, so their gradients are 0, never NaN.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["flash_backward"]


@triton.jit
def _delta_kernel(Out, GradOut, GradLse, Delta, rows_total, HAS_GRAD_LSE: tl.constexpr, BLOCK_M: tl.constexpr,
                  HEAD_DIM: tl.constexpr):  # fmt: skip
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)  # (BM,) rows of the flat (B·Hq·Lq, D)
    dims = tl.arange(0, HEAD_DIM).to(tl.int64)  # (D,)
    inside = rows < rows_total  # (BM,)
    offsets = rows[:, None] * HEAD_DIM + dims[None, :]  # (BM, D) int64; Out and GradOut are contiguous
    out = tl.load(Out + offsets, mask=inside[:, None], other=0.0).to(tl.float32)  # (BM, D)
    grad_out = tl.load(GradOut + offsets, mask=inside[:, None], other=0.0).to(tl.float32)  # (BM, D)
    delta = tl.sum(out * grad_out, 1)  # (BM,)
    if HAS_GRAD_LSE:
        delta -= tl.load(GradLse + rows, mask=inside, other=0.0)  # (BM,)
    tl.store(Delta + rows, delta, mask=inside)


@triton.jit
def _probs_and_grad_scores(q, kt, vt, grad_out, lse2, delta, rows, keys, q_len, k_len, qk_scale,
                           IS_CAUSAL: tl.constexpr, MASKED: tl.constexpr):  # fmt: skip
    """The tile's ``P`` and ``dS`` (both (BM, BN) float32), as the forward saw them; lse2 = lse·log₂e."""
    scores = tl.dot(q, kt, input_precision="ieee") * qk_scale  # (BM, BN) log₂ units
    if MASKED:
        visible = (keys[None, :] < k_len) & (lse2[:, None] > float("-inf"))  # (BM, BN)
        if IS_CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None] + (k_len - q_len))  # (BM, BN)
        probs = tl.where(visible, tl.exp2(scores - tl.where(visible, lse2[:, None], 0.0)), 0.0)  # (BM, BN)
    else:  # every pair visible, every lse finite (rows past the end have lse2 = +inf: P = 0)
        probs = tl.exp2(scores - lse2[:, None])  # (BM, BN)
    grad_probs = tl.dot(grad_out, vt, input_precision="ieee")  # (BM, BN) dP = dO Vᵀ
    return probs, probs * (grad_probs - delta[:, None])  # P, dS


@triton.jit
def _grad_kv_query_tiles(
    q_base, grad_out_base, lse_base, delta_base, stride_qm, stride_qd, kt, vt, keys, row_range, dims,
    first, last, q_len, k_len, qk_scale, grad_k, grad_v,
    IS_CAUSAL: tl.constexpr, MASKED: tl.constexpr, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr,
):  # fmt: skip
    """Add the query tiles starting in [first, last) to this key tile's dK, dV (float32, unscaled dK)."""
    for start in range(first, last, BLOCK_M):
        rows = start + row_range  # (BM,) int64
        row_mask = rows[:, None] < q_len  # (BM, 1)
        q = tl.load(q_base + rows[:, None] * stride_qm + dims[None, :] * stride_qd, mask=row_mask, other=0.0)
        grad_out = tl.load(grad_out_base + rows[:, None] * HEAD_DIM + dims[None, :], mask=row_mask, other=0.0)
        lse2 = tl.load(lse_base + rows, mask=rows < q_len, other=float("inf")) * 1.4426950408889634  # (BM,)
        delta = tl.load(delta_base + rows, mask=rows < q_len, other=0.0)  # (BM,)
        probs, grad_scores = _probs_and_grad_scores(q, kt, vt, grad_out, lse2, delta, rows, keys, q_len, k_len,
                                                    qk_scale, IS_CAUSAL, MASKED)  # fmt: skip
        grad_v += tl.dot(tl.trans(probs.to(grad_out.dtype)), grad_out, input_precision="ieee")  # (BN, D)
        grad_k += tl.dot(tl.trans(grad_scores.to(q.dtype)), q, input_precision="ieee")  # (BN, D)
    return grad_k, grad_v


@triton.jit
def _grad_kv_kernel(
    Q, K, V, GradOut, Lse, Delta, GradK, GradV,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    num_heads, group, q_len, k_len, scale,
    IS_CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
):  # fmt: skip
    tile = tl.program_id(0).to(tl.int64)  # which BLOCK_N keys; int64: every offset below is 64-bit
    batch_head = tl.program_id(1).to(tl.int64)  # which (batch, query head): one program per query head
    batch = batch_head // num_heads
    head = batch_head % num_heads
    kv_head = head // group
    qk_scale = scale * 1.4426950408889634  # scale·log₂e
    keys = tile * BLOCK_N + tl.arange(0, BLOCK_N)  # (BN,) int64
    row_range = tl.arange(0, BLOCK_M).to(tl.int64)  # (BM,)
    dims = tl.arange(0, HEAD_DIM).to(tl.int64)  # (D,)
    key_mask = keys[None, :] < k_len  # (1, BN)
    k_base = K + batch * stride_kb + kv_head * stride_kh
    v_base = V + batch * stride_vb + kv_head * stride_vh
    kt = tl.load(k_base + keys[None, :] * stride_kn + dims[:, None] * stride_kd, mask=key_mask, other=0.0)  # (D, BN)
    vt = tl.load(v_base + keys[None, :] * stride_vn + dims[:, None] * stride_vd, mask=key_mask, other=0.0)  # (D, BN)
    grad_k = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)  # (BN, D)
    grad_v = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)  # (BN, D)

    # Query tiles [first_row, band_end) are crossed by the causal diagonal (mask); from band_end on, every query
    # sees every key of this tile (no mask), unless the tile holds the last, partial key tile (all masked).
    first_row = tile * 0  # int64 zero
    band_end = first_row
    if IS_CAUSAL:
        offset = k_len - q_len
        # Key j is seen by queries i >= j - offset: earlier query tiles see none of this tile's keys.
        first_row = tl.maximum(tile * BLOCK_N - offset, 0) // BLOCK_M * BLOCK_M
        # The tile's last key, (tile + 1)·BN − 1, is seen by every query from (tile + 1)·BN − 1 − offset on.
        band_end = tl.minimum(tl.cdiv(tl.maximum((tile + 1) * BLOCK_N - 1 - offset, 0), BLOCK_M) * BLOCK_M, q_len)
        band_end = tl.maximum(band_end, first_row)
    if (tile + 1) * BLOCK_N > k_len:  # the partial last key tile: a bound mask on every query tile
        band_end = q_len + 0 * tile
    q_base = Q + batch * stride_qb + head * stride_qh
    row_base = batch_head * q_len  # into the contiguous (B, Hq, Lq) lse / Δ and (B, Hq, Lq, D) dO
    grad_out_base = GradOut + row_base * HEAD_DIM
    grad_k, grad_v = _grad_kv_query_tiles(
        q_base, grad_out_base, Lse + row_base, Delta + row_base, stride_qm, stride_qd, kt, vt, keys, row_range, dims,
        first_row, band_end, q_len, k_len, qk_scale, grad_k, grad_v, IS_CAUSAL, True, BLOCK_M, HEAD_DIM,
    )  # fmt: skip
    grad_k, grad_v = _grad_kv_query_tiles(
        q_base, grad_out_base, Lse + row_base, Delta + row_base, stride_qm, stride_qd, kt, vt, keys, row_range, dims,
        band_end, q_len, q_len, k_len, qk_scale, grad_k, grad_v, IS_CAUSAL, False, BLOCK_M, HEAD_DIM,
    )  # fmt: skip

    out_rows = batch_head * k_len + keys  # (BN,) GradK and GradV are contiguous (B, Hq, Lk, D)
    offsets = out_rows[:, None] * HEAD_DIM + dims[None, :]  # (BN, D)
    tl.store(GradK + offsets, (grad_k * scale).to(GradK.dtype.element_ty), mask=keys[:, None] < k_len)
    tl.store(GradV + offsets, grad_v.to(GradV.dtype.element_ty), mask=keys[:, None] < k_len)


@triton.jit
def _grad_q_key_tiles(
    q, grad_out, lse2, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, rows, cols, dims,
    first, last, q_len, k_len, qk_scale, grad_q, IS_CAUSAL: tl.constexpr, MASKED: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """Add the key tiles starting in [first, last) to this query tile's dQ (float32, unscaled)."""
    for start in range(first, last, BLOCK_N):
        keys = start + cols  # (BN,) int64
        if MASKED:
            key_mask = keys[None, :] < k_len  # (1, BN)
            kt = tl.load(k_base + keys[None, :] * stride_kn + dims[:, None] * stride_kd, mask=key_mask, other=0.0)
            vt = tl.load(v_base + keys[None, :] * stride_vn + dims[:, None] * stride_vd, mask=key_mask, other=0.0)
        else:
            kt = tl.load(k_base + keys[None, :] * stride_kn + dims[:, None] * stride_kd)  # (D, BN)
            vt = tl.load(v_base + keys[None, :] * stride_vn + dims[:, None] * stride_vd)  # (D, BN)
        probs, grad_scores = _probs_and_grad_scores(q, kt, vt, grad_out, lse2, delta, rows, keys, q_len, k_len,
                                                    qk_scale, IS_CAUSAL, MASKED)  # fmt: skip
        grad_q += tl.dot(grad_scores.to(kt.dtype), tl.trans(kt), input_precision="ieee")  # (BM, D)
    return grad_q


@triton.jit
def _grad_q_kernel(
    Q, K, V, GradOut, Lse, Delta, GradQ,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    num_heads, group, q_len, k_len, scale,
    IS_CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
):  # fmt: skip
    tile = tl.program_id(0).to(tl.int64)
    batch_head = tl.program_id(1).to(tl.int64)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    kv_head = head // group
    qk_scale = scale * 1.4426950408889634  # scale·log₂e
    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)  # (BM,) int64
    cols = tl.arange(0, BLOCK_N).to(tl.int64)  # (BN,)
    dims = tl.arange(0, HEAD_DIM).to(tl.int64)  # (D,)
    row_mask = rows[:, None] < q_len  # (BM, 1)
    q = tl.load(Q + batch * stride_qb + head * stride_qh + rows[:, None] * stride_qm + dims[None, :] * stride_qd,
                mask=row_mask, other=0.0)  # fmt: skip
    flat_rows = batch_head * q_len + rows  # (BM,) into the contiguous (B, Hq, Lq) tensors
    grad_out = tl.load(GradOut + flat_rows[:, None] * HEAD_DIM + dims[None, :], mask=row_mask, other=0.0)  # (BM, D)
    lse2 = tl.load(Lse + flat_rows, mask=rows < q_len, other=float("inf")) * 1.4426950408889634  # (BM,)
    delta = tl.load(Delta + flat_rows, mask=rows < q_len, other=0.0)  # (BM,)
    k_base = K + batch * stride_kb + kv_head * stride_kh
    v_base = V + batch * stride_vb + kv_head * stride_vh
    grad_q = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)  # (BM, D)

    keys_end = k_len
    full_end = k_len // BLOCK_N * BLOCK_N  # as in the forward: whole key tiles before it
    if IS_CAUSAL:
        keys_end = tl.minimum(k_len, (tile + 1) * BLOCK_M + (k_len - q_len))
        full_end = tl.minimum(full_end, tl.maximum(tile * BLOCK_M + (k_len - q_len) + 1, 0) // BLOCK_N * BLOCK_N)
    grad_q = _grad_q_key_tiles(q, grad_out, lse2, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                               rows, cols, dims, 0, full_end, q_len, k_len, qk_scale, grad_q, IS_CAUSAL, False,
                               BLOCK_N)  # fmt: skip
    grad_q = _grad_q_key_tiles(q, grad_out, lse2, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                               rows, cols, dims, full_end, keys_end, q_len, k_len, qk_scale, grad_q, IS_CAUSAL, True,
                               BLOCK_N)  # fmt: skip
    tl.store(GradQ + flat_rows[:, None] * HEAD_DIM + dims[None, :], (grad_q * scale).to(GradQ.dtype.element_ty),
             mask=row_mask)  # fmt: skip


def flash_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    grad_out: torch.Tensor | None,
    grad_lse: torch.Tensor | None,
    *,
    is_causal: bool,
    scale: float,
    block_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dq, dk, dv)`` in the dtypes of q, k, v; ``grad_out`` / ``grad_lse`` None when that output was unused."""
    batch, num_heads, q_len, head_dim = q.shape
    num_kv_heads, k_len = k.shape[1], k.shape[2]
    group = num_heads // num_kv_heads
    grad_out = torch.zeros_like(out) if grad_out is None else grad_out.contiguous()  # (B, Hq, Lq, D)
    grad_lse = None if grad_lse is None else grad_lse.contiguous().float()  # (B, Hq, Lq)
    delta = torch.empty(batch, num_heads, q_len, dtype=torch.float32, device=q.device)  # (B, Hq, Lq)
    grad_q = torch.empty(batch, num_heads, q_len, head_dim, dtype=q.dtype, device=q.device)  # (B, Hq, Lq, D)
    # One dK/dV program per query head: with GQA each query head's share goes to a float32 buffer, summed below.
    per_head = torch.float32 if group > 1 else k.dtype
    grad_k = torch.empty(batch, num_heads, k_len, head_dim, dtype=per_head, device=k.device)  # (B, Hq, Lk, D)
    grad_v = torch.empty(batch, num_heads, k_len, head_dim, dtype=per_head, device=v.device)  # (B, Hq, Lk, D)
    rows_total = batch * num_heads * q_len

    _delta_kernel[(triton.cdiv(rows_total, block_size),)](
        out, grad_out, lse if grad_lse is None else grad_lse, delta, rows_total,
        HAS_GRAD_LSE=grad_lse is not None, BLOCK_M=block_size, HEAD_DIM=head_dim,
    )  # fmt: skip
    strides = (*q.stride(), *k.stride(), *v.stride())
    tiles = {"IS_CAUSAL": is_causal, "BLOCK_M": block_size, "BLOCK_N": block_size, "HEAD_DIM": head_dim}
    if k_len > 0:
        _grad_kv_kernel[(triton.cdiv(k_len, block_size), batch * num_heads)](
            q, k, v, grad_out, lse, delta, grad_k, grad_v, *strides,
            num_heads, group, q_len, k_len, scale, **tiles,
        )  # fmt: skip
    _grad_q_kernel[(triton.cdiv(q_len, block_size), batch * num_heads)](
        q, k, v, grad_out, lse, delta, grad_q, *strides, num_heads, group, q_len, k_len, scale, **tiles
    )
    if group > 1:  # the group's query heads summed into their kv head, in float32, then rounded once
        grad_k = grad_k.view(batch, num_kv_heads, group, k_len, head_dim).sum(2).to(k.dtype)  # (B, Hkv, Lk, D)
        grad_v = grad_v.view(batch, num_kv_heads, group, k_len, head_dim).sum(2).to(v.dtype)  # (B, Hkv, Lk, D)
    return grad_q, grad_k, grad_v
