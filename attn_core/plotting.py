"""One heatmap helper for every attention array in the series.

``plot_attention`` takes a single map ``(Lq, Lk)``, a head grid ``(heads, Lq, Lk)`` or a
layer-by-head grid ``(layers, heads, Lq, Lk)`` and always returns a matplotlib
``Figure`` (save it with ``fig.savefig("x.png")`` or ``"x.svg"``). The figure is not
registered with pyplot, so a notebook shows it once and nothing accumulates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

__all__ = ["plot_attention", "group_colors", "kv_group_of_head"]

# Colours for kv groups, picked to stay distinct on a projector.
_GROUP_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def kv_group_of_head(head: int, num_heads: int, num_kv_heads: int) -> int:
    """The kv head that query head ``head`` reads (the ``repeat_interleave`` grouping)."""
    return head // (num_heads // num_kv_heads)


def group_colors(num_heads: int, num_kv_heads: int) -> list[str]:
    """One colour per query head, equal for heads that share a kv head."""
    return [_GROUP_COLORS[kv_group_of_head(h, num_heads, num_kv_heads) % len(_GROUP_COLORS)] for h in range(num_heads)]


def _as_grid(weights) -> np.ndarray:
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().to("cpu", torch.float64).numpy()
    grid = np.asarray(weights, dtype=np.float64)
    if grid.ndim not in (2, 3, 4):
        raise ValueError(
            f"plot_attention takes (Lq, Lk), (heads, Lq, Lk) or (layers, heads, Lq, Lk); got shape {grid.shape}. "
            "Select one batch element first, e.g. weights[0]."
        )
    return grid.reshape((1,) * (4 - grid.ndim) + grid.shape)  # (layers, heads, Lq, Lk)


def _tick_labels(ax, axis: str, labels: Sequence[str] | None, size: int, fontsize: float) -> None:
    set_ticks, set_labels = (ax.set_xticks, ax.set_xticklabels) if axis == "x" else (ax.set_yticks, ax.set_yticklabels)
    if labels is None:
        step = max(1, size // 8)
        set_ticks(range(0, size, step))
        return
    if len(labels) != size:
        raise ValueError(f"{len(labels)} {axis}-axis labels given for a map of {size} positions.")
    set_ticks(range(size))
    set_labels(labels, fontsize=fontsize, rotation=90 if axis == "x" else 0)


def plot_attention(
    weights,
    *,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    num_kv_heads: int | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    colorbar: bool = True,
    cmap: str = "viridis",
    vmax: float | None = None,
    max_cols: int = 4,
    panel_size: float = 2.8,
    font_scale: float = 1.0,
    dpi: int = 80,
) -> Figure:
    """Draw attention weights as heatmaps and return the Figure.

    Args:
        weights: tensor or array ``(Lq, Lk)``, ``(heads, Lq, Lk)`` or ``(layers, heads, Lq, Lk)``.
            Rows are queries (y axis), columns are keys (x axis).
        query_labels, key_labels: token strings for the y and x axes.
        titles: one title per panel (defaults to ``head h`` / ``layer l · head h``).
        num_kv_heads: colour each head's frame and title by the kv head it shares (GQA).
        title: a title over the whole figure.
        annotate: print each weight in its cell; default: only for maps up to 10×10.
        vmax: top of the shared colour scale (default: the largest weight shown).
        max_cols: a ``(heads, Lq, Lk)`` grid wraps after this many panels per row.
        panel_size: inches per panel; raise it (or ``font_scale``) for a projector.
    """
    grid = _as_grid(weights)  # (layers, heads, Lq, Lk)
    num_layers, num_heads, q_len, k_len = grid.shape
    panels = [(layer, head) for layer in range(num_layers) for head in range(num_heads)]
    if num_layers == 1:
        ncols = min(num_heads, max_cols)
        nrows = -(-num_heads // ncols)
    else:
        nrows, ncols = num_layers, num_heads
    if titles is not None and len(titles) != len(panels):
        raise ValueError(f"{len(titles)} titles given for {len(panels)} panels.")
    if num_kv_heads is not None and (num_kv_heads < 1 or num_heads % num_kv_heads):
        raise ValueError(f"num_kv_heads ({num_kv_heads}) must divide the number of heads ({num_heads}).")
    if annotate is None:
        annotate = q_len <= 10 and k_len <= 10
    vmax = float(grid.max()) if vmax is None else vmax
    vmax = vmax if vmax > 0 else 1.0
    fontsize = 9 * font_scale

    aspect = q_len / max(k_len, 1)
    fig = Figure(
        figsize=(panel_size * ncols + (0.8 if colorbar else 0), panel_size * nrows * min(max(aspect, 0.5), 2) + 0.3),
        dpi=dpi,
        layout="constrained",
    )
    axes = fig.subplots(nrows, ncols, squeeze=False)
    colors = group_colors(num_heads, num_kv_heads) if num_kv_heads else None
    image = None
    for index, ax in enumerate(axes.flat):
        if index >= len(panels):
            ax.set_axis_off()
            continue
        layer, head = panels[index]
        data = grid[layer, head]  # (Lq, Lk)
        image = ax.imshow(data, cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest")
        if titles is not None:
            panel_title = titles[index]
        elif len(panels) == 1:
            panel_title = None
        elif num_layers > 1:
            panel_title = f"layer {layer} · head {head}"
        else:
            panel_title = f"head {head}"
        if colors is not None and panel_title is not None:
            panel_title += f" · kv {kv_group_of_head(head, num_heads, num_kv_heads)}"
        if panel_title:
            ax.set_title(panel_title, fontsize=fontsize * 1.1, color=colors[head] if colors else "black")
        if colors is not None:
            for spine in ax.spines.values():
                spine.set_edgecolor(colors[head])
                spine.set_linewidth(3)
        first_col, last_row = index % ncols == 0, index // ncols == nrows - 1 or index + ncols >= len(panels)
        _tick_labels(ax, "x", key_labels, k_len, fontsize)
        _tick_labels(ax, "y", query_labels, q_len, fontsize)
        ax.tick_params(labelsize=fontsize, labelleft=first_col, labelbottom=last_row)
        if annotate:
            for (row, col), value in np.ndenumerate(data):
                shade = image.cmap(image.norm(value))
                text_color = "black" if sum(to_rgba(shade)[:3]) > 1.6 else "white"
                ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=fontsize * 0.8, color=text_color)
    if len(panels) == 1:
        axes[0, 0].set_xlabel("key", fontsize=fontsize)
        axes[0, 0].set_ylabel("query", fontsize=fontsize)
    else:
        fig.supxlabel("key", fontsize=fontsize)
        fig.supylabel("query", fontsize=fontsize)
    if colorbar and image is not None:
        bar = fig.colorbar(image, ax=axes, shrink=0.9 if nrows > 1 else 1.0, aspect=30)
        bar.ax.tick_params(labelsize=fontsize)
    if title:
        fig.suptitle(title, fontsize=fontsize * 1.25)
    return fig
