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
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from attn_core.i18n import localize
from attn_core.masks import causal_mask, chunked_mask, sliding_window_mask
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
    p = _params(overrides)
    seq_len, query = p["seq_len"], p["query"]
    font = 9 * p["font_scale"]
    panel = p["panel_size"]
    figure = Figure(figsize=(panel * 3.1, panel * 1.15), dpi=DPI, layout="constrained")
    axes = figure.subplots(1, 3)
    for ax, (title, mask) in zip(axes, masks(seq_len, p["chunk_size"], p["window"]).items(), strict=True):
        ax.imshow(mask.numpy().astype(float), cmap=_CMAP, vmin=0.0, vmax=1.0)
        ax.add_patch(_rectangle(-0.5, query - 0.5, seq_len, 1, edgecolor="#d62728", linewidth=2.0, fill=False))
        if p["values"] and seq_len <= VALUES_UP_TO:
            for i, j in zip(*np.nonzero(mask.numpy()), strict=True):
                ax.text(j, i, "1", ha="center", va="center", fontsize=font * 0.6, color="white")
        seen = int(mask[query].sum())
        ax.set_title(f"{localize(title)}\n{localize(f'query {query} reads {seen} keys')}", fontsize=font)
        ax.set_xlabel(localize("key position"), fontsize=font)
        ax.set_ylabel(localize("query position"), fontsize=font)
        ax.tick_params(labelsize=font)
    return figure


def _rectangle(x, y, width, height, **kwargs):
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), width, height, **kwargs)


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
