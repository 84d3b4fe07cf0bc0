"""Draw a paged KV cache (notebook 13): the block pool and each sequence's block table.

``plot_block_tables(paged)`` returns a Figure with two panels. Top, the **pool**: one column per physical
block, one cell per slot (slot 0 at the top); a filled slot is coloured by the sequence that wrote it, a block
that several sequences share (a forked prefix) is grey, hatched and labelled with how many read it (it belongs
to none of them alone), a free block is blank. Bottom, the **block tables**: one row per sequence, its
logical blocks 0, 1, 2, ... left to right, each box holding the physical block it maps to. Token ``p`` of a
sequence is in the box ``p // block_size`` of its row, at slot ``p % block_size`` of the column that box names.

Pure matplotlib (a ``Figure``, no pyplot): nothing global changes.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from attn_core.caches.paged_cache import PagedKVCache
from attn_core.i18n import localize, translate
from attn_core.viz.plotting import DPI, FONT_PT, VALUE_PT

__all__ = ["plot_block_tables", "SEQUENCE_COLORS"]

SHARED_COLOR = "#aaaaaa"  # a block several sequences read belongs to none of them alone
# Colour-blind-safe qualitative colours (Okabe & Ito), one per sequence, reused in turn after eight.
SEQUENCE_COLORS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999"]


def _fill(length: int, index: int, block_size: int) -> int:
    """Tokens in logical block ``index`` of a sequence of ``length`` tokens."""
    return max(0, min(block_size, length - index * block_size))


def plot_block_tables(paged: PagedKVCache, *, title: str | None = None, max_blocks: int = 64) -> Figure:
    """The pool (blocks x slots, coloured by owner) above the block tables (one row per sequence)."""
    if not isinstance(paged, PagedKVCache):
        raise TypeError(f"plot_block_tables draws an ac.PagedKVCache, got {type(paged).__name__}.")
    if paged.num_blocks > max_blocks:
        raise ValueError(
            f"the pool has {paged.num_blocks} blocks, more than max_blocks={max_blocks} columns can show "
            "readably; draw a smaller cache or raise max_blocks."
        )
    block_size, num_blocks, seq_ids = paged.block_size, paged.num_blocks, paged.seq_ids
    tables = {seq_id: paged.block_table(seq_id) for seq_id in seq_ids}
    lengths = {seq_id: len(paged.sequence(seq_id)) for seq_id in seq_ids}
    colors = {seq_id: SEQUENCE_COLORS[i % len(SEQUENCE_COLORS)] for i, seq_id in enumerate(seq_ids)}
    owners: dict[int, list] = {}  # physical block -> sequences whose table holds it
    filled: dict[int, int] = {}  # physical block -> slots written (the longest of its readers)
    for seq_id, table in tables.items():
        for index, block in enumerate(table):
            owners.setdefault(block, []).append(seq_id)
            filled[block] = max(filled.get(block, 0), _fill(lengths[seq_id], index, block_size))

    longest_table = max((len(table) for table in tables.values()), default=1)
    width = max(6.0, 0.42 * max(num_blocks, longest_table + 4))
    pool_height, table_height = 0.28 * block_size + 0.9, 0.42 * max(1, len(seq_ids)) + 0.7
    fig = Figure(figsize=(width, pool_height + table_height), dpi=DPI)
    pool_ax, table_ax = fig.subplots(2, 1, height_ratios=[pool_height, table_height])
    label_width = max((len(f"{seq_id!r}: {lengths[seq_id]} tokens") for seq_id in seq_ids), default=8)
    left = min(0.4, (0.4 + 0.075 * label_width) / width)  # room for the row labels: ~0.075 in per 9 pt character
    fig.subplots_adjust(left=left, right=0.99, top=0.86 if title else 0.92, bottom=0.06, hspace=0.5)

    for block in range(num_blocks):
        readers = owners.get(block, [])
        for slot in range(block_size):
            used = slot < filled.get(block, 0)
            face = "white" if not (readers and used) else (SHARED_COLOR if len(readers) > 1 else colors[readers[0]])
            pool_ax.add_patch(
                Rectangle(
                    (block, slot),
                    1,
                    1,
                    facecolor=face,
                    edgecolor="black" if readers else "#bbbbbb",
                    linewidth=0.6,
                    hatch="///" if len(readers) > 1 and used else None,
                    alpha=0.9 if used else 1.0,
                )
            )
        if len(readers) > 1:
            pool_ax.text(block + 0.5, -0.25, f"×{len(readers)}", ha="center", va="bottom", fontsize=VALUE_PT)
    pool_ax.set_xlim(0, num_blocks)
    pool_ax.set_ylim(block_size, -0.9)  # slot 0 on top, room for the labels above
    pool_ax.set_xticks([b + 0.5 for b in range(num_blocks)], [str(b) for b in range(num_blocks)], fontsize=VALUE_PT)
    pool_ax.set_yticks([s + 0.5 for s in range(block_size)], [str(s) for s in range(block_size)], fontsize=VALUE_PT)
    pool_ax.set_xlabel(localize("physical block"), fontsize=FONT_PT)
    pool_ax.set_ylabel(localize("slot"), fontsize=FONT_PT)
    used = num_blocks - paged.num_free_blocks
    pool_ax.set_title(
        localize(f"the pool: {used} of {num_blocks} blocks in use, {block_size} slots each (grey, hatched: shared)"),
        fontsize=FONT_PT,
    )
    for side in ("top", "right", "bottom", "left"):
        pool_ax.spines[side].set_visible(False)

    for row, seq_id in enumerate(seq_ids):
        for index, block in enumerate(tables[seq_id]):
            shared = len(owners[block]) > 1
            table_ax.add_patch(
                Rectangle(
                    (index, row + 0.1),
                    0.9,
                    0.8,
                    facecolor=colors[seq_id],
                    edgecolor="black",
                    linewidth=0.6,
                    hatch="///" if shared else None,
                    alpha=0.9,
                )
            )
            table_ax.text(
                index + 0.45,
                row + 0.5,
                str(block),
                ha="center",
                va="center",
                fontsize=VALUE_PT + 1,
                bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none"),
            )
    table_ax.set_xlim(0, max(longest_table, num_blocks * 0.5))
    table_ax.set_ylim(max(1, len(seq_ids)), 0)
    table_ax.set_yticks(
        [row + 0.5 for row in range(len(seq_ids))],
        [localize(f"{seq_id!r}: {lengths[seq_id]} tokens") for seq_id in seq_ids],
        fontsize=VALUE_PT,
    )
    table_ax.set_xticks([i + 0.45 for i in range(longest_table)], [str(i) for i in range(longest_table)])
    table_ax.tick_params(axis="x", labelsize=VALUE_PT)
    table_ax.set_xlabel(
        localize("logical block (position // block_size); the box holds the physical block"), fontsize=FONT_PT
    )
    table_ax.set_title(localize("block tables"), fontsize=FONT_PT)
    for side in ("top", "right"):
        table_ax.spines[side].set_visible(False)
    if title:
        fig.suptitle(translate(title), fontsize=FONT_PT + 1)  # a caller's title: Chinese where a catalog has it
    return fig
