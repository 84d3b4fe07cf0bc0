"""Gemma 4's token mixer (``Gemma4TextAttention``) with Hugging Face parameter names, for ``ac.layer_from_hf``.

What Gemma 4 adds to Gemma 3's attention, each read from the config the way HF reads it:
- ``scaling = 1.0``: no ``1/sqrt(D)``; the learned ``q_norm`` / ``k_norm`` (RMSNorm with a plain weight) set the scale,
  and the values get a scale-free ``v_norm`` (RMSNorm without weight).
- per-layer head_dim and kv heads (``config.per_layer_config[layer]``: global layers are wider, e.g. 512 vs 256).
- K = V (``attention_k_eq_v``, global layers only): no ``v_proj``; the values are ``v_norm(k_proj(x))``, taken before
  ``k_norm`` and RoPE, so one projection serves both.
- proportional RoPE (``rope_type: proportional``, global layers): the first ``int(p · D / 2)`` of the ``D/2``
  rotate-half pairs turn with ``base^(-2i/D)`` (the exponent over the full head_dim), the others do not turn.
- KV sharing (``num_kv_shared_layers``, ``kv_sharing_modes``): the last ``num_kv_shared_layers`` layers ("reuse") have
  no key/value weights; each reads the keys and values of the last earlier layer of its type ("store").
  Our design: the storing layer's ``ac.KVCache`` is the shared store. A reusing layer is called with
  ``cache=`` that storing layer's cache, after the storing layer has run on the same tokens; it only reads it (no
  append, no bind), so the cache stays one layer's own. Without a cache a reusing layer has nothing to read and
  raises ValueError. (HF passes the same tensors through ``shared_kv_states``.)
"""

from __future__ import annotations

import torch
from torch import nn

from attn_core.attention import scaled_dot_product_attention
from attn_core.caches.kv_cache import KVCache
from attn_core.models.hf_softmax import ScaledRMSNorm, causal_chunk_window_mask, check_layer_input
from attn_core.positions.rope import apply_rope

__all__ = ["HFGemma4Attention", "proportional_rope"]


