"""Tiled attention: FlashAttention's forward pass in plain PyTorch, with a hand-written backward.

``scaled_dot_product_attention`` builds the whole ``(Lq, Lk)`` score matrix, 2 GiB for
8 heads at L = 8192 in float32 (and as much again for the weights). This module computes
the same output without ever holding it: queries and keys are cut into tiles of
``block_size``, and for one query tile at a time we walk over the key tiles keeping, per
query row,

- ``m``    the running max of the scores seen so far,
- ``l``    the running sum of ``exp(score - m)``,
- ``acc``  the running *unnormalised* output ``Σ exp(score - m) · v``.

A new key tile whose scores raise the max to ``m_new`` would make the old terms use the
wrong reference, so ``l`` and ``acc`` are first multiplied by ``exp(m - m_new)`` (the
"online softmax"). After the last key tile, ``output = acc / l`` is exactly
``softmax(scores) @ v``. The only large buffer is one ``(G·Tq, Tk)`` score tile per kv head.

With ``is_causal`` a key tile that lies entirely in the future of every query of the tile
is never computed (about half the tiles), and only the tiles the diagonal crosses build a
mask.

Gradients (FlashAttention-2): the forward keeps one number per query row, the log-sum-exp
``lse = m + log(l)``, so that the backward (``tiled_backward.py``) can recompute any tile's
weights as ``exp(score - lse)`` instead of storing them. Only q, k, v, the output and lse
are saved for backward. With ``torch.no_grad()`` (or when no input requires grad) the
in-place loop runs as is, with no autograd bookkeeping.
"""

from __future__ import annotations

import math
import warnings

import torch

from attn_core.attention import check_flag, check_qkv, check_scale, default_scale
from attn_core.flash.tiled_backward import tiled_attention_backward

__all__ = ["tiled_attention", "DEFAULT_BLOCK_SIZE", "TiledAttentionCompileWarning"]


class TiledAttentionCompileWarning(UserWarning):
    """``tiled_attention`` was called inside ``torch.compile``: it runs eagerly there (see its docstring)."""


# The fastest of 128 / 256 / 512 on 2 CPU cores at L = 4096 and 8192, 8 heads, D = 64, 1 or 2
# threads (`bench_tiled_attention.py --sweep`): smaller tiles pay more per-op overhead, larger
# ones (8 MiB of scores for 8 heads) fall out of L2 and waste more work on the causal diagonal.
DEFAULT_BLOCK_SIZE = 256


