"""Linear attention and the gated delta rule: attention whose state has a fixed size.

Softmax attention keeps every key and value (the KV cache grows with every token). Drop the softmax and
``(Q Kᵀ) V = Q (Kᵀ V)``: a causal read becomes a running matrix ``S = Σ_j k_j v_jᵀ`` of size ``(Dk, Dv)``, an RNN.
Two fixes make it remember well:

- the delta rule ``S ← S + β k (v − Sᵀk)ᵀ``: before writing ``v`` under key ``k`` it erases what ``k`` already
  read (one online least-squares step on ``‖Sᵀk − v‖²``, learning rate β), so a reused key overwrites, not piles up;
- the gate ``S ← exp(g)·S`` (``g ≤ 0``): forget old content at a learned rate.

Order per token (Qwen3-Next / Qwen3.5, Hugging Face's ``torch_recurrent_gated_delta_rule``): decay, then the delta
write, then read ``o_t = scale · Sᵀq_t`` (a token reads its own write).

``chunk_size=C`` computes the same thing chunk by chunk: inside a chunk the writes depend on each other only through a
unit lower-triangular system (the WY / UT transform), solved once per chunk with matmuls; only the C-times shorter scan
over chunks is sequential. Every decay factor is ``exp`` of a non-positive number: the gate sum over tokens
``j+1..i`` (``j ≤ i``), summed directly as Mamba-2's ``segsum`` does, not as a difference ``G_i − G_j`` of cumulative
sums (which is ``−inf − (−inf) = NaN`` after a ``g = −inf`` token, and a difference of two large rounded numbers in
half precision). The chunked form runs in at least float32, as Hugging Face's ``torch_chunk_gated_delta_rule``: a
float16 cumulative gate would overflow to ``−inf`` past 65504 (``g ≈ −1100`` over a 64-token chunk). Very negative
gates therefore underflow to 0 instead of overflowing to inf · 0 = NaN.

``GatedDeltaNet`` (Qwen3.5's layer) and ``LinearAttentionCache`` live in ``attn_core.linear.gated_deltanet``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attn_core.attention import check_scale

__all__ = ["gated_delta_rule", "linear_attention"]

LINEAR_ATTENTION_CHUNK = 64  # linear_attention's internal chunk: any size gives the same result up to rounding


def _check_inputs(q, k, v, g, beta, initial_state, chunk_size) -> tuple[int, int]:
    """Validate shapes (naming them); returns (Hk, Hv)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}.")
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}.")
        if t.dim() != 4:
            raise ValueError(
                f"{name} must be 4-D, head-first: q, k (B, Hk, L, Dk) and v (B, Hv, L, Dv); "
                f"got {name} {tuple(t.shape)}."
            )
    if q.shape != k.shape:
        raise ValueError(
            f"q and k must have the same shape (B, Hk, L, Dk); got q {tuple(q.shape)}, k {tuple(k.shape)}."
        )
    batch, num_k_heads, length, head_k_dim = k.shape
    num_v_heads = v.shape[1]
    if v.shape[0] != batch or v.shape[2] != length:
        raise ValueError(
            f"v must be (B, Hv, L, Dv) with the B and L of k; got k {tuple(k.shape)} (B={batch}, L={length}), "
            f"v {tuple(v.shape)}."
        )
    if num_v_heads % num_k_heads != 0:
        raise ValueError(
            f"Hv={num_v_heads} value heads must be a multiple of Hk={num_k_heads} query/key heads (value head h reads "
            f"q/k head h // (Hv // Hk)); got k {tuple(k.shape)}, v {tuple(v.shape)}."
        )
    expected = (batch, num_v_heads, length)
    for name, t in (("g", g), ("beta", beta)):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of shape (B, Hv, L) = {expected}, got {type(t).__name__}.")
        if tuple(t.shape) != expected:
            raise ValueError(
                f"{name} must be (B, Hv, L) = {expected} (one value per token and value head); got {tuple(t.shape)}."
            )
    if g is not None and bool((g > 0).any()):
        raise ValueError(
            f"g is a log decay: the state is multiplied by exp(g) each token, so g must be <= 0; got max g = "
            f"{g.max().item():.4g}. Pass g = -softplus(...) or log of a value in (0, 1]."
        )
    if beta is not None and bool(((beta < 0) | (beta > 1)).any()):
        raise ValueError(
            f"beta is the write strength, a learning rate in [0, 1]: beta = sigmoid(...) in Gated DeltaNet and "
            f"Qwen3-Next (0 writes nothing, 1 replaces what the key read). Got beta from {beta.min().item():.4g} to "
            f"{beta.max().item():.4g}. (Up to 2 is the negative-eigenvalue variant of Grazzi et al. 2025, a different "
            "rule; past 2 the state grows without bound even for unit keys.)"
        )
    if initial_state is not None:
        state_shape = (batch, num_v_heads, head_k_dim, v.shape[-1])
        if not isinstance(initial_state, torch.Tensor):
            raise TypeError(
                f"initial_state must be None or a tensor {state_shape}, got {type(initial_state).__name__}."
            )
        if tuple(initial_state.shape) != state_shape:
            raise ValueError(
                f"initial_state must be (B, Hv, Dk, Dv) = {state_shape}; got {tuple(initial_state.shape)}."
            )
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(
            f"chunk_size must be None (token-by-token recurrence) or an int >= 1 (chunked form), got {chunk_size!r}."
        )
    return num_k_heads, num_v_heads


