"""plot_block_tables: one cell per pool slot, filled slots coloured by owner, shared blocks grey and hatched,
one box per table entry holding its physical block; errors for what it cannot draw."""

from __future__ import annotations

import pytest
import torch
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

import attn_core as ac
from attn_core.viz.paged import SEQUENCE_COLORS, SHARED_COLOR, plot_block_tables


def filled_cache() -> ac.PagedKVCache:
    """A 6-token prompt forked into two sequences; one appends 3 tokens (copy-on-write of block 1)."""
    paged = ac.PagedKVCache(block_size=4, num_blocks=8)
    keys = torch.zeros(1, 1, 6, 2)  # (1, Hkv, T, D)
    paged.sequence("a").update(keys, keys)
    paged.fork("a", "b")
    paged.sequence("b").update(keys[:, :, :3], keys[:, :, :3])
    return paged


def test_pool_cells_and_table_boxes():
    paged = filled_cache()
    assert paged.block_table("a") == [0, 1] and paged.block_table("b") == [0, 2, 3]
    fig = plot_block_tables(paged, title="fork")
    assert isinstance(fig, Figure)
    pool_ax, table_ax = fig.axes
    cells = pool_ax.patches
    assert len(cells) == 8 * 4  # every slot of every block
    colors = {(int(c.get_x()), int(c.get_y())): to_hex(c.get_facecolor()) for c in cells}
    assert all(colors[(0, slot)] == SHARED_COLOR for slot in range(4))  # block 0: the shared prefix
    assert [colors[(1, slot)] for slot in range(4)] == [SEQUENCE_COLORS[0].lower()] * 2 + ["#ffffff"] * 2
    assert [colors[(3, slot)] for slot in range(4)] == [SEQUENCE_COLORS[1].lower()] + ["#ffffff"] * 3
    assert all(colors[(b, s)] == "#ffffff" for b in range(4, 8) for s in range(4))  # free blocks
    assert sum(c.get_hatch() == "///" for c in cells) == 4  # the shared block's 4 filled slots
    assert [t.get_text() for t in pool_ax.texts] == ["×2"]
    assert len(table_ax.patches) == 2 + 3  # one box per table entry
    assert [t.get_text() for t in table_ax.texts] == ["0", "1", "0", "2", "3"]
    assert [t.get_text() for t in table_ax.get_yticklabels()] == ["'a': 6 tokens", "'b': 9 tokens"]
    assert "4 of 8 blocks in use" in pool_ax.get_title()
    assert fig.dpi >= 110


def test_empty_cache_draws_free_blocks():
    fig = plot_block_tables(ac.PagedKVCache(block_size=2, num_blocks=3))
    assert len(fig.axes[0].patches) == 6 and not fig.axes[1].patches


def test_errors():
    with pytest.raises(TypeError, match="PagedKVCache"):
        plot_block_tables(ac.KVCache())
    with pytest.raises(ValueError, match="max_blocks"):
        plot_block_tables(ac.PagedKVCache(block_size=2, num_blocks=100))
