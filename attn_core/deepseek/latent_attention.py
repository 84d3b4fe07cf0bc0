"""Multi-head latent attention (MLA, DeepSeek-V2): cache one small latent per token, not per-head K/V.

Every token is compressed to a latent ``c = RMSNorm(x W_DKV)`` of ``kv_lora_rank`` features plus one
rotary key ``k_rope`` of ``qk_rope_head_dim`` features shared by all heads; only these two are cached,
``kv_lora_rank + qk_rope_head_dim`` numbers per token whatever the number of heads. The per-head keys and
values are up-projections of the latent: ``k_nope_h = c W_UK_h``, ``v_h = c W_UV_h`` (both in ``kv_b_proj``).

Two ways to attend, same numbers:

- ``absorb=False`` (as Hugging Face's ``DeepseekV3Attention``): up-project the whole cache into per-head
  keys ``[k_nope_h, k_rope]`` and values ``v_h`` every step: ``O(T · H · (nope + v) · kv_lora_rank)``.
- ``absorb=True``: ``q_nope_h · k_nope_h = (q_nope_h W_UK_hᵀ) · c``, so ``W_UK`` is folded into the query and
  every head attends to the latent itself (one shared "kv head", as in multi-query attention); and
  ``Σ_t w_t (c_t W_UV_h) = (Σ_t w_t c_t) W_UV_h``, so the latent is the value and ``W_UV`` is applied once,
  after the weighted sum. The cache is never up-projected.

RoPE cannot be absorbed: the rotation of key ``t`` depends on its position, so ``R_t`` sits between
``W_UK`` and ``c_t`` and no fixed matrix can be folded into the query. That is why the rotary part is a
separate, small, shared key that is cached already rotated.

Parameter names follow DeepSeek / Hugging Face (``load_state_dict`` from ``DeepseekV3Attention`` works with
no renaming). The released DeepSeek-V3 config also uses YaRN rope scaling (factor 40, ``mscale_all_dim`` 1):
pass it as ``rope_scaling=`` (Hugging Face's key names) and the rotary parts are scaled as in
:func:`attn_core.rope_frequencies`, and the softmax scale is multiplied by ``g(factor, mscale_all_dim)²`` with
``g(s, m) = 0.1 · m · ln s + 1``, ``(0.1 · ln 40 + 1)² ≈ 1.874`` for V3 (Hugging Face's ``yarn_apply_mscale``).
``rope_interleave=True`` rotates pairs ``(2i, 2i + 1)`` (DeepSeek's checkpoints); Hugging
Face's ``apply_rotary_pos_emb_interleave`` returns the rotated pairs de-interleaved (evens then odds), we keep
them interleaved: the same permutation of q and k, so every score, output and weight is identical; only the
feature order of the cached ``k_rope`` differs. ``rope_interleave=False`` is the "rotate half" layout.
"""

from __future__ import annotations

import torch
from torch import nn

from attn_core.attention import check_flag, scaled_dot_product_attention
from attn_core.caches.kv_cache import KVCache
from attn_core.deepseek.lightning_indexer import make_indexer, scatter_weights
from attn_core.deepseek.sparse_attention import sparse_attention
from attn_core.masks import cache_window_mask
from attn_core.positions.rope import _as_token_positions, _check_base, _yarn_mscale, apply_rope, rope_frequencies

__all__ = ["MultiHeadLatentAttention", "RMSNorm"]


