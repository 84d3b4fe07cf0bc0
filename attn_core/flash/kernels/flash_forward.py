"""FlashAttention-2's forward pass as a Triton kernel (imported on the first call: it imports triton).

One *program* (a GPU thread block; under ``TRITON_INTERPRET=1`` one turn of a Python loop) owns
``BLOCK_M`` queries of one (batch, query head). It loads its query tile once, then walks over the key
tiles keeping per query row the running max ``m``, the running sum ``l`` of ``2^(s₂ - m)`` and the
unnormalised output ``acc``: the loop of ``attn_core/flash/tiled.py`` (notebook 08), with the ``(G·Tq, Tk)``
tile of a kv head cut into one program per query head. Nothing of size ``(Lq, Lk)`` is ever stored.

What it shares with FlashAttention-2's CUDA code and Triton's fused-attention tutorial:

- **exp2, log₂e folded into the scale.** ``e^x = 2^(x·log₂e)``: the scores are multiplied once by
  ``scale·log₂e`` and every exponential is ``tl.exp2`` (the GPU's ``ex2`` instruction); ``m`` is in log₂
  units, and the lse written out is ``(m + log₂ l)·ln 2``, natural units as everywhere else.
- **Masks only where needed.** The key loop runs in two stages: the key tiles every query of the tile sees
  whole (no bound check, no causal ``tl.where``), then the rest, the tiles crossed by the causal diagonal and
  the last, partial key tile, which build the mask. Same tiles, same order: the results are identical.
- **64-bit offsets.** ``program_id`` and integer arguments are int32; the program ids are cast to int64 before
  any offset is formed (``batch·stride_b + head·stride_h + row·stride_m``), so tensors past 2³¹ elements are
  addressed correctly instead of wrapping. Every offset vector is int64.

Pointers are plain arithmetic on the tensors' strides (triton 3.9 removed ``tl.make_block_ptr``), so a
``.transpose(1, 2)`` view is read in place. A masked load gives 0 and a masked score ``-inf``, so ``exp2``
gives exactly 0. Scores, ``m``, ``l`` and ``acc`` are float32; only ``P`` is rounded to the input dtype before
``P @ V`` (what lets the GPU use its half-precision tensor cores). float32 inputs use
``input_precision="ieee"``: no TF32, as PyTorch's default, at the price of running ``tl.dot`` on the FMA units
instead of the tensor cores (roughly an order of magnitude slower on a GPU).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

__all__ = ["flash_forward", "LOG2E"]

LOG2E = math.log2(math.e)  # e^x = 2^(x·log₂e)


@triton.jit
def _attend_key_tile(
    q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, rows, keys, dims, k_len, offset, qk_scale,
    running_max, running_sum, acc, IS_CAUSAL: tl.constexpr, MASKED: tl.constexpr,
):  # fmt: skip
    """One step of the online softmax over the key tile ``keys``; MASKED: bound and causal masks (else none)."""
    if MASKED:
        inside = keys < k_len  # (BN,) the last key tile may be partial
        kt = tl.load(k_base + keys[None, :] * stride_kn + dims[:, None] * stride_kd, mask=inside[None, :], other=0.0)
        v = tl.load(v_base + keys[:, None] * stride_vn + dims[None, :] * stride_vd, mask=inside[:, None], other=0.0)
    else:  # every key of the tile exists: no bound check
        kt = tl.load(k_base + keys[None, :] * stride_kn + dims[:, None] * stride_kd)  # (D, BN): Kᵀ via the strides
        v = tl.load(v_base + keys[:, None] * stride_vn + dims[None, :] * stride_vd)  # (BN, D)
    scores = tl.dot(q, kt, input_precision="ieee") * qk_scale  # (BM, BN) float32, log₂ units
    if MASKED:
        visible = inside[None, :]  # (1, BN)
        if IS_CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None] + offset)  # (BM, BN)
        scores = tl.where(visible, scores, float("-inf"))  # (BM, BN)
    new_max = tl.maximum(running_max, tl.max(scores, 1))  # (BM,)
    # A row that has seen no key yet has max -inf; (-inf) - (-inf) would be NaN, so use 0 as its reference:
    # 2^(-inf - 0) = 0 keeps its sums at 0.
    reference = tl.where(new_max == float("-inf"), 0.0, new_max)  # (BM,)
    probs = tl.exp2(scores - reference[:, None])  # (BM, BN), unnormalised weights
    rescale = tl.exp2(running_max - reference)  # (BM,) 2^(m_old - m_new) <= 1
    running_sum = running_sum * rescale + tl.sum(probs, 1)  # (BM,)
    acc = acc * rescale[:, None] + tl.dot(probs.to(v.dtype), v, input_precision="ieee")  # (BM, D)
    return new_max, running_sum, acc


@triton.jit
def _flash_forward_kernel(
    Q, K, V, Out, Lse,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    num_heads, group, q_len, k_len, scale,
    IS_CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
):  # fmt: skip
    tile = tl.program_id(0).to(tl.int64)  # which BLOCK_M queries; int64: every offset below is 64-bit
    batch_head = tl.program_id(1).to(tl.int64)  # which (batch, query head)
    batch = batch_head // num_heads
    head = batch_head % num_heads
    kv_head = head // group  # GQA: query head h reads kv head h // (Hq // Hkv)
    qk_scale = scale * 1.4426950408889634  # scale·log₂e: every exponential below is an exp2

    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)  # (BM,) int64 query positions
    cols = tl.arange(0, BLOCK_N).to(tl.int64)  # (BN,) key positions within a tile
    dims = tl.arange(0, HEAD_DIM).to(tl.int64)  # (D,)
    q_ptrs = Q + batch * stride_qb + head * stride_qh + rows[:, None] * stride_qm + dims[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=rows[:, None] < q_len, other=0.0)  # (BM, D) in the input dtype
    k_base = K + batch * stride_kb + kv_head * stride_kh
    v_base = V + batch * stride_vb + kv_head * stride_vh

    running_max = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # (BM,) in log₂ units
    running_sum = tl.zeros([BLOCK_M], dtype=tl.float32)  # (BM,)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)  # (BM, D)

    offset = k_len - q_len  # bottom-right causal: query i sees keys j <= i + offset
    keys_end = k_len
    full_end = k_len // BLOCK_N * BLOCK_N  # keys before it are in whole tiles
    if IS_CAUSAL:
        # The tile's last query sees keys < (tile + 1)·BM + offset: later key tiles are all future.
        keys_end = tl.minimum(k_len, (tile + 1) * BLOCK_M + offset)
        # Its first query sees keys <= tile·BM + offset: the whole key tiles up to there need no mask.
        full_end = tl.minimum(full_end, tl.maximum(tile * BLOCK_M + offset + 1, 0) // BLOCK_N * BLOCK_N)
    for start in range(0, full_end, BLOCK_N):  # stage 1: no mask
        running_max, running_sum, acc = _attend_key_tile(
            q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, rows, start + cols, dims, k_len, offset,
            qk_scale, running_max, running_sum, acc, IS_CAUSAL, False,
        )  # fmt: skip
    for start in range(full_end, keys_end, BLOCK_N):  # stage 2: the diagonal and the partial last tile
        running_max, running_sum, acc = _attend_key_tile(
            q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, rows, start + cols, dims, k_len, offset,
            qk_scale, running_max, running_sum, acc, IS_CAUSAL, True,
        )  # fmt: skip

    # A query that saw no key (causal with Lq > Lk, or Lk = 0) has sum 0 and acc 0: output exactly 0,
    # lse = log(0) = -inf, and no 0/0.
    seen = running_sum > 0.0  # (BM,)
    out = acc / tl.where(seen, running_sum, 1.0)[:, None]  # (BM, D)
    lse2 = running_max + tl.log2(tl.where(seen, running_sum, 1.0))  # (BM,) log₂ Σ 2^s₂
    lse = tl.where(seen, lse2 * 0.6931471805599453, float("-inf"))  # (BM,) natural units: ·ln 2
    out_rows = batch_head * q_len + rows  # (BM,) Out and Lse are contiguous (B, Hq, Lq, D) / (B, Hq, Lq)
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
