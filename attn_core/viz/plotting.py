"""One heatmap helper for every attention array in the series.

``plot_attention`` takes a single map ``(Lq, Lk)``, a head grid ``(heads, Lq, Lk)`` or a
layer-by-head grid ``(layers, heads, Lq, Lk)`` and always returns a matplotlib ``Figure`` (save
it with ``fig.savefig("x.png")`` or ``"x.svg"``). The figure is not registered with pyplot, so a
notebook shows it once and nothing accumulates.

Colours are honest by default: weights sit on a FIXED 0-1 scale, so a flat row (every weight
0.15 at a high temperature) looks pale and a weight of 0.41 looks like 0.41, not like a
confident 1. Values above 1 (dropout's 1/(1-p) boost) stretch the scale to their maximum, and
the colour bar's caption says so. ``vmax="relative"`` stretches the colours to the largest value
shown, to compare patterns rather than sizes. Boolean masks (``binary``) get two colours and a
legend; NaN and infinite cells are hatched red and get a legend entry.

Language: the labels it draws (axis names, head titles, legend, caption, note) follow ``ac.set_language``; a
caller's ``title`` and ``titles`` are translated where a catalog has them (``attn_core/i18n/zh_*.py``), so a
notebook's code is the same in both editions. Token labels are never translated.

Speed (an explorer redraws on every slider step): everything is drawn in ONE Axes whose data
units are inches of the figure, each panel is an image in it, and all text is drawn as glyph
outlines (``textpaths``). Measured with ``benchmarks/bench_sdpa_and_render.py``.

One piece: ``plot_attention`` and the layout and colour helpers only it uses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib
import numpy as np
import torch
from matplotlib.collections import PolyCollection
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.patches import PathPatch, Rectangle
from matplotlib.path import Path

from attn_core.i18n import localize, translate
from attn_core.viz.png import FastPngFigure
from attn_core.viz.textpaths import TextBatch, text_width

__all__ = ["plot_attention", "group_colors", "kv_group_of_head", "DPI", "FONT_PT", "VALUE_PT"]

DPI = 110  # default resolution: 9 pt is ~14 px tall, readable when projected
FONT_PT = 10.0  # tick labels and axis names at font_scale 1
VALUE_PT = 9.0  # numbers printed in cells at font_scale 1
TITLE_PT = 10.5
NAN_COLOR = "#b00020"  # labels of NaN / infinite cells
NAN_HATCH = "#e3909b"  # their hatching: lighter, so a printed "nan" stays readable on it
# Colours for kv groups, picked to stay distinct on a projector.
_GROUP_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def kv_group_of_head(head: int, num_heads: int, num_kv_heads: int) -> int:
    """The kv head that query head ``head`` reads (the ``repeat_interleave`` grouping)."""
    return head // (num_heads // num_kv_heads)


def group_colors(num_heads: int, num_kv_heads: int) -> list[str]:
    """One colour per query head, equal for heads that share a kv head."""
    return [_GROUP_COLORS[kv_group_of_head(h, num_heads, num_kv_heads) % len(_GROUP_COLORS)] for h in range(num_heads)]


class _Heatmap(AxesImage):
    """An image of a few cells that, on a raster canvas at its own dpi, upsamples with numpy.

    Matplotlib resamples every image pixel by pixel in float (~4 ms a 300×300-px panel here);
    a heatmap's cells are whole blocks of pixels, so repeating each cell's RGBA row and column
    is exact and ~20× cheaper. Other canvases (SVG, magnified output) take the stock path.
    """

    def make_image(self, renderer, magnification=1.0, unsampled=False):
        if unsampled or magnification != 1.0:
            return super().make_image(renderer, magnification, unsampled)
        left, right, low, high = self.get_extent()
        (x0, y0), (x1, y1) = np.round(self.get_transform().transform([(left, low), (right, high)]))
        width, height = int(x1 - x0), int(y1 - y0)
        if width < 1 or height < 1:
            return None, 0, 0, None
        cells = self.to_rgba(self.get_array(), bytes=True)  # (Lq, Lk, 4) through norm and cmap
        # Pixels per cell (they differ by at most one); the canvas takes pixel rows bottom-up.
        row_px = np.diff(np.round(np.linspace(0, height, cells.shape[0] + 1)).astype(int))  # (Lq,)
        col_px = np.diff(np.round(np.linspace(0, width, cells.shape[1] + 1)).astype(int))  # (Lk,)
        pixels = np.repeat(np.repeat(cells[::-1], row_px[::-1], axis=0), col_px, axis=1)  # (height, width, 4)
        return pixels, x0, y0, None


def _as_grid(weights) -> tuple[np.ndarray, bool]:
    """``(layers, heads, Lq, Lk)`` float64 and whether the input was boolean."""
    if isinstance(weights, torch.Tensor):
        is_bool = weights.dtype == torch.bool
        weights = weights.detach().to("cpu", torch.float64).numpy()
    else:
        is_bool = np.asarray(weights).dtype == np.bool_
    grid = np.asarray(weights, dtype=np.float64)
    if grid.ndim not in (2, 3, 4) or 0 in grid.shape:
        raise ValueError(
            f"plot_attention takes (Lq, Lk), (heads, Lq, Lk) or (layers, heads, Lq, Lk) with no empty axis; "
            f"got shape {grid.shape}. Select one batch element first, e.g. weights[0]."
        )
    return grid.reshape((1,) * (4 - grid.ndim) + grid.shape), is_bool  # (layers, heads, Lq, Lk)


def _panel_labels(name: str, labels, size: int, num_panels: int) -> tuple[list[list[str]] | None, bool]:
    """One label list per panel, and whether they differ per panel (a list of lists was given)."""
    if labels is None:
        return None, False
    labels = list(labels)
    per_panel = bool(labels) and not isinstance(labels[0], str) and isinstance(labels[0], Sequence)
    if per_panel and len(labels) != num_panels:
        raise ValueError(f"{len(labels)} {name} lists given for {num_panels} panels: give one per panel, or one list.")
    lists = [[str(x) for x in panel] for panel in labels] if per_panel else [[str(x) for x in labels]] * num_panels
    for index, panel in enumerate(lists):
        if len(panel) != size:
            where = f" (panel {index})" if per_panel else ""
            raise ValueError(f"{len(panel)} {name} given for a map with {size} positions on that axis{where}.")
    return lists, per_panel


def _tick_texts(labels: list[str] | None, size: int, cell: float, need: float) -> list[str]:
    """Labels along one panel axis, blank where they would overlap: every k-th token, or round numbers."""
    step = max(1, math.ceil(need / cell - 1e-9))  # cells one label needs
    if labels is not None:
        return [label if i % step == 0 else "" for i, label in enumerate(labels)]
    step = max(step, size / 8)  # at most ~8 numbers per axis
    step = min(m * 10**e for e in range(7) for m in (1, 2, 5) if m * 10**e >= step)
    return [str(i) if i % step == 0 else "" for i in range(size)]


def _colour_scale(grid: np.ndarray, vmax, binary: bool) -> tuple[float, float, str]:
    """(bottom, top, caption) of the colour scale; see ``plot_attention``'s ``vmax``."""
    finite = grid[np.isfinite(grid)]  # (n,)
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    bottom = min(0.0, low)
    if binary:
        return 0.0, 1.0, ""
    if vmax is None:
        top = max(1.0, high)
        caption = "fixed scale 0–1" if high <= 1.0 else f"0–1 extended to max {high:.2f}"
    elif isinstance(vmax, str):
        if vmax != "relative":
            raise ValueError(f"vmax={vmax!r}: use None (fixed 0–1 scale), 'relative' or a number above 0.")
        top = high if high > bottom else bottom + 1.0
        caption = "relative: top = largest value"
    else:
        top = float(vmax)
        if not top > bottom:
            raise ValueError(f"vmax={vmax} must be above the bottom of the scale ({bottom:g}).")
        caption = "fixed scale 0–1" if top == 1.0 else f"scale 0–{top:.2f}"
        caption += f"; values above {top:.2f} clipped" if high > top else ""
    caption += f"; bottom {bottom:.2f}" if bottom < 0 else ""
    return bottom, top, localize(caption)


