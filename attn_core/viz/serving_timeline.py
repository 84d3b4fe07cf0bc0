"""Draw a serving engine's schedule (notebook 13b): which request ran in which step, and how many tokens.

``plot_serving_timeline(timeline)`` takes ``engine.timeline`` (per step, the ``(request_id, tokens)`` pairs the
scheduler ran) and returns a Figure: one row per request, one column per step; a cell is a prefill chunk
(orange, its token count printed) or a decode token (blue). Requests overlap in time: continuous batching.
A gap inside a row is a request waiting (no seat, no budget, or preempted and recomputing).

Pure matplotlib (a ``Figure``, no pyplot): nothing global changes.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from attn_core.i18n import localize
from attn_core.viz.plotting import DPI, FONT_PT, VALUE_PT

__all__ = ["plot_serving_timeline", "PREFILL_COLOR", "DECODE_COLOR"]

PREFILL_COLOR, DECODE_COLOR = "#E69F00", "#0072B2"  # Okabe & Ito orange / blue (colour-blind safe)


def plot_serving_timeline(timeline, *, title: str | None = None, max_steps: int = 120) -> Figure:
    """Requests (rows) x steps (columns): orange = prefill chunk (tokens printed), blue = one decode token."""
    if not isinstance(timeline, list) or not all(isinstance(step, list | tuple) for step in timeline):
        raise TypeError(f"plot_serving_timeline takes engine.timeline (a list of steps), got {timeline!r:.60}.")
    if len(timeline) > max_steps:
        raise ValueError(
            f"the timeline has {len(timeline)} steps, more than max_steps={max_steps} columns can show readably; "
            "plot a slice (timeline[:max_steps]) or raise max_steps."
        )
    rows: dict = {}
    for step in timeline:
        for rid, _ in step:
            rows.setdefault(rid, len(rows))
    width = min(16.0, max(6.0, 0.32 * len(timeline) + 1.5))
    fig = Figure(figsize=(width, 0.36 * max(len(rows), 1) + 1.6), dpi=DPI)
    ax = fig.subplots()
    for column, step in enumerate(timeline):
        for rid, tokens in step:
            row = rows[rid]
            # a 1-token prefill remainder also computes one token: drawn as prefill only when > 1
            color = PREFILL_COLOR if tokens > 1 else DECODE_COLOR
            ax.add_patch(Rectangle((column + 0.5, row - 0.4), 1, 0.8, facecolor=color, edgecolor="white"))
            if tokens > 1 and len(timeline) <= 60:
                ax.text(column + 1, row, str(tokens), ha="center", va="center", fontsize=VALUE_PT, color="black")
    ax.set_xlim(0.5, len(timeline) + 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_yticks(range(len(rows)), [str(rid) for rid in rows], fontsize=FONT_PT)
    ax.tick_params(axis="x", labelsize=FONT_PT)
    ax.set_xlabel(localize("step"), fontsize=FONT_PT)
    ax.set_ylabel(localize("request"), fontsize=FONT_PT)
    ax.legend(
        handles=[
            Patch(color=PREFILL_COLOR, label=localize("prefill chunk (tokens)")),
            Patch(color=DECODE_COLOR, label=localize("decode (1 token)")),
        ],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.28 if len(rows) < 6 else -0.18),
        ncol=2,
        fontsize=FONT_PT,
        frameon=False,
    )
    if title:
        ax.set_title(title, fontsize=FONT_PT + 1)
    fig.tight_layout()
    return fig
