"""The MLA cache explorer of notebook 09: what each attention variant caches per token.

Per token and per layer a decoder caches
- MHA: a key and a value per head, ``2 · num_heads · head_dim`` numbers;
- GQA: a key and a value per kv head, ``2 · num_kv_heads · head_dim``;
- MQA: one key and one value, ``2 · head_dim``;
- MLA (DeepSeek-V2/V3): the latent and one shared rotary key, ``kv_lora_rank + qk_rope_head_dim``.

Times ``num_layers`` and the bytes per element. This module draws that:

- ``cache_bytes_per_token(**params)`` -> ``{"MHA": bytes, "GQA": …, "MQA": …, "MLA": …}`` (ints);
- ``render_mla_cache(**params)`` -> a Figure: left, the bytes per token as bars; right, the cache of
  one sequence (GiB) against the context length, a line per variant (log-log);
- ``explain_mla_cache(**params)`` -> one line with the numbers behind the picture;
- ``mla_cache_explorer()`` -> the same picture with sliders, built on ``widgets.Explorer``.

The render function is pure (no pyplot, no global state) and draws no timing: only counted bytes.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from attn_core.i18n import localize
from attn_core.viz.lite_axes import PAD_IN, TICK_IN, frame_and_ticks, lite_panel, to_inches
from attn_core.viz.plotting import DPI, FONT_PT, VALUE_PT
from attn_core.viz.rope_scaling import _legend
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import Explorer, merge_params

__all__ = [
    "MLA_DEFAULTS",
    "KINDS",
    "cache_bytes_per_token",
    "context_lengths",
    "render_mla_cache",
    "explain_mla_cache",
    "MlaCacheExplorer",
    "mla_cache_explorer",
]

# DeepSeek-V3's attention (its config.json: 61 layers, 128 heads, kv_lora_rank 512, qk_rope_head_dim 64,
# qk_nope_head_dim 128), compared with MHA/GQA/MQA of head_dim 128 and the same heads and layers.
MLA_DEFAULTS = dict(
    num_layers=61,
    num_heads=128,
    head_dim=128,
    num_kv_heads=8,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    bytes_per_element=2,
    max_context=131072,
    values=True,
    panel_size=2.8,
    font_scale=1.0,
)
KINDS = ("MHA", "GQA", "MQA", "MLA")
COLORS = {"MHA": "#d95f02", "GQA": "#7570b3", "MQA": "#1b9e77", "MLA": "#1f77b4"}
_STYLE = {"description_width": "initial"}


def _params(overrides: dict) -> dict:
    p = merge_params(MLA_DEFAULTS, overrides, what="")
    for key in ("num_layers", "num_heads", "head_dim", "num_kv_heads", "kv_lora_rank", "bytes_per_element"):
        if isinstance(p[key], bool) or not isinstance(p[key], int) or p[key] < 1:
            raise ValueError(f"{key} must be a positive int, got {p[key]!r}.")
    if (
        isinstance(p["qk_rope_head_dim"], bool)
        or not isinstance(p["qk_rope_head_dim"], int)
        or p["qk_rope_head_dim"] < 0
    ):
        raise ValueError(f"qk_rope_head_dim must be an int ≥ 0, got {p['qk_rope_head_dim']!r}.")
    if p["num_heads"] % p["num_kv_heads"]:
        raise ValueError(
            f"num_kv_heads={p['num_kv_heads']} must divide num_heads={p['num_heads']} "
            "(each kv head serves a whole group of query heads)."
        )
    if not isinstance(p["max_context"], int) or p["max_context"] < 2:
        raise ValueError(f"max_context must be an int ≥ 2, got {p['max_context']!r}.")
    return p


def cache_bytes_per_token(**overrides) -> dict[str, int]:
    """Bytes cached per token, all layers together, for MHA, GQA, MQA and MLA."""
    p = _params(overrides)
    per_layer = {
        "MHA": 2 * p["num_heads"] * p["head_dim"],  # K and V, every head
        "GQA": 2 * p["num_kv_heads"] * p["head_dim"],  # K and V, every kv head
        "MQA": 2 * p["head_dim"],  # one K and one V
        "MLA": p["kv_lora_rank"] + p["qk_rope_head_dim"],  # latent + one shared rotary key
    }
    return {kind: p["num_layers"] * n * p["bytes_per_element"] for kind, n in per_layer.items()}


def context_lengths(max_context: int) -> np.ndarray:
    """Powers of two from 1 to ``max_context`` (and ``max_context`` itself)."""
    lengths = [2**i for i in range(int(np.log2(max_context)) + 1)]
    if lengths[-1] != max_context:
        lengths.append(max_context)
    return np.array(lengths, dtype=np.int64)


def _tokens(n: int) -> str:
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else f"{n:,}"


def _human(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def _log_limits(low: float, high: float, ticks) -> tuple[float, float]:
    """matplotlib's log-axis view limits: the data with 5% margins (in log space), grown to show every tick."""
    span = np.log10(high) - np.log10(low)
    low, high = 10 ** (np.log10(low) - 0.05 * span), 10 ** (np.log10(high) + 0.05 * span)
    return min(low, *ticks), max(high, *ticks)


