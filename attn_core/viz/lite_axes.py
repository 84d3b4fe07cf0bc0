"""Panels drawn without matplotlib's tick machinery: the explorers' frames, ticks and labels in a few paths.

An Axes with visible axes makes a Tick (two Line2D, two Text) per tick and lays every label out on each draw:
for 06b's band explorer and 09b's mask explorer that was 150-350 ms of a redraw (issue #33's explorer speed).
Here a panel is an Axes with its axis machinery off (the data still lives in its data coordinates: lines,
images, spans); its frame and tick marks are one LineCollection and every string one ``textpaths.TextBatch``,
all placed in figure inches (``fig.dpi_scale_trans``). ``textpaths.text_items(fig)`` lists what is written, by role.
"""

from __future__ import annotations

import numpy as np
from matplotlib import axis as maxis
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection

__all__ = ["lite_panel", "to_inches", "tick_label", "frame_and_ticks"]

TICK_IN = 3.5 / 72  # matplotlib's default major tick length and label pad, in inches
PAD_IN = 3.5 / 72


class _TicklessX(maxis.XAxis):
    def set_clip_path(self, path, transform=None):  # the stock one builds a Tick only to clip it
        Artist.set_clip_path(self, path, transform)


class _TicklessY(maxis.YAxis):
    def set_clip_path(self, path, transform=None):
        Artist.set_clip_path(self, path, transform)


class LiteAxes(Axes):
    """An Axes that is never drawn with its axes on: no Tick objects made (most of an Axes' creation), no grid.

    Data coordinates, limits and scales work as in any Axes; ``frame_and_ticks`` draws the frame and ticks.
    """

    def _init_axis(self):
        self.xaxis = _TicklessX(self, clear=False)
        self.spines.bottom.register_axis(self.xaxis)
        self.spines.top.register_axis(self.xaxis)
        self.yaxis = _TicklessY(self, clear=False)
        self.spines.left.register_axis(self.yaxis)
        self.spines.right.register_axis(self.yaxis)

    def grid(self, visible=None, which="major", axis="both", **kwargs):  # never shown: axis off
        pass

    def tick_params(self, axis="both", **kwargs):  # Axes.__init__ styles ticks from rcParams: there are none
        pass


def lite_panel(fig, box: tuple[float, float, float, float], xlim, ylim, xscale: str = "linear", yscale: str = "linear"):
    """An Axes at ``box`` (left, bottom, width, height in inches) drawing only what is added to it."""
    width, height = fig.get_size_inches()
    left, bottom, w, h = box
    ax = fig.add_axes(LiteAxes(fig, (left / width, bottom / height, w / width, h / height)))
    ax.set_axis_off()
    ax.set_autoscale_on(False)
    if xscale != "linear":
        ax.set_xscale(xscale)
    if yscale != "linear":
        ax.set_yscale(yscale)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    return ax


def to_inches(ax, x, y) -> np.ndarray:
    """(n, 2) figure inches of the data points (x, y) of ``ax``."""
    x, y = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(y, dtype=float))
    points = np.column_stack([x.ravel(), y.ravel()])  # (n, 2)
    return ax.transData.transform(points) / ax.figure.dpi


def tick_label(value: float, step: float) -> str:
    """A linear axis' tick label as matplotlib's ScalarFormatter writes it: the step's decimals, a true minus."""
    decimals = len(f"{step:.9f}".rstrip("0").split(".")[1])  # 0.25 -> 2, 0.2 -> 1, 1.0 -> 0
    text = f"{value:.{decimals}f}"
    return text.replace("-", "\u2212") if value < 0 and float(text) != 0 else text.lstrip("-")


def frame_and_ticks(ax, text, xticks, yticks, font: float, *, frame: bool = True) -> LineCollection:
    """The panel's frame and outward tick marks (one LineCollection) and its tick labels into ``text``.

    ``xticks`` / ``yticks``: (value, label) pairs in data units; labels go below / left of the panel.
    """
    (x0, y0), (x1, y1) = to_inches(ax, ax.get_xlim(), ax.get_ylim())
    x0, x1, y0, y1 = min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1)
    segments = [[(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)]] if frame else []
    if xticks:
        xs = to_inches(ax, [v for v, _ in xticks], ax.get_ylim()[0])[:, 0]
        for x, (_, label) in zip(xs, xticks, strict=True):
            segments.append([(x, y0), (x, y0 - TICK_IN)])
            text.add(x, y0 - TICK_IN - PAD_IN, label, font, va="top", role="xtick")
    if yticks:
        ys = to_inches(ax, ax.get_xlim()[0], [v for v, _ in yticks])[:, 1]
        for y, (_, label) in zip(ys, yticks, strict=True):
            segments.append([(x0, y), (x0 - TICK_IN, y)])
            text.add(x0 - TICK_IN - PAD_IN, y, label, font, ha="right", role="ytick")
    lines = LineCollection(segments, colors="black", linewidths=0.8, transform=ax.figure.dpi_scale_trans)
    lines.set_clip_on(False)
    ax.add_collection(lines, autolim=False)
    return lines
