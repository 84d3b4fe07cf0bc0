"""Sparse attention over gathered keys: each query reads only the ``n`` keys listed for it.

DeepSeek Sparse Attention (DeepSeek-V3.2) picks, per query, the top-k keys with a cheap scorer (the lightning
indexer, :mod:`attn_core.deepseek.lightning_indexer`) and then runs ordinary softmax attention over those k keys only.
Written as a dense mask ("key listed for that query") it is the same numbers, but the dense form still builds
an ``(Lq, Lk)`` score matrix; here the listed keys are gathered, so the work and memory are ``O(Lq · n)``.

``indices (B, Lq, n)`` is shared by every head (the indexer scores one shared key per token); ``-1`` marks an
empty pick (a query near the start of a causal sequence sees fewer than ``n`` keys).
"""

from __future__ import annotations

import torch

from attn_core.attention import check_qkv, check_scale, default_scale

__all__ = ["sparse_attention", "check_indices"]


def check_indices(indices: object, batch: int, q_len: int, k_len: int, *, device=None) -> torch.Tensor:
    """Validate ``indices (B, Lq, n)``: integers in ``[-1, Lk)``, each key at most once per row. Returns int64."""
    if not isinstance(indices, torch.Tensor):
        raise TypeError(f"indices must be an integer torch.Tensor (B, Lq, n), got {type(indices).__name__}.")
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype == torch.bool:
        raise TypeError(
            f"indices must hold integers (key positions, -1 = empty), got {indices.dtype}; "
            "convert with .long() only if the values are whole numbers."
        )
    if indices.ndim != 3 or indices.shape[:2] != (batch, q_len):
        raise ValueError(
            f"indices must have shape (B, Lq, n) = ({batch}, {q_len}, n), one row of key positions per query "
            f"(shared by every head), got {tuple(indices.shape)}."
        )
    if device is not None and indices.device != torch.device(device):
        raise ValueError(f"indices are on {indices.device} but q, k, v on {device}: move them with .to(q.device).")
    indices = indices.long()  # (B, Lq, n)
    if indices.numel():
        low, high = int(indices.min()), int(indices.max())
        if low < -1 or high >= k_len:
            raise ValueError(
                f"indices must lie in [-1, Lk) = [-1, {k_len}) (-1 = empty pick), got values from {low} to {high}."
            )
        listed = indices.sort(dim=-1).values  # (B, Lq, n): a repeated key sits next to itself
        repeated = (listed[..., 1:] == listed[..., :-1]) & (listed[..., 1:] >= 0)  # (B, Lq, n - 1)
        if bool(repeated.any()):
            b, i, _ = (int(t[0]) for t in repeated.nonzero(as_tuple=True))
            raise ValueError(
                f"indices list a key twice for query {i} of batch {b} (row {indices[b, i].tolist()}); each key may "
                "appear once per row (it would be counted twice in the softmax). Use -1 for empty picks."
            )
    return indices


def sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    indices: torch.Tensor,
    *,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each query attends only to its listed keys.

    Args:
        q: ``(B, H, Lq, D)`` queries.
        k: ``(B, Hkv, Lk, D)`` keys; ``H`` a multiple of ``Hkv`` (head ``h`` uses kv head ``h // (H // Hkv)``).
        v: ``(B, Hkv, Lk, Dv)`` values.
        indices: ``(B, Lq, n)`` integer key positions per query, distinct per row, ``-1`` = empty; shared by
            every head.
        scale: multiplies ``q · k``; defaults to ``1 / sqrt(D)``.

    Returns:
        ``(out (B, H, Lq, Dv), weights (B, H, Lq, n))``; ``weights[..., j]`` is the weight of key
        ``indices[..., j]`` (0 for an empty pick). A query with nothing listed gets zeros. Equal to
        :func:`attn_core.scaled_dot_product_attention` under the mask "key listed for that query".
    """
    group = check_qkv(q, k, v)
    check_scale(scale)
    if q.ndim != 4:
        raise ValueError(f"sparse_attention takes q (B, H, Lq, D), k and v with 4 dims, got q {tuple(q.shape)}.")
    batch, num_heads, q_len, head_dim = q.shape
    num_kv_heads, k_len, v_dim = k.shape[1], k.shape[2], v.shape[-1]
    indices = check_indices(indices, batch, q_len, k_len, device=q.device)  # (B, Lq, n) int64
    n = indices.shape[-1]
    scale = default_scale(head_dim) if scale is None else scale

    if k_len == 0:  # no key to list: every pick is -1 (checked above), so every query gets zeros
        out = q.new_zeros(batch, num_heads, q_len, v_dim)  # (B, H, Lq, Dv)
        return out, q.new_zeros(batch, num_heads, q_len, n)  # (B, H, Lq, Dv), (B, H, Lq, n)
    listed = indices >= 0  # (B, Lq, n)
    safe = indices.clamp(min=0)  # (B, Lq, n): empty picks read key 0, then get weight 0
    batch_index = torch.arange(batch, device=q.device)[:, None, None]  # (B, 1, 1)
    compute_dtype = torch.promote_types(q.dtype, torch.float32)  # half precision computed in float32, as sdpa
    # Gather only the listed keys and values: (B, Lq, n, Hkv, D), no (Lq, Lk) matrix anywhere.
    k_picked = k.transpose(1, 2)[batch_index, safe].to(compute_dtype)  # (B, Lq, n, Hkv, D)
    v_picked = v.transpose(1, 2)[batch_index, safe].to(compute_dtype)  # (B, Lq, n, Hkv, Dv)
    q_grouped = q.to(compute_dtype).view(batch, num_kv_heads, group, q_len, head_dim) * scale  # (B, Hkv, G, Lq, D)
    scores = torch.einsum("bkgqd,bqnkd->bkgqn", q_grouped, k_picked)  # (B, Hkv, G, Lq, n)
    hidden = ~listed[:, None, None]  # (B, 1, 1, Lq, n)
    # The most negative finite number, not -inf: a row with nothing listed stays finite (then zeroed below).
    scores = scores.masked_fill(hidden, torch.finfo(compute_dtype).min)  # (B, Hkv, G, Lq, n)
    weights = torch.softmax(scores, dim=-1).masked_fill(hidden, 0.0)  # (B, Hkv, G, Lq, n): empty rows -> 0
    out = torch.einsum("bkgqn,bqnkv->bkgqv", weights, v_picked)  # (B, Hkv, G, Lq, Dv)
    out = out.reshape(batch, num_heads, q_len, v_dim)  # (B, H, Lq, Dv): head h = kv_head·G + g
    return out.to(q.dtype), weights.reshape(batch, num_heads, q_len, n).to(q.dtype)  # (B, H, Lq, Dv), (B, H, Lq, n)
