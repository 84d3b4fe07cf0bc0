"""Notebook 12g's figures and block explorer: they draw, say what they show, and refuse impossible settings."""

import math

import numpy as np
import pytest
from matplotlib.figure import Figure

import attn_core as ac
from attn_core.viz import lightning as lviz
from attn_core.viz import widgets


@pytest.mark.parametrize("length, block_size, position", [(1, 1, 0), (24, 8, 13), (13, 5, 12), (10, 64, 9)])
def test_render_and_explain_blocks(length, block_size, position):
    figure = lviz.render_blocks(length=length, block_size=block_size, slope=0.3, position=position, values=True)
    assert isinstance(figure, Figure) and figure.dpi >= 110
    text = lviz.explain_blocks(length=length, block_size=block_size, slope=0.3, position=position)
    block, offset = divmod(position, block_size)
    assert text.startswith(f"query {position} is token {offset} of block {block}: {offset + 1} keys")
    assert f"exp(−s·{offset + 1}) = {math.exp(-0.3 * (offset + 1)):.3f}" in text
    difference = float(text.rsplit("= ", 1)[1].rstrip("."))
    assert difference < 1e-12  # blocks equal the recurrence on the toy inputs


def test_the_row_bars_are_the_decays_split_at_the_block_start():
    figure = lviz.render_blocks(length=24, block_size=8, slope=0.15, position=13)
    inter, intra = figure.axes[1].containers  # blue bars (earlier blocks), orange bars (own block)
    heights = [bar.get_height() for bar in inter] + [bar.get_height() for bar in intra]
    assert len(inter) == 8 and len(intra) == 6  # keys 0..7 through the state, 8..13 inside the block
    np.testing.assert_allclose(heights, np.exp(-0.15 * (13 - np.arange(14))), rtol=1e-12)


def test_position_past_the_end_is_clamped():
    text = lviz.explain_blocks(length=10, block_size=4, position=50)
    assert text.startswith("query 9 is token 1 of block 2")


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(length=0), "length must be an int >= 1"),
        (dict(block_size=2.5), "block_size must be an int >= 1"),
        (dict(position=-1), "position must be an int >= 0"),
        (dict(slope=-0.1), "slope must be in"),
    ],
)
def test_bad_settings_are_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        lviz.render_blocks(**overrides)
    with pytest.raises(TypeError, match="unknown|block explorer"):
        lviz.render_blocks(blocks=3)


def test_block_explorer_redraws_and_explains():
    explorer = lviz.block_explorer()
    assert isinstance(explorer, widgets.Explorer) and explorer.error is None
    png = explorer.image.value
    explorer.controls["block_size"].value = 3
    assert "of block 4" in explorer.explanation.value and explorer.image.value != png  # 13 = 4 · 3 + 1
    assert explorer.controls["position"].max == lviz.BLOCK_DEFAULTS["length"] - 1
    assert explorer.controls["fixed_scale"].disabled and explorer.controls["values"].disabled


def test_chinese_explanation_and_labels():
    ac.set_language("zh")
    try:
        text = ac.i18n.translate(lviz.explain_blocks())
        labels = [ac.i18n.translate(label) for label in ("earlier blocks, via the state", "weights of query 13")]
    finally:
        ac.set_language("en")
    assert text.startswith("查询 13 是第 1 块中的第 5 个词元") and text.endswith("。")
    assert labels == ["之前的块，经由状态", "查询 13 的权重"]


def test_measurement_figures():
    slopes = {layer: ac.lightning_slopes(8, layer, 4) for layer in (0, 3)}
    figure = lviz.plot_slopes(slopes, 4)
    assert isinstance(figure, Figure) and len(figure.axes[0].lines) == 2
    errors = {"linear state in bf16": np.array([1e-3, 1e-2]), "KV cache in bf16 (softmax)": np.array([1e-3, 1e-3])}
    assert isinstance(lviz.plot_precision([1, 2], errors), Figure)
