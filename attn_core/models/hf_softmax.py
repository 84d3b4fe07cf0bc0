"""One softmax token mixer whose options are the Hugging Face config keys of the decoders ``ac.layer_from_hf`` covers.

``HFSoftmaxAttention`` is Llama's attention with, each off by default, what later decoders add: Gemma's ``(1 + w)``
RMSNorm on query and key heads (``qk_norm="gemma"``), Llama 4's weightless L2 QK-norm (``qk_norm="l2"``, rope layers
only), Qwen3-Next's output gate, gpt-oss's per-head sinks, a sliding window (Gemma 3, gpt-oss), Llama 4's chunked local
attention (``attention_chunk_size``: query ``q`` sees key ``k <= q`` only when ``k // C == q // C``;
``ac.chunked_mask``), and Llama 4's NoPE query temperature (``attn_temperature_tuning``: on a layer without RoPE the
query at position ``p`` is multiplied by ``1 + attn_scale · log(1 + floor((p + 1) / floor_scale))``, arXiv 2501.19399).
Parameter names are the Hugging Face module's, so ``load_state_dict(hf_attention.state_dict())`` is strict.

One piece because every option is a line of the same forward: projections, norms, RoPE, temperature, cache, mask.
The notebooks' ``ac.GroupedQueryAttention`` is left as the series teaches it; this module is what the series'
``layer_from_hf`` returns, its behaviour documented against the HF source it mirrors.

Precision: computed in the input dtype throughout (float64 stays float64). Hugging Face rounds through float32 in
three places, so equality with HF in float64 holds to a float32-sized bound, not 1e-10: the rotary cos/sin tables
(``RotaryEmbedding.forward`` casts ``inv_freq`` and positions with ``.float()``), every RMSNorm / L2 norm
(``_norm(x.float())``), and the eager softmax of most families (``softmax(..., dtype=torch.float32)``).
"""

from __future__ import annotations

import torch
from torch import nn

from attn_core.attention import scaled_dot_product_attention
from attn_core.caches.kv_cache import KVCache
from attn_core.positions.rope import apply_rope

__all__ = ["HFSoftmaxAttention", "OffsetRMSNorm", "causal_chunk_window_mask"]


def check_layer_input(x, cache, hidden_size: int, cache_hint: str = " (one per layer)") -> None:
    """The input check every layer ``layer_from_hf`` builds runs first: x ``(B, L, hidden)``, cache a KVCache."""
    if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != hidden_size:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must have shape (batch, seq_len, hidden_size={hidden_size}), got {got}.")
    if cache is not None and not isinstance(cache, KVCache):
        raise TypeError(f"cache must be an ac.KVCache(){cache_hint}, got {type(cache).__name__}.")
    if getattr(cache, "window", None) is not None:
        # these layers mask by token index (their own windows and chunks), which a ring buffer's slots are not:
        # once it wraps, keys would be read at the wrong positions, silently
        raise ValueError(
            f"cache must keep every token: got a ring cache KVCache(window={cache.window}). The layer applies its "
            "own sliding window / chunks as a mask over token positions; pass ac.KVCache() (no window)."
        )


class OffsetRMSNorm(nn.Module):
    """Gemma / Qwen3-Next RMSNorm: ``x / rms(x) · (1 + weight)``, weight zeros at init (HF's parameter name)."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., D)
        return normed * (1.0 + self.weight)  # (..., D)


class ScaledRMSNorm(nn.Module):
    """RMSNorm ``weight · x / rms(x)`` (weight ones at init); ``with_scale=False``: no weight (Gemma 4's v_norm)."""

    def __init__(self, dim: int, eps: float = 1e-6, with_scale: bool = True) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if with_scale else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., D)
        return normed if self.weight is None else normed * self.weight  # (..., D)


