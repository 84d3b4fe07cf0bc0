"""Kimi Delta Attention (KDA, Kimi Linear 2025): the gated delta rule with a per-*channel* decay.

Gated DeltaNet forgets with one scalar per token and head, ``S ← exp(g_t) S``. KDA gives every key channel its own
rate: ``S ← diag(exp(g_t)) S`` with ``g_t`` a vector ``(Dk,)`` of log decays, so some rows of the state (key
channels) keep content for long while others are rewritten every few tokens. Per token (Hugging Face's
``recurrent_kimi_delta_attention``): decay, then the delta write ``S ← S + β k (v − Sᵀk)ᵀ``, then read
``o = scale · Sᵀq``.

The chunked form is the gated delta rule's with every pair decay a per-channel vector: inside a chunk
``(q_r · k_j)`` becomes ``Σ_c q_rc k_jc exp(G_rc − G_jc)``; each ``G_rc − G_jc`` is summed directly
(``g_{j+1,c} + ... + g_{r,c}``, never as a difference of large cumulative sums) in at least float32.

``KimiDeltaAttention`` is Hugging Face's ``KimiLinearDeltaAttention`` (same parameter names, so its state_dict loads
strictly), with ``ac.LinearAttentionCache`` for decode and chunked prefill.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attn_core.attention import check_scale
from attn_core.linear.gated_deltanet import LinearAttentionCache

__all__ = ["kda_rule", "KimiDeltaAttention", "causal_depthwise_conv", "check_layer_input"]

KDA_LAYER_CHUNK = 64  # the layer's chunk for multi-token calls (HF's torch path uses 64 too)


def _check(q, k, v, g, beta, initial_state, chunk_size) -> None:
    for name, t in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point torch.Tensor, got {getattr(t, 'dtype', type(t))}.")
    if q.dim() != 4 or q.shape != k.shape:
        raise ValueError(f"q and k must be (B, H, L, Dk) and equal in shape; got {tuple(q.shape)}, {tuple(k.shape)}.")
    batch, heads, length, _ = k.shape
    if v.dim() != 4 or tuple(v.shape[:3]) != (batch, heads, length):
        raise ValueError(f"v must be (B, H, L, Dv) with B, H, L of k {tuple(k.shape)}; got {tuple(v.shape)}.")
    if g.shape != k.shape:
        raise ValueError(
            f"g is KDA's per-channel log decay, one per key channel: (B, H, L, Dk) = {tuple(k.shape)}; got "
            f"{tuple(g.shape)}. (A (B, H, L) gate is Gated DeltaNet's: use ac.gated_delta_rule.)"
        )
    if bool((g > 0).any()):
        raise ValueError(f"g is a log decay (state × exp(g) per token), so g <= 0; got max g = {g.max().item():.4g}.")
    if tuple(beta.shape) != (batch, heads, length):
        raise ValueError(f"beta must be (B, H, L) = {(batch, heads, length)}; got {tuple(beta.shape)}.")
    if bool(((beta < 0) | (beta > 1)).any()):
        raise ValueError("beta is the delta rule's write strength, in [0, 1] (sigmoid(...) in KDA).")
    if initial_state is not None and tuple(initial_state.shape) != (batch, heads, k.shape[-1], v.shape[-1]):
        raise ValueError(
            f"initial_state must be (B, H, Dk, Dv) = {(batch, heads, k.shape[-1], v.shape[-1])}; "
            f"got {tuple(initial_state.shape)}."
        )
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size must be None (recurrence) or an int >= 1, got {chunk_size!r}.")


def _recurrent(q, k, v, g, beta, state):
    """Token by token. q, k, g (B, H, L, Dk), v (B, H, L, Dv), beta (B, H, L), state (B, H, Dk, Dv)."""
    outputs = []
    for t in range(q.shape[2]):
        state = state * g[:, :, t].exp()[..., None]  # (B, H, Dk, Dv): each key channel (row) decays at its rate
        k_t = k[:, :, t]  # (B, H, Dk)
        delta = beta[:, :, t, None] * (v[:, :, t] - torch.einsum("bhkv,bhk->bhv", state, k_t))  # (B, H, Dv)
        state = state + k_t[..., :, None] * delta[..., None, :]  # (B, H, Dk, Dv)
        outputs.append(torch.einsum("bhkv,bhk->bhv", state, q[:, :, t]))  # (B, H, Dv)
    out = torch.stack(outputs, dim=2) if outputs else v.new_zeros(v.shape)  # (B, H, L, Dv)
    return out, state


def _chunked(q, k, v, g, beta, state, chunk_size):
    """Chunked form (the UT transform of the delta rule with per-channel pair decays); see the module docstring."""
    batch, heads, length, head_k_dim = k.shape
    head_v_dim = v.shape[-1]
    pad = (-length) % chunk_size  # padding tokens: k = v = g = beta = 0 change nothing; their outputs are dropped
    q, k, v, g = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v, g))  # (B, H, L + pad, D)
    beta = F.pad(beta, (0, pad))  # (B, H, L + pad)
    n_chunks = (length + pad) // chunk_size
    q, k, v, g = (t.reshape(batch, heads, n_chunks, chunk_size, t.shape[-1]) for t in (q, k, v, g))  # (B,H,N,C,D)
    beta = beta.reshape(batch, heads, n_chunks, chunk_size, 1)  # (B, H, N, C, 1)
    cum_g = g.cumsum(-2)  # (B, H, N, C, Dk) log decay since the chunk start, per channel
    lower = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=g.device)  # (C, C)
    # segment sums per channel: [i, j, c] = g_{j+1,c} + ... + g_{i,c} for j <= i, summed directly
    per_token = g[..., :, None, :].expand(batch, heads, n_chunks, chunk_size, chunk_size, head_k_dim)
    seg = per_token.masked_fill(~lower.tril(-1)[..., None], 0.0).cumsum(-3)  # (B, H, N, C, C, Dk)
    pair_decay = seg.masked_fill(~lower.tril()[..., None], float("-inf")).exp()  # (B, H, N, C, C, Dk): 0 above
    read_weights = torch.einsum("bhnic,bhnjc,bhnijc->bhnij", q, k, pair_decay)  # (B, H, N, C, C) scale in q
    system = beta * torch.einsum("bhnic,bhnjc,bhnijc->bhnij", k, k, pair_decay)  # (B, H, N, C, C) I + A
    rhs = torch.cat([beta * v, beta * k * cum_g.exp()], dim=-1)  # (B, H, N, C, Dv + Dk)
    solved = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)  # (B, H, N, C, Dv + Dk)
    written, k_state = solved[..., :head_v_dim], solved[..., head_v_dim:]  # (B,H,N,C,Dv), (B,H,N,C,Dk)
    q_decayed = q * cum_g.exp()  # (B, H, N, C, Dk) reads the entering state through exp(G_r)
    k_to_end = k * seg[..., -1, :, :].exp()  # (B, H, N, C, Dk) decay left until the chunk's end
    chunk_decay = cum_g[..., -1, :].exp()[..., None]  # (B, H, N, Dk, 1)
    outputs = []
    for n in range(n_chunks):
        u = written[:, :, n] - k_state[:, :, n] @ state  # (B, H, C, Dv) the values actually written
        outputs.append(q_decayed[:, :, n] @ state + read_weights[:, :, n] @ u)  # (B, H, C, Dv)
        state = state * chunk_decay[:, :, n] + k_to_end[:, :, n].transpose(-1, -2) @ u  # (B, H, Dk, Dv)
    out = torch.cat(outputs, dim=2)[:, :, :length] if outputs else v.new_zeros(batch, heads, 0, head_v_dim)
    return out, state


def kda_rule(q, k, v, g, beta, *, scale=None, chunk_size=None, initial_state=None):
    """The KDA recurrence, head-first: q, k, g ``(B, H, L, Dk)`` (g a per-channel log decay ≤ 0), v ``(B, H, L, Dv)``,
    beta ``(B, H, L)`` in [0, 1], initial_state ``(B, H, Dk, Dv)`` or None (zeros).

    ``S ← diag(exp(g_t)) S``; ``S ← S + β_t k_t (v_t − Sᵀk_t)ᵀ``; ``o_t = scale · Sᵀq_t`` (scale None = 1/sqrt(Dk)).
    chunk_size None runs the recurrence in the inputs' dtype; an int runs the chunked form in at least float32 (the
    cumulative gates never in half precision), equal up to rounding. Returns ``(out (B, H, L, Dv), state)`` in the
    inputs' dtype. Inputs are not modified."""
    _check(q, k, v, g, beta, initial_state, chunk_size)
    check_scale(scale)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    dtype = q.dtype if chunk_size is None else torch.promote_types(q.dtype, torch.float32)
    batch, heads, _, head_k_dim = k.shape
    if initial_state is None:
        state = torch.zeros(batch, heads, head_k_dim, v.shape[-1], dtype=dtype, device=q.device)  # (B, H, Dk, Dv)
    else:
        state = initial_state.to(dtype)  # (B, H, Dk, Dv): never written in place
    args = (q.to(dtype) * scale, k.to(dtype), v.to(dtype), g.to(dtype), beta.to(dtype), state)
    out, state = _recurrent(*args) if chunk_size is None else _chunked(*args, chunk_size)
    return out.to(q.dtype), state.to(q.dtype)


