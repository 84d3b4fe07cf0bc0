"""The band explorer of notebook 06b (attn_core/viz/rope_scaling.py): its numbers are ac.rope_frequencies', its
figure draws, impossible settings give a message, and it speaks Chinese under set_language("zh")."""

from __future__ import annotations

import numpy as np
import pytest

import attn_core as ac
from attn_core.viz import rope_scaling as rs
from attn_core.viz.textpaths import text_items


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
    legend = [patch for ax in fig.axes for patch in ax.patches if patch.get_gid() == "band-legend"]
    assert len(legend) == 1
    legend_box = legend[0].get_window_extent()
    band = [patch for patch in fig.axes[0].patches if patch.get_gid() == "band"]  # axvspan
    assert len(band) == (0 if scaling == "linear" else 1)
    for patch in band:
        assert not legend_box.overlaps(patch.get_window_extent())


@pytest.mark.parametrize("params", [{}, dict(head_dim=128, original_context=8192)])
def test_log_axes_have_plain_labels_and_few_ticks(params):
    """The render cost: mathtext tick labels and ~200 minor ticks made a redraw 10-20x a single attention map."""
    fig = rs.render_bands(**params)
    xticks = [label.text for role, label, _ in text_items(fig) if role == "xtick"]
    assert not any("$" in tick for tick in xticks) and len(xticks) <= 2 * 9
    assert "1,000" in xticks and "10,000" in xticks


def test_figure_says_what_it_said():
    """Issue #33's explorer speed redrew the figure without matplotlib's tick machinery: the same words and numbers
    (titles, axis names, ticks, legends) as the Axes-drawn figure it replaced."""
    fig = rs.render_bands()
    texts = {role: [label.text for r, label, _ in text_items(fig) if r == role] for role in
             ("title", "xlabel", "ylabel", "xtick", "ytick", "band-legend", "decay-legend")}  # fmt: skip
    assert len(fig.axes) == 2
    assert texts["title"] == ["each pair's new speed", "long-range decay"]
    assert texts["xlabel"] == ["turns in the original context", "distance m − n (tokens)"]
    assert texts["ylabel"] == ["frequency ratio", "average score / |q|²"]
    assert texts["xtick"] == ["0.1", "1", "10", "100", "1,000", "1", "10", "100", "1,000", "10,000", "100,000"]
    assert texts["ytick"] == ["0.00", "0.25", "0.50", "0.75", "1.00", "−0.3", "0.0", "0.3", "0.6", "0.9"]
    assert texts["band-legend"] == ["ramp (YaRN)", "scaled / plain"]
    assert texts["decay-legend"] == ["plain", "scaled"]
