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
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullLocator

from attn_core.i18n import localize
from attn_core.positions.rope import rope_frequencies
from attn_core.viz.plotting import DPI
from attn_core.viz.rope import BASES
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


def render_bands(**overrides) -> Figure:
    p = _params(overrides)
    bands = band_frequencies(**p)
    size, font = float(p["panel_size"]), 9.0 * float(p["font_scale"])
    fig = Figure(figsize=(2 * size + 1.2, size + 0.4 * float(p["font_scale"])), dpi=DPI)
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.3, top=0.88, wspace=0.3)
    left, right = fig.subplots(1, 2)
    turns = bands["turns"]
    if p["scaling"] == "yarn":
        left.axvspan(p["beta_slow"], p["beta_fast"], color=_COLORS["band"], label=localize("ramp (YaRN)"))
    elif p["scaling"] == "llama3":
        left.axvspan(1.0, 4.0, color=_COLORS["band"], label=localize("smoothed band (llama3)"))
    left.plot(turns, bands["ratio"], "o-", color=_COLORS["scaled"], ms=3, lw=1.2, label=localize("scaled / plain"))
    left.axhline(1 / p["factor"], color="grey", ls=":", lw=1)
    if p["values"]:  # every 4th pair's ratio printed next to its point
        for pair in range(0, len(turns), 4):
            left.annotate(f"{bands['ratio'][pair]:.2f}", (turns[pair], bands["ratio"][pair]), fontsize=font - 1)
    left.set_xscale("log")
    left.set_ylim(0, 1.08)
    left.set_xlabel(localize("turns in the original context"), fontsize=font)
    left.set_ylabel(localize("frequency ratio"), fontsize=font)
    left.set_title(localize("each pair's new speed"), fontsize=font + 1, y=1.02)  # fixed y: no placement pass
    # below the axes: inside, it covered YaRN's ramp or llama3's band in some setting or other
    left.legend(fontsize=font, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, frameon=False)
    distance = np.unique(np.geomspace(1, 4 * p["factor"] * p["original_context"], 200).round())  # (N,)
    right.plot(distance, _decay(bands["plain"], distance), color=_COLORS["plain"], lw=1.2, label=localize("plain"))
    right.plot(distance, _decay(bands["scaled"], distance), color=_COLORS["scaled"], lw=1.2, label=localize("scaled"))
    right.axvline(p["original_context"], color="grey", ls=":", lw=1)
    right.set_xscale("log")
    right.set_xlabel(localize("distance m − n (tokens)"), fontsize=font)
    right.set_ylabel(localize("average score / |q|²"), fontsize=font)
    right.set_title(localize("long-range decay"), fontsize=font + 1, y=1.02)
    right.legend(fontsize=font)
    for axis in (left, right):
        axis.tick_params(labelsize=font)
        # A log axis makes ~200 minor tick artists and mathtext labels ($10^{3}$, parsed on every draw): most of a
        # redraw. Plain labels and no minor ticks keep the explorer's render near the series' 50 ms.
        axis.xaxis.set_major_locator(LogLocator(base=10, numticks=8))
        axis.xaxis.set_minor_locator(NullLocator())
        axis.xaxis.set_major_formatter(FuncFormatter(_plain_number))
        axis.yaxis.set_major_locator(MaxNLocator(nbins=5))
    return fig


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
