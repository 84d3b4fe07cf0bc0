"""Interactive explorers: pure render functions plus ipywidgets controls wired to them.

Every explorer in the series is the same machine with different controls showing:

- ``demo_attention(**params)`` -> weights ``(heads, L, L)`` for a seeded toy input;
- ``render_attention(**params)`` -> a matplotlib Figure of those weights;
- ``explain_attention(**params)`` -> one sentence saying what the picture shows;
- ``Explorer`` shows the figure as a PNG in an ``ipywidgets.Image`` (no JavaScript
  beyond ipywidgets itself, nothing from a CDN) and re-renders when a control moves.

The notebook factories (``temperature_explorer``, ``heads_explorer``, ``gqa_explorer``,
``mask_explorer``) only choose which controls appear.

One piece: the ``Explorer`` base every explorer builds on, and the first explorers of notebooks 01-05 that use it
directly.
"""

from __future__ import annotations

import base64
import html
import math
import re
import struct
from pathlib import Path

import torch
from matplotlib.figure import Figure

from attn_core import i18n
from attn_core.attention import scaled_dot_product_attention
from attn_core.masks import causal_mask, padding_mask, prefix_lm_mask, sliding_window_mask
from attn_core.viz.figure_scale import figure_scale
from attn_core.viz.plotting import plot_attention
from attn_core.viz.png import figure_png

__all__ = [
    "DEFAULTS",
    "MASK_KINDS",
    "demo_tokens",
    "demo_mask",
    "demo_attention",
    "render_attention",
    "explain_attention",
    "figure_png",
    "Explorer",
    "temperature_explorer",
    "heads_explorer",
    "gqa_explorer",
    "mask_explorer",
]

SENTENCE = (
    "the quick brown fox jumps over the lazy dog because it wanted to see what was on the other side of the hill"
).split()

_STYLE = {"description_width": "initial"}

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
FALLBACK_MARK = "attn_core_explorer_fallback"  # output metadata key of the fallback (book and browser tests find it)
# Stored under every explorer for readers without a kernel (Explorer.fallback_bundle); zh: attn_core/i18n/zh_viz.py
FALLBACK_LINE = (
    "Static figure at the default settings. With a running kernel (JupyterLab, see the README's Quick start) "
    "the controls ({controls}) redraw it live."
)


def _scaled_figure_png(figure: Figure) -> bytes:
    """The explorer's PNG at the notebook's figure scale (ac.set_figure_scale): more pixels, shown larger."""
    scale = figure_scale()
    if scale == 1.0:
        return figure_png(figure)
    dpi = figure.dpi
    figure.set_dpi(dpi * scale)
    try:
        return figure_png(figure)
    finally:
        figure.set_dpi(dpi)  # the figure object (saved by "Save PNG") keeps its own resolution


def _png_width(png: bytes) -> int:
    """The pixel width of PNG bytes (IHDR: the first chunk): the fallback is shown at its stored size."""
    return struct.unpack(">I", png[16:20])[0]


MASK_KINDS = ("none", "causal", "padding", "causal + padding", "sliding window", "prefix-LM")

DEFAULTS = dict(
    seq_len=8,
    num_heads=1,
    num_kv_heads=None,  # None: one kv head per query head (MHA)
    head_dim=16,
    temperature=1.0,
    scaled=True,
    mask_kind="none",
    window=3,
    padding=2,
    prefix_len=3,
    dropout_p=0.0,
    seed=0,
    head="all",
    values=False,
    fixed_scale=True,  # colours on the fixed 0-1 weight scale; False: stretched to the largest weight
    panel_size=2.8,
    font_scale=1.0,
)


def merge_params(defaults: dict, overrides: dict, what: str = "explorer") -> dict:
    """``defaults`` updated by ``overrides``; an unknown name is a TypeError that lists the known ones."""
    unknown = set(overrides) - set(defaults)
    if unknown:
        raise TypeError(
            f"unknown {what + ' ' if what else ''}parameter(s) {sorted(unknown)}; known: {sorted(defaults)}."
        )
    return {**defaults, **overrides}


def _params(overrides: dict) -> dict:
    params = merge_params(DEFAULTS, overrides)
    if params["num_kv_heads"] is None:
        params["num_kv_heads"] = params["num_heads"]
    return params


def demo_tokens(seq_len: int) -> list[str]:
    """Token labels for the toy input: words of a sentence, then positions."""
    return [SENTENCE[i] if i < len(SENTENCE) else f"t{i}" for i in range(seq_len)]


