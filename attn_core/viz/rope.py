"""The RoPE explorer of notebook 06: watch a query/key pair turn, and the score follow the distance.

RoPE turns pair ``i`` of a query at position ``m`` by ``m · θ_i`` and the same pair of a key at
position ``n`` by ``n · θ_i``, with ``θ_i = base^(-2i/D)``. The angle between them changes by
``(m - n) · θ_i``: only the distance matters. This module draws that:

- ``rope_demo_vectors(head_dim, seed)`` -> the seeded toy query and key ``(D,)`` (float64);
- ``pair_angles(**params)`` -> the drawn angles of pair ``i`` (query/key, before/after rotation);
- ``distance_curves(**params)`` -> the curves of the right panel against the distance ``0..max_distance``;
- ``render_rope(**params)`` -> a Figure: left, pair ``i`` of q and k on the unit circle, before
  (dashed) and after (solid) rotation; right, the score against the distance ``m - n``;
- ``explain_rope(**params)`` -> one line with the numbers behind the picture;
- ``rope_explorer()`` -> the same picture with sliders, built on ``widgets.Explorer``.

As in ``attn_core.viz.tiles``, the render function is pure (no pyplot), everything is drawn in one
Axes whose data units are inches of the figure, and the text is glyph outlines (``textpaths``):
a redraw costs ~10 ms, where two matplotlib Axes with ticks cost several times that.

One piece: one explorer (notebook 06's RoPE view): its data, render function, explanation line and widget.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Arc, Circle, Rectangle

from attn_core.i18n import localize
from attn_core.viz.plotting import DPI, FONT_PT, VALUE_PT
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import Explorer, merge_params

__all__ = [
    "ROPE_DEFAULTS",
    "BASES",
    "rope_demo_vectors",
    "pair_frequency",
    "pair_angles",
    "distance_curves",
    "render_rope",
    "explain_rope",
    "RopeExplorer",
    "rope_explorer",
]

ROPE_DEFAULTS = dict(
    q_position=6,
    k_position=2,
    pair=0,
    base=10000.0,
    head_dim=16,
    max_distance=64,
    seed=0,
    values=False,
    panel_size=2.8,
    font_scale=1.0,
)
BASES = (100.0, 1000.0, 10000.0, 500000.0)  # 10000: Llama 2; 500000: Llama 3
_Q_COLOR, _K_COLOR = "#1f77b4", "#d95f02"
_AVG_COLOR, _PAIR_COLOR = "#222222", "#7570b3"
_STYLE = {"description_width": "initial"}


def _params(overrides: dict) -> dict:
    p = merge_params(ROPE_DEFAULTS, overrides, "RoPE explorer")
    for name in ("q_position", "k_position", "pair", "seed"):
        if isinstance(p[name], bool) or not isinstance(p[name], (int, np.integer)) or p[name] < 0:
            raise ValueError(f"{name} must be an int >= 0, got {p[name]!r}.")
    head_dim = p["head_dim"]
    if isinstance(head_dim, bool) or not isinstance(head_dim, (int, np.integer)) or head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be an even int >= 2 (RoPE rotates pairs), got {head_dim!r}.")
    if not p["pair"] < head_dim // 2:
        raise ValueError(f"pair {p['pair']} does not exist: head_dim {head_dim} has pairs 0..{head_dim // 2 - 1}.")
    if not (isinstance(p["base"], (int, float)) and math.isfinite(p["base"]) and p["base"] > 1):
        raise ValueError(f"base must be a number > 1, got {p['base']!r}.")
    if isinstance(p["max_distance"], bool) or not isinstance(p["max_distance"], (int, np.integer)):
        raise ValueError(f"max_distance must be an int >= 1, got {p['max_distance']!r}.")
    if p["max_distance"] < 1:
        raise ValueError(f"max_distance must be an int >= 1, got {p['max_distance']!r}.")
    if p["k_position"] > p["q_position"]:
        raise ValueError(
            f"the key (position {p['k_position']}) comes after the query (position {p['q_position']}): under a causal "
            "mask a query only sees keys at or before it. Move the key to a position <= the query's."
        )
    return p


def rope_demo_vectors(head_dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The seeded toy query and key the explorer rotates: two ``(head_dim,)`` float64 arrays."""
    generator = torch.Generator().manual_seed(int(seed))
    q = torch.randn(int(head_dim), dtype=torch.float64, generator=generator)  # (D,)
    k = q + 0.5 * torch.randn(int(head_dim), dtype=torch.float64, generator=generator)  # (D,): a related key
    return q.numpy(), k.numpy()


