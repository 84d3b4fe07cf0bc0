"""KV cache for autoregressive decoding.

Each decoding step computes keys/values for the new token(s) only and attends over
everything cached so far. Appending must not copy the whole cache each step (a
``torch.cat`` per token makes every step O(context) in copies), so the cache keeps
spare capacity and doubles it when full: appends are amortised O(new tokens).

With ``window=W`` the cache is a ring buffer of ``num_sinks + W`` slots instead: each new token
overwrites the oldest one outside the first ``num_sinks`` ("attention sinks", StreamingLLM), so
memory stays bounded however long the sequence gets, and a decode step copies nothing.
"""

from __future__ import annotations

import weakref

import torch

__all__ = ["KVCache"]


class KVCache:
    """Buffer of keys ``(B, Hkv, T, D)`` and values ``(B, Hkv, T, Dv)`` for one attention layer.

    ``KVCache()`` keeps every token (it grows by doubling). ``KVCache(window=W)`` keeps the last
    ``W`` tokens, plus the first ``num_sinks`` tokens forever; a layer attending over it gives every
    query the keys ``q - W < k <= q`` and the sinks ``k < num_sinks`` (causal), which is exactly the
    sliding-window mask (``ac.sliding_window_mask(L, W)``) over the full sequence when ``num_sinks=0``,
    whatever the chunking. Positions policy: a cached token keeps its original position (keys are
    cached after RoPE, as in every layer here); nothing is re-indexed when older tokens are evicted.

    ``len(cache)`` is the number of tokens appended so far (the next token's position; with a
    window more than the cache holds: ``cache.num_cached``); ``cache.nbytes`` counts the cached
    keys and values (``2 · B · Hkv · T · D · element size`` when ``Dv == D``), not spare capacity,
    so with a window it never exceeds ``num_sinks + W`` tokens' worth.

    After ``update``, ``cache.key_positions`` says where the returned keys sit: None when they are
    tokens ``0 .. T-1`` in order, else a ``(T,)`` int64 tensor of positions (a ring buffer's slots
    are out of order once it wraps; attention does not care about key order, the mask does).

    One cache belongs to one attention layer: the layer calls ``cache.bind(self)`` and a
    second layer binding the same cache gets a ValueError. The owner is kept for the
    cache's whole life; ``truncate(0)`` and ``reset()`` do not release it.

    Gradients through the cache: the cache is built for inference, where appends write in
    place into spare capacity. When autograd tracks the keys/values (they, or the tokens
    already cached, require grad) every append instead writes into a fresh copy of the
    buffer (O(T) per step), so the tensors earlier steps returned, and saved for backward,
    are never modified; ``backward()`` then gives the same gradients as one full causal pass,
    whatever the capacity. Decode under ``torch.no_grad()`` to keep appends in place.
    """

    def __init__(self, window: int | None = None, num_sinks: int = 0, *, initial_capacity: int = 16) -> None:
        if isinstance(initial_capacity, bool) or not isinstance(initial_capacity, int) or initial_capacity < 1:
            raise ValueError(f"initial_capacity must be an int >= 1, got {initial_capacity!r}.")
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ValueError(
                f"window must be None (keep every token) or an int >= 1 (keep the last `window` tokens), "
                f"got {window!r}."
            )
        if isinstance(num_sinks, bool) or not isinstance(num_sinks, int) or num_sinks < 0:
            raise ValueError(f"num_sinks must be an int >= 0 (first tokens kept forever), got {num_sinks!r}.")
        if num_sinks and window is None:
            raise ValueError(
                f"num_sinks={num_sinks} only matters with a window: without one every token is kept anyway. "
                "Pass window=W as well (e.g. KVCache(window=512, num_sinks=4))."
            )
        self.window = window
        self.num_sinks = num_sinks
        self.initial_capacity = initial_capacity
        self._keys: torch.Tensor | None = None  # (B, Hkv, capacity, D); with a window: the ring's slots
        self._values: torch.Tensor | None = None  # (B, Hkv, capacity, Dv)
        self._length = 0  # tokens appended so far
        self._positions: torch.Tensor | None = None  # (slots,) position held by each ring slot (window only)
        self.key_positions: torch.Tensor | None = None  # positions of the keys the last update returned
        self._owner: weakref.ref | int | None = None  # a weakref to the owning layer (its id() if it has none)
        self._owner_type = ""

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        window = "" if self.window is None else f"window={self.window}, num_sinks={self.num_sinks}, "
        if self._keys is None:
            return f"KVCache({window}empty)"
        batch, heads, _, head_dim = self._keys.shape
        return (
            f"KVCache({window}tokens={self._length}, batch={batch}, kv_heads={heads}, "
            f"head_dim={head_dim}, dtype={self._keys.dtype}, nbytes={self.nbytes})"
        )

    @property
    def num_cached(self) -> int:
        """Tokens held now: ``len(cache)``, or at most ``num_sinks + window`` with a window."""
        return self._length if self.window is None else min(self._length, self.num_sinks + self.window)

    def bind(self, owner: object) -> None:
        """Record ``owner`` (the layer using this cache) on the first call; raise ValueError
        when a later call comes from a different owner, whose keys would mix with the first's."""
        if self._owner is None:
            try:
                self._owner = weakref.ref(owner)  # no strong reference: the cache must not keep a layer alive
            except TypeError:  # objects without __weakref__
                self._owner = id(owner)
            self._owner_type = type(owner).__name__
            return
        same = self._owner() is owner if isinstance(self._owner, weakref.ref) else self._owner == id(owner)
        if not same:
            raise ValueError(
                f"this KVCache already holds the keys/values of another layer (first used by a "
                f"{self._owner_type}, now called by a {type(owner).__name__}); give every layer its own KVCache."
            )

    @property
    def capacity(self) -> int:
        """Tokens the buffer holds before it must grow."""
        return 0 if self._keys is None else self._keys.shape[-2]

    @property
    def keys(self) -> torch.Tensor:
        """Cached keys ``(B, Hkv, T, D)`` in position order (a view; a gathered copy once a ring has wrapped)."""
        self._require_filled()
        return self._keys[:, :, self._ordered_slots()]

    @property
    def values(self) -> torch.Tensor:
        """Cached values ``(B, Hkv, T, Dv)`` in position order (a view; a copy once a ring has wrapped)."""
        self._require_filled()
        return self._values[:, :, self._ordered_slots()]

    @property
    def positions(self) -> torch.Tensor:
        """Positions of ``keys``/``values``, ``(T,)`` int64, ascending."""
        if self.window is None or self._positions is None:
            return torch.arange(self.num_cached)  # (T,)
        return self._positions[self._ordered_slots()]  # (T,)

    def _ordered_slots(self) -> slice | torch.Tensor:
        if self.window is None or self._length <= self._keys.shape[-2]:
            return slice(0, self.num_cached)  # never wrapped: slots are positions
        return torch.argsort(self._positions)  # (slots,)

    @property
    def nbytes(self) -> int:
        if self._keys is None:
            return 0
        batch, heads, _, head_dim = self._keys.shape
        value_dim = self._values.shape[-1]
        return batch * heads * self.num_cached * (head_dim + value_dim) * self._keys.element_size()

    def truncate(self, length: int) -> None:
        """Keep only the first ``length`` tokens (beam search, speculative decoding, benchmarks
        that replay a step). No copy: the buffer stays and later appends overwrite the rest.
        A window cache can only roll back while it has not evicted a token the shorter sequence needs."""
        if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= self._length:
            raise ValueError(f"length must be an int in [0, {self._length}] (tokens cached), got {length!r}.")
        if self.window is not None and length < self._length and self._length > self.num_sinks + self.window:
            raise ValueError(
                f"this window cache has evicted tokens (it holds {self.num_cached} of {self._length}), so rolling "
                f"back to {length} would need tokens it no longer has. Truncate before it wraps, or use a cache "
                "without a window."
            )
        self._length = length

    def reset(self) -> None:
        """Forget every cached token (keeps nothing allocated; the owner stays bound)."""
        self._keys = self._values = self._positions = self.key_positions = None
        self._length = 0

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``keys (B, Hkv, n, D)`` and ``values (B, Hkv, n, Dv)``; return all cached so far."""
        for name, t in (("keys", keys), ("values", values)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"KVCache.update takes tensors, got {name} of type {type(t).__name__}.")
        if keys.ndim != 4 or values.ndim != 4 or keys.shape[:3] != values.shape[:3]:
            raise ValueError(
                f"KVCache.update takes keys (B, kv_heads, n, head_dim) and values (B, kv_heads, n, v_dim) "
                f"with matching first three dims, got keys {tuple(keys.shape)} and values {tuple(values.shape)}."
            )
        if self.window is not None:
            return self._update_window(keys, values)
        new = keys.shape[-2]
        if self._keys is None:
            capacity = max(self.initial_capacity, new)
            self._keys = keys.new_empty(*keys.shape[:2], capacity, keys.shape[-1])
            self._values = values.new_empty(*values.shape[:2], capacity, values.shape[-1])
        else:
            self._check_matches(keys, values)
            tracked = (
                keys.requires_grad or values.requires_grad or self._keys.requires_grad or self._values.requires_grad
            )
            if self._length + new > self.capacity:
                self._grow(self._length + new)  # fresh buffers: earlier views stay untouched
            elif tracked:
                # Writing in place would modify the buffer that earlier steps' views (saved for
                # backward) point into; a fresh copy keeps them intact, as growing does.
                self._keys, self._values = self._keys.clone(), self._values.clone()
        end = self._length + new
        self._keys[:, :, self._length : end] = keys
        self._values[:, :, self._length : end] = values
        self._length = end
        return self.keys, self.values

    def _update_window(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Ring-buffer append: sinks in slots ``0 .. S-1``, position ``p >= S`` in slot ``S + (p - S) % W``."""
        sinks, slots, new, start = self.num_sinks, self.num_sinks + self.window, keys.shape[-2], self._length
        if self._keys is None:
            self._keys = keys.new_empty(*keys.shape[:2], slots, keys.shape[-1])  # (B, Hkv, S + W, D)
            self._values = values.new_empty(*values.shape[:2], slots, values.shape[-1])  # (B, Hkv, S + W, Dv)
            self._positions = torch.full((slots,), -1, dtype=torch.long, device=keys.device)  # (S + W,)
        else:
            self._check_matches(keys, values)
            if keys.requires_grad or values.requires_grad or self._keys.requires_grad or self._values.requires_grad:
                self._keys, self._values = self._keys.clone(), self._values.clone()  # see the class docstring
        end = start + new
        positions = torch.arange(start, end, device=keys.device)  # (n,)
        if end <= slots:  # not full yet: slots are positions, a plain append
            self._keys[:, :, start:end], self._values[:, :, start:end] = keys, values
            self._positions[start:end] = positions
            self._length, self.key_positions = end, None
            return self._keys[:, :, :end], self._values[:, :, :end]  # (B, Hkv, T, D), (B, Hkv, T, Dv)
        if new == 1:  # a decode step on a full ring: overwrite the oldest non-sink slot, copy nothing
            slot = sinks + (start - sinks) % self.window
            self._keys[:, :, slot : slot + 1], self._values[:, :, slot : slot + 1] = keys, values
            self._positions[slot] = start
            self._length, self.key_positions = end, self._positions
            return self._keys, self._values  # (B, Hkv, S + W, D), (B, Hkv, S + W, Dv), slots out of order
        # Several new tokens: the early ones still need keys the later ones evict, so attend over
        # (what is held) + (the new tokens), a copy of O(S + W + n), then keep what the ring can hold.
        held_k, held_v = (self.keys, self.values) if start else (keys[:, :, :0], values[:, :, :0])
        all_k, all_v = torch.cat([held_k, keys], dim=-2), torch.cat([held_v, values], dim=-2)  # (B, Hkv, T, D)
        all_positions = torch.cat([self.positions.to(keys.device) if start else positions[:0], positions])  # (T,)
        keep = (positions < sinks) | (positions >= end - self.window)  # (n,): sinks and the last W tokens
        kept = positions[keep]  # (m,)
        slot = torch.where(kept < sinks, kept, sinks + (kept - sinks) % self.window)  # (m,), distinct slots
        self._keys[:, :, slot], self._values[:, :, slot] = keys[:, :, keep], values[:, :, keep]
        self._positions[slot] = kept
        self._length, self.key_positions = end, all_positions
        return all_k, all_v

    def _check_matches(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        expected_k = (*self._keys.shape[:2], "n", self._keys.shape[-1])
        expected_v = (*self._values.shape[:2], "n", self._values.shape[-1])
        if (
            keys.shape[:2] != self._keys.shape[:2]
            or keys.shape[-1] != self._keys.shape[-1]
            or values.shape[-1] != self._values.shape[-1]
        ):
            raise ValueError(
                f"this cache holds keys {expected_k} and values {expected_v}; got keys "
                f"{tuple(keys.shape)} and values {tuple(values.shape)}. Use one cache per layer "
                "and per batch, or call reset() first."
            )
        for name, new, cached in (("keys", keys, self._keys), ("values", values, self._values)):
            if new.dtype != cached.dtype or new.device != cached.device:
                raise ValueError(
                    f"this cache holds {name} of {cached.dtype} on {cached.device}; got {name} of "
                    f"{new.dtype} on {new.device}. Convert with .to(...), or call reset() first."
                )

    def _grow(self, needed: int) -> None:
        capacity = self.capacity
        while capacity < needed:
            capacity *= 2
        for name in ("_keys", "_values"):
            old = getattr(self, name)
            grown = old.new_empty(*old.shape[:2], capacity, old.shape[-1])
            grown[:, :, : self._length] = old[:, :, : self._length]
            setattr(self, name, grown)

    def _require_filled(self) -> None:
        if self._keys is None:
            raise ValueError("the cache is empty: run the layer with cache=... once (the prefill) first.")
