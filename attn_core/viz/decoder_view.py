"""A head view for a causal decoder (Gemma 3 270M, notebook 11): the heads of one layer, on any prompt.

- ``decoder_attention(lm, prompt)`` -> the token labels and every layer's weights, one forward pass;
- ``render_decoder_heads(maps, tokens, layer, head, scale)`` -> a Figure. Masked cells (a future key, or
  one outside a local layer's window) are hatched grey, so they never look like a weight of 0. Scales:
  ``"fixed"`` weights on 0–1; ``"log"`` 1e-4–1 (smaller weights and exact zeros at the bottom colour);
  ``"without_bos"`` the <bos> column (the attention sink) removed and each row renormalised over the
  other keys, so the rest of a row is readable on 0–1;
- ``explain_decoder_heads(...)`` -> one line: the layer's kind (local window or global, RoPE base) and the
  measured shares of attention on <bos>, on the previous token and on itself;
- ``DecoderView(lm)`` keeps the last prompts' maps: moving layer, head or scale never re-runs the model;
  ``view.remember(prompt, maps)`` hands it maps already computed (``lm(ids, return_attention=True)``);
- ``decoder_head_view(lm, prompt)`` -> an ``Explorer`` with a prompt box and layer/head/scale selectors.

One piece: one explorer (notebook 11's decoder head view): its data, render function, explanation line and widget.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import torch
from matplotlib.collections import PolyCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import PathPatch, Rectangle
from matplotlib.path import Path

from attn_core.i18n import localize
from attn_core.masks import causal_mask, sliding_window_mask
from attn_core.viz.head_view import TextBoxExplorer
from attn_core.viz.plotting import FONT_PT, plot_attention
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import _STYLE

__all__ = [
    "SCALES",
    "LOG_FLOOR",
    "token_label",
    "decoder_attention",
    "visible_keys",
    "render_decoder_heads",
    "explain_decoder_heads",
    "DecoderView",
    "DecoderHeadExplorer",
    "decoder_head_view",
]

SCALES = ("fixed", "log", "without_bos")
LOG_FLOOR = 1e-4  # bottom of the log scale: a weight of 1e-4 next to a sink of ~0.7 is already invisible on 0-1
MASK_FACE, MASK_HATCH = "#e4e4e4", "#9a9a9a"  # masked cells: light grey with darker hatching (as notebook 08's tiles)
MAX_PANEL = 7.0  # inches: a single head grows to label every token, up to this size (then labels thin out)
_SPECIAL = {"\n": "↵", "\t": "⇥", "\r": "↵"}


def token_label(piece: str, max_chars: int = 14) -> str:
    """A SentencePiece piece as an axis label: the word-start mark ``▁`` dropped (``▁capital`` -> ``capital``),
    a piece of spaces only as ``␣``, newline ``↵``, tab ``⇥``; long pieces cut with ``…``."""
    text = "".join(_SPECIAL.get(c, f"\\x{ord(c):02x}" if ord(c) < 32 else c) for c in piece.replace("▁", " "))
    text = "␣" * len(text) if text and not text.strip(" ") else text.strip(" ")
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _token_labels(lm, ids: list[int]) -> list[str]:
    piece = getattr(lm.tokenizer, "id_to_token", None) or (lambda i: lm.decode([i]))
    return [token_label(piece(i)) for i in ids]  # SentencePiece pieces: "▁capital" (a word start), "<bos>", "\n"


@torch.no_grad()
def decoder_attention(lm, prompt: str) -> tuple[list[str], torch.Tensor]:
    """``(token labels, weights (layers, heads, L, L))`` of ``lm`` on ``prompt`` (``<bos>`` first)."""
    ids = lm.encode(prompt)
    _, maps = lm(torch.tensor([ids]), return_attention=True, last_only=True)  # 18 x (1, H, L, L); logits unused
    return _token_labels(lm, ids), torch.stack([w[0] for w in maps])  # (layers, H, L, L)


def visible_keys(length: int, window: int | None) -> torch.Tensor:
    """``(L, L)`` True where a query may attend: causal, and within ``window`` keys on a local layer."""
    return causal_mask(length) if window is None or window >= length else sliding_window_mask(length, window)


def _checked(maps, tokens, layer, head, scale, windows) -> tuple[np.ndarray, np.ndarray, int | None]:
    """This layer's weights ``(H, L, L)`` float64 and visible cells ``(L, L)``, after checking every input."""
    if isinstance(maps, (list, tuple)):  # what lm(ids, return_attention=True) returns: per layer (1, H, L, L)
        shapes = {tuple(m.shape) for m in maps}
        if len(shapes) != 1 or len(next(iter(shapes))) != 4 or next(iter(shapes))[0] != 1:
            raise ValueError(f"a list of maps must hold one (1, heads, L, L) tensor per layer, got shapes {shapes}.")
        maps = torch.cat([torch.as_tensor(m) for m in maps])  # (layers, H, L, L)
    shape = tuple(maps.shape)
    if len(shape) != 4 or shape[-1] != shape[-2] or 0 in shape:
        raise ValueError(f"maps must be (layers, heads, L, L) self-attention weights, got shape {shape}.")
    num_layers, num_heads, length, _ = shape
    if len(tokens) != length:
        raise ValueError(f"{len(tokens)} tokens given for maps over {length} positions.")
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= layer < num_layers:
        raise ValueError(f"layer {layer!r} does not exist; the maps hold layers 0..{num_layers - 1}.")
    is_index = not isinstance(head, bool) and isinstance(head, (int, np.integer))
    if head != "all" and not (is_index and 0 <= head < num_heads):
        raise ValueError(f"head {head!r} does not exist: use 'all' or 0..{num_heads - 1}.")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}.")
    if scale == "without_bos" and length < 2:
        raise ValueError("scale 'without_bos' needs at least one token after <bos>: type a prompt.")
    if windows is not None and len(windows) != num_layers:
        raise ValueError(f"windows must give one entry per layer ({num_layers}), got {len(windows)}.")
    window = None if windows is None else windows[layer]
    weights = torch.as_tensor(maps[layer]).detach().to("cpu", torch.float64).numpy()  # (H, L, L)
    visible = visible_keys(length, window).numpy()  # (L, L)
    finite = np.isfinite(weights).all()
    if not finite or weights.min() < 0 or weights.max() > 1 + 1e-5:  # 1e-5: float32 softmax rounding, a few ulps
        found = "NaN or inf" if not finite else f"values from {weights.min():.3g} to {weights.max():.3g}"
        raise ValueError(
            f"layer {layer}'s maps are not attention weights ({found}; weights lie in [0, 1]): "
            "pass the softmax output, not the scores."
        )
    leak = weights[:, ~visible].max(initial=0.0)  # a causal decoder's masked cells are exactly 0
    if leak > 0:
        raise ValueError(
            f"layer {layer} puts weight {leak:.3g} on a masked cell (a future key or one outside window "
            f"{window}): are these a causal decoder's maps, and are windows right?"
        )
    return weights, visible, window


