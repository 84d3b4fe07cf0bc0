"""KV cache for autoregressive decoding.

Each decoding step computes keys/values for the new token(s) only and attends over
everything cached so far. Appending must not copy the whole cache each step (a
``torch.cat`` per token makes every step O(context) in copies), so the cache keeps
spare capacity and doubles it when full: appends are amortised O(new tokens).

With ``window=W`` the cache is a ring buffer of ``num_sinks + W`` slots instead: each new token
overwrites the oldest one outside the first ``num_sinks`` ("attention sinks", StreamingLLM), so
memory stays bounded however long the sequence gets, and a decode step copies nothing.

One piece: the one ``KVCache`` class and its guard against sharing it between layers; every method is part of the
same append-and-read contract.
"""

from __future__ import annotations

import weakref

import torch

__all__ = ["KVCache"]

# Position recorded for an empty ring slot: far in the future, so a causal mask never lets a query see it.
EMPTY = 2**62


class BoundToOneLayer:
    """A cache belongs to one attention layer: the layer calls ``bind(self)`` on every use.

    The first call records the owner (a weak reference: the cache must not keep a layer alive); a later call
    from a different owner raises ValueError, since its keys would mix with the first's. Subclasses set
    ``self._owner = None`` and ``self._owner_type = ""`` in ``__init__``.
    """

    def bind(self, owner: object) -> None:
        if self._owner is None:
            try:
                self._owner = weakref.ref(owner)  # no strong reference: the cache must not keep a layer alive
            except TypeError:  # objects without __weakref__
                self._owner = id(owner)
            self._owner_type = type(owner).__name__
            return
        same = self._owner() is owner if isinstance(self._owner, weakref.ref) else self._owner == id(owner)
        if not same:
            kind = type(self).__name__
            raise ValueError(
                f"this {kind} already holds the keys/values of another layer (first used by a "
                f"{self._owner_type}, now called by a {type(owner).__name__}); give every layer its own {kind}."
            )


