"""Notebook 11c's chunked-attention mask explorer: full causal vs sliding window vs Llama 4's chunks.

- ``render_chunked_masks(seq_len, chunk_size, window, query)``: the three boolean masks side by side (True = may
  attend), the chosen query's row outlined, so a reader sees which keys that query reads under each rule.
- ``explain_chunked_masks``: the explanation line (how many keys the query reads, how many tokens each cache keeps).
- ``chunked_explorer()``: sliders for the sequence length, the chunk size, the window and the query.
- ``plot_nope_temperature``: Llama 4's NoPE query factor over position.
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.collections import LineCollection
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from attn_core.i18n import localize
from attn_core.masks import causal_mask, chunked_mask, sliding_window_mask
from attn_core.viz.lite_axes import PAD_IN, TICK_IN, frame_and_ticks, lite_panel, to_inches
from attn_core.viz.plotting import _Heatmap
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import _STYLE, DEFAULTS, Explorer, merge_params

__all__ = [
    "CHUNKED_DEFAULTS",
    "render_chunked_masks",
    "explain_chunked_masks",
    "chunked_explorer",
    "plot_nope_temperature",
]

CHUNKED_DEFAULTS = dict(seq_len=16, chunk_size=4, window=4, query=9, **{k: DEFAULTS[k] for k in Explorer.DISPLAY})
DPI = 110
VALUES_UP_TO = 20  # tokens: past this the printed 0/1 no longer fit in their cells
_CMAP = ListedColormap(["#f2f2f2", "#1f77b4"])  # blocked, may attend
_NORM = Normalize(0.0, 1.0)
# the ticks imshow's axes had: fewer across (the labels are wider than tall) than down
_X_TICKS, _Y_TICKS = (MaxNLocator(nbins=n, integer=True, steps=[1, 2, 2.5, 5, 10]) for n in (4, 8))


def _params(overrides: dict) -> dict:
    params = merge_params(CHUNKED_DEFAULTS, overrides, "chunked-mask explorer")
    for name in ("seq_len", "chunk_size", "window"):
        value = params[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}.")
    query = params["query"]
    if isinstance(query, bool) or not isinstance(query, int) or not 0 <= query < params["seq_len"]:
        raise ValueError(f"query must be a position 0 .. seq_len - 1 = {params['seq_len'] - 1}, got {query!r}.")
    return params


def masks(seq_len: int, chunk_size: int, window: int) -> dict[str, torch.Tensor]:
    """The three (L, L) boolean masks the explorer draws, True = may attend."""
    return {
        "full causal": causal_mask(seq_len),
        f"sliding window W = {window}": sliding_window_mask(seq_len, window),
        f"chunked C = {chunk_size}": chunked_mask(seq_len, chunk_size),
    }


def render_chunked_masks(**overrides) -> Figure:
    """The three masks side by side, the query's row outlined in red.

    Drawn without constrained layout, matplotlib's ticks or Text (``viz.lite_axes``, glyph-path text): they were
    ~350 ms of a move (issue #33's explorer speed). Same two-line titles, axis names, integer ticks and colours."""
    p = _params(overrides)
    seq_len, query = p["seq_len"], p["query"]
    font, panel, em = 9 * p["font_scale"], p["panel_size"], 9 * p["font_scale"] / 72
    drawn = masks(seq_len, p["chunk_size"], p["window"])
    titles = [
        (localize(title), localize(f"query {query} reads {int(mask[query].sum())} keys"))
        for title, mask in drawn.items()
    ]
    tick_w = text_width(str(seq_len - 1), font)
    top, bottom = 0.1 + 3.1 * em, 0.12 + TICK_IN + PAD_IN + 2.6 * em  # two title lines; ticks and axis name below
    margin = 0.08 + 1.4 * em + TICK_IN + PAD_IN + tick_w  # each panel's y axis name and ticks
    side = max(0.6, panel * 1.15 - top - bottom, *(text_width(t, font) for pair in titles for t in pair))
    gap = max(0.15, (panel * 3.1 - 3 * (margin + side) - 0.15) / 2)
    width, height = 3 * (margin + side) + 2 * gap + 0.15, top + side + bottom
    figure = Figure(figsize=(width, height), dpi=DPI)
    text = TextBatch()
    xticks, yticks = ([(v, f"{v:.0f}") for v in loc.tick_values(0, seq_len - 1) if 0 <= v <= seq_len - 1]
                      for loc in (_X_TICKS, _Y_TICKS))  # fmt: skip
    for index, ((line1, line2), mask) in enumerate(zip(titles, drawn.values(), strict=True)):
        x0 = margin + index * (margin + side + gap)
        ax = lite_panel(figure, (x0, bottom, side, side), (-0.5, seq_len - 0.5), (seq_len - 0.5, -0.5))
        image = _Heatmap(ax, cmap=_CMAP, norm=_NORM, extent=(-0.5, seq_len - 0.5, seq_len - 0.5, -0.5),
                         origin="upper", interpolation="nearest")  # fmt: skip
        image.set_data(mask.numpy().astype(float))
        ax.add_image(image)
        x1, y0, y1 = seq_len - 0.5, query - 0.5, query + 0.5
        outline = [[(-0.5, y0), (x1, y0), (x1, y1), (-0.5, y1), (-0.5, y0)]]
        ax.add_collection(LineCollection(outline, colors="#d62728", linewidths=2.0), autolim=False)
        if p["values"] and seq_len <= VALUES_UP_TO:
            rows, cols = np.nonzero(mask.numpy())
            for x, y in to_inches(ax, cols, rows):
                text.add(x, y, "1", font * 0.6, color="white", role="value")
        frame_and_ticks(ax, text, xticks, yticks, font)
        centre, title_y = x0 + side / 2, bottom + side + 6 / 72
        text.add(centre, title_y, line2, font, va="bottom", role="title")
        text.add(centre, title_y + 1.3 * em, line1, font, va="bottom", role="title")
        text.add(centre, bottom - TICK_IN - PAD_IN - 1.3 * em, localize("key position"), font, va="top", role="xlabel")
        text.add(x0 - TICK_IN - PAD_IN - tick_w - 0.06, bottom + side / 2, localize("query position"), font,
                 va="bottom", rotation=90, role="ylabel")  # fmt: skip
    text.draw(ax, transform=figure.dpi_scale_trans)
    return figure


def explain_chunked_masks(**overrides) -> str:
    p = _params(overrides)
    q, size, window = p["query"], p["chunk_size"], p["window"]
    start = (q // size) * size
    return (
        f"Query {q}: full causal reads keys 0–{q} ({q + 1}); the sliding window reads keys "
        f"{max(0, q - window + 1)}–{q} ({min(q + 1, window)}), always the last {window} once there are that many; "
        f"the chunk reads keys {start}–{q} ({q - start + 1}): it starts over at every multiple of {size}, so a cache "
        f"keeps at most {size} tokens and the first query of a chunk sees only itself."
    )


class ChunkedMaskExplorer(Explorer):
    def render(self, params: dict):
        return render_chunked_masks(**params), explain_chunked_masks(**params)


def chunked_explorer(**fixed) -> ChunkedMaskExplorer:
    """11c: drag the **sequence length**, the **chunk size**, the **window** and the **query**."""
    import ipywidgets as w

    start = {**CHUNKED_DEFAULTS, **fixed}
    controls = {
        "seq_len": w.IntSlider(description="sequence length", value=start["seq_len"], min=2, max=40, style=_STYLE),
        "chunk_size": w.IntSlider(description="chunk size", value=start["chunk_size"], min=1, max=40, style=_STYLE),
        "window": w.IntSlider(description="window", value=start["window"], min=1, max=40, style=_STYLE),
        "query": w.IntSlider(description="query", value=start["query"], min=0, max=start["seq_len"] - 1, style=_STYLE),
    }
    rest = {k: v for k, v in fixed.items() if k not in controls}
    explorer = ChunkedMaskExplorer("chunked-masks", controls, {"panel_size": 2.6, **rest})
    fixed_scale = explorer.controls["fixed_scale"]
    fixed_scale.disabled = True  # a boolean mask is already 0 or 1
    fixed_scale.tooltip = localize("no effect here: a boolean mask is already 0 or 1")
    length, query = controls["seq_len"], controls["query"]

    def follow_length(_=None):
        query.max = length.value - 1  # ipywidgets clamps the value into the new range

    length.observe(follow_length, names="value")
    return explorer


def plot_nope_temperature(positions, factors: dict[str, torch.Tensor]) -> Figure:
    """Llama 4's NoPE query factor over position, one step line per setting."""
    figure = Figure(figsize=(6.4, 3.0), dpi=DPI, layout="constrained")
    ax = figure.subplots()
    for label, values in factors.items():
        ax.step(np.asarray(positions), np.asarray(values), where="post", label=localize(label))
    ax.set_title(
        localize("NoPE query temperature 1 + attn_scale · log(1 + floor((pos + 1) / floor_scale))"), fontsize=9
    )
    ax.set_xlabel(localize("position"), fontsize=9)
    ax.set_ylabel(localize("query factor"), fontsize=9)
    ax.tick_params(labelsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return figure
