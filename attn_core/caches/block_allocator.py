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
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks < 1:
            raise ValueError(f"num_blocks must be an int >= 1 (the blocks in the pool), got {num_blocks!r}.")
        self.num_blocks = num_blocks
        self.ref_counts = [0] * num_blocks  # block tables holding each block
        self.free = list(range(num_blocks))  # a min-heap: the lowest free block first, so tables read 0, 1, 2...
        self.tables: dict[int | str, list[int]] = {}  # seq_id -> its blocks in position order
        self.caches: list[weakref.ref] = []  # the PagedKVCaches (one per layer) on this allocator

    @property
    def num_free_blocks(self) -> int:
        """Blocks an append may take now."""
        return len(self.free)

    def _check_block(self, block: object, action: str) -> None:
        """A block id is an int in [0, num_blocks): -1 would index the last block, a bool or a float no block."""
        if isinstance(block, bool) or not isinstance(block, int) or not 0 <= block < self.num_blocks:
            raise ValueError(f"cannot {action} block {block!r}: block ids are ints in [0, {self.num_blocks}).")

    def allocate(self) -> int:
        """Take a free block for one table (reference count 1); none free: :class:`OutOfBlocksError`."""
        if not self.free:
            raise OutOfBlocksError(
                f"all {self.num_blocks} blocks are held: none is free. Release (free) a sequence first, or build the "
                "pool with more num_blocks."
            )
        block = heapq.heappop(self.free)
        self.ref_counts[block] = 1
        return block

    def retain(self, block: int) -> None:
        """One more table holds ``block`` (sharing). A free block holds no tokens: ValueError."""
        self._check_block(block, "retain")
        if self.ref_counts[block] == 0:
            raise ValueError(f"block {block} is free: it holds no tokens a sequence could share.")
        self.ref_counts[block] += 1

    def release(self, block: int) -> None:
        """One table fewer holds ``block``; at zero it is free again. A block no table holds: ValueError."""
        self._check_block(block, "release")
        if self.ref_counts[block] <= 0:  # a double release would hand the block to two tables later
            raise ValueError(f"block {block} is not held by any table: it was released already (double release).")
        self.ref_counts[block] -= 1
        if self.ref_counts[block] == 0:  # nobody else reads it: back to the pool
            heapq.heappush(self.free, block)
