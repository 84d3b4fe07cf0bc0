"""The fonts Chinese figures are drawn with after ``ac.set_language("zh")``, and a warning for a missing glyph.

Matplotlib falls back glyph by glyph through ``rcParams["font.family"]`` (a list), so ``zh`` appends Chinese fonts
to the family the learner already had instead of replacing it::

    ["sans-serif",                      # what was there: font.sans-serif's first installed font, DejaVu Sans
     "Noto Sans CJK SC", "SimHei", ...  # the system's Chinese fonts that matplotlib's font manager knows, if any
     "attn-core Noto Sans CJK SC subset"]  # the subset shipped in attn_core/fonts: the fallback

Latin letters and digits stay the learner's (DejaVu Sans unless they chose another); a learner's own
``rcParams["font.sans-serif"] = ["SimHei"]``, before or after ``set_language``, still takes effect, because the
generic ``"sans-serif"`` stays first. A full system font covers what a learner types; the shipped subset covers
GB2312 level 1 (the 3,755 common characters) plus every character of the edition, and carries its own family name
so it never shadows a full "Noto Sans CJK SC" installed on the machine.

A character none of these fonts has is drawn as an empty box. Matplotlib warns for a ``Text`` (titles, axis
names); nothing warns for a ``TextPath`` (the labels of ``attn_core.viz``), so :func:`warn_missing_glyphs` does,
once per character and process.
"""

from __future__ import annotations

import functools
import logging
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

SUBSET_FAMILY = "attn-core Noto Sans CJK SC subset"
SUBSET_FILE = Path(__file__).resolve().parents[1] / "fonts" / "NotoSansCJKsc-Regular-subset.otf"
# Simplified-Chinese sans fonts of Linux, macOS and Windows, most complete first; the first found wins a glyph
SYSTEM_CJK_FAMILIES = (
    "Noto Sans CJK SC",
    "Source Han Sans SC",
    "Source Han Sans CN",
    "Noto Sans SC",
    "PingFang SC",
    "Hiragino Sans GB",
    "Microsoft YaHei",
    "SimHei",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Heiti SC",
)

_family_before: list[str] | None = None  # rcParams["font.family"] before set_language("zh")
_family_set: list[str] | None = None  # what set_language("zh") put there
_warned: set[str] = set()
_GENERIC = ("sans-serif", "serif", "monospace", "cursive", "fantasy")


class MissingGlyphWarning(UserWarning):
    """A character of a label has no glyph in any font of the family: it is drawn as an empty box."""


def system_cjk_families() -> list[str]:
    """The families of :data:`SYSTEM_CJK_FAMILIES` that matplotlib's font manager has, in that order."""
    from matplotlib.font_manager import fontManager

    known = {font.name for font in fontManager.ttflist}
    return [family for family in SYSTEM_CJK_FAMILIES if family in known]


def _only_regular_cjk(record) -> bool:
    """Drop "Failed to find font weight bold for <a Chinese font>": the subset (and e.g. WenQuanYi) ships one
    weight, so bold Chinese is drawn regular on purpose; every other font message passes."""
    message = record.msg if isinstance(record.msg, str) else ""
    chinese = (SUBSET_FAMILY, *SYSTEM_CJK_FAMILIES)
    return not (message.startswith("findfont: Failed to find font weight") and set(record.args or ()) & set(chinese))


@functools.cache
def register_subset() -> None:
    """Add the shipped subset to matplotlib's font list (once per process; ~3 ms)."""
    from matplotlib import font_manager

    logging.getLogger(font_manager.__name__).addFilter(_only_regular_cjk)
    if not SUBSET_FILE.is_file():
        raise FileNotFoundError(
            f"{SUBSET_FILE} is missing: reinstall attn_core, or rebuild it with python tools/build_cjk_font_subset.py"
        )
    font_manager.fontManager.addfont(str(SUBSET_FILE))


