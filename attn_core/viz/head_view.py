"""A head view for real text: every head of one layer of a pretrained encoder, on any sentence.

- ``HeadView(model)`` runs the model once per sentence (cached) and keeps the attention weights;
- ``HeadView.render(sentence, layer, head)`` -> a Figure via ``plot_attention`` (long sentences:
  the 12-panel grid thins its token labels, one head at a time enlarges the panel to label all;
  colours on the fixed 0-1 weight scale unless ``fixed_scale=False``);
- ``HeadView.explain(...)`` -> one line of measured shares (previous token, [CLS], [SEP], itself);
- ``head_scores(weights, tokens)`` -> those shares for every layer and head;
- ``head_view_explorer(model)`` -> ``widgets.Explorer`` wired to a text box and layer/head selectors.
"""

from __future__ import annotations

import time
from collections import OrderedDict

import torch
from matplotlib.figure import Figure

from attn_core.i18n import localize
from attn_core.viz.plotting import FONT_PT, plot_attention
from attn_core.viz.widgets import _STYLE, Explorer

__all__ = ["PATTERNS", "head_scores", "thin_labels", "HeadView", "HeadViewExplorer", "head_view_explorer"]

PATTERNS = ("previous", "self", "[CLS]", "[SEP]", "next")


def head_scores(weights: torch.Tensor, tokens: list[str]) -> dict[str, torch.Tensor]:
    """Average share of each query's attention that goes to a pattern, per layer and head.

    ``weights`` ``(layers, heads, L, L)`` (or ``(heads, L, L)``) of one unpadded sentence whose
    ``tokens`` start with [CLS] and end with [SEP]. Returns ``{pattern: (layers, heads)}``:
    ``previous`` = mean over queries i >= 1 of w[i, i-1]; ``next`` = mean over i < L-1 of w[i, i+1];
    ``self`` = mean of w[i, i]; ``[CLS]`` / ``[SEP]`` = mean weight on every [CLS] / [SEP] key.
    """
    w = weights if weights.ndim == 4 else weights.unsqueeze(0)  # (layers, H, L, L)
    w = w.double()
    cls = torch.tensor([t == "[CLS]" for t in tokens])  # (L,)
    sep = torch.tensor([t == "[SEP]" for t in tokens])  # (L,)
    return {
        "previous": w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1),  # (layers, H)
        "self": w.diagonal(dim1=-2, dim2=-1).mean(-1),  # (layers, H)
        "[CLS]": w[..., cls].sum(-1).mean(-1),  # (layers, H)
        "[SEP]": w[..., sep].sum(-1).mean(-1),  # (layers, H)
        "next": w.diagonal(offset=1, dim1=-2, dim2=-1).mean(-1),  # (layers, H)
    }


