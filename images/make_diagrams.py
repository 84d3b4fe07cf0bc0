"""Regenerate the series' diagrams: ``python images/make_diagrams.py [OUT_DIR]``.

Writes three PNGs (default: next to this script) and their Chinese copies in ``OUT_DIR/zh/`` (the
Chinese edition embeds ``images/zh/NAME.png``), with matplotlib alone, offline and byte-for-byte
reproducible. Every label goes through ``attn_core.i18n.translate`` (catalog: ``zh_viz_figures``), drawn
in Chinese with the font subset ``ac.set_language("zh")`` registers:

- ``sdpa_dataflow.png``        Q, K, V -> QKᵀ -> scale -> mask -> softmax -> dropout -> ·V
- ``bug_map.png``              the same data flow with notebook 14's twelve bugs numbered where they strike
- ``mha_mqa_gqa_sharing.png``  which query heads share which K/V heads in MHA, GQA, MQA

Query heads are coloured with ``attn_core.viz.plotting.group_colors``, so the diagram
matches the explorers' heatmap frames.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Circle, FancyBboxPatch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repo
from attn_core import i18n  # noqa: E402
from attn_core.i18n import translate as tr  # noqa: E402
from attn_core.viz.plotting import group_colors  # noqa: E402

DPI = 110
FONT = 15  # projector-sized base font, in points
INPUT, STEP, OUTPUT = "#dbe9f6", "#eeeeee", "#fde6c8"  # calm fills: inputs, operations, result
EDGE, INK, NOTE = "#5f6b7a", "#1d2733", "#4a5563"
BUG = "#c62828"  # bug markers


def box(ax, x, y, width, height, title, shape="", fill=STEP, edge=EDGE, size=FONT, ink=INK):
    """A rounded box centred at (x, y): a bold title and, under it, the tensor's shape."""
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2),
            width,
            height,
            boxstyle="round,pad=0,rounding_size=0.12",
            fc=fill,
            ec=edge,
            lw=2,
        )
    )
    dy = 0.17 * height if shape else 0.0
    ax.text(x, y + dy, tr(title), ha="center", va="center", fontsize=size, weight="bold", color=ink)
    if shape:
        ax.text(x, y - 0.24 * height, tr(shape), ha="center", va="center", fontsize=size * 0.8, color=INK)


def arrow(ax, start, end, color=EDGE, width=2.0):
    """A straight arrow between two points (data coordinates = inches)."""
    ax.annotate(
        "",
        end,
        start,
        arrowprops=dict(arrowstyle="-|>", color=color, lw=width, mutation_scale=18, shrinkA=0, shrinkB=0),
    )


def canvas(width, height):
    """A figure whose single axes spans it, one data unit per inch, no frame."""
    fig = Figure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax


def dataflow(ax, y=2.3, notes=True) -> dict[str, tuple[float, float]]:
    """Draw the SDPA pipeline with its main row at height ``y``; return the centre of every box by name."""
    w, h = 1.75, 1.15  # operation boxes
    steps = [
        ("scores", r"$\mathbf{QK^{\top}}$", "Lq × Lk", "scores:\nquery · key\nfor every pair"),
        ("scale", r"$\mathbf{\times\ 1/\sqrt{d_k}}$", "Lq × Lk", "keeps scores\n~unit variance\nas d_k grows"),
        ("mask", "mask", "Lq × Lk", "bool, True =\nmay attend;\nblocked → excluded"),
        ("softmax", "softmax", "over keys", "each row\nsums to 1"),
        ("dropout", "dropout", "Lq × Lk", "training only;\nidentity in eval"),
        ("values", r"$\mathbf{\cdot\ V}$", "Lq × dv", "weighted sum\nof value rows"),
    ]
    xs = [3.1 + 2.1 * i for i in range(len(steps) + 1)]  # last x: the output
    where = {}
    for x, (name, title, shape, note) in zip(xs, steps, strict=False):
        box(ax, x, y, w, h, title, shape)
        where[name] = (x, y)
        if notes:
            ax.text(
                x, y - h / 2 - 0.25, tr(note), ha="center", va="top", fontsize=FONT * 0.78, color=NOTE, linespacing=1.3
            )
    box(ax, xs[-1], y, w, h, "output", "Lq × dv", fill=OUTPUT)
    where["output"] = (xs[-1], y)
    for a, b in zip(xs, xs[1:], strict=False):
        arrow(ax, (a + w / 2, y), (b - w / 2, y))

    # Inputs: Q and K meet in QKᵀ; the mask and V come in from above where they are used.
    for title, shape, qy in (("Q", "Lq × d", y + 1.45), ("K", "Lk × d", y - 1.45)):
        box(ax, 1.05, qy, 1.4, 1.0, title, shape, fill=INPUT)
        arrow(ax, (1.75, qy), (xs[0] - w / 2, y + (0.25 if qy > y else -0.25)))
        where[title] = (1.05, qy)
    top = y + 2.05
    box(ax, xs[2], top, w, 0.95, "bool mask", "Lq × Lk", fill=INPUT, size=FONT * 0.9)
    box(ax, xs[5], top, w, 0.95, "V", "Lk × dv", fill=INPUT)
    where["bool mask"], where["V"] = (xs[2], top), (xs[5], top)
    for x in (xs[2], xs[5]):
        arrow(ax, (x, top - 0.475), (x, y + h / 2))
    return where


