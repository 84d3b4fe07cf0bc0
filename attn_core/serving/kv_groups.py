"""KV cache groups (vLLM v1's hybrid KV cache manager): layers that attend alike share one block table per request.

Gemma 3 has two kinds of layers: 3 of its 18 attend to every earlier token (global), 15 only to the last
``sliding_window`` tokens (local). A local layer never reads a key older than its window, so it need not keep it:
the engine gives each kind its own :class:`KVGroup` (its own pool, block manager and block tables). A local
group's table keeps its positions (token ``p`` sits in entry ``p // block_size``), but the blocks that fell behind
the window are given back and their entries become :data:`NO_BLOCK` (vLLM's null block). An 8k-token sequence
then holds 8192 tokens of keys in each global layer and about ``sliding_window + block_size`` in each local one.

Prefix caching works per group: a block is named by the same chained hash in every group. A hit of ``h`` blocks
needs, in a global group, blocks ``0 .. h-1`` cached; in a local group only the blocks the next query can see
(``max(0, h·b - W + 1) // b .. h-1``, vLLM's ``SlidingWindowManager.find_longest_cache_hit``).
"""

from __future__ import annotations

import torch

from attn_core.caches.paged_cache import PagedKVCache, PagedSequence
from attn_core.serving.block_manager import NO_BLOCK, BlockManager

__all__ = ["KVGroup", "WindowPagedKVCache", "kv_cache_bytes"]


class WindowPagedKVCache(PagedKVCache):
    """A :class:`PagedKVCache` whose tables may start with :data:`NO_BLOCK` entries: blocks dropped behind a
    sliding window. A layer sees the tokens from the first kept block on (``key_positions`` None: the last
    ``k_len`` tokens in order), and its ``sliding_window`` mask hides those older than the window."""

    def _release(self, blocks: list[int]) -> None:
        super()._release([b for b in blocks if b != NO_BLOCK])

    def attach(self, seq_id, blocks: list[int], length: int) -> PagedSequence:
        """As :meth:`PagedKVCache.attach`, with leading :data:`NO_BLOCK` entries (a window's dropped blocks)."""
        skipped = 0
        while skipped < len(blocks) and blocks[skipped] == NO_BLOCK:
            skipped += 1
        sequence = super().attach(seq_id, blocks[skipped:], length - skipped * self.block_size)
        self._tables[seq_id][:0] = [NO_BLOCK] * skipped
        for cache in self._layers():
            cache._lengths[seq_id] = length
        return sequence

    def _gather(self, seq_id) -> tuple[torch.Tensor, torch.Tensor]:
        self._require(seq_id)
        if self._key_pool is None:
            raise ValueError("the cache is empty: run the layer with cache=..., seq_id=... once (the prefill) first.")
        length, table = self._lengths[seq_id], self._tables[seq_id]
        first = 0
        while first < len(table) and table[first] == NO_BLOCK:
            first += 1  # the blocks behind the window are gone; keys start at token first * block_size
        used = torch.tensor(
            table[first : -(-length // self.block_size)], dtype=torch.long, device=self._key_pool.device
        )
        out = []
        for pool in (self._key_pool, self._value_pool):
            blocks = pool.index_select(0, used)  # (nb, Hkv, bs, D)
            flat = blocks.transpose(0, 1).reshape(pool.shape[1], -1, pool.shape[-1])  # (Hkv, nb·bs, D)
            out.append(flat[:, : length - first * self.block_size].unsqueeze(0))  # (1, Hkv, T - skipped, D)
        return out[0], out[1]


class KVGroup:
    """The layers ``layers`` (indices into ``lm.layers``) that share a window (None: global attention): one
    :class:`BlockManager` of ``num_blocks`` blocks and one cache per layer on it."""

    def __init__(self, layers: list[int], window: int | None, num_blocks: int, block_size: int, prefix_caching: bool):
        self.layers, self.window, self.block_size = layers, window, block_size
        self.blocks = BlockManager(num_blocks, block_size, prefix_caching=prefix_caching)
        cache_type = PagedKVCache if window is None else WindowPagedKVCache
        self.caches = [cache_type(block_size, num_blocks, allocator=self.blocks) for _ in layers]
        self.peak_blocks_used = 0

    def __repr__(self) -> str:
        kind = "global" if self.window is None else f"window {self.window}"
        return f"KVGroup({kind}, {len(self.layers)} layers, {self.blocks.num_blocks} blocks)"

    def first_visible_block(self, position: int) -> int:
        """The first block a query at ``position`` (or later) may read: 0 for global attention."""
        return 0 if self.window is None else max(0, position - self.window + 1) // self.block_size

    def blocks_short(self, rid, num_tokens: int) -> int:
        """Blocks ``rid`` must still take for its table to reach ``num_tokens`` tokens."""
        return max(-(-num_tokens // self.block_size) - len(self.blocks.tables.get(rid, [])), 0)

    def grow(self, rid, num_tokens: int) -> None:
        table = self.blocks.tables[rid]
        for _ in range(self.blocks_short(rid, num_tokens)):
            table.append(self.blocks.allocate())  # one id for every layer of the group
        self.peak_blocks_used = max(self.peak_blocks_used, self.blocks_used())

    def drop_behind_window(self, rid, num_computed: int) -> None:
        """Give back the blocks no query from position ``num_computed`` on can see (a local group only)."""
        table = self.blocks.tables.get(rid, [])
        for i in range(min(self.first_visible_block(num_computed), len(table))):
            if table[i] != NO_BLOCK:
                self.blocks.release(table[i])  # full and computed: it stays cached for later prefix hits
                table[i] = NO_BLOCK

    def blocks_used(self) -> int:
        return len({b for table in self.blocks.tables.values() for b in table if b != NO_BLOCK})

    def hits(self, tokens: list[int], hashes: list[int], num_blocks: int) -> list[int] | None:
        """The cached blocks a hit of ``num_blocks`` leading blocks needs in this group (NO_BLOCK where the
        window does not reach), or None when one of them is not cached."""
        bs, table = self.block_size, []
        first = self.first_visible_block(num_blocks * bs)
        for i in range(num_blocks):
            if i < first:
                table.append(NO_BLOCK)
                continue
            block = self.blocks.cached_block(hashes[i - 1] if i else None, tokens[i * bs : (i + 1) * bs])
            if block is None:
                return None
            table.append(block)
        return table

    def free(self, rid) -> None:
        """Forget ``rid`` in every layer of the group; its blocks go back tail first."""
        self.blocks.free_table(rid)
        for cache in self.caches:
            cache._lengths.pop(rid, None)


def kv_cache_bytes(
    config, num_tokens: int, *, block_size: int = 16, bytes_per_element: int = 2, keep_window: bool = True
) -> int:
    """Bytes of keys and values one sequence of ``num_tokens`` cached tokens holds in the engine's pools, in whole
    blocks, for a model ``config`` (a ``Gemma3Config``: ``num_layers``, ``num_kv_heads``, ``head_dim``,
    ``sliding_window``, ``is_global``). ``keep_window`` (the engine, vLLM's hybrid manager): a local layer holds
    the blocks its next query can read; False: every layer holds every token (one block table for all layers)."""
    per_token_layer = 2 * config.num_kv_heads * config.head_dim * bytes_per_element  # K and V
    every = -(-num_tokens // block_size)  # blocks holding all the tokens
    total = 0
    for layer in range(config.num_layers):
        blocks = every
        if keep_window and not config.is_global(layer):
            blocks -= max(0, num_tokens - config.sliding_window + 1) // block_size  # the ones behind the window
        total += blocks * block_size * per_token_layer
    return total