def check_layer_input(layer, x, cache, hidden_dim: int) -> None:
    """The shared checks of the linear / SSM layers: x ``(B, L, hidden)`` floating point in the weights' dtype; cache
    None or an ``ac.LinearAttentionCache`` bound to this layer, holding the same batch and dtype."""
    if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != hidden_dim:
        raise ValueError(f"x must be (B, L, hidden_dim={hidden_dim}), got {getattr(x, 'shape', type(x).__name__)}.")
    weight_dtype = next(layer.parameters()).dtype
    if not x.is_floating_point() or (x.dtype != weight_dtype and not torch.is_autocast_enabled(x.device.type)):
        raise TypeError(
            f"x is {x.dtype} but this layer's weights are {weight_dtype}: pass hidden states (token ids go through "
            f"an embedding first) in the weights' dtype, x.to({weight_dtype}) or layer.to(x.dtype)."
        )
    if cache is None:
        return
    if not isinstance(cache, LinearAttentionCache):
        raise TypeError(
            f"cache must be an ac.LinearAttentionCache (a fixed-size state), got {type(cache).__name__}; a KVCache "
            "holds keys/values for softmax attention layers."
        )
    cache.bind(layer)
    state = cache.recurrent_state
    if state is not None and (state.shape[0] != x.shape[0] or state.dtype != x.dtype):
        raise ValueError(
            f"this cache holds batch {state.shape[0]} in {state.dtype}; x is {tuple(x.shape)} in {x.dtype}. "
            "Use a fresh LinearAttentionCache for a new batch."
        )


