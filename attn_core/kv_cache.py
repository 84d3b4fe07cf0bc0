"""KV cache for autoregressive decoding.

Each decoding step computes keys/values for the new token(s) only and attends over
everything cached so far. Appending must not copy the whole cache each step (a
``torch.cat`` per token makes every step O(context) in copies), so the cache keeps
spare capacity and doubles it when full: appends are amortised O(new tokens).
"""

from __future__ import annotations

import torch

__all__ = ["KVCache"]


class KVCache:
    """Growing buffer of keys ``(B, Hkv, T, D)`` and values ``(B, Hkv, T, Dv)``.

    ``len(cache)`` is the number of tokens cached; ``cache.nbytes`` counts the cached
    keys and values (``2 · B · Hkv · T · D · element size`` when ``Dv == D``), not the
    spare capacity. One cache belongs to one attention layer.
    """

    def __init__(self, initial_capacity: int = 16) -> None:
        if isinstance(initial_capacity, bool) or not isinstance(initial_capacity, int) or initial_capacity < 1:
            raise ValueError(f"initial_capacity must be an int >= 1, got {initial_capacity!r}.")
        self.initial_capacity = initial_capacity
        self._keys: torch.Tensor | None = None  # (B, Hkv, capacity, D)
        self._values: torch.Tensor | None = None  # (B, Hkv, capacity, Dv)
        self._length = 0

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
        """Forget every cached token (keeps nothing allocated)."""
        self._keys = self._values = None
        self._length = 0

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``keys (B, Hkv, n, D)`` and ``values (B, Hkv, n, Dv)``; return all cached so far."""
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
            if keys.dtype != self._keys.dtype or keys.device != self._keys.device:
                raise ValueError(
                    f"this cache holds {self._keys.dtype} on {self._keys.device}; got {keys.dtype} on {keys.device}."
                )
            if self._length + new > self.capacity:
                self._grow(self._length + new)
        end = self._length + new
        self._keys[:, :, self._length : end] = keys
        self._values[:, :, self._length : end] = values
        self._length = end
        return self.keys, self.values

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
