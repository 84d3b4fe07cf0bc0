"""FlashAttention-2's forward pass as a Triton kernel (imported on the first call: it imports triton).

One *program* (a GPU thread block; under ``TRITON_INTERPRET=1`` one turn of a Python loop) owns
``BLOCK_M`` queries of one (batch, query head). It loads its query tile once, then walks over the key
tiles keeping per query row the running max ``m``, the running sum ``l`` of ``exp(s - m)`` and the
unnormalised output ``acc``: the loop of ``attn_core/flash/tiled.py`` (notebook 08), with the ``(G·Tq, Tk)``
tile of a kv head cut into one program per query head. Nothing of size ``(Lq, Lk)`` is ever stored.

Pointers are plain arithmetic on the tensors' strides (triton 3.9 removed ``tl.make_block_ptr``), so a
``.transpose(1, 2)`` view is read in place. A load past the end of the sequence is masked (``other=0``)
and its score set to ``-inf``, so ``exp`` gives exactly 0. Scores, ``m``, ``l`` and ``acc`` are float32;
only ``P`` is rounded to the input dtype before ``P @ V`` (what lets the GPU use its half-precision
tensor cores). float32 inputs use ``input_precision="ieee"``: no TF32, as PyTorch's default.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["flash_forward"]


@triton.jit
def _flash_forward_kernel(
    Q, K, V, Out, Lse,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    num_heads, group, q_len, k_len, scale,
    IS_CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
):  # fmt: skip
    tile = tl.program_id(0)  # which BLOCK_M queries
    batch_head = tl.program_id(1)  # which (batch, query head)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    kv_head = head // group  # GQA: query head h reads kv head h // (Hq // Hkv)

    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)  # (BM,) query positions
    cols = tl.arange(0, BLOCK_N)  # (BN,) key positions within a tile
    dims = tl.arange(0, HEAD_DIM)  # (D,)
    q_ptrs = Q + batch * stride_qb + head * stride_qh + rows[:, None] * stride_qm + dims[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=rows[:, None] < q_len, other=0.0)  # (BM, D) in the input dtype
    k_base = K + batch * stride_kb + kv_head * stride_kh
    v_base = V + batch * stride_vb + kv_head * stride_vh

    running_max = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # (BM,)
    running_sum = tl.zeros([BLOCK_M], dtype=tl.float32)  # (BM,)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)  # (BM, D)

    offset = k_len - q_len  # bottom-right causal: query i sees keys j <= i + offset
    keys_end = k_len
    if IS_CAUSAL:
        # The tile's last query sees keys < (tile + 1)·BM + offset: later key tiles are all future.
        keys_end = tl.minimum(k_len, (tile + 1) * BLOCK_M + offset)
    for start in range(0, keys_end, BLOCK_N):
        keys = start + cols  # (BN,)
        # Kᵀ loaded directly as (D, BN): the strides say where each number lives.
        kt = tl.load(
            k_base + keys[None, :] * stride_kn + dims[:, None] * stride_kd, mask=keys[None, :] < k_len, other=0.0
        )
        scores = tl.dot(q, kt, input_precision="ieee") * scale  # (BM, BN) float32
        visible = keys[None, :] < k_len  # (1, BN)
        if IS_CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None] + offset)  # (BM, BN)
        scores = tl.where(visible, scores, float("-inf"))  # (BM, BN)

        new_max = tl.maximum(running_max, tl.max(scores, 1))  # (BM,)
        # A row that has seen no key yet has max -inf; (-inf) - (-inf) would be NaN, so use 0 as its
        # reference: exp(-inf - 0) = 0 keeps its sums at 0.
        reference = tl.where(new_max == float("-inf"), 0.0, new_max)  # (BM,)
        probs = tl.exp(scores - reference[:, None])  # (BM, BN), unnormalised weights
        rescale = tl.exp(running_max - reference)  # (BM,) exp(m_old - m_new) <= 1
        running_sum = running_sum * rescale + tl.sum(probs, 1)  # (BM,)
        v = tl.load(
            v_base + keys[:, None] * stride_vn + dims[None, :] * stride_vd, mask=keys[:, None] < k_len, other=0.0
        )
        acc = acc * rescale[:, None] + tl.dot(probs.to(v.dtype), v, input_precision="ieee")  # (BM, D)
        running_max = new_max

    # A query that saw no key (causal with Lq > Lk, or Lk = 0) has sum 0 and acc 0: output exactly 0,
    # lse = log(0) = -inf, and no 0/0.
    seen = running_sum > 0.0  # (BM,)
    out = acc / tl.where(seen, running_sum, 1.0)[:, None]  # (BM, D)
    lse = tl.where(seen, running_max + tl.log(tl.where(seen, running_sum, 1.0)), float("-inf"))  # (BM,)
    out_rows = batch_head * q_len + rows  # Out and Lse are contiguous (B, Hq, Lq, D) / (B, Hq, Lq)
    tl.store(
        Out + out_rows[:, None] * HEAD_DIM + dims[None, :], out.to(Out.dtype.element_ty), mask=rows[:, None] < q_len
    )
    tl.store(Lse + out_rows, lse, mask=rows < q_len)


def flash_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool, scale: float, block_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(out, lse)`` for checked 4-D inputs of one dtype; out contiguous in q's dtype, lse float32."""
    batch, num_heads, q_len, head_dim = q.shape
    num_kv_heads, k_len = k.shape[1], k.shape[2]
    out = torch.empty(batch, num_heads, q_len, head_dim, dtype=q.dtype, device=q.device)  # (B, Hq, Lq, D)
    lse = torch.empty(batch, num_heads, q_len, dtype=torch.float32, device=q.device)  # (B, Hq, Lq)
    grid = (triton.cdiv(q_len, block_size), batch * num_heads)
    _flash_forward_kernel[grid](
        q, k, v, out, lse,
        *q.stride(), *k.stride(), *v.stride(),
        num_heads, num_heads // num_kv_heads, q_len, k_len, scale,
        IS_CAUSAL=is_causal, BLOCK_M=block_size, BLOCK_N=block_size, HEAD_DIM=head_dim,
    )  # fmt: skip
    return out, lse
