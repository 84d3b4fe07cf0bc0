"""The training explorer of notebook 12: scrub through training and watch heads specialise.

A tiny attention-only model is trained on sequences that repeat themselves (``… A B … A → B``).
At checkpoints the notebook keeps the model's attention on one probe sequence and two measured
scores per head; this module scores, stores and draws them:

- ``previous_token_score(weights)`` -> mean weight of query ``i`` on key ``i − 1``;
- ``induction_score(weights, tokens)`` -> mean weight of a query on the keys right after earlier
  occurrences of its own token (the prefix-matching pattern of an induction head);
- ``TrainingHistory`` -> the losses, the checkpoints' probe attention and scores, validated;
- ``render_training(history, step=..., head=...)`` -> a Figure: the heads' attention on the probe
  (fixed 0-1 colour scale), the loss curve and the scores against the step, the step marked;
- ``explain_training(history, step, head)`` -> one line naming the heads above the thresholds;
- ``training_explorer(history)`` -> the same picture with a step slider (and Play) and a head menu.

As in ``attn_core.viz.rope``, the render function is pure and draws everything in one Axes whose
data units are inches of the figure, text as glyph outlines (``textpaths``).

One piece: one explorer (notebook 12's training view): its data, render function, explanation line and widget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from attn_core.i18n import localize
from attn_core.viz.head_view import thin_labels
from attn_core.viz.plotting import DPI, FONT_PT, VALUE_PT, _Heatmap
from attn_core.viz.textpaths import TextBatch, text_width
from attn_core.viz.widgets import _STYLE, Explorer, control_row

__all__ = [
    "PREVIOUS_TOKEN_THRESHOLD",
    "INDUCTION_THRESHOLD",
    "previous_token_score",
    "induction_score",
    "TrainingHistory",
    "head_names",
    "render_training",
    "explain_training",
    "TrainingExplorer",
    "training_explorer",
]

# A head "is" a previous-token / induction head when its score is above this: more than half of
# its attention follows the pattern (at step 0 the scores are ~0.1-0.2, spread over ~12 keys).
PREVIOUS_TOKEN_THRESHOLD = 0.5
INDUCTION_THRESHOLD = 0.5
_PREV_COLOR, _IND_COLOR, _LOSS_COLOR = "#1f77b4", "#d95f02", "#222222"


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """Mean over queries ``i >= 1`` of ``weights[..., i, i-1]``: ``(..., L, L)`` -> ``(...)``."""
    if not isinstance(weights, torch.Tensor) or weights.ndim < 2 or weights.shape[-1] != weights.shape[-2]:
        shape = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise ValueError(f"weights must be a tensor (..., L, L) of self-attention, got {shape}.")
    if weights.shape[-1] < 2:
        raise ValueError("a previous-token score needs at least 2 tokens.")
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)  # (...)


def induction_score(weights: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Share of attention on the token after an earlier occurrence of the query's own token.

    ``weights (B, ..., L, L)`` (causal), ``tokens (B, L)`` ids (or ``(L,)`` for ``B = 1``). For query
    ``i`` the induction keys are ``j <= i`` with ``tokens[j-1] == tokens[i]``; the score averages
    ``Σ_j weights[i, j]`` over the queries that have at least one (over the batch too). Returns ``(...)``.
    """
    if isinstance(tokens, torch.Tensor) and tokens.ndim == 1:
        tokens = tokens[None]  # (1, L)
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.is_floating_point():
        raise ValueError(f"tokens must be integer ids (B, L), got {getattr(tokens, 'shape', type(tokens).__name__)}.")
    batch, length = tokens.shape
    if not isinstance(weights, torch.Tensor) or weights.ndim < 3 or weights.shape[0] != batch:
        shape = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise ValueError(f"weights must be (B, ..., L, L) with B = {batch} as in tokens, got {shape}.")
    if weights.shape[-2:] != (length, length):
        raise ValueError(f"weights end in {tuple(weights.shape[-2:])}, tokens have L = {length}: expected (L, L).")
    after = torch.zeros(batch, length, length, dtype=torch.bool, device=tokens.device)  # (B, L, L) query i, key j
    after[:, :, 1:] = tokens[:, :, None] == tokens[:, None, :-1]  # key j's previous token is query i's token
    after &= torch.ones(length, length, dtype=torch.bool, device=tokens.device).tril()  # only keys j <= i
    has_earlier = after.any(-1)  # (B, L) queries whose token occurred before
    if not has_earlier.any():
        raise ValueError("no token repeats in these sequences, so no query can do induction: the score is undefined.")
    middle = (1,) * (weights.ndim - 3)
    share = (weights * after.view(batch, *middle, length, length).to(weights.dtype)).sum(-1)  # (B, ..., L)
    counted = has_earlier.view(batch, *middle, length).to(weights.dtype)  # (B, 1.., L)
    return (share * counted).sum((0, -1)) / counted.sum()  # (...)


