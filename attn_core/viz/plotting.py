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
from matplotlib.patches import Rectangle
from matplotlib.transforms import blended_transform_factory

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


def _label_count(labels: Sequence[str] | None, size: int) -> int:
    return size if labels is not None else len(range(0, size, max(1, size // 6)))


def _block_ticks(labels: Sequence[str] | None, size: int, offsets: list[float]) -> tuple[list[float], list[str]]:
    """Tick positions and labels for blocks of ``size`` cells starting at each offset."""
    cells = range(size) if labels is not None else range(0, size, max(1, size // 6))
    names = [str(labels[i]) if labels is not None else str(i) for i in cells]
    return [o + i for o in offsets for i in cells], names * len(offsets)


def _text_inches(labels: Sequence[str] | None, fontsize: float, size: int) -> float:
    """Rough width of the longest tick label, in inches (measuring text is slow)."""
    longest = max((len(str(label)) for label in labels), default=1) if labels is not None else len(str(size))
    return longest * fontsize * 0.62 / 72 + 0.08


def plot_attention(
    weights,
    *,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    heads: Sequence[int] | None = None,
    num_heads: int | None = None,
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
        heads: the query-head index of each head panel, when the array holds a subset of
            the heads (e.g. ``[5]`` for ``weights[5:6]``); defaults to ``0, 1, ...``.
        num_heads: total query heads, when ``heads`` is a subset (defaults to ``len(heads)``).
        num_kv_heads: total kv heads (GQA): colour each head's frame and title by the kv
            head it reads, ``head // (num_heads // num_kv_heads)``; same colour = shared K/V.
        title: a title over the whole figure.
        annotate: print each weight in its cell; default: maps up to 10×10, at most 4 panels.
        vmax: top of the shared colour scale (default: the largest weight shown).
        max_cols: a ``(heads, Lq, Lk)`` grid wraps after this many panels per row.
        panel_size: inches per panel; raise it (or ``font_scale``) for a projector.

    Every panel is its own image (``fig.axes[0].images[i]`` holds panel ``i``), drawn in
    one shared Axes: a separate Axes per panel would cost ~20 ms each to build and draw.
    """
    grid = _as_grid(weights)  # (layers, heads, Lq, Lk)
    num_layers, heads_shown, q_len, k_len = grid.shape
    heads = list(range(heads_shown)) if heads is None else [int(h) for h in heads]
    if len(heads) != heads_shown:
        raise ValueError(f"{len(heads)} head indices given for {heads_shown} head panels.")
    num_heads = len(heads) if num_heads is None else num_heads
    panels = [(layer, slot) for layer in range(num_layers) for slot in range(heads_shown)]
    if num_layers == 1:
        ncols = min(heads_shown, max_cols)
        nrows = -(-heads_shown // ncols)
    else:
        nrows, ncols = num_layers, heads_shown
    if titles is not None and len(titles) != len(panels):
        raise ValueError(f"{len(titles)} titles given for {len(panels)} panels.")
    for name, labels, size in (("query_labels", query_labels, q_len), ("key_labels", key_labels, k_len)):
        if labels is not None and len(labels) != size:
            raise ValueError(f"{len(labels)} {name} given for a map with {size} positions on that axis.")
    if num_kv_heads is not None and (num_kv_heads < 1 or num_heads % num_kv_heads or max(heads) >= num_heads):
        raise ValueError(
            f"num_kv_heads ({num_kv_heads}) must divide the number of query heads ({num_heads}), "
            f"and head indices {heads} must be below it."
        )
    if annotate is None:
        annotate = q_len <= 10 and k_len <= 10 and len(panels) <= 4
    vmax = float(grid.max()) if vmax is None else vmax
    vmax = vmax if vmax > 0 else 1.0
    fontsize = 9 * font_scale
    colors = group_colors(num_heads, num_kv_heads) if num_kv_heads else None

    # Layout in inches, computed rather than measured (constrained layout costs ~40 ms).
    panel_w = panel_size
    panel_h = panel_size * min(max(q_len / max(k_len, 1), 0.5), 2.0)
    has_titles = titles is not None or len(panels) > 1 or num_kv_heads is not None
    title_gap = 0.05  # inches between a panel and its title
    title_h = title_gap + fontsize * 1.05 * 1.35 / 72 if has_titles else 0.0
    gap_w, gap_h = 0.15, 0.15 + title_h
    left = _text_inches(query_labels, fontsize, q_len) + fontsize * 1.8 / 72
    bottom = _text_inches(key_labels, fontsize, k_len) + fontsize * 1.8 / 72
    top = 0.08 + title_h + (fontsize * 1.25 * 1.8 / 72 if title else 0.0)
    bar_w = (0.15 + 0.12 + _text_inches(["0.00"], fontsize, 1)) if colorbar else 0.0
    grid_w = ncols * panel_w + (ncols - 1) * gap_w
    grid_h = nrows * panel_h + (nrows - 1) * gap_h
    width, height = left + grid_w + bar_w + 0.1, bottom + grid_h + top
    fig = Figure(figsize=(width, height), dpi=dpi)
    ax = fig.add_axes((left / width, bottom / height, grid_w / width, grid_h / height))

    # Data coordinates: cell (i, j) of panel (row, col) is centred at (x0 + j, y0 + i).
    step_x, step_y = k_len + gap_w / panel_w * k_len, q_len + gap_h / panel_h * q_len
    x_offsets = [col * step_x for col in range(ncols)]
    y_offsets = [row * step_y for row in range(nrows)]
    image = None
    for index, (layer, slot) in enumerate(panels):
        row, col = divmod(index, ncols)
        x0, y0, head = x_offsets[col], y_offsets[row], heads[slot]
        data = grid[layer, slot]  # (Lq, Lk)
        extent = (x0 - 0.5, x0 + k_len - 0.5, y0 + q_len - 0.5, y0 - 0.5)
        image = ax.imshow(data, cmap=cmap, vmin=0.0, vmax=vmax, extent=extent, interpolation="nearest")
        frame_color = colors[head] if colors else "#888888"
        ax.add_patch(Rectangle((x0 - 0.5, y0 - 0.5), k_len, q_len, fill=False, lw=3 if colors else 0.8, ec=frame_color))
        if titles is not None:
            panel_title = titles[index]
        elif not has_titles:
            panel_title = None
        else:
            panel_title = (f"layer {layer} · " if num_layers > 1 else "") + f"head {head}"
            if colors is not None:
                panel_title += f" · kv {kv_group_of_head(head, num_heads, num_kv_heads)}"
        if panel_title:
            ax.text(
                x0 + (k_len - 1) / 2,
                y0 - 0.5 - title_gap * q_len / panel_h,
                panel_title,
                ha="center",
                va="bottom",
                fontsize=fontsize * 1.05,
                color=colors[head] if colors else "black",
            )
        if annotate:
            for (r, c), value in np.ndenumerate(data):
                shade = image.cmap(image.norm(value))
                text_color = "black" if sum(to_rgba(shade)[:3]) > 1.6 else "white"
                if not np.isfinite(value):  # NaN cells are drawn blank: print the label in red
                    text_color = "#b00020"
                ax.text(
                    x0 + c, y0 + r, f"{value:.2f}", ha="center", va="center", fontsize=fontsize * 0.8, color=text_color
                )
    ax.set_xlim(-0.5, x_offsets[-1] + k_len - 0.5)
    ax.set_ylim(y_offsets[-1] + q_len - 0.5, -0.5)
    ax.set_aspect("auto")
    for spine in ax.spines.values():
        spine.set_visible(False)
    # Label every block of the bottom row / left column when that stays legible, otherwise
    # only the bottom-left panel's. Labels are plain text: a matplotlib Tick costs ~1.7 ms.
    x_blocks = x_offsets if _label_count(key_labels, k_len) * ncols <= 40 else x_offsets[:1]
    y_blocks = y_offsets if _label_count(query_labels, q_len) * nrows <= 40 else y_offsets[-1:]
    ax.set_xticks([])
    ax.set_yticks([])
    below = blended_transform_factory(ax.transData, ax.transAxes)
    beside = blended_transform_factory(ax.transAxes, ax.transData)
    pad_x, pad_y = 0.04 / grid_h, 0.04 / grid_w
    x_rotation = 90 if key_labels is not None else 0
    for position, label in zip(*_block_ticks(key_labels, k_len, x_blocks), strict=True):
        ax.text(position, -pad_x, label, transform=below, rotation=x_rotation, ha="center", va="top", fontsize=fontsize)
    for position, label in zip(*_block_ticks(query_labels, q_len, y_blocks), strict=True):
        ax.text(-pad_y, position, label, transform=beside, ha="right", va="center", fontsize=fontsize)
    fig.text(
        0.03 / width, (bottom + grid_h / 2) / height, "query", rotation=90, ha="left", va="center", fontsize=fontsize
    )
    fig.text((left + grid_w / 2) / width, 0.03 / height, "key", ha="center", va="bottom", fontsize=fontsize)
    if colorbar and image is not None:
        # A pixel image beside the grid: a real colorbar Axes costs ~15 ms more to build.
        bar_h = min(grid_h, 3.0)
        px_w, px_h = max(int(0.15 * dpi), 1), max(int(bar_h * dpi), 2)
        ramp = np.repeat(np.linspace(1.0, 0.0, px_h)[:, None], px_w, axis=1)  # top = vmax
        x_px = (left + grid_w + 0.15) * dpi
        y_px = (bottom + (grid_h - bar_h) / 2) * dpi
        fig.figimage(image.cmap(ramp), xo=x_px, yo=y_px, origin="upper")
        for fraction in (0.0, 0.5, 1.0):
            fig.text(
                (x_px + px_w) / dpi / width + 0.06 / width,
                (y_px / dpi + fraction * bar_h) / height,
                f"{fraction * vmax:.2f}",
                ha="left",
                va="center",
                fontsize=fontsize,
            )
    if title:
        fig.suptitle(title, fontsize=fontsize * 1.25, y=1 - 0.04 / height, va="top")
    return fig
