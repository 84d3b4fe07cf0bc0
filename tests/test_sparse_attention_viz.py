"""The 09b mask explorer draws what the layers do: masks read off real layers' weights, per layer type."""

import torch

from attn_core.viz import sparse, widgets


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
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert labels == ["not read", "a token read", "a compressed entry read"]


def test_render_lays_out_by_hand():
    """The render cost (issue #33: 0.7-1.6 s per move): constrained layout measured every label twice per draw."""
    fig = sparse.render_sparse_masks()
    assert fig.get_layout_engine() is None
    for ax in fig.axes:
        assert len(ax.get_xticks()) <= 7 and len(ax.get_yticks()) <= 7
