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
from matplotlib.figure import Figure

from attn_core.i18n import localize
from attn_core.linear.lightning import lightning_attention
from attn_core.viz.widgets import _STYLE, DEFAULTS, Explorer, merge_params

__all__ = ["BLOCK_DEFAULTS", "render_blocks", "explain_blocks", "block_explorer", "plot_slopes", "plot_precision"]

BLOCK_DEFAULTS = dict(
    length=24, block_size=8, slope=0.15, position=13, seed=0, **{k: DEFAULTS[k] for k in Explorer.DISPLAY}
)
DPI = 110
INTRA, INTER = "#ff7f0e", "#1f77b4"  # the two paths a key takes to a query
VALUES_UP_TO = 16  # tokens: past this the printed decays no longer fit in their cells


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
    p = _block_params(overrides)
    length, size, slope, row = p["length"], p["block_size"], float(p["slope"]), p["position"]
    decay = _decay(length, slope)  # (L, L)
    font = 9 * p["font_scale"]
    panel = p["panel_size"]
    figure = Figure(figsize=(panel * 2.6, panel * 1.35), dpi=DPI, layout="constrained")
    left, right = figure.subplots(1, 2, width_ratios=[1.4, 1])
    image = left.imshow(decay, cmap="viridis", vmin=0.0, vmax=1.0)
    figure.colorbar(image, ax=left, shrink=0.8).ax.tick_params(labelsize=font)
    for b in range(math.ceil(length / size)):  # each block's own square: the intra-block product
        start, end = b * size - 0.5, min((b + 1) * size, length) - 0.5
        left.add_patch(_rectangle(start, start, end - start, end - start, edgecolor="white", linewidth=1.6))
    first = row - row % size  # the query's block starts here
    left.add_patch(_rectangle(first - 0.5, row - 0.5, row - first + 1, 1, edgecolor=INTRA, linewidth=2.2))
    if first:
        left.add_patch(_rectangle(-0.5, row - 0.5, first, 1, edgecolor=INTER, linewidth=2.2))
    if p["values"] and length <= VALUES_UP_TO:
        for i, j in zip(*np.tril_indices(length), strict=True):
            left.text(j, i, f"{decay[i, j]:.2f}", ha="center", va="center", fontsize=font * 0.6, color="white")
    left.set_title(localize("decay exp(−s (i − j)); boxes: inside a block"), fontsize=font)
    left.set_xlabel(localize("key j"), fontsize=font)
    left.set_ylabel(localize("query i"), fontsize=font)
    left.tick_params(labelsize=font)
    keys = np.arange(row + 1)  # (i + 1,)
    right.bar(keys[:first], decay[row, :first], color=INTER, label=localize("earlier blocks, via the state"))
    right.bar(keys[first:], decay[row, first : row + 1], color=INTRA, label=localize("own block, masked q kᵀ"))
    right.set_xlim(-0.5, length - 0.5)
    right.set_ylim(0, 1.05)
    right.set_title(localize(f"weights of query {row}"), fontsize=font)
    right.set_xlabel(localize("key j"), fontsize=font)
    right.tick_params(labelsize=font)
    right.legend(fontsize=font * 0.8, loc="upper left")
    return figure


def _rectangle(x, y, width, height, **kwargs):
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), width, height, fill=False, **kwargs)


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
