"""DeepSeek-V3's multi-head latent attention with Hugging Face parameter names, for ``ac.layer_from_hf``.

Same math as the series' ``ac.MultiHeadLatentAttention`` (notebook on MLA), laid out as ``DeepseekV3Attention`` so a
HF state dict loads strictly: ``q_a_proj -> q_a_layernorm -> q_b_proj`` (or one ``q_proj`` without a query rank),
``kv_a_proj_with_mqa`` giving the latent ``c (kv_lora_rank)`` and one shared rotary key ``(qk_rope_head_dim)``,
``kv_a_layernorm``, ``kv_b_proj`` expanding the latent into per-head no-position keys and values, ``o_proj``.
The ``ac.KVCache`` holds what MLA is for: the normalised latent (as "keys", ``(B, 1, T, r)``) and the rotated shared
key (as "values", ``(B, 1, T, dr)``), expanded per head at every call.

``rope_theta=None``: no RoPE at all (Kimi Linear's ``KimiLinearAttention``, same names; its rotary slice of the key
stays unrotated). RoPE: ``rope_interleave=True`` pairs features ``(2i, 2i+1)`` (HF returns them de-interleaved, a
fixed permutation of both q and k that leaves q·k unchanged). Softmax scale ``qk_head_dim^-0.5`` times YaRN's
``mscale²`` when ``mscale_all_dim`` is set, as HF's ``yarn_apply_mscale``. RMSNorms compute in the input dtype
(HF: float32).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attn_core.attention import scaled_dot_product_attention
from attn_core.caches.kv_cache import KVCache
from attn_core.models.hf_softmax import ScaledRMSNorm, causal_chunk_window_mask, check_layer_input
from attn_core.positions.rope import apply_rope

__all__ = ["HFLatentAttention", "yarn_softmax_scale"]


def yarn_softmax_scale(qk_head_dim: int, rope_scaling: dict | None) -> float:
    """``qk_head_dim^-0.5``, times ``(0.1 · mscale_all_dim · ln(factor) + 1)²`` for YaRN with ``mscale_all_dim``."""
    scale = qk_head_dim**-0.5
    if rope_scaling and rope_scaling.get("mscale_all_dim") and rope_scaling["factor"] > 1:
        mscale = 0.1 * rope_scaling["mscale_all_dim"] * math.log(rope_scaling["factor"]) + 1.0
        scale = scale * mscale * mscale
    return scale


class HFLatentAttention(nn.Module):
    """MLA; ``forward(x, *, positions=None, cache=None) -> (out (B, L, hidden), weights (B, H, L, T))``."""

    def __init__(
        self,
        hidden_size: int,
        num_attention_heads: int,
        *,
        q_lora_rank: int | None,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        attention_bias: bool = False,
        rope_theta: float | None = 10000.0,
        rope_scaling: dict | None = None,
        rope_interleave: bool = True,
        rms_norm_eps: float = 1e-6,
        scaling: float | None = None,
    ) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_heads = num_attention_heads
        self.q_lora_rank = q_lora_rank
        self.kv_lora_rank = kv_lora_rank
        self.qk_nope_head_dim = qk_nope_head_dim
        self.qk_rope_head_dim = qk_rope_head_dim
        self.v_head_dim = v_head_dim
        self.qk_head_dim = qk_nope_head_dim + qk_rope_head_dim
        self.rope_theta = rope_theta
        self.rope_scaling = rope_scaling
        self.rope_interleave = rope_interleave
        self.scaling = yarn_softmax_scale(self.qk_head_dim, rope_scaling) if scaling is None else scaling
        heads_qk = num_attention_heads * self.qk_head_dim
        if q_lora_rank is None:
            self.q_proj = nn.Linear(hidden_size, heads_qk, bias=False)  # hidden -> H·(dn + dr)
        else:
            self.q_a_proj = nn.Linear(hidden_size, q_lora_rank, bias=attention_bias)  # hidden -> rq
            self.q_a_layernorm = ScaledRMSNorm(q_lora_rank, rms_norm_eps)
            self.q_b_proj = nn.Linear(q_lora_rank, heads_qk, bias=False)  # rq -> H·(dn + dr)
        self.kv_a_proj_with_mqa = nn.Linear(hidden_size, kv_lora_rank + qk_rope_head_dim, bias=attention_bias)
        self.kv_a_layernorm = ScaledRMSNorm(kv_lora_rank, rms_norm_eps)
        self.kv_b_proj = nn.Linear(kv_lora_rank, num_attention_heads * (qk_nope_head_dim + v_head_dim), bias=False)
        self.o_proj = nn.Linear(num_attention_heads * v_head_dim, hidden_size, bias=attention_bias)

    def _rope(self, t: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if self.rope_theta is None:  # Kimi Linear's MLA layers: NoPE (the KDA layers carry position)
            return t
        return apply_rope(
            t, positions, base=self.rope_theta, scaling=self.rope_scaling, interleaved=self.rope_interleave
        )

    def forward(
        self, x: torch.Tensor, *, positions: torch.Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_layer_input(x, cache, self.hidden_size)
        batch, q_len, _ = x.shape
        start = len(cache) if cache is not None else 0
        if positions is None:
            positions = torch.arange(start, start + q_len, device=x.device)  # (L,)
        positions = torch.as_tensor(positions, device=x.device)
        rope_pos = positions if positions.ndim == 1 else positions[:, None, :]  # (L,) or (B, 1, L)

        if self.q_lora_rank is None:
            q = self.q_proj(x)  # (B, L, H·dq)
        else:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))  # (B, L, H·dq)
        q = q.view(batch, q_len, self.num_heads, self.qk_head_dim).transpose(1, 2)  # (B, H, L, dn + dr)
        q_nope, q_rot = q.split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)  # (B, H, L, dn), (.., dr)
        latent, k_rot = self.kv_a_proj_with_mqa(x).split([self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        latent = self.kv_a_layernorm(latent)[:, None]  # (B, 1, L, r)
        k_rot = self._rope(k_rot[:, None], rope_pos)  # (B, 1, L, dr): one rotary key shared by every head
        q_rot = self._rope(q_rot, rope_pos)  # (B, H, L, dr)
        if cache is not None:
            cache.bind(self)
            latent, k_rot = cache.update(latent, k_rot)  # (B, 1, T, r), (B, 1, T, dr): the latent is the cache
        total = latent.shape[-2]
        kv = self.kv_b_proj(latent[:, 0]).view(batch, total, self.num_heads, -1).transpose(1, 2)  # (B, H, T, dn+dv)
        k_nope, v = kv.split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)  # (B, H, T, dn), (B, H, T, dv)
        k = torch.cat([k_nope, k_rot.expand(-1, self.num_heads, -1, -1)], dim=-1)  # (B, H, T, dn + dr)
        q = torch.cat([q_nope, q_rot], dim=-1)  # (B, H, L, dn + dr)
        mask = causal_chunk_window_mask(
            torch.arange(start, start + q_len, device=x.device), torch.arange(total, device=x.device)
        )  # (L, T)
        out, weights = scaled_dot_product_attention(q, k, v, mask, scale=self.scaling)  # (B, H, L, dv)
        out = out.transpose(1, 2).reshape(batch, q_len, self.num_heads * self.v_head_dim)  # (B, L, H·dv)
        return self.o_proj(out), weights  # (B, L, hidden), (B, H, L, T)


class HFIndexer(nn.Module):
    """DeepSeek-V3.2's lightning indexer, HF's names (``DeepseekV32Indexer``); the series teaches it as
    ``ac.LightningIndexer``. Score of key ``t`` for query ``s``:
    ``Σ_h w[s, h] · H^-½ · relu(D^-½ · q[s, h] · k[t])``, with ``q = wq_b(q_resid)``, ``k = LayerNorm(wk(x))``,
    ``w = weights_proj(x)`` and RoPE (rotate half) on the first ``qk_rope_head_dim`` features of q and k."""

    def __init__(self, hidden_size: int, q_lora_rank: int, n_heads: int, head_dim: int, qk_rope_head_dim: int) -> None:
        super().__init__()
        self.n_heads, self.head_dim, self.qk_rope_head_dim = n_heads, head_dim, qk_rope_head_dim
        self.wq_b = nn.Linear(q_lora_rank, n_heads * head_dim, bias=False)  # rq -> Hi·Di
        self.wk = nn.Linear(hidden_size, head_dim, bias=False)  # hidden -> Di: one key shared by the heads
        self.k_norm = nn.LayerNorm(head_dim, eps=1e-6)
        self.weights_proj = nn.Linear(hidden_size, n_heads, bias=False)  # hidden -> Hi: per-query head weights

    def rotate(self, t: torch.Tensor, positions: torch.Tensor, base: float, scaling: dict | None) -> torch.Tensor:
        rot, rest = t.split([self.qk_rope_head_dim, self.head_dim - self.qk_rope_head_dim], dim=-1)
        return torch.cat([apply_rope(rot, positions, base=base, scaling=scaling), rest], dim=-1)  # (..., L, Di)

    def scores(self, x: torch.Tensor, q_resid: torch.Tensor, keys: torch.Tensor, rotate) -> torch.Tensor:
        """``(B, L, T)`` index scores of the new queries against every key so far ``keys (B, T, Di)``."""
        batch, q_len, _ = x.shape
        q = rotate(self.wq_b(q_resid).view(batch, q_len, self.n_heads, self.head_dim).transpose(1, 2))  # (B,Hi,L,Di)
        per_head = torch.relu(q @ keys[:, None].transpose(-1, -2) * self.head_dim**-0.5)  # (B, Hi, L, T)
        weights = self.weights_proj(x) * self.n_heads**-0.5  # (B, L, Hi)
        return torch.einsum("blh,bhlt->blt", weights, per_head)  # (B, L, T)


class HFSparseLatentAttention(HFLatentAttention):
    """DeepSeek-V3.2: MLA whose query ``s`` attends only to the ``index_topk`` causal keys its indexer scores
    highest (DSA; among equal scores the earliest keys). The one ``ac.KVCache`` holds the latent and the indexer key
    side by side as "keys"
    ``(B, 1, T, r + Di)`` and the rotary key as "values"."""

    def __init__(self, *args, index_n_heads: int, index_head_dim: int, index_topk: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.q_lora_rank is None:
            raise ValueError("DeepSeek-V3.2's indexer reads the query latent: q_lora_rank must be set.")
        self.index_topk = index_topk
        self.indexer = HFIndexer(
            self.hidden_size, self.q_lora_rank, index_n_heads, index_head_dim, self.qk_rope_head_dim
        )

    def forward(
        self, x: torch.Tensor, *, positions: torch.Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_layer_input(x, cache, self.hidden_size)
        batch, q_len, _ = x.shape
        start = len(cache) if cache is not None else 0
        if positions is None:
            positions = torch.arange(start, start + q_len, device=x.device)  # (L,)
        positions = torch.as_tensor(positions, device=x.device)
        rope_pos = positions if positions.ndim == 1 else positions[:, None, :]  # (L,) or (B, 1, L)

        q_resid = self.q_a_layernorm(self.q_a_proj(x))  # (B, L, rq): the indexer reads it too
        q = self.q_b_proj(q_resid).view(batch, q_len, self.num_heads, self.qk_head_dim).transpose(1, 2)
        q_nope, q_rot = q.split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)  # (B, H, L, dn), (.., dr)
        latent, k_rot = self.kv_a_proj_with_mqa(x).split([self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        latent = self.kv_a_layernorm(latent)[:, None]  # (B, 1, L, r)
        k_rot, q_rot = self._rope(k_rot[:, None], rope_pos), self._rope(q_rot, rope_pos)  # (B,1,L,dr), (B,H,L,dr)

        def rotate(t):
            return self.indexer.rotate(t, rope_pos, self.rope_theta, self.rope_scaling)

        index_key = rotate(self.indexer.k_norm(self.indexer.wk(x))[:, None])  # (B, 1, L, Di)
        stored = torch.cat([latent, index_key], dim=-1)  # (B, 1, L, r + Di)
        if cache is not None:
            cache.bind(self)
            stored, k_rot = cache.update(stored, k_rot)  # (B, 1, T, r + Di), (B, 1, T, dr)
        latent, index_key = stored.split([self.kv_lora_rank, self.indexer.head_dim], dim=-1)
        total = latent.shape[-2]
        mask = causal_chunk_window_mask(
            torch.arange(start, start + q_len, device=x.device), torch.arange(total, device=x.device)
        )  # (L, T)
        scores = self.indexer.scores(x, q_resid, index_key[:, 0], rotate).masked_fill(~mask, float("-inf"))
        # relu makes ties (exact zeros) common: a stable sort keeps the earliest keys among equals, so every chunking
        # picks the same keys (torch.topk's order among ties is unspecified)
        top = scores.sort(dim=-1, descending=True, stable=True).indices[..., : self.index_topk]  # (B, L, k)
        chosen = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, top, True)  # (B, L, T)
        mask = (mask & chosen)[:, None]  # (B, 1, L, T): causal and picked by the indexer

        kv = self.kv_b_proj(latent[:, 0]).view(batch, total, self.num_heads, -1).transpose(1, 2)  # (B, H, T, dn+dv)
        k_nope, v = kv.split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)  # (B, H, T, dn), (B, H, T, dv)
        k = torch.cat([k_nope, k_rot.expand(-1, self.num_heads, -1, -1)], dim=-1)  # (B, H, T, dn + dr)
        q = torch.cat([q_nope, q_rot], dim=-1)  # (B, H, L, dn + dr)
        out, weights = scaled_dot_product_attention(q, k, v, mask, scale=self.scaling)  # (B, H, L, dv)
        out = out.transpose(1, 2).reshape(batch, q_len, self.num_heads * self.v_head_dim)  # (B, L, H·dv)
        return self.o_proj(out), weights  # (B, L, hidden), (B, H, L, T)