def _prepare(q, k, v, g, beta, scale, initial_state, dtype):
    """Expand q/k to the value heads, fold the scale into q, fill defaults; everything in ``dtype``."""
    batch, num_k_heads, length, head_k_dim = k.shape
    num_v_heads, head_v_dim = v.shape[1], v.shape[-1]
    group = num_v_heads // num_k_heads
    # Value head h reads q/k head h // group: repeat_interleave (repeat would pair it with head h % Hk).
    q = q.repeat_interleave(group, dim=1) if group > 1 else q  # (B, Hv, L, Dk)
    k = k.repeat_interleave(group, dim=1) if group > 1 else k  # (B, Hv, L, Dk)
    scale = 1.0 / math.sqrt(head_k_dim) if scale is None else scale
    q = q.to(dtype) * scale  # (B, Hv, L, Dk): a new tensor, the caller's q is untouched
    v = v.to(dtype)  # (B, Hv, L, Dv)
    k = k.to(dtype)  # (B, Hv, L, Dk)
    g = (
        torch.zeros(batch, num_v_heads, length, dtype=dtype, device=q.device) if g is None else g.to(dtype)
    )  # (B, Hv, L)
    if beta is not None:
        beta = beta.to(dtype)  # (B, Hv, L)
    if initial_state is None:
        state = torch.zeros(batch, num_v_heads, head_k_dim, head_v_dim, dtype=dtype, device=q.device)  # (B, Hv, Dk, Dv)
    else:
        state = initial_state.to(dtype).clone()  # (B, Hv, Dk, Dv): never write into the caller's tensor
    return q, k, v, g, beta, state


def _recurrent(q, k, v, g, beta, state):
    """Token by token: decay, delta write, read. q, k (B, H, L, Dk), v (B, H, L, Dv), g/beta (B, H, L)."""
    outputs = []
    for t in range(q.shape[2]):
        state = state * g[:, :, t].exp()[..., None, None]  # (B, H, Dk, Dv) decay first
        k_t = k[:, :, t]  # (B, H, Dk)
        recalled = torch.einsum("bhkv,bhk->bhv", state, k_t)  # (B, H, Dv): what k_t reads now
        delta = beta[:, :, t, None] * (v[:, :, t] - recalled)  # (B, H, Dv): erase that, write v
        state = state + k_t[..., :, None] * delta[..., None, :]  # (B, H, Dk, Dv)
        outputs.append(torch.einsum("bhkv,bhk->bhv", state, q[:, :, t]))  # (B, H, Dv): t reads its own write
    out = torch.stack(outputs, dim=2) if outputs else v.new_zeros(v.shape)  # (B, H, L, Dv)
    return out, state


