"""The block allocator behind :class:`~attn_core.caches.paged_cache.PagedKVCache`:
a free list, reference counts and every
sequence's block table. One allocator may serve the caches of every layer (``PagedKVCache.for_layers``), so that block
``b`` holds the same tokens in each layer's pool; ``attn_core.serving.block_manager`` subclasses it into a prefix cache.
"""

from __future__ import annotations

import heapq
import weakref

__all__ = ["BlockAllocator", "OutOfBlocksError"]


class OutOfBlocksError(RuntimeError):
    """The pool has fewer free blocks than an append needs (like running out of GPU memory: free something)."""


class BlockAllocator:
    """Which blocks are free, how many block tables hold each, and every sequence's table.

    One per :class:`PagedKVCache` by default; shared by the caches of every layer
    (``PagedKVCache.for_layers``) so that block ``b`` holds the same tokens in each layer's pool. Subclasses
    change the policy (a prefix cache keeps released blocks cached; ``attn_core.serving.block_manager``).
    """

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.ref_counts = [0] * num_blocks  # block tables holding each block
        self.free = list(range(num_blocks))  # a min-heap: the lowest free block first, so tables read 0, 1, 2...
        self.tables: dict[int | str, list[int]] = {}  # seq_id -> its blocks in position order
        self.caches: list[weakref.ref] = []  # the PagedKVCaches (one per layer) on this allocator

    @property
    def num_free_blocks(self) -> int:
        """Blocks an append may take now."""
        return len(self.free)

    def allocate(self) -> int:
        """Take a free block for one table (reference count 1)."""
        block = heapq.heappop(self.free)
        self.ref_counts[block] = 1
        return block

    def retain(self, block: int) -> None:
        """One more table holds ``block`` (sharing). A free block holds no tokens: ValueError."""
        if self.ref_counts[block] == 0:
            raise ValueError(f"block {block} is free: it holds no tokens a sequence could share.")
        self.ref_counts[block] += 1

    def release(self, block: int) -> None:
        """One table fewer holds ``block``; at zero it is free again."""
        self.ref_counts[block] -= 1
        if self.ref_counts[block] == 0:  # nobody else reads it: back to the pool
            heapq.heappush(self.free, block)
