"""KV cache for autoregressive decoding.

Each decoding step computes keys/values for the new token(s) only and attends over
everything cached so far. Appending must not copy the whole cache each step (a
``torch.cat`` per token makes every step O(context) in copies), so the cache keeps
spare capacity and doubles it when full: appends are amortised O(new tokens).
"""

from __future__ import annotations

import weakref

import torch

__all__ = ["KVCache"]


class KVCache:
    """Growing buffer of keys ``(B, Hkv, T, D)`` and values ``(B, Hkv, T, Dv)``.

    ``len(cache)`` is the number of tokens cached; ``cache.nbytes`` counts the cached
    keys and values (``2 · B · Hkv · T · D · element size`` when ``Dv == D``), not the
    spare capacity.

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

    def __init__(self, initial_capacity: int = 16) -> None:
        if isinstance(initial_capacity, bool) or not isinstance(initial_capacity, int) or initial_capacity < 1:
            raise ValueError(f"initial_capacity must be an int >= 1, got {initial_capacity!r}.")
        self.initial_capacity = initial_capacity
        self._keys: torch.Tensor | None = None  # (B, Hkv, capacity, D)
        self._values: torch.Tensor | None = None  # (B, Hkv, capacity, Dv)
        self._length = 0
        self._owner: weakref.ref | int | None = None  # a weakref to the owning layer (its id() if it has none)
        self._owner_type = ""

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        if self._keys is None:
            return "KVCache(empty)"
        batch, heads, _, head_dim = self._keys.shape
        return (
            f"KVCache(tokens={self._length}, batch={batch}, kv_heads={heads}, "
            f"head_dim={head_dim}, dtype={self._keys.dtype}, nbytes={self.nbytes})"
        )

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
        """Cached keys ``(B, Hkv, T, D)`` (a view, no copy)."""
        self._require_filled()
        return self._keys[:, :, : self._length]

    @property
    def values(self) -> torch.Tensor:
        """Cached values ``(B, Hkv, T, Dv)`` (a view, no copy)."""
        self._require_filled()
        return self._values[:, :, : self._length]

    @property
    def nbytes(self) -> int:
        if self._keys is None:
            return 0
        batch, heads, _, head_dim = self._keys.shape
        value_dim = self._values.shape[-1]
        return batch * heads * self._length * (head_dim + value_dim) * self._keys.element_size()

    def truncate(self, length: int) -> None:
        """Keep only the first ``length`` tokens (beam search, speculative decoding, benchmarks
        that replay a step). No copy: the buffer stays and later appends overwrite the rest."""
        if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= self._length:
            raise ValueError(f"length must be an int in [0, {self._length}] (tokens cached), got {length!r}.")
        self._length = length

    def reset(self) -> None:
        """Forget every cached token (keeps nothing allocated; the owner stays bound)."""
        self._keys = self._values = None
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
