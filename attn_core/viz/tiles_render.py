"""``render_tiles``: the tile explorer's figure (notebook 08), the tile grid after ``step`` tiles and one row's m and l.

The walk it draws comes from :mod:`attn_core.viz.tiles_schedule`; public through :mod:`attn_core.viz.tiles`.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from attn_core.i18n import localize
from attn_core.viz.plotting import DPI, FONT_PT, VALUE_PT
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.tiles_schedule import (
    CURRENT,
    SKIPPED,
    _fmt,
    _params,
    _row_progress,
    _schedule,
    demo_scores,
    online_softmax_trace,
    tile_codes,
)

_TILE_COLORS = ("#ffffff", "#9ecae1", "#fd8d3c", "#d9d9d9")
_TILE_CMAP = ListedColormap(_TILE_COLORS)
_ROW_COLOR = "#c51b7d"


def _edge_ticks(length: int, block: int, cell: float, need: float) -> list[int]:
    """Boundaries to label along an axis of ``length`` cells of ``cell`` inches, each label ``need`` inches.

    Tile edges (0, block, 2·block, ...) when there are at least three tiles, otherwise round
    positions; always the start and the end, thinned so that no two labels overlap.
    """
    edges = [*range(0, length, block), length]
    if len(edges) < 4:  # one or two tiles: tile edges alone would give a single label
        step = next(m * 10**e for e in range(6) for m in (1, 2, 5) if m * 10**e * cell >= need)
        edges = sorted({*range(0, length, step), length})
    keep = max(1, math.ceil(need / (cell * (edges[1] - edges[0]))))  # every keep-th edge fits
    shown = edges[:-1][::keep]
    return shown + [length] if (length - shown[-1]) * cell >= need else shown[:-1] + [length]


def _ticks(low: float, high: float) -> list[float]:
    """Three round tick values spanning ``[low, high]``."""
    if high - low < 1e-9:
        return [round(low, 2)]
    return sorted({round(value, 1 if high - low >= 0.6 else 2) for value in np.linspace(low, high, 3)})


def render_tiles(step: int | None = None, **overrides) -> Figure:
    """Figure after ``step`` tiles (0 = before the first): the tile grid, and one row's m and l.

    Left: the ``q_len × k_len`` score matrix cut into tiles; finished tiles blue, the current one
    orange with a red frame (dashed if skipped), tiles the causal mask removes grey and hatched,
    the causal boundary as a black staircase, the chosen row framed in magenta. Right: for that
    row, the running max (top) and running sum (bottom) after each key block visited so far,
    with their final values dashed. Keywords as in ``TILE_DEFAULTS``; raises ValueError for
    impossible settings.

    Everything is drawn in one Axes whose data coordinates are inches of the figure, with text as
    glyph outlines (``textpaths``): three Axes with matplotlib Ticks and Texts cost ~3× a redraw.
    Artists go in with ``add_artist`` (no data-limit or clip bookkeeping).
    ``fig.axes[0].images[0]`` is the tile image (``tile_codes``), and the current tile's frame
    is the patch with gid ``"current-tile"``.
    """
    p = _params(step, overrides)
    q_len, k_len, block_q, block_k, is_causal = p["q_len"], p["k_len"], p["block_q"], p["block_k"], p["is_causal"]
    step, row = p["step"], p["row"]
    schedule = _schedule(q_len, k_len, block_q, block_k, is_causal)
    font = FONT_PT * p["font_scale"]  # axis names and titles
    small = VALUE_PT * p["font_scale"]  # tick labels and printed values: >= 9 pt at font_scale 1
    line = font * 1.4 / 72  # one line of text, in inches
    width, height = p["panel_size"] * 3.4, p["panel_size"] * 1.45 + 2 * line
    fig = Figure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    text = TextBatch()

    def put(x, y, string, fontsize, ha="center", va="center", rotation=0, color="black"):
        # Text at (x, y) inches; rotated text turns about its anchor (see TextBatch).
        text.add(x, y, string, fontsize, ha=ha, va=va, rotation=rotation, color=color)

    # --- left: the tiles, in a box of gw × gh inches at (gx, gy) ----------------------------
    gx, gy = 0.15 + line + 3 * small * 0.62 / 72, 2.5 * line
    top = height - 1.6 * line
    gw, gh = width * 0.4 - gx, top - gy
    cell_w, cell_h = gw / k_len, gh / q_len

    def kx(key):  # x (inches) of the left edge of key column `key`
        return gx + key * cell_w

    def qy(query):  # y (inches) of the top edge of query row `query`
        return top - query * cell_h

    codes = tile_codes(step, q_len, k_len, block_q, block_k, is_causal)  # (Lq, Lk)
    ax.imshow(
        codes, cmap=_TILE_CMAP, vmin=-0.5, vmax=3.5, interpolation="nearest", extent=(gx, gx + gw, gy, top),
        origin="upper", aspect="auto",
    )  # fmt: skip
    k_edges = [*range(0, k_len, block_k), k_len]
    q_edges = [*range(0, q_len, block_q), q_len]
    ax.vlines([kx(edge) for edge in k_edges], gy, top, color="#555555", lw=0.6)
    ax.hlines([qy(edge) for edge in q_edges], gx, gx + gw, color="#555555", lw=0.6)
    if is_causal:
        for tile in schedule:
            if tile.status == "skipped" and (tile.k_block == 0 or schedule[tile.index - 1].status == "computed"):
                # One hatched rectangle per query block: its skipped tiles run to the last key.
                corner = (kx(tile.k_start), qy(tile.q_stop))
                span = (kx(k_len) - kx(tile.k_start), (tile.q_stop - tile.q_start) * cell_h)
                ax.add_artist(Rectangle(corner, *span, fill=False, hatch="///", edgecolor="#8c8c8c", lw=0))
        # Causal boundary: query i sees keys 0 .. i + (k_len - q_len).
        last_key = np.clip(np.arange(q_len) + k_len - q_len + 1, 0, k_len)  # (Lq,) one past the last visible key
        xs = gx + np.repeat(last_key, 2) * cell_w  # (2·Lq,)
        ys = top - np.repeat(np.arange(q_len + 1), 2)[1:-1] * cell_h  # (2·Lq,)
        ax.plot(xs, ys, color="black", lw=1.2)
    if step:
        tile = schedule[step - 1]
        ax.add_artist(
            Rectangle(
                (kx(tile.k_start), qy(tile.q_stop)),
                (tile.k_stop - tile.k_start) * cell_w,
                (tile.q_stop - tile.q_start) * cell_h,
                fill=False,
                edgecolor="#d62728",
                lw=2.5,
                linestyle="-" if tile.status == "computed" else "--",
                gid="current-tile",
            )
        )
    ax.add_artist(Rectangle((gx, qy(row + 1)), gw, cell_h, fill=False, edgecolor=_ROW_COLOR, lw=1.5))
    number_w = text_width(str(max(q_len, k_len)), small) + 0.6 * small / 72  # a tick label and a gap
    for edge in _edge_ticks(k_len, block_k, cell_w, number_w):
        put(kx(edge), gy - 0.05, str(edge), small, va="top")
    for edge in _edge_ticks(q_len, block_q, cell_h, 1.3 * small / 72):
        put(gx - 0.05, qy(edge), str(edge), small, ha="right")
    put(gx + gw / 2, gy - 0.05 - line, localize(f"keys (blocks of {block_k})"), font, va="top")
    put(0.12, gy + gh / 2, localize(f"queries (blocks of {block_q})"), font, va="top", rotation=90)
    put(gx + gw / 2, top + 0.05, localize(f"tile {step}/{len(schedule)}"), font * 1.1, va="bottom")
    put(gx + gw + 0.04, qy(row + 0.5), str(row), small, ha="left", color=_ROW_COLOR)

    # --- right: the online softmax of one row, two plots of pw × ph inches --------------------
    scores_row = demo_scores(q_len, k_len, is_causal=is_causal, seed=p["seed"], head_dim=p["head_dim"])[row]  # (Lk,)
    trace = online_softmax_trace(scores_row, block_k)
    num_k_blocks = len(trace.running_max)
    row_block, visited = _row_progress(p, schedule)
    px = width * 0.4 + 0.35 + line + 4 * small * 0.62 / 72
    widest_final = localize(f"final {max(trace.final_sum, abs(trace.final_max), 1.0):.2f}")
    final_w = text_width(widest_final + "−", small)  # right margin
    pw = width - px - 0.25 - final_w
    sum_y = 2.5 * line
    ph = (top - sum_y - 0.2) / 2
    max_y = sum_y + ph + 0.2

    def bx(block):  # x (inches) of the centre of key block `block`
        return px + (np.asarray(block) + 0.5) * pw / num_k_blocks

    put(px + pw / 2, top + 0.05, localize(f"row {row}: {visited}/{num_k_blocks} key blocks"), font * 1.1, va="bottom",
        color=_ROW_COLOR)  # fmt: skip
    row_tiles = schedule[row_block * num_k_blocks : (row_block + 1) * num_k_blocks]
    for y0, name in ((max_y, "max m"), (sum_y, "sum ℓ")):
        for tile in row_tiles:
            if tile.status == "skipped":
                ax.add_artist(Rectangle((bx(tile.k_block) - pw / num_k_blocks / 2, y0), pw / num_k_blocks, ph,
                                       color=_TILE_COLORS[SKIPPED], lw=0))  # fmt: skip
        if visited and row_block * num_k_blocks + visited == step:
            ax.add_artist(Rectangle((bx(visited - 1) - pw / num_k_blocks / 2, y0), pw / num_k_blocks, ph,
                                   color=_TILE_COLORS[CURRENT], alpha=0.35, lw=0))  # fmt: skip
        ax.add_artist(Rectangle((px, y0), pw, ph, fill=False, edgecolor="#888888", lw=0.8))
        put(px - 0.05 - 3.6 * small * 0.62 / 72, y0 + ph / 2, localize(name), font, va="bottom", rotation=90)
    block_w = text_width(str(num_k_blocks), small) + 0.6 * small / 72
    ticks = np.arange(num_k_blocks)[:: max(1, math.ceil(num_k_blocks / 6), math.ceil(block_w * num_k_blocks / pw))]
    for block in ticks:
        put(bx(block), sum_y - 0.05, str(block), small, va="top")
    if trace.final_max == -math.inf:
        put(px + pw / 2, sum_y - 0.05 - line, localize("key block"), font, va="top")
        put(px + pw / 2, max_y + ph / 2, localize(f"row {row} sees no key at all: its output is 0"), font)
        text.draw(ax)
        return fig

    # Value -> inches, with fixed ranges over the whole row so the animation does not jump.
    finite_max = trace.running_max[trace.running_max > -math.inf]
    finite_blocks = trace.block_max[trace.block_max > -math.inf]
    low, high = float(min(finite_max.min(), finite_blocks.min())), float(finite_max.max())
    pad = 0.12 * max(high - low, 0.5)
    # Headroom over the highest point for its printed value and the legend row above it.
    top_room = min(0.45, (0.1 + 2.8 * small / 72) / ph)  # fraction of the panel height
    max_low = low - pad
    max_high = (high - top_room * max_low) / (1 - top_room)
    sum_high = float(trace.running_sum.max())

    def my(value):
        return max_y + (np.asarray(value) - max_low) / (max_high - max_low) * ph

    def sy(value):
        return sum_y + np.asarray(value) / (sum_high * 1.35) * ph

    for to_y, values in ((my, _ticks(low, high)), (sy, _ticks(0.0, sum_high))):
        ax.hlines([to_y(value) for value in values], px, px + pw, color="#dddddd", lw=0.6)
        for value in values:
            put(px - 0.05, to_y(value), _fmt(value), small, ha="right")
    ax.plot([px, px + pw], [my(trace.final_max)] * 2, color=_ROW_COLOR, ls="--", lw=1)
    ax.plot([px, px + pw], [sy(trace.final_sum)] * 2, color=_ROW_COLOR, ls="--", lw=1)
    seen_max = trace.running_max[:visited].numpy()  # (visited,)
    seen_sum = trace.running_sum[:visited].numpy()  # (visited,)
    seen_block_max = trace.block_max[:visited].numpy()  # (visited,)
    live = seen_max > -math.inf
    shown = np.arange(visited)
    block_live = seen_block_max > -math.inf
    ax.plot(bx(shown[block_live]), my(seen_block_max[block_live]), "x", color="#636363", ms=6, mew=1.5)
    ax.plot(bx(shown[live]), my(seen_max[live]), "o-", color="#08519c", ms=5)
    # Legend of the max panel, in its empty top band: what the line and the crosses are.
    legend_y, legend_x = max_y + ph - 0.06 - small / 144, px + 0.12
    ax.plot([legend_x], [legend_y], "o", color="#08519c", ms=5)
    running_max = localize("running max m")
    put(legend_x + 0.1, legend_y, running_max, small, ha="left")
    cross_x = legend_x + 0.45 + text_width(running_max, small)
    ax.plot([cross_x], [legend_y], "x", color="#636363", ms=6, mew=1.5)
    put(cross_x + 0.1, legend_y, localize("max of one key block"), small, ha="left", color="#444444")
    ax.plot(bx(shown), sy(seen_sum), "o-", color="#08519c", ms=5)
    for y0, final in ((my(trace.final_max), _fmt(trace.final_max)), (sy(trace.final_sum), f"{trace.final_sum:.2f}")):
        # where the dashed line ends
        put(px + pw + 0.05, y0, localize(f"final {final}"), small, ha="left", color=_ROW_COLOR)
    # Numbers over the points: the rescale factors always, every value when asked, each one only
    # if it fits the width of its key block (9-pt text never overlaps; the axis label says so).
    room, hidden = pw / num_k_blocks - 0.04, False
    for j in shown:
        rescale = float(trace.rescale[j])
        factor = f"×{rescale:.2f}" if 0 < rescale < 0.995 else ""
        numbers = [(my(seen_max[j]), _fmt(seen_max[j]), "black")] if p["values"] and live[j] else []
        label = f"{seen_sum[j]:.2f}" + (f" ({factor})" if factor else "") if p["values"] else factor
        numbers += [(sy(seen_sum[j]), label, "#08519c")] if label else []
        for y, number, color in numbers:
            if text_width(number, small) <= room:
                put(bx(j), y + 0.07, number, small, va="bottom", color=color)
            else:
                hidden = True
    note = " (numbers hidden: blocks too narrow)" if hidden and p["values"] else ""
    put(px + pw / 2, sum_y - 0.05 - line, localize("key block" + note), font, va="top")
    text.draw(ax)
    return fig
