"""Qwen3.5's linear-attention layer (Gated DeltaNet) and the fixed-size cache it carries between calls.

The layer: ``in_proj_qkv`` → causal depthwise conv (kernel K, zeros on the left) → SiLU → split [q | k | v] →
l2-normalise q and k per head → ``gated_delta_rule`` with ``beta = sigmoid(in_proj_b x)`` and
``g = −exp(A_log) · softplus(in_proj_a x + dt_bias)`` → per value head RMSNorm gated by ``silu(in_proj_z x)``
→ ``out_proj``.
Parameter names and shapes equal Hugging Face's ``Qwen3_5GatedDeltaNet``, so its ``state_dict`` loads here.

The cache is what makes decoding cost O(1) per token: the last K−1 conv inputs and one ``(Dk, Dv)`` matrix per value
head, however long the sequence. Hugging Face keeps K conv columns (it re-convolves the whole window); K−1 suffice.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attn_core.caches.kv_cache import BoundToOneLayer
from attn_core.linear.linear_attention import gated_delta_rule

__all__ = ["GatedDeltaNet", "GatedRMSNorm", "LinearAttentionCache"]

NORM_EPS = 1e-6  # Qwen3.5's rms_norm_eps, and the l2norm's eps (inside the square root, as HF: not a clamp)
LAYER_CHUNK = 64  # chunk size for a multi-token pass (Hugging Face's CPU fallback uses 64 too)


class LinearAttentionCache(BoundToOneLayer):
    """What one ``GatedDeltaNet`` carries between calls: ``conv_state`` ``(B, C, K−1)``, ``recurrent_state``
    ``(B, Hv, Dk, Dv)``; both None before the first call. ``len(cache)`` = tokens seen; ``nbytes`` is constant once
    filled, however many tokens: ``B · (C · (K−1) + Hv · Dk · Dv) · element_size``. One cache per layer."""

    def __init__(self) -> None:
        self.conv_state: torch.Tensor | None = None  # (B, C, K-1) last K-1 inputs of the conv
        self.recurrent_state: torch.Tensor | None = None  # (B, Hv, Dk, Dv)
        self._length = 0
        self._owner = None
        self._owner_type = ""

    def __len__(self) -> int:
        return self._length

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.conv_state, self.recurrent_state) if t is not None)

    def __repr__(self) -> str:
        if self.recurrent_state is None:
            return "LinearAttentionCache(empty)"
        return f"LinearAttentionCache(tokens={self._length}, nbytes={self.nbytes}, dtype={self.recurrent_state.dtype})"


def _positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")


class GatedRMSNorm(nn.Module):
    """RMSNorm per value head, then times ``silu(gate)``. Multiplies by ``weight`` (init ones): Qwen3.5's plain
    RMSNorm uses ``1 + weight`` (init zeros), and loading one convention's weights into the other is a silent bug."""

    def __init__(self, head_v_dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(head_v_dim))

    def forward(self, out: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        out = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + NORM_EPS)  # (..., Dv)
        return self.weight * out * F.silu(gate)  # (..., Dv)