def causal_depthwise_conv(mixed, weight, bias, past):
    """Causal depthwise conv of ``mixed (B, C, L)`` with ``weight (C, 1, K)``; the left context is ``past``
    ``(B, C, K−1)`` (the cached last inputs) or zeros. Returns ``(out (B, C, L), the last K−1 inputs (B, C, K−1))``."""
    batch, channels, _ = mixed.shape
    left = weight.shape[-1] - 1
    if past is None:
        past = mixed.new_zeros(batch, channels, left)  # (B, C, K-1) zeros before the first token
    padded = torch.cat([past, mixed], dim=-1)  # (B, C, K-1+L)
    new_past = padded[:, :, padded.shape[-1] - left :].clone()  # (B, C, K-1)
    if mixed.shape[-1] == 0:
        return mixed, new_past
    return F.conv1d(padded, weight, bias, groups=channels), new_past  # (B, C, L)


class KimiForgetGate(nn.Module):
    """KDA's per-channel log decay ``g = −exp(A_log) · softplus(f_b(f_a(x)) + dt_bias)`` (HF ``KimiLinearForgetGate``:
    a low-rank projection to one rate per channel, one scale ``exp(A_log)`` per head)."""

    def __init__(self, hidden_dim: int, num_heads: int, head_dim: int) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.f_a_proj = nn.Linear(hidden_dim, head_dim, bias=False)
        self.f_b_proj = nn.Linear(head_dim, num_heads * head_dim, bias=False)
        self.dt_bias = nn.Parameter(torch.zeros(num_heads * head_dim))
        self.A_log = nn.Parameter(torch.zeros(1, 1, num_heads, 1))

    def forward(self, x):
        batch, length, _ = x.shape
        pre = (self.f_b_proj(self.f_a_proj(x)) + self.dt_bias).view(batch, length, -1, self.head_dim)  # (B, L, H, Dk)
        # softplus as HF: x itself above 20 (log(1 + exp(x)) = x to float precision there)
        soft = torch.where(pre > 20.0, pre, torch.log1p(torch.exp(pre.clamp(max=20.0))))  # (B, L, H, Dk)
        return -self.A_log.exp() * soft  # (B, L, H, Dk) log decay <= 0


