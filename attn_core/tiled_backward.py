"""The backward pass of tiled attention (FlashAttention-2), without the ``(Lq, Lk)`` weights.

Forward: ``S = scale·Q Kᵀ``, ``P = softmax(S)``, ``O = P V``, and per query row
``lse = log Σ_j exp(S_j)``. Given ``dO`` (and ``dlse`` when lse itself was used, e.g. by
``merge_attention``), the chain rule through ``O = P V`` and the softmax gives

- ``dV = Pᵀ dO``
- ``dP = dO Vᵀ``
- ``dS = P ∘ (dP − D)`` with ``D = rowsum(dO ∘ O)`` (``= rowsum(P ∘ dP)``, one number per row,
  computed from O without any P), plus ``P ∘ dlse`` since ``∂lse/∂S = P``: so ``D − dlse``
  takes D's place,
- ``dQ = dS K · scale`` and ``dK = dSᵀ Q · scale``.

Every term is a sum over tiles, so the tiles can be visited one by one: each recomputes its
``P = exp(S − lse)`` (already normalised: no running max needed) from the saved lse. The
memory is one score tile and one dP tile per kv head, as in the forward. With grouped-query
attention the ``G`` query heads of a kv head are stacked into the rows of one tile, so the
products ``Pᵀ dO`` and ``dSᵀ Q`` sum the group's contributions into their kv head.
"""

from __future__ import annotations

import math

import torch

__all__ = ["tiled_attention_backward"]


def tile_view(storage: torch.Tensor, *shape: int) -> torch.Tensor:
    """The first ``prod(shape)`` numbers of a flat scratch buffer, viewed as ``shape``."""
    return storage[: math.prod(shape)].view(*shape)


