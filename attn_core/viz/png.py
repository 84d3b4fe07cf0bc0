"""PNG bytes of a figure, fast: every explorer redraw and every saved attention map pays for the encoding.

Matplotlib hands the pixels to Pillow, which filters each row adaptively and deflates at level 6: for a 110-dpi
8-head grid (1478 x 744 px) that was ~55 ms of a 90 ms ``plot_attention(...)`` + ``savefig`` here. This writes
the canvas's RGBA rows with PNG's "up" filter (a row minus the row above: the flat areas of a heatmap become
zeros) and deflates at level 1, ~5x faster for files of about the same size. The pixels are the same
(tests/test_widgets.py decodes both).
"""

from __future__ import annotations

import os
import struct
import zlib

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["figure_png", "FastPngFigure"]


def figure_png(figure: Figure) -> bytes:
    """PNG bytes of ``figure`` at its own dpi (dpi recorded in a pHYs chunk, as matplotlib does)."""
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())  # (H, W, 4) uint8, top row first
    height, width, _ = pixels.shape
    flat = pixels.reshape(height, width * 4)  # (H, 4W)
    rows = np.empty((height, 1 + width * 4), dtype=np.uint8)  # (H, 1 + 4W): filter byte, then the row
    rows[:, 0] = 2  # filter "up"
    rows[0, 1:] = flat[0]  # above the first row PNG assumes zeros
    np.subtract(flat[1:], flat[:-1], out=rows[1:, 1:])  # (H-1, 4W) bytewise, wrapping mod 256 as PNG does

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8-bit RGBA, deflate, no interlace
    per_metre = round(figure.dpi / 0.0254)
    physical = struct.pack(">IIB", per_metre, per_metre, 1)  # pixels per metre, unit = metre
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"pHYs", physical)
        + chunk(b"IDAT", zlib.compress(rows, 1))
        + chunk(b"IEND", b"")
    )


class FastPngFigure(Figure):
    """A Figure whose plain ``savefig(path_or_file)`` to PNG goes through :func:`figure_png`.

    Plain means: PNG (by ``format=`` or the file name), no other keyword arguments and matplotlib's savefig
    settings at their defaults (dpi = the figure's, no tight bounding box, opaque). Anything else (``dpi=300``,
    ``bbox_inches="tight"``, SVG, PDF...) is matplotlib's own ``savefig``, unchanged.
    """

    def __repr__(self) -> str:  # what a notebook prints under a figure: the same text as any matplotlib Figure
        return super().__repr__().replace(type(self).__name__, "Figure", 1)

    def savefig(self, fname, *, transparent=None, **kwargs):
        fmt = kwargs.get("format") or (os.path.splitext(os.fspath(fname))[1][1:].lower() if _is_path(fname) else None)
        fmt = fmt or matplotlib.rcParams["savefig.format"]
        plain = (
            fmt == "png"
            and set(kwargs) <= {"format"}
            and not transparent
            and not matplotlib.rcParams["savefig.transparent"]
            and matplotlib.rcParams["savefig.dpi"] == "figure"
            and matplotlib.rcParams["savefig.bbox"] is None
            and matplotlib.rcParams["savefig.facecolor"] == "auto"
        )
        if not plain:
            return super().savefig(fname, transparent=transparent, **kwargs)
        data = figure_png(self)
        if _is_path(fname):
            with open(fname, "wb") as file:
                file.write(data)
        else:
            fname.write(data)
        return None


def _is_path(fname) -> bool:
    return isinstance(fname, str | os.PathLike)
