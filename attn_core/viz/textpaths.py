"""Text drawn as glyph outlines: all the labels of a figure in a handful of paths.

Matplotlib 3.11 shapes and rasterises every line of every ``Text`` on its own: measured on the
course's 2-core machine that is ~0.5-1 ms per label, so an 8-head grid with its token labels,
titles and colour-bar ticks (~60 strings) spent most of its redraw on text. Here each string is
turned into its glyph outlines once (``TextPath``, cached) and every string of one colour is
drawn as ONE ``PathPatch``: a redraw costs ~0.02 ms per label. At 9-13 pt the pixels look the
same as ``Text``; an SVG keeps vector glyphs (shapes, not selectable text).

``TextBatch.add`` takes positions in the units of the transform the batch is drawn with (the
viz modules use an Axes whose data units are inches of the figure) and sizes in points.
Every drawn patch is a :class:`TextPaths` whose ``labels`` list the strings it holds, where,
and at what size: the tests read them instead of ``Text`` objects.

Outlines come from matplotlib's ``font.family`` (a list falls back glyph by glyph: ``ac.set_language("zh")``
appends the system's Chinese fonts and the shipped subset), and the cache is keyed by the fonts that family
resolves to (``i18n.fonts.family_key``), so switching languages or fonts never reuses outlines drawn with others.
A character no font has is an empty box, silently in ``TextPath``: ``warn_missing_glyphs`` warns once per character.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from matplotlib.font_manager import FontProperties
from matplotlib.patches import PathPatch
from matplotlib.path import Path
from matplotlib.textpath import TextPath

from attn_core.i18n import translate
from attn_core.i18n.fonts import family_key, warn_missing_glyphs

__all__ = ["Label", "TextPaths", "TextBatch", "text_width", "text_items"]

_POINTS_PER_INCH = 72.0


def _outline(text: str, weight: str) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Glyph outlines of ``text`` at 1 pt (so 1 unit = 1 em), baseline at y = 0: vertices, codes, ink x-range."""
    return _outline_in(text, weight, family_key())


@lru_cache(maxsize=8192)
def _outline_in(text: str, weight: str, fonts: tuple) -> tuple[np.ndarray, np.ndarray, float, float]:
    # once per (text, fonts): TextPath draws a missing glyph as a box, silently
    warn_missing_glyphs(text, weight, translate)
    path = TextPath((0, 0), text, size=1.0, prop=FontProperties(family=list(fonts[0]), weight=weight))
    vertices = np.asarray(path.vertices, dtype=np.float64)  # (n, 2) in em
    return vertices, np.asarray(path.codes), float(vertices[:, 0].min()), float(vertices[:, 0].max())


def _font_heights(weight: str) -> tuple[float, float, float]:
    """(cap height, ascender, descender) in em, measured on the glyphs themselves (any font)."""
    return _font_heights_in(weight, family_key())


@lru_cache(maxsize=8)
def _font_heights_in(weight: str, fonts: tuple) -> tuple[float, float, float]:
    cap = _outline("H0", weight)[0][:, 1].max()
    ascender = _outline("Hldk", weight)[0][:, 1].max()
    descender = -_outline("gjpqy", weight)[0][:, 1].min()
    return float(cap), float(ascender), float(descender)


def text_width(text: str, size: float, weight: str = "normal") -> float:
    """Ink width of ``text`` at ``size`` points, in inches (0 for an empty string)."""
    if not text.strip():
        return 0.0
    _, _, left, right = _outline(text, weight)
    return (right - left) * size / _POINTS_PER_INCH


@dataclass(frozen=True)
class Label:
    """One string of a :class:`TextPaths`: its anchor (x, y), size in points and rotation in degrees."""

    text: str
    x: float
    y: float
    size: float
    rotation: float


class TextPaths(PathPatch):
    """Strings of one colour and role drawn as one filled path; ``labels`` says which strings, where."""

    def __init__(self, path: Path, labels: list[Label], **kwargs):
        super().__init__(path, **kwargs)
        self.labels = labels

    @property
    def texts(self) -> list[str]:
        return [label.text for label in self.labels]


class TextBatch:
    """Collect strings with ``add``; ``draw`` turns them into one :class:`TextPaths` per (role, colour).

    ``ha`` and ``va`` align the unrotated string at its anchor, then it turns ``rotation`` degrees
    about the anchor (matplotlib's ``rotation_mode="anchor"``). ``va="center"`` centres the
    capitals and digits (not the ink of this one string), so labels on one line share a baseline.
    """

    def __init__(self):
        self._items: dict[tuple[str, str], list[tuple]] = defaultdict(list)

    def add(self, x, y, text, size, *, ha="center", va="center", rotation=0.0, color="black", role="text",
            weight="normal") -> None:  # fmt: skip
        if str(text).strip():
            self._items[(role, color)].append((str(text), float(x), float(y), float(size), ha, va, rotation, weight))

    def draw(self, ax, transform=None, zorder: float = 3.0) -> list[TextPaths]:
        """Add the paths to ``ax`` (drawn with ``transform``, default ``ax.transData``); return them."""
        patches = []
        for (role, color), items in self._items.items():
            vertices, codes, labels = [], [], []
            for text, x, y, size, ha, va, rotation, weight in items:
                outline, outline_codes, left, right = _outline(text, weight)
                cap, ascender, descender = _font_heights(weight)
                dx = {"left": -left, "right": -right, "center": -(left + right) / 2}[ha]
                dy = {"center": -cap / 2, "top": -ascender, "bottom": descender, "baseline": 0.0}[va]
                scale = size / _POINTS_PER_INCH  # em -> inches
                local = (outline + (dx, dy)) * scale  # (n, 2) aligned at the anchor, inches
                if rotation:
                    angle = np.deg2rad(rotation)
                    rotate = np.array([[np.cos(angle), np.sin(angle)], [-np.sin(angle), np.cos(angle)]])
                    local = local @ rotate  # (n, 2) turned counter-clockwise about the anchor
                vertices.append(local + (x, y))
                codes.append(outline_codes)
                labels.append(Label(text, x, y, size, rotation))
            path = Path(np.concatenate(vertices), np.concatenate(codes))
            patch = TextPaths(path, labels, facecolor=color, edgecolor="none", lw=0, gid=role, zorder=zorder)
            patch.set_transform(ax.transData if transform is None else transform)
            patch.set_clip_on(False)
            ax.add_artist(patch)
            patches.append(patch)
        return patches


def text_items(figure) -> list[tuple[str, Label, str]]:
    """Every (role, label, colour) drawn by a TextBatch in ``figure``: what a reader of the picture sees."""
    from matplotlib.colors import to_hex

    found = []
    for ax in figure.axes:
        for patch in ax.patches:
            if isinstance(patch, TextPaths):
                found += [(patch.get_gid(), label, to_hex(patch.get_facecolor())) for label in patch.labels]
    return found
