"""The tile explorer of notebook 08: watch FlashAttention's forward pass walk over the tiles.

FlashAttention never builds the ``(Lq, Lk)`` score matrix. It cuts the queries into blocks of
``block_q`` rows and the keys into blocks of ``block_k`` columns and visits the tiles one at a
time, keeping per query row only a running max ``m``, a running sum ``l`` (the softmax
denominator so far) and an output accumulator. This module draws that walk:

- ``tile_schedule(...)`` -> the tiles in the order the loop visits them, each ``computed`` or
  ``skipped`` (fully hidden by the causal mask, so the loop never touches it);
- ``demo_scores(...)`` -> the seeded toy scores ``(Lq, Lk)`` the picture uses (``-inf`` where masked);
- ``online_softmax_trace(scores_row, block_k)`` -> ``m`` and ``l`` of one row after each key block;
- ``render_tiles(step, **params)`` -> a Figure: the tile grid after ``step`` tiles, and the running
  max and sum of one query row;
- ``explain_tiles(step, **params)`` -> one line saying what that step did;
- ``tiles_explorer()`` -> the same picture with a Play button, built on ``widgets.Explorer``.

Like ``attn_core.viz.widgets``, the render functions are pure (no pyplot, nothing global) and the
explorer shows a PNG in an ``ipywidgets.Image``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from attn_core.i18n import localize
from attn_core.masks import causal_mask
from attn_core.viz.plotting import DPI, FONT_PT, VALUE_PT
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import Explorer, control_row, merge_params

__all__ = [
    "TILE_DEFAULTS",
    "TileStep",
    "SoftmaxTrace",
    "tile_schedule",
    "demo_scores",
    "online_softmax_trace",
    "tile_codes",
    "render_tiles",
    "explain_tiles",
    "TilesExplorer",
    "tiles_explorer",
]

TILE_DEFAULTS = dict(
    step=6,
    q_len=32,
    k_len=32,
    block_q=8,
    block_k=8,
    is_causal=True,
    row=15,
    seed=0,
    head_dim=16,
    panel_size=2.8,
    font_scale=1.0,
    values=False,
)

# Codes of the tile image (one cell per score entry), and their colours.
PENDING, DONE, CURRENT, SKIPPED = 0, 1, 2, 3
_TILE_COLORS = ("#ffffff", "#9ecae1", "#fd8d3c", "#d9d9d9")
_TILE_CMAP = ListedColormap(_TILE_COLORS)
_ROW_COLOR = "#c51b7d"
_STYLE = {"description_width": "initial"}


@dataclass(frozen=True)
class TileStep:
    """One tile of the loop: query rows ``q_start:q_stop`` × key columns ``k_start:k_stop``.

    ``status`` is ``"computed"`` or ``"skipped"`` (every entry hidden by the causal mask).
    ``partial`` is True for a computed tile that straddles the causal diagonal: the mask must be
    applied inside it.
    """

    index: int
    q_block: int
    k_block: int
    q_start: int
    q_stop: int
    k_start: int
    k_stop: int
    status: str
    partial: bool


@dataclass(frozen=True)
class SoftmaxTrace:
    """Online-softmax state of one query row after each key block (float64, shape ``(num_blocks,)``).

    ``running_max[j]`` is ``m_j``, the max over the keys of blocks ``0..j``; ``running_sum[j]`` is
    ``l_j = sum exp(s - m_j)`` over those keys; ``rescale[j] = exp(m_{j-1} - m_j)`` is the factor
    that block ``j`` applied to the old sum and output accumulator (0 for the first block with a
    visible key, since there was nothing to keep; 1 while no key has been visible).
    ``block_max[j]`` is the max of block ``j`` alone (``-inf`` if all of it is masked).
    """

    block_max: torch.Tensor
    running_max: torch.Tensor
    running_sum: torch.Tensor
    rescale: torch.Tensor

    @property
    def final_max(self) -> float:
        return float(self.running_max[-1])

    @property
    def final_sum(self) -> float:
        return float(self.running_sum[-1])


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}.")
    return int(value)


def _params(step, overrides: dict) -> dict:
    params = merge_params(TILE_DEFAULTS, overrides, "tile explorer")
    if step is not None:
        params["step"] = step
    for name in ("q_len", "k_len", "block_q", "block_k", "head_dim"):
        _check_int(name, params[name], 1)
    total = len(
        tile_schedule(params["q_len"], params["k_len"], params["block_q"], params["block_k"], params["is_causal"])
    )
    if _check_int("step", params["step"], 0) > total:
        raise ValueError(f"step {params['step']} does not exist: this grid has {total} tiles (steps 0..{total}).")
    if not 0 <= _check_int("row", params["row"], 0) < params["q_len"]:
        raise ValueError(
            f"row {params['row']} is outside the sequence: there are {params['q_len']} queries "
            f"(rows 0..{params['q_len'] - 1}). Pick a smaller row or more queries."
        )
    return params


@lru_cache(maxsize=64)
def _schedule(q_len: int, k_len: int, block_q: int, block_k: int, is_causal: bool) -> tuple[TileStep, ...]:
    offset = k_len - q_len  # bottom-right causal alignment: query i sees keys 0 .. i + offset
    steps = []
    for q_block, q_start in enumerate(range(0, q_len, block_q)):
        q_stop = min(q_start + block_q, q_len)
        for k_block, k_start in enumerate(range(0, k_len, block_k)):
            k_stop = min(k_start + block_k, k_len)
            # The tile's last query sees the most keys; if even it cannot see the tile's first
            # key, every entry is masked. Its first query sees the fewest keys; if it sees the
            # tile's last key, no entry is masked.
            skipped = is_causal and k_start > q_stop - 1 + offset
            partial = is_causal and not skipped and k_stop - 1 > q_start + offset
            status = "skipped" if skipped else "computed"
            steps.append(TileStep(len(steps), q_block, k_block, q_start, q_stop, k_start, k_stop, status, partial))
    return tuple(steps)


def tile_schedule(q_len: int, k_len: int, block_q: int, block_k: int, is_causal: bool = False) -> list[TileStep]:
    """Every ``(query block, key block)`` tile in loop order: query blocks outer, key blocks inner.

    Under ``is_causal`` (bottom-right aligned, as ``ac.causal_mask``) a tile whose entries are
    all masked is ``"skipped"``; every other tile is ``"computed"``. The last block of each axis
    is shorter when the block size does not divide the length.
    """
    for name, value in (("q_len", q_len), ("k_len", k_len), ("block_q", block_q), ("block_k", block_k)):
        _check_int(name, value, 1)
    return list(_schedule(int(q_len), int(k_len), int(block_q), int(block_k), bool(is_causal)))


def demo_scores(q_len: int, k_len: int, *, is_causal: bool = False, seed: int = 0, head_dim: int = 16) -> torch.Tensor:
    """Seeded toy scores ``q kᵀ / √d`` as float64 ``(q_len, k_len)``, ``-inf`` where causal hides a key."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(q_len, head_dim, generator=generator, dtype=torch.float64)  # (Lq, d)
    k = torch.randn(k_len, head_dim, generator=generator, dtype=torch.float64)  # (Lk, d)
    scores = q @ k.T / math.sqrt(head_dim)  # (Lq, Lk)
    if is_causal:
        scores = scores.masked_fill(~causal_mask(q_len, k_len), -math.inf)  # (Lq, Lk)
    return scores