class RMSNorm(nn.Module):
    """``weight · x / sqrt(mean(x²) + eps)`` over the last dim (DeepSeek's / Llama's RMSNorm).

    Computed in float32 for fp16/bf16 inputs, in the input's dtype otherwise (float64 stays float64;
    Hugging Face's ``DeepseekV3RMSNorm`` always rounds through float32)."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))  # (dim,)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        work = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x  # (..., dim)
        normed = work * torch.rsqrt(work.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., dim)
        return self.weight * normed.to(x.dtype)  # (..., dim)


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


class MultiHeadLatentAttention(nn.Module):
    """Multi-head latent attention (DeepSeek-V2/V3). See the module docstring for the idea.

    ``forward(x, mask=None, *, is_causal=False, cache=None, positions=None, absorb=False)``: x
    ``(B, Lq, hidden_dim)``; mask boolean, True = may attend, broadcastable to ``(B, num_heads, Lq, Lk)``;
    ``is_causal`` bottom-right aligned as in :func:`attn_core.scaled_dot_product_attention`; ``cache`` a
    :class:`KVCache` holding the normalised latent ``(B, 1, T, kv_lora_rank)`` as its keys and the rotated
    shared key ``(B, 1, T, qk_rope_head_dim)`` as its values; a ``KVCache(window=W, num_sinks=S)`` is honoured
    as in every layer here (each query sees its last ``W`` keys and the sinks, whatever the chunking; rollback
    slots are never attended to), the window mask then replacing ``is_causal``; ``positions`` ``(Lq,)`` or
    ``(B, Lq)`` of integers >= 0, None meaning ``len(cache) .. len(cache) + Lq - 1``. Returns
    ``(out (B, Lq, hidden_dim), weights (B, H, Lq, Lk))``, the same for ``absorb=False`` and ``absorb=True``.
    Self-attention only (no ``context``).

    ``index_topk=k`` makes it DeepSeek-V3.2's layer (``DeepseekV32Attention``: ``self.indexer`` a
    :class:`attn_core.LightningIndexer` of ``index_n_heads`` heads of ``index_head_dim``): each query attends only
    to the top-k keys the indexer picks among those mask/is_causal allow (one mask for all heads), weights 0 off
    the picks; ``absorb=True`` then runs :func:`sparse_attention` over the picked latents. The cache's
    values hold ``[k_rope, index_key]``: ``kv_lora_rank + qk_rope_head_dim + index_head_dim`` numbers per token.
    """

    def __init__(
        self,
        hidden_dim: int,
        num_heads: int,
        *,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        q_lora_rank: int | None = None,
        rope_base: float = 10000.0,
        rope_interleave: bool = True,
        rope_scaling: dict | None = None,
        index_topk: int | None = None,
        index_n_heads: int = 64,
        index_head_dim: int = 128,
    ):
        super().__init__()
        for name, value in (
            ("hidden_dim", hidden_dim),
            ("num_heads", num_heads),
            ("kv_lora_rank", kv_lora_rank),
            ("qk_nope_head_dim", qk_nope_head_dim),
            ("qk_rope_head_dim", qk_rope_head_dim),
            ("v_head_dim", v_head_dim),
        ):
            _positive_int(name, value)
        if q_lora_rank is not None:
            _positive_int("q_lora_rank (or None for a plain q_proj)", q_lora_rank)
        if qk_rope_head_dim % 2:
            raise ValueError(
                f"qk_rope_head_dim must be even (RoPE rotates pairs of features), got {qk_rope_head_dim}. "
                "DeepSeek-V2/V3 use 64."
            )
        if not isinstance(rope_interleave, bool):
            raise ValueError(f"rope_interleave must be True or False, got {rope_interleave!r}.")
        self.hidden_dim, self.num_heads = hidden_dim, num_heads
        self.kv_lora_rank, self.q_lora_rank = kv_lora_rank, q_lora_rank
        self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim = qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        self.qk_head_dim = qk_nope_head_dim + qk_rope_head_dim
        self.rope_base = _check_base(rope_base)
        self.rope_interleave = rope_interleave
        rope_frequencies(qk_rope_head_dim, base=self.rope_base, scaling=rope_scaling)  # validates rope_scaling
        self.rope_scaling = None if rope_scaling is None else dict(rope_scaling)  # a copy: never modified
        self.scale = self.qk_head_dim**-0.5  # the score is over nope + rope features together
        mscale_all_dim = (rope_scaling or {}).get("mscale_all_dim") or 0
        if mscale_all_dim:  # DeepSeek's yarn_apply_mscale: longer rows get a sharper softmax, g(s, m)² on the scale
            mscale = _yarn_mscale(float(rope_scaling["factor"]), mscale_all_dim)
            self.scale = self.scale * mscale * mscale  # HF's order of operations: the same float
        q_out = num_heads * self.qk_head_dim
        if q_lora_rank is None:
            self.q_proj = nn.Linear(hidden_dim, q_out, bias=False)  # hidden -> H * (nope + rope)
        else:
            self.q_a_proj = nn.Linear(hidden_dim, q_lora_rank, bias=False)  # hidden -> q_lora_rank
            self.q_a_layernorm = RMSNorm(q_lora_rank)
            self.q_b_proj = nn.Linear(q_lora_rank, q_out, bias=False)  # q_lora_rank -> H * (nope + rope)
        self.kv_a_proj_with_mqa = nn.Linear(hidden_dim, kv_lora_rank + qk_rope_head_dim, bias=False)  # -> c, k_rope
        self.kv_a_layernorm = RMSNorm(kv_lora_rank)
        self.kv_b_proj = nn.Linear(kv_lora_rank, num_heads * (qk_nope_head_dim + v_head_dim), bias=False)  # W_UK, W_UV
        self.o_proj = nn.Linear(num_heads * v_head_dim, hidden_dim, bias=False)  # H * v -> hidden
        self.indexer = None  # DeepSeek-V3.2: index_topk=k adds the lightning indexer (deepseek.lightning_indexer)
        if index_topk is not None:
            self.indexer = make_indexer(self, index_topk, index_n_heads, index_head_dim)

    def extra_repr(self) -> str:
        return (
            f"hidden_dim={self.hidden_dim}, num_heads={self.num_heads}, kv_lora_rank={self.kv_lora_rank}, "
            f"q_lora_rank={self.q_lora_rank}, qk_nope_head_dim={self.qk_nope_head_dim}, "
            f"qk_rope_head_dim={self.qk_rope_head_dim}, v_head_dim={self.v_head_dim}, "
            f"rope_base={self.rope_base}, rope_interleave={self.rope_interleave}, rope_scaling={self.rope_scaling}"
        )

    def _positions(self, positions, batch: int, q_len: int, start: int, device: torch.device) -> torch.Tensor:
        if positions is None:
            return torch.arange(start, start + q_len, device=device)  # (Lq,): continues after the cache
        positions = _as_token_positions(positions, device)  # (Lq,) or (B, Lq), integers >= 0
        if positions.ndim == 1 and positions.shape[0] == q_len:
            return positions  # (Lq,)
        if positions.ndim == 2 and positions.shape[0] in (1, batch) and positions.shape[1] == q_len:
            return positions.unsqueeze(1)  # (B, 1, Lq): broadcast over heads
        raise ValueError(
            f"positions must have shape (Lq,) = ({q_len},) or (B, Lq) = ({batch}, {q_len}), "
            f"got {tuple(positions.shape)}."
        )

    def _check_cache(self, cache: KVCache, batch: int) -> None:
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be an attn_core.KVCache, got {type(cache).__name__}.")
        if cache._owner is not None:
            cache.bind(self)  # already owned: another layer's cache is refused first (binding nothing new)
        held_keys, held_values = cache._keys, cache._values  # (B, Hkv, slots, D), (B, Hkv, slots, Dv): no copy
        if held_keys is not None and (
            held_keys.shape[:2] != (batch, 1)
            or held_keys.shape[-1] != self.kv_lora_rank
            or held_values.shape[-1] != self.qk_rope_head_dim + (self.indexer.head_dim if self.indexer else 0)
        ):
            keys_shape = (*held_keys.shape[:2], "T", held_keys.shape[-1])
            values_shape = (*held_values.shape[:2], "T", held_values.shape[-1])
            raise ValueError(
                f"this cache holds keys {keys_shape} and values {values_shape}, not the "
                f"MLA layout: latent ({batch}, 1, T, {self.kv_lora_rank}) and rotated key ({batch}, 1, T, "
                f"{self.qk_rope_head_dim}). Give this layer a fresh KVCache() (or call cache.reset())."
            )
        cache.bind(self)  # after the layout check: a rejected cache stays free for its own layer

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        is_causal: bool = False,
        cache: KVCache | None = None,
        positions: torch.Tensor | None = None,
        absorb: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != self.hidden_dim:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"x must have shape (batch, seq_len, hidden_dim={self.hidden_dim}), got {shape}. "
                "For one unbatched sequence use .unsqueeze(0). (MLA here is self-attention only.)"
            )
        check_flag("absorb", absorb)
        check_flag("is_causal", is_causal)
        batch, q_len, _ = x.shape
        heads, nope, rope, rank = self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim, self.kv_lora_rank
        if cache is not None:
            self._check_cache(cache, batch)

        if self.q_lora_rank is None:
            q = self.q_proj(x)  # (B, Lq, H * (nope + rope))
        else:
            q_latent = self.q_a_layernorm(self.q_a_proj(x))  # (B, Lq, q_lora_rank): the indexer's query input too
            q = self.q_b_proj(q_latent)  # (B, Lq, H * (nope + rope))
        q = q.view(batch, q_len, heads, self.qk_head_dim).transpose(1, 2)  # (B, H, Lq, nope + rope)
        q_nope, q_rope = q.split([nope, rope], dim=-1)  # (B, H, Lq, nope), (B, H, Lq, rope)

        latent, k_rope = self.kv_a_proj_with_mqa(x).split([rank, rope], dim=-1)  # (B, Lq, rank), (B, Lq, rope)
        latent = self.kv_a_layernorm(latent).unsqueeze(1)  # (B, 1, Lq, rank): one "head", shared by all
        k_rope = k_rope.unsqueeze(1)  # (B, 1, Lq, rope)

        start = len(cache) if cache is not None else 0
        pos = self._positions(positions, batch, q_len, start, x.device)  # (Lq,) or (B, 1, Lq)
        rope_kwargs = {"base": self.rope_base, "interleaved": self.rope_interleave, "scaling": self.rope_scaling}
        q_rope = apply_rope(q_rope, pos, **rope_kwargs)  # (B, H, Lq, rope), times the attention factor
        k_rope = apply_rope(k_rope, pos, **rope_kwargs)  # (B, 1, Lq, rope), times the attention factor
        token_pos = pos if pos.ndim == 1 else pos[:, 0]  # (Lq,) or (B, Lq)
        if self.indexer is not None:  # the index key rides in the same cache, after the rotated key
            index_keys = self.indexer.index_keys(x, token_pos).unsqueeze(1)  # (B, 1, Lq, index_head_dim)
            k_rope = torch.cat([k_rope, index_keys], dim=-1)  # (B, 1, Lq, rope + index_head_dim)
        if cache is not None:
            latent, k_rope = cache.update(latent, k_rope)  # (B, 1, T, rank), (B, 1, T, rope): all cached so far
        if self.indexer is not None:
            k_rope, index_keys = k_rope.split([rope, self.indexer.head_dim], dim=-1)  # (B, 1, T, rope), (.., idx)
        k_len = latent.shape[-2]
        window = cache_window_mask(cache, start, q_len, k_len, device=x.device)  # (Lq, T) or None
        if window is not None:  # a window cache: keys in slot order, the last W and the sinks visible (causal)
            mask, is_causal = (window if mask is None else mask & window), False
        if self.indexer is not None:  # each query attends only to the top-k keys it may see, for all heads
            picks, mask = self.indexer.pick(x, q_latent, index_keys[:, 0], mask, is_causal, token_pos, heads)
            is_causal = False  # picks (B, Lq, k); mask (B, 1, Lq, Lk): the picks, inside what mask/causal allow

        w_kv = self.kv_b_proj.weight.view(heads, nope + self.v_head_dim, rank)  # (H, nope + v, rank)
        w_uk, w_uv = w_kv[:, :nope], w_kv[:, nope:]  # (H, nope, rank), (H, v, rank)
        if absorb:
            # q_nope · (W_UK c) = (q_nope W_UK) · c: the query moves into latent space; the cache is not touched.
            q_lat = torch.einsum("bhqn,hnr->bhqr", q_nope, w_uk)  # (B, H, Lq, rank)
            q_cat = torch.cat([q_lat, q_rope], dim=-1)  # (B, H, Lq, rank + rope)
            k_cat = torch.cat([latent, k_rope], dim=-1)  # (B, 1, T, rank + rope): one kv head for all H
            # The latent is the value: Σ_t w_t (W_UV c_t) = W_UV (Σ_t w_t c_t), so W_UV waits until after the sum.
            if self.indexer is not None:  # gather each query's k picked latents: O(Lq · k), no (Lq, Lk) scores
                out_lat, picked_weights = sparse_attention(q_cat, k_cat, latent, picks, scale=self.scale)
                weights = scatter_weights(picked_weights, picks, k_len)  # (B, H, Lq, Lk): 0 off the picks
            else:
                out_lat, weights = scaled_dot_product_attention(
                    q_cat, k_cat, latent, mask, is_causal=is_causal, scale=self.scale
                )
            # out_lat (B, H, Lq, rank), weights (B, H, Lq, Lk)
            out = torch.einsum("bhqr,hvr->bhqv", out_lat, w_uv)  # (B, H, Lq, v)
        else:
            kv = self.kv_b_proj(latent.squeeze(1))  # (B, T, H * (nope + v)): every cached token, every step
            kv = kv.view(batch, k_len, heads, nope + self.v_head_dim).transpose(1, 2)  # (B, H, T, nope + v)
            k_nope, v = kv.split([nope, self.v_head_dim], dim=-1)  # (B, H, T, nope), (B, H, T, v)
            k = torch.cat([k_nope, k_rope.expand(-1, heads, -1, -1)], dim=-1)  # (B, H, T, nope + rope)
            q_full = torch.cat([q_nope, q_rope], dim=-1)  # (B, H, Lq, nope + rope)
            out, weights = scaled_dot_product_attention(q_full, k, v, mask, is_causal=is_causal, scale=self.scale)
            # out (B, H, Lq, v), weights (B, H, Lq, Lk)
        out = out.transpose(1, 2).reshape(batch, q_len, heads * self.v_head_dim)  # (B, Lq, H * v)
        return self.o_proj(out), weights  # (B, Lq, hidden), (B, H, Lq, Lk)
