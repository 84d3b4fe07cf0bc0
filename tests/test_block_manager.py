"""The block manager and the shared allocator, without a model: chained hashes, lookups that never cover the
last token, refcounts, the LRU order of cached refcount-0 blocks, one block id for every layer, attach, and the
copy-on-write that copies a block in every layer's pool."""

from __future__ import annotations

import pytest
import torch

import attn_core as ac
from attn_core.caches.paged_cache import BlockAllocator, OutOfBlocksError
from attn_core.serving import BlockManager, chain_block_hashes


def test_chained_hashes_depend_on_every_earlier_token():
    a = chain_block_hashes([1, 2, 3, 4, 5, 6, 7], 2)
    b = chain_block_hashes([9, 2, 3, 4, 5, 6], 2)
    assert len(a) == 3 and len(b) == 3  # full blocks only
    assert all(x != y for x, y in zip(a, b, strict=True))  # block 1 and 2 hold the same tokens, other prefixes
    assert a[1] == hash((a[0], (3, 4))) and a[0] == hash((None, (1, 2)))
    assert chain_block_hashes([1, 2, 3, 4, 5, 6, 7], 2, start=a[:1]) == a


def hold(manager: BlockManager, seq_id, tokens: list[int]) -> list[int]:
    """Allocate, 'compute' and register a sequence's full blocks, as the engine does."""
    bs = manager.block_size
    table = [manager.allocate() for _ in range(-(-len(tokens) // bs))]
    manager.tables[seq_id] = table
    hashes = chain_block_hashes(tokens, bs)
    for i in range(len(tokens) // bs):
        manager.register(table[i], hashes[i - 1] if i else None, tokens[i * bs : (i + 1) * bs])
    return table


def test_lookup_takes_whole_blocks_and_never_the_last_token():
    manager = BlockManager(8, 2)
    table = hold(manager, "a", [1, 2, 3, 4, 5])
    for tokens, hits in [([1, 2, 3, 4], 1), ([1, 2, 3, 4, 9], 2), ([1, 2, 3], 1), ([1, 2], 0), ([1, 9, 3, 4, 5], 0)]:
        assert manager.lookup(tokens, chain_block_hashes(tokens, 2)) == table[:hits]
    assert BlockManager(8, 2, prefix_caching=False).lookup([1, 2, 3], chain_block_hashes([1, 2, 3], 2)) == []


def test_freed_cached_blocks_are_evicted_least_recently_released_first():
    manager = BlockManager(4, 1)
    first = hold(manager, "a", [7])
    second = hold(manager, "b", [8])
    free_one = manager.allocate()  # never registered: goes back to the free list, not the cache
    manager.release(second[0])
    manager.release(first[0])  # released last: most recent
    manager.release(free_one)
    assert manager.num_free_blocks == 4 and list(manager.evictable) == [second[0], first[0]]
    taken = [manager.allocate() for _ in range(3)]
    assert taken[:2] == sorted([free_one, 3]) and taken[2] == second[0]  # free blocks first, then the LRU one
    assert manager.lookup([8, 0], chain_block_hashes([8, 0], 1)) == []  # evicted: its hash is gone
    assert manager.lookup([7, 0], chain_block_hashes([7, 0], 1)) == first  # still cached
    manager.retain(first[0])  # a hit takes it out of the evictable list
    assert first[0] not in manager.evictable and manager.ref_counts[first[0]] == 1 and manager.num_free_blocks == 0


def test_retain_of_a_free_block_is_refused():
    with pytest.raises(ValueError, match="block 0 is free"):
        BlockAllocator(2).retain(0)


def kv(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 2, n, 3, generator=g, dtype=torch.float64), torch.randn(
        1, 2, n, 3, generator=g, dtype=torch.float64
    )


def test_layers_share_block_ids_and_attach_shares_blocks():
    layers = ac.PagedKVCache.for_layers(3, block_size=2, num_blocks=6)
    contiguous = [ac.KVCache() for _ in layers]
    for layer, (paged, flat) in enumerate(zip(layers, contiguous, strict=True)):
        k, v = kv(5, seed=layer)
        paged.sequence("a").update(k, v)
        flat.update(k, v)
    assert layers[0].block_table("a") == layers[2].block_table("a") == [0, 1, 2]
    assert layers[0].num_free_blocks == 3  # one allocation for three layers
    layers[0].attach("b", [0, 1], 4)  # b's first 4 tokens = a's (a prefix hit), in every layer
    assert [len(c.sequence("b")) for c in layers] == [4, 4, 4] and layers[1]._ref_counts[:3] == [2, 2, 1]
    for layer, (paged, flat) in enumerate(zip(layers, contiguous, strict=True)):
        k, v = kv(1, seed=10 + layer)
        keys, _ = paged.sequence("b").update(k, v)  # (1, 2, 5, 3)
        torch.testing.assert_close(keys, torch.cat([flat.keys[:, :, :4], k], dim=2), rtol=0, atol=0)
    assert layers[2].block_table("b")[:2] == [0, 1] and layers[0].num_free_blocks == 2
    layers[1].free("a")
    assert all("a" not in c._lengths for c in layers) and layers[0]._ref_counts[:3] == [1, 1, 0]


def test_copy_on_write_copies_the_block_in_every_layer():
    layers = ac.PagedKVCache.for_layers(2, block_size=4, num_blocks=4)
    for layer, paged in enumerate(layers):
        paged.sequence("a").update(*kv(3, seed=layer))
    layers[0].fork("a", "b")
    before = [c.sequence("a").keys for c in layers]  # (1, 2, 3, 3) each
    for layer, paged in enumerate(layers):
        keys, _ = paged.sequence("b").update(*kv(1, seed=20 + layer))  # into the shared, partly filled block
        torch.testing.assert_close(keys[:, :, :3], before[layer], rtol=0, atol=0)
        torch.testing.assert_close(paged.sequence("a").keys, before[layer], rtol=0, atol=0)  # a never sees it
    assert layers[0].block_table("a") != layers[0].block_table("b") == layers[1].block_table("b")


@pytest.mark.parametrize(
    ("blocks", "length", "match"),
    [([0, 0], 4, "distinct"), ([9], 2, "distinct"), ([0], 3, "ceil"), ([1], 1, "block 1 is free")],
)
def test_attach_errors_change_nothing(blocks, length, match):
    paged = ac.PagedKVCache(2, 4)
    paged.sequence("a").update(*kv(2, 0))
    with pytest.raises(ValueError, match=match):
        paged.attach("b", blocks, length)
    assert paged.seq_ids == ["a"] and paged._ref_counts == [1, 0, 0, 0]
    with pytest.raises(ValueError, match="already exists"):
        paged.attach("a", [0], 2)


def test_allocator_must_match_the_pool():
    with pytest.raises(ValueError, match="BlockAllocator of num_blocks=4"):
        ac.PagedKVCache(2, 4, allocator=BlockAllocator(5))


@pytest.mark.parametrize("block", [-1, 4, True, 1.0, None])
def test_block_manager_refuses_blocks_outside_the_pool(block):
    manager = BlockManager(4, 2)
    manager.allocate()
    for action in (manager.release, manager.retain):
        with pytest.raises(ValueError, match=r"block ids are ints in \[0, 4\)"):
            action(block)
    assert manager.ref_counts == [1, 0, 0, 0] and manager.num_free_blocks == 3


def test_block_manager_refuses_a_double_release():
    manager = BlockManager(3, 2)
    hold(manager, "a", [1, 2, 3])  # block 0 cached (full), block 1 not
    for block in (0, 1):
        manager.release(block)
        with pytest.raises(ValueError, match="double release"):
            manager.release(block)
    assert manager.ref_counts == [0, 0, 0] and sorted(manager.free) == [1, 2] and list(manager.evictable) == [0]
    assert sorted(manager.allocate() for _ in range(3)) == [0, 1, 2]  # each block handed out once


def test_an_empty_pool_raises_out_of_blocks():
    manager = BlockManager(2, 2)
    manager.allocate()
    manager.allocate()
    with pytest.raises(OutOfBlocksError, match="all 2 blocks are held"):
        manager.allocate()


def test_a_table_is_released_tail_first():
    manager = BlockManager(4, 1)
    table = hold(manager, "a", [5, 6, 7])
    manager.free_table("a")
    assert list(manager.evictable) == table[::-1] and "a" not in manager.tables  # the head is evicted last
    manager.allocate()  # the never-used block
    manager.allocate()  # evicts the tail
    assert manager.lookup([5, 6, 7, 8], chain_block_hashes([5, 6, 7, 8], 1)) == table[:2]