def online_softmax_trace(scores_row, block_k: int) -> SoftmaxTrace:
    """Run the online softmax over one row of scores, ``block_k`` keys at a time.

    After the last block, ``final_max == max(scores_row)`` and
    ``final_sum == exp(scores_row - final_max).sum()``: the softmax denominator, found without
    ever holding the whole row. Masked keys are ``-inf`` and add nothing.
    """
    _check_int("block_k", block_k, 1)
    row = torch.as_tensor(scores_row, dtype=torch.float64).flatten()  # (Lk,)
    if row.numel() == 0:
        raise ValueError("scores_row is empty: the online softmax needs at least one key.")
    running_max, running_sum = -math.inf, 0.0
    block_maxes, maxes, sums, rescales = [], [], [], []
    for start in range(0, row.numel(), block_k):
        block = row[start : start + block_k]  # (≤ block_k,)
        block_max = float(block.max())
        new_max = max(running_max, block_max)
        if new_max == -math.inf:  # nothing visible yet: keep m = -inf, l = 0
            rescale, block_sum = 1.0, 0.0
        else:
            rescale = math.exp(running_max - new_max)  # exp(-inf) = 0 for the first visible block
            block_sum = float(torch.exp(block - new_max).sum())
        running_max, running_sum = new_max, running_sum * rescale + block_sum
        block_maxes.append(block_max)
        maxes.append(running_max)
        sums.append(running_sum)
        rescales.append(rescale)
    as_tensor = lambda values: torch.tensor(values, dtype=torch.float64)  # noqa: E731
    return SoftmaxTrace(as_tensor(block_maxes), as_tensor(maxes), as_tensor(sums), as_tensor(rescales))