def _scaled(weights: np.ndarray, visible: np.ndarray, scale: str) -> tuple[np.ndarray, np.ndarray]:
    """The values coloured on 0-1, ``(H, L', L')``, and their visible cells: see the module docstring."""
    if scale == "fixed":
        return weights, visible
    if scale == "log":  # log10 position between LOG_FLOOR (0) and 1 (1); zeros clip to the floor, no warning
        return np.log10(np.maximum(weights, LOG_FLOOR)) / -np.log10(LOG_FLOOR) + 1.0, visible  # (H, L, L)
    rest = weights[:, 1:, 1:]  # (H, L-1, L-1): queries and keys after <bos>
    share = rest.sum(-1, keepdims=True)  # (H, L-1, 1): what <bos> left to the other keys
    return np.divide(rest, share, out=np.zeros_like(rest), where=share > 0), visible[1:, 1:]


def _mask_boxes(visible: np.ndarray) -> np.ndarray:
    """Masked cells as rectangles in cell units, one per run of masked keys in a row: ``(n, 5, 2)`` closed outlines
    with x = key position, y = query position (a causal row has one run, a local row past its window two)."""
    edges = np.diff(np.pad(~visible, ((0, 0), (1, 1))).astype(np.int8), axis=1)  # (Lq, Lk+1): +1 run start, -1 end
    rows, starts = np.nonzero(edges == 1)  # (n,), (n,): row-major, so the i-th start pairs with the i-th end
    _, stops = np.nonzero(edges == -1)  # (n,)
    corners = np.stack([starts, rows + 1, stops, rows], axis=1).astype(np.float64)  # (n, 4): x0, y0, x1, y1
    return corners[:, [[0, 1], [2, 1], [2, 3], [0, 3], [0, 1]]]  # (n, 5, 2)


