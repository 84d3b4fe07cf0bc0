"""PagedKVCache.truncate across block boundaries, deterministically: the blocks past the new length go back to
the pool (free and in no table), a fork's parent survives the child's truncate and append, and the bookkeeping
of a fresh pool. (A truncate that released nothing, or left a released block in the table, used to be caught
only by the hypothesis property at CI's 200 examples.) Plus the shape checks of an append.
"""

from __future__ import annotations

import pytest
import torch

import attn_core as ac

F64 = torch.float64
HEADS, DIM, VDIM = 2, 3, 5


def kv(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n tokens of keys (1, HEADS, n, DIM) and values (1, HEADS, n, VDIM)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(1, HEADS, n, DIM, generator=gen, dtype=F64), torch.randn(
        1, HEADS, n, VDIM, generator=gen, dtype=F64
    )


def assert_consistent(paged: ac.PagedKVCache) -> None:
    """Every block is either free or in some table, never both; reference counts count the tables."""
    in_tables = [block for seq_id in paged.seq_ids for block in paged.block_table(seq_id)]
    assert set(paged._free).isdisjoint(in_tables)
    assert sorted(set(paged._free) | set(in_tables)) == list(range(paged.num_blocks))
    assert paged._ref_counts == [in_tables.count(b) for b in range(paged.num_blocks)]


@pytest.mark.parametrize(("length", "blocks_kept"), [(10, 3), (9, 3), (8, 2), (5, 2), (4, 1), (1, 1), (0, 0)])
def test_truncate_across_blocks_releases_them(length, blocks_kept):
    paged = ac.PagedKVCache(block_size=4, num_blocks=5)
    keys, values = kv(10, seed=0)
    paged.sequence(0).update(keys, values)  # 10 tokens: blocks 0, 1, 2 (the last half full)
    assert paged.block_table(0) == [0, 1, 2] and paged.num_free_blocks == 2
    paged.truncate(0, length)
    assert paged.block_table(0) == [0, 1, 2][:blocks_kept]
    assert paged.num_free_blocks == 5 - blocks_kept
    assert paged.nbytes == blocks_kept * HEADS * 4 * (DIM + VDIM) * 8
    assert_consistent(paged)
    handle = paged.sequence(0)
    assert torch.equal(handle.keys, keys[:, :, :length]) and torch.equal(handle.values, values[:, :, :length])


def test_fork_truncate_append_leaves_the_parent_intact():
    """The child shares the parent's blocks; its truncate drops only its own references, and its appends go
    into fresh blocks or copies, never into a block the parent still reads."""
    paged = ac.PagedKVCache(block_size=4, num_blocks=8)
    keys, values = kv(10, seed=1)
    paged.sequence("parent").update(keys, values)  # blocks 0, 1, 2
    child = paged.fork("parent", "child")
    paged.truncate("child", 5)  # back into block 1, which the parent still reads
    assert paged.block_table("child") == [0, 1] and paged._ref_counts[:3] == [2, 2, 1]
    assert_consistent(paged)
    new_keys, new_values = kv(6, seed=2)
    child.update(new_keys, new_values)  # copies block 1 (shared, part full), then takes one fresh block
    assert paged.block_table("child")[0] == 0 and set(paged.block_table("child")[1:]).isdisjoint({1, 2})
    assert_consistent(paged)
    parent = paged.sequence("parent")
    assert torch.equal(parent.keys, keys) and torch.equal(parent.values, values)
    expected_keys = torch.cat([keys[:, :, :5], new_keys], dim=2)  # (1, Hkv, 11, D)
    assert torch.equal(child.keys, expected_keys)
    paged.free("child")
    assert paged.block_table("parent") == [0, 1, 2] and paged.num_free_blocks == 5
    assert_consistent(paged)


def test_a_fresh_pool_holds_nothing():
    paged = ac.PagedKVCache(block_size=4, num_blocks=3)
    assert paged.nbytes == 0 and paged.num_free_blocks == 3 and paged.seq_ids == []
    assert repr(paged) == "PagedKVCache(block_size=4, blocks_used=0/3, tokens={}, nbytes=0)"
    paged.sequence(0)  # created empty: still nothing allocated
    assert paged.nbytes == 0 and repr(paged).endswith("tokens={0: 0}, nbytes=0)")


@pytest.mark.parametrize(
    ("keys_shape", "values_shape"),
    [
        ((1, HEADS, 2, DIM), (1, HEADS, 2)),
        ((1, HEADS, 2), (1, HEADS, 2, VDIM)),
        ((1, HEADS, 2, DIM), (1, HEADS, 3, VDIM)),
    ],
)
def test_keys_and_values_must_be_4d_with_matching_first_dims(keys_shape, values_shape):
    paged = ac.PagedKVCache(block_size=4, num_blocks=3)
    with pytest.raises(ValueError, match=r"matching first three dims, got keys \(1, 2, .*\) and values \(1, 2, .*\)"):
        paged.sequence(0).update(torch.zeros(keys_shape), torch.zeros(values_shape))
    assert paged.nbytes == 0 and paged.num_free_blocks == 3