def _segment_sums(g: torch.Tensor) -> torch.Tensor:
    """``g (..., C)`` -> ``(..., C, C)``: entry ``[i, j]`` = ``g_{j+1} + ... + g_i`` for ``j ≤ i`` (0 on the
    diagonal), ``-inf`` above it. Summed directly (Mamba-2's ``segsum``), never as ``G_i − G_j``: a ``g = −inf`` token
    makes the later sums ``−inf`` and leaves the others exact, where the difference would be ``−inf − (−inf) = NaN``."""
    size = g.shape[-1]
    ones = torch.ones(size, size, dtype=torch.bool, device=g.device)  # (C, C)
    per_token = g[..., :, None].expand(*g.shape, size)  # (..., C, C): entry [t, j] = g_t
    sums = per_token.masked_fill(~ones.tril(-1), 0.0).cumsum(-2)  # (..., C, C): Σ_{j < t ≤ i} g_t
    return sums.masked_fill(~ones.tril(), float("-inf"))  # (..., C, C): j > i is the future


def _chunked(q, k, v, g, beta, state, chunk_size: int):
    """Chunked form, computed in the dtype of its inputs (the callers pass at least float32). beta None = plain
    (gated) linear attention: the written values are v itself, no solve.

    Inside a chunk, with G = cumsum(g) from the chunk start and S₀ the state entering it, the values actually written
    u_r = β_r (v_r − exp(G_r) S₀ᵀk_r − Σ_{j<r} exp(G_r − G_j) (k_r·k_j) u_j) solve (I + A) U = βV − β exp(G) K S₀,
    A strictly lower triangular. Then o_r = exp(G_r) S₀ᵀq_r + Σ_{j≤r} exp(G_r − G_j)(q_r·k_j) u_j and
    S = exp(G_C) S₀ + Σ_j exp(G_C − G_j) k_j u_jᵀ. Every G_r − G_j is computed as the segment sum g_{j+1} + ... + g_r.
    """
    batch, heads, length, head_k_dim = k.shape
    head_v_dim = v.shape[-1]
    pad = (-length) % chunk_size
    # Padding tokens have k = v = 0, g = 0, beta = 0: they change nothing, and their outputs are dropped.
    q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))  # (B, H, L + pad, D)
    g = F.pad(g, (0, pad))  # (B, H, L + pad)
    num_chunks = (length + pad) // chunk_size
    q, k, v = (t.reshape(batch, heads, num_chunks, chunk_size, t.shape[-1]) for t in (q, k, v))  # (B, H, N, C, D)
    g = g.reshape(batch, heads, num_chunks, chunk_size)  # (B, H, N, C)
    cum_g = g.cumsum(-1)  # (B, H, N, C) log decay since the chunk start: -inf stays -inf, never NaN
    gate_sums = _segment_sums(g)  # (B, H, N, C, C): log decay from token j to token i, -inf for j > i
    pair_decay = gate_sums.exp()  # (B, H, N, C, C) exp of a non-positive number (or -inf → 0): never inf · 0
    read_weights = (q @ k.transpose(-1, -2)) * pair_decay  # (B, H, N, C, C) scale already in q
    q_decayed = q * cum_g.exp()[..., None]  # (B, H, N, C, Dk): reads S₀ through exp(G_r)
    k_to_end = k * gate_sums[..., -1, :].exp()[..., None]  # (B, H, N, C, Dk): decay left until the chunk's end
    chunk_decay = cum_g[..., -1].exp()[..., None, None]  # (B, H, N, 1, 1)
    if beta is None:
        written, k_state = v, None  # (B, H, N, C, Dv): linear attention writes v itself
    else:
        beta = F.pad(beta, (0, pad)).reshape(batch, heads, num_chunks, chunk_size, 1)  # (B, H, N, C, 1)
        system = ((beta * k) @ k.transpose(-1, -2)) * pair_decay  # (B, H, N, C, C) I + A (diagonal ignored)
        rhs = torch.cat([beta * v, beta * k * cum_g.exp()[..., None]], dim=-1)  # (B, H, N, C, Dv + Dk)
        solved = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)  # (B, H, N, C, Dv + Dk)
        written, k_state = solved[..., :head_v_dim], solved[..., head_v_dim:]  # (B, H, N, C, Dv), (.., Dk)
    outputs = []
    for n in range(num_chunks):
        u = written[:, :, n] if k_state is None else written[:, :, n] - k_state[:, :, n] @ state  # (B, H, C, Dv)
        outputs.append(q_decayed[:, :, n] @ state + read_weights[:, :, n] @ u)  # (B, H, C, Dv)
        state = state * chunk_decay[:, :, n] + k_to_end[:, :, n].transpose(-1, -2) @ u  # (B, H, Dk, Dv)
    out = (
        torch.cat(outputs, dim=2)[:, :, :length] if outputs else v.new_zeros(batch, heads, 0, head_v_dim)
    )  # (B, H, L, Dv)
    return out, state