def pair_frequency(pair: int, head_dim: int, base: float) -> float:
    """``θ_i = base^(-2i/D)``: radians per position that pair ``i`` turns."""
    return float(base) ** (-2.0 * pair / head_dim)


def pair_angles(**overrides) -> dict[str, float]:
    """Angles (radians, in ``(-π, π]``) of pair ``i`` as drawn: ``q``/``k`` before rotation and
    ``q_rotated`` = ``q`` + ``q_position · θ_i``, ``k_rotated`` = ``k`` + ``k_position · θ_i``
    (rotate-half layout: pair ``i`` is features ``(i, i + D/2)``)."""
    p = _params(overrides)
    q, k = rope_demo_vectors(p["head_dim"], p["seed"])  # (D,) each
    half, i = p["head_dim"] // 2, p["pair"]
    theta = pair_frequency(i, p["head_dim"], p["base"])

    def wrap(angle: float) -> float:
        return math.atan2(math.sin(angle), math.cos(angle))

    q0, k0 = math.atan2(q[i + half], q[i]), math.atan2(k[i + half], k[i])
    return {
        "theta": theta,
        "q": q0,
        "k": k0,
        "q_rotated": wrap(q0 + p["q_position"] * theta),
        "k_rotated": wrap(k0 + p["k_position"] * theta),
    }