def _colour_key(fig: Figure, scale: str, masked_text: str, font_scale: float, cmap) -> None:
    """Colour bar (ticks and caption naming the scale) and the legend swatch for masked cells, right of the grid."""
    ax, text = fig.axes[0], TextBatch()
    label_pt, pad = FONT_PT * font_scale, 0.06
    em = label_pt / 72
    extents = np.array([image.get_extent() for image in ax.images])  # (panels, 4): x0, x1, y0, y1 in inches
    grid_x1, grid_y0, grid_y1 = extents[:, 1].max(), extents[:, 2].min(), extents[:, 3].max()
    if scale == "log":
        decades = round(-np.log10(LOG_FLOOR))
        names = {0: "1", 1: "0.1", 2: "0.01"}
        ticks = [(1 - k / decades, names.get(k, f"1e-{k}")) for k in range(decades + 1)]
        caption = "weight, log scale"
    else:
        ticks = [(v, f"{v:.2f}") for v in (0.0, 0.5, 1.0)]
        caption = "fixed scale 0–1" if scale == "fixed" else "share without <bos>"
    caption, masked_text = localize(caption), localize(masked_text)
    tick_w = max(text_width(label, label_pt) for _, label in ticks)
    caption_w, legend_h = text_width(caption, label_pt * 0.9), max(0.24, 1.6 * em)
    key_x = grid_x1 + 0.22
    key_w = max(0.16 + pad + tick_w + 0.1 + 1.3 * em, 0.26 + text_width(masked_text, label_pt))
    bar_h = max(min(grid_y1 - grid_y0 - legend_h - 0.1, 3.0), 0.6, caption_w + 0.1)
    bar_y0 = max(grid_y0 + (grid_y1 - grid_y0 + legend_h - bar_h) / 2, legend_h + 0.15)
    width, height = fig.get_size_inches()
    width, height = max(width, key_x + key_w + 0.15), max(height, bar_y0 + bar_h + 0.1)
    fig.set_size_inches(width, height)
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    levels = np.linspace(0.0, 1.0, 257)  # (257,) band edges
    ys = bar_y0 + levels * bar_h  # (257,)
    bands = np.stack([ys[:-1], ys[:-1], ys[1:], ys[1:]], axis=1)  # (256, 4) corner heights of each band
    bands = np.stack([np.broadcast_to([key_x, key_x + 0.16, key_x + 0.16, key_x], bands.shape), bands], -1)
    middles = (levels[:-1] + levels[1:]) / 2  # (256,)
    ramp = PolyCollection(bands, array=middles, cmap=cmap, norm=Normalize(0, 1), lw=0, antialiased=False)
    ax.add_collection(ramp, autolim=False)
    ax.add_artist(Rectangle((key_x, bar_y0), 0.16, bar_h, fill=False, lw=0.6, ec="#555555"))
    for value, label in ticks:
        text.add(key_x + 0.16 + pad, bar_y0 + value * bar_h, label, label_pt, ha="left", role="colorbar")
    caption_x = key_x + 0.16 + pad + tick_w + 0.1
    text.add(caption_x, bar_y0 + bar_h / 2, caption, label_pt * 0.9, va="top", rotation=90, role="caption")
    swatch_y = bar_y0 - 0.1 - legend_h / 2
    swatch = Rectangle((key_x, swatch_y - 0.09), 0.18, 0.18, facecolor=MASK_FACE, hatch="///", lw=0.6, ec=MASK_HATCH)
    ax.add_artist(swatch)
    text.add(key_x + 0.26, swatch_y, masked_text, label_pt, ha="left", role="legend")
    text.draw(ax)


