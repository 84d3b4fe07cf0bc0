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


def test_betas_are_disabled_where_they_do_nothing():
    """Issue #33: beta_fast / beta_slow change only YaRN; for linear and llama3 they are greyed out, with a reason."""
    explorer = rs.band_explorer()
    controls = explorer.controls
    assert not controls["beta_fast"].disabled and not controls["beta_slow"].disabled  # yarn, the default
    for scaling in ("linear", "llama3"):
        controls["scaling"].value = scaling
        assert controls["beta_fast"].disabled and controls["beta_slow"].disabled
        assert "linear and llama3 do not use them" in controls["beta_fast"].tooltip
        # and indeed they do nothing there
        moved = rs.band_frequencies(scaling=scaling, beta_fast=8.0, beta_slow=2.0)["scaled"]
        np.testing.assert_array_equal(moved, rs.band_frequencies(scaling=scaling)["scaled"])
    controls["scaling"].value = "yarn"
    assert not controls["beta_fast"].disabled


@pytest.mark.parametrize("scaling", rs.SCALINGS)
def test_legend_does_not_cover_the_band(scaling):
    """Issue #33: in llama3 mode the legend sat on the smoothed band; it must not overlap the shaded band."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = rs.render_bands(scaling=scaling)
    FigureCanvasAgg(fig).draw()
    left = fig.axes[0]
    legend_box = left.get_legend().get_window_extent()
    for patch in left.patches:  # the shaded band (axvspan), if any
        assert not legend_box.overlaps(patch.get_window_extent())


def test_log_axes_have_plain_labels_and_no_minor_ticks():
    """The render cost: mathtext tick labels and ~200 minor ticks made a redraw 10-20x a single attention map."""
    fig = rs.render_bands(head_dim=128, original_context=8192)
    for axis in fig.axes:
        assert axis.xaxis.get_minorticklocs().size == 0
        assert not any("$" in axis.xaxis.get_major_formatter()(t, 0) for t in axis.get_xticks())
