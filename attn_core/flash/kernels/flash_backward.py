"""FlashAttention-2's backward pass as three Triton kernels (imported on the first backward: it imports triton).

With ``S = scale·Q Kᵀ``, ``P = exp(S - lse)`` (recomputed per tile from the saved lse, so already
normalised) and ``O = P V``, the gradients are (notebook 12, ``attn_core/flash/tiled_backward.py``):

- ``dV = Pᵀ dO``, ``dP = dO Vᵀ``, ``dS = P ∘ (dP − Δ)``, ``dQ = scale·dS K``, ``dK = scale·dSᵀ Q``,
- ``Δ = rowsum(dO ∘ O) − dlse`` (one number per query row; ``− dlse`` because ``∂lse/∂S = P``).

1. ``_delta_kernel``: Δ, before anything else (FA2's preprocessing step).
2. ``_grad_kv_kernel``: one program per (key tile, batch, kv head); **key tiles outer**: it keeps its
   ``dK``/``dV`` tile in float32 registers, walks over the query tiles of every query head of its group
   (the group's contributions sum into the kv head) and writes once. No two programs write the same place.
3. ``_grad_q_kernel``: one program per (query tile, batch, query head), the forward's loop with dQ as the
   accumulator. A second kernel instead of ``tl.atomic_add`` into dQ from kernel 2: it recomputes S and P
   once more, but the result is deterministic, and it does not depend on atomics, whose races the
   interpreter (which runs the grid one program after another) could never show.

Rows that see no key have ``lse = -inf``: their P is set to exactly 0, so their gradients are 0, never NaN.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["flash_backward"]


@triton.jit
def _delta_kernel(Out, GradOut, GradLse, Delta, rows_total, HAS_GRAD_LSE: tl.constexpr, BLOCK_M: tl.constexpr,
                  HEAD_DIM: tl.constexpr):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # (BM,) rows of the flat (B·Hq·Lq, D) view
    dims = tl.arange(0, HEAD_DIM)  # (D,)
    inside = rows < rows_total  # (BM,)
    offsets = rows[:, None] * HEAD_DIM + dims[None, :]  # (BM, D); Out and GradOut are contiguous
    out = tl.load(Out + offsets, mask=inside[:, None], other=0.0).to(tl.float32)  # (BM, D)
    grad_out = tl.load(GradOut + offsets, mask=inside[:, None], other=0.0).to(tl.float32)  # (BM, D)
    delta = tl.sum(out * grad_out, 1)  # (BM,)
    if HAS_GRAD_LSE:
        delta -= tl.load(GradLse + rows, mask=inside, other=0.0)  # (BM,)
    tl.store(Delta + rows, delta, mask=inside)


@triton.jit
def _probs_and_grad_scores(q, kt, vt, grad_out, lse, delta, rows, keys, q_len, k_len, scale,
                           IS_CAUSAL: tl.constexpr):  # fmt: skip
    """The tile's ``P`` and ``dS`` (both (BM, BN) float32), as the forward saw them."""
    scores = tl.dot(q, kt, input_precision="ieee") * scale  # (BM, BN)
    visible = (keys[None, :] < k_len) & (rows[:, None] < q_len) & (lse[:, None] > float("-inf"))  # (BM, BN)
    if IS_CAUSAL:
        visible = visible & (keys[None, :] <= rows[:, None] + (k_len - q_len))  # (BM, BN)
    probs = tl.where(visible, tl.exp(scores - tl.where(visible, lse[:, None], 0.0)), 0.0)  # (BM, BN)
    grad_probs = tl.dot(grad_out, vt, input_precision="ieee")  # (BM, BN) dP = dO Vᵀ
    return probs, probs * (grad_probs - delta[:, None])  # P, dS


@triton.jit
def _grad_kv_kernel(
    Q, K, V, GradOut, Lse, Delta, GradK, GradV,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    num_heads, num_kv_heads, group, q_len, k_len, scale,
    IS_CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
):  # fmt: skip
    tile = tl.program_id(0)  # which BLOCK_N keys
    batch_kv_head = tl.program_id(1)
    batch = batch_kv_head // num_kv_heads
    kv_head = batch_kv_head % num_kv_heads
    keys = tile * BLOCK_N + tl.arange(0, BLOCK_N)  # (BN,)
    row_range = tl.arange(0, BLOCK_M)  # (BM,)
    dims = tl.arange(0, HEAD_DIM)  # (D,)
    key_mask = keys[None, :] < k_len  # (1, BN)
    k_base = K + batch * stride_kb + kv_head * stride_kh
    v_base = V + batch * stride_vb + kv_head * stride_vh
    kt = tl.load(k_base + keys[None, :] * stride_kn + dims[:, None] * stride_kd, mask=key_mask, other=0.0)  # (D, BN)
    vt = tl.load(v_base + keys[None, :] * stride_vn + dims[:, None] * stride_vd, mask=key_mask, other=0.0)  # (D, BN)
    grad_k = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)  # (BN, D)
    grad_v = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)  # (BN, D)

    first_row = 0
    if IS_CAUSAL:
        # Key j is seen by queries i >= j - (Lk - Lq): earlier query tiles see none of this tile's keys.
        first_row = tl.maximum(tile * BLOCK_N - (k_len - q_len), 0) // BLOCK_M * BLOCK_M
    for member in range(0, group):  # the query heads that share this kv head
        head = kv_head * group + member
        q_base = Q + batch * stride_qb + head * stride_qh
        row_base = (batch * num_heads + head) * q_len  # into the contiguous (B, Hq, Lq) lse / Δ / dO
        for start in range(first_row, q_len, BLOCK_M):
            rows = start + row_range  # (BM,)
            row_mask = rows[:, None] < q_len  # (BM, 1)
            q = tl.load(q_base + rows[:, None] * stride_qm + dims[None, :] * stride_qd, mask=row_mask, other=0.0)
            grad_out = tl.load(GradOut + (row_base + rows[:, None]) * HEAD_DIM + dims[None, :], mask=row_mask,
                               other=0.0)  # fmt: skip
            lse = tl.load(Lse + row_base + rows, mask=rows < q_len, other=float("-inf"))  # (BM,)
            delta = tl.load(Delta + row_base + rows, mask=rows < q_len, other=0.0)  # (BM,)
            probs, grad_scores = _probs_and_grad_scores(q, kt, vt, grad_out, lse, delta, rows, keys, q_len, k_len,
                                                        scale, IS_CAUSAL)  # fmt: skip
            grad_v += tl.dot(tl.trans(probs.to(grad_out.dtype)), grad_out, input_precision="ieee")  # (BN, D)
            grad_k += tl.dot(tl.trans(grad_scores.to(q.dtype)), q, input_precision="ieee")  # (BN, D)

    out_rows = batch_kv_head * k_len + keys  # GradK and GradV are contiguous (B, Hkv, Lk, D)
    offsets = out_rows[:, None] * HEAD_DIM + dims[None, :]  # (BN, D)
    tl.store(GradK + offsets, (grad_k * scale).to(GradK.dtype.element_ty), mask=keys[:, None] < k_len)
    tl.store(GradV + offsets, grad_v.to(GradV.dtype.element_ty), mask=keys[:, None] < k_len)