@dataclass(frozen=True)
class TrainingHistory:
    """What training kept: ``loss[s]`` at every step ``s``; at each checkpoint ``steps[c]`` the attention
    ``weights[c] (layers, heads, L, L)`` on the probe ``tokens`` (L strings) and the scores
    ``previous_token[c]``, ``induction[c]`` ``(layers, heads)`` measured on a batch of probes."""

    steps: tuple[int, ...]
    loss: tuple[float, ...]
    tokens: tuple[str, ...]
    weights: torch.Tensor
    previous_token: torch.Tensor
    induction: torch.Tensor

    def __post_init__(self):
        steps = self.steps
        if len(steps) < 1 or any(b <= a for a, b in zip(steps, steps[1:], strict=False)) or steps[0] < 0:
            raise ValueError(f"steps must be increasing step numbers >= 0, got {steps}.")
        if steps[-1] >= len(self.loss):
            raise ValueError(f"checkpoint step {steps[-1]} has no loss: only {len(self.loss)} losses (steps 0..).")
        num, length = len(steps), len(self.tokens)
        if self.weights.ndim != 5 or self.weights.shape[0] != num or self.weights.shape[-2:] != (length, length):
            raise ValueError(
                f"weights must be (checkpoints={num}, layers, heads, L={length}, L), got {tuple(self.weights.shape)}."
            )
        for name in ("previous_token", "induction"):
            if tuple(getattr(self, name).shape) != tuple(self.weights.shape[:3]):
                raise ValueError(f"{name} must be (checkpoints, layers, heads) = {tuple(self.weights.shape[:3])}.")

    def index(self, step: int) -> int:
        """The last checkpoint at or before ``step``."""
        if not self.steps[0] <= step <= self.steps[-1]:
            raise ValueError(
                f"step {step} is outside training: checkpoints run from {self.steps[0]} to {self.steps[-1]}."
            )
        return int(np.searchsorted(self.steps, step, side="right")) - 1


def head_names(history: TrainingHistory) -> list[str]:
    """``["L0 H0", "L0 H1", ...]``: every head, layer by layer."""
    layers, heads = history.weights.shape[1:3]
    return [f"L{layer} H{head}" for layer in range(layers) for head in range(heads)]


def _parse_head(history: TrainingHistory, head) -> tuple[int, int] | None:
    if head == "all":
        return None
    if head not in head_names(history):
        raise ValueError(f"head {head!r} does not exist; choose 'all' or one of {head_names(history)}.")
    layer, number = head.split()
    return int(layer[1:]), int(number[1:])


def _cell_text(weight: float) -> str:
    """A weight in as few characters as fit a cell: ``.91``, ``1.0``."""
    return "1.0" if weight >= 0.995 else f"{weight:.2f}"[1:]


