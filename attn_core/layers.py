"""Attention layers: one grouped-query implementation, with MHA and MQA as its two ends.

===========================  ================  ===============================
layer                        ``num_kv_heads``  keys/values per token (cached)
===========================  ================  ===============================
``MultiHeadAttention``       ``num_heads``     one per query head
``GroupedQueryAttention``    a divisor          one per group of query heads
``MultiQueryAttention``      ``1``             one, shared by every query head
===========================  ================  ===============================

One piece: one grouped-query forward serves MHA, MQA and GQA; the three classes differ only in their head counts.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attn_core.attention import check_dropout_p, scaled_dot_product_attention
from attn_core.caches.kv_cache import KVCache
from attn_core.masks import cache_window_mask
from attn_core.positions.rope import _as_token_positions, _check_base, apply_rope, rope_frequencies

__all__ = ["GroupedQueryAttention", "MultiHeadAttention", "MultiQueryAttention"]


class GroupedQueryAttention(nn.Module):
    """Grouped-query attention: ``num_heads`` query heads share ``num_kv_heads`` key/value heads.

    Query head ``h`` uses kv head ``h // (num_heads // num_kv_heads)``. ``head_dim`` defaults to
    ``hidden_dim // num_heads``; set it to decouple the two (Gemma-7B: 16 heads x 256 = 4096 on a
    hidden size of 3072; Keras's ``MultiHeadAttention(key_dim=...)`` is the same knob). Projections:
    q ``hidden -> num_heads * head_dim``, k/v ``hidden -> num_kv_heads * head_dim``,
    o ``num_heads * head_dim -> hidden``.

    ``rope_base`` (default None: no positions, today's layer) turns on rotary position embeddings
    (:func:`attn_core.positions.rope.apply_rope`) with that base (10000.0 in Llama 2, 500000.0 in Llama 3), in the
    Hugging Face / Llama "rotate half" layout (pairs ``(i, i + head_dim/2)``): q and k (never v) are
    rotated after the head split and before keys go into the cache, as in ``LlamaAttention``.
    ``rope_scaling`` (Hugging Face's rope_parameters keys: linear, llama3, yarn; :func:`attn_core.rope_frequencies`)
    stretches RoPE past the trained context (YaRN's attention factor on cos/sin; the softmax scale is unchanged);
    ``partial_rotary_factor`` rotates only the first ``int(head_dim · factor)`` features (StableLM, Phi).
    Both need ``rope_base``; a NoPE layer (SmolLM3's every 4th, Llama 4) is ``rope_base=None``.

    What 2025 decoders add (Gemma 3, Qwen 3, OLMo 2), each off by default:
    ``qk_norm=True`` RMS-normalises every query and key head over ``head_dim`` (learned weight, eps 1e-6)
    before RoPE, which keeps the logits from growing during training; ``scale`` replaces
    ``1/sqrt(head_dim)`` (Gemma's ``query_pre_attn_scalar ** -0.5``); ``sliding_window=W`` lets each
    query see its ``W`` most recent keys, itself included (causal; ``ac.sliding_window_mask``), with or
    without a cache (pair it with ``KVCache(window=W)`` to also bound the cache).

    The attention-sink fixes of 2025 (notebook 12c), off by default, True/False only:
    ``output_gate=True`` (Qwen3-Next's gated attention): ``q_proj`` gives ``num_heads · 2 · head_dim`` features laid
    out per head as ``[query_h | gate_h]``, and the attention output ``(B, Lq, H · head_dim)`` is multiplied by
    ``sigmoid(gate)`` before ``o_proj`` (the returned weights are unchanged). ``sinks=True`` (gpt-oss): a parameter
    ``sinks (num_heads,)``, zeros at init, one logit per head that joins every softmax row with no value and no
    scale, so the returned weights sum to ``1 − p_sink < 1`` (not ``KVCache(num_sinks=)``, which keeps real keys).

    ``forward(x, context=None, mask=None, *, is_causal=False, cache=None, positions=None)``:
        x ``(B, Lq, hidden_dim)``; context ``(B, Lk, hidden_dim)`` for cross-attention
        (keys/values from ``context``); mask boolean, True = may attend, broadcastable to
        ``(B, num_heads, Lq, Lk)``; ``cache`` a :class:`KVCache` that this call appends its
        keys/values to and attends over (a cache belongs to one layer: it is bound on first use).
        Returns ``(out (B, Lq, hidden_dim), weights (B, num_heads, Lq, Lk))``; dropout hits the
        weights in training mode only.
        ``seq_id`` picks one sequence of a paged cache (``cache=ac.PagedKVCache(...)``): the layer
        attends over ``cache.sequence(seq_id)``, which behaves like a KVCache of batch 1.
        With a window (the layer's ``sliding_window`` or the cache's ``window``) the mask is built from
        token indices: query ``len(cache) + i`` sees the keys at indices ``j <= len(cache) + i`` within the
        window (a window implies causal attention, so ``is_causal`` changes nothing there). A
        ``KVCache(window, num_sinks)``'s sinks stay visible whatever the layer's own ``sliding_window``.
        ``key_mask`` boolean ``(B, N)`` over the whole sequence so far (``N >= len(cache) + Lq`` token indices;
        True = a real token, False = padding): padding keys are hidden from every query (a padding query that
        sees no real key gets a zero output). Hugging Face's ``attention_mask`` as ``.bool()``.
        ``positions`` (RoPE layers only) integer positions of the ``Lq`` new tokens, ``(Lq,)`` or ``(B, Lq)``
        (per sequence, e.g. a left-padded batch); None means ``0 .. Lq-1`` continuing after the
        ``len(cache)`` tokens already cached, so token-by-token decoding equals one full pass.
        RoPE is defined for self-attention only: ``context`` with ``rope_base`` set raises ValueError.
    """

    def __init__(
        self,
        hidden_dim: int,
        num_heads: int,
        num_kv_heads: int,
        *,
        head_dim: int | None = None,
        rope_base: float | None = None,
        rope_scaling: dict | None = None,
        partial_rotary_factor: float = 1.0,
        qk_norm: bool = False,
        scale: float | None = None,
        sliding_window: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        output_gate: bool = False,
        sinks: bool = False,
    ):
        super().__init__()
        for name, value in (("hidden_dim", hidden_dim), ("num_heads", num_heads), ("num_kv_heads", num_kv_heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}.")
        if head_dim is None:
            if hidden_dim % num_heads != 0:
                raise ValueError(
                    f"hidden_dim ({hidden_dim}) must be divisible by num_heads ({num_heads}) so every head "
                    f"gets head_dim = hidden_dim / num_heads features. Try num_heads in "
                    f"{[h for h in range(1, min(hidden_dim, 64) + 1) if hidden_dim % h == 0]}, "
                    "or pass head_dim= explicitly (then any num_heads works)."
                )
            head_dim = hidden_dim // num_heads
        elif isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 1:
            raise ValueError(
                f"head_dim must be a positive int (features per head), got {head_dim!r}. "
                f"Leave it out for the usual hidden_dim // num_heads."
            )
        if num_heads % num_kv_heads != 0:
            raise ValueError(
                f"num_heads ({num_heads}) must be divisible by num_kv_heads ({num_kv_heads}) so every "
                f"kv head serves the same number of query heads. Try num_kv_heads in "
                f"{[g for g in range(1, num_heads + 1) if num_heads % g == 0]}."
            )
        check_dropout_p(dropout)
        if rope_base is not None:
            rope_base = _check_base(rope_base)
            if head_dim % 2 and partial_rotary_factor == 1.0:
                raise ValueError(
                    f"rope_base needs an even head_dim (RoPE rotates pairs of features), got head_dim={head_dim}. "
                    "Pass an even head_dim=, or leave rope_base=None."
                )
            # Validates rope_scaling's keys and the partial factor now, not at the first forward.
            rope_frequencies(
                head_dim, base=rope_base, scaling=rope_scaling, partial_rotary_factor=partial_rotary_factor
            )
        elif rope_scaling is not None or partial_rotary_factor != 1.0:
            raise ValueError(
                f"rope_scaling={rope_scaling!r} and partial_rotary_factor={partial_rotary_factor!r} only apply to a "
                "layer with rotary embeddings, but rope_base=None (no positions). Pass rope_base= (e.g. 10000.0), "
                "or drop them; a NoPE layer (SmolLM3, Llama 4) simply has rope_base=None."
            )
        if sliding_window is not None and (
            isinstance(sliding_window, bool) or not isinstance(sliding_window, int) or sliding_window < 1
        ):
            raise ValueError(
                f"sliding_window must be None or an int >= 1 (keys each query sees), got {sliding_window!r}."
            )
        if scale is not None and (
            isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < math.inf
        ):
            raise ValueError(f"scale must be None (1/sqrt(head_dim)) or a positive finite number, got {scale!r}.")
        if not isinstance(qk_norm, bool):
            raise TypeError(f"qk_norm must be True or False, got {qk_norm!r}.")
        for name, value in (("output_gate", output_gate), ("sinks", sinks)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, got {value!r} of type {type(value).__name__}.")
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim  # need not equal hidden_dim / num_heads (Gemma-7B: 16 heads x 256 on hidden 3072)
        self.rope_base = rope_base  # None: no positions; else RoPE's base (rotate-half layout)
        self.rope_scaling = None if rope_scaling is None else dict(rope_scaling)  # HF's keys; a copy, never modified
        self.partial_rotary_factor = partial_rotary_factor  # the first int(head_dim · factor) features rotate
        self.scale = scale  # None: 1/sqrt(head_dim)
        self.sliding_window = sliding_window  # None: every earlier key; W: the last W keys
        self.dropout = dropout
        self.output_gate = output_gate  # Qwen3-Next: out * sigmoid(gate) before o_proj; q_proj gives query and gate
        q_width = num_heads * head_dim * (2 if output_gate else 1)  # per head [query_h | gate_h] when gated
        self.q_proj = nn.Linear(hidden_dim, q_width, bias=bias)  # hidden -> H * head_dim (x 2 with the gate)
        self.k_proj = nn.Linear(hidden_dim, num_kv_heads * head_dim, bias=bias)  # hidden -> Hkv * head_dim
        self.v_proj = nn.Linear(hidden_dim, num_kv_heads * head_dim, bias=bias)  # hidden -> Hkv * head_dim
        self.o_proj = nn.Linear(num_heads * head_dim, hidden_dim, bias=bias)  # H * head_dim -> hidden
        # QK-norm: one RMSNorm over head_dim, shared by every head (Gemma 3, Qwen 3); before RoPE.
        self.q_norm = nn.RMSNorm(head_dim, eps=1e-6) if qk_norm else None
        self.k_norm = nn.RMSNorm(head_dim, eps=1e-6) if qk_norm else None
        # gpt-oss's learned sinks: one logit per head joining every softmax row, no value; zeros at init
        self.sinks = nn.Parameter(torch.zeros(num_heads)) if sinks else None

    def extra_repr(self) -> str:
        extras = "".join(
            f", {name}={value}"
            for name, value in (
                ("rope_base", self.rope_base),
                ("rope_scaling", self.rope_scaling),
                ("partial_rotary_factor", None if self.partial_rotary_factor == 1.0 else self.partial_rotary_factor),
                ("scale", self.scale),
                ("sliding_window", self.sliding_window),
            )
            if value is not None
        )
        extras += ", qk_norm=True" if self.q_norm is not None else ""
        extras += ", output_gate=True" if self.output_gate else ""
        extras += ", sinks=True" if self.sinks is not None else ""
        return (
            f"hidden_dim={self.hidden_dim}, num_heads={self.num_heads}, "
            f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}{extras}, dropout={self.dropout}"
        )

    def _check_input(self, name: str, t: torch.Tensor) -> None:
        if not isinstance(t, torch.Tensor) or t.ndim != 3 or t.shape[-1] != self.hidden_dim:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(
                f"{name} must have shape (batch, seq_len, hidden_dim={self.hidden_dim}), got {shape}. "
                "For one unbatched sequence use .unsqueeze(0)."
            )

    def _split_heads(self, t: torch.Tensor, heads: int) -> torch.Tensor:
        batch, length, _ = t.shape
        return t.view(batch, length, heads, self.head_dim).transpose(1, 2)  # (B, heads, L, head_dim)

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        *,
        is_causal: bool = False,
        cache: KVCache | None = None,
        positions: torch.Tensor | None = None,
        seq_id: int | None = None,
        key_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self._check_input("x", x)
        if seq_id is not None:
            if cache is None or not hasattr(cache, "sequence"):
                raise ValueError(
                    f"seq_id={seq_id!r} picks a sequence of a paged cache, but cache is {type(cache).__name__}. "
                    "Pass cache=ac.PagedKVCache(...), or drop seq_id= for a KVCache."
                )
            cache = cache.sequence(seq_id)  # behaves like a KVCache of batch 1
        if cache is not None and not (hasattr(cache, "update") and hasattr(cache, "bind")):
            raise TypeError(
                f"cache must be an attn_core.KVCache (or a PagedKVCache with seq_id=...), got {type(cache).__name__}"
                f" {cache!r:.60}. Create one per layer: caches = [ac.KVCache() for _ in layers]."
            )
        source = x if context is None else context
        if self.rope_base is None and positions is not None:
            raise ValueError(
                "positions= only matters for a layer with rotary embeddings; this layer has rope_base=None, "
                "so it has no notion of position. Build it with rope_base=10000.0, or drop positions=."
            )
        if self.rope_base is not None and context is not None:
            raise ValueError(
                "RoPE is defined for self-attention: queries and keys at positions of one sequence. This layer "
                "has rope_base set and was given context= (cross-attention). Use a layer with rope_base=None "
                "for cross-attention."
            )
        if context is not None:
            self._check_input("context", context)
            if context.shape[0] != x.shape[0]:
                raise ValueError(
                    f"x and context must have the same batch size, got {x.shape[0]} and {context.shape[0]}."
                )
            if self.sliding_window is not None:
                raise ValueError(
                    "sliding_window is a causal window over one sequence (self-attention); this layer was given "
                    "context= (cross-attention). Use a layer with sliding_window=None for cross-attention."
                )
            if cache is not None:
                raise ValueError(
                    "cache= appends this call's keys/values, which for cross-attention would re-append the "
                    "same context every step. Compute the context's keys/values once instead."
                )
        batch, q_len, _ = x.shape
        start = len(cache) if cache is not None else 0  # index of the first new token
        if key_mask is not None and (
            not isinstance(key_mask, torch.Tensor)
            or key_mask.dtype != torch.bool
            or key_mask.ndim != 2
            or key_mask.shape[0] not in (1, batch)
            or key_mask.shape[1] < start + q_len
        ):
            shape = tuple(key_mask.shape) if isinstance(key_mask, torch.Tensor) else type(key_mask).__name__
            raise ValueError(
                f"key_mask must be a bool tensor (B, N) with B = {batch} and N >= len(cache) + Lq = {start + q_len} "
                f"(True = real token), got {shape}{' ' + str(key_mask.dtype) if hasattr(key_mask, 'dtype') else ''}."
            )

        gate = None
        if self.output_gate:  # Qwen3-Next's layout: per head h, q_proj's rows are [query_h | gate_h]
            query_gate = self.q_proj(x).view(batch, q_len, self.num_heads, 2 * self.head_dim)  # (B, Lq, H, 2·D)
            q, gate = query_gate.chunk(2, dim=-1)  # (B, Lq, H, D) each
            q = q.transpose(1, 2)  # (B, H, Lq, head_dim)
            gate = gate.reshape(batch, q_len, self.num_heads * self.head_dim)  # (B, Lq, H * head_dim)
        else:
            q = self._split_heads(self.q_proj(x), self.num_heads)  # (B, H, Lq, head_dim)
        k = self._split_heads(self.k_proj(source), self.num_kv_heads)  # (B, Hkv, Lk, head_dim)
        v = self._split_heads(self.v_proj(source), self.num_kv_heads)  # (B, Hkv, Lk, head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)  # (B, H, Lq, head_dim), (B, Hkv, Lk, head_dim): RMS over head_dim
        if self.rope_base is not None:
            positions = self._rope_positions(positions, batch, q_len, cache, x.device)  # (Lq,) or (B, 1, Lq)
            rope = {
                "base": self.rope_base,
                "scaling": self.rope_scaling,
                "partial_rotary_factor": self.partial_rotary_factor,
            }
            q = apply_rope(q, positions, **rope)  # (B, H, Lq, head_dim), rotate-half layout
            k = apply_rope(k, positions, **rope)  # (B, Hkv, Lq, head_dim); v is never rotated
        if cache is not None:
            cache.bind(self)  # one cache per layer: a cache fed by two layers would mix their keys
            k, v = cache.update(k, v)  # (B, Hkv, T, head_dim): everything cached so far
        window = self._window_mask(cache, start, q_len, k.shape[-2], x.device)  # (Lq, T) or None
        if window is not None:
            mask, is_causal = (window if mask is None else mask & window), False  # the window is causal
        if key_mask is not None:
            real = self._real_keys(key_mask, cache, start, q_len, k.shape[-2])  # (B, 1, 1, Lk)
            mask = real if mask is None else mask & real  # (B, 1 or H, Lq, Lk)

        dropout_p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention(
            q, k, v, mask, is_causal=is_causal, scale=self.scale, dropout_p=dropout_p, sinks=self.sinks
        )
        # out (B, H, Lq, head_dim), weights (B, H, Lq, Lk)
        out = out.transpose(1, 2).reshape(batch, q_len, self.num_heads * self.head_dim)  # (B, Lq, H * head_dim)
        if gate is not None:  # a head can output ~0 without a sink; a non-linearity after the low-rank V·O
            out = out * torch.sigmoid(gate)  # (B, Lq, H * head_dim)
        return self.o_proj(out), weights  # (B, Lq, hidden), (B, H, Lq, Lk)

    def _window_mask(
        self, cache: KVCache | None, start: int, q_len: int, k_len: int, device: torch.device
    ) -> torch.Tensor | None:
        """Boolean ``(Lq, Lk)``: which keys each query sees under the layer's and the cache's windows, or None.

        ``ac.masks.cache_window_mask``'s rule: query ``q`` sees key ``k <= q`` if ``q - k < min(layer's
        sliding_window, cache's window)`` or if ``k`` is one of the cache's sinks (``k < cache.num_sinks``). The
        sinks stay visible whatever the layer's own ``sliding_window``: a ``KVCache(window, num_sinks)`` promises
        "the last W and the first S", and the layer's window bounds only the others. (On a layer trained with a
        window, a sink shows it keys farther away than training ever did: on Gemma 3's local layers sinks make
        the loss worse, notebook 13.)
        """
        return cache_window_mask(cache, start, q_len, k_len, sliding_window=self.sliding_window, device=device)

    @staticmethod
    def _real_keys(key_mask: torch.Tensor, cache: KVCache | None, start: int, q_len: int, k_len: int) -> torch.Tensor:
        """``key_mask`` at the token index of each key returned: ``(B, 1, 1, Lk)``, True = a real token."""
        key_index = getattr(cache, "key_positions", None)  # (Lk,) when a ring buffer's slots are out of order
        if key_index is None:  # the last Lk tokens, in order
            key_index = torch.arange(start + q_len - k_len, start + q_len, device=key_mask.device)  # (Lk,)
        # a ring's empty slots carry a far-future index; the window mask hides them, any in-range index will do
        key_index = key_index.to(key_mask.device).clamp(0, start + q_len - 1)  # (Lk,)
        return key_mask[:, key_index][:, None, None, :]  # (B, 1, 1, Lk)

    def _rope_positions(
        self, positions: torch.Tensor | None, batch: int, q_len: int, cache: KVCache | None, device: torch.device
    ) -> torch.Tensor:
        if positions is None:
            start = len(cache) if cache is not None else 0  # keys already cached sit at 0 .. start-1
            return torch.arange(start, start + q_len, device=device)  # (Lq,)
        positions = _as_token_positions(positions, device)  # (Lq,) or (B, Lq); token indices are >= 0
        if positions.ndim == 1 and positions.shape[0] == q_len:
            return positions  # (Lq,): the same positions for every sequence
        if positions.ndim == 2 and positions.shape[0] in (1, batch) and positions.shape[1] == q_len:
            return positions.unsqueeze(1)  # (B, 1, Lq): broadcast over heads
        raise ValueError(
            f"positions must have shape (Lq,) = ({q_len},) or (B, Lq) = ({batch}, {q_len}) for x of shape "
            f"({batch}, {q_len}, {self.hidden_dim}), got {tuple(positions.shape)}."
        )


class MultiHeadAttention(GroupedQueryAttention):
    """Multi-head attention (Vaswani et al. 2017): every query head has its own keys and values.
    Grouped-query attention with ``num_kv_heads == num_heads``."""

    def __init__(
        self,
        hidden_dim: int,
        num_heads: int,
        *,
        head_dim: int | None = None,
        rope_base: float | None = None,
        rope_scaling: dict | None = None,
        partial_rotary_factor: float = 1.0,
        qk_norm: bool = False,
        scale: float | None = None,
        sliding_window: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
    ):
        super().__init__(
            hidden_dim,
            num_heads,
            num_heads,
            head_dim=head_dim,
            rope_base=rope_base,
            rope_scaling=rope_scaling,
            partial_rotary_factor=partial_rotary_factor,
            qk_norm=qk_norm,
            scale=scale,
            sliding_window=sliding_window,
            dropout=dropout,
            bias=bias,
        )


class MultiQueryAttention(GroupedQueryAttention):
    """Multi-query attention (Shazeer 2019): all query heads share one key head and one value head.
    Grouped-query attention with ``num_kv_heads == 1``."""

    def __init__(
        self,
        hidden_dim: int,
        num_heads: int,
        *,
        head_dim: int | None = None,
        rope_base: float | None = None,
        rope_scaling: dict | None = None,
        partial_rotary_factor: float = 1.0,
        qk_norm: bool = False,
        scale: float | None = None,
        sliding_window: int | None = None,
        dropout: float = 0.0,
        bias: bool = True,
    ):
        super().__init__(
            hidden_dim,
            num_heads,
            1,
            head_dim=head_dim,
            rope_base=rope_base,
            rope_scaling=rope_scaling,
            partial_rotary_factor=partial_rotary_factor,
            qk_norm=qk_norm,
            scale=scale,
            sliding_window=sliding_window,
            dropout=dropout,
            bias=bias,
        )
