"""Figures and the block explorer of notebook 12g (MiniMax's lightning attention).

- ``render_blocks(length, block_size, slope, position)``: the decay mask exp(−s (i − j)) (j ≤ i, fixed 0–1 scale)
  with the block grid, and beside it the weights one query row gives its keys, coloured by the path each key takes:
  inside the query's block (the masked, decayed q kᵀ) or from earlier blocks (through the carried state).
- ``explain_blocks``: the explanation line, with the measured max |blocks − recurrence| on toy inputs.
- ``block_explorer()``: sliders for the block size, the slope and the query position.
- ``plot_slopes``, ``plot_precision``: the notebook's measurements.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.collections import LineCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from attn_core.i18n import localize
from attn_core.linear.lightning import lightning_attention
from attn_core.viz.lite_axes import PAD_IN, TICK_IN, frame_and_ticks, lite_panel, to_inches
from attn_core.viz.plotting import _Heatmap
from attn_core.viz.rope_scaling import _legend
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import _STYLE, DEFAULTS, Explorer, merge_params

__all__ = ["BLOCK_DEFAULTS", "render_blocks", "explain_blocks", "block_explorer", "plot_slopes", "plot_precision"]

BLOCK_DEFAULTS = dict(
    length=24, block_size=8, slope=0.15, position=13, seed=0, **{k: DEFAULTS[k] for k in Explorer.DISPLAY}
)
DPI = 110
INTRA, INTER = "#ff7f0e", "#1f77b4"  # the two paths a key takes to a query
VALUES_UP_TO = 16  # tokens: past this the printed decays no longer fit in their cells
_CELL_TICKS = MaxNLocator(nbins=6, integer=True, steps=[1, 2, 2.5, 5, 10])  # the ticks imshow's axes had


def _block_params(overrides: dict) -> dict:
    params = merge_params(BLOCK_DEFAULTS, overrides, "block explorer")
    for name, low in (("length", 1), ("block_size", 1), ("position", 0)):
        value = params[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}.")
    if not 0 <= float(params["slope"]) <= 10:
        raise ValueError(f"slope must be in [0, 10] (the decay per token), got {params['slope']!r}.")
    params["position"] = min(params["position"], params["length"] - 1)  # the slider may outrun a shorter sequence
    return params


def _decay(length: int, slope: float) -> np.ndarray:
    gap = np.arange(length)[:, None] - np.arange(length)[None, :]  # (L, L): i − j
    return np.where(gap >= 0, np.exp(-slope * np.clip(gap, 0, None)), 0.0)  # (L, L)


def _difference(length: int, block_size: int, slope: float, seed: int) -> float:
    """max |blocks − token-by-token recurrence| of lightning attention on seeded toy inputs (float64)."""
    generator = torch.Generator().manual_seed(seed + 1)
    q, k, v = (torch.randn(1, 1, length, 4, generator=generator, dtype=torch.float64) for _ in range(3))
    slopes = torch.tensor([slope], dtype=torch.float64)  # (H,)
    blocked, _ = lightning_attention(q, k, v, slopes, block_size=block_size)  # (1, 1, L, Dv)
    recurrent, _ = lightning_attention(q, k, v, slopes, block_size=1)  # (1, 1, L, Dv): one token per step
    return float((blocked - recurrent).abs().max())


def render_blocks(**overrides) -> Figure:
    """The decay mask with its block grid and the query's row (left, 0–1 colour bar), the row's weights (right).

    Drawn without constrained layout, matplotlib's ticks or Text (``viz.lite_axes``, glyph-path text): they were
    ~300 ms of a move (issue #33's explorer speed); the layout is the same in inches at every setting (12d's)."""
    p = _block_params(overrides)
    length, size, slope, row = p["length"], p["block_size"], float(p["slope"]), p["position"]
    decay = _decay(length, slope)  # (L, L)
    font, panel, em = 9 * p["font_scale"], p["panel_size"], 9 * p["font_scale"] / 72
    titles = [localize("decay exp(−s (i − j)); boxes: inside a block"), localize(f"weights of query {row}")]
    tick_w = text_width(str(length - 1), font)  # the widest tick label, inches
    top, bottom = 0.1 + 1.9 * em, 0.12 + TICK_IN + PAD_IN + 2.6 * em  # title above; ticks and axis name below
    left = 0.08 + 1.4 * em + TICK_IN + PAD_IN + tick_w  # the y axis name, then its ticks
    side = max(0.6, panel * 1.35 - top - bottom, text_width(titles[0], font))  # the square heatmap
    bar_x = left + side + 0.12  # the colour bar, its ticks, then the weights panel with its own ticks
    bars_left = bar_x + 0.12 + TICK_IN + PAD_IN + text_width("0.0", font) + 0.3 + text_width("0.00", font)
    bars_w = max(0.8, panel * 2.6 - bars_left - 0.15, text_width(titles[1], font))
    width, height = bars_left + bars_w + 0.15, top + side + bottom
    figure = Figure(figsize=(width, height), dpi=DPI)
    text = TextBatch()
    heat = lite_panel(figure, (left, bottom, side, side), (-0.5, length - 0.5), (length - 0.5, -0.5))
    norm = Normalize(0.0, 1.0)
    image = _Heatmap(heat, cmap="viridis", norm=norm, extent=(-0.5, length - 0.5, length - 0.5, -0.5),
                     origin="upper", interpolation="nearest")  # fmt: skip
    image.set_data(decay)
    heat.add_image(image)
    boxes = []
    for b in range(math.ceil(length / size)):  # each block's own square: the intra-block product
        start, end = b * size - 0.5, min((b + 1) * size, length) - 0.5
        boxes.append([(start, start), (end, start), (end, end), (start, end), (start, start)])
    heat.add_collection(LineCollection(boxes, colors="white", linewidths=1.6), autolim=False)
    first = row - row % size  # the query's block starts here
    rows = {INTRA: (first - 0.5, row + 0.5)} | ({INTER: (-0.5, first - 0.5)} if first else {})
    for colour, (x0, x1) in rows.items():  # the query's row, split by the path its keys take
        outline = [[(x0, row - 0.5), (x1, row - 0.5), (x1, row + 0.5), (x0, row + 0.5), (x0, row - 0.5)]]
        heat.add_collection(LineCollection(outline, colors=colour, linewidths=2.2), autolim=False)
    if p["values"] and length <= VALUES_UP_TO:
        cells = to_inches(heat, *np.tril_indices(length)[::-1])  # (n, 2): the cell centres, key j across
        for (x, y), value in zip(cells, decay[np.tril_indices(length)], strict=True):
            text.add(x, y, f"{value:.2f}", font * 0.6, color="white", role="value")
    ticks = [(v, f"{v:.0f}") for v in _CELL_TICKS.tick_values(0, length - 1) if 0 <= v <= length - 1]
    frame_and_ticks(heat, text, ticks, ticks, font)
    text.add(left + side / 2, bottom + side + 6 / 72, titles[0], font, va="bottom", role="title")
    xlabel_y = bottom - TICK_IN - PAD_IN - 1.3 * em
    text.add(left + side / 2, xlabel_y, localize("key j"), font, va="top", role="xlabel")
    text.add(left - TICK_IN - PAD_IN - tick_w - 0.06, bottom + side / 2, localize("query i"), font, va="bottom",
             rotation=90, role="ylabel")  # fmt: skip
    # the row's weights: blue through the state, orange inside its block (bars: 2 containers, figure.axes[1])
    bars = lite_panel(figure, (bars_left, bottom, bars_w, side), (-0.5, length - 0.5), (0, 1.05))
    keys = np.arange(row + 1)  # (i + 1,)
    bars.bar(keys[:first], decay[row, :first], color=INTER)
    bars.bar(keys[first:], decay[row, first : row + 1], color=INTRA)
    yticks = [(v, f"{v:.1f}") for v in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)]
    frame_and_ticks(bars, text, ticks, yticks, font)
    text.add(bars_left + bars_w / 2, bottom + side + 6 / 72, titles[1], font, va="bottom", role="title")
    text.add(bars_left + bars_w / 2, xlabel_y, localize("key j"), font, va="top", role="xlabel")
    # the colour bar: a 0–1 ramp as tall as 0.8 of the heatmap (colorbar(shrink=0.8)), ticks every 0.2
    key = lite_panel(figure, (bar_x, bottom + 0.1 * side, 0.12, 0.8 * side), (0, 1), (0.0, 1.0))
    ramp = _Heatmap(key, cmap="viridis", norm=norm, extent=(0, 1, 0.0, 1.0), origin="upper", interpolation="nearest")
    ramp.set_data(np.linspace(1.0, 0.0, 256)[:, None])  # (256, 1): top row first
    key.add_image(ramp)
    levels = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    ys = to_inches(key, 1, levels)[:, 1]
    marks = LineCollection([[(bar_x + 0.12, y), (bar_x + 0.12 + TICK_IN, y)] for y in ys], colors="black",
                           linewidths=0.8, transform=figure.dpi_scale_trans)  # fmt: skip
    marks.set_clip_on(False)
    key.add_collection(marks, autolim=False)
    for y, value in zip(ys, levels, strict=True):
        text.add(bar_x + 0.12 + TICK_IN + PAD_IN, y, f"{value:.1f}", font, ha="left", role="colorbar")
    frame_and_ticks(key, text, [], [], font)
    entries = [("patch", INTER, localize("earlier blocks, via the state")),
               ("patch", INTRA, localize("own block, masked q kᵀ"))]  # fmt: skip
    small = font * 0.8
    box_h = 1.4 * small / 72 * len(entries) + 0.5 * small / 72
    _legend(bars, text, entries, bars_left + 0.5 * small / 72, bottom + side - 0.5 * small / 72 - box_h, small,
            "legend", centred=False)  # fmt: skip
    text.draw(bars, transform=figure.dpi_scale_trans)
    return figure