def render_training(
    history: TrainingHistory,
    *,
    step=None,
    head="all",
    panel_size=2.2,
    font_scale=1.0,
    values=False,
    fixed_scale=True,
) -> Figure:
    """Left: the probe's attention at the checkpoint of ``step``: every head, or one (``"L1 H0"``) large
    enough to label every token; colours on the fixed 0-1 scale unless ``fixed_scale=False`` (then up to
    the largest weight of queries 1.., larger ones in the top colour); ``values``
    prints the weights >= 0.1 of one head. Right: the loss at every step (top) and the previous-token and
    induction scores at the checkpoints (bottom; for ``"all"`` the best head of each at the end), the
    threshold dashed, ``step`` as a red line. Raises ValueError for a step or head that does not exist.

    Images carry gids ``heatmap-L{l}-H{h}``; lines ``loss``, ``score-previous``, ``score-induction``,
    ``threshold`` and ``step-marker``; ``fig.training_geometry`` holds the two plot boxes (inches).
    """
    step = history.steps[-1] if step is None else int(step)
    index, chosen = history.index(step), _parse_head(history, head)
    num_layers, num_heads, length = history.weights.shape[1], history.weights.shape[2], len(history.tokens)
    font, small = FONT_PT * font_scale, VALUE_PT * font_scale
    line = font * 1.4 / 72  # one line of text, inches
    if chosen:
        panels, rows, cols = [chosen], 1, 1
        need = text_width(".00", small) + 0.06 if values else small * 1.35 / 72  # per cell: a value, or a label
        size = max(2 * panel_size, length * need)
        labels = list(history.tokens)
    else:
        panels = [(layer, h) for layer in range(num_layers) for h in range(num_heads)]
        rows, cols, size = num_layers, num_heads, panel_size
        labels = thin_labels(list(history.tokens), size, font_scale)
    label_w = max(text_width(t, small) for t in history.tokens) + 0.08
    gx, gy = 0.12 + line + label_w, 0.15 + line + small / 72  # the grid's bottom-left corner
    gap = 0.15
    grid_w, grid_h = cols * size + (cols - 1) * gap, rows * (size + line) + (rows - 1) * gap
    bar_x = gx + grid_w + 0.2
    plot_x = bar_x + 0.35 + text_width("0.5", small) + 0.5 + line
    plot_w = max(3.0, 1.3 * panel_size)
    width, height = plot_x + plot_w + 0.25, gy + grid_h + 0.1
    fig = Figure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    text = TextBatch()

    # --- left: the heads' attention on the probe -------------------------------------------------
    shown = history.weights[index].double().numpy()  # (layers, heads, L, L)
    # Relative scale: up to the largest weight of queries 1.. (query 0 always puts 1.0 on its only key).
    top_value = 1.0 if fixed_scale else max(float(shown[layer, h, 1:].max()) for layer, h in panels)
    norm = Normalize(0.0, top_value if top_value > 0 else 1.0)
    cell = size / length
    for n, (layer, h) in enumerate(panels):
        row, col = divmod(n, cols)
        x0, y1 = gx + col * (size + gap), gy + grid_h - row * (size + line + gap) - line  # panel's top-left
        image = _Heatmap(ax, cmap="viridis", norm=norm, extent=(x0, x0 + size, y1 - size, y1), origin="upper",
                         interpolation="nearest")  # fmt: skip
        image.set_data(shown[layer, h])
        image.set_gid(f"heatmap-L{layer}-H{h}")
        ax.add_image(image)
        ax.add_artist(Rectangle((x0, y1 - size), size, size, fill=False, edgecolor="#888888", lw=0.8))
        prev, ind = float(history.previous_token[index, layer, h]), float(history.induction[index, layer, h])
        text.add(
            x0 + size / 2, y1 + 0.05, localize(f"L{layer} H{h} · prev {prev:.2f} · ind {ind:.2f}"), small, va="bottom"
        )
        if col == 0:
            for i, label in enumerate(labels):
                text.add(x0 - 0.05, y1 - (i + 0.5) * cell, label, small, ha="right")
        if row == rows - 1:
            for j, label in enumerate(labels):
                text.add(x0 + (j + 0.5) * cell, y1 - size - 0.05, label, small, va="top")
        if values and chosen:
            for i, j in zip(*np.nonzero(shown[layer, h] >= 0.1), strict=True):
                dark = shown[layer, h, i, j] < 0.6 * top_value  # viridis: light text on its dark half
                text.add(x0 + (j + 0.5) * cell, y1 - (i + 0.5) * cell, _cell_text(float(shown[layer, h, i, j])),
                         small, color="white" if dark else "black")  # fmt: skip
    text.add(0.12, gy + (grid_h - line) / 2, localize("query"), font, va="top", rotation=90)
    text.add(gx + grid_w / 2, 0.1, localize("key" + ("" if not values or chosen else " (values: pick one head)")), font,
             va="bottom")  # fmt: skip
    bar = _Heatmap(ax, cmap="viridis", norm=Normalize(0, 1), extent=(bar_x, bar_x + 0.15, gy, gy + grid_h - line),
                   origin="upper", interpolation="nearest")  # fmt: skip
    bar.set_data(np.linspace(1, 0, 64)[:, None])  # (64, 1) the colour key, top = largest
    ax.add_image(bar)
    for fraction in (0.0, 0.5, 1.0):
        text.add(bar_x + 0.2, gy + fraction * (grid_h - line), f"{fraction * top_value:.2g}", small, ha="left")

    # --- right: the loss (top) and the scores (bottom) against the step ----------------------------
    last = len(history.loss) - 1
    box_h = (grid_h - 3 * line) / 2
    loss_y, score_y = gy + box_h + 2.2 * line, gy

    def sx(s):
        return plot_x + np.asarray(s, dtype=np.float64) / max(last, 1) * plot_w

    loss = np.asarray(history.loss, dtype=np.float64)  # (steps,)
    loss_top = float(np.nanmax(loss)) * 1.05 if np.isfinite(loss).any() and np.nanmax(loss) > 0 else 1.0
    for y0, top, name in ((loss_y, loss_top, "loss"), (score_y, 1.0, "score")):
        ax.add_artist(Rectangle((plot_x, y0), plot_w, box_h, fill=False, edgecolor="#888888", lw=0.8))
        ax.plot([float(sx(step))] * 2, [y0, y0 + box_h], color="#d62728", lw=1.2, gid=f"step-marker-{name}")
        for value in (0.0, top / 2, top):
            text.add(plot_x - 0.05, y0 + value / top * box_h, f"{value:.2g}", small, ha="right")
        text.add(plot_x - 0.12 - text_width("0.5", small) - line / 2, y0 + box_h / 2, localize(name), font, rotation=90)
    ax.plot(sx(np.arange(last + 1)), loss_y + loss / loss_top * box_h, color=_LOSS_COLOR, lw=1.2, gid="loss")
    loss_title = localize(f"loss {history.loss[step]:.3f} at step {step}")
    text.add(plot_x + plot_w / 2, loss_y + box_h + 0.05, loss_title, font, va="bottom")
    ax.plot([plot_x, plot_x + plot_w], [score_y + 0.5 * box_h] * 2, "--", color="#999999", lw=0.8, gid="threshold")
    best_prev = chosen or divmod(int(history.previous_token[-1].argmax()), num_heads)
    best_ind = chosen or divmod(int(history.induction[-1].argmax()), num_heads)
    for kind, (layer, h), color, ha in (("previous", best_prev, _PREV_COLOR, "left"),
                                        ("induction", best_ind, _IND_COLOR, "right")):  # fmt: skip
        scores = (history.previous_token if kind == "previous" else history.induction)[:, layer, h]  # (checkpoints,)
        ax.plot(sx(history.steps), score_y + scores.double().numpy() * box_h, color=color, lw=1.5, gid=f"score-{kind}")
        x = plot_x + 0.05 if ha == "left" else plot_x + plot_w - 0.05
        label = localize(f"{'prev-token' if kind == 'previous' else 'induction'} L{layer} H{h}")
        text.add(x, score_y + box_h + 0.05, label, small, ha=ha, va="bottom", color=color)
    for tick in sorted({0, last // 2, last}):
        text.add(float(sx(tick)), score_y - 0.05, str(tick), small, va="top")
    text.add(plot_x + plot_w / 2, 0.1, localize("training step"), font, va="bottom")
    text.draw(ax)
    fig.training_geometry = {"loss_box": (plot_x, loss_y, plot_w, box_h), "score_box": (plot_x, score_y, plot_w, box_h),
                             "last_step": last, "loss_top": loss_top}  # fmt: skip
    return fig


def explain_training(history: TrainingHistory, step=None, head="all") -> str:
    """One line: the loss at ``step`` and the heads whose scores pass the thresholds there."""
    step = history.steps[-1] if step is None else int(step)
    index, chosen = history.index(step), _parse_head(history, head)
    prev, ind = history.previous_token[index], history.induction[index]  # (layers, heads)
    text = f"step {step} (checkpoint at step {history.steps[index]}): loss {history.loss[step]:.3f}. "
    if chosen:
        lay, h = chosen
        kinds = [name for name, score, cut in (("a previous-token head", prev[lay, h], PREVIOUS_TOKEN_THRESHOLD),
                 ("an induction head", ind[lay, h], INDUCTION_THRESHOLD)) if score > cut]  # fmt: skip
        verdict = " and ".join(kinds) if kinds else "neither pattern yet"
        return text + (
            f"L{lay} H{h}: previous-token score {float(prev[lay, h]):.2f}, induction score {float(ind[lay, h]):.2f} "
            f"(threshold {PREVIOUS_TOKEN_THRESHOLD}): {verdict}."
        )
    parts = []
    for name, scores, cut in (
        ("Previous-token", prev, PREVIOUS_TOKEN_THRESHOLD),
        ("Induction", ind, INDUCTION_THRESHOLD),
    ):
        found = [f"{n} ({float(s):.2f})" for n, s in zip(head_names(history), scores.flatten(), strict=True) if s > cut]
        best = int(scores.argmax())
        fallback = f"none yet (best {head_names(history)[best]} at {float(scores.flatten()[best]):.2f})"
        parts.append(f"{name} heads (score > {cut}): {', '.join(found) if found else fallback}.")
    return text + " ".join(parts)


class TrainingExplorer(Explorer):
    """``widgets.Explorer`` over a :class:`TrainingHistory`: a step slider with Play, a head menu, and
    the series' display row (size, font, print values, fixed scale 0-1)."""

    def __init__(self, history: TrainingHistory, controls: dict, fixed: dict | None = None, save_dir="saved_figures"):
        import ipywidgets as widgets

        self.history = history
        step = controls["step"]
        self.play = widgets.Play(value=step.value, min=step.min, max=step.max, step=step.step, interval=400,
                                 description="play", repeat=False)  # fmt: skip
        super().__init__("training", controls, fixed, save_dir)
        self.link = widgets.jslink((self.play, "value"), (step, "value"))
        others = [control for name, control in controls.items() if name != "step" and name not in self.DISPLAY]
        self.widget.children = (control_row([self.play, step, *others]), *self.widget.children[1:])

    def render(self, params: dict) -> tuple[Figure, str]:
        figure = render_training(self.history, **params)
        return figure, explain_training(self.history, params["step"], params["head"])


def training_explorer(history: TrainingHistory, **fixed) -> TrainingExplorer:
    """12: drag **training step** (or press play) and pick a **head** to watch it specialise."""
    import ipywidgets as w

    steps = history.steps
    interval = math.gcd(*steps[1:]) if len(steps) > 1 else 1
    controls = {
        "step": w.IntSlider(
            description="training step",
            value=steps[-1],
            min=steps[0],
            max=steps[-1],
            step=max(interval, 1),
            style=_STYLE,
        ),  # fmt: skip
        "head": w.Dropdown(description="head", options=["all", *head_names(history)], value="all", style=_STYLE),
    }
    return TrainingExplorer(history, controls, {"panel_size": 2.2, **fixed})
