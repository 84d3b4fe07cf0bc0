"""One size for every figure a notebook shows: ``ac.set_figure_scale(1.5)``, a teacher's one line for a room.

A figure is shown at its pixel size (one PNG pixel per CSS pixel in JupyterLab, VS Code and the book), so the
scale multiplies the resolution it is drawn at: the figure and every label in it grow together and stay sharp.
Plain figures (``plot_attention`` and every other ``plot_*``: any matplotlib ``Figure`` a cell returns) go
through IPython's PNG formatter, replaced here while the scale is not 1; explorers ask :func:`figure_scale`
when they draw (``Explorer.update``), so their own "size" slider still works on top of it. Saved files
(``fig.savefig``) keep the figure's own dpi.
"""

from __future__ import annotations

import math

from matplotlib.figure import Figure

__all__ = ["set_figure_scale", "figure_scale", "scaled_png"]

MIN_SCALE, MAX_SCALE = 0.5, 4.0  # half size for a phone ... four times for the back row of a lecture hall
_state = {"scale": 1.0, "replaced": None}  # replaced: (formatter, the PNG printer it had for Figure, or None)


def figure_scale() -> float:
    """The scale set by :func:`set_figure_scale` (1.0 until then)."""
    return _state["scale"]


def set_figure_scale(scale: float) -> None:
    """Show every figure of this notebook ``scale`` times as large (1.0: as drawn; 1.5: for a projector).

    Applies to figures shown after the call, plain and explorers alike (an explorer redraws at its next change).
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise TypeError(f"set_figure_scale: scale must be a number, got {scale!r}.")
    if not MIN_SCALE <= scale <= MAX_SCALE:
        raise ValueError(f"set_figure_scale: scale must be between {MIN_SCALE} and {MAX_SCALE}, got {scale}.")
    _state["scale"] = float(scale)
    _install_png_formatter(scale != 1.0)


def scaled_png(figure: Figure, base64: bool = True, **print_kwargs):
    """The PNG IPython shows for ``figure``, drawn at its dpi times the figure scale (tight box, as by default)."""
    from IPython.core.pylabtools import print_figure

    retina = print_kwargs.pop("fmt", "png") in ("retina", "png2x")
    dpi = figure.dpi * figure_scale() * (2 if retina else 1)
    return print_figure(figure, "png", base64=base64, **{**print_kwargs, "dpi": dpi})


def _install_png_formatter(scaled: bool) -> None:
    try:
        from IPython import get_ipython
    except ImportError:  # no IPython: nothing shows figures inline, explorers still read figure_scale()
        return
    shell = get_ipython()
    if shell is None:
        return
    formatter = shell.display_formatter.formatters["image/png"]
    if _state["replaced"] is None:
        try:
            before = formatter.lookup_by_type(Figure)
        except KeyError:
            before = None
        _state["replaced"] = (formatter, before)
    formatter_then, before = _state["replaced"]
    if scaled:
        keywords = dict(getattr(before, "keywords", {}))  # matplotlib-inline's print_figure_kwargs, kept
        keywords.pop("base64", None)
        if getattr(getattr(before, "func", None), "__name__", "") == "retina_figure":
            keywords["fmt"] = "retina"

        def scaled_figure_png(figure):
            return scaled_png(figure, **keywords)

        formatter_then.for_type(Figure, scaled_figure_png)
        _state["ours"] = scaled_figure_png
        if not _state.get("watching"):  # a later `%matplotlib inline` puts its own printer back: take it again
            shell.events.register("post_run_cell", _keep_scaled_formatter)
            _state["watching"] = True
        return
    formatter_then.pop(Figure, None)
    if before is not None:
        formatter_then.for_type(Figure, before)
    _state["replaced"] = None


def _keep_scaled_formatter(*_args) -> None:
    replaced = _state["replaced"]
    if replaced is None:  # scale back at 1: nothing to keep
        return
    formatter, _ = replaced
    try:
        now = formatter.lookup_by_type(Figure)
    except KeyError:
        now = None
    if now is not _state.get("ours"):
        _state["replaced"] = (formatter, now)  # the new printer is what scale 1 restores
        _install_png_formatter(True)
