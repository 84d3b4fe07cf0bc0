"""MiniMax's lightning attention (MiniMax-01, 2025; HF ``MiniMaxLightningAttention``): block-wise linear attention with
a fixed per-head decay.

Per head, with slope ``s`` (ALiBi-like, geometric over heads, smaller in deeper layers): ``S_t = exp(−s) S_{t−1} +
k_t v_tᵀ`` and ``o_t = q_t S_t`` (no softmax, no 1/sqrt(d) scale; the output RMSNorm sets the size). Computed in
blocks of ``block_size`` tokens: inside a block, attention ``(q kᵀ ∘ exp(−s (i − j)))  v`` for ``j ≤ i``; across
blocks, the state read as ``exp(−s (i+1)) q_i S`` and carried as ``exp(−s·b) S + Σ_j exp(−s (b−1−j)) k_j v_jᵀ``.
Every exponent is ``−s`` times a non-negative integer, so nothing overflows. The layer: ``silu(qkv_proj x)`` →
lightning attention → RMSNorm over all heads → times ``sigmoid(output_gate x)`` → ``out_proj``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attn_core.linear.kda import check_layer_input

__all__ = ["lightning_attention", "lightning_slopes", "LightningAttention"]


def lightning_slopes(num_heads: int, layer_idx: int = 0, num_layers: int = 1) -> torch.Tensor:
    """MiniMax's decay slopes ``(H,)`` in float64: ``2^(−8 (h+1) / H)`` times
    ``1 − layer_idx / (num_layers − 1) + 1e-5`` (HF's formula, its 1e-5 guards included):
    deeper layers decay slower, so they look further back."""
    base = 1 / (2 ** (8 / num_heads))
    exponent = torch.arange(num_heads, dtype=torch.float64) + 1
    return base**exponent * (1 - layer_idx / (num_layers - 1 + 1e-5) + 1e-5)  # (H,)


def lightning_attention(q, k, v, slopes, *, block_size=256, initial_state=None):
    """q, k ``(B, H, L, Dk)``, v ``(B, H, L, Dv)``, slopes ``(H,)`` > 0, state ``(B, H, Dk, Dv)`` or None.
    Returns ``(out (B, H, L, Dv), state)``; any block_size gives the recurrence's result up to rounding."""
    if q.dim() != 4 or q.shape != k.shape or v.shape[:3] != k.shape[:3]:
        raise ValueError(f"q, k must be (B, H, L, Dk) and v (B, H, L, Dv); got {q.shape}, {k.shape}, {v.shape}.")
    if slopes.shape != (q.shape[1],) or bool((slopes < 0).any()):
        raise ValueError(f"slopes must be (H,) = ({q.shape[1]},), non-negative; got {tuple(slopes.shape)}.")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be an int >= 1, got {block_size!r}.")
    batch, heads, length, head_k_dim = k.shape
    if initial_state is None:
        initial_state = q.new_zeros(batch, heads, head_k_dim, v.shape[-1])
    state = initial_state  # (B, H, Dk, Dv)
    slopes = slopes.to(q.dtype)[:, None, None]  # (H, 1, 1)
    outputs = []
    for start in range(0, length, block_size):
        q_b, k_b, v_b = (t[:, :, start : start + block_size] for t in (q, k, v))  # (B, H, b, D)
        size = q_b.shape[2]
        steps = torch.arange(size, dtype=q.dtype, device=q.device)  # (b,)
        gap = steps[:, None] - steps[None, :]  # (b, b): i − j
        intra_decay = torch.where(gap >= 0, (-slopes * gap.clamp(min=0)).exp(), 0.0)  # (H, b, b)
        query_decay = (-slopes * (steps[:, None] + 1)).exp()  # (H, b, 1) decay since the block's entry
        key_decay = (-slopes * (size - 1 - steps[:, None])).exp()  # (H, b, 1) decay to the block's end
        intra = ((q_b @ k_b.transpose(-1, -2)) * intra_decay) @ v_b  # (B, H, b, Dv)
        outputs.append(intra + (q_b * query_decay) @ state)  # (B, H, b, Dv)
        state = (-slopes * size).exp() * state + (k_b * key_decay).transpose(-1, -2) @ v_b  # (B, H, Dk, Dv)
    out = torch.cat(outputs, dim=2) if outputs else v.new_zeros(v.shape)  # (B, H, L, Dv)
    return out, state


class LightningAttention(nn.Module):
    """MiniMax's lightning-attention layer, parameter and buffer names as HF's ``MiniMaxLightningAttention``
    (so its state_dict loads strictly). ``forward(x (B, L, hidden), *, positions=None, cache=None)`` ->
    ``(B, L, hidden)``; positions are unused (no RoPE here). The decays are recomputed from ``slope_rate`` in the
    input's dtype; HF's precomputed ``query_decay`` / ``key_decay`` / ``diagonal_decay`` buffers are kept only so the
    state_dict matches."""

    def __init__(self, hidden_dim, *, num_heads, head_dim, block_size=256, layer_idx=0, num_layers=1, eps=1e-6):
        super().__init__()
        self.hidden_dim, self.num_heads, self.head_dim = hidden_dim, num_heads, head_dim
        self.block_size, self.eps = block_size, eps
        inner = num_heads * head_dim
        self.qkv_proj = nn.Linear(hidden_dim, 3 * inner, bias=False)
        self.norm = nn.Module()
        self.norm.weight = nn.Parameter(torch.ones(inner))
        self.output_gate = nn.Linear(hidden_dim, inner, bias=False)
        self.out_proj = nn.Linear(inner, hidden_dim, bias=False)
        slope = lightning_slopes(num_heads, layer_idx, num_layers).float()[:, None, None]  # (H, 1, 1)
        steps = torch.arange(block_size) + 1  # (b,)
        gap = (steps[:, None] - steps[None, :]) * slope  # (H, b, b)
        self.register_buffer("slope_rate", slope)
        self.register_buffer("query_decay", torch.exp(-slope * steps[:, None]))  # (H, b, 1)
        self.register_buffer("key_decay", torch.exp(-slope * (block_size - steps[:, None])))  # (H, b, 1)
        self.register_buffer("diagonal_decay", torch.where(gap >= 0, -gap, float("-inf")).exp()[None])  # (1,H,b,b)

    def forward(self, x, *, positions=None, cache=None):
        check_layer_input(self, x, cache, self.hidden_dim)
        batch, length, _ = x.shape
        qkv = F.silu(self.qkv_proj(x)).reshape(batch, length, self.num_heads, 3 * self.head_dim)  # (B, L, H, 3D)
        q, k, v = qkv.transpose(1, 2).split(self.head_dim, dim=-1)  # 3 × (B, H, L, D)
        state = None if cache is None else cache.recurrent_state
        slopes = self.slope_rate.reshape(-1).to(x.dtype)  # (H,)
        out, state = lightning_attention(q, k, v, slopes, block_size=self.block_size, initial_state=state)
        if cache is not None:
            cache.recurrent_state = state
            cache._length += length
        out = out.transpose(1, 2).reshape(batch, length, self.num_heads * self.head_dim)  # (B, L, H·D)
        out = self.norm.weight * out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + self.eps)  # RMSNorm, all heads
        return self.out_proj(torch.sigmoid(self.output_gate(x)) * out)  # (B, L, hidden)