def render_mla_cache(**overrides) -> Figure:
    """Left: bytes per token (bars); right: one sequence's cache (GiB) against its length (lines).

    Drawn without matplotlib's tick machinery (``viz.lite_axes``, text as glyph paths): Tick objects, Text layout
    and the legend were ~100 ms of a control move (issue #33's explorer speed); same size, limits, ticks and labels.
    """
    p = _params(overrides)
    per_token = cache_bytes_per_token(**overrides)
    scale = float(p["font_scale"])
    size = float(p["panel_size"])
    font, value_font = FONT_PT * scale, VALUE_PT * scale
    # fixed margins in inches, grown with the font: a constrained layout re-measures every label on each redraw
    left, gap, right, bottom, top = 0.8 * scale, 1.0 * scale, 0.25, 0.55 * scale, 0.35 * scale
    width, height = 2 * size + left + gap + right + 0.6, size + bottom + top
    fig = Figure(figsize=(width, height), dpi=DPI)
    panel_w = (width - left - right - gap) / 2
    text = TextBatch()
    heights = [per_token[k] / 1024 for k in KINDS]  # KiB per token
    decades = range(int(np.floor(np.log10(min(heights)))), int(np.ceil(np.log10(max(heights)))) + 2)
    ylim = (10.0 ** decades[0], max(heights) * 4 if p["values"] else 10.0 ** decades[-1])
    bars_ax = lite_panel(fig, (left, bottom, panel_w, size), (-0.59, 3.59), ylim, yscale="log")
    for x, (kind, kib) in enumerate(zip(KINDS, heights, strict=True)):
        bars_ax.add_patch(Rectangle((x - 0.4, 0), 0.8, kib, color=COLORS[kind], gid=f"bar-{kind}"))
        if p["values"]:
            ((bx, by),) = to_inches(bars_ax, x, kib)
            text.add(bx, by + 1 / 72, _human(per_token[kind]), value_font, va="bottom", role="value")
    yticks = [(10.0**e, f"{10.0**e:g}") for e in decades if ylim[0] <= 10.0**e <= ylim[1] * (1 + 1e-9)]
    frame_and_ticks(bars_ax, text, list(enumerate(KINDS)), yticks, font)
    title = localize(f"{p['num_layers']} layers, {p['bytes_per_element']} B/element")
    text.add(left + panel_w / 2, bottom + size + 6 / 72, title, font, va="bottom", role="title")
    _ylabel(text, bars_ax, localize("KiB cached per token"), yticks, font)
    lengths = context_lengths(p["max_context"])
    x_ticks = [n for n in lengths if n in (1, 32, 1024) or n == lengths[-1]]
    gib = lengths[-1] * max(per_token.values()) / 2**30, lengths[0] * min(per_token.values()) / 2**30
    y_ticks = [10.0**e for e in range(int(np.floor(np.log10(gib[1]))), int(np.ceil(np.log10(gib[0]))) + 1, 2)]
    span = np.log2(lengths[-1])
    xlim = (2 ** (-0.05 * span), 2 ** (1.05 * span))  # log2 axis: 5% margins
    lines_ax = lite_panel(fig, (left + panel_w + gap, bottom, panel_w, size), xlim,
                          _log_limits(gib[1], gib[0], y_ticks), xscale="log", yscale="log")  # fmt: skip
    for kind in KINDS:
        line = Line2D(lengths, lengths * per_token[kind] / 2**30, color=COLORS[kind], lw=1.5, gid=f"line-{kind}")
        lines_ax.add_line(line)
    y_shown = [(y, f"{y:g}") for y in y_ticks]
    frame_and_ticks(lines_ax, text, [(n, _tokens(int(n))) for n in x_ticks], y_shown, font)
    x0 = left + panel_w + gap
    text.add(x0 + panel_w / 2, bottom - TICK_IN - PAD_IN - 1.3 * font / 72, localize("context length (tokens)"),
             font, va="top", role="xlabel")  # fmt: skip
    _ylabel(text, lines_ax, localize("cache of one sequence (GiB)"), y_shown, font)
    em = font / 72  # the legend in the upper-left corner, as matplotlib's legend(loc="best") placed it here
    entries = [("line", COLORS[kind], kind) for kind in KINDS]
    _legend(lines_ax, text, entries, x0 + 0.5 * em, bottom + size - 0.5 * em - (1.4 * em * 4 + 0.5 * em), font,
            "legend", centred=False)  # fmt: skip
    text.draw(lines_ax, transform=fig.dpi_scale_trans)
    fig.mla_cache = {"per_token": per_token, "lengths": lengths}
    return fig