def causal_chunk_window_mask(
    query_positions: torch.Tensor,  # token indices; ac.chunked_mask / ac.sliding_window_mask are the (L, T) views
    key_positions: torch.Tensor,
    *,
    sliding_window: int | None = None,
    chunk_size: int | None = None,
) -> torch.Tensor:
    """Boolean ``(Lq, Lk)``, True = may attend: ``k<=q``; ``q - k < W`` (window W); ``k // C == q // C`` (chunk C)."""
    q = query_positions[:, None]  # (Lq, 1)
    k = key_positions[None, :]  # (1, Lk)
    mask = k <= q  # (Lq, Lk) causal
    if sliding_window is not None:
        mask = mask & (q - k < sliding_window)  # the last W keys, itself included
    if chunk_size is not None:
        mask = mask & (
            torch.div(q, chunk_size, rounding_mode="floor") == torch.div(k, chunk_size, rounding_mode="floor")
        )
    return mask


class HFSoftmaxAttention(nn.Module):
    """Softmax attention with Hugging Face parameter names; ``forward(x, *, positions=None, cache=None)``.

    x ``(B, L, hidden)``; ``positions`` the RoPE / temperature positions of the ``L`` new tokens (default: ``0..L-1``
    after what ``cache`` holds); ``cache`` an ``ac.KVCache()`` (one per layer) that this call appends to.
    The mask is built from token indices (the cache's length), so it is causal with the layer's window or chunks
    whatever the chunking of the prefill. Returns ``(out (B, L, hidden), weights (B, H, L, T))`` as the HF module does.
    """

    def __init__(
        self,
        hidden_size: int,
        num_attention_heads: int,
        num_key_value_heads: int,
        head_dim: int,
        *,
        attention_bias: bool = False,
        scaling: float | None = None,
        rope_theta: float | None = 10000.0,
        rope_scaling: dict | None = None,
        partial_rotary_factor: float = 1.0,
        rope_interleaved: bool = False,
        qk_norm: str | None = None,
        rms_norm_eps: float = 1e-6,
        output_gate: bool = False,
        sinks: bool = False,
        sliding_window: int | None = None,
        attention_chunk_size: int | None = None,
        attn_temperature_tuning: bool = False,
        floor_scale: float = 8192.0,
        attn_scale: float = 0.1,
    ) -> None:
        super().__init__()
        if num_attention_heads % num_key_value_heads:
            raise ValueError(
                f"num_attention_heads={num_attention_heads} must be a multiple of num_key_value_heads="
                f"{num_key_value_heads} (each kv head serves a group of query heads)."
            )
        if qk_norm not in (None, "gemma", "l2"):
            raise ValueError(f"qk_norm must be None, 'gemma' ((1 + w) RMSNorm) or 'l2' (weightless), got {qk_norm!r}.")
        self.hidden_size = hidden_size
        self.num_heads = num_attention_heads
        self.num_kv_heads = num_key_value_heads
        self.head_dim = head_dim
        self.scaling = head_dim**-0.5 if scaling is None else scaling
        self.rope_theta = rope_theta  # None: a NoPE layer
        self.rope_scaling = rope_scaling
        self.partial_rotary_factor = partial_rotary_factor
        self.rope_interleaved = rope_interleaved  # Llama 4: pairs (2i, 2i+1) (complex multiply); else rotate half
        self.sliding_window = sliding_window
        self.attention_chunk_size = attention_chunk_size
        self.attn_temperature_tuning = attn_temperature_tuning and rope_theta is None  # HF: NoPE layers only
        self.floor_scale = floor_scale
        self.attn_scale = attn_scale
        self.output_gate = output_gate
        self.l2_eps = rms_norm_eps if qk_norm == "l2" else None  # weightless: no parameter, as in HF

        q_width = num_attention_heads * head_dim * (2 if output_gate else 1)  # the gate rides on q_proj (per head)
        self.q_proj = nn.Linear(hidden_size, q_width, bias=attention_bias)  # hidden -> H·D (x 2 with the gate)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=attention_bias)  # hidden -> Hkv·D
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=attention_bias)  # hidden -> Hkv·D
        self.o_proj = nn.Linear(num_attention_heads * head_dim, hidden_size, bias=attention_bias)  # H·D -> hidden
        if qk_norm == "gemma":
            self.q_norm = OffsetRMSNorm(head_dim, rms_norm_eps)
            self.k_norm = OffsetRMSNorm(head_dim, rms_norm_eps)
        self.sinks = nn.Parameter(torch.zeros(num_attention_heads)) if sinks else None

    def _l2(self, t: torch.Tensor) -> torch.Tensor:
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + self.l2_eps)  # (..., D): RMS 1, no weight

    def _positions(self, positions, start: int, q_len: int, device) -> torch.Tensor:
        if positions is None:
            return torch.arange(start, start + q_len, device=device)  # (L,): continue the cache
        positions = torch.as_tensor(positions, device=device)
        if positions.dtype.is_floating_point or positions.shape[-1:] != (q_len,) or positions.ndim > 2:
            raise ValueError(
                f"positions must be integers of shape (L,) or (B, L) with L = {q_len}, got {positions!r:.80}."
            )
        return positions  # (L,) or (B, L)

    def forward(
        self, x: torch.Tensor, *, positions: torch.Tensor | None = None, cache: KVCache | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_layer_input(x, cache, self.hidden_size)
        batch, q_len, _ = x.shape
        start = len(cache) if cache is not None else 0
        pos = self._positions(positions, start, q_len, x.device)  # (L,) or (B, L)
        rope_pos = pos if pos.ndim == 1 else pos[:, None, :]  # broadcast over heads: (L,) or (B, 1, L)

        gate = None
        if self.output_gate:  # Qwen3-Next: per head h, q_proj's rows are [query_h | gate_h]
            query_gate = self.q_proj(x).view(batch, q_len, self.num_heads, 2 * self.head_dim)  # (B, L, H, 2D)
            q, gate = query_gate.chunk(2, dim=-1)  # (B, L, H, D) each
            gate = gate.reshape(batch, q_len, self.num_heads * self.head_dim)  # (B, L, H·D)
        else:
            q = self.q_proj(x).view(batch, q_len, self.num_heads, self.head_dim)  # (B, L, H, D)
        k = self.k_proj(x).view(batch, q_len, self.num_kv_heads, self.head_dim)  # (B, L, Hkv, D)
        v = self.v_proj(x).view(batch, q_len, self.num_kv_heads, self.head_dim)  # (B, L, Hkv, D)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, heads, L, D)
        if hasattr(self, "q_norm"):  # Gemma / Qwen3-Next: before RoPE
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope_theta is not None:
            rope = {
                "base": self.rope_theta,
                "scaling": self.rope_scaling,
                "partial_rotary_factor": self.partial_rotary_factor,
                "interleaved": self.rope_interleaved,
            }
            q, k = apply_rope(q, rope_pos, **rope), apply_rope(k, rope_pos, **rope)  # (B, H|Hkv, L, D)
        if self.l2_eps is not None and self.rope_theta is not None:  # Llama 4: after RoPE, rope layers only
            q, k = self._l2(q), self._l2(k)
        if self.attn_temperature_tuning:  # Llama 4's NoPE layers: a longer context sharpens the query
            scale = torch.log1p(torch.floor((pos.to(x.dtype) + 1.0) / self.floor_scale)) * self.attn_scale + 1.0
            q = q * (scale[:, None] if scale.ndim == 1 else scale[:, None, :, None])  # (B, H, L, D)
        if cache is not None:
            cache.bind(self)
            k, v = cache.update(k, v)  # (B, Hkv, T, D): every token so far
        key_index = torch.arange(k.shape[-2], device=x.device)  # (T,): cached keys are tokens 0..T-1
        query_index = torch.arange(start, start + q_len, device=x.device)  # (L,)
        mask = causal_chunk_window_mask(
            query_index, key_index, sliding_window=self.sliding_window, chunk_size=self.attention_chunk_size
        )  # (L, T)
        out, weights = scaled_dot_product_attention(q, k, v, mask, scale=self.scaling, sinks=self.sinks)
        out = out.transpose(1, 2).reshape(batch, q_len, self.num_heads * self.head_dim)  # (B, L, H·D)
        if gate is not None:
            out = out * torch.sigmoid(gate)  # (B, L, H·D)
        return self.o_proj(out), weights  # (B, L, hidden), (B, H, L, T)
