"""Which tiles each program of the FlashAttention-2 kernels visits: the grid, drawn (notebook 12b).

The forward kernel and the dQ kernel launch one program per **query tile**; a program walks over the key
tiles left to right and stops at the last key its last query may see (bottom-right causal). The dK/dV kernel
launches one program per **key tile**; it walks over the query tiles from the first one that sees any of
its keys. Both visit exactly the tiles with at least one visible (query, key) pair, and both build a mask on
exactly the same ones: the tiles crossed by the causal diagonal, and the last key tile when it runs past Lk
(a bound check). Every other tile is computed without a mask, as in FlashAttention-2. This module computes
that schedule and draws it; it does not import triton (the schedule is the kernels' index arithmetic, in Python).
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from attn_core.i18n import localize
from attn_core.viz.lite_axes import PAD_IN, TICK_IN, frame_and_ticks, lite_panel, to_inches
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import Explorer

__all__ = ["tile_status", "program_visits", "render_schedule", "explain_schedule", "schedule_explorer"]

SKIPPED, FULL, DIAGONAL = 0, 1, 2
MASKED = DIAGONAL  # a visited tile that builds a mask: crossed by the causal diagonal, or the partial last key tile
COLORS = {SKIPPED: "#eeeeee", FULL: "#9ecae1", DIAGONAL: "#fdae6b"}
KERNELS = ("forward", "dK/dV")
SCHEDULE_DEFAULTS = {"kernel": "forward", "program": 1, "q_len": 48, "k_len": 64, "block_size": 16, "is_causal": True}


def _check(q_len: int, k_len: int, block_size: int) -> None:
    if q_len < 1 or k_len < 1 or block_size < 1:
        raise ValueError(f"q_len, k_len and block_size must be >= 1, got {q_len}, {k_len}, {block_size}.")


def tile_status(q_len: int, k_len: int, block_size: int, is_causal: bool) -> np.ndarray:
    """``(num query tiles, num key tiles)`` codes: 0 skipped (all future), 1 visited, 2 visited with a mask.

    A visited tile needs a mask when some query of it does not see some key of it (the causal diagonal), or when
    it is the last key tile and runs past ``k_len`` (``k_len`` not a multiple of ``block_size``): the kernels
    check the key bound there only. A partial last *query* tile needs none: its extra rows are never stored.
    """
    _check(q_len, k_len, block_size)
    offset = k_len - q_len  # query i sees keys j <= i + offset
    q_tiles, k_tiles = -(-q_len // block_size), -(-k_len // block_size)
    status = np.full((q_tiles, k_tiles), FULL)  # (Tq, Tk)
    if k_len % block_size:
        status[:, -1] = MASKED  # the last key tile is partial: the key bound is checked there
    if not is_causal:
        return status
    for qi in range(q_tiles):
        first_query, last_query = qi * block_size, min((qi + 1) * block_size, q_len) - 1
        for kj in range(k_tiles):
            first_key, last_key = kj * block_size, min((kj + 1) * block_size, k_len) - 1
            if first_key > last_query + offset:
                status[qi, kj] = SKIPPED  # every key is in the future of every query
            elif last_key > first_query + offset:
                status[qi, kj] = MASKED  # some pairs visible, some not: crossed by the diagonal
    return status


def program_visits(kernel: str, program: int, q_len: int, k_len: int, block_size: int, is_causal: bool) -> list:
    """The ``(query tile, key tile)`` pairs program ``program`` of ``kernel`` visits, in its loop order."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}.")
    status = tile_status(q_len, k_len, block_size, is_causal)  # (Tq, Tk)
    num_programs = status.shape[0] if kernel == "forward" else status.shape[1]
    if not 0 <= program < num_programs:
        raise ValueError(
            f"program {program} does not exist: the {kernel} kernel has {num_programs} programs per head "
            f"(0..{num_programs - 1}) for these lengths."
        )
    if kernel == "forward":
        return [(program, kj) for kj in range(status.shape[1]) if status[program, kj] != SKIPPED]
    return [(qi, program) for qi in range(status.shape[0]) if status[qi, program] != SKIPPED]


def explain_schedule(kernel="forward", program=1, q_len=48, k_len=64, block_size=16, is_causal=True, **_) -> str:
    """One line: what the chosen program visits."""
    visits = program_visits(kernel, program, q_len, k_len, block_size, is_causal)
    status = tile_status(q_len, k_len, block_size, is_causal)  # (Tq, Tk)
    masked = sum(status[pair] == MASKED for pair in visits)
    if kernel == "forward":
        first, last = program * block_size, min((program + 1) * block_size, q_len) - 1
        if not visits:
            return f"program {program} (queries {first}–{last}) sees no key: it writes zeros and lse = −inf."
        skipped = status.shape[1] - len(visits)
        return (
            f"program {program} (queries {first}–{last}) visits key tiles 0–{visits[-1][1]}: {len(visits) - masked} "
            f"without a mask, {masked} with one; {skipped} skipped."
        )
    first, last = program * block_size, min((program + 1) * block_size, k_len) - 1
    skipped = status.shape[0] - len(visits)
    return (
        f"program {program} (keys {first}–{last}) visits query tiles {visits[0][0]}–{visits[-1][0]}: "
        f"{len(visits) - masked} without a mask, {masked} with one; {skipped} skipped."
    )


