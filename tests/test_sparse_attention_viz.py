"""The 09b mask explorer draws what the layers do: masks read off real layers' weights, per layer type."""

import torch

from attn_core.viz import sparse, widgets
from attn_core.viz.textpaths import text_items


def test_masks_follow_each_layer_types_rule():
    masks = sparse.sparse_masks(seq_len=12, topk=3, sliding_window=3, csa_rate=2, hca_rate=4)
    query, key = torch.arange(12)[:, None], torch.arange(12)[None]
    window = (key <= query) & (query - key < 3)  # (L, L)
    dsa, sliding, hca, csa = (masks[name] for name in sparse.LAYER_TYPES)
    assert dsa.shape == (12, 12) and bool((dsa.sum(-1) == torch.clamp(query[:, 0] + 1, max=3)).all())
    assert not bool(torch.triu(dsa, 1).any())  # no pick from the future
    assert torch.equal(sliding, window)
    assert hca.shape == (12, 12 + 3) and torch.equal(hca[:, :12], window)
    assert torch.equal(hca[:, 12:], (torch.arange(3)[None] + 1) * 4 <= query + 1)
    assert csa.shape == (12, 12 + 6) and bool((csa[:, 12:].sum(-1) <= 3).all())
    assert not bool((csa[:, 12:] & ~((torch.arange(6)[None] + 1) * 2 <= query + 1)).any())


def test_render_explain_and_explorer():
    fig = sparse.render_sparse_masks(seq_len=8)
    assert len(fig.axes) == 4
    line = sparse.explain_sparse_masks(seq_len=8)
    assert line.startswith("the last query (position 7) reads")
    explorer = sparse.sparse_mask_explorer()
    assert isinstance(explorer, widgets.Explorer) and explorer.error is None
    explorer.controls["topk"].value = 2
    assert explorer.error is None and "V3.2 DSA (top-k tokens): 2 tokens" in explorer.explanation.value


def test_colours_have_a_legend():
    """Issue #33: blue (a token) and orange (a compressed entry) were drawn without a legend."""
    from attn_core.i18n import localize  # noqa: F401  (labels go through the catalogs)

    fig = sparse.render_sparse_masks(seq_len=8, topk=2, sliding_window=2, csa_rate=2, hca_rate=4)
    labels = [label.text for role, label, _ in text_items(fig) if role == "legend"]
    assert labels == ["not read", "a token read", "a compressed entry read"]


def test_render_lays_out_by_hand():
    """The render cost (issue #33: 0.7-1.6 s per move): constrained layout measured every label twice per draw."""
    fig = sparse.render_sparse_masks()
    assert fig.get_layout_engine() is None
    items = text_items(fig)
    for role in ("xtick", "ytick"):  # per panel, as MaxNLocator(nbins=5) placed them
        assert len([label for r, label, _ in items if r == role]) <= 7 * len(fig.axes)
    assert len(fig.axes) == 4  # one per layer type: what notebook 09b prints under its figure


def test_figure_says_what_it_said():
    """Issue #33's explorer speed redrew the figure without matplotlib's tick machinery: the same words and numbers
    (titles, axis names, ticks, legend) as the Axes-drawn figure it replaced."""
    fig = sparse.render_sparse_masks()
    texts = {role: [label.text for r, label, _ in text_items(fig) if r == role] for role in
             ("title", "xlabel", "ylabel", "xtick", "ytick", "legend")}  # fmt: skip
    masks = fig.sparse_masks
    for name, mask in masks.items():
        assert name in texts["title"] and f"last query reads {int(mask[-1].sum())}" in texts["title"]
    assert texts["xlabel"] == ["keys (tokens | entries)"] * 4 and texts["ylabel"] == ["query position"]
    assert texts["ytick"] == ["0", "5", "10", "15", "20"] * 4
    assert texts["xtick"] == ["0", "5", "10", "15", "20"] * 2 + ["0", "6", "12", "18", "24"] + [
        "0",
        "8",
        "16",
        "24",
        "32",
    ]


def test_explorer_runs_the_layers_once_per_setting():
    """The figure and the line of one move share the layers' run; callers get copies (the cache stays intact)."""
    sparse._run_layers.cache_clear()
    first = sparse.sparse_masks(seq_len=10)
    first[sparse.LAYER_TYPES[0]][:] = False
    again = sparse.sparse_masks(seq_len=10)
    assert sparse._run_layers.cache_info().misses == 1 and bool(again[sparse.LAYER_TYPES[0]].any())
