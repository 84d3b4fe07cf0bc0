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
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from attn_core.i18n import localize
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
    """The tile grid (rows: query tiles, columns: key tiles), the chosen program's tiles framed and numbered."""
    status = tile_status(q_len, k_len, block_size, is_causal)  # (Tq, Tk)
    visits = program_visits(kernel, program, q_len, k_len, block_size, is_causal)
    q_tiles, k_tiles = status.shape
    cell = panel_size / max(q_tiles, k_tiles, 3)  # inches per tile
    width, height = k_tiles * cell + 1.2, q_tiles * cell + 1.3  # inches: tick labels left and on top, title below
    fig = Figure(figsize=(width, height), dpi=110)
    ax = fig.add_axes((0.9 / width, 0.45 / height, k_tiles * cell / width, q_tiles * cell / height))
    font = max(9.0, 10 * font_scale)
    for (qi, kj), code in np.ndenumerate(status):
        ax.add_patch(Rectangle((kj, qi), 1, 1, facecolor=COLORS[code], edgecolor="white", linewidth=2))
    for order, (qi, kj) in enumerate(visits):
        ax.add_patch(Rectangle((kj, qi), 1, 1, fill=False, edgecolor="#c00000", linewidth=2.5))
        ax.text(kj + 0.5, qi + 0.5, str(order), ha="center", va="center", fontsize=font, color="#c00000")
    if is_causal:  # the boundary key = query + (Lk - Lq) + 1, in tile units
        queries = np.array([0, q_len])
        ax.plot((queries + k_len - q_len) / block_size, queries / block_size, color="black", linewidth=1.5)
    ax.set(xlim=(0, k_tiles), ylim=(q_tiles, 0), xticks=np.arange(k_tiles) + 0.5, yticks=np.arange(q_tiles) + 0.5)
    ax.set_xticklabels(range(k_tiles), fontsize=font)
    ax.set_yticklabels(range(q_tiles), fontsize=font)
    ax.set_xlabel(localize("key tile"), fontsize=font)
    ax.set_ylabel(localize("query tile"), fontsize=font)
    ax.xaxis.set_label_position("top")
    ax.xaxis.tick_top()
    title = (
        "forward / dQ kernel: one program per query tile"
        if kernel == "forward"
        else "dK/dV kernel: one program per key tile"
    )
    fig.suptitle(localize(title), fontsize=font, y=0.02, va="bottom")
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