def check_block_size(block_size: int) -> None:
    """Raise ValueError unless ``block_size`` is an int >= 1."""
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(
            f"block_size must be an int >= 1 (the number of queries and of keys per tile), got {block_size!r}. "
            f"Try the default, {DEFAULT_BLOCK_SIZE}."
        )


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention output computed tile by tile, without the ``(Lq, Lk)`` weights; differentiable.

    Same result as ``scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)[0]``
    up to float rounding, with memory ``O(block_size²)`` per kv head instead of ``O(Lq·Lk)``,
    in the forward and in the backward pass alike.

    Args:
        q: ``(..., Hq, Lq, D)`` queries.
        k: ``(..., Hkv, Lk, D)`` keys; ``Hq`` must be a multiple of ``Hkv``. Query head
            ``h`` uses kv head ``h // (Hq // Hkv)``.
        v: ``(..., Hkv, Lk, Dv)`` values.
        is_causal: query ``i`` sees keys ``0 .. i + (Lk - Lq)``, aligned bottom-right like
            ``causal_mask``. When ``Lq > Lk`` the first ``Lq - Lk`` queries see no key: they
            get a zero output, zero gradients and ``lse = -inf``.
        scale: multiplies ``Q Kᵀ``; defaults to ``1 / sqrt(D)``. A plain number: no gradient
            flows to it.
        block_size: queries and keys per tile.
        return_lse: also return the log-sum-exp of each query's scores (see Returns).

    Returns:
        ``output`` ``(..., Hq, Lq, Dv)`` in the dtype of ``q``; with ``return_lse`` the pair
        ``(output, lse)``, ``lse`` ``(..., Hq, Lq)`` the natural log of ``Σ_j exp(scale·q·k_j)``
        over the keys the query sees (``-inf`` when it sees none). ``lse`` is in the compute
        dtype: float32 for float16/bfloat16/float32 inputs (rounded to bfloat16 it would be off by
        up to ``|lse|·2⁻⁹``, a relative error of as much on every recomputed weight), float64 for
        float64.
        Half-precision inputs are computed in float32 (k and v are converted once, a float32 copy
        of each). Both outputs are differentiable (``merge_attention`` relies on lse's gradient).

    Raises:
        RuntimeError: in backward with ``create_graph=True``: there is no double backward.

    Under ``torch.compile`` this function is not compiled: its tile loop writes in place into
    strided views (``out=``), which TorchDynamo cannot trace, so Dynamo breaks the graph and runs it
    eagerly (``torch._dynamo.explain`` counts no graph for it; ``fullgraph=True`` raises
    ``Unsupported``). The numbers are the eager ones; the code around it still compiles. A
    :class:`TiledAttentionCompileWarning` says so when it happens. For a compiled memory-efficient
    kernel use ``F.scaled_dot_product_attention``.
    """
    if torch.compiler.is_compiling():  # True only while Dynamo traces this body
        warnings.warn(
            "tiled_attention runs eagerly under torch.compile: its tile loop writes in place into strided views "
            "(out=), which TorchDynamo cannot trace, so the graph breaks here. Results are the eager ones; use "
            "F.scaled_dot_product_attention for a compiled kernel.",
            TiledAttentionCompileWarning,
            stacklevel=2,
        )
    group = check_qkv(q, k, v)  # also: floating dtypes, one device
    check_block_size(block_size)
    check_flag("is_causal", is_causal)
    check_flag("return_lse", return_lse)
    check_scale(scale)
    if scale is None:
        scale = default_scale(q.shape[-1])
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        output, lse = TiledAttentionFunction.apply(q, k, v, is_causal, scale, block_size)
    else:
        output, lse = tiled_forward(q, k, v, group, is_causal, scale, block_size, with_lse=return_lse)
    return (output, lse) if return_lse else output


class TiledAttentionFunction(torch.autograd.Function):
    """tiled_forward with the FlashAttention-2 backward; saves q, k, v, output and lse only."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal: bool, scale: float, block_size: int):
        group = q.shape[-3] // k.shape[-3]
        output, lse = tiled_forward(q, k, v, group, is_causal, scale, block_size, with_lse=True)
        ctx.save_for_backward(q, k, v, output, lse)
        ctx.is_causal, ctx.scale, ctx.block_size = is_causal, scale, block_size
        ctx.set_materialize_grads(False)  # an unused output's gradient arrives as None: no zeros made
        return output, lse

    @staticmethod
    def backward(ctx, grad_output, grad_lse):
        # Grad mode is on here only under backward(create_graph=True), asked for to differentiate the
        # gradients again (a gradient penalty, a Hessian-vector product). The tiles are written in
        # place, which autograd cannot follow: say so, rather than return gradients that silently
        # lack their dependence on q, k and v.
        if torch.is_grad_enabled():
            raise RuntimeError(
                "tiled_attention has no double backward: its gradients were requested with create_graph=True "
                "(to differentiate them again), but its backward is written in place and is not differentiable. "
                "Use ac.scaled_dot_product_attention (or F.scaled_dot_product_attention) for higher-order gradients."
            )
        q, k, v, output, lse = ctx.saved_tensors
        grad_q, grad_k, grad_v = tiled_attention_backward(
            q, k, v, output, lse, grad_output, grad_lse, is_causal=ctx.is_causal, scale=ctx.scale,
            block_size=ctx.block_size,
        )  # fmt: skip
        return grad_q, grad_k, grad_v, None, None, None  # nothing for is_causal, scale, block_size


def tiled_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    group: int,
    is_causal: bool,
    scale: float,
    block_size: int,
    *,
    with_lse: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The tile loop (inputs already checked): ``(output, lse)``, lse None unless ``with_lse``."""
    *batch, num_heads, q_len, head_dim = q.shape
    num_kv_heads, k_len, v_dim = k.shape[-3], k.shape[-2], v.shape[-1]
    # float32 accumulation for fp16/bf16 (their exp and long sums lose too much); float64 stays.
    compute_dtype = torch.promote_types(q.dtype, torch.float32)
    num_matrices = math.prod(batch) * num_kv_heads  # one independent attention per (batch, kv head)

    output = torch.empty(*batch, num_heads, q_len, v_dim, dtype=q.dtype, device=q.device)  # (..., Hq, Lq, Dv)
    # Query head h = kv_head·G + g, so the G heads sharing a kv head are adjacent: a view.
    output_grouped = output.view(num_matrices, group, q_len, v_dim)  # (N, G, Lq, Dv)
    lse = torch.empty(*batch, num_heads, q_len, dtype=compute_dtype, device=q.device) if with_lse else None
    lse_grouped = lse.view(num_matrices, group, q_len) if with_lse else None  # (N, G, Lq)

    # Bottom-right alignment: query i sees keys j <= i + offset.
    offset = k_len - q_len
    # Queries before `first_query` see no key at all (only causal with Lq > Lk, or Lk == 0):
    # they are zeros. Every later query sees key 0, but its scores can still be -inf (an -inf
    # in k): the running max is kept >= the lowest finite number for that (see below).
    first_query = min(q_len, max(0, -offset)) if is_causal else 0
    if k_len == 0:
        first_query = q_len
    output_grouped[:, :, :first_query].zero_()
    if with_lse:
        lse_grouped[:, :, :first_query].fill_(-math.inf)  # log of an empty sum
    if first_query == q_len:
        return output, lse

    # (N, L, D) views when the batch dims merge (a copy otherwise, or for the float32 upcast).
    keys = k.reshape(num_matrices, k_len, head_dim).to(compute_dtype)  # (N, Lk, D)
    values = v.reshape(num_matrices, k_len, v_dim).to(compute_dtype)  # (N, Lk, Dv)

    max_rows = group * min(block_size, q_len - first_query)
    max_keys = min(block_size, k_len)
    # Flat buffers that every score / query tile is a contiguous view of: the loops allocate
    # nothing of tile size, and each tile reuses memory that is already in cache.
    scores_storage = torch.empty(num_matrices * max_rows * max_keys, dtype=compute_dtype, device=q.device)  # flat
    q_storage = torch.empty(num_matrices * max_rows * head_dim, dtype=compute_dtype, device=q.device)  # flat

    for q_start in range(first_query, q_len, block_size):
        q_end = min(q_start + block_size, q_len)
        tile_len = q_end - q_start
        rows = group * tile_len
        # Scaling the (Tq, D) queries is cheaper than scaling every (Tq, Tk) score tile. Writing
        # into a contiguous buffer (in compute_dtype) stacks the G heads of a kv head into rows.
        q_tile = q_storage[: num_matrices * rows * head_dim]  # (N·G·Tq·D,) flat
        q_slice = q[..., q_start:q_end, :].to(compute_dtype)  # (..., Hq, Tq, D), a view unless upcast
        torch.mul(q_slice, scale, out=q_tile.view(*batch, num_heads, tile_len, head_dim))  # (..., Hq, Tq, D)
        q_tile = q_tile.view(num_matrices, rows, head_dim)  # (N, G·Tq, D)

        per_row = (num_matrices, rows, 1)
        running_max = torch.full(per_row, -math.inf, dtype=compute_dtype, device=q.device)  # (N, G·Tq, 1)
        running_sum = torch.zeros(num_matrices, rows, 1, dtype=compute_dtype, device=q.device)  # (N, G·Tq, 1)
        acc = torch.zeros(num_matrices, rows, v_dim, dtype=compute_dtype, device=q.device)  # (N, G·Tq, Dv)

        # Causal: the tile's last query sees keys < q_end + offset; later key tiles are skipped.
        # Its first query sees keys < q_start + offset + 1, so tiles ending there need no mask.
        keys_end = min(k_len, q_end + offset) if is_causal else k_len
        unmasked_end = q_start + offset + 1 if is_causal else k_len

        for k_start in range(0, keys_end, block_size):
            k_end = min(k_start + block_size, keys_end)
            tile_keys = k_end - k_start
            scores = scores_storage[: num_matrices * rows * tile_keys]  # (N·G·Tq·Tk,) flat
            scores = scores.view(num_matrices, rows, tile_keys)  # (N, G·Tq, Tk)
            torch.bmm(q_tile, keys[:, k_start:k_end].transpose(1, 2), out=scores)  # (N, G·Tq, Tk)

            if k_end > unmasked_end:
                query_pos = torch.arange(q_start, q_end, device=q.device).unsqueeze(-1)  # (Tq, 1)
                key_pos = torch.arange(k_start, k_end, device=q.device)  # (Tk,)
                future = key_pos > query_pos + offset  # (Tq, Tk)
                # -inf, so exp() gives exactly 0. A row whose keys here are all future has a
                # finite running max from key tile 0 (see first_query), so no NaN appears.
                scores_by_head = scores.view(num_matrices, group, tile_len, tile_keys)  # (N, G, Tq, Tk)
                scores_by_head.masked_fill_(future, -math.inf)  # (N, G, Tq, Tk), the mask broadcasts

            new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))  # (N, G·Tq, 1)
            # A row whose scores so far are all -inf would subtract (-inf) - (-inf) = NaN. As in
            # FlashAttention, use a finite reference for it: exp(-inf - finite) = 0, so the row's
            # sums stay 0 until a finite score arrives, and its rescale then multiplies zeros.
            # A finite max is never below finfo.min, so for every other row this changes nothing.
            new_max.clamp_(min=torch.finfo(compute_dtype).min)  # (N, G·Tq, 1)
            probs = scores.sub_(new_max).exp_()  # (N, G·Tq, Tk), in place: unnormalised weights
            # exp(m_old - m_new) <= 1 brings the earlier terms to the new reference max
            # (exactly 0 on the first key tile, where m_old = -inf; sums are 0 there anyway).
            rescale = running_max.sub_(new_max).exp_()  # (N, G·Tq, 1), reuses running_max's memory
            running_sum.mul_(rescale).add_(probs.sum(dim=-1, keepdim=True))  # (N, G·Tq, 1)
            acc.mul_(rescale).baddbmm_(probs, values[:, k_start:k_end])  # (N, G·Tq, Dv)
            running_max = new_max

        # Normalise straight into the output (casting back to q's dtype): no intermediate copy.
        torch.div(
            acc.view(num_matrices, group, tile_len, v_dim),  # (N, G, Tq, Dv)
            running_sum.view(num_matrices, group, tile_len, 1),  # (N, G, Tq, 1)
            out=output_grouped[:, :, q_start:q_end],  # (N, G, Tq, Dv)
        )
        if with_lse:
            # lse = m + log(l). A row whose scores are all -inf (an -inf key, no mask) has l = 0:
            # lse = -inf there, and its output is NaN, as in scaled_dot_product_attention.
            torch.add(
                running_max.view(num_matrices, group, tile_len),  # (N, G, Tq)
                running_sum.log_().view(num_matrices, group, tile_len),  # (N, G, Tq)
                out=lse_grouped[:, :, q_start:q_end],  # (N, G, Tq)
            )
    return output, lse
