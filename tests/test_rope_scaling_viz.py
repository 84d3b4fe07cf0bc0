"""The band explorer of notebook 06b (attn_core/viz/rope_scaling.py): its numbers are ac.rope_frequencies', its
figure draws, impossible settings give a message, and it speaks Chinese under set_language("zh")."""

from __future__ import annotations

import numpy as np
import pytest

import attn_core as ac
from attn_core.viz import rope_scaling as rs


@pytest.mark.parametrize("scaling", rs.SCALINGS)
def test_bands_are_rope_frequencies(scaling):
    bands = rs.band_frequencies(scaling=scaling, factor=8.0, head_dim=64)
    inv_freq, factor = ac.rope_frequencies(64, scaling=rs.scaling_config(scaling=scaling, factor=8.0))
    np.testing.assert_array_equal(bands["scaled"], inv_freq.numpy())
    assert bands["attention_factor"] == factor
    assert ((bands["ratio"] > 1 / 8 - 1e-12) & (bands["ratio"] < 1 + 1e-12)).all()  # never faster, never > 8x slower
    figure = rs.render_bands(scaling=scaling)
    assert len(figure.axes) == 2 and figure.dpi >= 110


def test_explanation_counts_the_bands():
    assert rs.explain_bands(scaling="linear", factor=4.0).startswith("linear, factor 4: of 32 pairs, 0 keep")
    line = rs.explain_bands(scaling="yarn", factor=8.0)
    assert "11 keep their speed, 9 are slowed 8x, 12 are blended" in line and "1.208" in line


def test_explorer_and_its_message():
    explorer = rs.band_explorer()
    assert explorer.error is None and explorer.figure is not None
    explorer.controls["beta_slow"].value = 4.0
    explorer.controls["beta_fast"].value = 2.0
    assert "beta_slow (4) must be below beta_fast (2)" in explorer.error
    with pytest.raises(ValueError, match="scaling must be one of"):
        rs.render_bands(scaling="ntk")


def test_chinese():
    ac.set_language("zh")
    try:
        explorer = rs.band_explorer()
        assert explorer.controls["original_context"].description == "原上下文长度"
        assert "对保持转速" in explorer.explanation.value
    finally:
        ac.set_language("en")
