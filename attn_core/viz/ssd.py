"""Figures and the decay explorer of notebook 12f (Mamba-2 as attention, state-space duality).

- ``demo_inputs(length, dt, A, seed)``: seeded toy SSD inputs of one head (constant step size dt, rate A).
- ``render_duality(**params)``: the 1-semiseparable decay mask L (fixed 0–1 scale), the attention-form matrix
  M = L ∘ C Bᵀ · dt (signed, relative scale) and the row of L that the chosen query position reads with.
- ``explain_duality``: the explanation line (keep per token, half-life, the measured max |M x − ssd(x)|).
- ``duality_explorer()``: sliders for dt, A and the query position.
- ``plot_recall_from_state``: recall error against stored pairs, a fixed SSD state against softmax attention.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.collections import LineCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from attn_core.i18n import localize
from attn_core.linear.ssd import ssd, ssd_as_attention, ssd_decay_mask
from attn_core.viz.lite_axes import PAD_IN, TICK_IN, frame_and_ticks, lite_panel, tick_label, to_inches
from attn_core.viz.plotting import _Heatmap
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import _STYLE, DEFAULTS, Explorer, merge_params

__all__ = ["DUALITY_DEFAULTS", "demo_inputs", "render_duality", "explain_duality", "duality_explorer",
           "plot_recall_from_state"]  # fmt: skip

DUALITY_DEFAULTS = dict(length=16, dt=0.5, A=-0.5, position=12, seed=0, **{k: DEFAULTS[k] for k in Explorer.DISPLAY})
DPI = 110
_STEPS = [1, 2, 2.5, 5, 10]  # matplotlib's AutoLocator steps: the ticks the axes had
_CELL_TICKS, _BAR_TICKS = MaxNLocator(nbins=9, integer=True, steps=_STEPS), MaxNLocator(nbins=8, steps=_STEPS)
STATE_SIZE, HEAD_DIM = 4, 2  # the toy head: N = 4 state channels, P = 2 value channels


def _params(overrides: dict) -> dict:
    params = merge_params(DUALITY_DEFAULTS, overrides, "duality explorer")
    length, position = params["length"], params["position"]
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"length must be an int >= 1, got {length!r}.")
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < length:
        raise ValueError(f"position must be an int in [0, {length - 1}], got {position!r}.")
    if not float(params["dt"]) > 0:
        raise ValueError(f"dt must be > 0 (the step size after softplus), got {params['dt']!r}.")
    if not float(params["A"]) < 0:
        raise ValueError(f"A must be < 0 (A = −exp(A_log)), got {params['A']!r}.")
    return params


def demo_inputs(length: int, dt: float, A: float, seed: int = 0):
    """Seeded toy inputs of one head: x (1, 1, L, P), dt (1, 1, L) constant, A (1,), B and C (1, 1, L, N)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 1, length, HEAD_DIM, generator=generator, dtype=torch.float64)  # (1, 1, L, P)
    B = torch.randn(1, 1, length, STATE_SIZE, generator=generator, dtype=torch.float64)  # (1, 1, L, N)
    C = torch.randn(1, 1, length, STATE_SIZE, generator=generator, dtype=torch.float64)  # (1, 1, L, N)
    steps = torch.full((1, 1, length), float(dt), dtype=torch.float64)  # (1, 1, L)
    return x, steps, torch.tensor([float(A)], dtype=torch.float64), B, C


def _colour_bar(figure, text, x: float, y: float, height: float, norm, cmap: str, font: float) -> float:
    """A colour bar 0.12 in wide at (x, y) inches with its ticks (AutoLocator's) on the right; returns its width."""
    key = lite_panel(figure, (x, y, 0.12, height), (0, 1), (norm.vmin, norm.vmax))
    ramp = _Heatmap(key, cmap=cmap, norm=norm, extent=(0, 1, norm.vmin, norm.vmax), origin="upper",
                    interpolation="nearest")  # fmt: skip
    ramp.set_data(np.linspace(norm.vmax, norm.vmin, 256)[:, None])  # (256, 1): top row first
    key.add_image(ramp)
    levels = [v for v in _BAR_TICKS.tick_values(norm.vmin, norm.vmax) if norm.vmin - 1e-9 <= v <= norm.vmax + 1e-9]
    step = levels[1] - levels[0] if len(levels) > 1 else 1.0
    ys = to_inches(key, 1, levels)[:, 1]
    marks = LineCollection([[(x + 0.12, v), (x + 0.12 + TICK_IN, v)] for v in ys], colors="black", linewidths=0.8,
                           transform=figure.dpi_scale_trans)  # fmt: skip
    marks.set_clip_on(False)
    key.add_collection(marks, autolim=False)
    labels = [tick_label(v, step) for v in levels]
    for v, label in zip(ys, labels, strict=True):
        text.add(x + 0.12 + TICK_IN + PAD_IN, v, label, font, ha="left", role="colorbar")
    frame_and_ticks(key, text, [], [], font)
    return 0.12 + TICK_IN + PAD_IN + max(text_width(label, font) for label in labels)


