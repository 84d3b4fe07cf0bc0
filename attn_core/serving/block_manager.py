"""The block manager (vLLM's ``KVCacheManager`` / ``BlockPool``, nano-vllm's ``BlockManager``): one allocator for
every layer's paged pool, plus the prefix cache.

A full block is named by a *chained* hash: ``hash((parent block's hash, its token ids))``. Chaining makes the name
depend on every token before the block too, so two prompts share block ``i`` only if they agree on all of
``tokens[: (i + 1) * block_size]`` (a block's keys depend on every earlier token through attention). The cache maps
that key to the block holding its computed keys/values. A released block whose reference count reaches 0 stays
cached (an "evictable" block, kept in least-recently-used order); an allocation takes a truly free block first
and evicts the least recently released cached block only when none is left.

A finished or preempted request gives its blocks back TAIL FIRST (:meth:`BlockManager.free_table`, as vLLM v1's
``SingleTypeKVCacheManager.free`` and nano-vllm's ``deallocate`` do): a chain is only reachable from its head
(``lookup`` stops at the first miss), so the head (a shared system prompt) must be the last of its blocks to be
evicted; released head first, one eviction would orphan every other block of the chain.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict

from attn_core.caches.paged_cache import BlockAllocator, OutOfBlocksError

__all__ = ["BlockManager", "NO_BLOCK", "chain_block_hashes"]

NO_BLOCK = -1  # a sliding-window table's placeholder for a block dropped behind the window (vLLM's null block)
BlockKey = tuple[int | None, tuple[int, ...]]  # (parent block's hash or None for the first block, its token ids)


def chain_block_hashes(tokens: list[int], block_size: int, *, start: list[int] | None = None) -> list[int]:
    """Chained hashes of the full blocks of ``tokens``: ``h[i] = hash((h[i-1], tokens of block i))``,
    ``h[-1] = None``. ``start`` (hashes already known for the first blocks) is extended, not recomputed."""
    hashes = list(start or [])
    for i in range(len(hashes), len(tokens) // block_size):
        parent = hashes[-1] if hashes else None
        hashes.append(hash((parent, tuple(tokens[i * block_size : (i + 1) * block_size]))))
    return hashes


class BlockManager(BlockAllocator):
    """A :class:`BlockAllocator` with a prefix cache (``prefix_caching=False``: a plain one).

    ``lookup(tokens)`` returns the cached blocks of the longest run of leading full blocks, never the block
    holding the last token (its logits must be computed); ``register(block, parent_hash, tokens)`` publishes a
    block whose keys/values are computed. Blocks are only shared when full, so a shared block is never written.
    """

    def __init__(self, num_blocks: int, block_size: int, *, prefix_caching: bool = True) -> None:
        super().__init__(num_blocks)
        self.block_size, self.prefix_caching = block_size, prefix_caching
        self.cached: dict[BlockKey, int] = {}  # (parent hash, token ids) -> block holding their keys/values
        self.key_of: dict[int, BlockKey] = {}  # block -> its key, for the blocks in `cached`
        self.evictable: OrderedDict[int, None] = OrderedDict()  # cached blocks at refcount 0, least recent first
        self.num_evictions = 0

    # ------------------------------------------------------------------ allocator policy
    @property
    def num_free_blocks(self) -> int:
        return len(self.free) + len(self.evictable)  # a cached block nobody holds can be evicted for a new one

    def _check_block(self, block, action: str) -> None:
        if isinstance(block, bool) or not isinstance(block, int) or not 0 <= block < self.num_blocks:
            raise ValueError(f"cannot {action} block {block!r}: block ids are ints in [0, {self.num_blocks}).")

    def allocate(self) -> int:
        if self.free:
            block = heapq.heappop(self.free)
        elif self.evictable:  # evict the least recently released cached block
            block, _ = self.evictable.popitem(last=False)
            del self.cached[self.key_of.pop(block)]
            self.num_evictions += 1
        else:
            raise OutOfBlocksError(
                f"all {self.num_blocks} blocks are held by running requests: none is free and none is cached at "
                "reference count 0. Free or preempt a request first, or build the pool with more blocks."
            )
        self.ref_counts[block] = 1
        return block

    def retain(self, block: int) -> None:
        self._check_block(block, "retain")
        if self.ref_counts[block] == 0 and block in self.evictable:
            del self.evictable[block]  # a prefix hit on a block nobody held: it is no longer evictable
            self.ref_counts[block] = 1
            return
        super().retain(block)

    def release(self, block: int) -> None:
        self._check_block(block, "release")
        if self.ref_counts[block] <= 0:  # a double release would hand the block to two sequences later
            raise ValueError(f"block {block} is not held by any table: it was released already (double release).")
        self.ref_counts[block] -= 1
        if self.ref_counts[block] == 0:
            if block in self.key_of:
                self.evictable[block] = None  # keep its keys/values for a later hit; most recent at the end
            else:
                heapq.heappush(self.free, block)

    def free_table(self, seq_id) -> None:
        """Drop ``seq_id``'s block table, releasing its blocks TAIL FIRST (a chain's head is evicted last)."""
        for block in reversed(self.tables.pop(seq_id, [])):
            if block != NO_BLOCK:
                self.release(block)

    # ------------------------------------------------------------------ rollback (ServingEngine.step)
    def state(self) -> tuple:
        """Everything a step may change, copied: :meth:`restore` puts it back after a failed step."""
        return (
            list(self.ref_counts),
            list(self.free),
            {seq_id: list(table) for seq_id, table in self.tables.items()},
            dict(self.cached),
            dict(self.key_of),
            OrderedDict(self.evictable),
            self.num_evictions,
        )

    def restore(self, state: tuple) -> None:
        ref_counts, free, tables, cached, key_of, evictable, self.num_evictions = state
        self.ref_counts[:], self.free[:] = ref_counts, free  # in place: the caches hold these very objects
        self.tables.clear()
        self.tables.update(tables)
        self.cached, self.key_of, self.evictable = cached, key_of, evictable

    # ------------------------------------------------------------------ prefix cache
    def lookup(self, tokens: list[int], hashes: list[int]) -> list[int]:
        """Blocks holding the longest run of ``tokens``' leading full blocks (``hashes`` = their chained
        hashes), at most ``(len(tokens) - 1) // block_size`` of them: the last token is always computed."""
        if not self.prefix_caching:
            return []
        blocks = []
        for i in range(min(len(hashes), (len(tokens) - 1) // self.block_size)):
            parent = hashes[i - 1] if i else None
            block = self.cached.get((parent, tuple(tokens[i * self.block_size : (i + 1) * self.block_size])))
            if block is None:
                break
            blocks.append(block)
        return blocks

    def cached_block(self, parent_hash: int | None, block_tokens: list[int]) -> int | None:
        """The block caching ``block_tokens`` after the prefix named by ``parent_hash``, or None."""
        if not self.prefix_caching:
            return None
        return self.cached.get((parent_hash, tuple(block_tokens)))

    def register(self, block: int, parent_hash: int | None, block_tokens: list[int]) -> None:
        """``block`` now holds the computed keys/values of ``block_tokens`` after the prefix named by
        ``parent_hash``: later requests may share it. Content cached in another block already: nothing to do."""
        if not self.prefix_caching or block in self.key_of:
            return
        key = (parent_hash, tuple(block_tokens))
        if key not in self.cached:
            self.cached[key], self.key_of[block] = block, key