def sdpa_dataflow() -> Figure:
    """Scaled dot-product attention as a left-to-right pipeline, with a note under each step."""
    fig, ax = canvas(16.9, 5.6)
    dataflow(ax)
    ax.text(
        0.25,
        5.4,
        tr("Scaled dot-product attention:  softmax(Q Kᵀ / √d_k) · V,  blocked keys excluded"),
        ha="left",
        va="top",
        fontsize=FONT * 1.2,
        weight="bold",
        color=INK,
    )
    return fig


# Notebook 14's bugs (attn_core.exercises.bug_hunt.BUGS, in order): where each strikes, and how.
BUG_MAP = [
    ("scale", (-0.55, 0.75), "scaled by √d_model, not √d_k (the head size)"),
    ("V", (-0.95, 0.0), "V computed with k_proj (copy-paste)"),
    ("bool mask", (-0.95, 0.3), "flipped mask: True read as blocked"),
    ("mask", (-0.55, 0.75), "-inf fill: fully masked rows → NaN"),
    ("softmax", (-0.55, 0.75), "softmax over queries (dim=-2), not keys"),
    ("softmax", (0.55, 0.75), "mask applied after the softmax"),
    ("dropout", (-0.55, 0.75), "dropout before the softmax"),
    ("dropout", (0.55, 0.75), "dropout still on in eval()"),
    ("output", (0.0, 0.75), "head merge: view without contiguous()"),
    ("K", (0.0, -0.72), "GQA: repeat, not repeat_interleave, for K/V"),
    ("bool mask", (0.0, 0.7), "per-sequence mask not broadcast over heads"),
    ("bool mask", (0.95, 0.3), "decode step: causal mask aligned top-left"),
]


def bug_marker(ax, x, y, number, radius=0.23):
    ax.add_patch(Circle((x, y), radius, fc=BUG, ec="white", lw=1.5, zorder=5))
    ax.text(x, y, str(number), ha="center", va="center", fontsize=FONT * 0.85, weight="bold", color="white", zorder=6)


def bug_map() -> Figure:
    """The SDPA data flow with the twelve bug-hunt bugs numbered where they strike, and a key below."""
    fig, ax = canvas(16.9, 8.6)
    where = dataflow(ax, y=5.0, notes=False)
    for number, (name, (dx, dy), _) in enumerate(BUG_MAP, start=1):
        x, y = where[name]
        bug_marker(ax, x + dx, y + dy, number)
    ax.text(0.25, 8.4, tr("Where the kernel bugs of notebook 14 strike"), ha="left", va="top", fontsize=FONT * 1.2,
            weight="bold", color=INK)  # fmt: skip
    ax.plot([0.25, 16.65], [2.75, 2.75], color="#cccccc", lw=1)
    for number, (_, _, text) in enumerate(BUG_MAP, start=1):
        column, row = divmod(number - 1, 4)
        x, y = 0.6 + column * 5.55, 2.3 - row * 0.55
        bug_marker(ax, x, y, number, radius=0.2)
        ax.text(x + 0.35, y, tr(text), ha="left", va="center", fontsize=FONT * 0.85, color=INK)
    return fig