def render_duality(**overrides) -> Figure:
    """The decay mask L (0–1), the attention-like matrix M (signed, relative scale) and one row of L as bars.

    Drawn without constrained layout, matplotlib's ticks or Text (``viz.lite_axes``, glyph-path text): they were
    ~450 ms of a move (issue #33's explorer speed). Same titles, labels, colour scales and integer ticks."""
    p = _params(overrides)
    length, position = p["length"], p["position"]
    x, dt, A, B, C = demo_inputs(length, p["dt"], p["A"], p["seed"])
    decay = ssd_decay_mask(dt, A)[0, 0].numpy()  # (L, L)
    matrix = ssd_as_attention(dt, A, B, C)[0, 0].numpy()  # (L, L)
    font, panel, em = 9 * p["font_scale"], p["panel_size"], 9 * p["font_scale"] / 72
    titles = [localize("decay mask L (0–1)"), localize("M = L ∘ C Bᵀ · dt (relative scale)"),
              localize(f"row {position} of L: what query {position} keeps")]  # fmt: skip
    tick_w = text_width(str(length - 1), font)
    top, bottom = 0.1 + 1.9 * em, 0.12 + TICK_IN + PAD_IN + 2.6 * em  # titles above; ticks and axis names below
    left = 0.08 + 1.4 * em + TICK_IN + PAD_IN + tick_w
    side = max(0.6, panel * 1.25 - top - bottom, *(text_width(t, font) for t in titles[:2]))  # square heatmaps
    width_so_far = left
    figure = Figure(figsize=(1, 1), dpi=DPI)  # sized below, once the colour bars' labels are measured
    text = TextBatch()
    largest = float(np.abs(matrix).max()) or 1.0
    norms = (Normalize(0.0, 1.0) if p["fixed_scale"] else Normalize(float(decay.min()), float(decay.max())),
             Normalize(-largest, largest))  # signed: no softmax, no 0–1 scale  # fmt: skip
    ticks = [(v, f"{v:.0f}") for v in _CELL_TICKS.tick_values(0, length - 1) if 0 <= v <= length - 1]
    xlabel_y = bottom - TICK_IN - PAD_IN - 1.3 * em
    panels = []
    for index, (cells, norm, cmap) in enumerate(zip((decay, matrix), norms, ("viridis", "RdBu_r"), strict=True)):
        x0 = width_so_far
        ax = lite_panel(figure, (x0, bottom, side, side), (-0.5, length - 0.5), (length - 0.5, -0.5))
        image = _Heatmap(ax, cmap=cmap, norm=norm, extent=(-0.5, length - 0.5, length - 0.5, -0.5),
                         origin="upper", interpolation="nearest")  # fmt: skip
        image.set_data(cells)
        ax.add_image(image)
        ax.add_line(Line2D((-0.5, length - 0.5), (position, position), color="orange", lw=1.2))  # the bars' row
        frame_and_ticks(ax, text, ticks, ticks, font)
        text.add(x0 + side / 2, bottom + side + 6 / 72, titles[index], font, va="bottom", role="title")
        text.add(x0 + side / 2, xlabel_y, localize("key j (written)"), font, va="top", role="xlabel")
        bar_w = _colour_bar(figure, text, x0 + side + 0.12, bottom + 0.1 * side, 0.8 * side, norm, cmap, font)
        panels.append(ax)
        width_so_far = x0 + side + 0.12 + bar_w + 0.3 + tick_w + TICK_IN + PAD_IN
    text.add(left - TICK_IN - PAD_IN - tick_w - 0.06, bottom + side / 2, localize("query i (reads)"), font,
             va="bottom", rotation=90, role="ylabel")  # fmt: skip
    if p["values"] and length <= 12:
        cells = to_inches(panels[0], *np.tril_indices(length)[::-1])  # (n, 2): the cell centres, key j across
        for (cx, cy), value in zip(cells, decay[np.tril_indices(length)], strict=True):
            text.add(cx, cy, f"{value:.2f}", font * 0.6, color="white", role="value")
    bars_left = width_so_far
    bars_w = max(0.8, panel * 3.7 - bars_left - 0.15, text_width(titles[2], font))
    width, height = bars_left + bars_w + 0.15, top + side + bottom
    figure.set_size_inches(width, height)
    for ax in figure.axes:  # the panels were placed in inches of a 1×1 figure: re-express them in this size
        x0, y0, w, h = ax.get_position().bounds
        ax.set_position((x0 / width, y0 / height, w / width, h / height))
    bars = lite_panel(figure, (bars_left, bottom, bars_w, side), (-0.6, length - 0.4), (0, 1.05))
    keys = np.arange(position + 1)
    bars.bar(keys, decay[position, : position + 1], color="#1f77b4")
    yticks = [(v, tick_label(v, 0.2)) for v in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)]
    frame_and_ticks(bars, text, ticks, yticks, font)
    text.add(bars_left + bars_w / 2, bottom + side + 6 / 72, titles[2], font, va="bottom", role="title")
    text.add(bars_left + bars_w / 2, xlabel_y, localize("key j (written)"), font, va="top", role="xlabel")
    text.draw(bars, transform=figure.dpi_scale_trans)
    return figure