def render_decoder_heads(
    maps,
    tokens: Sequence[str],
    layer: int = 0,
    head="all",
    scale: str = "fixed",
    *,
    windows: Sequence[int | None] | None = None,
    panel_size: float = 2.4,
    font_scale: float = 1.0,
    values: bool = False,
    cmap: str = "viridis",
) -> Figure:
    """Heads of ``layer`` from ``maps (layers, heads, L, L)``: a grid (``head="all"``) or one head, large enough
    to label every token (up to ``MAX_PANEL`` inches; then labels thin out). ``windows``: one entry per
    layer, ``None`` for a global layer, ``W`` for a local one (its cells beyond the window are masked).
    ``values`` prints each weight when L <= 16 (not on the log scale, whose colours are log positions)."""
    weights, visible, window = _checked(maps, tokens, layer, head, scale, windows)  # (H, L, L), (L, L)
    num_heads = weights.shape[0]
    shown, visible = _scaled(weights, visible, scale)  # (H, L', L'), (L', L')
    labels = list(tokens[1:] if scale == "without_bos" else tokens)
    heads = list(range(num_heads)) if head == "all" else [int(head)]
    if head != "all":
        shown = shown[heads]  # (1, L', L')
        need = len(labels) * FONT_PT * font_scale * 1.3 / 72  # every label readable
        panel_size = max(panel_size, min(max(panel_size * 2, need), MAX_PANEL))
    kind = "global" if window is None else f"local, window {window}"
    fig = plot_attention(
        shown,  # (H or 1, L', L') on 0-1: the colour key is drawn below, naming the scale
        query_labels=labels,
        key_labels=labels,
        heads=heads,
        num_heads=num_heads,
        title=localize(f"layer {layer} ({kind})" + ("" if head == "all" else f" · head {head}")),
        annotate=values and scale != "log" and len(labels) <= 16,
        colorbar=False,
        cmap=cmap,
        vmax=1.0,
        panel_size=panel_size,
        font_scale=font_scale,
    )
    cells = _mask_boxes(visible)  # (n, 5, 2) in cell units
    if len(cells):  # above the cells (and any printed 0.00), below nothing else: labels sit outside the panels
        length_q, length_k = visible.shape
        boxes = []
        for image in fig.axes[0].images:
            x0, x1, y0, y1 = image.get_extent()  # inches; row 0 at the top
            xs = x0 + cells[..., 0] * (x1 - x0) / length_k  # (n, 5)
            ys = y1 - cells[..., 1] * (y1 - y0) / length_q  # (n, 5)
            boxes.append(np.stack([xs, ys], -1))  # (n, 5, 2)
        codes = np.tile([Path.MOVETO, *[Path.LINETO] * 3, Path.CLOSEPOLY], len(cells) * len(boxes))
        path = Path(np.concatenate(boxes).reshape(-1, 2), codes)
        patch = PathPatch(path, facecolor=MASK_FACE, edgecolor=MASK_HATCH, hatch="///", lw=0, gid="masked")
        patch.set_antialiased(False)  # rows of rectangles meet without seams
        patch.set_zorder(3.5)
        fig.axes[0].add_artist(patch)
    cut = window is not None and window < len(tokens)
    _colour_key(fig, scale, "masked: future / outside window" if cut else "masked: future key", font_scale, cmap)
    return fig


