"""Figures and the decay explorer of notebook 12f (Mamba-2 as attention, state-space duality).

- ``demo_inputs(length, dt, A, seed)``: seeded toy SSD inputs of one head (constant step size dt, rate A).
- ``render_duality(**params)``: the 1-semiseparable decay mask L (fixed 0–1 scale), the attention-form matrix
  M = L ∘ C Bᵀ · dt (signed, relative scale) and the row of L that the chosen query position reads with.
- ``explain_duality``: the explanation line (keep per token, half-life, the measured max |M x − ssd(x)|).
- ``duality_explorer()``: sliders for dt, A and the query position.
- ``plot_recall_from_state``: recall error against stored pairs, a fixed SSD state against softmax attention.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from attn_core.i18n import localize
from attn_core.linear.ssd import ssd, ssd_as_attention, ssd_decay_mask
from attn_core.viz.widgets import _STYLE, DEFAULTS, Explorer, merge_params

__all__ = ["DUALITY_DEFAULTS", "demo_inputs", "render_duality", "explain_duality", "duality_explorer",
           "plot_recall_from_state"]  # fmt: skip

DUALITY_DEFAULTS = dict(length=16, dt=0.5, A=-0.5, position=12, seed=0, **{k: DEFAULTS[k] for k in Explorer.DISPLAY})
DPI = 110
STATE_SIZE, HEAD_DIM = 4, 2  # the toy head: N = 4 state channels, P = 2 value channels


def _params(overrides: dict) -> dict:
    params = merge_params(DUALITY_DEFAULTS, overrides, "duality explorer")
    length, position = params["length"], params["position"]
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"length must be an int >= 1, got {length!r}.")
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < length:
        raise ValueError(f"position must be an int in [0, {length - 1}], got {position!r}.")
    if not float(params["dt"]) > 0:
        raise ValueError(f"dt must be > 0 (the step size after softplus), got {params['dt']!r}.")
    if not float(params["A"]) < 0:
        raise ValueError(f"A must be < 0 (A = −exp(A_log)), got {params['A']!r}.")
    return params


def demo_inputs(length: int, dt: float, A: float, seed: int = 0):
    """Seeded toy inputs of one head: x (1, 1, L, P), dt (1, 1, L) constant, A (1,), B and C (1, 1, L, N)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 1, length, HEAD_DIM, generator=generator, dtype=torch.float64)  # (1, 1, L, P)
    B = torch.randn(1, 1, length, STATE_SIZE, generator=generator, dtype=torch.float64)  # (1, 1, L, N)
    C = torch.randn(1, 1, length, STATE_SIZE, generator=generator, dtype=torch.float64)  # (1, 1, L, N)
    steps = torch.full((1, 1, length), float(dt), dtype=torch.float64)  # (1, 1, L)
    return x, steps, torch.tensor([float(A)], dtype=torch.float64), B, C


