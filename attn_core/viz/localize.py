"""One call that puts a notebook's own matplotlib figure into the learner's language.

``attn_core.viz`` draws its labels through the catalogs already. A figure a notebook draws itself (``ax.set_title``,
``ax.legend``, ``ax.text``, ...) can do the same without wrapping every string: the English notebook ends the cell
with ``ac.localize_figure(fig)``, and its Chinese edition runs the identical code. In English it changes nothing.

Every text artist of the figure is looked up in the catalogs (``attn_core/i18n/zh_*.py``, the same entries as the
exercise verdicts): titles, the suptitle, axis labels, tick labels, legend entries and title, annotations,
``fig.text``/``ax.text`` and colour-bar labels. A text with no catalog entry (a number, a token, a name) stays as it
is. Glyph-outline labels (``attn_core.viz.textpaths``) are not Text artists: their modules translate them.
"""

from __future__ import annotations

from matplotlib.figure import Figure, SubFigure
from matplotlib.text import Text

from attn_core.i18n import get_language, translate

__all__ = ["localize_figure"]


def localize_figure(figure: Figure) -> Figure:
    """Translate every text of ``figure`` in place for ``ac.set_language``'s language; return the figure.

    Raises:
        TypeError: ``figure`` is not a matplotlib Figure (e.g. an Axes: pass ``ax.figure``).
    """
    if not isinstance(figure, Figure | SubFigure):
        hint = " (an Axes: pass ax.figure)" if hasattr(figure, "figure") else ""
        raise TypeError(f"localize_figure takes a matplotlib Figure, got {type(figure).__name__}{hint}.")
    if get_language() == "en":
        return figure
    for text in figure.findobj(Text):  # every Text artist, including legends', ticks' and annotations'
        shown = text.get_text()
        if shown and not shown.isspace():
            translated = translate(shown)
            if translated != shown:
                text.set_text(translated)
    return figure
