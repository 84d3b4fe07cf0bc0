"""DiffLlama's differential attention with Hugging Face parameter names, for ``ac.layer_from_hf``.

The series teaches the paper's form in ``ac.DifferentialAttention`` (two query/key halves, arXiv 2410.05258);
``DiffLlamaAttention`` lays it out differently, and this module follows HF's layout so its state dict loads strictly:
one softmax over Llama's q/k (RoPE, GQA), applied to two value sets, the first and the second half of the kv heads
(each repeated to all kv heads); query heads ``h < H/2`` and ``h + H/2`` are then concatenated (``2·D`` features),
combined as ``out1 − λ · out2`` with ``λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init``,
``λ_init = 0.8 − 0.6·e^(−0.3·layer)``,
RMS-normalised over ``2·D`` (no weight) and scaled by ``1 − λ_init`` before ``o_proj``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attn_core.attention import scaled_dot_product_attention
from attn_core.caches.kv_cache import KVCache
from attn_core.models.hf_softmax import HFSoftmaxAttention, causal_chunk_window_mask, check_layer_input
from attn_core.positions.rope import apply_rope

__all__ = ["HFDiffLlamaAttention"]


class HFDiffLlamaAttention(HFSoftmaxAttention):
    """``forward(x, *, positions=None, cache=None) -> (out (B, L, hidden), weights (B, H, L, T))``."""

    def __init__(self, *args, layer_idx: int, rms_norm_eps: float = 1e-5, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.num_kv_heads % 2 or self.num_heads % 2:
            raise ValueError(
                f"DiffLlama splits the kv heads into two value sets: num_key_value_heads={self.num_kv_heads} and "
                f"num_attention_heads={self.num_heads} must be even."
            )
        self.lambda_init = 0.8 - 0.6 * math.exp(-0.3 * layer_idx)
        self.lambda_q1 = nn.Parameter(torch.zeros(self.head_dim))
        self.lambda_k1 = nn.Parameter(torch.zeros(self.head_dim))
        self.lambda_q2 = nn.Parameter(torch.zeros(self.head_dim))
        self.lambda_k2 = nn.Parameter(torch.zeros(self.head_dim))
        self.groupnorm = nn.RMSNorm(2 * self.head_dim, eps=rms_norm_eps, elementwise_affine=False)

    def forward(
        self, x: torch.Tensor, *, positions: torch.Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_layer_input(x, cache, self.hidden_size)
        batch, q_len, _ = x.shape
        start = len(cache) if cache is not None else 0
        pos = self._positions(positions, start, q_len, x.device)  # (L,) or (B, L)
        rope_pos = pos if pos.ndim == 1 else pos[:, None, :]
        q = self.q_proj(x).view(batch, q_len, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, D)
        k = self.k_proj(x).view(batch, q_len, self.num_kv_heads, self.head_dim).transpose(1, 2)  # (B, Hkv, L, D)
        v = self.v_proj(x).view(batch, q_len, self.num_kv_heads, self.head_dim).transpose(1, 2)  # (B, Hkv, L, D)
        rope = {"base": self.rope_theta, "scaling": self.rope_scaling}
        q, k = apply_rope(q, rope_pos, **rope), apply_rope(k, rope_pos, **rope)
        if cache is not None:
            cache.bind(self)
            k, v = cache.update(k, v)  # (B, Hkv, T, D)
        v1, v2 = (half.repeat(1, 2, 1, 1) for half in v.chunk(2, dim=1))  # (B, Hkv, T, D) each
        mask = causal_chunk_window_mask(
            torch.arange(start, start + q_len, device=x.device), torch.arange(k.shape[-2], device=x.device)
        )  # (L, T)
        out, weights = scaled_dot_product_attention(q, k, torch.cat([v1, v2], dim=-1), mask, scale=self.scaling)
        out = out.transpose(1, 2)  # (B, L, H, 2D): [out with v1 | out with v2] per query head
        out1, out2 = out.chunk(2, dim=2)  # (B, L, H/2, 2D) each: heads h and h + H/2
        lambda_1 = torch.exp((self.lambda_q1 * self.lambda_k1).sum())
        lambda_2 = torch.exp((self.lambda_q2 * self.lambda_k2).sum())
        lambda_full = lambda_1 - lambda_2 + self.lambda_init  # scalar
        out = (1 - self.lambda_init) * self.groupnorm(out1 - lambda_full * out2)  # (B, L, H/2, 2D)
        return self.o_proj(out.reshape(batch, q_len, -1)), weights  # (B, L, hidden), (B, H, L, T)