def render_schedule(
    kernel="forward", program=1, q_len=48, k_len=64, block_size=16, is_causal=True, panel_size=3.2, font_scale=1.0, **_
) -> Figure:
    """The tile grid (rows: query tiles, columns: key tiles), the chosen program's tiles framed and numbered.

    Drawn without matplotlib's tick machinery or Text (``viz.lite_axes``, glyph-path text, the tiles as two
    PolyCollections): a Rectangle and a Text per tile and the Tick objects were most of a ~65 ms move (issue #33's
    explorer speed). Same size, layout and labels."""
    status = tile_status(q_len, k_len, block_size, is_causal)  # (Tq, Tk)
    visits = program_visits(kernel, program, q_len, k_len, block_size, is_causal)
    q_tiles, k_tiles = status.shape
    cell = panel_size / max(q_tiles, k_tiles, 3)  # inches per tile
    width, height = k_tiles * cell + 1.2, q_tiles * cell + 1.3  # inches: tick labels left and on top, title below
    fig = Figure(figsize=(width, height), dpi=110)
    left, bottom, grid_w, grid_h = 0.9, 0.45, k_tiles * cell, q_tiles * cell
    ax = lite_panel(fig, (left, bottom, grid_w, grid_h), (0, k_tiles), (q_tiles, 0))
    font = max(9.0, 10 * font_scale)
    squares = [[(kj, qi), (kj + 1, qi), (kj + 1, qi + 1), (kj, qi + 1)] for (qi, kj), _ in np.ndenumerate(status)]
    colours = [COLORS[code] for code in status.ravel()]
    ax.add_collection(PolyCollection(squares, facecolors=colours, edgecolors="white", linewidths=2), autolim=False)
    text = TextBatch()
    if visits:
        framed = [[(kj, qi), (kj + 1, qi), (kj + 1, qi + 1), (kj, qi + 1)] for qi, kj in visits]
        ax.add_collection(PolyCollection(framed, facecolors="none", edgecolors="#c00000", linewidths=2.5),
                          autolim=False)  # fmt: skip
        centres = to_inches(ax, [kj + 0.5 for _, kj in visits], [qi + 0.5 for qi, _ in visits])  # (n, 2)
        for order, (x, y) in enumerate(centres):
            text.add(x, y, str(order), font, color="#c00000", role="order")
    if is_causal:  # the boundary key = query + (Lk - Lq) + 1, in tile units
        queries = np.array([0, q_len])
        ax.add_line(Line2D((queries + k_len - q_len) / block_size, queries / block_size, color="black", lw=1.5))
    top = bottom + grid_h
    marks = [[(left + (kj + 0.5) * cell, top), (left + (kj + 0.5) * cell, top + TICK_IN)] for kj in range(k_tiles)]
    for kj in range(k_tiles):  # key tiles on top, as tick_top() put them
        text.add(left + (kj + 0.5) * cell, top + TICK_IN + PAD_IN, str(kj), font, va="bottom", role="xtick")
    frame_and_ticks(ax, text, [], [(qi + 0.5, str(qi)) for qi in range(q_tiles)], font)
    top_ticks = LineCollection(marks, colors="black", linewidths=0.8, transform=fig.dpi_scale_trans)
    top_ticks.set_clip_on(False)
    ax.add_collection(top_ticks, autolim=False)
    em = font / 72
    text.add(left + grid_w / 2, top + TICK_IN + PAD_IN + 1.3 * em + 4 / 72, localize("key tile"), font,
             va="bottom", role="xlabel")  # fmt: skip
    tick_w = max(text_width(str(qi), font) for qi in range(q_tiles))
    text.add(left - TICK_IN - PAD_IN - tick_w - 4 / 72, bottom + grid_h / 2, localize("query tile"), font,
             va="bottom", rotation=90, role="ylabel")  # fmt: skip
    title = (
        "forward / dQ kernel: one program per query tile"
        if kernel == "forward"
        else "dK/dV kernel: one program per key tile"
    )
    text.add(width / 2, 0.02 * height, localize(title), font, va="bottom", role="title")  # suptitle(y=0.02)
    text.draw(ax, transform=fig.dpi_scale_trans)
    return fig


class ScheduleExplorer(Explorer):
    """``widgets.Explorer`` drawing the kernels' tile schedule (no colour scale: no "fixed scale" box)."""

    DISPLAY = ("panel_size", "font_scale", "values")

    def render(self, params: dict) -> tuple[Figure, str]:
        return render_schedule(**params), explain_schedule(**params)


def schedule_explorer(**fixed) -> ScheduleExplorer:
    """12b: pick a kernel and a program; see which tiles it visits, in which order, and which need a mask."""
    import ipywidgets as w

    style = {"description_width": "initial"}
    start = {**SCHEDULE_DEFAULTS, **fixed}
    lengths = [16, 24, 32, 40, 48, 64, 80, 96, 128]
    controls = {
        # (label, value) pairs: the label in the notebook's language, the value what program_visits takes
        "kernel": w.Dropdown(
            description="kernel", options=[(localize(k), k) for k in KERNELS], value=start["kernel"], style=style
        ),
        "program": w.IntSlider(description="program", value=start["program"], min=0, max=15, style=style),
        "block_size": w.Dropdown(description="block", options=[8, 16, 32, 64], value=start["block_size"], style=style),
        "q_len": w.Dropdown(description="queries", options=lengths, value=start["q_len"], style=style),
        "k_len": w.Dropdown(description="keys", options=lengths, value=start["k_len"], style=style),
        "is_causal": w.Checkbox(description="causal", value=start["is_causal"], style=style),
    }
    extra = {key: value for key, value in fixed.items() if key not in controls}
    return ScheduleExplorer("kernel_schedule", controls, {"panel_size": 3.2, **extra})
