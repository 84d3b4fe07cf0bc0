"""The mask explorer of notebook 09b: which keys each query reads, per DeepSeek layer type.

Four layer types, each run for real on a seeded toy input (the masks are read off the layers' weights, so
the picture is what the code does, not a drawing of what it should do):

- V3.2 DSA: MLA whose lightning indexer keeps each query's top-k tokens (``MultiHeadLatentAttention(index_topk=k)``);
- V4 sliding window: the last ``sliding_window`` tokens;
- V4 HCA: the window, plus every compressed entry (one per ``hca_rate`` tokens) whose window has closed;
- V4 CSA: the window, plus the top-k of the entries (one per ``csa_rate`` tokens) the indexer picks.

- ``sparse_masks(**params)`` -> ``{layer type: bool (L, L + T)}``: tokens, then compressed entries;
- ``render_sparse_masks(**params)`` -> a Figure, one panel per layer type, rows queries, columns keys;
- ``explain_sparse_masks(**params)`` -> one line: what the last query reads in each;
- ``sparse_mask_explorer()`` -> the same with controls (``widgets.Explorer``).
"""

from __future__ import annotations

import functools

import torch
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from attn_core.deepseek.compressed_attention import CompressedAttention
from attn_core.deepseek.latent_attention import MultiHeadLatentAttention
from attn_core.i18n import localize
from attn_core.viz.lite_axes import PAD_IN, TICK_IN, frame_and_ticks, lite_panel
from attn_core.viz.plotting import DPI, FONT_PT, VALUE_PT, _Heatmap
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import Explorer, merge_params

__all__ = ["SPARSE_DEFAULTS", "LAYER_TYPES", "sparse_masks", "render_sparse_masks", "explain_sparse_masks"]

SPARSE_DEFAULTS = dict(
    seq_len=24, topk=6, sliding_window=4, csa_rate=2, hca_rate=8, seed=0, values=False, panel_size=2.6, font_scale=1.0
)
LAYER_TYPES = ("V3.2 DSA (top-k tokens)", "V4 sliding window", "V4 HCA", "V4 CSA")
# not read / a token read / a compressed entry read: grey, blue, orange (readable in colour-blind palettes)
_COLORS = ListedColormap(["#f0f0f0", "#1f77b4", "#ff7f0e"])
_LEGEND = ("not read", "a token read", "a compressed entry read")
_NORM, _LOCATOR = Normalize(0, 2), MaxNLocator(nbins=5, integer=True)
_HIDDEN, _TINY = 16, dict(head_dim=8, q_lora_rank=8, qk_rope_head_dim=4, o_groups=1, o_lora_rank=4)


def _params(overrides: dict) -> dict:
    p = merge_params(SPARSE_DEFAULTS, overrides, what="")
    for key in ("seq_len", "topk", "sliding_window", "csa_rate", "hca_rate"):
        if isinstance(p[key], bool) or not isinstance(p[key], int) or p[key] < 1:
            raise ValueError(f"{key} must be a positive int, got {p[key]!r}.")
    return p


def sparse_masks(**overrides) -> dict[str, torch.Tensor]:
    """For each layer type, bool ``(L, L + T)``: True where the query (row) reads the key (column)."""
    p = _params(overrides)
    # An explorer move asks twice (figure and line): the layers run once per setting; copies keep the cache intact.
    key = tuple(p[name] for name in ("seq_len", "topk", "sliding_window", "csa_rate", "hca_rate", "seed"))
    return {name: mask.clone() for name, mask in _run_layers(*key).items()}