def explain_blocks(**overrides) -> str:
    p = _block_params(overrides)
    length, size, slope, row = p["length"], p["block_size"], float(p["slope"]), p["position"]
    block, offset = divmod(row, size)
    difference = _difference(length, size, slope, p["seed"])
    return (
        f"query {row} is token {offset} of block {block}: {offset + 1} keys reach it inside its block (the masked, "
        f"decayed q kᵀ), {row - offset} keys of {block} earlier blocks only through the state, read with "
        f"exp(−s·{offset + 1}) = {math.exp(-slope * (offset + 1)):.3f}; the oldest key weighs "
        f"exp(−s·{row}) = {math.exp(-slope * row):.2g}. max |blocks − recurrence| = {difference:.1e}."
    )


class BlockExplorer(Explorer):
    def render(self, params: dict):
        return render_blocks(**params), explain_blocks(**params)


def block_explorer(**fixed) -> BlockExplorer:
    """12g: drag the **block size**, the **slope** and the **query position**: which keys reach a query inside its
    block and which only through the state, and how much of each is left after the decay."""
    import ipywidgets as w

    start = {**BLOCK_DEFAULTS, **fixed}
    controls = {
        "block_size": w.IntSlider(description="block size", value=start["block_size"], min=1, max=24, style=_STYLE),
        "slope": w.FloatSlider(description="slope s", value=start["slope"], min=0.0, max=1.0, step=0.01, style=_STYLE),
        "position": w.IntSlider(
            description="query position", value=start["position"], min=0, max=start["length"] - 1, style=_STYLE
        ),
    }
    rest = {k: v for k, v in fixed.items() if k not in controls}
    explorer = BlockExplorer("blocks", controls, {"panel_size": 2.8, "seed": start["seed"], **rest})
    # Grey out the display controls that cannot change this figure, and say why (as 12d's chunk explorer does).
    fixed_scale, values = explorer.controls["fixed_scale"], explorer.controls["values"]
    fixed_scale.disabled = True  # the decay is 1 on the diagonal and 0 above it: it already spans 0–1
    fixed_scale.tooltip = localize("no effect here: the decay is 1 on the diagonal and 0 above it, already 0–1")
    if start["length"] > VALUES_UP_TO:  # no length slider here: the printed values never fit
        values.disabled = True
        values.tooltip = localize(f"values are printed for up to {VALUES_UP_TO} tokens")
    return explorer


