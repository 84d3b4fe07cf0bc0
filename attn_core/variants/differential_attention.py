"""Differential attention (Ye et al. 2024, *Differential Transformer*), as Hugging Face's ``DiffLlamaAttention``.

Two softmax maps per head pair, the second subtracted with a learned weight λ: attention that both maps give to
the same keys (noise, a sink) cancels, and what only the first map sees survives. Pair ``p < H/2`` is query heads
``p`` and ``p + H/2``; both read the same value, ``V_p = cat(v[g], v[g + Hkv/2])`` over features (``2·head_dim``,
``g`` the kv head of query head ``p``), so the pair outputs ``2·head_dim`` features and the ``H/2`` pairs together
``H·head_dim``, as many as a GQA layer:

    o_p = (1 − λ_init) · RMSNorm((A_p − λ · A_{p+H/2}) · V_p),
    λ = exp(λ_q1 · λ_k1) − exp(λ_q2 · λ_k2) + λ_init,   λ_init = 0.8 − 0.6 · exp(−0.3 · layer_idx).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attn_core.attention import scaled_dot_product_attention
from attn_core.caches.kv_cache import KVCache
from attn_core.masks import cache_window_mask
from attn_core.positions.rope import _as_token_positions, _check_base, apply_rope

__all__ = ["DifferentialAttention", "lambda_init_for"]

LAMBDA_STD = 0.1  # DiffLlamaConfig.lambda_std_dev: the λ vectors start as N(0, 0.1²)
NORM_EPS = 1e-5  # DiffLlamaConfig.rms_norm_eps: the per-pair RMSNorm (no weight)


def lambda_init_for(layer_idx: int) -> float:
    """``0.8 − 0.6 · exp(−0.3 · layer_idx)``: 0.2 in layer 0, rising towards 0.8 in deep layers (the paper's)."""
    return 0.8 - 0.6 * math.exp(-0.3 * layer_idx)


class DifferentialAttention(nn.Module):
    """Differential attention with grouped key/value heads, equal to ``DiffLlamaAttention``.

    ``DifferentialAttention(hidden_dim, num_heads, num_kv_heads, *, head_dim=None, rope_base=None, layer_idx=0,
    bias=True)``: ``q_proj``, ``k_proj``, ``v_proj``, ``o_proj`` as in ``GroupedQueryAttention`` plus
    ``lambda_q1``, ``lambda_k1``, ``lambda_q2``, ``lambda_k2`` ``(head_dim,)``. ``num_heads`` and ``num_kv_heads``
    must be even (heads pair up, and so do the kv heads whose values a pair concatenates).

    ``forward(x, mask=None, *, is_causal=False, cache=None, positions=None)`` -> ``(out (B, Lq, hidden_dim),
    weights (B, H, Lq, Lk))``: ``weights`` are every head's softmax ``A_h`` (rows sum to 1); pair ``p``'s
    differential map is ``weights[:, p] − layer.lambda_full() · weights[:, p + H/2]``. ``mask`` boolean, True =
    may attend; ``cache`` a ``KVCache`` of k (rotated) and v as in GQA, so decoding equals one full pass;
    ``positions`` as in GQA (RoPE layers only).
    """

    def __init__(
        self,
        hidden_dim: int,
        num_heads: int,
        num_kv_heads: int,
        *,
        head_dim: int | None = None,
        rope_base: float | None = None,
        layer_idx: int = 0,
        bias: bool = True,
    ):
        super().__init__()
        for name, value in (("hidden_dim", hidden_dim), ("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}.")
        if num_heads % 2 or num_kv_heads % 2:
            raise ValueError(
                f"num_heads ({num_heads}) and num_kv_heads ({num_kv_heads}) must both be even: differential "
                "attention pairs head p with head p + H/2, and the pair's value concatenates kv heads g and "
                "g + Hkv/2 (DiffLlama rejects an odd num_key_value_heads too)."
            )
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads ({num_heads}) must be divisible by num_kv_heads ({num_kv_heads}).")
        if head_dim is None:
            if hidden_dim % num_heads:
                raise ValueError(
                    f"hidden_dim ({hidden_dim}) must be divisible by num_heads ({num_heads}), or pass head_dim=."
                )
            head_dim = hidden_dim // num_heads
        elif isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 1:
            raise ValueError(f"head_dim must be a positive int, got {head_dim!r}.")
        if rope_base is not None:
            rope_base = _check_base(rope_base)
            if head_dim % 2:
                raise ValueError(f"rope_base needs an even head_dim (RoPE rotates pairs), got {head_dim}.")
        if isinstance(layer_idx, bool) or not isinstance(layer_idx, int) or layer_idx < 0:
            raise ValueError(f"layer_idx must be an int >= 0 (it sets lambda_init), got {layer_idx!r}.")
        if not isinstance(bias, bool):
            raise TypeError(f"bias must be True or False, got {bias!r}.")
        self.hidden_dim, self.num_heads, self.num_kv_heads = hidden_dim, num_heads, num_kv_heads
        self.head_dim, self.rope_base, self.layer_idx = head_dim, rope_base, layer_idx
        self.lambda_init = lambda_init_for(layer_idx)  # a constant, not a parameter
        self.q_proj = nn.Linear(hidden_dim, num_heads * head_dim, bias=bias)  # hidden -> H * head_dim
        self.k_proj = nn.Linear(hidden_dim, num_kv_heads * head_dim, bias=bias)  # hidden -> Hkv * head_dim
        self.v_proj = nn.Linear(hidden_dim, num_kv_heads * head_dim, bias=bias)  # hidden -> Hkv * head_dim
        self.o_proj = nn.Linear(num_heads * head_dim, hidden_dim, bias=bias)  # H/2 pairs x 2·head_dim -> hidden
        for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            setattr(self, name, nn.Parameter(torch.randn(head_dim) * LAMBDA_STD))  # (head_dim,)

    def extra_repr(self) -> str:
        rope = f", rope_base={self.rope_base}" if self.rope_base is not None else ""
        return (
            f"hidden_dim={self.hidden_dim}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
            f"head_dim={self.head_dim}{rope}, layer_idx={self.layer_idx}, lambda_init={self.lambda_init:.4f}"
        )

    def lambda_full(self) -> torch.Tensor:
        """λ = exp(λ_q1 · λ_k1) − exp(λ_q2 · λ_k2) + λ_init: a scalar tensor, in the parameters' dtype."""
        return (
            torch.exp((self.lambda_q1 * self.lambda_k1).sum())
            - torch.exp((self.lambda_q2 * self.lambda_k2).sum())
            + self.lambda_init
        )  # scalar

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        is_causal: bool = False,
        cache: KVCache | None = None,
        positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != self.hidden_dim:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must have shape (batch, seq_len, hidden_dim={self.hidden_dim}), got {shape}.")
        if cache is not None and not (hasattr(cache, "update") and hasattr(cache, "bind")):
            raise TypeError(f"cache must be an attn_core.KVCache, got {type(cache).__name__}.")
        if self.rope_base is None and positions is not None:
            raise ValueError("positions= needs a layer with rope_base set; this one has rope_base=None.")
        batch, q_len, _ = x.shape
        start = len(cache) if cache is not None else 0  # index of the first new token
        heads, kv_heads, dim = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.q_proj(x).view(batch, q_len, heads, dim).transpose(1, 2)  # (B, H, Lq, D)
        k = self.k_proj(x).view(batch, q_len, kv_heads, dim).transpose(1, 2)  # (B, Hkv, Lq, D)
        v = self.v_proj(x).view(batch, q_len, kv_heads, dim).transpose(1, 2)  # (B, Hkv, Lq, D)
        if self.rope_base is not None:
            positions = self._rope_positions(positions, batch, q_len, start, x.device)  # (Lq,) or (B, 1, Lq)
            q = apply_rope(q, positions, base=self.rope_base)  # (B, H, Lq, D)
            k = apply_rope(k, positions, base=self.rope_base)  # (B, Hkv, Lq, D)
        if cache is not None:
            cache.bind(self)
            k, v = cache.update(k, v)  # (B, Hkv, T, D)
        window = cache_window_mask(cache, start, q_len, k.shape[-2], device=x.device)  # (Lq, T) or None
        if window is not None:
            mask, is_causal = (window if mask is None else mask & window), False  # the window is causal
        # Pair p's value: kv heads g and g + Hkv/2 side by side. Laid out twice over the kv-head axis, query head
        # h of GQA group h // G then reads the value of its pair for both h = p and h = p + H/2.
        first, second = v.chunk(2, dim=1)  # (B, Hkv/2, T, D) each
        pair_values = torch.cat([first, second], dim=-1)  # (B, Hkv/2, T, 2D)
        pair_values = torch.cat([pair_values, pair_values], dim=1)  # (B, Hkv, T, 2D)
        out, weights = scaled_dot_product_attention(q, k, pair_values, mask, is_causal=is_causal)
        # out (B, H, Lq, 2D): A_h · V_pair(h); weights (B, H, Lq, T): every head's softmax, rows sum to 1
        lam = self.lambda_full().to(out.dtype)  # scalar
        diff = out[:, : heads // 2] - lam * out[:, heads // 2 :]  # (B, H/2, Lq, 2D): (A_p − λ A_{p+H/2}) V_p
        rms = diff.pow(2).mean(-1, keepdim=True).add(NORM_EPS).rsqrt()  # (B, H/2, Lq, 1)
        diff = (1 - self.lambda_init) * diff * rms  # (B, H/2, Lq, 2D): RMSNorm without weight, then scaled
        diff = diff.transpose(1, 2).reshape(batch, q_len, heads * dim)  # (B, Lq, H * D): the pairs in order
        return self.o_proj(diff), weights  # (B, Lq, hidden), (B, H, Lq, T)

    def _rope_positions(
        self, positions: torch.Tensor | None, batch: int, q_len: int, start: int, device: torch.device
    ) -> torch.Tensor:
        if positions is None:
            return torch.arange(start, start + q_len, device=device)  # (Lq,): continues after the cache
        positions = _as_token_positions(positions, device)  # (Lq,) or (B, Lq)
        if positions.ndim == 1 and positions.shape[0] == q_len:
            return positions  # (Lq,)
        if positions.ndim == 2 and positions.shape[0] in (1, batch) and positions.shape[1] == q_len:
            return positions.unsqueeze(1)  # (B, 1, Lq)
        raise ValueError(f"positions must have shape ({q_len},) or ({batch}, {q_len}), got {tuple(positions.shape)}.")