def chinese_families(before: list[str]) -> list[str]:
    """``font.family`` for Chinese figures: ``before``, then the system's Chinese fonts, then the subset."""
    added = [family for family in (*system_cjk_families(), SUBSET_FAMILY) if family not in before]
    return [*before, *added]


def use_chinese_fonts() -> None:
    """``set_language("zh")``: append the Chinese fonts to the current family (twice: from the first one's base)."""
    global _family_before, _family_set
    import matplotlib

    register_subset()
    current = list(matplotlib.rcParams["font.family"])
    if _family_before is None or current != _family_set:  # first call, or the learner chose a family since
        _family_before = current
    _family_set = chinese_families(_family_before)
    matplotlib.rcParams["font.family"] = _family_set


def restore_fonts() -> None:
    """``set_language("en")``: put back the family of before ``zh`` unless the learner has chosen one since."""
    global _family_before, _family_set
    import matplotlib

    if _family_before is not None and list(matplotlib.rcParams["font.family"]) == _family_set:
        matplotlib.rcParams["font.family"] = _family_before
    _family_before = _family_set = None


def family_key() -> tuple:
    """What decides which fonts draw a label now: the family, the generic lists it names, the known fonts.

    A cache of glyph outlines keyed by this never reuses outlines drawn with other fonts (a learner's later
    ``font.sans-serif``, a font added with ``fontManager.addfont``)."""
    import matplotlib  # (imported already: a dictionary lookup; this runs for every label drawn)

    rc = matplotlib.rcParams
    families = tuple(rc["font.family"])
    generic = tuple(tuple(rc["font." + name]) for name in _GENERIC if name in families) if families else ()
    return families, generic, len(matplotlib.font_manager.fontManager.ttflist)


@functools.lru_cache(maxsize=64)
def _charmap(path: str, face_index: int) -> frozenset[int]:
    from matplotlib.font_manager import get_font
    from matplotlib.ft2font import FT2Font

    font = FT2Font(path, face_index=face_index) if face_index else get_font(path)
    return frozenset(font.get_charmap())


def missing_glyphs(text: str, weight: str = "normal") -> list[str]:
    """The characters of ``text`` that no font of the current ``font.family`` has (drawn as empty boxes)."""
    from matplotlib.font_manager import FontProperties, fontManager

    paths = fontManager._find_fonts_by_props(FontProperties(weight=weight))
    cmaps = [_charmap(str(path), getattr(path, "face_index", 0)) for path in paths]
    seen: dict[str, None] = {}
    for char in text:
        if char.isprintable() and not char.isspace() and not any(ord(char) in cmap for cmap in cmaps):
            seen[char] = None
    return list(seen)


def warn_missing_glyphs(text: str, weight: str = "normal", translate: Callable[[str], str] = str) -> None:
    """Warn once per character of ``text`` that would be drawn as an empty box (a ``TextPath`` never warns).

    ``translate`` is ``attn_core.i18n.translate``, passed by the caller (``viz.textpaths``): this module sits below
    ``attn_core.i18n``, which imports it, so it cannot import it back (``tests/test_import_graph.py``)."""
    new = [char for char in missing_glyphs(text, weight) if char not in _warned]
    if not new:
        return
    _warned.update(new)
    chars = "".join(new)
    message = (
        f"no font has a glyph for {chars!r} (in the label {text!r}): drawn as an empty box. "
        "Install a Chinese font (e.g. Noto Sans CJK SC), delete matplotlib's font list "
        "(fontlist-*.json in matplotlib.get_cachedir()) and restart the kernel."
    )
    warnings.warn(translate(message), MissingGlyphWarning, stacklevel=_outside_the_library())


def _outside_the_library() -> int:
    """The ``stacklevel`` that names the learner's line (the first frame outside attn_core, matplotlib, functools)."""
    frame, level = sys._getframe(2), 2  # the caller of warn_missing_glyphs is level 2 for warnings.warn here
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in _LIBRARY:
        frame, level = frame.f_back, level + 1
    return level


_LIBRARY = ("attn_core", "matplotlib", "functools")