def demo_mask(
    mask_kind: str, seq_len: int, *, window: int = 3, padding: int = 2, prefix_len: int = 3
) -> torch.Tensor | None:
    """The boolean mask (True = may attend) an explorer uses for ``mask_kind``, ``(L, L)`` or None."""
    if mask_kind not in MASK_KINDS:
        raise ValueError(f"mask_kind must be one of {MASK_KINDS}, got {mask_kind!r}.")
    if mask_kind == "none":
        return None
    if mask_kind in ("padding", "causal + padding") and not 0 <= padding < seq_len:
        raise ValueError(f"padding ({padding}) must leave at least one real token of the {seq_len}.")
    real = padding_mask([seq_len - padding], seq_len)[0, 0]  # (1, L)
    masks = {
        "causal": lambda: causal_mask(seq_len),
        "padding": lambda: real.expand(seq_len, seq_len),
        "causal + padding": lambda: causal_mask(seq_len) & real,
        "sliding window": lambda: sliding_window_mask(seq_len, window),
        "prefix-LM": lambda: prefix_lm_mask(seq_len, min(prefix_len, seq_len)),
    }
    return masks[mask_kind]()  # (L, L)


def demo_attention(**overrides) -> torch.Tensor:
    """Attention weights ``(num_heads, L, L)`` of a seeded random toy input under ``overrides``.

    Query heads get their own random queries; keys and values come from ``num_kv_heads``
    kv heads, shared exactly as in ``scaled_dot_product_attention``. Raises ValueError
    (with attn_core's message) for impossible settings such as heads not divisible.
    """
    p = _params(overrides)
    seq_len, head_dim = p["seq_len"], p["head_dim"]
    if p["num_kv_heads"] < 1:
        raise ValueError(f"num_kv_heads must be at least 1, got {p['num_kv_heads']}.")
    if p["temperature"] <= 0:
        raise ValueError(f"temperature must be > 0, got {p['temperature']}.")
    generator = torch.Generator().manual_seed(p["seed"])
    q = torch.randn(p["num_heads"], seq_len, head_dim, generator=generator)  # (H, L, d)
    k = torch.randn(p["num_kv_heads"], seq_len, head_dim, generator=generator)  # (Hkv, L, d)
    v = torch.randn(p["num_kv_heads"], seq_len, head_dim, generator=generator)  # (Hkv, L, d)
    mask = demo_mask(p["mask_kind"], seq_len, window=p["window"], padding=p["padding"], prefix_len=p["prefix_len"])
    scale = (1 / math.sqrt(head_dim) if p["scaled"] else 1.0) / p["temperature"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: a second thread only adds contention (8 ms vs 0.2 ms here)
    try:
        # Dropout draws from the global generator; seed it so the picture is a function of `seed`.
        torch.manual_seed(p["seed"])
        _, weights = scaled_dot_product_attention(q, k, v, mask, scale=scale, dropout_p=p["dropout_p"])
    finally:
        torch.set_num_threads(threads)
    return weights  # (H, L, L)


def _shown(weights: torch.Tensor, head) -> tuple[torch.Tensor, list[int]]:
    if head == "all":
        return weights, list(range(weights.shape[0]))
    if not 0 <= int(head) < weights.shape[0]:
        raise ValueError(f"head {head} does not exist; there are {weights.shape[0]} heads (0..{weights.shape[0] - 1}).")
    return weights[int(head) : int(head) + 1], [int(head)]


def render_attention(**overrides) -> Figure:
    """Figure of ``demo_attention(**overrides)``: one head, or the grid of all heads."""
    p = _params(overrides)
    weights, heads = _shown(demo_attention(**overrides), p["head"])
    tokens = demo_tokens(p["seq_len"]) if p["seq_len"] <= 24 else None
    grouped = p["num_kv_heads"] != p["num_heads"]
    return plot_attention(
        weights,
        query_labels=tokens,
        key_labels=tokens,
        heads=heads,
        num_heads=p["num_heads"],
        num_kv_heads=p["num_kv_heads"] if grouped else None,
        panel_size=p["panel_size"],
        font_scale=p["font_scale"],
        annotate=p["values"],
        vmax=None if p["fixed_scale"] else "relative",
    )


def explain_attention(**overrides) -> str:
    """One or two sentences on what ``render_attention(**overrides)`` shows, with measured numbers."""
    p = _params(overrides)
    weights = demo_attention(**overrides)  # (H, L, L)
    seq_len, window, prefix = p["seq_len"], p["window"], min(p["prefix_len"], p["seq_len"])
    real = seq_len - p["padding"]
    mask_text = {
        "none": f"no mask: every query attends to all {seq_len} keys.",
        "causal": "causal: row i attends to keys 0..i (no peeking at later tokens).",
        "padding": f"padding: keys {real}..{seq_len - 1} are padding and get weight 0 in every row.",
        "causal + padding": f"causal + padding: row i attends to keys 0..min(i, {real - 1}).",
        "sliding window": f"sliding window {window}: row i attends to keys i-{window - 1}..i ({window} most recent).",
        "prefix-LM": f"prefix-LM: tokens 0..{prefix - 1} see each other both ways; later rows are causal.",
    }[p["mask_kind"]]
    scale = (1 / math.sqrt(p["head_dim"]) if p["scaled"] else 1.0) / p["temperature"]
    row_max = weights.amax(-1)  # (H, L)
    live = row_max > 0
    scale_text = f"1/√{p['head_dim']}" if p["scaled"] else "1"
    parts = [
        mask_text,
        f"scale = {scale_text} ÷ temperature {p['temperature']:g} = {scale:.3g}; "
        f"largest weight per row averages {row_max[live].mean():.2f} (1.00 = one-hot).",
    ]
    if p["num_kv_heads"] != p["num_heads"]:
        group = p["num_heads"] // p["num_kv_heads"]
        parts.append(
            f"{p['num_heads']} query heads share {p['num_kv_heads']} kv head(s): groups of {group}, "
            f"head h reads kv head h // {group}; same colour = same keys and values."
        )
    if p["dropout_p"] > 0:
        live = demo_attention(**{**overrides, "dropout_p": 0.0}) > 0  # weights dropout could hit
        zeroed = ((weights == 0) & live).sum() / live.sum()
        parts.append(
            f"dropout p={p['dropout_p']:g}: {zeroed:.0%} of the weights were zeroed and the rest scaled by "
            f"1/(1-p) = {1 / (1 - p['dropout_p']):.2f}, so rows no longer sum to exactly 1."
        )
    return " ".join(parts)


def control_row(children: list):
    """One row of controls that wraps instead of squeezing: each control keeps its natural width.

    A plain ``HBox`` shrinks its children to fit, so in a narrow output (a phone, a VS Code notebook beside
    its side bars) three sliders become three handles with no track; wrapped, each stays usable on its line.
    """
    import ipywidgets as widgets

    for child in children:
        child.layout.flex = "0 0 auto"  # never shrink below the natural width: wrap to the next line instead
        child.layout.max_width = "100%"  # ... unless that width is wider than the whole output
    return widgets.HBox(children, layout=widgets.Layout(flex_flow="row wrap"))


class Explorer:
    """Controls + a live heatmap + an explanation line + save buttons, as one ipywidgets box.

    ``controls`` maps parameter names of ``render_attention`` to ipywidgets; ``fixed``
    holds parameters that do not get a control, or, for one that does, its starting value.
    Display it by leaving ``explorer.widget`` (or the explorer itself) as a cell's last expression.
    The display row under the figure holds the controls named in ``DISPLAY``.
    """

    DISPLAY = ("panel_size", "font_scale", "values", "fixed_scale")

    def __init__(self, name: str, controls: dict, fixed: dict | None = None, save_dir: str | Path = "saved_figures"):
        import ipywidgets as widgets

        self.name = name
        self.controls = controls
        self.fixed = dict(fixed or {})
        self.save_dir = Path(save_dir)
        # Shown at its own pixel width, never stretched: in the explorer's flex column a child is stretched to the
        # column's width unless it aligns to the start, which made "size" shrink the text instead of growing the
        # figure (and blew small figures up, soft). max_width caps it at the output width, no horizontal scroll.
        self.image = widgets.Image(
            format="png", layout=widgets.Layout(max_width="100%", height="auto", align_self="flex-start")
        )
        self.explanation = widgets.HTML(layout=widgets.Layout(max_width="900px"))
        self.status = widgets.HTML()
        save_png = widgets.Button(description="Save PNG", icon="download", tooltip="write the figure to saved_figures/")
        save_svg = widgets.Button(description="Save SVG", icon="download", tooltip="write the figure to saved_figures/")
        save_png.on_click(lambda _: self.save("png"))
        save_svg.on_click(lambda _: self.save("svg"))
        boxes = list(controls.values())
        rows = [control_row(boxes[i : i + 3]) for i in range(0, len(boxes), 3)]
        # The same display row on every explorer: projector-sized figures, printed values, the colour
        # scale (fixed 0-1 by default, so flat rows look flat), saving.
        start = {name: self.fixed.get(name, DEFAULTS[name]) for name in self.DISPLAY}
        display_controls = {
            "panel_size": widgets.FloatSlider(
                description="size", value=start["panel_size"], min=1.5, max=6.0, step=0.1, style=_STYLE
            ),
            "font_scale": widgets.FloatSlider(
                description="font", value=start["font_scale"], min=0.8, max=2.5, step=0.1, style=_STYLE
            ),
            "values": widgets.Checkbox(description="print values", value=start["values"], style=_STYLE),
            "fixed_scale": widgets.Checkbox(
                description="fixed scale 0–1",
                value=start.get("fixed_scale", True),
                style=_STYLE,
                tooltip="off: colours stretch to the largest weight shown",
            ),
        }
        display_controls = {name: display_controls[name] for name in self.DISPLAY}
        self.controls = controls = {**controls, **display_controls}
        # A keyword that names a control sets where that control starts, e.g. gqa_explorer(num_kv_heads=4).
        for key in [key for key in self.fixed if key in controls]:
            controls[key].value = self.fixed.pop(key)
        self.widget = widgets.VBox(
            [
                *rows,
                self.image,
                self.explanation,
                control_row([*display_controls.values()]),
                control_row([save_png, save_svg, self.status]),
            ],
            layout=widgets.Layout(border="1px solid #ddd", padding="6px"),
        )
        self.widget.add_class(f"attn-explorer-{name}")
        if i18n.get_language() != "en":  # ac.set_language("zh"): labels and tooltips in that language
            for control in [*controls.values(), save_png, save_svg]:
                control.description = i18n.translate(control.description)
                control.tooltip = control.tooltip and i18n.translate(control.tooltip)
        self.figure: Figure | None = None
        self.error: str | None = None
        for control in controls.values():
            control.observe(self.update, names="value")
        self.update()

    def params(self) -> dict:
        return {**self.fixed, **{key: control.value for key, control in self.controls.items()}}

    def render(self, params: dict) -> tuple[Figure, str]:
        """The figure and its explanation line for ``params``: the one method a subclass replaces
        to draw something else (the tiles of notebook 08, a real model's heads in 10)."""
        return render_attention(**params), explain_attention(**params)

    def update(self, change=None) -> None:
        """Re-render from the controls; an impossible setting shows its message instead of a traceback."""
        try:
            figure, text = self.render(self.params())
        except ValueError as err:
            self.error = str(err)
            not_possible = "Not possible: " if i18n.get_language() == "en" else "无法显示："
            message = html.escape(i18n.translate(str(err)))
            self.explanation.value = f'<b style="color:#b00020">{not_possible}{message}</b>'
            return
        self.error = None
        self.figure = figure
        self.image.value = _scaled_figure_png(figure)
        self.explanation.value = html.escape(i18n.translate(text))  # the one place every explorer's line is shown

    def save(self, fmt: str) -> Path:
        """Write the current figure as PNG or SVG into ``save_dir``; return the path."""
        if self.figure is None:
            raise ValueError("nothing to save: the current settings did not produce a figure.")
        self.save_dir.mkdir(parents=True, exist_ok=True)
        stem = "_".join(f"{key}-{value}" for key, value in self.params().items() if key in self.controls)
        path = self.save_dir / f"{self.name}_{re.sub(r'[^A-Za-z0-9_.-]+', '', stem)}.{fmt}"
        self.figure.savefig(path, format=fmt)
        saved = "saved" if i18n.get_language() == "en" else "已保存"
        self.status.value = f"{saved} <code>{html.escape(str(path))}</code>"
        return path

    def fallback_line(self) -> str:
        """The line under the static figure: what the controls would change, and where to move them."""
        own = [c.description for key, c in self.controls.items() if key not in self.DISPLAY and c.description]
        line = FALLBACK_LINE.format(controls=", ".join(own) or "size, font")
        return i18n.translate(line)

    def fallback_bundle(self) -> dict:
        """The static fallback stored next to the widget: what a front end without a kernel shows.

        The figure of the current (default) state as text/html (with the line saying what the controls would
        change and where to run them), image/png and text/plain (the line). It also holds a widget view of no
        model (``model_id ""``), which ipywidgets' JupyterLab renderer hides, so a live Lab shows only the widget;
        nbconvert, GitHub, VS Code's viewer and the book have no such model and show the figure.
        """
        line = self.fallback_line()
        bundle = {WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": ""}, "text/plain": line}
        if self.image.value:
            png = base64.b64encode(self.image.value).decode("ascii")
            bundle["image/png"] = png
            bundle["text/html"] = (
                f'<figure class="attn-explorer-fallback" style="margin:0">'
                f'<img src="data:image/png;base64,{png}" width="{_png_width(self.image.value)}" '
                f'style="max-width:100%;height:auto" alt="{html.escape(line)}">'
                f"<figcaption><i>{html.escape(line)}</i></figcaption></figure>"
            )
        return bundle

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
        display(self.fallback_bundle(), raw=True, metadata={FALLBACK_MARK: True})


def _head_selector(num_heads_control):
    """A head dropdown ("all" or one head) that follows the number of heads."""
    import ipywidgets as widgets

    every_head = (i18n.translate("all"), "all")  # the value stays "all"; its label follows set_language
    selector = widgets.Dropdown(description="head", options=[every_head], value="all")

    def refresh(_=None):
        options = [every_head, *((str(h), h) for h in range(num_heads_control.value))]
        selector.options = options
        if selector.value not in [value for _, value in options]:
            selector.value = "all"

    refresh()
    num_heads_control.observe(refresh, names="value")
    return selector


def temperature_explorer(**fixed) -> Explorer:
    """01: how the key dimension, the 1/√d_k scale and a temperature sharpen or flatten softmax."""
    import ipywidgets as w

    style = _STYLE
    controls = {
        "head_dim": w.Dropdown(description="d_k", options=[4, 16, 64, 256, 1024], value=64, style=style),
        "scaled": w.Checkbox(description="divide by √d_k", value=True, style=style),
        "temperature": w.FloatLogSlider(
            description="temperature", value=1.0, base=10, min=-1, max=1, step=0.1, style=style
        ),
        "seq_len": w.IntSlider(description="tokens", value=8, min=2, max=16, style=style),
        "seed": w.IntSlider(description="seed", value=0, min=0, max=20, style=style),
    }
    return Explorer("temperature", controls, fixed)


def heads_explorer(**fixed) -> Explorer:
    """02: several heads on the same tokens, one at a time or as a grid."""
    import ipywidgets as w

    style = _STYLE
    num_heads = w.Dropdown(description="heads", options=[1, 2, 4, 8], value=4, style=style)
    controls = {
        "num_heads": num_heads,
        "head": _head_selector(num_heads),
        "seq_len": w.IntSlider(description="tokens", value=8, min=2, max=24, style=style),
        "mask_kind": w.Dropdown(description="mask", options=["none", "causal"], value="none", style=style),
        "seed": w.IntSlider(description="seed", value=0, min=0, max=20, style=style),
    }
    return Explorer("heads", controls, {"panel_size": 2.4, **fixed})


def gqa_explorer(**fixed) -> Explorer:
    """03/04: move ``num_kv_heads`` and watch which query heads share keys/values (same colour)."""
    import ipywidgets as w

    style = _STYLE
    num_heads = w.Dropdown(description="query heads", options=[4, 6, 8], value=8, style=style)
    controls = {
        "num_heads": num_heads,
        "num_kv_heads": w.IntSlider(description="kv heads", value=2, min=1, max=8, style=style),
        "head": _head_selector(num_heads),
        "seq_len": w.IntSlider(description="tokens", value=6, min=2, max=24, style=style),
        "seed": w.IntSlider(description="seed", value=0, min=0, max=20, style=style),
    }
    return Explorer("gqa", controls, {"panel_size": 2.0, **fixed})


def mask_explorer(**fixed) -> Explorer:
    """05: mask kinds, window, padding, prefix, dropout p and its seed."""
    import ipywidgets as w

    style = _STYLE
    controls = {
        "mask_kind": w.Dropdown(description="mask", options=list(MASK_KINDS), value="causal", style=style),
        "seq_len": w.IntSlider(description="tokens", value=8, min=2, max=24, style=style),
        "window": w.IntSlider(description="window", value=3, min=1, max=24, style=style),
        "padding": w.IntSlider(description="padding", value=2, min=0, max=23, style=style),
        "prefix_len": w.IntSlider(description="prefix", value=3, min=0, max=24, style=style),
        "dropout_p": w.FloatSlider(description="dropout p", value=0.0, min=0.0, max=0.9, step=0.05, style=style),
        "seed": w.IntSlider(description="seed", value=0, min=0, max=20, style=style),
    }
    uses = {"window": ("sliding window",), "padding": ("padding", "causal + padding"), "prefix_len": ("prefix-LM",)}

    def enable_relevant(_=None):
        # Grey out the sliders the chosen mask ignores, so a learner sees which one matters.
        for name, kinds in uses.items():
            controls[name].disabled = controls["mask_kind"].value not in kinds

    enable_relevant()
    controls["mask_kind"].observe(enable_relevant, names="value")
    return Explorer("masks", controls, fixed)
