"""The decoding cache of one DeepSeek-V4 attention layer (:class:`attn_core.CompressedAttention`).

It holds three things, all bounded or compressed:

- the last ``sliding_window`` keys (V4 has one head that is both key and value), the sliding-window branch;
- the compressed entries so far (one per ``compress_rate`` tokens; CSA also the indexer's smaller entries);
- the open window's pending tokens (projected, fewer than ``compress_rate``) and, for CSA's overlapping
  windows, the last closed window, so the next entry can be pooled exactly as in one full pass.

``len(cache)`` is the number of tokens seen; the next token's position.
"""

from __future__ import annotations

import weakref

import torch

from attn_core.deepseek.compressor import PoolState

__all__ = ["CompressedKVCache"]


class CompressedKVCache:
    """State of ONE :class:`attn_core.CompressedAttention` layer between calls (one cache per layer)."""

    def __init__(self):
        self._owner: weakref.ref | None = None
        self.reset()

    def reset(self) -> None:
        """Forget every token (the owner stays bound)."""
        self.window_keys: torch.Tensor | None = None  # (B, n <= sliding_window, D), rotated, position order
        self.pools: dict[str, PoolState] = {}  # "compressor" (HCA, CSA) and "indexer" (CSA)
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        entries = {name: pool.num_windows for name, pool in self.pools.items()}
        held = 0 if self.window_keys is None else self.window_keys.shape[1]
        return f"CompressedKVCache(tokens={self._length}, window_keys={held}, entries={entries})"

    @property
    def num_entries(self) -> int:
        """Compressed entries held (0 for a sliding-window layer)."""
        pool = self.pools.get("compressor")
        return 0 if pool is None else pool.num_windows

    @property
    def nbytes(self) -> int:
        """Bytes held: window keys, compressed entries, pending tokens and CSA's last closed window."""
        window = 0 if self.window_keys is None else self.window_keys.numel() * self.window_keys.element_size()
        return window + sum(pool.nbytes() for pool in self.pools.values())

    def bind(self, layer: object) -> None:
        """Tie the cache to its layer; another layer's cache is refused (its keys would be mixed in)."""
        owner = None if self._owner is None else self._owner()
        if owner is not None and owner is not layer:
            raise ValueError(
                "this CompressedKVCache already belongs to another CompressedAttention layer: give every layer "
                "its own cache (one per layer), or call cache.reset() and cache.unbind() first."
            )
        self._owner = weakref.ref(layer)

    def unbind(self) -> None:
        self._owner = None

    def check_batch(self, batch: int, head_dim: int) -> None:
        if self.window_keys is not None and (self.window_keys.shape[0], self.window_keys.shape[2]) != (batch, head_dim):
            raise ValueError(
                f"this cache holds keys of batch {self.window_keys.shape[0]} and head_dim {self.window_keys.shape[2]}, "
                f"got x of batch {batch} for head_dim {head_dim}. Use one cache per sequence batch, or reset() it."
            )
