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

import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from attn_core.deepseek.compressed_attention import CompressedAttention
from attn_core.deepseek.latent_attention import MultiHeadLatentAttention
from attn_core.i18n import localize
from attn_core.viz.plotting import DPI, FONT_PT, VALUE_PT
from attn_core.viz.widgets import Explorer, merge_params

__all__ = ["SPARSE_DEFAULTS", "LAYER_TYPES", "sparse_masks", "render_sparse_masks", "explain_sparse_masks"]

SPARSE_DEFAULTS = dict(
    seq_len=24, topk=6, sliding_window=4, csa_rate=2, hca_rate=8, seed=0, values=False, panel_size=2.6, font_scale=1.0
)
LAYER_TYPES = ("V3.2 DSA (top-k tokens)", "V4 sliding window", "V4 HCA", "V4 CSA")
# not read / a token read / a compressed entry read: grey, blue, orange (readable in colour-blind palettes)
_COLORS = ListedColormap(["#f0f0f0", "#1f77b4", "#ff7f0e"])
_LEGEND = ("not read", "a token read", "a compressed entry read")
_HIDDEN, _TINY = 16, dict(head_dim=8, q_lora_rank=8, qk_rope_head_dim=4, o_groups=1, o_lora_rank=4)


def _params(overrides: dict) -> dict:
    p = merge_params(SPARSE_DEFAULTS, overrides, what="")
    for key in ("seq_len", "topk", "sliding_window", "csa_rate", "hca_rate"):
        if isinstance(p[key], bool) or not isinstance(p[key], int) or p[key] < 1:
            raise ValueError(f"{key} must be a positive int, got {p[key]!r}.")
    return p


@torch.no_grad()
def sparse_masks(**overrides) -> dict[str, torch.Tensor]:
    """For each layer type, bool ``(L, L + T)``: True where the query (row) reads the key (column)."""
    p = _params(overrides)
    torch.manual_seed(p["seed"])
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
    # Margins in inches, laid out by hand: constrained layout measured every label twice per draw, two thirds of
    # an explorer redraw. Room for: the y label and ticks (left), two-line titles (top), the x label, its ticks and
    # the colour legend (bottom), tick labels between panels.
    inch = height / length  # one key column
    counts = 0.3 * scale if p["values"] else 0.0  # the printed counts, right of each panel
    left, right, gap = 0.62 * scale, 0.15 + counts, 0.42 * scale + counts
    top, bottom = 0.6 * scale, 1.05 * scale
    width = left + right + gap * (len(masks) - 1) + inch * sum(widths)
    fig = Figure(figsize=(width, height + top + bottom), dpi=DPI)
    fig.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        top=1 - top / (height + top + bottom),
        bottom=bottom / (height + top + bottom),
        wspace=gap / (inch * sum(widths) / len(masks)),  # a fraction of the mean panel width
    )
    axes = fig.subplots(1, len(masks), gridspec_kw={"width_ratios": widths})
    for ax, (name, mask) in zip(axes, masks.items(), strict=True):
        shown = mask.to(torch.int64)  # (L, L + T): 0 not read, 1 token read
        shown[:, length:] *= 2  # 2: a compressed entry read
        ax.imshow(shown.numpy(), cmap=_COLORS, vmin=0, vmax=2, interpolation="nearest")
        if mask.shape[1] > length:
            ax.axvline(length - 0.5, color="black", linewidth=1)  # tokens | compressed entries
        if p["values"]:  # how many keys each query reads, right of its row
            for row, count in enumerate(mask.sum(-1).tolist()):
                ax.text(mask.shape[1] - 0.2, row, str(count), va="center", fontsize=VALUE_PT * scale, clip_on=False)
        reads = int(mask[-1].sum())
        title = localize(name) + "\n" + localize(f"last query reads {reads}")
        ax.set_title(title, fontsize=FONT_PT * scale, y=1.02)  # a fixed y: no title placement pass per draw
        ax.set_xlabel(localize("keys (tokens | entries)"), fontsize=FONT_PT * scale)
        ax.tick_params(labelsize=FONT_PT * scale * 0.9)
        # positions are whole numbers; few ticks, since each tick is a handful of artists made on every draw
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
    axes[0].set_ylabel(localize("query position"), fontsize=FONT_PT * scale)
    legend = [Patch(color=_COLORS(i), label=localize(label)) for i, label in enumerate(_LEGEND)]
    fig.legend(handles=legend, loc="lower center", ncols=3, fontsize=FONT_PT * scale, frameon=False)
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
