"""Attention masks: small boolean factories that compose with ``&`` and ``|``.

The one convention in this package: a mask is a ``torch.bool`` tensor and
``True`` means *this query may attend to this key*, exactly as the boolean
``attn_mask`` of ``torch.nn.functional.scaled_dot_product_attention``.

Other APIs use other conventions; convert explicitly at the boundary:

=============================================  ==================  ==========================
API                                            blocked is          convert to ours
=============================================  ==================  ==========================
``F.scaled_dot_product_attention`` (bool)      ``False``           already ours
``nn.MultiheadAttention`` ``attn_mask`` (bool)  ``True``            ``mask_from_blocked(m)``
Hugging Face ``attention_mask`` (per token)    ``0``               ``mask_from_float(m)``
Keras ``MultiHeadAttention``                   ``0`` / ``False``   ``mask_from_float(m)``
TF tutorial ``logits += mask * -1e9``          ``1``               ``mask_from_blocked(m)``
additive float masks (``0`` / ``-inf``)        ``-inf``            ``mask_from_additive(m)``
=============================================  ==================  ==========================
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

__all__ = [
    "causal_mask",
    "padding_mask",
    "sliding_window_mask",
    "chunked_mask",
    "prefix_lm_mask",
    "mask_from_float",
    "mask_from_blocked",
    "mask_from_additive",
    "mask_to_blocked",
    "mask_to_additive",
    "check_mask",
    "cache_window_mask",
]


def _check_length(name: str, value: int, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}.")
    return value


def causal_mask(q_len: int, k_len: int | None = None, *, device=None) -> torch.Tensor:
    """Boolean ``(q_len, k_len)``: query ``i`` may attend to keys ``0 .. i + (k_len - q_len)``.

    Aligned to the bottom-right: the last query sees every key. With a KV cache the
    queries are the *newest* ``q_len`` tokens of a ``k_len``-token sequence, so this is
    the mask decoding needs. ``F.scaled_dot_product_attention(is_causal=True)`` aligns
    to the top-left instead (query ``i`` sees keys ``0 .. i``); the two agree only when
    ``q_len == k_len``. When ``k_len < q_len`` the first ``q_len - k_len`` queries see no
    key at all (attention returns zeros for them).
    """
    _check_length("q_len", q_len)
    k_len = q_len if k_len is None else _check_length("k_len", k_len)
    query = torch.arange(q_len, device=device).unsqueeze(-1)  # (Lq, 1)
    key = torch.arange(k_len, device=device)  # (Lk,)
    return key <= query + (k_len - q_len)  # (Lq, Lk)


def sliding_window_mask(q_len: int, window: int, k_len: int | None = None, *, device=None) -> torch.Tensor:
    """Causal (bottom-right) mask where each query sees only its ``window`` most recent keys,
    itself included. Boolean ``(q_len, k_len)``."""
    _check_length("window", window, minimum=1)
    k_len = q_len if k_len is None else _check_length("k_len", k_len)
    causal = causal_mask(q_len, k_len, device=device)  # (Lq, Lk)
    query = torch.arange(q_len, device=device).unsqueeze(-1) + (k_len - q_len)  # (Lq, 1) position in keys
    key = torch.arange(k_len, device=device)  # (Lk,)
    return causal & (key > query - window)  # (Lq, Lk)


def chunked_mask(q_len: int, chunk_size: int, k_len: int | None = None, *, device=None) -> torch.Tensor:
    """Causal (bottom-right) mask within fixed chunks (Llama 4's ``attention_chunk_size``): query at position
    ``p`` sees the keys ``k <= p`` with ``k // chunk_size == p // chunk_size``. Boolean ``(q_len, k_len)``."""
    _check_length("chunk_size", chunk_size, minimum=1)
    k_len = q_len if k_len is None else _check_length("k_len", k_len)
    causal = causal_mask(q_len, k_len, device=device)  # (Lq, Lk)
    query = torch.arange(q_len, device=device).unsqueeze(-1) + (k_len - q_len)  # (Lq, 1) position in keys
    key = torch.arange(k_len, device=device)  # (Lk,)
    return causal & (key // chunk_size == query // chunk_size)  # (Lq, Lk)


def prefix_lm_mask(seq_len: int, prefix_len: int, *, device=None) -> torch.Tensor:
    """Prefix-LM: the first ``prefix_len`` tokens see each other both ways, the rest are causal.
    Boolean ``(seq_len, seq_len)``; it is ``causal | key_in_prefix``."""
    _check_length("seq_len", seq_len)
    _check_length("prefix_len", prefix_len)
    if prefix_len > seq_len:
        raise ValueError(f"prefix_len ({prefix_len}) cannot exceed seq_len ({seq_len}).")
    key_in_prefix = torch.arange(seq_len, device=device) < prefix_len  # (L,)
    return causal_mask(seq_len, device=device) | key_in_prefix  # (L, L)


def cache_window_mask(
    cache: object,
    start: int,
    q_len: int,
    k_len: int,
    *,
    sliding_window: int | None = None,
    device: torch.device | None = None,
) -> torch.Tensor | None:
    """What ``q_len`` new queries at positions ``start ..`` may see among the ``k_len`` keys a cache returned.

    The one mask rule for every layer that attends over a ``KVCache`` (``GroupedQueryAttention``,
    ``MultiHeadLatentAttention``): query ``q`` sees key ``k <= q`` if ``q - k < min(sliding_window,
    cache.window)`` (the layer's own window and what the cache keeps) or if ``k`` is one of the cache's sinks
    (``k < cache.num_sinks``). The sinks stay visible whatever the layer's ``sliding_window``: a
    ``KVCache(window, num_sinks)`` promises "the last W and the first S"; the layer's window bounds the others.
    Keys sit at ``cache.key_positions`` (a ring buffer's slots, out of order once it wraps; an emptied slot
    sits at a far-future position, so no query sees it) or, when that is None, at the last ``k_len``
    positions in order. Returns a boolean ``(q_len, k_len)`` (True = may attend), or None when no window
    applies or a decode step sees every key it was given (the caller then needs no mask, or only
    ``is_causal``). ``cache`` may be None or any object; its ``window``, ``num_sinks``, ``max_rollback`` and
    ``key_positions`` are read when present.
    """
    cache_window = getattr(cache, "window", None)
    if sliding_window is None and cache_window is None:
        return None
    num_sinks = getattr(cache, "num_sinks", 0) if cache_window is not None else 0
    key_index = getattr(cache, "key_positions", None)  # (Lk,) when a ring buffer's slots are out of order
    window = min(w for w in (sliding_window, cache_window, math.inf) if w is not None)
    if q_len == 1 and num_sinks == 0:  # a decode step: often every key is visible
        if key_index is None and k_len <= window:
            return None  # the last k_len tokens, the query's own included: all inside the window
        # A wrapped ring of exactly `window` slots and no rollback slots holds the last `window` tokens, all
        # visible (a KVCache goes back to slot order when a truncate empties it, so a wrapped ring is full here).
        ring_is_the_window = cache_window is not None and cache_window <= window and cache.max_rollback == 0
        if key_index is not None and ring_is_the_window:
            return None
    query_index = torch.arange(start, start + q_len, device=device)  # (Lq,)
    if key_index is None:  # keys are the last Lk tokens, in order (bottom-right aligned)
        key_index = torch.arange(start + q_len - k_len, start + q_len, device=device)  # (Lk,)
    key_index = key_index.to(device)  # (Lk,)
    distance = query_index.unsqueeze(-1) - key_index  # (Lq, Lk): how far back each key is
    is_sink = key_index < num_sinks  # (Lk,): the cache's first S tokens, kept and shown forever
    return (distance >= 0) & ((distance < window) | is_sink)  # (Lq, Lk): causal; the last W, and the sinks


def padding_mask(lengths: Sequence[int] | torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """Boolean ``(B, 1, 1, max_len)``, True on real tokens, False on padding.

    The two singleton dims broadcast over heads and queries, so the result can be
    passed straight to attention or combined with a causal mask: ``padding & causal``.
    """
    given_a_tensor = isinstance(lengths, torch.Tensor)
    lengths = torch.as_tensor(lengths)
    if not given_a_tensor and lengths.numel() == 0:
        lengths = lengths.long()  # torch.as_tensor([]) is float32, but [] is a batch of no sequences
    if lengths.ndim != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(
            f"lengths must be a 1-D sequence of ints (one per batch row), got {lengths.dtype} "
            f"with shape {tuple(lengths.shape)}."
        )
    if (lengths < 0).any():
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}.")
    longest = int(lengths.max()) if lengths.numel() else 0
    max_len = longest if max_len is None else _check_length("max_len", max_len)
    if longest > max_len:
        raise ValueError(f"a length ({longest}) exceeds max_len ({max_len}); raise max_len or truncate.")
    positions = torch.arange(max_len, device=lengths.device)  # (L,)
    real = positions < lengths.unsqueeze(-1)  # (B, L)
    return real[:, None, None, :]  # (B, 1, 1, L)


def check_mask(mask: torch.Tensor, weights_shape: Sequence[int], *, device: torch.device | None = None) -> None:
    """Raise a clear error unless ``mask`` is boolean, broadcasts to ``weights_shape`` and,
    when ``device`` is given, lives on that device (the device of q, k and v)."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a boolean torch.Tensor (True = may attend), got {type(mask).__name__}.")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask has dtype {mask.dtype}, but attn_core masks are boolean with True = may attend "
            "(the convention of F.scaled_dot_product_attention). Convert explicitly: "
            "a 0/1 mask with 1 = attend (Hugging Face attention_mask, Keras) -> mask_from_float(m) "
            "or m.bool(); a mask with True/1 = blocked (nn.MultiheadAttention, the TensorFlow "
            "tutorial's look-ahead mask) -> mask_from_blocked(m); an additive mask of 0 / -inf -> "
            "mask_from_additive(m)."
        )
    if device is not None and mask.device != torch.device(device):
        raise ValueError(f"mask is on {mask.device} but q, k, v are on {device}; move it with mask.to(q.device).")
    weights_shape = tuple(weights_shape)
    if not broadcasts_to(mask.shape, weights_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention weights "
            f"{weights_shape} (..., heads, q_len, k_len). Use (q_len, k_len) for one mask for all, "
            "(B, 1, 1, k_len) for per-sequence padding (padding_mask), or (B, 1, q_len, k_len) "
            "for per-sequence masks shared by all heads."
        )


def broadcasts_to(shape, target) -> bool:
    """Whether a tensor of ``shape`` broadcasts to exactly ``target`` (NumPy rules, ``target`` unchanged).

    Plain Python, not ``torch.broadcast_shapes``: its first call imports sympy (0.5-0.7 s, once per notebook).
    """
    shape, target = tuple(shape), tuple(target)
    trailing = target[len(target) - len(shape) :]  # the dims ``shape`` lines up with
    return len(shape) <= len(target) and all(s in (1, t) for s, t in zip(shape, trailing, strict=True))


def mask_from_float(mask: torch.Tensor) -> torch.Tensor:
    """0/1 mask with 1 = attend (Hugging Face ``attention_mask``, Keras) -> ours."""
    return torch.as_tensor(mask) != 0


def mask_from_blocked(mask: torch.Tensor) -> torch.Tensor:
    """Mask with True/1 = blocked (``nn.MultiheadAttention``, the TF tutorial) -> ours."""
    return torch.as_tensor(mask) == 0


def mask_from_additive(mask: torch.Tensor) -> torch.Tensor:
    """Additive float mask (0 = attend, ``-inf`` or a large negative = blocked) -> ours."""
    mask = torch.as_tensor(mask)
    if (mask > 0).any():
        raise ValueError("an additive mask holds 0 (attend) and negative values (blocked); found positive values.")
    return mask == 0


def _require_bool(mask: torch.Tensor, converter: str) -> torch.Tensor:
    mask = torch.as_tensor(mask)
    if mask.dtype != torch.bool:
        raise TypeError(
            f"{converter} takes one of our boolean masks (True = may attend), got dtype {mask.dtype}. "
            "Convert it first: a 0/1 mask with 1 = attend -> mask_from_float(m); 1 = blocked -> "
            "mask_from_blocked(m). (On an int tensor ~ is bitwise not: ~1 == -2, not 0.)"
        )
    return mask


def mask_to_blocked(mask: torch.Tensor) -> torch.Tensor:
    """Ours -> True = blocked, for ``nn.MultiheadAttention``'s ``attn_mask``/``key_padding_mask``."""
    return ~_require_bool(mask, "mask_to_blocked")


def mask_to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Ours -> additive float mask: 0 where attending, ``-inf`` where blocked."""
    mask = _require_bool(mask, "mask_to_additive")
    additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return additive.masked_fill(~mask, float("-inf"))