@functools.lru_cache(maxsize=32)
@torch.no_grad()
def _run_layers(seq_len, topk, sliding_window, csa_rate, hca_rate, seed) -> dict[str, torch.Tensor]:
    p = dict(seq_len=seq_len, topk=topk, sliding_window=sliding_window, csa_rate=csa_rate, hca_rate=hca_rate)
    torch.manual_seed(seed)
    x = torch.randn(1, p["seq_len"], _HIDDEN, dtype=torch.float64)  # (1, L, hidden)
    mla = MultiHeadLatentAttention(
        _HIDDEN, 2, kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4, q_lora_rank=8,
        index_topk=p["topk"], index_n_heads=4, index_head_dim=8,
    ).double()  # fmt: skip
    layers = {
        LAYER_TYPES[1]: CompressedAttention(_HIDDEN, 2, sliding_window=p["sliding_window"], **_TINY),
        LAYER_TYPES[2]: CompressedAttention(
            _HIDDEN, 2, sliding_window=p["sliding_window"], compress_rate=p["hca_rate"], **_TINY
        ),
        LAYER_TYPES[3]: CompressedAttention(
            _HIDDEN,
            2,
            sliding_window=p["sliding_window"],
            compress_rate=p["csa_rate"],
            index_topk=p["topk"],
            index_n_heads=4,
            index_head_dim=8,
            **_TINY,
        ),  # fmt: skip
    }
    masks = {LAYER_TYPES[0]: mla(x, is_causal=True)[1][0, 0] > 0}  # (L, L): the picks (weights 0 elsewhere)
    for name, layer in layers.items():
        masks[name] = layer.double()(x)[1][0, 0] > 0  # (L, L + T)
    return masks


def render_sparse_masks(**overrides) -> Figure:
    """One panel per layer type: rows are queries, columns the tokens then (V4 HCA/CSA) the compressed entries."""
    p = _params(overrides)
    masks = sparse_masks(**overrides)
    scale, size, length = float(p["font_scale"]), float(p["panel_size"]), p["seq_len"]
    widths = [m.shape[1] for m in masks.values()]
    height = max(size, length * 0.2 * scale) if p["values"] else size  # printed counts need ≥ 0.2 in per row
    # Margins in inches, laid out by hand (constrained layout measured every label twice per draw). Room for: the
    # y label and ticks (left), two-line titles (top), the x label, its ticks and the colour legend (bottom), tick
    # labels between panels.
    inch = height / length  # one key column
    counts = 0.3 * scale if p["values"] else 0.0  # the printed counts, right of each panel
    left, right, gap = 0.62 * scale, 0.15 + counts, 0.42 * scale + counts
    top, bottom = 0.6 * scale, 1.05 * scale
    width = left + right + gap * (len(masks) - 1) + inch * sum(widths)
    fig = Figure(figsize=(width, height + top + bottom), dpi=DPI)
    font, tick_font = FONT_PT * scale, FONT_PT * scale * 0.9
    text, x0 = TextBatch(), left
    for name, mask in masks.items():
        keys = mask.shape[1]
        # the panel's own Axes (four, as before), data in cells: x keys, y queries downwards
        ax = lite_panel(fig, (x0, bottom, inch * keys, height), (-0.5, keys - 0.5), (length - 0.5, -0.5))
        shown = mask.to(torch.int64)  # (L, L + T): 0 not read, 1 token read
        shown[:, length:] *= 2  # 2: a compressed entry read
        image = _Heatmap(ax, cmap=_COLORS, norm=_NORM, extent=(-0.5, keys - 0.5, length - 0.5, -0.5),
                         origin="upper", interpolation="nearest")  # fmt: skip
        image.set_data(shown.numpy())
        ax.add_image(image)
        if keys > length:  # tokens | compressed entries
            ax.add_line(Line2D([length - 0.5] * 2, [-0.5, length - 0.5], color="black", linewidth=1))
        if p["values"]:  # how many keys each query reads, right of its row
            for row, count in enumerate(mask.sum(-1).tolist()):
                text.add(x0 + (keys - 0.2 + 0.5) * inch, bottom + height - (row + 0.5) * inch, str(count),
                         VALUE_PT * scale, ha="left", role="value")  # fmt: skip
        # positions are whole numbers, few ticks (MaxNLocator(nbins=5, integer=True), as the axes had)
        xticks = [(v, f"{v:.0f}") for v in _LOCATOR.tick_values(-0.5, keys - 0.5) if -0.5 <= v <= keys - 0.5]
        yticks = [(v, f"{v:.0f}") for v in _LOCATOR.tick_values(-0.5, length - 0.5) if -0.5 <= v <= length - 0.5]
        frame_and_ticks(ax, text, xticks, yticks, tick_font)
        reads = int(mask[-1].sum())
        centre, title_y = (
            x0 + inch * keys / 2,
            bottom + height * 1.02 + 6 / 72,
        )  # a fixed y, as set_title(y=1.02) and its 6 pt pad
        text.add(centre, title_y, localize(f"last query reads {reads}"), font, va="baseline", role="title")
        text.add(centre, title_y + 1.4 * font / 72, localize(name), font, va="baseline", role="title")
        label_y = bottom - TICK_IN - PAD_IN - 1.25 * tick_font / 72 - 4 / 72
        text.add(centre, label_y, localize("keys (tokens | entries)"), font, va="top", role="xlabel")
        x0 += inch * keys + gap
    y_ticks_width = max(text_width(str(v), tick_font) for v in range(length))
    text.add(left - TICK_IN - PAD_IN - y_ticks_width - 4 / 72, bottom + height / 2, localize("query position"),
             font, va="bottom", rotation=90, role="ylabel")  # fmt: skip
    # the colour legend, centred at the bottom: a swatch and a label per colour
    names = [localize(label) for label in _LEGEND]
    swatch, spacing = 0.2 * font / 10 * 1.4, 0.3 * font / 10
    entry_w = [swatch + 0.08 + text_width(n, font) for n in names]
    x, y = (width - sum(entry_w) - spacing * (len(names) - 1)) / 2, 0.1 + 0.7 * font / 72
    first = fig.axes[0]
    for colour, name, w in zip(range(len(names)), names, entry_w, strict=True):
        first.add_artist(Rectangle((x, y - swatch / 4), swatch, swatch / 2, color=_COLORS(colour),
                                   transform=fig.dpi_scale_trans, clip_on=False))  # fmt: skip
        text.add(x + swatch + 0.08, y, name, font, ha="left", role="legend")
        x += w + spacing
    text.draw(first, transform=fig.dpi_scale_trans)
    fig.sparse_masks = masks
    return fig