def proportional_rope(
    x: torch.Tensor, positions: torch.Tensor, *, base: float, partial_rotary_factor: float, factor: float = 1.0
) -> torch.Tensor:
    """Gemma 4's proportional RoPE on ``x (..., L, D)``: rotate-half pairs ``(i, i + D/2)``, pair ``i`` turning by
    ``position · base^(-2i/D) / factor`` for ``i < int(p · D / 2)`` and not at all beyond."""
    head_dim = x.shape[-1]
    turning = int(partial_rotary_factor * head_dim // 2)  # pairs that rotate
    exponents = torch.arange(0, 2 * turning, 2, dtype=torch.float64, device=x.device) / head_dim  # (turning,)
    inv_freq = torch.zeros(head_dim // 2, dtype=torch.float64, device=x.device)  # (D/2,): still pairs stay still
    inv_freq[:turning] = base**-exponents / factor
    angles = positions.to(torch.float64).unsqueeze(-1) * inv_freq  # (..., L, D/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (..., L, D/2)
    x1, x2 = x[..., : head_dim // 2], x[..., head_dim // 2 :]  # (..., L, D/2) each
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)  # (..., L, D)


class HFGemma4Attention(nn.Module):
    """``forward(x, *, positions=None, cache=None) -> (out (B, L, hidden), weights (B, H, L, T))``; see module doc."""

    def __init__(
        self,
        hidden_size: int,
        num_attention_heads: int,
        num_key_value_heads: int,
        head_dim: int,
        *,
        rope: dict,
        rms_norm_eps: float = 1e-6,
        attention_bias: bool = False,
        sliding_window: int | None = None,
        k_eq_v: bool = False,
        reuse_kv: bool = False,
    ) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.num_heads = num_attention_heads
        self.num_kv_heads = num_key_value_heads
        self.head_dim = head_dim
        self.rope = dict(rope)  # HF's rope_parameters of this layer type
        self.sliding_window = sliding_window
        self.k_eq_v = k_eq_v
        self.reuse_kv = reuse_kv
        self.q_proj = nn.Linear(hidden_size, num_attention_heads * head_dim, bias=attention_bias)  # hidden -> H·D
        self.q_norm = ScaledRMSNorm(head_dim, rms_norm_eps)
        if not reuse_kv:  # a reusing layer has no key/value weights at all
            self.k_norm = ScaledRMSNorm(head_dim, rms_norm_eps)
            self.v_norm = ScaledRMSNorm(head_dim, rms_norm_eps, with_scale=False)  # no parameter
            self.k_proj = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=attention_bias)
            self.v_proj = (
                None if k_eq_v else nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=attention_bias)
            )
        self.o_proj = nn.Linear(num_attention_heads * head_dim, hidden_size, bias=attention_bias)  # H·D -> hidden

    def _rotate(self, t: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        rope_type = self.rope.get("rope_type", "default")
        if rope_type == "proportional":
            return proportional_rope(
                t,
                positions,
                base=self.rope["rope_theta"],
                partial_rotary_factor=self.rope.get("partial_rotary_factor", 1.0),
                factor=self.rope.get("factor", 1.0),
            )
        scaling = {k: v for k, v in self.rope.items() if k not in ("rope_theta", "partial_rotary_factor")}
        scaling = None if rope_type == "default" else scaling
        return apply_rope(
            t,
            positions,
            base=self.rope["rope_theta"],
            scaling=scaling,
            partial_rotary_factor=self.rope.get("partial_rotary_factor", 1.0),
        )

    def forward(
        self, x: torch.Tensor, *, positions: torch.Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_layer_input(x, cache, self.hidden_size, cache_hint="")
        batch, q_len, _ = x.shape
        if self.reuse_kv:
            if cache is None or len(cache) < q_len:
                raise ValueError(
                    "this Gemma 4 layer reuses the keys and values of an earlier layer (kv_sharing_modes 'reuse'): "
                    "pass cache= the KVCache of the last storing layer of its type, after that layer ran on these "
                    "tokens."
                )
            start = len(cache) - q_len  # the storing layer already appended these tokens
        else:
            start = len(cache) if cache is not None else 0
        if positions is None:
            positions = torch.arange(start, start + q_len, device=x.device)  # (L,)
        positions = torch.as_tensor(positions, device=x.device)
        rope_pos = positions if positions.ndim == 1 else positions[:, None, :]  # (L,) or (B, 1, L)

        q = self.q_proj(x).view(batch, q_len, self.num_heads, self.head_dim)  # (B, L, H, D)
        q = self._rotate(self.q_norm(q).transpose(1, 2), rope_pos)  # (B, H, L, D)
        if self.reuse_kv:
            k, v = cache.keys, cache.values  # (B, Hkv, T, D): the storing layer's, read only
        else:
            k = self.k_proj(x).view(batch, q_len, self.num_kv_heads, self.head_dim)  # (B, L, Hkv, D)
            v = k if self.v_proj is None else self.v_proj(x).view(batch, q_len, self.num_kv_heads, self.head_dim)
            k = self._rotate(self.k_norm(k).transpose(1, 2), rope_pos)  # (B, Hkv, L, D)
            v = self.v_norm(v).transpose(1, 2)  # (B, Hkv, L, D): K = V takes k_proj's output before k_norm, RoPE
            if cache is not None:
                cache.bind(self)
                k, v = cache.update(k, v)  # (B, Hkv, T, D)
        mask = causal_chunk_window_mask(
            torch.arange(start, start + q_len, device=x.device),
            torch.arange(k.shape[-2], device=x.device),
            sliding_window=self.sliding_window,
        )  # (L, T)
        out, weights = scaled_dot_product_attention(q, k, v, mask, scale=1.0)  # (B, H, L, D); Gemma 4: scaling 1
        out = out.transpose(1, 2).reshape(batch, q_len, self.num_heads * self.head_dim)  # (B, L, H·D)
        return self.o_proj(out), weights  # (B, L, hidden), (B, H, L, T)