def _check_binary(grid: np.ndarray) -> None:
    finite = grid[np.isfinite(grid)]  # (n,)
    other = finite[(finite != 0) & (finite != 1)]  # (m,)
    if other.size:
        raise ValueError(
            f"binary=True draws a mask (True = may attend), so values must be 0/1; found {other[0]:g}. "
            "Pass the boolean mask itself, or leave binary off for weights."
        )


def _cell_boxes(rows: np.ndarray, cols: np.ndarray, x0: float, top: float, cell_w: float, cell_h: float) -> Path:
    """One closed square per (row, col) cell of the panel at (x0, top), as a single compound path."""
    left, upper = x0 + cols * cell_w, top - rows * cell_h  # (n,), (n,)
    corners = np.stack([left, upper - cell_h, left + cell_w, upper], axis=1)  # (n, 4): x0, y0, x1, y1
    boxes = corners[:, [[0, 1], [2, 1], [2, 3], [0, 3], [0, 1]]]  # (n, 5, 2) closed outlines
    codes = np.tile([Path.MOVETO, Path.LINETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY], len(rows))
    return Path(boxes.reshape(-1, 2), codes)


def plot_attention(
    weights,
    *,
    query_labels: Sequence | None = None,
    key_labels: Sequence | None = None,
    titles: Sequence[str] | None = None,
    heads: Sequence[int] | None = None,
    num_heads: int | None = None,
    num_kv_heads: int | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    colorbar: bool = True,
    cmap: str = "viridis",
    vmax: float | str | None = None,
    max_cols: int = 4,
    panel_size: float = 2.8,
    font_scale: float = 1.0,
    dpi: int = DPI,
    binary: bool | None = None,
) -> Figure:
    """Draw attention weights (or a boolean mask) as heatmaps and return the Figure.

    Args:
        weights: tensor or array ``(Lq, Lk)``, ``(heads, Lq, Lk)`` or ``(layers, heads, Lq, Lk)``.
            Rows are queries (y axis), columns are keys (x axis).
        query_labels, key_labels: token strings for the y and x axes; a list of lists gives each
            panel its own labels (then every panel is labelled). Labels thin out (every k-th)
            when the cells are too small for them.
        titles: one title per panel (defaults to ``head h`` / ``layer l · head h``).
        heads: the query-head index of each head panel, when the array holds a subset of
            the heads (e.g. ``[5]`` for ``weights[5:6]``); defaults to ``0, 1, ...``.
        num_heads: total query heads, when ``heads`` is a subset (defaults to ``len(heads)``).
        num_kv_heads: total kv heads (GQA): colour each head's frame and title by the kv
            head it reads, ``head // (num_heads // num_kv_heads)``; same colour = shared K/V.
        title: a title over the whole figure.
        annotate: print each value in its cell. Default: when at most 4 panels and the numbers fit.
            Numbers that would not be legible (cells smaller than the 9 pt text) are never
            printed; the figure then says so under the grid.
        colorbar: draw the colour key (colour bar, or the legend of a binary mask / NaN cells).
        vmax: top of the colour scale. ``None`` (default): 1, or the largest value when values
            exceed 1 (the caption says "extended"). ``"relative"``: the largest value shown.
            A number: that number (larger values are clipped; the caption says so).
        binary: draw a mask in two colours with a "may attend" / "blocked" legend; default:
            when ``weights`` is boolean. Values must be 0/1.
        max_cols: a ``(heads, Lq, Lk)`` grid wraps after this many panels per row.
        panel_size: inches per panel; raise it (or ``font_scale``) for a projector.
        dpi: pixels per inch of the figure (110: 9 pt text is ~14 px tall).

    Every panel is its own image (``fig.axes[0].images[i]`` holds panel ``i``). Text is drawn as
    glyph outlines: ``attn_core.viz.textpaths.text_items(fig)`` lists every string shown.
    """
    grid, is_bool = _as_grid(weights)  # (layers, heads, Lq, Lk)
    binary = is_bool if binary is None else bool(binary)
    num_layers, heads_shown, q_len, k_len = grid.shape
    for name, value, low in (("max_cols", max_cols, 1), ("panel_size", panel_size, 0.3), ("font_scale", font_scale,
                             0.3), ("dpi", dpi, 20)):  # fmt: skip
        if not value >= low:
            raise ValueError(f"{name} must be at least {low}, got {value!r}.")
    heads = list(range(heads_shown)) if heads is None else [int(h) for h in heads]
    if len(heads) != heads_shown:
        raise ValueError(f"{len(heads)} head indices given for {heads_shown} head panels.")
    num_heads = len(heads) if num_heads is None else num_heads
    panels = [(layer, slot) for layer in range(num_layers) for slot in range(heads_shown)]
    ncols = min(heads_shown, max_cols) if num_layers == 1 else heads_shown
    nrows = -(-len(panels) // ncols)
    if titles is not None and len(titles) != len(panels):
        raise ValueError(f"{len(titles)} titles given for {len(panels)} panels.")
    if num_kv_heads is not None and (num_kv_heads < 1 or num_heads % num_kv_heads or max(heads) >= num_heads):
        raise ValueError(
            f"num_kv_heads ({num_kv_heads}) must divide the number of query heads ({num_heads}), "
            f"and head indices {heads} must be below it."
        )
    q_lists, q_per_panel = _panel_labels("query_labels", query_labels, q_len, len(panels))
    k_lists, k_per_panel = _panel_labels("key_labels", key_labels, k_len, len(panels))
    if binary:
        _check_binary(grid)
    bottom_value, top_value, caption = _colour_scale(grid, vmax, binary)
    base_cmap = matplotlib.colormaps.get_cmap(cmap)
    colormap = ListedColormap([base_cmap(0.0), base_cmap(1.0)]) if binary else base_cmap
    colormap = colormap.with_extremes(bad="white")
    norm = Normalize(bottom_value, top_value, clip=True)
    colors = group_colors(num_heads, num_kv_heads) if num_kv_heads else None
    nonfinite = ~np.isfinite(grid)  # (layers, heads, Lq, Lk)

    # --- sizes, in inches (text in points / 72) ---------------------------------------------
    label_pt, value_pt, title_pt = FONT_PT * font_scale, VALUE_PT * font_scale, TITLE_PT * font_scale
    em, pad = label_pt / 72, 0.06
    panel_w = panel_size
    panel_h = panel_size * min(max(q_len / k_len, 0.5), 2.0)
    cell_w, cell_h = panel_w / k_len, panel_h / q_len
    rotate_keys = key_labels is not None
    k_need = 1.25 * em if rotate_keys else text_width(str(k_len - 1), label_pt) + 0.6 * em
    q_ticks = [_tick_texts(q_lists[i] if q_lists else None, q_len, cell_h, 1.25 * em) for i in range(len(panels))]
    k_ticks = [_tick_texts(k_lists[i] if k_lists else None, k_len, cell_w, k_need) for i in range(len(panels))]
    x_labelled = [i for i in range(len(panels)) if k_per_panel or i // ncols == nrows - 1]
    y_labelled = [i for i in range(len(panels)) if q_per_panel or i % ncols == 0]
    y_band = max(text_width(t, label_pt) for i in y_labelled for t in q_ticks[i]) + pad
    x_band = (max(text_width(t, label_pt) for i in x_labelled for t in k_ticks[i]) if rotate_keys else em) + pad

    panel_titles = []
    for index, (layer, slot) in enumerate(panels):
        head = heads[slot]
        if titles is not None:  # a caller's titles: in Chinese where a catalog has them (the notebooks' titles)
            panel_titles.append(translate(str(titles[index])))
        elif len(panels) > 1 or colors is not None:
            kv = f" · kv {kv_group_of_head(head, num_heads, num_kv_heads)}" if colors is not None else ""
            panel_titles.append(localize((f"layer {layer} · " if num_layers > 1 else "") + f"head {head}{kv}"))
        else:
            panel_titles.append("")
    title_band = title_pt * 1.35 / 72 + 0.04 if any(panel_titles) else 0.0
    overhang = max(0.0, max(text_width(t, title_pt) for t in panel_titles) - panel_w) + 0.15  # titles must not touch
    col_gap = max(0.2 + (y_band if q_per_panel else 0.0), overhang)
    row_gap = 0.15 + (x_band if k_per_panel else 0.0)

    value_w = text_width("-0.00" if bottom_value < 0 else "0.00", value_pt)
    legible = cell_w >= value_w + 0.35 * value_pt / 72 and cell_h >= 1.35 * value_pt / 72
    if annotate is None:
        annotate = not binary and len(panels) <= 4 and legible
    hidden_note = bool(annotate) and not legible
    annotate = bool(annotate) and legible

    kinds = [name for name, test in (("NaN", np.isnan), ("±inf", np.isinf)) if test(grid).any()]
    legend_names = [localize("may attend"), localize("blocked")] if binary else []
    entries = [(legend_names[0], colormap(1.0), None), (legend_names[1], colormap(0.0), None)] if binary else []
    entries += [(" / ".join(kinds), "white", "///")] if kinds else []
    bar = colorbar and not binary
    key_w = 0.0
    if bar:
        key_w = 0.22 + 0.16 + pad + text_width("-0.00", label_pt) + 0.1 + 1.3 * em
    if colorbar and entries:
        key_w = max(key_w, 0.22 + 0.18 + 0.08 + max(text_width(e[0], label_pt) for e in entries))

    name_band = 1.3 * em + 0.06  # the axis names "query" and "key"
    left = name_band + y_band
    top_margin = 0.1 + (1.5 * 12.5 * font_scale / 72 if title else 0.0)
    bottom = name_band + x_band + (1.4 * em if hidden_note else 0.0)
    grid_w = ncols * panel_w + (ncols - 1) * col_gap
    grid_h = nrows * (title_band + panel_h) + (nrows - 1) * row_gap
    left = max(left, (overhang - 0.15) / 2 + 0.05)
    note = localize("values hidden: cells too small for legible numbers (enlarge the panels)") if hidden_note else ""
    title = translate(title) if title else title
    width = max(
        left + grid_w + max(key_w, (overhang - 0.15) / 2) + 0.1,
        text_width(note, label_pt * 0.9) + 0.15,  # the note and the title must fit the figure
        text_width(title or "", 12.5 * font_scale) + 0.3,
    )
    height = top_margin + grid_h + bottom
    fig = FastPngFigure(figsize=(width, height), dpi=dpi)  # savefig to PNG: attn_core.viz.png
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    text = TextBatch()

    # --- panels --------------------------------------------------------------------------------
    hatched = []
    for index, (layer, slot) in enumerate(panels):
        row, col = divmod(index, ncols)
        x0 = left + col * (panel_w + col_gap)
        top = height - top_margin - title_band - row * (title_band + panel_h + row_gap)
        data = grid[layer, slot]  # (Lq, Lk)
        image = _Heatmap(ax, cmap=colormap, norm=norm, extent=(x0, x0 + panel_w, top - panel_h, top),
                         origin="upper", interpolation="nearest")  # fmt: skip
        image.set_data(data)
        ax.add_image(image)
        head = heads[slot]
        frame = Rectangle((x0, top - panel_h), panel_w, panel_h, fill=False, lw=3 if colors else 0.8,
                          ec=colors[head] if colors else "#888888")  # fmt: skip
        ax.add_artist(frame)
        if panel_titles[index]:
            color = colors[head] if colors else "black"
            text.add(
                x0 + panel_w / 2, top + 0.04, panel_titles[index], title_pt, va="bottom", color=color, role="title"
            )
        if index in x_labelled:
            for c, label in enumerate(k_ticks[index]):
                x = x0 + (c + 0.5) * cell_w
                if rotate_keys:
                    text.add(x, top - panel_h - pad, label, label_pt, ha="right", rotation=90, role="key-label")
                else:
                    text.add(x, top - panel_h - pad, label, label_pt, va="top", role="key-label")
        if index in y_labelled:
            for r, label in enumerate(q_ticks[index]):
                text.add(x0 - pad, top - (r + 0.5) * cell_h, label, label_pt, ha="right", role="query-label")
        if nonfinite[layer, slot].any():
            hatched.append(_cell_boxes(*np.nonzero(nonfinite[layer, slot]), x0, top, cell_w, cell_h))
        if annotate:
            shades = colormap(norm(data))  # (Lq, Lk, 4)
            dark = shades[..., :3].sum(-1) <= 1.6  # (Lq, Lk): white text reads better there
            for (r, c), value in np.ndenumerate(data):
                color = NAN_COLOR if not np.isfinite(value) else ("white" if dark[r, c] else "black")
                number = f"{value:.0f}" if binary and np.isfinite(value) else f"{value:.2f}"
                text.add(x0 + (c + 0.5) * cell_w, top - (r + 0.5) * cell_h, number, value_pt, color=color,
                         role="value", weight="bold" if color == NAN_COLOR else "normal")  # fmt: skip
    if hatched:
        path = Path.make_compound_path(*hatched)
        ax.add_artist(PathPatch(path, facecolor="white", edgecolor=NAN_HATCH, hatch="///", lw=0, gid="non-finite"))

    # --- axis names, colour key, note, title ----------------------------------------------------
    grid_y0 = bottom
    text.add(0.06, grid_y0 + grid_h / 2, localize("query"), label_pt, va="top", rotation=90, role="axis-name")
    text.add(left + grid_w / 2, bottom - x_band - 0.04, localize("key"), label_pt, va="top", role="axis-name")
    if hidden_note:
        text.add(0.06, 0.06, note, label_pt * 0.9, ha="left", va="bottom", color="#555555", role="note")
    key_x = left + grid_w + 0.22
    legend_h = len(entries) * max(0.24, 1.6 * em) if colorbar else 0.0
    if bar:
        bar_h = max(min(grid_h - legend_h - 0.1, 3.0), 0.6)
        bar_y0 = grid_y0 + (grid_h + legend_h - bar_h) / 2
        levels = np.linspace(bottom_value, top_value, 257)  # (257,) band edges
        ys = bar_y0 + (levels - bottom_value) / (top_value - bottom_value) * bar_h  # (257,)
        bands = np.stack([ys[:-1], ys[:-1], ys[1:], ys[1:]], axis=1)  # (256, 4) corner heights of each band
        bands = np.stack([np.broadcast_to([key_x, key_x + 0.16, key_x + 0.16, key_x], bands.shape), bands], -1)
        ramp = PolyCollection(bands, array=(levels[:-1] + levels[1:]) / 2, cmap=colormap, norm=norm, lw=0,
                              antialiased=False)  # fmt: skip
        ax.add_collection(ramp, autolim=False)
        ax.add_artist(Rectangle((key_x, bar_y0), 0.16, bar_h, fill=False, lw=0.6, ec="#555555"))
        ticks = [bottom_value, (bottom_value + top_value) / 2, top_value]
        if top_value > 1.0 and "relative" not in caption:
            ticks = [bottom_value, top_value] + (
                [1.0] if (top_value - 1.0) / (top_value - bottom_value) * bar_h > 1.4 * em else []
            )
            ax.hlines(bar_y0 + (1.0 - bottom_value) / (top_value - bottom_value) * bar_h, key_x, key_x + 0.16,
                      color="white", lw=1.2)  # fmt: skip
        for value in ticks:
            y = bar_y0 + (value - bottom_value) / (top_value - bottom_value) * bar_h
            text.add(key_x + 0.16 + pad, y, f"{value:.2f}", label_pt, ha="left", role="colorbar")
        caption_x = key_x + 0.16 + pad + text_width("-0.00", label_pt) + 0.1
        text.add(caption_x, bar_y0 + bar_h / 2, caption, label_pt * 0.9, va="top", rotation=90, role="caption")
        legend_top = bar_y0 - 0.1
    else:
        legend_top = grid_y0 + (grid_h + legend_h) / 2
    if colorbar:
        row_h = legend_h / max(len(entries), 1)
        for i, (name, face, hatch) in enumerate(entries):
            y = legend_top - (i + 0.5) * row_h
            ec = NAN_HATCH if hatch else "#555555"
            ax.add_artist(Rectangle((key_x, y - 0.09), 0.18, 0.18, facecolor=face, hatch=hatch, lw=0.6, ec=ec))
            text.add(key_x + 0.26, y, name, label_pt, ha="left", role="legend")
    text.draw(ax)
    if title:
        fig.suptitle(title, fontsize=12.5 * font_scale, y=1 - 0.05 / height, va="top")
    return fig
