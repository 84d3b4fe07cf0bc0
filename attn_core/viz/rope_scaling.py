"""The band explorer of notebook 06b: what each long-context scaling does to each RoPE pair.

- ``band_frequencies(**params)`` -> plain and scaled inverse frequencies (``ac.rope_frequencies``), the turns of
  each pair over the original context, and the attention factor;
- ``render_bands(**params)`` -> a Figure: left, the ratio scaled / plain frequency of every pair against the number
  of turns it makes in the original context (YaRN's ``beta_fast`` / ``beta_slow`` and llama3's band edges marked);
  right, the average score ``(2/D) Σ cos(d·θ_i)`` against the distance, plain and scaled (notebook 06's decay curve,
  :func:`attn_core.viz.rope.distance_curves`'s ``average``);
- ``explain_bands(**params)`` -> one line with the numbers; ``band_explorer()`` -> both with controls.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyBboxPatch, Rectangle
from matplotlib.ticker import LogLocator, MaxNLocator

from attn_core.i18n import localize
from attn_core.positions.rope import rope_frequencies
from attn_core.viz.lite_axes import PAD_IN, TICK_IN, frame_and_ticks, lite_panel, tick_label, to_inches
from attn_core.viz.plotting import DPI
from attn_core.viz.rope import BASES
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import Explorer, merge_params

__all__ = ["BAND_DEFAULTS", "SCALINGS", "scaling_config", "band_frequencies", "render_bands", "explain_bands"]
__all__ += ["band_explorer", "BandExplorer"]

BAND_DEFAULTS = dict(
    scaling="yarn",
    factor=8.0,
    head_dim=64,
    base=10000.0,
    original_context=4096,
    beta_fast=32.0,
    beta_slow=1.0,
    panel_size=3.0,
    font_scale=1.0,
    values=False,
)
SCALINGS = ("linear", "llama3", "yarn")
_COLORS = {"plain": "#222222", "scaled": "#d95f02", "band": "#fde0c5"}
# plain tick labels, few ticks: mathtext labels ($10^{3}$) and ~200 minor ticks were most of a log-axis redraw
_TITLE_PAD = 6 / 72  # matplotlib's axes.titlepad, inches
_LOG_TICKS, _LINEAR_TICKS = LogLocator(base=10, numticks=8), MaxNLocator(nbins=5)


def _params(overrides: dict) -> dict:
    p = merge_params(BAND_DEFAULTS, overrides, "band explorer")
    if p["scaling"] not in SCALINGS:
        raise ValueError(f"scaling must be one of {SCALINGS}, got {p['scaling']!r}.")
    if p["beta_slow"] >= p["beta_fast"]:
        raise ValueError(
            f"beta_slow ({p['beta_slow']:g}) must be below beta_fast ({p['beta_fast']:g}): pairs turning more than "
            "beta_fast times are kept, fewer than beta_slow times are interpolated."
        )
    return p


def scaling_config(**overrides) -> dict:
    """The Hugging Face rope_parameters dict (without rope_theta) the explorer's settings stand for."""
    p = _params(overrides)
    if p["scaling"] == "linear":
        return {"rope_type": "linear", "factor": float(p["factor"])}
    common = {"factor": float(p["factor"]), "original_max_position_embeddings": int(p["original_context"])}
    if p["scaling"] == "llama3":
        return {"rope_type": "llama3", **common, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    return {"rope_type": "yarn", **common, "beta_fast": float(p["beta_fast"]), "beta_slow": float(p["beta_slow"])}


def band_frequencies(**overrides) -> dict:
    """``plain``/``scaled`` inverse frequencies ``(D/2,)``, ``turns`` of each pair in the original context
    (``original_context · θ_i / 2π``), ``ratio`` scaled / plain, and YaRN's ``attention_factor`` (numpy, float64)."""
    p = _params(overrides)
    plain, _ = rope_frequencies(int(p["head_dim"]), base=float(p["base"]))  # (D/2,)
    scaled, factor = rope_frequencies(int(p["head_dim"]), base=float(p["base"]), scaling=scaling_config(**p))
    plain, scaled = plain.numpy(), scaled.numpy()
    return {
        "plain": plain,
        "scaled": scaled,
        "ratio": scaled / plain,
        "turns": p["original_context"] * plain / (2 * math.pi),
        "attention_factor": factor,
    }


def _decay(inv_freq: np.ndarray, distance: np.ndarray) -> np.ndarray:
    # (N,): notebook 06's long-range decay, viz.rope.distance_curves' "average" for any inverse frequencies
    return np.cos(distance[:, None] * inv_freq).mean(-1)


def _plain_number(value: float, _position=None) -> str:
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"  # 0.01, 1, 100, 10,000: no mathtext to parse


def _log_limits(low: float, high: float) -> tuple[float, float]:
    """matplotlib's autoscale of a log axis: 5% margins in log space."""
    span = math.log10(high) - math.log10(low)
    return 10 ** (math.log10(low) - 0.05 * span), 10 ** (math.log10(high) + 0.05 * span)


def _log_ticks(limits) -> list[tuple[float, str]]:
    return [(v, _plain_number(v)) for v in _LOG_TICKS.tick_values(*limits) if limits[0] <= v <= limits[1]]


def _linear_ticks(limits) -> list[tuple[float, str]]:
    values = [v for v in _LINEAR_TICKS.tick_values(*limits) if limits[0] - 1e-12 <= v <= limits[1] + 1e-12]
    step = values[1] - values[0] if len(values) > 1 else 1.0
    return [(v, tick_label(v, step)) for v in values]


def render_bands(**overrides) -> Figure:
    """Two panels drawn without matplotlib's tick machinery (``viz.lite_axes``): a redraw is ~20 Axes-free ms."""
    p = _params(overrides)
    bands = band_frequencies(**p)
    size, font = float(p["panel_size"]), 9.0 * float(p["font_scale"])
    width, height = 2 * size + 1.2, size + 0.4 * float(p["font_scale"])
    fig = Figure(figsize=(width, height), dpi=DPI)
    # the layout of subplots_adjust(left=0.09, right=0.98, bottom=0.3, top=0.88, wspace=0.3), in inches
    panel_w, panel_h, bottom = 0.89 * width / 2.3, 0.58 * height, 0.3 * height
    lefts = (0.09 * width, 0.09 * width + 1.3 * panel_w)
    turns, text = bands["turns"], TextBatch()
    edges = {"yarn": (p["beta_slow"], p["beta_fast"]), "llama3": (1.0, 4.0)}.get(p["scaling"])
    spans = [turns.min(), turns.max()] + (list(edges) if edges else [])
    left = lite_panel(fig, (lefts[0], bottom, panel_w, panel_h), _log_limits(min(spans), max(spans)), (0, 1.08), "log")
    legend = []  # (kind, colour, label): the legend below the left panel
    if edges:
        left.axvspan(*edges, color=_COLORS["band"], gid="band")
        name = "ramp (YaRN)" if p["scaling"] == "yarn" else "smoothed band (llama3)"
        legend.append(("patch", _COLORS["band"], localize(name)))
    left.add_line(Line2D(turns, bands["ratio"], marker="o", color=_COLORS["scaled"], ms=3, lw=1.2))
    legend.append(("marker", _COLORS["scaled"], localize("scaled / plain")))
    left.add_line(Line2D(left.get_xlim(), [1 / p["factor"]] * 2, color="grey", ls=":", lw=1))
    if p["values"]:  # every 4th pair's ratio printed next to its point
        points = to_inches(left, turns[::4], bands["ratio"][::4])  # (n, 2)
        for (x, y), ratio in zip(points, bands["ratio"][::4], strict=True):
            text.add(x, y, f"{ratio:.2f}", font - 1, ha="left", va="baseline", role="value")
    distance = np.unique(np.geomspace(1, 4 * p["factor"] * p["original_context"], 200).round())  # (N,)
    plain, scaled = _decay(bands["plain"], distance), _decay(bands["scaled"], distance)  # (N,), (N,)
    low, high = min(plain.min(), scaled.min()), max(plain.max(), scaled.max())
    right = lite_panel(fig, (lefts[1], bottom, panel_w, panel_h), _log_limits(distance[0], distance[-1]),
                       (low - 0.05 * (high - low), high + 0.05 * (high - low)), "log")  # fmt: skip
    right.add_line(Line2D(distance, plain, color=_COLORS["plain"], lw=1.2))
    right.add_line(Line2D(distance, scaled, color=_COLORS["scaled"], lw=1.2))
    right.add_line(Line2D([p["original_context"]] * 2, right.get_ylim(), color="grey", ls=":", lw=1))
    labels = (
        (left, "turns in the original context", "frequency ratio", "each pair's new speed"),
        (right, "distance m − n (tokens)", "average score / |q|²", "long-range decay"),
    )
    for (ax, xlabel, ylabel, title), x0 in zip(labels, lefts, strict=True):
        yticks = _linear_ticks(ax.get_ylim())
        frame_and_ticks(ax, text, _log_ticks(ax.get_xlim()), yticks, font)
        centre = x0 + panel_w / 2
        text.add(centre, bottom + 1.02 * panel_h + _TITLE_PAD, localize(title), font + 1, va="baseline", role="title")
        text.add(centre, bottom - TICK_IN - PAD_IN - 1.3 * font / 72, localize(xlabel), font, va="top", role="xlabel")
        tick_w = max(text_width(label, font) for _, label in yticks)
        text.add(x0 - TICK_IN - PAD_IN - tick_w - 4 / 72, bottom + panel_h / 2, localize(ylabel), font, va="bottom",
                 rotation=90, role="ylabel")  # fmt: skip
    # left legend below its panel, entries side by side (it covered YaRN's ramp or llama3's band inside the axes)
    _legend(left, text, legend, lefts[0] + panel_w / 2, bottom - 0.2 * panel_h - 1.1 * font / 72, font, "band-legend",
            centred=True)  # fmt: skip
    curves = [("line", _COLORS["plain"], localize("plain")), ("line", _COLORS["scaled"], localize("scaled"))]
    _legend(right, text, curves, lefts[1] + 0.08, bottom + 0.08, font, "decay-legend", centred=False)
    text.draw(right, transform=fig.dpi_scale_trans)  # the last Axes drawn: text over the legend's frame
    return fig


def _legend(ax, text, entries, x, y, font, role, *, centred):
    """Legend entries: centred in one row at (x, y) (no frame), or stacked up from the lower-left corner (x, y)
    in a white frame, as matplotlib's legend at loc="lower left" draws it."""
    em, handle = font / 72, 2.0 * font / 72
    gap = 0.8 * em
    widths = [handle + gap + text_width(label, font) for _, _, label in entries]
    trans = ax.figure.dpi_scale_trans
    if centred:
        positions = []
        cursor = x - (sum(widths) + 2 * em * (len(entries) - 1)) / 2
        for w in widths:
            positions.append((cursor, y))
            cursor += w + 2 * em
    else:
        row = 1.4 * em
        box_w, box_h = max(widths) + 0.8 * em, row * len(entries) + 0.5 * em
        frame = FancyBboxPatch((x, y), box_w, box_h, boxstyle="round,pad=0,rounding_size=0.03", fc="white",
                               ec="#cccccc", lw=0.8, alpha=0.8, transform=trans, clip_on=False, zorder=2.5)  # fmt: skip
        ax.add_patch(frame)
        positions = [(x + 0.4 * em, y + box_h - 0.25 * em - (i + 0.5) * row) for i in range(len(entries))]
    for (kind, colour, label), (hx, hy) in zip(entries, positions, strict=True):
        if kind == "patch":
            # zorder 2.6: over a framed legend's white box (drawn at 2.5)
            ax.add_patch(Rectangle((hx, hy - 0.35 * em), handle, 0.7 * em, color=colour, transform=trans,
                                   clip_on=False, zorder=2.6))  # fmt: skip
        else:
            marker = dict(marker="o", ms=3, markevery=[1]) if kind == "marker" else {}  # one dot mid-handle
            ax.add_line(Line2D([hx, hx + handle / 2, hx + handle], [hy] * 3, color=colour, lw=1.2, transform=trans,
                               clip_on=False, zorder=2.6, **marker))  # fmt: skip
        text.add(hx + handle + gap, hy, label, font, ha="left", role=role)


def explain_bands(**overrides) -> str:
    p = _params(overrides)
    bands = band_frequencies(**p)
    kept = int((np.abs(bands["ratio"] - 1) < 1e-9).sum())
    divided = int((np.abs(bands["ratio"] * p["factor"] - 1) < 1e-9).sum())
    pairs = len(bands["ratio"])
    return (
        f"{p['scaling']}, factor {p['factor']:g}: of {pairs} pairs, {kept} keep their speed, {divided} are slowed "
        f"{p['factor']:g}x, {pairs - kept - divided} are blended; attention factor {bands['attention_factor']:.3f} "
        f"(scores x {bands['attention_factor'] ** 2:.3f})."
    )


class BandExplorer(Explorer):
    DISPLAY = ("panel_size", "font_scale", "values")

    def render(self, params: dict) -> tuple[Figure, str]:
        return render_bands(**params), explain_bands(**params)


def band_explorer(**fixed) -> BandExplorer:
    """06b: pick a scaling and its factor, the head size, base and original context, and YaRN's betas."""
    import ipywidgets as w

    style = {"description_width": "initial"}
    controls = {
        "scaling": w.Dropdown(description="scaling", options=list(SCALINGS), value="yarn", style=style),
        "factor": w.Dropdown(description="factor", options=[2.0, 4.0, 8.0, 16.0, 32.0, 40.0], value=8.0, style=style),
        "head_dim": w.Dropdown(description="head_dim", options=[32, 64, 128], value=64, style=style),
        "base": w.Dropdown(description="base", options=list(BASES), value=10000.0, style=style),
        "original_context": w.Dropdown(
            description="original context", options=[2048, 4096, 8192], value=4096, style=style
        ),
        "beta_fast": w.FloatSlider(description="beta_fast", value=32.0, min=2.0, max=64.0, step=1.0, style=style),
        "beta_slow": w.FloatSlider(description="beta_slow", value=1.0, min=0.25, max=4.0, step=0.25, style=style),
    }
    tooltip = localize("beta_fast and beta_slow are YaRN's band edges; linear and llama3 do not use them")

    def enable_betas(_=None):
        # Grey out YaRN's betas for the schemes that ignore them, so a learner sees they do nothing there.
        for name in ("beta_fast", "beta_slow"):
            controls[name].disabled = controls["scaling"].value != "yarn"
            controls[name].tooltip = tooltip if controls[name].disabled else ""

    enable_betas()
    controls["scaling"].observe(enable_betas, names="value")
    return BandExplorer("rope_bands", controls, fixed)