def explain_duality(**overrides) -> str:
    p = _params(overrides)
    length, position = p["length"], p["position"]
    x, dt, A, B, C = demo_inputs(length, p["dt"], p["A"], p["seed"])
    keep = math.exp(p["dt"] * p["A"])
    half_life = math.log(2) / (p["dt"] * -p["A"])
    as_attention = ssd_as_attention(dt, A, B, C) @ x  # (1, 1, L, P)
    recurrent, _ = ssd(x, dt, A, B, C)  # (1, 1, L, P)
    difference = float((as_attention - recurrent).abs().max())
    oldest = keep**position
    return (
        f"Each token keeps exp(dt·A) = {keep:.3f} of the state: weights halve every {half_life:.1f} tokens. "
        f"Query {position} reads token 0 with decay {oldest:.2e}. "
        f"max |M x − recurrence| = {difference:.1e}."
    )


class DualityExplorer(Explorer):
    def render(self, params: dict):
        return render_duality(**params), explain_duality(**params)


def duality_explorer(**fixed) -> DualityExplorer:
    """12f: drag **dt**, **A** and the **query position**: the decay mask and the attention-form weights."""
    import ipywidgets as w

    start = {**DUALITY_DEFAULTS, **fixed}
    controls = {
        "dt": w.FloatSlider(description="step dt", value=start["dt"], min=0.05, max=2.0, step=0.05, style=_STYLE),
        "A": w.FloatSlider(description="rate A", value=start["A"], min=-2.0, max=-0.05, step=0.05, style=_STYLE),
        "position": w.IntSlider(
            description="query position", value=start["position"], min=0, max=start["length"] - 1, style=_STYLE
        ),
    }
    rest = {k: v for k, v in fixed.items() if k not in controls}
    return DualityExplorer("duality", controls, {"panel_size": 2.6, "length": start["length"], **rest})


def plot_recall_from_state(pairs, errors: dict[str, list[float]], state_size: int) -> Figure:
    """Relative retrieval error against the number of stored key-value pairs, one line per mixer."""
    figure = Figure(figsize=(5.6, 3.2), dpi=DPI, layout="constrained")
    ax = figure.subplots()
    ax.set_title(localize("Recall: a fixed SSD state vs attention"), fontsize=10)
    ax.set_xlabel(localize("stored pairs"), fontsize=9)
    ax.set_ylabel(localize("relative retrieval error"), fontsize=9)
    ax.tick_params(labelsize=9)
    ax.grid(alpha=0.3)
    for name, values in errors.items():
        ax.plot(pairs, values, marker="o", label=localize(name))
    ax.axvline(state_size, color="grey", linestyle="--", linewidth=1)
    ax.text(state_size, ax.get_ylim()[1] * 0.95, " N", fontsize=9, va="top")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))
    return figure
