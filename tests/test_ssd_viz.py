"""Notebook 12f's figures and explorer: they draw, the line reports the measured duality, bad settings are typed."""

import pytest
import torch

from attn_core.linear.ssd import ssd, ssd_as_attention
from attn_core.viz import ssd as ssd_viz
from attn_core.viz.widgets import Explorer


def test_the_explanation_line_measures_attention_form_against_the_recurrence():
    line = ssd_viz.explain_duality(dt=0.5, A=-0.5, position=12)
    assert "exp(dt·A) = 0.779" in line and "halve every 2.8 tokens" in line
    x, dt, A, B, C = ssd_viz.demo_inputs(16, 0.5, -0.5)
    difference = float((ssd_as_attention(dt, A, B, C) @ x - ssd(x, dt, A, B, C)[0]).abs().max())
    assert difference < 1e-13 and f"{difference:.1e}" in line


@pytest.mark.parametrize(
    "bad", [dict(position=16), dict(position=-1), dict(dt=0.0), dict(A=0.0), dict(length=0), dict(length=True)]
)
def test_impossible_settings_are_value_errors(bad):
    with pytest.raises(ValueError):
        ssd_viz.render_duality(**bad)


def test_unknown_setting_is_a_type_error():
    with pytest.raises(TypeError, match="unknown duality explorer parameter"):
        ssd_viz.render_duality(chunk_size=4)


def test_decay_panel_is_on_a_fixed_zero_one_scale_and_the_explorer_redraws():
    figure = ssd_viz.render_duality()
    assert figure.axes[0].images[0].get_clim() == (0.0, 1.0)
    explorer = ssd_viz.duality_explorer()
    assert isinstance(explorer, Explorer) and explorer.error is None
    before = explorer.explanation.value
    explorer.controls["dt"].value = 1.0
    assert explorer.explanation.value != before and "0.607" in explorer.explanation.value


def test_recall_plot_draws_one_line_per_mixer():
    figure = ssd_viz.plot_recall_from_state(
        [4, 8], {"SSD state, no decay (A = 0)": [0.1, 0.2], "softmax attention": [0.0, 0.0]}, 16
    )
    assert len(figure.axes[0].lines) == 3  # two mixers and the N marker
    assert torch.isfinite(torch.tensor(figure.axes[0].lines[0].get_ydata())).all()
