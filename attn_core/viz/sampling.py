"""The sampling explorer of notebook 11: what temperature, top-k and top-p leave of one next-token distribution.

- ``sampling_distribution(logits, **params)`` -> ``(V,)`` float64 probabilities that a draw uses
  (:func:`attn_core.models.generation.next_token_distribution`, the function ``lm.generate`` samples with);
- ``render_sampling(logits, names, **params)`` -> a Figure: the ``shown`` most likely tokens at temperature 1, their
  probability before (grey) and after the settings (blue), on a log scale; a token the settings removed says "cut";
- ``explain_sampling(logits, **params)`` -> one line: tokens left, the top token's probability, the entropy of the draw;
- ``sampling_explorer(logits, decode)`` -> both with controls (``decode(token_id) -> str`` names the bars).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from attn_core.i18n import localize
from attn_core.models.generation import next_token_distribution
from attn_core.viz.lite_axes import PAD_IN, TICK_IN, frame_and_ticks, lite_panel, to_inches
from attn_core.viz.plotting import DPI
from attn_core.viz.rope_scaling import _legend
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import Explorer, merge_params

__all__ = ["SAMPLING_DEFAULTS", "sampling_distribution", "render_sampling", "explain_sampling", "sampling_explorer"]
__all__ += ["SamplingExplorer", "sorted_distribution"]

SAMPLING_DEFAULTS = dict(temperature=1.0, top_k=0, top_p=1.0, shown=12, panel_size=3.6, font_scale=1.0, values=True)
_COLORS = {"before": "#c7c7c7", "after": "#1f77b4", "cut": "#d62728"}


def _params(overrides: dict) -> dict:
    p = merge_params(SAMPLING_DEFAULTS, overrides, "sampling explorer")
    if not p["temperature"] > 0:
        raise ValueError(f"temperature must be > 0 (0 is greedy: always the top token), got {p['temperature']!r}.")
    if isinstance(p["top_k"], bool) or not isinstance(p["top_k"], int) or p["top_k"] < 0:
        raise ValueError(f"top_k must be an int >= 0 (0: off), got {p['top_k']!r}.")
    if not 0 < p["top_p"] <= 1:
        raise ValueError(f"top_p must lie in (0, 1] (1: off), got {p['top_p']!r}.")
    if isinstance(p["shown"], bool) or not isinstance(p["shown"], int) or p["shown"] < 1:
        raise ValueError(f"shown must be a positive int (bars drawn), got {p['shown']!r}.")
    return p


def _as_vector(logits: torch.Tensor) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor) or logits.ndim != 1 or logits.numel() < 2:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(f"logits must be one next-token vector (V,) with V >= 2, got {shape}: take lm(...)[0, -1].")
    return logits


def sampling_distribution(logits: torch.Tensor, **overrides) -> torch.Tensor:
    """``(V,)`` float64: what sampling draws from after ``temperature``, ``top_k`` (0 = off), ``top_p`` (1 = off)."""
    p = _params(overrides)
    options = dict(temperature=float(p["temperature"]), top_k=p["top_k"] or None, top_p=float(p["top_p"]))
    return next_token_distribution(_as_vector(logits)[None], **options)[0]  # (V,)


def _bits(probs: torch.Tensor) -> float:
    kept = probs[probs > 0]  # (n,)
    return float(-(kept * kept.log2()).sum()) + 0.0  # + 0.0: one token left is 0.00 bits, not -0.00


def _line(before: torch.Tensor, after: torch.Tensor) -> str:
    bits = _bits(after)
    return (
        f"{int((after > 0).sum()):,} of {after.numel():,} tokens can be drawn; the top token has p = "
        f"{float(after.max()):.2f} (at temperature 1: {float(before.max()):.2f}); entropy {bits:.2f} bits "
        f"(as uncertain as a uniform choice among {float(f'{2**bits:.3g}'):,g} tokens)."  # 3 digits: any CPU
    )


def explain_sampling(logits: torch.Tensor, **overrides) -> str:
    return _line(sampling_distribution(logits), sampling_distribution(logits, **overrides))  # (V,), (V,)


def render_sampling(logits: torch.Tensor, names: list[str] | None = None, **overrides) -> Figure:
    """Bars of the ``shown`` most likely tokens at temperature 1, before and after the settings (log scale)."""
    p = _params(overrides)
    return _figure(sampling_distribution(logits), sampling_distribution(logits, **p), names, p)  # (V,), (V,)


def _figure(before: torch.Tensor, after: torch.Tensor, names: list[str] | None, p: dict) -> Figure:
    """Drawn without matplotlib's tick machinery or Text (``viz.lite_axes``, glyph-path text): Tick objects, Text
    layout and the legend were most of a ~130 ms move (issue #33's explorer speed). Same size, layout and labels."""
    top = before.topk(p["shown"]).indices  # (shown,): fixed order, so moving a slider only changes the bars
    names = [f"#{int(i)}" for i in top] if names is None else list(names)[: p["shown"]]
    if len(names) != len(top):
        raise ValueError(f"names has {len(names)} entries for {len(top)} bars: give one per shown token.")
    size, font = float(p["panel_size"]), 9.0 * float(p["font_scale"])
    width, height = 2 * size, max(2.4, 0.3 * len(top) + 1.2) * size / 3.6
    fig = Figure(figsize=(width, height), dpi=DPI)
    box = (0.2 * width, 0.16 * height, 0.77 * width, 0.72 * height)  # subplots_adjust(0.2, 0.16, 0.97, 0.88)
    span = len(top) - 1 + 0.8  # bars of height 0.8 on rows 0 .. n-1, and matplotlib's 5% margins
    floor = 1e-5  # the log axis starts here: a cut token has probability exactly 0
    ax = lite_panel(fig, box, (floor, 1), (span - 0.4 + 0.05 * span, -0.4 - 0.05 * span), xscale="log")
    text = TextBatch()
    rows = np.arange(len(top))  # (n,)
    for values, bar_h, colour in ((before[top], 0.8, "before"), (after[top].clamp(min=floor), 0.45, "after")):
        right = values.numpy()  # (n,)
        bars = [[(floor, r - bar_h / 2), (x, r - bar_h / 2), (x, r + bar_h / 2), (floor, r + bar_h / 2)]
                for r, x in zip(rows, right, strict=True)]  # fmt: skip
        ax.add_collection(PolyCollection(bars, facecolors=_COLORS[colour], linewidths=0, gid=colour), autolim=False)
    probs = after[top].tolist()
    anchors = to_inches(ax, [floor * 1.3 if q == 0 else min(q * 1.3, 0.25) for q in probs], rows)  # (n, 2)
    for (x, y), prob in zip(anchors, probs, strict=True):
        if prob == 0:
            text.add(x, y, localize("cut"), font, ha="left", color=_COLORS["cut"], role="cut")
        elif p["values"]:
            text.add(x, y, f"{prob:.3f}", font, ha="left", role="value")
    xticks = [(10.0**e, f"1e{e}" if e else "1") for e in range(-5, 1)]
    frame_and_ticks(ax, text, xticks, list(zip(rows.tolist(), names, strict=True)), font)
    left, bottom, panel_w, panel_h = box
    text.add(left + panel_w / 2, bottom - TICK_IN - PAD_IN - 1.3 * font / 72, localize("probability (log scale)"),
             font, va="top", role="xlabel")  # fmt: skip
    settings = f"T = {p['temperature']:.2g}, top-k = {p['top_k'] or localize('off')}, top-p = {p['top_p']:.2f}"
    text.add(left + panel_w / 2, bottom + panel_h + 6 / 72, settings, font + 1, va="bottom", role="title")
    # the legend in the lower-right corner (loc="lower right"), framed as matplotlib's
    entries = [
        ("patch", _COLORS["before"], localize("temperature 1")),
        ("patch", _COLORS["after"], localize("drawn from")),
    ]
    em = font / 72
    box_w = max(2.8 * em + text_width(label, font) for _, _, label in entries) + 0.8 * em
    _legend(ax, text, entries, left + panel_w - 0.5 * em - box_w, bottom + 0.5 * em, font, "legend", centred=False)
    text.draw(ax, transform=fig.dpi_scale_trans)
    return fig


def sorted_distribution(sorted_logits: torch.Tensor, **overrides) -> torch.Tensor:
    """``sampling_distribution`` of logits already sorted in descending order, without sorting again: the
    explorer's fast path (a 262k vocabulary re-sorted per slider move took ~0.1 s). Equal to it (tested)."""
    p = _params(overrides)
    logits = sorted_logits.double() / float(p["temperature"])  # (V,), float64 as next_token_distribution
    if p["top_k"] and p["top_k"] < logits.numel():
        logits = logits.masked_fill(logits < logits[p["top_k"] - 1], float("-inf"))  # ties with the k-th stay
    probs = logits.softmax(dim=-1)  # (V,), still in descending order
    if p["top_p"] < 1:
        before = probs.cumsum(dim=-1) - probs  # (V,): mass of the more likely tokens
        needed = probs[int((before < p["top_p"]).sum()) - 1]  # the last token the nucleus needs (ties stay)
        probs = probs.masked_fill(probs < needed, 0.0)
        probs = probs / probs.sum()  # (V,), renormalised
    return probs


class SamplingExplorer(Explorer):
    DISPLAY = ("panel_size", "font_scale", "values")

    def __init__(self, logits: torch.Tensor, names: list[str], controls: dict, fixed: dict):
        self.sorted_logits = _as_vector(logits).detach().sort(descending=True).values  # (V,), once
        self.names = names
        self.before = sorted_distribution(self.sorted_logits)  # (V,): temperature 1, nothing cut
        super().__init__("sampling", controls, fixed)

    def render(self, params: dict) -> tuple[Figure, str]:
        p = _params(params)
        after = sorted_distribution(self.sorted_logits, **p)  # (V,), in the same (sorted) order as self.before
        return _figure(self.before, after, self.names, p), _line(self.before, after)

    def explain(self, **settings) -> str:
        """The explanation line for ``settings`` in the current language (``explain_sampling`` on the explorer's
        logits, by its fast path): what a notebook prints."""
        return localize(_line(self.before, sorted_distribution(self.sorted_logits, **settings)))


def sampling_explorer(logits: torch.Tensor, decode=None, **fixed) -> SamplingExplorer:
    """11: temperature, top-k and top-p on one real next-token distribution; ``decode(id) -> str`` names the bars."""
    import ipywidgets as w

    shown = fixed.get("shown", SAMPLING_DEFAULTS["shown"])
    top = _as_vector(logits).topk(shown).indices.tolist()  # softmax keeps the order: the most likely at T = 1
    names = [repr(decode(i))[1:-1] if decode else f"#{i}" for i in top]  # repr: a space or newline stays visible
    style = {"description_width": "initial"}
    controls = {
        "temperature": w.FloatLogSlider(
            description="temperature", value=1.0, base=10, min=-1, max=math.log10(5), step=0.05, style=style
        ),
        "top_k": w.IntSlider(description="top-k (0: off)", value=0, min=0, max=50, style=style),
        "top_p": w.FloatSlider(description="top-p (1: off)", value=1.0, min=0.05, max=1.0, step=0.05, style=style),
    }
    return SamplingExplorer(logits, names, controls, fixed)
