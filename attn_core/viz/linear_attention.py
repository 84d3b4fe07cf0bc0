"""Figures and the chunk-size explorer of notebook 12d (linear attention → Gated DeltaNet).

- ``render_chunks(length, chunk_size, gate)``: the decay matrix exp(G_i − G_j) (fixed 0–1 scale) with the chunk grid
  drawn on it: blocks on the diagonal are computed inside a chunk (matmuls and one triangular solve), everything below
  them reaches a token only through the carried state. Beside it, the sequential steps each form needs.
- ``explain_chunks``: the explanation line, with the measured max |chunked − recurrent| on toy inputs.
- ``chunk_explorer()``: sliders for the sequence length, the chunk size and the gate strength.
- ``plot_capacity``, ``plot_state_vs_kv``, ``plot_recall``: the notebook's measurements.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.collections import LineCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from attn_core.i18n import localize
from attn_core.linear.linear_attention import gated_delta_rule
from attn_core.viz.lite_axes import PAD_IN, TICK_IN, frame_and_ticks, lite_panel, tick_label, to_inches
from attn_core.viz.plotting import _Heatmap
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import _STYLE, DEFAULTS, Explorer, merge_params

__all__ = [
    "CHUNK_DEFAULTS",
    "demo_decay",
    "render_chunks",
    "explain_chunks",
    "chunk_explorer",
    "plot_capacity",
    "plot_state_vs_kv",
    "plot_recall",
]

CHUNK_DEFAULTS = dict(length=24, chunk_size=8, gate=0.1, seed=0, **{k: DEFAULTS[k] for k in Explorer.DISPLAY})
DPI = 110
VALUES_UP_TO = 16  # tokens: past this the printed decays no longer fit in their cells
# the ticks matplotlib's AutoLocator gave these axes: its steps, about as many ticks as the axes had
_STEPS = [1, 2, 2.5, 5, 10]
_CELL_TICKS, _COUNT_TICKS = MaxNLocator(nbins=6, integer=True, steps=_STEPS), MaxNLocator(8, integer=True, steps=_STEPS)
_LINEAR_TICKS = MaxNLocator(nbins=6, steps=_STEPS)  # the colour bar: 0, 0.2 ... 1.0


def _chunk_params(overrides: dict) -> dict:
    params = merge_params(CHUNK_DEFAULTS, overrides, "chunk explorer")
    for name, low in (("length", 1), ("chunk_size", 1)):
        value = params[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}.")
    if not 0 <= float(params["gate"]) <= 50:
        raise ValueError(f"gate must be in [0, 50] (the mean decay -g per token), got {params['gate']!r}.")
    return params


def demo_decay(length: int, gate: float, seed: int = 0) -> torch.Tensor:
    """Seeded toy log decays g (1, 1, L) with mean −gate per token."""
    generator = torch.Generator().manual_seed(seed)
    return -gate * 2 * torch.rand(1, 1, length, generator=generator, dtype=torch.float64)  # (1, 1, L)


def _difference(length: int, chunk_size: int, g: torch.Tensor, seed: int) -> float:
    """max |chunked − recurrent| of the gated delta rule on seeded toy inputs (float64)."""
    generator = torch.Generator().manual_seed(seed + 1)
    q = torch.randn(1, 1, length, 8, generator=generator, dtype=torch.float64)  # (1, 1, L, Dk)
    k = torch.nn.functional.normalize(torch.randn(1, 1, length, 8, generator=generator, dtype=torch.float64), dim=-1)
    v = torch.randn(1, 1, length, 4, generator=generator, dtype=torch.float64)  # (1, 1, L, Dv)
    beta = torch.rand(1, 1, length, generator=generator, dtype=torch.float64)  # (1, 1, L)
    recurrent, _ = gated_delta_rule(q, k, v, g, beta)  # (1, 1, L, Dv)
    chunked, _ = gated_delta_rule(q, k, v, g, beta, chunk_size=chunk_size)  # (1, 1, L, Dv)
    return float((recurrent - chunked).abs().max())


def render_chunks(**overrides) -> Figure:
    """The decay matrix with its chunk grid (left, with a 0–1 colour bar) and the sequential steps (right).

    Drawn without matplotlib's tick machinery and layout engine (``viz.lite_axes``, text as glyph paths): constrained
    layout measured every tick label twice a draw, ~250 ms of a move (issue #33's explorer speed). The layout is
    the same in inches at every setting: title, ticks and axis names around a square heatmap.
    """
    p = _chunk_params(overrides)
    length, size = p["length"], p["chunk_size"]
    g = demo_decay(length, p["gate"], p["seed"])  # (1, 1, L)
    cum = g[0, 0].cumsum(-1)  # (L,)
    future = torch.ones(length, length, dtype=torch.bool).triu(1)  # (L, L)
    decay = (cum[:, None] - cum[None, :]).masked_fill(future, float("-inf")).exp().numpy()  # (L, L)
    font, panel, em = 9 * p["font_scale"], p["panel_size"], 9 * p["font_scale"] / 72
    tick_w = text_width(str(length - 1), font)  # the widest heatmap tick label, inches
    top, bottom = 0.1 + 1.9 * em, 0.12 + TICK_IN + PAD_IN + 2.6 * em  # title above; ticks and axis name below
    left = 0.08 + 1.4 * em + TICK_IN + PAD_IN + tick_w  # the y axis name, then its ticks
    titles = [localize("decay exp(G_i − G_j); boxes: inside a chunk"), localize("sequential steps")]
    names = [localize("recurrent"), localize("chunked")]
    # the square heatmap, at least as wide as its title (a small panel with a large font grows the figure instead
    # of overprinting), and the bars panel as wide as its title and its two category names
    side = max(0.6, panel * 1.35 - top - bottom, text_width(titles[0], font))
    bar_x = left + side + 0.12  # the colour bar, its ticks, then the bars panel with its own ticks
    bars_left = bar_x + 0.12 + TICK_IN + PAD_IN + text_width("0.0", font) + 0.3 + text_width(str(length), font)
    bars_w = max(
        0.8, panel * 2.4 - bars_left - 0.15, text_width(titles[1], font), 2.6 * max(map(text_width, names, [font] * 2))
    )
    width, height = bars_left + bars_w + 0.15, top + side + bottom
    figure = Figure(figsize=(width, height), dpi=DPI)
    text = TextBatch()
    heat = lite_panel(figure, (left, bottom, side, side), (-0.5, length - 0.5), (length - 0.5, -0.5))
    norm = Normalize(0.0, 1.0) if p["fixed_scale"] else Normalize(float(decay.min()), float(decay.max()))
    image = _Heatmap(heat, cmap="viridis", norm=norm, extent=(-0.5, length - 0.5, length - 0.5, -0.5),
                     origin="upper", interpolation="nearest")  # fmt: skip
    image.set_data(decay)
    heat.add_image(image)
    chunks = math.ceil(length / size)
    boxes, grid = [], []
    for c in range(chunks):  # each chunk's own block: computed inside the chunk
        start, end = c * size - 0.5, min((c + 1) * size, length) - 0.5
        boxes.append([(start, start), (end, start), (end, end), (start, end), (start, start)])
        if c:  # the chunk grid over the whole matrix
            grid += [[(-0.5, start), (length - 0.5, start)], [(start, -0.5), (start, length - 0.5)]]
    heat.add_collection(LineCollection(grid, colors="white", linewidths=0.5, alpha=0.6), autolim=False)
    heat.add_collection(LineCollection(boxes, colors="white", linewidths=1.6), autolim=False)
    if p["values"] and length <= VALUES_UP_TO:
        cells = to_inches(heat, *np.tril_indices(length)[::-1])  # (n, 2): the cell centres, key j across
        for (x, y), value in zip(cells, decay[np.tril_indices(length)], strict=True):
            text.add(x, y, f"{value:.2f}", font * 0.7, color="white", role="value")
    ticks = [(v, f"{v:.0f}") for v in _CELL_TICKS.tick_values(0, length - 1) if 0 <= v <= length - 1]
    frame_and_ticks(heat, text, ticks, ticks, font)
    centre = left + side / 2
    text.add(centre, bottom + side + 6 / 72, titles[0], font,
             va="bottom", role="title")  # fmt: skip
    text.add(centre, bottom - TICK_IN - PAD_IN - 1.3 * em, localize("key j (written)"), font, va="top", role="xlabel")
    text.add(left - TICK_IN - PAD_IN - tick_w - 0.06, bottom + side / 2, localize("query i (reads)"), font,
             va="bottom", rotation=90, role="ylabel")  # fmt: skip
    # the colour bar: a 0–1 ramp as tall as 0.8 of the heatmap (colorbar(shrink=0.8)), ticks every 0.2
    bar_h, bar_y = 0.8 * side, bottom + 0.1 * side
    key = lite_panel(figure, (bar_x, bar_y, 0.12, bar_h), (0, 1), (norm.vmin, norm.vmax))
    ramp = _Heatmap(key, cmap="viridis", norm=norm, extent=(0, 1, norm.vmin, norm.vmax), origin="upper",
                    interpolation="nearest")  # fmt: skip
    ramp.set_data(np.linspace(norm.vmax, norm.vmin, 256)[:, None])  # (256, 1): top row first
    key.add_image(ramp)
    levels = [v for v in _LINEAR_TICKS.tick_values(norm.vmin, norm.vmax) if norm.vmin - 1e-9 <= v <= norm.vmax + 1e-9]
    step = levels[1] - levels[0] if len(levels) > 1 else 1.0
    ys = to_inches(key, 1, levels)[:, 1]
    marks = [[(bar_x + 0.12, y), (bar_x + 0.12 + TICK_IN, y)] for y in ys]
    key.add_collection(LineCollection(marks, colors="black", linewidths=0.8, transform=figure.dpi_scale_trans),
                       autolim=False)  # fmt: skip
    for y, value in zip(ys, levels, strict=True):
        text.add(bar_x + 0.12 + TICK_IN + PAD_IN, y, tick_label(value, step), font, ha="left", role="colorbar")
    frame_and_ticks(key, text, [], [], font)
    # the bars: sequential steps of each form, with their counts on top
    bars = lite_panel(figure, (bars_left, bottom, bars_w, side), (-0.5, 1.5), (0, length * 1.18))
    counts = [length, chunks]
    for x, (count, colour) in enumerate(zip(counts, ["#bbbbbb", "#1f77b4"], strict=True)):
        bars.add_patch(Rectangle((x - 0.4, 0), 0.8, count, color=colour))
        ((bx, by),) = to_inches(bars, x, count)
        text.add(bx, by + 1 / 72, str(count), font, va="bottom", role="value")
    levels = [v for v in _COUNT_TICKS.tick_values(0, length * 1.18) if 0 <= v <= length * 1.18]
    step = levels[1] - levels[0] if len(levels) > 1 else 1.0
    frame_and_ticks(bars, text, list(enumerate(names)), [(v, tick_label(v, step)) for v in levels], font)
    text.add(bars_left + bars_w / 2, bottom + side + 6 / 72, titles[1], font, va="bottom",
             role="title")  # fmt: skip
    text.draw(bars, transform=figure.dpi_scale_trans)
    return figure


def explain_chunks(**overrides) -> str:
    p = _chunk_params(overrides)
    length, size = p["length"], p["chunk_size"]
    chunks = math.ceil(length / size)
    difference = _difference(length, size, demo_decay(length, p["gate"], p["seed"]), p["seed"])
    return (
        f"L = {length}, chunk size {size}: {chunks} chunks, so {chunks} sequential state updates instead of "
        f"{length}; each chunk solves one {min(size, length)}×{min(size, length)} triangular system. "
        f"max |chunked − recurrent| = {difference:.1e}."
    )


class ChunkExplorer(Explorer):
    def render(self, params: dict):
        return render_chunks(**params), explain_chunks(**params)


def chunk_explorer(**fixed) -> ChunkExplorer:
    """12d: drag the **chunk size** and the **gate**: the same outputs, fewer sequential steps."""
    import ipywidgets as w

    start = {**CHUNK_DEFAULTS, **fixed}
    controls = {
        "length": w.IntSlider(description="sequence length", value=start["length"], min=1, max=64, style=_STYLE),
        "chunk_size": w.IntSlider(description="chunk size", value=start["chunk_size"], min=1, max=64, style=_STYLE),
        "gate": w.FloatSlider(description="gate −g", value=start["gate"], min=0.0, max=2.0, step=0.05, style=_STYLE),
    }
    rest = {k: v for k, v in fixed.items() if k not in controls}
    explorer = ChunkExplorer("chunks", controls, {"panel_size": 2.8, "seed": start["seed"], **rest})
    # Grey out the display controls that cannot change this figure, and say why (as 05's mask explorer does).
    fixed_scale, values, length = explorer.controls["fixed_scale"], explorer.controls["values"], controls["length"]
    fixed_scale.disabled = True  # the decay is 1 on the diagonal and 0 above it: it already spans 0–1
    fixed_scale.tooltip = localize("no effect here: the decay is 1 on the diagonal and 0 above it, already 0–1")

    def enable_values(_=None):
        values.disabled = length.value > VALUES_UP_TO
        values.tooltip = localize(f"values are printed for up to {VALUES_UP_TO} tokens") if values.disabled else ""

    enable_values()
    length.observe(enable_values, names="value")
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


def plot_capacity(pairs, errors: dict[str, list[float]], head_k_dim: int) -> Figure:
    """Retrieval error (relative) against the number of stored key-value pairs, one line per rule."""
    figure, ax = _axes("Recall from a fixed state", "stored pairs", "relative retrieval error")
    for name, values in errors.items():
        ax.plot(pairs, values, marker="o", label=localize(name))
    ax.axvline(head_k_dim, color="grey", linestyle="--", linewidth=1)
    ax.text(head_k_dim, ax.get_ylim()[1] * 0.95, " Dk", fontsize=9, va="top")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the axes: never over a line
    return figure


def _bytes_label(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            return f"{value:.0f} {unit}"
        value /= 1024
    return f"{value:.0f} PiB"


def plot_state_vs_kv(memory: dict) -> Figure:
    """Bytes per sequence against context length: KV caches grow, the Gated DeltaNet states do not."""
    figure, ax = _axes("Memory per sequence, Qwen3.5 config (bf16)", "context length (tokens)", "bytes")
    contexts = memory["contexts"]
    ax.loglog(contexts, memory["all_full_attention_kv_bytes"], marker="o", label=localize("KV cache, 32 full layers"))
    ax.loglog(contexts, memory["hybrid_kv_bytes"], marker="o", label=localize("KV cache, 8 full layers (3:1 hybrid)"))
    ax.loglog(contexts, memory["hybrid_state_bytes"], marker="o", label=localize("states of 24 Gated DeltaNet layers"))
    ticks = [2**20, 2**25, 2**30, 2**35]
    ax.set_yticks(ticks, [_bytes_label(t) for t in ticks])
    ax.legend(fontsize=9)
    return figure


def plot_recall(results: dict) -> Figure:
    """Associative-recall accuracy against the number of pairs, one line per mixer (benchmarks/train_recall.py).

    ``results["accuracy"][mixer][P]``: the mean over seeds; ``results["spread"]`` (optional, None for one seed):
    half the range, drawn as error bars; ``results["setup"]["vocab"]`` (optional): a dotted line at chance,
    1 / (number of value tokens)."""
    figure, ax = _axes("Associative recall after training", "key-value pairs in the context", "accuracy", (6.6, 3.2))
    markers = "osD^v"
    spreads = results.get("spread", {})
    mixers = list(results["accuracy"])
    all_pairs = set()
    for index, (name, by_pairs) in enumerate(results["accuracy"].items()):
        pairs = sorted(int(p) for p in by_pairs)
        all_pairs.update(pairs)
        # Each mixer a little to the side of its P (log axis: a factor), so lines that coincide (softmax and the
        # hybrid at 1.0) show every marker instead of one hiding inside the other.
        shift = 2 ** (0.05 * (index - (len(mixers) - 1) / 2))
        spread = [spreads.get(name, {}).get(str(p)) or 0.0 for p in pairs]  # None (one seed) → no bar
        ax.errorbar([p * shift for p in pairs], [by_pairs[str(p)] for p in pairs],
                    yerr=spread if any(spread) else None, marker=markers[index % 5], markersize=6, capsize=3,
                    label=localize(name))  # fmt: skip
    if "setup" in results:
        values = results["setup"]["vocab"] - results["setup"]["vocab"] // 2  # values: the vocabulary's upper half
        ax.axhline(1 / values, color="0.4", linestyle=":", linewidth=1, label=localize("chance"))
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(all_pairs), [str(p) for p in sorted(all_pairs)])
    ax.minorticks_off()
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the axes: never over a line
    return figure