def _axes(title: str, xlabel: str, ylabel: str, size=(5.6, 3.2)):
    figure = Figure(figsize=size, dpi=DPI, layout="constrained")
    ax = figure.subplots()
    ax.set_title(localize(title), fontsize=10)
    ax.set_xlabel(localize(xlabel), fontsize=9)
    ax.set_ylabel(localize(ylabel), fontsize=9)
    ax.tick_params(labelsize=9)
    ax.grid(alpha=0.3)
    return figure, ax


def plot_slopes(slopes_by_layer: dict[int, torch.Tensor], num_layers: int) -> Figure:
    """Half-life ln 2 / s (tokens) of every head, one line per layer: the per-head geometric slopes, and how the
    layer factor stretches them in deeper layers."""
    figure, ax = _axes(f"Decay per head, {num_layers} layers", "head h", "half-life ln2 / s (tokens)")
    for layer, slopes in slopes_by_layer.items():
        heads = np.arange(len(slopes))
        ax.semilogy(heads, math.log(2) / slopes.numpy(), marker="o", markersize=3, label=localize(f"layer {layer}"))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return figure


def plot_precision(positions, errors: dict[str, np.ndarray]) -> Figure:
    """Relative output error against the token position, one line per storage format."""
    figure, ax = _axes(
        "Stored in lower precision: error vs float64", "token position t", "relative error of o_t", (7.6, 3.4)
    )
    for name, values in errors.items():
        ax.loglog(positions, values, label=localize(name))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return figure