def _ylabel(text, ax, label: str, yticks, font: float) -> None:
    (x0, y0), (_, y1) = to_inches(ax, ax.get_xlim()[0], ax.get_ylim())
    tick_w = max(text_width(t, font) for _, t in yticks) if yticks else 0.0
    text.add(x0 - TICK_IN - PAD_IN - tick_w - 4 / 72, (y0 + y1) / 2, label, font, va="bottom", rotation=90,
             role="ylabel")  # fmt: skip


def explain_mla_cache(**overrides) -> str:
    """One line: what each variant caches per token per layer, and the MLA ratio to each."""
    p = _params(overrides)
    b = cache_bytes_per_token(**overrides)
    ratios = ", ".join(f"{b[k] / b['MLA']:.3g}× for {k}" for k in ("MHA", "GQA", "MQA"))
    at, d = p["max_context"], p["head_dim"]
    # the products written out: the MHA bar is a plain MHA with head_dim-wide K and V (the DeepSeek-V2 paper's
    # comparison), which is not the same number as MLA's own up-projected keys (nope + rope wide) would give
    return (
        f"per token per layer: MHA 2·{p['num_heads']}·{d} = {2 * p['num_heads'] * d:,}, "
        f"GQA 2·{p['num_kv_heads']}·{d} = {2 * p['num_kv_heads'] * d:,}, MQA 2·{d} = {2 * d:,}, "
        f"MLA {p['kv_lora_rank']} + {p['qk_rope_head_dim']} = {p['kv_lora_rank'] + p['qk_rope_head_dim']:,} numbers "
        f"(MHA, GQA and MQA with head_dim {d} for K and for V). "
        f"MLA caches {b['MLA']:,} B per token ({_human(b['MLA'] * at)} at {at:,} tokens); the others cache {ratios}."
    )


class MlaCacheExplorer(Explorer):
    """``widgets.Explorer`` drawing ``render_mla_cache``; no colour scale, so the display row holds size,
    font and "print values" (the bytes on the bars, in KiB/MiB)."""

    DISPLAY = ("panel_size", "font_scale", "values")

    def render(self, params: dict) -> tuple[Figure, str]:
        return render_mla_cache(**params), explain_mla_cache(**params)


def mla_cache_explorer(**fixed) -> MlaCacheExplorer:
    """09: move the latent rank, the rotary dimension, the heads, kv heads and layers; watch the cache.

    Keywords set where a control starts (``mla_cache_explorer(num_layers=27, num_heads=16)``).
    """
    import ipywidgets as w

    style = _STYLE
    controls = {
        "kv_lora_rank": w.Dropdown(
            description="kv_lora_rank", options=[64, 128, 256, 512, 1024], value=512, style=style
        ),
        "qk_rope_head_dim": w.Dropdown(
            description="qk_rope_head_dim", options=[0, 16, 32, 64, 128], value=64, style=style
        ),
        "num_heads": w.Dropdown(description="heads", options=[8, 16, 32, 64, 128], value=128, style=style),
        "num_kv_heads": w.Dropdown(description="GQA kv heads", options=[1, 2, 4, 8, 16], value=8, style=style),
        "num_layers": w.IntSlider(description="layers", value=61, min=1, max=128, style=style),
        "head_dim": w.Dropdown(description="head_dim", options=[64, 128, 256], value=128, style=style),
        "bytes_per_element": w.Dropdown(
            description="element",
            options=[("bf16 (2 B)", 2), ("fp32 (4 B)", 4), ("fp8 (1 B)", 1)],
            value=2,
            style=style,
        ),
    }
    return MlaCacheExplorer("mla_cache", controls, {"values": True, **fixed})