def tile_codes(step: int, q_len: int, k_len: int, block_q: int, block_k: int, is_causal: bool) -> np.ndarray:
    """The tile image after ``step`` tiles: ``(q_len, k_len)`` of PENDING / DONE / CURRENT / SKIPPED.

    Skipped tiles are SKIPPED from the start (the schedule knows them in advance); the tile of
    step ``step`` (1-based) is CURRENT if computed; earlier computed tiles are DONE.
    """
    schedule = _schedule(q_len, k_len, block_q, block_k, is_causal)
    status = np.full(len(schedule), PENDING, dtype=np.uint8)  # (tiles,)
    computed = np.array([tile.status == "computed" for tile in schedule])  # (tiles,)
    status[:step] = DONE
    if step:
        status[step - 1] = CURRENT
    status[~computed] = SKIPPED
    num_k_blocks = -(-k_len // block_k)
    tile_of = (np.arange(q_len) // block_q)[:, None] * num_k_blocks + np.arange(k_len) // block_k  # (Lq, Lk)
    return status[tile_of]  # (Lq, Lk)


def _row_progress(params: dict, schedule) -> tuple[int, int]:
    """(query block of the row, how many of its key blocks the loop has visited after ``step``)."""
    row_block = params["row"] // params["block_q"]
    num_k_blocks = -(-params["k_len"] // params["block_k"])
    return row_block, min(max(params["step"] - row_block * num_k_blocks, 0), num_k_blocks)


def _fmt(value: float) -> str:
    return "−∞" if value == -math.inf else f"{value:.2f}".replace("-", "−")


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


def explain_tiles(step: int | None = None, **overrides) -> str:
    """One line on what step ``step`` did, e.g. ``step 5/16: query block 1 × key block 0; row 13: …``."""
    p = _params(step, overrides)
    q_len, k_len, block_q, block_k, is_causal = p["q_len"], p["k_len"], p["block_q"], p["block_k"], p["is_causal"]
    step, row = p["step"], p["row"]
    schedule = _schedule(q_len, k_len, block_q, block_k, is_causal)
    skipped = sum(tile.status == "skipped" for tile in schedule)
    scores_row = demo_scores(q_len, k_len, is_causal=is_causal, seed=p["seed"], head_dim=p["head_dim"])[row]  # (Lk,)
    trace = online_softmax_trace(scores_row, block_k)
    row_block, visited = _row_progress(p, schedule)
    if step == 0:
        head = (
            f"step 0/{len(schedule)}: nothing computed yet; every row starts with running max m = −∞ and sum ℓ = 0"
            + (f"; {skipped} of the {len(schedule)} tiles are fully masked and will be skipped." if skipped else ".")
        )
        return head
    tile = schedule[step - 1]
    head = f"step {step}/{len(schedule)}: query block {tile.q_block} × key block {tile.k_block}"
    if tile.status == "skipped":
        return (
            f"{head} is skipped: every key in it comes after every query (causal), so all its scores "
            "would be −∞ and it adds nothing. No memory read, no FLOPs."
        )
    if tile.partial:
        head += " (on the causal diagonal: the mask is applied inside this tile)"
    if tile.q_block != row_block:
        if row_block > tile.q_block:
            return f"{head}; row {row} lives in query block {row_block}, which has not started yet."
        if trace.final_max == -math.inf:
            return f"{head}; row {row} saw no key at all (causal with fewer keys than queries): its output is 0."
        return (
            f"{head}; row {row} is finished: max {_fmt(trace.final_max)}, normaliser {trace.final_sum:.2f}, "
            f"so its weights are exp(s − {_fmt(trace.final_max)}) / {trace.final_sum:.2f}."
        )
    j = visited - 1
    old_max = float(trace.running_max[j - 1]) if j else -math.inf
    old_sum = float(trace.running_sum[j - 1]) if j else 0.0
    new_max, new_sum = float(trace.running_max[j]), float(trace.running_sum[j])
    if new_max == -math.inf:
        return f"{head}; row {row}: every key of this block is masked for it, m stays −∞ and ℓ stays 0."
    if old_max == -math.inf:
        return f"{head}; row {row}: first visible keys, running max −∞ → {_fmt(new_max)}, sum 0 → {new_sum:.2f}."
    rescale = float(trace.rescale[j])
    if new_max == old_max:
        change = f"running max stays {_fmt(new_max)}, no rescale (factor 1)"
    else:
        change = (
            f"running max {_fmt(old_max)} → {_fmt(new_max)}, sum rescaled by "
            f"exp({_fmt(old_max)}−{_fmt(new_max)})={rescale:.2f}"
        )
    return f"{head}; row {row}: {change}; sum {old_sum:.2f} → {new_sum:.2f}."


class TilesExplorer(Explorer):
    """``widgets.Explorer`` with the tile picture and a Play button that walks the steps.

    The Play button and the step slider are linked in the browser (``jslink``), so pressing
    play animates without a Python loop; every step the slider reaches re-renders the PNG.
    Changing lengths or block sizes moves the slider's maximum to the new number of tiles.
    The tiles have no colour scale, so the display row has no "fixed scale" box.
    """

    DISPLAY = ("panel_size", "font_scale", "values")

    def __init__(self, controls: dict, fixed: dict | None = None, save_dir="saved_figures"):
        import ipywidgets as widgets

        self.play = widgets.Play(value=0, min=0, max=1, step=1, interval=700, description="play", repeat=False)
        self._syncing = False
        base_controls = dict(controls)
        super().__init__("tiles", controls, fixed, save_dir)
        self.links = [
            widgets.jslink((self.play, "value"), (controls["step"], "value")),
            widgets.jslink((self.play, "max"), (controls["step"], "max")),
        ]
        # Explorer lays the controls out three per row; put Play next to the step slider instead.
        num_rows = -(-len(base_controls) // 3)
        others = [control for name, control in base_controls.items() if name != "step"]
        rows = [control_row([self.play, controls["step"]])]
        rows += [control_row(others[i : i + 3]) for i in range(0, len(others), 3)]
        self.widget.children = (*rows, *self.widget.children[num_rows:])

    def update(self, change=None) -> None:
        if not self._syncing:  # moving the step slider below must not re-enter
            super().update(change)

    def render(self, params: dict) -> tuple[Figure, str]:
        """Fit the step slider to the grid (it shrinks with larger blocks), then draw that step."""
        step = self.controls["step"]
        total = len(
            tile_schedule(params["q_len"], params["k_len"], params["block_q"], params["block_k"], params["is_causal"])
        )
        self._syncing = True
        try:
            step.max = total  # clamps the value when the grid shrank
            self.play.max = total
            self.play.value = step.value
        finally:
            self._syncing = False
        params = self.params()
        return render_tiles(**params), explain_tiles(**params)


def tiles_explorer(**fixed) -> TilesExplorer:
    """08: press play and watch the tiles go by, and one row's running max and sum with them.

    Keywords set where a control starts (``tiles_explorer(is_causal=False, row=3)``) or fix a
    parameter without a control (``head_dim``).
    """
    import ipywidgets as w

    style = _STYLE
    lengths = [8, 16, 24, 32, 37, 48, 64, 100, 128]
    blocks = [1, 2, 4, 8, 16, 32, 64]
    start = {**TILE_DEFAULTS, **fixed}
    controls = {
        "step": w.IntSlider(description="step", value=0, min=0, max=10_000, style=style),
        "q_len": w.Dropdown(description="queries", options=lengths, value=TILE_DEFAULTS["q_len"], style=style),
        "k_len": w.Dropdown(description="keys", options=lengths, value=TILE_DEFAULTS["k_len"], style=style),
        "block_q": w.Dropdown(description="query block", options=blocks, value=TILE_DEFAULTS["block_q"], style=style),
        "block_k": w.Dropdown(description="key block", options=blocks, value=TILE_DEFAULTS["block_k"], style=style),
        "is_causal": w.Checkbox(description="causal", value=TILE_DEFAULTS["is_causal"], style=style),
        # The row slider spans the longest sequence on purpose: a row past the current one says so.
        "row": w.IntSlider(description="row", value=TILE_DEFAULTS["row"], min=0, max=max(lengths) - 1, style=style),
        "seed": w.IntSlider(description="seed", value=0, min=0, max=20, style=style),
    }
    fixed = {"step": start["step"], **fixed}
    return TilesExplorer(controls, fixed)