def explain_decoder_heads(
    maps,
    tokens: Sequence[str],
    layer: int = 0,
    head="all",
    scale: str = "fixed",
    *,
    windows: Sequence[int | None] | None = None,
    rope_bases: Sequence[float | None] | None = None,
) -> str:
    """One line on what ``render_decoder_heads`` shows, with the measured shares (mean over the queries after
    <bos>, which itself can only attend to itself)."""
    weights, visible, window = _checked(maps, tokens, layer, head, scale, windows)  # (H, L, L), (L, L)
    length = len(tokens)
    base = None if rope_bases is None else rope_bases[layer]
    base = "" if base is None else f", RoPE base {base:.0e}".replace("e+0", "e").replace("e+", "e")
    if window is None:
        kind = f"layer {layer} is GLOBAL (every earlier token{base})"
    elif length <= window:
        kind = (
            f"layer {layer} is LOCAL (sliding window {window}{base}): this {length}-token prompt fits the window, "
            "so it sees every earlier token as a global layer would"
        )
    else:
        kind = f"layer {layer} is LOCAL (sliding window {window}{base}): query i sees keys i−{window - 1}..i only"
    parts = [f"{length} tokens; {kind}."]
    if length > 1:
        later = weights[:, 1:]  # (H, L-1, L): the queries after <bos>
        sink = later[..., 0].mean(-1)  # (H,)
        previous = np.diagonal(weights, offset=-1, axis1=1, axis2=2).mean(-1)  # (H,)
        itself = np.diagonal(later, offset=1, axis1=1, axis2=2).mean(-1)  # (H,)
        first = tokens[0]
        mean = f"(mean over the {length - 1} queries after {first})"
        if head == "all":
            shares = ", ".join(f"{s:.0%}" for s in sink)
            parts.append(f"{first} takes {shares} of heads 0–{len(sink) - 1}'s attention {mean}.")
        else:
            h = int(head)
            parts.append(
                f"head {h} puts {sink[h]:.0%} of its attention on {first}, {previous[h]:.0%} on the previous token "
                f"and {itself[h]:.0%} on itself {mean}."
            )
    if scale == "fixed":
        parts.append("Colours: weights on a fixed 0–1 scale; hatched grey = masked.")
    elif scale == "log":
        parts.append(
            f"Colours: log scale from {LOG_FLOOR:g} (smaller weights and zeros too) to 1, so small weights show; "
            "hatched grey = masked; values are not printed on this scale."
        )
    else:
        share = weights[:, 1:, 1:].sum(-1)  # (H, L-1): each row's weight off the first token
        smallest = float((share if head == "all" else share[int(head)]).min())
        magnified = f"{1 / smallest:.0f}×" if smallest > 0 else "∞ (an all-zero row stays 0)"
        parts.append(
            f"Colours: {first} removed and each row renormalised over the other keys (÷ its share off {first}, "
            f"as small as {smallest:.0%} here: that row is magnified {magnified}); relative, on 0–1."
        )
    return " ".join(parts)