def render_duality(**overrides) -> Figure:
    p = _params(overrides)
    length, position = p["length"], p["position"]
    x, dt, A, B, C = demo_inputs(length, p["dt"], p["A"], p["seed"])
    decay = ssd_decay_mask(dt, A)[0, 0].numpy()  # (L, L)
    matrix = ssd_as_attention(dt, A, B, C)[0, 0].numpy()  # (L, L)
    font = 9 * p["font_scale"]
    panel = p["panel_size"]
    figure = Figure(figsize=(panel * 3.7, panel * 1.25), dpi=DPI, layout="constrained")
    left, middle, right = figure.subplots(1, 3, width_ratios=[1, 1, 1.1])
    scale = dict(vmin=0.0, vmax=1.0) if p["fixed_scale"] else {}
    image = left.imshow(decay, cmap="viridis", **scale)
    figure.colorbar(image, ax=left, shrink=0.8).ax.tick_params(labelsize=font)
    left.set_title(localize("decay mask L (0–1)"), fontsize=font)
    largest = float(np.abs(matrix).max()) or 1.0
    signed = middle.imshow(matrix, cmap="RdBu_r", vmin=-largest, vmax=largest)  # signed: no softmax, no 0–1 scale
    figure.colorbar(signed, ax=middle, shrink=0.8).ax.tick_params(labelsize=font)
    middle.set_title(localize("M = L ∘ C Bᵀ · dt (relative scale)"), fontsize=font)
    for ax in (left, middle):
        ax.axhline(position, color="orange", linewidth=1.2)  # the row the right panel shows
        ax.set_xlabel(localize("key j (written)"), fontsize=font)
        ax.tick_params(labelsize=font)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_ylabel(localize("query i (reads)"), fontsize=font)
    if p["values"] and length <= 12:
        for i, j in zip(*np.tril_indices(length), strict=True):
            left.text(j, i, f"{decay[i, j]:.2f}", ha="center", va="center", fontsize=font * 0.6, color="white")
    keys = np.arange(position + 1)
    right.bar(keys, decay[position, : position + 1], color="#1f77b4")
    right.set_ylim(0, 1.05)
    right.set_xlim(-0.6, length - 0.4)
    right.set_title(localize(f"row {position} of L: what query {position} keeps"), fontsize=font)
    right.set_xlabel(localize("key j (written)"), fontsize=font)
    right.tick_params(labelsize=font)
    right.xaxis.set_major_locator(MaxNLocator(integer=True))
    return figure


def explain_duality(**overrides) -> str:
    p = _params(overrides)
    length, position = p["length"], p["position"]
    x, dt, A, B, C = demo_inputs(length, p["dt"], p["A"], p["seed"])
    keep = math.exp(p["dt"] * p["A"])
    half_life = math.log(2) / (p["dt"] * -p["A"])
    as_attention = ssd_as_attention(dt, A, B, C) @ x  # (1, 1, L, P)
    recurrent, _ = ssd(x, dt, A, B, C)  # (1, 1, L, P)
    difference = float((as_attention - recurrent).abs().max())
    oldest = keep**position
    return (
        f"Each token keeps exp(dt·A) = {keep:.3f} of the state: weights halve every {half_life:.1f} tokens. "
        f"Query {position} reads token 0 with decay {oldest:.2e}. "
        f"max |M x − recurrence| = {difference:.1e}."
    )


class DualityExplorer(Explorer):
    def render(self, params: dict):
        return render_duality(**params), explain_duality(**params)


def duality_explorer(**fixed) -> DualityExplorer:
    """12f: drag **dt**, **A** and the **query position**: the decay mask and the attention-form weights."""
    import ipywidgets as w

    start = {**DUALITY_DEFAULTS, **fixed}
    controls = {
        "dt": w.FloatSlider(description="step dt", value=start["dt"], min=0.05, max=2.0, step=0.05, style=_STYLE),
        "A": w.FloatSlider(description="rate A", value=start["A"], min=-2.0, max=-0.05, step=0.05, style=_STYLE),
        "position": w.IntSlider(
            description="query position", value=start["position"], min=0, max=start["length"] - 1, style=_STYLE
        ),
    }
    rest = {k: v for k, v in fixed.items() if k not in controls}
    return DualityExplorer("duality", controls, {"panel_size": 2.6, "length": start["length"], **rest})


def plot_recall_from_state(pairs, errors: dict[str, list[float]], state_size: int) -> Figure:
    """Relative retrieval error against the number of stored key-value pairs, one line per mixer."""
    figure = Figure(figsize=(5.6, 3.2), dpi=DPI, layout="constrained")
    ax = figure.subplots()
    ax.set_title(localize("Recall: a fixed SSD state vs attention"), fontsize=10)
    ax.set_xlabel(localize("stored pairs"), fontsize=9)
    ax.set_ylabel(localize("relative retrieval error"), fontsize=9)
    ax.tick_params(labelsize=9)
    ax.grid(alpha=0.3)
    for name, values in errors.items():
        ax.plot(pairs, values, marker="o", label=localize(name))
    ax.axvline(state_size, color="grey", linestyle="--", linewidth=1)
    ax.text(state_size, ax.get_ylim()[1] * 0.95, " N", fontsize=9, va="top")
    ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))
    return figure