def tiled_attention_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    output: torch.Tensor,
    lse: torch.Tensor,
    grad_output: torch.Tensor | None,
    grad_lse: torch.Tensor | None,
    *,
    is_causal: bool,
    scale: float,
    block_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dq, dk, dv)`` in the dtypes and shapes of q, k, v (see the module docstring).

    ``q, k, v, output, lse`` are those of ``tiled_forward(..., with_lse=True)``;
    ``grad_output`` ``(..., Hq, Lq, Dv)`` and ``grad_lse`` ``(..., Hq, Lq)`` may be None
    (that output was not used). Queries that see no key get zero gradients.
    """
    *batch, num_heads, q_len, head_dim = q.shape
    num_kv_heads, k_len, v_dim = k.shape[-3], k.shape[-2], v.shape[-1]
    group = num_heads // num_kv_heads
    compute_dtype = lse.dtype  # float32 for half and float32 inputs, float64 for float64
    num_matrices = math.prod(batch) * num_kv_heads  # one independent attention per (batch, kv head)
    device = q.device

    grad_q = torch.zeros(*batch, num_heads, q_len, head_dim, dtype=q.dtype, device=device)  # (..., Hq, Lq, D)
    grad_q_grouped = grad_q.view(num_matrices, group, q_len, head_dim)  # (N, G, Lq, D)
    # dK and dV receive a term from every query tile: accumulated in compute_dtype.
    grad_k = torch.zeros(num_matrices, k_len, head_dim, dtype=compute_dtype, device=device)  # (N, Lk, D)
    grad_v = torch.zeros(num_matrices, k_len, v_dim, dtype=compute_dtype, device=device)  # (N, Lk, Dv)

    offset = k_len - q_len  # bottom-right alignment: query i sees keys j <= i + offset
    first_query = min(q_len, max(0, -offset)) if is_causal else 0  # earlier queries see no key
    if k_len == 0:
        first_query = q_len
    if first_query == q_len or (grad_output is None and grad_lse is None):
        return grad_q, grad_k.view(k.shape).to(k.dtype), grad_v.view(v.shape).to(v.dtype)  # all zeros
    if grad_output is None:  # only lse was used: dO = 0
        grad_output = torch.zeros_like(output)  # (..., Hq, Lq, Dv)

    keys = k.reshape(num_matrices, k_len, head_dim).to(compute_dtype)  # (N, Lk, D)
    values = v.reshape(num_matrices, k_len, v_dim).to(compute_dtype)  # (N, Lk, Dv)
    # Flat buffers that every tile is a contiguous view of, as in the forward: the loops
    # allocate nothing of tile size.
    max_rows = group * min(block_size, q_len - first_query)
    max_keys = min(block_size, k_len)
    flat = {"scores": max_keys, "grad_probs": max_keys, "q": head_dim, "grad_q": head_dim, "grad_out": v_dim}
    storage = {
        name: torch.empty(num_matrices * max_rows * width, dtype=compute_dtype, device=device)
        for name, width in flat.items()
    }

    for q_start in range(first_query, q_len, block_size):
        q_end = min(q_start + block_size, q_len)
        tile_len = q_end - q_start
        rows = group * tile_len
        by_head = (*batch, num_heads, tile_len)  # a tile's rows in the input layout

        # Contiguous copies that stack the G heads of a kv head into rows, as in the forward.
        q_tile = tile_view(storage["q"], *by_head, head_dim)  # (..., Hq, Tq, D)
        torch.mul(q[..., q_start:q_end, :].to(compute_dtype), scale, out=q_tile)  # (..., Hq, Tq, D)
        q_tile = q_tile.view(num_matrices, rows, head_dim)  # (N, G·Tq, D), scale·q
        grad_out_tile = tile_view(storage["grad_out"], *by_head, v_dim)  # (..., Hq, Tq, Dv)
        grad_out_tile.copy_(grad_output[..., q_start:q_end, :])  # (..., Hq, Tq, Dv)
        # D = rowsum(dO ∘ O) - dlse, one number per row: what dS subtracts from dP.
        delta = torch.linalg.vecdot(grad_out_tile, output[..., q_start:q_end, :].to(compute_dtype))  # (..., Hq, Tq)
        if grad_lse is not None:
            delta -= grad_lse[..., q_start:q_end]  # (..., Hq, Tq)
        delta = delta.view(num_matrices, rows, 1)  # (N, G·Tq, 1)
        grad_out_tile = grad_out_tile.view(num_matrices, rows, v_dim)  # (N, G·Tq, Dv)
        lse_tile = lse[..., q_start:q_end].reshape(num_matrices, rows, 1)  # (N, G·Tq, 1), a small copy
        grad_q_tile = tile_view(storage["grad_q"], num_matrices, rows, head_dim).zero_()  # (N, G·Tq, D)

        # Causal: the same tiles as the forward are computed, and the same ones masked.
        keys_end = min(k_len, q_end + offset) if is_causal else k_len
        unmasked_end = q_start + offset + 1 if is_causal else k_len
        for k_start in range(0, keys_end, block_size):
            k_end = min(k_start + block_size, keys_end)
            tile_keys = k_end - k_start
            key_tile, value_tile = keys[:, k_start:k_end], values[:, k_start:k_end]  # (N, Tk, D), (N, Tk, Dv)
            scores = tile_view(storage["scores"], num_matrices, rows, tile_keys)  # (N, G·Tq, Tk)
            torch.bmm(q_tile, key_tile.transpose(1, 2), out=scores)  # (N, G·Tq, Tk)
            if k_end > unmasked_end:
                query_pos = torch.arange(q_start, q_end, device=device).unsqueeze(-1)  # (Tq, 1)
                future = torch.arange(k_start, k_end, device=device) > query_pos + offset  # (Tq, Tk)
                scores.view(num_matrices, group, tile_len, tile_keys).masked_fill_(future, -math.inf)  # (N, G, Tq, Tk)
            # The exact softmax weights, from the saved lse (exp(-inf) = 0 for future keys).
            probs = scores.sub_(lse_tile).exp_()  # (N, G·Tq, Tk)
            grad_v[:, k_start:k_end].baddbmm_(probs.transpose(1, 2), grad_out_tile)  # (N, Tk, Dv)
            grad_probs = tile_view(storage["grad_probs"], num_matrices, rows, tile_keys)  # (N, G·Tq, Tk)
            torch.bmm(grad_out_tile, value_tile.transpose(1, 2), out=grad_probs)  # (N, G·Tq, Tk)
            grad_scores = grad_probs.sub_(delta).mul_(probs)  # (N, G·Tq, Tk), dS = P ∘ (dP - D)
            grad_q_tile.baddbmm_(grad_scores, key_tile)  # (N, G·Tq, D), times scale below
            grad_k[:, k_start:k_end].baddbmm_(grad_scores.transpose(1, 2), q_tile)  # (N, Tk, D), q_tile has scale

        torch.mul(
            grad_q_tile.view(num_matrices, group, tile_len, head_dim),  # (N, G, Tq, D)
            scale,
            out=grad_q_grouped[:, :, q_start:q_end],  # (N, G, Tq, D), cast to q's dtype
        )
    return grad_q, grad_k.view(k.shape).to(k.dtype), grad_v.view(v.shape).to(v.dtype)