class DecoderView:
    """``lm``'s attention on prompts, cached: ``attention(prompt)`` runs the model once per prompt.

    The last ``cache_size`` prompts' maps are kept (Gemma 3 270M: 18 · 4 · L² float32, 56 kB at L=14, 300 MB
    at ``max_tokens`` = 1024, which is past the 512-token window, so the local layers' window shows)."""

    def __init__(self, lm, cache_size: int = 4, max_tokens: int = 1024):
        self.lm, self.cache_size, self.max_tokens = lm, cache_size, max_tokens
        self.windows = [block.attention.sliding_window for block in lm.layers]
        self.rope_bases = [block.attention.rope_base for block in lm.layers]
        self.num_layers, self.num_heads = len(lm.layers), lm.layers[0].attention.num_heads
        self._cache: OrderedDict[str, tuple[list[str], torch.Tensor]] = OrderedDict()

    def attention(self, prompt: str) -> tuple[list[str], torch.Tensor]:
        """``(token labels, weights (layers, heads, L, L))``."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("type a prompt.")
        if prompt not in self._cache:
            length = len(self.lm.encode(prompt))
            if length > self.max_tokens:
                raise ValueError(
                    f"the prompt is {length} tokens; this view draws at most {self.max_tokens}: "
                    "shorten it, or build DecoderView(lm, max_tokens=...)."
                )
            self._cache[prompt] = decoder_attention(self.lm, prompt)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        self._cache.move_to_end(prompt)
        return self._cache[prompt]

    def remember(self, prompt: str, maps) -> tuple[list[str], torch.Tensor]:
        """Keep ``maps`` for ``prompt`` without running the model: what ``lm(ids, return_attention=True)`` returned
        for ``ids = lm.encode(prompt)`` (a list of ``(1, heads, L, L)``, one per layer) or ``(layers, heads, L, L)``.
        Returns what :meth:`attention` then gives for ``prompt``."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("type a prompt.")
        if isinstance(maps, (list, tuple)):
            if not all(isinstance(w, torch.Tensor) and w.ndim == 4 and w.shape[0] == 1 for w in maps):
                raise ValueError(
                    "maps must be what lm(ids, return_attention=True) returns for one prompt: a list of "
                    f"(1, heads, L, L) tensors, got shapes {[tuple(getattr(w, 'shape', ())) for w in maps]}."
                )
            maps = torch.stack([w[0] for w in maps])  # (layers, H, L, L)
        ids = self.lm.encode(prompt)
        if len(ids) > self.max_tokens:
            raise ValueError(
                f"the prompt is {len(ids)} tokens; this view draws at most {self.max_tokens}: "
                "shorten it, or build DecoderView(lm, max_tokens=...)."
            )
        expected = (self.num_layers, self.num_heads, len(ids), len(ids))
        if not isinstance(maps, torch.Tensor) or tuple(maps.shape) != expected:
            raise ValueError(
                f"maps of shape {tuple(getattr(maps, 'shape', ()))} do not fit this prompt: {len(ids)} tokens and "
                f"this model need (layers, heads, L, L) = {expected}. Pass the maps of lm.encode(prompt), the "
                "same prompt string."
            )
        self._cache[prompt] = (_token_labels(self.lm, ids), maps.detach())
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return self._cache[prompt]

    def render(self, prompt: str, layer: int = 0, head="all", scale: str = "fixed", **display) -> Figure:
        tokens, maps = self.attention(prompt)
        return render_decoder_heads(maps, tokens, layer, head, scale, windows=self.windows, **display)

    def explain(self, prompt: str, layer: int = 0, head="all", scale: str = "fixed") -> str:
        tokens, maps = self.attention(prompt)
        return explain_decoder_heads(maps, tokens, layer, head, scale, windows=self.windows, rope_bases=self.rope_bases)


class DecoderHeadExplorer(TextBoxExplorer):
    """``Explorer`` over a :class:`DecoderView`; the scale selector replaces the fixed-scale box.
    CSS class ``attn-explorer-decoder``; ``render_ms`` is the last redraw's time."""

    DISPLAY = ("panel_size", "font_scale", "values")
    TEXT = "prompt"

    def __init__(self, view: DecoderView, controls: dict, fixed: dict | None = None, **kwargs):
        self.view = view
        super().__init__("decoder", controls, fixed, **kwargs)

    def render(self, params: dict) -> tuple[Figure, str]:
        v = {key: control.value for key, control in self.controls.items()}  # params() shortens the prompt
        where = (v["prompt"], v["layer"], v["head"], v["scale"])
        display = {key: v[key] for key in self.DISPLAY}
        return self.view.render(*where, **display), self.view.explain(*where)


SCALE_OPTIONS = (("fixed 0–1", "fixed"), ("log 1e-4–1", "log"), ("without <bos>", "without_bos"))


def decoder_head_view(
    lm,
    prompt: str = "The capital of France is Paris, and the capital of Germany is",
    *,
    layer: int = 0,
    head=0,
    scale: str = "log",
    **fixed,
) -> DecoderHeadExplorer:
    """Explorer over a decoder's heads: type a prompt (re-runs the model), move layer / head / scale (instant)."""
    import ipywidgets as w

    view = fixed.pop("view", None) or DecoderView(lm)
    controls = {
        "prompt": w.Text(description="prompt", value=prompt, continuous_update=False, layout=w.Layout(width="520px")),
        "layer": w.IntSlider(description="layer", value=layer, min=0, max=view.num_layers - 1, style=_STYLE),
        "head": w.Dropdown(
            description="head",
            options=[(localize("all heads"), "all"), *((str(h), h) for h in range(view.num_heads))],  # label, value
            value=head,
            style=_STYLE,
        ),
        "scale": w.Dropdown(
            description="scale",
            options=[(localize(label), value) for label, value in SCALE_OPTIONS],  # labels in the set language
            value=scale,
            style=_STYLE,
        ),
    }
    return DecoderHeadExplorer(view, controls, {"panel_size": 2.4, **fixed})