def distance_curves(**overrides) -> dict[str, np.ndarray]:
    """The right panel against ``distance = 0..max_distance`` (float64 arrays):

    - ``average``: ``E⟨R_m q, R_n q⟩ / E|q|²`` over random ``q`` with i.i.d. entries, which is
      ``(2/D) Σ_i cos(distance · θ_i)``: the long-range decay (1 at distance 0);
    - ``pair``: ``cos(distance · θ_i)``, the chosen pair's own term: how fast that band turns;
    - ``this``: the cosine of the seeded ``R_m q`` and ``R_n k`` at that distance.
    """
    p = _params(overrides)
    head_dim, base = p["head_dim"], float(p["base"])
    distance = np.arange(p["max_distance"] + 1, dtype=np.float64)  # (N,)
    thetas = base ** (-2.0 * np.arange(head_dim // 2) / head_dim)  # (D/2,)
    angles = distance[:, None] * thetas  # (N, D/2)
    q, k = rope_demo_vectors(head_dim, p["seed"])  # (D,) each
    half = head_dim // 2
    # <R_m q, R_n k> = sum_i |q_i||k_i| cos(φ_q,i − φ_k,i + (m − n) θ_i) over the pairs i (complex form)
    qc, kc = q[:half] + 1j * q[half:], k[:half] + 1j * k[half:]  # (D/2,) complex each
    this = (qc * np.conj(kc) * np.exp(1j * angles)).real.sum(-1) / (np.linalg.norm(q) * np.linalg.norm(k))  # (N,)
    return {
        "distance": distance,
        "average": np.cos(angles).mean(-1),  # (N,)
        "pair": np.cos(angles[:, p["pair"]]),  # (N,)
        "this": this,
    }


def render_rope(**overrides) -> Figure:
    """Figure for ``overrides`` (keywords as in ``ROPE_DEFAULTS``): left, pair ``i`` of q and k on the
    unit circle (dashed: before RoPE; solid: after, turned by position · θ_i; the arc is the angle
    RoPE added between them, ``(m − n) · θ_i``); right, the score against the distance ``m − n``,
    with the current distance marked. Raises ValueError for impossible settings.

    Lines carry gids: ``q-original``, ``k-original``, ``q-rotated``, ``k-rotated`` (from the circle's
    centre to the unit-circle point), ``curve-average``, ``curve-pair``, ``curve-this`` and
    ``distance-marker``; ``fig.rope_geometry`` holds the circle centre and radius and the right
    panel's box and ranges (inches), so tests can read the picture back.
    """
    p = _params(overrides)
    angles = pair_angles(**overrides)
    curves = distance_curves(**overrides)
    font = FONT_PT * p["font_scale"]
    small = VALUE_PT * p["font_scale"]  # >= 9 pt at font_scale 1
    line = font * 1.4 / 72  # one line of text, inches
    size = p["panel_size"]
    width, height = size * 3.6, size * 1.25 + 3 * line
    fig = Figure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    text = TextBatch()
    m, n, i, theta = p["q_position"], p["k_position"], p["pair"], angles["theta"]

    # --- left: the unit circle of pair i ------------------------------------------------------
    longest = f"q at {max(m, n)}" + (" (−180°)" if p["values"] else "")
    margin = text_width(longest, small) + 0.2  # room for a vector's label left or right of the circle
    radius = min(size * 0.5, (height - 4.5 * line - 2 * small / 72) / 2)
    cx, cy = margin + radius, 1.6 * line + small / 72 + radius
    ax.add_artist(Circle((cx, cy), radius, fill=False, edgecolor="#999999", lw=0.8))
    ax.plot([cx - radius * 1.08, cx + radius * 1.08], [cy, cy], color="#dddddd", lw=0.6)
    ax.plot([cx, cx], [cy - radius * 1.08, cy + radius * 1.08], color="#dddddd", lw=0.6)
    for name, color, style, width_ in (
        ("q-original", _Q_COLOR, "--", 1.0),
        ("k-original", _K_COLOR, "--", 1.0),
        ("q-rotated", _Q_COLOR, "-", 2.2),
        ("k-rotated", _K_COLOR, "-", 2.2),
    ):
        angle = angles[name.replace("-original", "").replace("-", "_")]
        tip = (cx + radius * math.cos(angle), cy + radius * math.sin(angle))
        ax.plot([cx, tip[0]], [cy, tip[1]], style, color=color, lw=width_, gid=name, alpha=1 if style == "-" else 0.6)
        if style == "-":
            ax.plot([tip[0]], [tip[1]], "o", color=color, ms=5)
            label = f"q at {m}" if name.startswith("q") else f"k at {n}"
            if p["values"]:
                label += f" ({math.degrees(angle):.0f}°)"
            label = localize(label)
            out = 1.0 + 0.08 + small / 72 / radius
            put_ha = "left" if math.cos(angle) >= 0 else "right"
            text.add(cx + radius * out * math.cos(angle), cy + radius * out * math.sin(angle), label, small,
                     ha=put_ha, color=color)  # fmt: skip
    # The angle RoPE adds between the pair of q and the pair of k: (m − n)·θ_i, drawn from k to q.
    added = (m - n) * theta
    start = math.degrees(angles["k_rotated"])
    span = math.degrees(added % (2 * math.pi))
    if span > 0.5:
        ax.add_artist(Arc((cx, cy), radius * 0.7, radius * 0.7, theta1=start, theta2=start + span, color="#444444",
                          lw=1.2, gid="angle-arc"))  # fmt: skip
    text.add(cx, height - 0.4 * line, localize(f"pair {i}: θ = {theta:.3g} rad/token"), font, va="top")
    text.add(cx, 0.45 * line, f"(m−n)·θ = {m - n}·{theta:.3g} = {added:.3g} rad", small, va="center")

    # --- right: the score against the distance -------------------------------------------------
    px = cx + radius + margin + 0.25 + line + 3 * small * 0.62 / 72
    pw, py = width - px - 0.2, 2.2 * line
    ph = height - py - 2.3 * line
    max_distance = p["max_distance"]

    def dx(value):
        return px + np.asarray(value, dtype=np.float64) / max_distance * pw

    def sy(value):
        return py + (np.asarray(value, dtype=np.float64) + 1.0) / 2.0 * ph  # y range -1..1

    ax.add_artist(Rectangle((px, py), pw, ph, fill=False, edgecolor="#888888", lw=0.8))
    for value in (-1.0, 0.0, 1.0):
        ax.plot([px, px + pw], [sy(value)] * 2, color="#e5e5e5", lw=0.6)
        text.add(px - 0.05, float(sy(value)), f"{value:g}".replace("-", "−"), small, ha="right")
    for tick in (0, max_distance // 2, max_distance):
        text.add(float(dx(tick)), py - 0.05, str(tick), small, va="top")
    text.add(px + pw / 2, py - 0.05 - line, localize("distance m − n (tokens)"), font, va="top")
    text.add(
        px - 0.05 - 3 * small * 0.62 / 72 - 0.05,
        py + ph / 2,
        localize("score (cosine)"),
        font,
        va="bottom",
        rotation=90,
    )
    distance = curves["distance"]
    ax.plot(dx(distance), sy(curves["pair"]), color=_PAIR_COLOR, lw=1.0, ls="--", gid="curve-pair")
    ax.plot(dx(distance), sy(curves["this"]), color=_K_COLOR, lw=1.0, gid="curve-this")
    ax.plot(dx(distance), sy(curves["average"]), color=_AVG_COLOR, lw=2.0, gid="curve-average")
    shown = min(m - n, max_distance)
    ax.plot([float(dx(shown))] * 2, [py, py + ph], color="#d62728", lw=1.2, gid="distance-marker")
    if p["values"] and m - n <= max_distance:
        for key, color in (("average", _AVG_COLOR), ("this", _K_COLOR)):
            value = float(curves[key][m - n])
            text.add(float(dx(shown)) + 0.06, float(sy(value)), f"{value:.2f}".replace("-", "−"), small, ha="left",
                     color=color)  # fmt: skip
    if m - n > max_distance:
        text.add(px + pw - 0.05, py + ph - 0.1, localize(f"m − n = {m - n} is off the right edge"), small, ha="right",
                 va="top", color="#d62728")  # fmt: skip
    # Legend above the plot, one row.
    legend_y, x0 = py + ph + 0.5 * line, px
    for label, color, style in (
        ("average over random q", _AVG_COLOR, "-"),
        (f"pair {i} alone", _PAIR_COLOR, "--"),
        ("this q, k", _K_COLOR, "-"),
    ):
        ax.plot([x0, x0 + 0.25], [legend_y] * 2, style, color=color, lw=1.5)
        shown_label = localize(label)
        text.add(x0 + 0.3, legend_y, shown_label, small, ha="left")
        # English keeps its spacing; a translation is measured (a CJK character is ~1 em, not ~0.55)
        x0 += 0.45 + (len(label) * small * 0.55 / 72 if shown_label == label else text_width(shown_label, small))
    text.add(
        px + pw / 2, height - 0.4 * line, localize(f"base {p['base']:g}, head_dim {p['head_dim']}"), font, va="top"
    )
    text.draw(ax)
    fig.rope_geometry = {"center": (cx, cy), "radius": radius, "box": (px, py, pw, ph), "max_distance": max_distance}
    return fig


def explain_rope(**overrides) -> str:
    """One line: the pair's frequency, how far q and k turned, the angle between them, the scores."""
    p = _params(overrides)
    curves = distance_curves(**overrides)
    m, n, i, head_dim = p["q_position"], p["k_position"], p["pair"], p["head_dim"]
    theta = pair_frequency(i, head_dim, p["base"])
    turn = 2 * math.pi / theta
    distance = m - n
    if distance <= p["max_distance"]:
        this, average = curves["this"][distance], curves["average"][distance]
        scores = f"score of this q, k {this:.2f}; averaged over random q, {average:.2f}."
    else:
        scores = "the distance is beyond the plotted range."
    return (
        f"pair {i} of {head_dim // 2}: θ = {p['base']:g}^(−2·{i}/{head_dim}) = {theta:.3g} rad per token "
        f"(a full turn every {turn:.3g} tokens). q at {m} turned {m * theta:.3g} rad, k at {n} turned "
        f"{n * theta:.3g} rad: RoPE added (m − n)·θ = {distance * theta:.3g} rad between them, the same for any m, n "
        f"{distance} apart; {scores}"
    )


class RopeExplorer(Explorer):
    """``widgets.Explorer`` drawing ``render_rope``; the picture has no colour scale, so the display
    row holds size, font and "print values" (the angles in degrees and the score at the marker)."""

    DISPLAY = ("panel_size", "font_scale", "values")

    def render(self, params: dict) -> tuple[Figure, str]:
        return render_rope(**params), explain_rope(**params)


def rope_explorer(**fixed) -> RopeExplorer:
    """06: move the query and key positions and the pair, and change the base.

    Keywords set where a control starts (``rope_explorer(pair=3, base=500000.0)``) or fix a parameter
    without a control (``seed``).
    """
    import ipywidgets as w

    style = _STYLE
    controls = {
        "q_position": w.IntSlider(description="query position m", value=6, min=0, max=128, style=style),
        "k_position": w.IntSlider(description="key position n", value=2, min=0, max=128, style=style),
        "pair": w.IntSlider(description="pair i", value=0, min=0, max=7, style=style),
        "base": w.Dropdown(description="base", options=list(BASES), value=10000.0, style=style),
        "head_dim": w.Dropdown(description="head_dim", options=[8, 16, 64, 128], value=16, style=style),
        "max_distance": w.Dropdown(description="distances shown", options=[16, 64, 256, 1024], value=64, style=style),
    }

    def fit_pairs(_=None):
        controls["pair"].max = controls["head_dim"].value // 2 - 1  # clamps the value when head_dim shrinks

    fit_pairs()
    controls["head_dim"].observe(fit_pairs, names="value")
    return RopeExplorer("rope", controls, fixed)