class GatedDeltaNet(nn.Module):
    """Gated DeltaNet as in Qwen3.5 (HF ``Qwen3_5GatedDeltaNet``): ``forward(x (B, L, hidden), *, cache=None)``."""

    def __init__(self, hidden_dim, *, num_k_heads, num_v_heads, head_k_dim, head_v_dim, conv_kernel_size=4) -> None:
        super().__init__()
        for name, value in (
            ("hidden_dim", hidden_dim),
            ("num_k_heads", num_k_heads),
            ("num_v_heads", num_v_heads),
            ("head_k_dim", head_k_dim),
            ("head_v_dim", head_v_dim),
            ("conv_kernel_size", conv_kernel_size),
        ):
            _positive_int(name, value)
        if num_v_heads % num_k_heads != 0:
            raise ValueError(
                f"num_v_heads={num_v_heads} must be a multiple of num_k_heads={num_k_heads}: each q/k head serves "
                f"num_v_heads // num_k_heads consecutive value heads."
            )
        self.hidden_dim = hidden_dim
        self.num_k_heads, self.num_v_heads = num_k_heads, num_v_heads
        self.head_k_dim, self.head_v_dim = head_k_dim, head_v_dim
        self.conv_kernel_size = conv_kernel_size
        self.key_dim = num_k_heads * head_k_dim
        self.value_dim = num_v_heads * head_v_dim
        self.conv_dim = 2 * self.key_dim + self.value_dim  # C: the conv runs over q, k and v channels
        self.in_proj_qkv = nn.Linear(hidden_dim, self.conv_dim, bias=False)
        self.in_proj_z = nn.Linear(hidden_dim, self.value_dim, bias=False)
        self.in_proj_b = nn.Linear(hidden_dim, num_v_heads, bias=False)
        self.in_proj_a = nn.Linear(hidden_dim, num_v_heads, bias=False)
        # Padding is done by hand (zeros or the cached inputs on the left), so the module itself pads nothing.
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, conv_kernel_size, groups=self.conv_dim, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(num_v_heads))
        self.A_log = nn.Parameter(torch.empty(num_v_heads).uniform_(0.01, 16.0).log())  # decay rates exp(A_log), as HF
        self.norm = GatedRMSNorm(head_v_dim)
        self.out_proj = nn.Linear(self.value_dim, hidden_dim, bias=False)

    def _check(self, x, cache) -> None:
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.hidden_dim:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must be (B, L, hidden_dim={self.hidden_dim}), got {shape}.")
        weight_dtype = self.out_proj.weight.dtype
        if not x.is_floating_point():
            raise TypeError(
                f"x must be a floating-point tensor (hidden states, {weight_dtype} like this layer), got {x.dtype}; "
                "token ids go through an embedding first."
            )
        if x.dtype != weight_dtype and not torch.is_autocast_enabled(x.device.type):
            raise TypeError(
                f"x is {x.dtype} but this layer's weights are {weight_dtype}: convert one, x.to({weight_dtype}) or "
                f"layer.to({x.dtype})."
            )
        if cache is None:
            return
        if not isinstance(cache, LinearAttentionCache):
            raise TypeError(
                f"cache must be an ac.LinearAttentionCache (a fixed-size state), got {type(cache).__name__}; "
                "a KVCache holds keys/values for softmax attention layers."
            )
        cache.bind(self)
        state = cache.recurrent_state
        if state is not None and (state.shape[0] != x.shape[0] or state.dtype != x.dtype):
            raise ValueError(
                f"this cache holds batch {state.shape[0]} in {state.dtype}; x is {tuple(x.shape)} in {x.dtype}. "
                "Use a fresh LinearAttentionCache for a new batch."
            )

    def _conv(self, mixed, cache):
        """Causal depthwise conv of mixed (B, C, L), left context = zeros or the cached last K−1 inputs.
        Returns ``(out (B, C, L), the last K−1 inputs (B, C, K-1))``; the caller stores the latter in the cache."""
        batch, channels, _ = mixed.shape
        left = self.conv_kernel_size - 1
        if cache is None or cache.conv_state is None:
            past = mixed.new_zeros(batch, channels, left)  # (B, C, K-1) zeros before the first token
        else:
            past = cache.conv_state  # (B, C, K-1)
        padded = torch.cat([past, mixed], dim=-1)  # (B, C, K-1+L)
        conv_state = padded[:, :, padded.shape[-1] - left :].clone()  # (B, C, K-1) for the next call
        if mixed.shape[-1] == 0:  # no tokens: nothing to convolve (conv1d refuses an input shorter than K)
            return mixed, conv_state  # (B, C, 0)
        return F.silu(F.conv1d(padded, self.conv1d.weight, groups=channels)), conv_state  # (B, C, L), (B, C, K-1)

    def state_update(self, q, k, v, g, beta, state):
        """The token mixer proper; everything around it (projections, conv, norms) is shared by its variants.
        A subclass may swap the rule (e.g. ``ac.linear_attention(q, k, v, g)``) to compare them in one layer."""
        chunk_size = None if q.shape[2] == 1 else LAYER_CHUNK  # one decode step: the recurrence is cheapest
        return gated_delta_rule(q, k, v, g, beta, chunk_size=chunk_size, initial_state=state)

    def project(self, x):
        """``x (B, L, hidden)`` -> ``(mixed [q | k | v] (B, L, C), z (B, L, Hv·Dv), b (B, L, Hv), a (B, L, Hv))``.
        Qwen3-Next fuses these four projections into two (``from_hf_linear.Qwen3NextGatedDeltaNet``)."""
        return self.in_proj_qkv(x), self.in_proj_z(x), self.in_proj_b(x), self.in_proj_a(x)

    def forward(self, x, *, positions=None, cache=None):
        """positions: accepted for the common layer signature, unused (no RoPE in this layer)."""
        self._check(x, cache)
        batch, length, _ = x.shape
        mixed, z, b, a = self.project(x)  # (B, L, C), (B, L, Hv·Dv), (B, L, Hv), (B, L, Hv)
        mixed, conv_state = self._conv(mixed.transpose(1, 2), cache)  # (B, C, L), (B, C, K-1)
        mixed = mixed.transpose(1, 2)  # (B, L, C)
        q, k, v = torch.split(mixed, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        q = q.reshape(batch, length, self.num_k_heads, self.head_k_dim).transpose(1, 2)  # (B, Hk, L, Dk)
        k = k.reshape(batch, length, self.num_k_heads, self.head_k_dim).transpose(1, 2)  # (B, Hk, L, Dk)
        v = v.reshape(batch, length, self.num_v_heads, self.head_v_dim).transpose(1, 2)  # (B, Hv, L, Dv)
        # l2-normalise with eps inside the root (F.normalize clamps the norm instead: ~1e-7 apart)
        q = q * torch.rsqrt(q.pow(2).sum(-1, keepdim=True) + NORM_EPS)  # (B, Hk, L, Dk)
        k = k * torch.rsqrt(k.pow(2).sum(-1, keepdim=True) + NORM_EPS)  # (B, Hk, L, Dk)
        beta = torch.sigmoid(b).transpose(1, 2)  # (B, Hv, L) write strength in (0, 1)
        g = -self.A_log.exp() * F.softplus(a + self.dt_bias)  # (B, L, Hv) log decay < 0
        g = g.transpose(1, 2)  # (B, Hv, L)
        state = None if cache is None else cache.recurrent_state  # (B, Hv, Dk, Dv) or None
        out, state = self.state_update(q, k, v, g, beta, state)  # (B, Hv, L, Dv), (B, Hv, Dk, Dv)
        if cache is not None:  # only now, all three together: an error above (or an interrupt) leaves it as it was
            cache.conv_state, cache.recurrent_state = conv_state, state
            cache._length += length
        out = out.transpose(1, 2)  # (B, L, Hv, Dv)
        gate = z.reshape(batch, length, self.num_v_heads, self.head_v_dim)  # (B, L, Hv, Dv)
        out = self.norm(out, gate)  # (B, L, Hv, Dv)
        return self.out_proj(out.reshape(batch, length, self.value_dim))  # (B, L, hidden_dim)