@triton.jit
def _grad_q_kernel(
    Q, K, V, GradOut, Lse, Delta, GradQ,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    num_heads, group, q_len, k_len, scale,
    IS_CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
):  # fmt: skip
    tile = tl.program_id(0)
    batch_head = tl.program_id(1)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    kv_head = head // group
    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)  # (BM,)
    cols = tl.arange(0, BLOCK_N)  # (BN,)
    dims = tl.arange(0, HEAD_DIM)  # (D,)
    row_mask = rows[:, None] < q_len  # (BM, 1)
    q = tl.load(Q + batch * stride_qb + head * stride_qh + rows[:, None] * stride_qm + dims[None, :] * stride_qd,
                mask=row_mask, other=0.0)  # fmt: skip
    flat_rows = batch_head * q_len + rows  # (BM,) into the contiguous (B, Hq, Lq) tensors
    grad_out = tl.load(GradOut + flat_rows[:, None] * HEAD_DIM + dims[None, :], mask=row_mask, other=0.0)  # (BM, D)
    lse = tl.load(Lse + flat_rows, mask=rows < q_len, other=float("-inf"))  # (BM,)
    delta = tl.load(Delta + flat_rows, mask=rows < q_len, other=0.0)  # (BM,)
    k_base = K + batch * stride_kb + kv_head * stride_kh
    v_base = V + batch * stride_vb + kv_head * stride_vh
    grad_q = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)  # (BM, D)

    keys_end = k_len
    if IS_CAUSAL:
        keys_end = tl.minimum(k_len, (tile + 1) * BLOCK_M + (k_len - q_len))  # as in the forward
    for start in range(0, keys_end, BLOCK_N):
        keys = start + cols  # (BN,)
        key_mask = keys[None, :] < k_len  # (1, BN)
        kt = tl.load(k_base + keys[None, :] * stride_kn + dims[:, None] * stride_kd, mask=key_mask, other=0.0)
        vt = tl.load(v_base + keys[None, :] * stride_vn + dims[:, None] * stride_vd, mask=key_mask, other=0.0)
        probs, grad_scores = _probs_and_grad_scores(q, kt, vt, grad_out, lse, delta, rows, keys, q_len, k_len,
                                                    scale, IS_CAUSAL)  # fmt: skip
        grad_q += tl.dot(grad_scores.to(kt.dtype), tl.trans(kt), input_precision="ieee")  # (BM, D)
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
    grad_k = torch.empty(batch, num_kv_heads, k_len, head_dim, dtype=k.dtype, device=k.device)  # (B, Hkv, Lk, D)
    grad_v = torch.empty(batch, num_kv_heads, k_len, head_dim, dtype=v.dtype, device=v.device)  # (B, Hkv, Lk, D)
    rows_total = batch * num_heads * q_len

    _delta_kernel[(triton.cdiv(rows_total, block_size),)](
        out, grad_out, lse if grad_lse is None else grad_lse, delta, rows_total,
        HAS_GRAD_LSE=grad_lse is not None, BLOCK_M=block_size, HEAD_DIM=head_dim,
    )  # fmt: skip
    strides = (*q.stride(), *k.stride(), *v.stride())
    tiles = {"IS_CAUSAL": is_causal, "BLOCK_M": block_size, "BLOCK_N": block_size, "HEAD_DIM": head_dim}
    if k_len > 0:
        _grad_kv_kernel[(triton.cdiv(k_len, block_size), batch * num_kv_heads)](
            q, k, v, grad_out, lse, delta, grad_k, grad_v, *strides,
            num_heads, num_kv_heads, group, q_len, k_len, scale, **tiles,
        )  # fmt: skip
    _grad_q_kernel[(triton.cdiv(q_len, block_size), batch * num_heads)](
        q, k, v, grad_out, lse, delta, grad_q, *strides, num_heads, group, q_len, k_len, scale, **tiles
    )
    return grad_q, grad_k, grad_v