class KVCache(BoundToOneLayer):
    """Buffer of keys ``(B, Hkv, T, D)`` and values ``(B, Hkv, T, Dv)`` for one attention layer.

    ``KVCache()`` keeps every token (it grows by doubling). ``KVCache(window=W)`` keeps the last
    ``W`` tokens, plus the first ``num_sinks`` tokens forever; a layer attending over it gives every
    query the keys ``q - W < k <= q`` and the sinks ``k < num_sinks`` (causal), which is exactly the
    sliding-window mask (``ac.sliding_window_mask(L, W)``) over the full sequence when ``num_sinks=0``,
    whatever the chunking. The sinks stay visible whatever the layer's own ``sliding_window``: the layer's
    window bounds the other keys, ``(q - k < min(W, sliding_window)) | (k < num_sinks)``. On a layer trained
    with a short window that shows keys at distances it never saw (notebook 13 measures what it costs).
    Positions policy: a cached token keeps its original position (keys are
    cached after RoPE, as in every layer here); nothing is re-indexed when older tokens are evicted.
    ``max_rollback=R`` keeps ``R`` more slots so that ``truncate`` can undo up to ``R`` tokens after the
    ring has wrapped (speculative decoding); those extra tokens are held but never attended to.

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

    def __init__(
        self, window: int | None = None, num_sinks: int = 0, *, initial_capacity: int = 16, max_rollback: int = 0
    ) -> None:
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
        if isinstance(max_rollback, bool) or not isinstance(max_rollback, int) or max_rollback < 0:
            raise ValueError(f"max_rollback must be an int >= 0, got {max_rollback!r}.")
        self.window = window
        self.num_sinks = num_sinks
        # A window cache also keeps the `max_rollback` tokens just older than the window (never attended to),
        # so truncate() can take back up to that many tokens (speculative decoding's rejected drafts).
        self.max_rollback = max_rollback if window is not None else 0
        self._wrapped = False  # a position >= the ring's slot count was written: slots are out of order
        self.initial_capacity = initial_capacity
        self._keys: torch.Tensor | None = None  # (B, Hkv, capacity, D); with a window: the ring's slots
        self._values: torch.Tensor | None = None  # (B, Hkv, capacity, Dv)
        self._length = 0  # tokens appended so far
        self._positions: torch.Tensor | None = None  # (slots,) position held by each ring slot; EMPTY if none
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
        if self.window is None or not self._wrapped:
            return self._length if self.window is None else min(self._length, self._slots)
        return int((self._positions < self._length).sum())

    @property
    def _slots(self) -> int:
        return self.num_sinks + self.window + self.max_rollback

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
        if not self._wrapped:
            return slice(0, self.num_cached)  # slots are positions
        return torch.argsort(self._positions)[: self.num_cached]  # (T,): empty slots sort last

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
        if self._wrapped and length < self._length:
            # The next query (position `length`) needs every key in its window; were they all kept?
            needed = torch.arange(  # the sinks below `length`, then the window before it
                max(min(self.num_sinks, length), length - self.window + 1), length, device=self._positions.device
            )
            if not torch.isin(needed, self._positions).all():
                raise ValueError(
                    f"rolling back to {length} tokens needs the keys at positions {int(needed[0])}..{length - 1}, but "
                    f"this window cache (window={self.window}, max_rollback={self.max_rollback}) has already "
                    f"evicted some of them; it holds {self.num_cached} of {self._length} tokens. Build it with "
                    "KVCache(window, max_rollback=...) at least as large as the longest rollback."
                )
        if self._positions is not None:
            self._positions.masked_fill_(self._positions >= length, EMPTY)  # forget the rolled-back tokens
            # Back in slot order (e.g. after truncate(0)), the ring must say so: a wrapped ring would return
            # every slot, emptied ones included, and a layer trusts a wrapped ring with no rollback slots to be full.
            if self._wrapped and length < self._slots:  # only then can every held position be in its own slot
                slots = torch.arange(self._slots, device=self._positions.device)  # (slots,)
                in_order = torch.where(slots < length, slots, EMPTY)  # (slots,): slot p holds position p
                self._wrapped = not torch.equal(self._positions, in_order)
        self._length = length

    def reset(self) -> None:
        """Forget every cached token (keeps nothing allocated; the owner stays bound)."""
        self._keys = self._values = self._positions = self.key_positions = None
        self._length, self._wrapped = 0, False

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
        if self._keys is None and (keys.dtype != values.dtype or keys.device != values.device):
            raise ValueError(
                f"keys and values must share one dtype and device, got keys of {keys.dtype} on {keys.device} and "
                f"values of {values.dtype} on {values.device}. Convert one with .to(other.dtype, other.device)."
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
        """Ring-buffer append: sinks in slots ``0 .. S-1``, position ``p >= S`` in slot ``S + (p - S) % R``
        (``R = window + max_rollback``), so a new token overwrites the oldest one outside the sinks."""
        sinks, slots, new, start = self.num_sinks, self._slots, keys.shape[-2], self._length
        if self._keys is None:
            self._keys = keys.new_empty(*keys.shape[:2], slots, keys.shape[-1])  # (B, Hkv, slots, D)
            self._values = values.new_empty(*values.shape[:2], slots, values.shape[-1])  # (B, Hkv, slots, Dv)
            self._positions = torch.full((slots,), EMPTY, dtype=torch.long, device=keys.device)  # (slots,)
        else:
            self._check_matches(keys, values)
            if keys.requires_grad or values.requires_grad or self._keys.requires_grad or self._values.requires_grad:
                self._keys, self._values = self._keys.clone(), self._values.clone()  # see the class docstring
        end = start + new
        positions = torch.arange(start, end, device=keys.device)  # (n,)
        if new > 1 and (self._wrapped or end > slots):
            # The early new tokens still need keys that the later ones evict: attend over
            # (what is held) + (the new tokens), a copy of O(slots + n), then store what the ring keeps.
            held = self._ordered_slots()
            returned = (
                torch.cat([self._keys[:, :, held], keys], dim=-2),  # (B, Hkv, T, D)
                torch.cat([self._values[:, :, held], values], dim=-2),  # (B, Hkv, T, Dv)
            )
            self.key_positions = torch.cat([self._positions[held], positions])  # (T,)
            keep = (positions < sinks) | (positions >= end - (slots - sinks))  # (n,): what the ring can hold
            keys, values, positions = keys[:, :, keep], values[:, :, keep], positions[keep]  # (B, Hkv, m, D)
        else:
            returned = None
        ring = sinks + (positions - sinks) % (slots - sinks)  # (m,) slot of each position >= sinks
        slot = torch.where(positions < sinks, positions, ring)  # (m,), distinct slots
        if new == 1:  # a decode step: an index write, no copy (a Python int keeps it cheap)
            slot = int(slot)
            self._keys[:, :, slot], self._values[:, :, slot] = keys[:, :, 0], values[:, :, 0]
        else:
            self._keys[:, :, slot], self._values[:, :, slot] = keys, values
        self._positions[slot] = positions
        self._length, self._wrapped = end, self._wrapped or end > slots
        if returned is not None:
            return returned
        if not self._wrapped:  # slots are positions 0 .. end-1, in order: views, no copy
            self.key_positions = None
            return self._keys[:, :, :end], self._values[:, :, :end]  # (B, Hkv, T, D), (B, Hkv, T, Dv)
        self.key_positions = self._positions  # (slots,): out of order; EMPTY slots sit in the future
        return self._keys, self._values  # (B, Hkv, slots, D), (B, Hkv, slots, Dv)

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
