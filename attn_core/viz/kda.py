"""Figures and the forgetting explorer of notebook 12e (Kimi Delta Attention next to Gated DeltaNet).

- ``demo_gates(length, head_k_dim, rate, spread, seed)``: seeded toy log decays, one per token (Gated DeltaNet) and
  one per token and key channel (KDA), the same token-to-token variation in both.
- ``render_forgetting``: for each, the fraction of a pair written at token t still in the state at the last token,
  ``exp(g_{t+1} + ... + g_L)``, as a heatmap over (token, key channel): Gated DeltaNet's rows are all equal.
- ``explain_forgetting``: the explanation line (what the first token keeps, per channel).
- ``forgetting_explorer()``: sliders for the length, the mean rate and the spread of rates across channels.
- ``plot_learned_decay(runs)``: the recall run's decay per token, at initialisation and after training.
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.collections import LineCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from attn_core.i18n import localize
from attn_core.viz.lite_axes import PAD_IN, TICK_IN, frame_and_ticks, lite_panel, to_inches
from attn_core.viz.plotting import _Heatmap
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import _STYLE, DEFAULTS, Explorer, merge_params

__all__ = [
    "FORGET_DEFAULTS",
    "demo_gates",
    "kept_until_end",
    "render_forgetting",
    "explain_forgetting",
    "forgetting_explorer",
    "plot_learned_decay",
]

FORGET_DEFAULTS = dict(
    length=32, head_k_dim=16, rate=0.1, spread=2.0, seed=0, **{k: DEFAULTS[k] for k in Explorer.DISPLAY}
)
DPI = 110
MIXER_LABELS = {"gated delta": "Gated DeltaNet", "kda": "KDA", "delta (g = 0)": "DeltaNet (g = 0)"}  # JSON keys → names


def _forget_params(overrides: dict) -> dict:
    params = merge_params(FORGET_DEFAULTS, overrides, "forgetting explorer")
    for name, low, high in (("length", 2, 256), ("head_k_dim", 1, 64)):
        value = params[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"{name} must be an int in [{low}, {high}], got {value!r}.")
    if not 0 < float(params["rate"]) <= 10:
        raise ValueError(f"rate must be in (0, 10] (the mean decay -g per token), got {params['rate']!r}.")
    if not 0 <= float(params["spread"]) <= 6:
        raise ValueError(
            f"spread must be in [0, 6] (decades between the slowest and fastest channel), got {params['spread']!r}."
        )
    return params


def demo_gates(length: int, head_k_dim: int, rate: float, spread: float, seed: int = 0):
    """Seeded toy log decays: ``(per_token (L,), per_channel (L, Dk))``, float64.

    Per token ``g_t = −rate · u_t`` (``u_t`` uniform in [0, 2), mean 1); per channel ``g_tc = −rate_c · u_t`` with
    the rates ``rate_c`` log-spaced over ``spread`` decades around ``rate`` (their geometric mean), slowest first."""
    generator = torch.Generator().manual_seed(seed)
    wobble = 2 * torch.rand(length, generator=generator, dtype=torch.float64)  # (L,) mean 1
    position = torch.linspace(-0.5, 0.5, head_k_dim, dtype=torch.float64) if head_k_dim > 1 else torch.zeros(1)
    rates = rate * 10.0 ** (spread * position.double())  # (Dk,) slowest first
    return -rate * wobble, -wobble[:, None] * rates[None, :]  # (L,), (L, Dk)


def kept_until_end(g: torch.Tensor) -> torch.Tensor:
    """``g (L, ...)`` log decays → ``(L, ...)``: entry t = exp(g_{t+1} + ... + g_L), what is left at the last token of
    a pair written at token t (1 for the last token). Summed from the end, never as a difference of cumulative sums."""
    after = torch.cat([g[1:], torch.zeros_like(g[:1])]).flip(0).cumsum(0).flip(0)  # (L, ...): g_{t+1} + ... + g_L
    return after.exp()


def render_forgetting(**overrides) -> Figure:
    p = _forget_params(overrides)
    per_token, per_channel = demo_gates(p["length"], p["head_k_dim"], p["rate"], p["spread"], p["seed"])
    token_kept = kept_until_end(per_token)[:, None].expand(-1, p["head_k_dim"])  # (L, Dk): one rate for all rows
    channel_kept = kept_until_end(per_channel)  # (L, Dk)
    font = 9 * p["font_scale"]
    panel = p["panel_size"]
    # Fixed margins, no layout engine (constrained layout measured every tick label on each redraw, ~300 ms), and no
    # matplotlib ticks or Text (viz.lite_axes, glyph-path text: they were most of the remaining ~120 ms)
    width, height = panel * 2.5, panel * 1.2
    figure = Figure(figsize=(width, height), dpi=DPI)
    left, right, bottom, top = 0.08 * width, 0.86 * width, 0.17 * height, 0.88 * height  # subplots_adjust's box
    panel_w = (right - left) / 2.06  # two panels, wspace 0.06
    length, channels = p["length"], p["head_k_dim"]
    ticks_x = sorted({0, (length - 1) // 2, length - 1})  # three ticks: fewer labels to lay out
    ticks_y = sorted({0, channels - 1})
    norm = Normalize(0.0, 1.0) if p["fixed_scale"] else None
    titles = ("Gated DeltaNet: one decay per token", "KDA: one decay per token and key channel")
    text = TextBatch()
    for index, (kept, title) in enumerate(zip((token_kept, channel_kept), titles, strict=True)):
        x0 = left + index * 1.06 * panel_w
        ax = lite_panel(figure, (x0, bottom, panel_w, top - bottom), (-0.5, length - 0.5), (channels - 0.5, -0.5))
        cells = kept.T.numpy()  # (Dk, L): rows channels, columns tokens
        shade = norm or Normalize(float(cells.min()), float(cells.max()))
        image = _Heatmap(ax, cmap="viridis", norm=shade, extent=(-0.5, length - 0.5, channels - 0.5, -0.5),
                         origin="upper", interpolation="nearest")  # fmt: skip
        image.set_data(cells)
        ax.add_image(image)
        yticks = [(c, str(c)) for c in ticks_y] if index == 0 else [(c, "") for c in ticks_y]  # sharey: left labels
        frame_and_ticks(ax, text, [(t, str(t)) for t in ticks_x], yticks, font)
        text.add(x0 + panel_w / 2, top + 6 / 72, localize(title), font, va="bottom", role="title")
        text.add(x0 + panel_w / 2, bottom - TICK_IN - PAD_IN - 1.3 * font / 72, localize("token t (pair written)"),
                 font, va="top", role="xlabel")  # fmt: skip
        if p["values"] and length * channels <= 128:
            centres = to_inches(ax, *np.meshgrid(np.arange(length), np.arange(channels)))  # (Dk·L, 2)
            for (x, y), value in zip(centres, cells.ravel(), strict=True):
                text.add(x, y, f"{value:.1f}", font * 0.6, color="white", role="value")
    tick_w = max(text_width(str(c), font) for c in ticks_y)
    text.add(left - TICK_IN - PAD_IN - tick_w - 4 / 72, (bottom + top) / 2, localize("key channel (slow → fast)"),
             font, va="bottom", rotation=90, role="ylabel")  # fmt: skip
    # the colour bar at (0.88, 0.17, 0.02, 0.71) of the figure, ticks 0, 0.5, 1, its label on the right
    bar_x, bar_w = 0.88 * width, 0.02 * width
    key_norm = norm or shade
    key = lite_panel(figure, (bar_x, bottom, bar_w, top - bottom), (0, 1), (key_norm.vmin, key_norm.vmax))
    ramp = _Heatmap(key, cmap="viridis", norm=key_norm, extent=(0, 1, key_norm.vmin, key_norm.vmax), origin="upper",
                    interpolation="nearest")  # fmt: skip
    ramp.set_data(np.linspace(key_norm.vmax, key_norm.vmin, 256)[:, None])  # (256, 1): top row first
    key.add_image(ramp)
    levels = [v for v in (0.0, 0.5, 1.0) if key_norm.vmin - 1e-9 <= v <= key_norm.vmax + 1e-9]
    ys = to_inches(key, 1, levels)[:, 1] if levels else []
    marks = [[(bar_x + bar_w, y), (bar_x + bar_w + TICK_IN, y)] for y in ys]
    key_ticks = LineCollection(marks, colors="black", linewidths=0.8, transform=figure.dpi_scale_trans)
    key_ticks.set_clip_on(False)
    key.add_collection(key_ticks, autolim=False)
    for y, value in zip(ys, levels, strict=True):
        text.add(bar_x + bar_w + TICK_IN + PAD_IN, y, f"{value:.1f}", font, ha="left", role="colorbar")
    frame_and_ticks(key, text, [], [], font)
    label_x = bar_x + bar_w + TICK_IN + PAD_IN + text_width("0.0", font) + 6 / 72
    text.add(label_x, (bottom + top) / 2, localize("kept at the last token"), font, va="top", rotation=90,
             role="colorbar-label")  # fmt: skip
    text.draw(key, transform=figure.dpi_scale_trans)
    return figure


def explain_forgetting(**overrides) -> str:
    p = _forget_params(overrides)
    per_token, per_channel = demo_gates(p["length"], p["head_k_dim"], p["rate"], p["spread"], p["seed"])
    token_first = float(kept_until_end(per_token)[0])
    channel_first = kept_until_end(per_channel)[0]  # (Dk,)
    half = int((channel_first >= 0.5).sum())
    return (
        f"After {p['length']} tokens the first pair keeps {token_first:.2g} in every channel of the Gated DeltaNet "
        f"state; in KDA's it keeps {float(channel_first.min()):.2g} (fastest channel) to "
        f"{float(channel_first.max()):.2g} (slowest), and {half} of {p['head_k_dim']} channels keep at least half."
    )


class ForgettingExplorer(Explorer):
    def render(self, params: dict):
        return render_forgetting(**params), explain_forgetting(**params)


def forgetting_explorer(**fixed) -> ForgettingExplorer:
    """12e: drag the **mean rate** and the **spread across channels**: Gated DeltaNet forgets every key channel at
    one rate, KDA at one rate per channel."""
    import ipywidgets as w

    start = {**FORGET_DEFAULTS, **fixed}
    controls = {
        "length": w.IntSlider(description="sequence length", value=start["length"], min=2, max=128, style=_STYLE),
        "rate": w.FloatLogSlider(
            description="mean rate −g", value=start["rate"], base=10, min=-3, max=0.5, step=0.05, style=_STYLE
        ),
        "spread": w.FloatSlider(
            description="spread (decades)", value=start["spread"], min=0.0, max=4.0, step=0.25, style=_STYLE
        ),
    }
    rest = {k: v for k, v in fixed.items() if k not in controls}
    explorer = ForgettingExplorer("forgetting", controls, {"panel_size": 2.6, "seed": start["seed"], **rest})
    values, length = explorer.controls["values"], controls["length"]

    def enable_values(_=None):  # printed values fit only a small grid
        values.disabled = length.value * start["head_k_dim"] > 128
        values.tooltip = localize("values are printed for up to 128 cells") if values.disabled else ""

    enable_values()
    length.observe(enable_values, names="value")
    return explorer


def plot_learned_decay(runs: list[dict]) -> Figure:
    """The recall run's mean log decay per token, as the fraction kept per token ``exp(g)``: Gated DeltaNet one point
    per (layer, head), KDA one per (layer, head, channel), at initialisation and after training."""
    figure = Figure(figsize=(6.4, 3.0), dpi=DPI, layout="constrained")
    ax = figure.subplots()
    ticks = []
    for index, run in enumerate(runs):
        for offset, key, colour in ((-0.15, "init_decay", "0.55"), (0.15, "learned_decay", "#1f77b4")):
            g = np.asarray(run[key], dtype=float).ravel()
            jitter = np.linspace(-0.08, 0.08, g.size) if g.size > 1 else np.zeros(1)
            label = localize("at initialisation" if key == "init_decay" else "after training") if not index else None
            ax.scatter(index + offset + jitter, np.exp(g), s=9, color=colour, alpha=0.8, label=label)
        ticks.append(localize(MIXER_LABELS.get(run["mixer"], run["mixer"])))
    ax.set_xticks(range(len(runs)), ticks, fontsize=9)
    ax.set_ylabel(localize("kept per token, exp(g)"), fontsize=9)
    ax.set_ylim(0, 1.02)
    ax.set_title(localize("Decay per token before and after training"), fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    ax.tick_params(labelsize=9)
    if runs:
        ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the axes: never over a point
    return figure
