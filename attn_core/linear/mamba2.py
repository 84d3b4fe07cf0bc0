"""Mamba-2's mixer (HF ``Mamba2Mixer``, torch path; Nemotron-H's ``NemotronHMamba2Mixer`` is the same layer).

``in_proj x`` → split ``[z | xBC | dt]`` → causal depthwise conv over ``xBC`` (kernel K, with bias) → SiLU → split
``[x | B | C]`` → ``ssd`` with ``dt = clamp(softplus(dt + dt_bias), dt_min, dt_max)``, ``A = −exp(A_log)``, plus the
skip ``D · x`` → ``y · silu(z)`` then RMSNorm per group → ``out_proj``. Parameter names equal HF's, so its state_dict
loads strictly. Cache: ``ac.LinearAttentionCache`` (conv_state = the last K−1 conv inputs, recurrent_state = the SSM
state ``(batch, H, P, N)``).

One difference from HF on purpose: HF's one-token decode path skips the ``dt`` clamp its prefill applies (Nemotron-H
clamps at ``time_step_min``), so its decode and prefill can disagree; here both clamp, so decode == prefill.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attn_core.linear.kda import causal_depthwise_conv, check_layer_input
from attn_core.linear.ssd import ssd

__all__ = ["Mamba2Mixer"]


class GroupedGatedRMSNorm(nn.Module):
    """``y · silu(z)``, then RMSNorm over each of ``n_groups`` equal slices (Mamba-2's ``norm_before_gate=False``)."""

    def __init__(self, size: int, n_groups: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.n_groups, self.eps = n_groups, eps

    def forward(self, y, gate):
        y = y * F.silu(gate)  # (B, L, I)
        grouped = y.unflatten(-1, (self.n_groups, -1))  # (B, L, G, I/G)
        grouped = grouped * torch.rsqrt(grouped.pow(2).mean(-1, keepdim=True) + self.eps)  # (B, L, G, I/G)
        return self.weight * grouped.flatten(-2)  # (B, L, I)


class Mamba2Mixer(nn.Module):
    """``forward(x (B, L, hidden), *, positions=None, cache=None)`` -> ``(B, L, hidden)``; positions are unused
    (no RoPE in a Mamba-2 layer)."""

    def __init__(
        self,
        hidden_dim,
        *,
        num_heads,
        head_dim,
        state_size,
        n_groups=1,
        conv_kernel_size=4,
        chunk_size=256,
        use_bias=False,
        use_conv_bias=True,
        eps=1e-6,
        time_step_limit=(0.0, float("inf")),
    ) -> None:
        super().__init__()
        if num_heads % n_groups:
            raise ValueError(f"num_heads={num_heads} must be a multiple of n_groups={n_groups}.")
        self.hidden_dim, self.num_heads, self.head_dim = hidden_dim, num_heads, head_dim
        self.state_size, self.n_groups, self.chunk_size = state_size, n_groups, chunk_size
        self.intermediate_size = num_heads * head_dim
        self.conv_dim = self.intermediate_size + 2 * n_groups * state_size  # x, B, C go through the conv
        self.time_step_limit = tuple(time_step_limit)
        self.in_proj = nn.Linear(hidden_dim, self.intermediate_size + self.conv_dim + num_heads, bias=use_bias)
        self.conv1d = nn.Conv1d(
            self.conv_dim, self.conv_dim, conv_kernel_size, groups=self.conv_dim, bias=use_conv_bias
        )
        self.dt_bias = nn.Parameter(torch.zeros(num_heads))
        self.A_log = nn.Parameter(torch.arange(1, num_heads + 1, dtype=torch.float32).log())
        self.norm = GroupedGatedRMSNorm(self.intermediate_size, n_groups, eps)
        self.D = nn.Parameter(torch.ones(num_heads))
        self.out_proj = nn.Linear(self.intermediate_size, hidden_dim, bias=use_bias)

    def forward(self, x, *, positions=None, cache=None):
        check_layer_input(self, x, cache, self.hidden_dim)
        batch, length, _ = x.shape
        gate, xbc, dt = self.in_proj(x).split([self.intermediate_size, self.conv_dim, self.num_heads], dim=-1)
        past = None if cache is None else cache.conv_state
        xbc, conv_state = causal_depthwise_conv(xbc.transpose(1, 2), self.conv1d.weight, self.conv1d.bias, past)
        xbc = F.silu(xbc).transpose(1, 2)  # (B, L, conv_dim)
        groups_n = self.n_groups * self.state_size
        xs, B, C = xbc.split([self.intermediate_size, groups_n, groups_n], dim=-1)
        xs = xs.reshape(batch, length, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, P)
        B = B.reshape(batch, length, self.n_groups, self.state_size).transpose(1, 2)  # (B, G, L, N)
        C = C.reshape(batch, length, self.n_groups, self.state_size).transpose(1, 2)  # (B, G, L, N)
        dt = F.softplus(dt + self.dt_bias).clamp(*self.time_step_limit).transpose(1, 2)  # (B, H, L)
        A = -self.A_log.exp()  # (H,)
        state = None if cache is None else cache.recurrent_state
        chunk = None if length == 1 else self.chunk_size
        y, state = ssd(xs, dt, A, B, C, chunk_size=chunk, initial_state=state)  # (B, H, L, P)
        if cache is not None:
            cache.conv_state, cache.recurrent_state = conv_state, state
            cache._length += length
        y = y + self.D[:, None, None] * xs  # (B, H, L, P) skip connection
        y = self.norm(y.transpose(1, 2).reshape(batch, length, self.intermediate_size), gate)  # (B, L, I)
        return self.out_proj(y)  # (B, L, hidden)
