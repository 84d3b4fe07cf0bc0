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
``P = exp(S − lse)`` (already normalised: no running max needed) from the saved lse.

The loop order is FlashAttention-2's (its Algorithm 2): ``D`` is computed first for every row,
then the **key tiles are the outer loop**. A key tile ``j`` owns ``dK_j`` and ``dV_j``: they
are accumulated over the query tiles of the inner loop in a tile-sized buffer (on a GPU, the
registers of the thread block that owns key tile ``j``) and written once, when the inner loop
ends. ``dQ_i`` receives a term from every key tile, so it is added into a full-size dQ buffer
(on a GPU, with atomic adds, since the key tiles run in parallel; here they run one after
another, so a plain in-place add does it, in a fixed order). The scale is folded into the key
tile: ``S = Q_i (scale·K_j)ᵀ`` and ``dQ_i += dS (scale·K_j)``, and ``dK_j`` is multiplied by
scale once, when written. The memory is one score tile and one dP tile per kv head, as in the
forward, the key tile's dK_j and dV_j, and the full-size dQ (the returned gradient itself for
float32 and float64 inputs, a float32 buffer for half ones). With grouped-query attention the ``G``
query heads of a kv head are stacked into the rows of one tile, so the products ``Pᵀ dO`` and
``dSᵀ Q`` sum the group's contributions into their kv head.
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

    # dQ receives a term from every key tile: a full-size accumulator in compute_dtype (the
    # returned tensor itself when q is already in compute_dtype).
    grad_q = torch.zeros(*batch, num_heads, q_len, head_dim, dtype=compute_dtype, device=device)  # (..., Hq, Lq, D)
    grad_q_grouped = grad_q.view(num_matrices, group, q_len, head_dim)  # (N, G, Lq, D)
    grad_k = torch.zeros(num_matrices, k_len, head_dim, dtype=k.dtype, device=device)  # (N, Lk, D)
    grad_v = torch.zeros(num_matrices, k_len, v_dim, dtype=v.dtype, device=device)  # (N, Lk, Dv)

    def result() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return grad_q.to(q.dtype), grad_k.view(k.shape), grad_v.view(v.shape)

    offset = k_len - q_len  # bottom-right alignment: query i sees keys j <= i + offset
    first_query = min(q_len, max(0, -offset)) if is_causal else 0  # earlier queries see no key
    if k_len == 0:
        first_query = q_len
    if first_query == q_len or (grad_output is None and grad_lse is None):
        return result()  # all zeros
    if grad_output is None:  # only lse was used: dO = 0
        grad_output = torch.zeros_like(output)  # (..., Hq, Lq, Dv)

    # The inputs with one leading batch dimension (views, or one copy when strided).
    queries = q.reshape(num_matrices, group, q_len, head_dim)  # (N, G, Lq, D)
    keys = k.reshape(num_matrices, k_len, head_dim)  # (N, Lk, D)
    values = v.reshape(num_matrices, k_len, v_dim)  # (N, Lk, Dv)
    output = output.reshape(num_matrices, group, q_len, v_dim)  # (N, G, Lq, Dv)
    grad_output = grad_output.reshape(num_matrices, group, q_len, v_dim)  # (N, G, Lq, Dv)
    lse = lse.reshape(num_matrices, group, q_len)  # (N, G, Lq)
    # Query tiles on the forward's grid: [first_query, first_query + block_size), ...
    query_tiles = [(start, min(start + block_size, q_len)) for start in range(first_query, q_len, block_size)]

    # FA2's preprocessing step, before the tile loops: D = rowsum(dO ∘ O) - dlse, one number per
    # row (what dS subtracts from dP), one query tile at a time (no temporary of O's size).
    delta = torch.zeros(num_matrices, group, q_len, dtype=compute_dtype, device=device)  # (N, G, Lq)
    for q_start, q_end in query_tiles:
        grad_out_rows = grad_output[:, :, q_start:q_end].to(compute_dtype)  # (N, G, Tq, Dv)
        delta[:, :, q_start:q_end] = torch.linalg.vecdot(grad_out_rows, output[:, :, q_start:q_end].to(compute_dtype))
    if grad_lse is not None:
        delta -= grad_lse.reshape(num_matrices, group, q_len)  # (N, G, Lq)

    # Flat buffers that every tile is a contiguous view of, as in the forward: the inner loop
    # allocates nothing of tile size (for half-precision inputs the outer loop converts each
    # value tile to float32).
    max_rows = group * min(block_size, q_len - first_query)
    max_keys = min(block_size, k_len)
    flat = {"scores": max_keys, "grad_probs": max_keys, "q": head_dim, "grad_q": head_dim, "grad_out": v_dim}
    flat |= {"lse": 1, "delta": 1}
    storage = {
        name: torch.empty(num_matrices * max_rows * width, dtype=compute_dtype, device=device)
        for name, width in flat.items()
    }
    for name, width in {"keys": head_dim, "grad_k": head_dim, "grad_v": v_dim}.items():
        storage[name] = torch.empty(num_matrices * max_keys * width, dtype=compute_dtype, device=device)

    def stacked_rows(x: torch.Tensor, start: int, end: int, name: str) -> torch.Tensor:
        """Rows start:end of x (N, G, Lq, W) with the G heads of a kv head stacked, (N, G·T, W): a
        view when G = 1 and x is in compute_dtype, else a contiguous copy into storage[name]."""
        rows = x[:, :, start:end]  # (N, G, T, W)
        if group == 1 and x.dtype == compute_dtype:
            return rows.squeeze(1)  # (N, T, W), a view
        stacked = tile_view(storage[name], *rows.shape).copy_(rows)  # (N, G, T, W)
        return stacked.view(num_matrices, group * (end - start), x.shape[-1])  # (N, G·T, W)

    for k_start in range(0, k_len, block_size):  # outer loop: one key tile, which owns dK_j and dV_j
        k_end = min(k_start + block_size, k_len)
        tile_keys = k_end - k_start
        key_tile = tile_view(storage["keys"], num_matrices, tile_keys, head_dim)  # (N, Tk, D)
        torch.mul(keys[:, k_start:k_end].to(compute_dtype), scale, out=key_tile)  # (N, Tk, D), scale·K_j
        value_tile = values[:, k_start:k_end].to(compute_dtype)  # (N, Tk, Dv)
        grad_k_tile = tile_view(storage["grad_k"], num_matrices, tile_keys, head_dim).zero_()  # (N, Tk, D)
        grad_v_tile = tile_view(storage["grad_v"], num_matrices, tile_keys, v_dim).zero_()  # (N, Tk, Dv)

        for q_start, q_end in query_tiles:  # inner loop: every query tile that sees this key tile
            # Causal: query i sees key tile j only if k_start <= i + offset; the same tiles as the
            # forward are computed, and the same ones masked.
            if is_causal and q_end - 1 + offset < k_start:
                continue
            tile_len = q_end - q_start
            rows = group * tile_len
            q_tile = stacked_rows(queries, q_start, q_end, "q")  # (N, G·Tq, D)
            grad_out_tile = stacked_rows(grad_output, q_start, q_end, "grad_out")  # (N, G·Tq, Dv)
            lse_tile = stacked_rows(lse.unsqueeze(-1), q_start, q_end, "lse")  # (N, G·Tq, 1)
            delta_tile = stacked_rows(delta.unsqueeze(-1), q_start, q_end, "delta")  # (N, G·Tq, 1)

            scores = tile_view(storage["scores"], num_matrices, rows, tile_keys)  # (N, G·Tq, Tk)
            torch.bmm(q_tile, key_tile.transpose(1, 2), out=scores)  # (N, G·Tq, Tk), S = Q_i (scale·K_j)ᵀ
            if is_causal and k_end > q_start + offset + 1:  # the diagonal crosses this tile
                query_pos = torch.arange(q_start, q_end, device=device).unsqueeze(-1)  # (Tq, 1)
                future = torch.arange(k_start, k_end, device=device) > query_pos + offset  # (Tq, Tk)
                scores.view(num_matrices, group, tile_len, tile_keys).masked_fill_(future, -math.inf)
            # The exact softmax weights, from the saved lse (exp(-inf) = 0 for future keys).
            probs = scores.sub_(lse_tile).exp_()  # (N, G·Tq, Tk)
            grad_v_tile.baddbmm_(probs.transpose(1, 2), grad_out_tile)  # (N, Tk, Dv), dV_j += Pᵀ dO_i
            grad_probs = tile_view(storage["grad_probs"], num_matrices, rows, tile_keys)  # (N, G·Tq, Tk)
            torch.bmm(grad_out_tile, value_tile.transpose(1, 2), out=grad_probs)  # (N, G·Tq, Tk)
            grad_scores = grad_probs.sub_(delta_tile).mul_(probs)  # (N, G·Tq, Tk), dS = P ∘ (dP - D)
            grad_k_tile.baddbmm_(grad_scores.transpose(1, 2), q_tile)  # (N, Tk, D), dK_j += dSᵀ Q_i, scaled below
            # dQ_i += dS (scale·K_j), added into the full buffer (FA2's atomic add).
            grad_q_rows = grad_q_grouped[:, :, q_start:q_end]  # (N, G, Tq, D), a view
            if group == 1:
                grad_q_rows.squeeze(1).baddbmm_(grad_scores, key_tile)  # (N, Tq, D)
            else:  # the G heads are apart in dQ: the product goes through a stacked tile
                grad_q_part = tile_view(storage["grad_q"], num_matrices, rows, head_dim)  # (N, G·Tq, D)
                grad_q_part.baddbmm_(grad_scores, key_tile, beta=0.0)  # (N, G·Tq, D), old values ignored
                grad_q_rows.add_(grad_q_part.view(num_matrices, group, tile_len, head_dim))  # (N, G, Tq, D)

        # The key tile is done: dK_j and dV_j are complete, written once (cast to k's, v's dtype).
        grad_k[:, k_start:k_end] = grad_k_tile.mul_(scale)  # (N, Tk, D), dK_j = scale · Σ_i dSᵀ Q_i
        grad_v[:, k_start:k_end] = grad_v_tile  # (N, Tk, Dv)
    return result()