def _chunk_dtype(dtype: torch.dtype) -> torch.dtype:
    """The chunked form's dtype: at least float32 (Hugging Face's chunked rule casts to float32 too)."""
    return torch.promote_types(dtype, torch.float32)


def gated_delta_rule(q, k, v, g, beta, *, scale=None, chunk_size=None, initial_state=None):
    """The gated delta rule (Gated DeltaNet, Yang et al. 2024), head-first.

    q, k ``(B, Hk, L, Dk)``; v ``(B, Hv, L, Dv)``; g (log decay, ≤ 0) and beta ``(B, Hv, L)``; initial_state
    ``(B, Hv, Dk, Dv)`` or None (zeros). Value head h reads q/k head ``h // (Hv // Hk)``. For each token:
    ``S ← exp(g_t) S``; ``S ← S + β_t k_t (v_t − Sᵀk_t)ᵀ``; ``o_t = scale · Sᵀq_t`` (scale None = 1/sqrt(Dk)).
    q and k are used as given (no l2-normalisation here); beta in [0, 1]. ``chunk_size=None`` runs the recurrence; an
    int C runs the chunked form (any L, computed in at least float32), equal up to rounding. Returns
    ``(out (B, Hv, L, Dv), final_state (B, Hv, Dk, Dv))`` in q's dtype; passing ``final_state`` as the next call's
    ``initial_state`` continues the sequence.
    """
    _check_inputs(q, k, v, g, beta, initial_state, chunk_size)
    if g is None or beta is None:
        raise ValueError("gated_delta_rule needs g and beta tensors (B, Hv, L); g = zeros is DeltaNet.")
    check_scale(scale)
    dtype = q.dtype
    if chunk_size is None:
        return _recurrent(*_prepare(q, k, v, g, beta, scale, initial_state, dtype))
    out, state = _chunked(*_prepare(q, k, v, g, beta, scale, initial_state, _chunk_dtype(dtype)), chunk_size)
    return out.to(dtype), state.to(dtype)


def linear_attention(q, k, v, g=None, *no_beta, scale=None, initial_state=None):
    """Causal (gated) linear attention: ``S ← exp(g_t) S + k_t v_tᵀ``, ``o_t = scale · Sᵀq_t``.

    Same layout as ``gated_delta_rule``; g None = ungated. Equivalently, with G = cumsum(g):
    ``out_i = Σ_{j≤i} scale (q_i·k_j) exp(G_i − G_j) v_j + scale exp(G_i) S₀ᵀq_i``: attention without the softmax.
    Returns ``(out (B, Hv, L, Dv), final_state (B, Hv, Dk, Dv))``.
    """
    if no_beta:
        raise TypeError(
            f"linear_attention(q, k, v, g=None) takes no beta ({len(no_beta)} extra positional argument(s) given): it "
            "writes every value in full. For a write of strength beta call gated_delta_rule(q, k, v, g, beta)."
        )
    _check_inputs(q, k, v, g, None, initial_state, None)
    check_scale(scale)
    q32, k32, v32, g32, _, state = _prepare(q, k, v, g, None, scale, initial_state, _chunk_dtype(q.dtype))
    out, state = _chunked(q32, k32, v32, g32, None, state, LINEAR_ATTENTION_CHUNK)
    return out.to(q.dtype), state.to(q.dtype)