def sharing_panel(ax, x0, title, num_kv_heads, caption, num_heads=8):
    """One panel: query heads on top, K/V heads below, a line from each head to the K/V it reads."""
    colors = group_colors(num_heads, num_kv_heads)
    group = num_heads // num_kv_heads
    q_w, gap, q_y, kv_y = 0.5, 0.1, 3.5, 1.6
    q_x = [x0 + i * (q_w + gap) for i in range(num_heads)]  # centres
    kv_x = [sum(q_x[g * group : (g + 1) * group]) / group for g in range(num_kv_heads)]  # under their group
    kv_w = min(group * (q_w + gap) - gap, 1.7)
    centre = (q_x[0] + q_x[-1]) / 2
    ax.text(centre, 4.65, tr(title), ha="center", va="center", fontsize=FONT * 1.1, weight="bold", color=INK)
    for head, x in enumerate(q_x):
        kv = head // group
        ax.plot([x, kv_x[kv]], [q_y - 0.3, kv_y + 0.35], color=colors[head], lw=2.2, solid_capstyle="round")
        box(ax, x, q_y, q_w, 0.6, f"q{head}", fill="white", edge=colors[head], size=FONT * 0.8)
    for kv, x in enumerate(kv_x):
        label = f"K/V {kv}" if kv_w > 1.0 else f"kv{kv}"
        color = colors[kv * group]
        box(ax, x, kv_y, kv_w, 0.7, label, fill=color, edge=color, size=FONT * 0.8, ink="white")
    ax.text(centre, 0.7, tr(caption), ha="center", va="center", fontsize=FONT, color=INK)
    return centre


def sharing_diagram() -> Figure:
    """MHA vs GQA vs MQA: 8 query heads reading 8, 2 or 1 K/V heads; colour = shared K/V head."""
    fig, ax = canvas(17.0, 5.1)
    panels = [
        ("MHA: 8 K/V heads", 8, "KV cache: 1× (baseline)"),
        ("GQA: 2 K/V heads", 2, "KV cache: 1/4× of MHA\nquery head h reads kv h // 4"),
        ("MQA: 1 K/V head", 1, "KV cache: 1/8× of MHA"),
    ]
    for i, (title, num_kv_heads, caption) in enumerate(panels):
        sharing_panel(ax, 1.6 + i * 5.35, title, num_kv_heads, caption)
    ax.text(0.2, 3.5, tr("query\nheads"), ha="left", va="center", fontsize=FONT * 0.85, color=NOTE)
    ax.text(0.2, 1.6, tr("K/V\nheads"), ha="left", va="center", fontsize=FONT * 0.85, color=NOTE)
    return fig


DIAGRAMS = {"sdpa_dataflow.png": sdpa_dataflow, "bug_map.png": bug_map, "mha_mqa_gqa_sharing.png": sharing_diagram}


def main(out_dir: str | Path | None = None, lang: str = "en") -> list[Path]:
    """Draw every diagram in ``lang`` into ``out_dir`` (default: this script's folder, ``zh/`` under it for
    Chinese); return the paths."""
    out = Path(out_dir) if out_dir is not None else Path(__file__).resolve().parent / ("" if lang == "en" else lang)
    out.mkdir(parents=True, exist_ok=True)
    before = i18n.get_language()
    i18n.set_language(lang)  # "zh": the catalogs, and the CJK font as matplotlib's fallback family
    try:
        paths = []
        for name, draw in DIAGRAMS.items():
            path = out / name
            # No "Software" stamp: the bytes depend only on this script and the fonts.
            draw().savefig(path, dpi=DPI, facecolor="white", metadata={"Software": None})
            paths.append(path)
    finally:
        i18n.set_language(before)
    return paths


if __name__ == "__main__":
    out_dir = sys.argv[1] if len(sys.argv) > 1 else None
    written = main(out_dir) + main(None if out_dir is None else Path(out_dir) / "zh", lang="zh")
    for path in written:
        print(f"wrote {path}")
