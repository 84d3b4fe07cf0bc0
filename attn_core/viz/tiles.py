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

The walk itself is in ``tiles_schedule``, the figure in ``tiles_render``; this module adds the explanation line
and the explorer, and is where notebook 08 and the tests import all of it from.
"""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from attn_core.viz import tiles_schedule as _walk
from attn_core.viz.tiles_render import render_tiles
from attn_core.viz.tiles_schedule import (  # noqa: F401 (public here: notebook 08 and the tests read them from tiles)
    CURRENT,
    DONE,
    PENDING,
    SKIPPED,
    TILE_DEFAULTS,
    SoftmaxTrace,
    TileStep,
    demo_scores,
    online_softmax_trace,
    tile_codes,
    tile_schedule,
)
from attn_core.viz.widgets import Explorer, control_row

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

_STYLE = {"description_width": "initial"}


def explain_tiles(step: int | None = None, **overrides) -> str:
    """One line on what step ``step`` did, e.g. ``step 5/16: query block 1 × key block 0; row 13: …``."""
    p = _walk._params(step, overrides)
    q_len, k_len, block_q, block_k, is_causal = p["q_len"], p["k_len"], p["block_q"], p["block_k"], p["is_causal"]
    step, row = p["step"], p["row"]
    schedule = _walk._schedule(q_len, k_len, block_q, block_k, is_causal)
    skipped = sum(tile.status == "skipped" for tile in schedule)
    scores_row = demo_scores(q_len, k_len, is_causal=is_causal, seed=p["seed"], head_dim=p["head_dim"])[row]  # (Lk,)
    trace = online_softmax_trace(scores_row, block_k)
    row_block, visited = _walk._row_progress(p, schedule)
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
            f"{head}; row {row} is finished: max {_walk._fmt(trace.final_max)}, normaliser {trace.final_sum:.2f}, "
            f"so its weights are exp(s − {_walk._fmt(trace.final_max)}) / {trace.final_sum:.2f}."
        )
    j = visited - 1
    old_max = float(trace.running_max[j - 1]) if j else -math.inf
    old_sum = float(trace.running_sum[j - 1]) if j else 0.0
    new_max, new_sum = float(trace.running_max[j]), float(trace.running_sum[j])
    if new_max == -math.inf:
        return f"{head}; row {row}: every key of this block is masked for it, m stays −∞ and ℓ stays 0."
    if old_max == -math.inf:
        return f"{head}; row {row}: first visible keys, running max −∞ → {_walk._fmt(new_max)}, sum 0 → {new_sum:.2f}."
    rescale = float(trace.rescale[j])
    if new_max == old_max:
        change = f"running max stays {_walk._fmt(new_max)}, no rescale (factor 1)"
    else:
        change = (
            f"running max {_walk._fmt(old_max)} → {_walk._fmt(new_max)}, sum rescaled by "
            f"exp({_walk._fmt(old_max)}−{_walk._fmt(new_max)})={rescale:.2f}"
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