class KimiGatedRMSNorm(nn.Module):
    """RMSNorm per head times ``sigmoid(gate)`` (KDA's output gate is a sigmoid; Qwen3.5's is a SiLU)."""

    def __init__(self, head_dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(head_dim))
        self.eps = eps

    def forward(self, out, gate):
        out = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., D)
        return self.weight * out * torch.sigmoid(gate)  # (..., D)


class KimiDeltaAttention(nn.Module):
    """Kimi Linear's KDA layer (HF ``KimiLinearDeltaAttention``): q/k/v projections → causal depthwise conv (kernel K)
    → SiLU → l2-normalised q, k → ``kda_rule`` with ``beta = sigmoid(b_proj x)`` and the per-channel forget gate →
    RMSNorm gated by ``sigmoid(g_b(g_a x))`` → ``o_proj``. ``forward(x (B, L, hidden), *, positions=None,
    cache=None)``; positions are accepted for the common layer signature and unused (no RoPE in a KDA layer)."""

    def __init__(self, hidden_dim, *, num_heads, head_dim, conv_kernel_size=4, eps=1e-6) -> None:
        super().__init__()
        for name, value in (("hidden_dim", hidden_dim), ("num_heads", num_heads), ("head_dim", head_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}.")
        self.hidden_dim, self.num_heads, self.head_dim = hidden_dim, num_heads, head_dim
        self.qkv_dim = num_heads * head_dim
        self.conv_kernel_size = conv_kernel_size
        self.q_proj = nn.Linear(hidden_dim, self.qkv_dim, bias=False)
        self.k_proj = nn.Linear(hidden_dim, self.qkv_dim, bias=False)
        self.v_proj = nn.Linear(hidden_dim, self.qkv_dim, bias=False)
        self.conv1d = nn.Conv1d(
            3 * self.qkv_dim, 3 * self.qkv_dim, conv_kernel_size, groups=3 * self.qkv_dim, bias=False
        )
        self.forget_gate = KimiForgetGate(hidden_dim, num_heads, head_dim)
        self.b_proj = nn.Linear(hidden_dim, num_heads, bias=False)
        self.g_a_proj = nn.Linear(hidden_dim, head_dim, bias=False)
        self.g_b_proj = nn.Linear(head_dim, self.qkv_dim, bias=False)
        self.o_norm = KimiGatedRMSNorm(head_dim, eps)
        self.o_proj = nn.Linear(self.qkv_dim, hidden_dim, bias=False)
        self.l2_eps = 1e-6  # HF's l2norm: x / sqrt(Σx² + eps), eps inside the root

    def forward(self, x, *, positions=None, cache=None):
        check_layer_input(self, x, cache, self.hidden_dim)
        batch, length, _ = x.shape
        mixed = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1).transpose(1, 2)  # (B, 3HD, L)
        past = None if cache is None else cache.conv_state
        mixed, conv_state = causal_depthwise_conv(mixed, self.conv1d.weight, None, past)  # (B, 3HD, L)
        q, k, v = F.silu(mixed).transpose(1, 2).split(self.qkv_dim, dim=-1)  # 3 × (B, L, H·D)
        q, k, v = (t.reshape(batch, length, self.num_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        q = q / torch.sqrt(q.pow(2).sum(-1, keepdim=True) + self.l2_eps)  # (B, H, L, D)
        k = k / torch.sqrt(k.pow(2).sum(-1, keepdim=True) + self.l2_eps)  # (B, H, L, D)
        g = self.forget_gate(x).transpose(1, 2)  # (B, H, L, D)
        beta = torch.sigmoid(self.b_proj(x)).transpose(1, 2)  # (B, H, L)
        state = None if cache is None else cache.recurrent_state  # (B, H, D, D) or None
        chunk = None if length == 1 else KDA_LAYER_CHUNK
        out, state = kda_rule(q, k, v, g, beta, chunk_size=chunk, initial_state=state)  # (B, H, L, D)
        if cache is not None:
            cache.conv_state, cache.recurrent_state = conv_state, state
            cache._length += length
        gate = self.g_b_proj(self.g_a_proj(x)).reshape(batch, length, self.num_heads, self.head_dim)  # (B, L, H, D)
        out = self.o_norm(out.transpose(1, 2), gate)  # (B, L, H, D)
        return self.o_proj(out.reshape(batch, length, self.qkv_dim))  # (B, L, hidden)