def explain_sparse_masks(**overrides) -> str:
    """One line: how many keys and entries the last query reads in each layer type."""
    p = _params(overrides)
    masks = sparse_masks(**overrides)
    length = p["seq_len"]
    parts = []
    for name, mask in masks.items():
        tokens, entries = int(mask[-1, :length].sum()), int(mask[-1, length:].sum())
        parts.append(
            f"{name}: {tokens} tokens" + (f" + {entries} of {mask.shape[1] - length} entries" if entries else "")
        )
    return f"the last query (position {length - 1}) reads " + "; ".join(parts) + f", of {length} tokens."


class SparseMaskExplorer(Explorer):
    """``widgets.Explorer`` drawing ``render_sparse_masks`` (read / not read: no colour scale; "print values" writes
    how many keys each query reads)."""

    DISPLAY = ("panel_size", "font_scale", "values")

    def render(self, params: dict) -> tuple[Figure, str]:
        return render_sparse_masks(**params), explain_sparse_masks(**params)


def sparse_mask_explorer(**fixed) -> SparseMaskExplorer:
    """09b: move the length, top-k, window and compression rates; watch which keys each layer type reads."""
    import ipywidgets as w

    style = {"description_width": "initial"}
    controls = {
        "seq_len": w.IntSlider(description="tokens", value=24, min=4, max=48, style=style),
        "topk": w.IntSlider(description="top-k", value=6, min=1, max=16, style=style),
        "sliding_window": w.IntSlider(description="window", value=4, min=1, max=16, style=style),
        "csa_rate": w.Dropdown(description="CSA m", options=[2, 3, 4], value=2, style=style),
        "hca_rate": w.Dropdown(description="HCA m", options=[4, 8, 16], value=8, style=style),
        "seed": w.IntSlider(description="seed", value=0, min=0, max=9, style=style),
    }
    return SparseMaskExplorer("sparse_masks", controls, fixed)