def thin_labels(tokens: list[str], panel_size: float, font_scale: float = 1.0) -> list[str]:
    """Keep every k-th label (others blank) so labels of ``font_scale`` fit a ``panel_size``-inch axis."""
    room = panel_size * 72 / (FONT_PT * font_scale * 1.25)  # labels that fit side by side
    step = max(1, -(-len(tokens) // max(int(room), 1)))
    return [t if i % step == 0 else "" for i, t in enumerate(tokens)]


class HeadView:
    """Attention of a pretrained encoder (``attn_core.models.minilm.MiniLM``) on sentences, cached."""

    def __init__(self, model, cache_size: int = 32):
        self.model = model
        self.cache_size = cache_size
        self._cache: OrderedDict[str, tuple[list[str], torch.Tensor]] = OrderedDict()

    def attention(self, sentence: str) -> tuple[list[str], torch.Tensor]:
        """``(tokens, weights (layers, heads, L, L))``; the forward pass runs once per sentence."""
        if sentence not in self._cache:
            batch = self.model.tokenize(sentence)
            _, weights = self.model(batch.input_ids)  # (layers, 1, H, L, L)
            self._cache[sentence] = (batch.tokens[0], weights[:, 0])
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        self._cache.move_to_end(sentence)
        return self._cache[sentence]

    def render(
        self,
        sentence: str,
        layer: int = 0,
        head="all",
        *,
        panel_size: float = 2.4,
        font_scale: float = 1.0,
        values: bool = False,
        fixed_scale: bool = True,
    ) -> Figure:
        """All heads of ``layer`` as a grid, or one ``head`` large enough to label every token."""
        tokens, weights = self.attention(sentence)  # (layers, H, L, L)
        num_layers, num_heads, length, _ = weights.shape
        if not 0 <= int(layer) < num_layers:
            raise ValueError(f"layer {layer} does not exist; the model has layers 0..{num_layers - 1}.")
        if head == "all":
            shown, heads = weights[int(layer)], list(range(num_heads))
            labels = thin_labels(tokens, panel_size, font_scale)
        else:
            if not 0 <= int(head) < num_heads:
                raise ValueError(f"head {head} does not exist; there are {num_heads} heads (0..{num_heads - 1}).")
            shown, heads, labels = weights[int(layer), int(head)][None], [int(head)], tokens
            panel_size = max(panel_size * 2, length * FONT_PT * font_scale * 1.3 / 72)  # every label readable
        return plot_attention(
            shown,
            query_labels=labels,
            key_labels=labels,
            heads=heads,
            num_heads=num_heads,
            title=localize(f"layer {layer}" + ("" if head == "all" else f" · head {head}")),
            annotate=values and length <= 16,
            panel_size=panel_size,
            font_scale=font_scale,
            vmax=None if fixed_scale else "relative",
        )

    def explain(self, sentence: str, layer: int = 0, head="all") -> str:
        """One line with the measured shares behind the picture."""
        tokens, weights = self.attention(sentence)
        scores = head_scores(weights[int(layer)], tokens)  # {pattern: (1, H)}
        text = f"{len(tokens)} tokens. "
        if head == "all":
            best = [f"{name} → head {int(s[0].argmax())} ({float(s[0].max()):.0%})" for name, s in scores.items()]
            return text + f"Layer {layer}, head with the largest share on each pattern: " + "; ".join(best) + "."
        shares = ", ".join(f"{name} {float(s[0, int(head)]):.0%}" for name, s in scores.items())
        return text + f"Layer {layer} head {head}: average share of a token's attention on {shares}."


class TextBoxExplorer(Explorer):
    """An ``Explorer`` whose text box (control ``TEXT``: a sentence, a prompt) re-runs a model, and that
    times each redraw (``render_ms``). Saved files are named after the text's first four words."""

    TEXT = "sentence"
    render_ms: float | None = None

    def params(self) -> dict:
        """The control values; the text shortened to its first words (it names saved files)."""
        params = {key: control.value for key, control in self.controls.items()}
        params[self.TEXT] = "-".join(params[self.TEXT].split()[:4])
        return params

    def update(self, change=None) -> None:
        start = time.perf_counter()
        super().update(change)
        self.render_ms = (time.perf_counter() - start) * 1000


class HeadViewExplorer(TextBoxExplorer):
    """``Explorer`` with a sentence box and layer/head selectors, rendering a :class:`HeadView`.

    Reuses Explorer's layout (Image widget, explanation line, size/font/values/scale row, Save PNG/SVG)
    and replaces only the render path; the CSS class is ``attn-explorer-headview``.
    """

    def __init__(self, view: HeadView, controls: dict, fixed: dict | None = None, **kwargs):
        self.view = view
        super().__init__("headview", controls, fixed, **kwargs)

    def render(self, params: dict) -> tuple[Figure, str]:
        # The full sentence comes from its control: params() shortens it to name saved files.
        values = {key: control.value for key, control in self.controls.items()}
        sentence = values["sentence"].strip()
        if not sentence:
            raise ValueError("type a sentence.")
        figure = self.view.render(
            sentence,
            values["layer"],
            values["head"],
            panel_size=values["panel_size"],
            font_scale=values["font_scale"],
            values=values["values"],
            fixed_scale=values["fixed_scale"],
        )
        return figure, self.view.explain(sentence, values["layer"], values["head"])


def head_view_explorer(model, sentence: str = "The cat sat on the mat because it was tired.", **fixed):
    """Explorer over ``model``'s heads: type a sentence, pick a layer and "all" heads or one."""
    import ipywidgets as w

    view = fixed.pop("view", None) or HeadView(model)
    num_layers, num_heads = len(model.layers), model.layers[0].attention.num_heads
    controls = {
        "sentence": w.Text(
            description="sentence", value=sentence, continuous_update=False, layout=w.Layout(width="520px")
        ),
        "layer": w.IntSlider(description="layer", value=0, min=0, max=num_layers - 1, style=_STYLE),
        "head": w.Dropdown(description="head", options=["all", *range(num_heads)], value="all", style=_STYLE),
    }
    return HeadViewExplorer(view, controls, {"panel_size": 2.4, **fixed})
