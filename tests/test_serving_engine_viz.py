"""plot_serving_timeline: one row per request in first-seen order, one column per step, prefill chunks and decode
tokens told apart, readable sizes; a bad timeline is refused."""

import pytest
from matplotlib.patches import Rectangle

from attn_core.viz.serving_timeline import DECODE_COLOR, PREFILL_COLOR, plot_serving_timeline

TIMELINE = [[(0, 16)], [(0, 11), ("b", 5)], [(0, 1), ("b", 6), (2, 9)], [(0, 1), ("b", 1)], [(2, 1)]]


def test_cells_rows_and_colours():
    fig = plot_serving_timeline(TIMELINE, title="t")
    ax = fig.axes[0]
    cells = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(cells) == sum(len(step) for step in TIMELINE)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "b", "2"]
    colours = {(round(p.get_x() + 0.5), round(p.get_y() + 0.4)): p.get_facecolor() for p in cells}
    from matplotlib.colors import to_rgba

    assert colours[(1, 0)] == to_rgba(PREFILL_COLOR) and colours[(4, 0)] == to_rgba(DECODE_COLOR)
    assert fig.dpi >= 110 and min(t.get_fontsize() for t in ax.texts) >= 9
    assert sorted(t.get_text() for t in ax.texts) == sorted(["16", "11", "5", "6", "9"])


def test_bad_timelines():
    with pytest.raises(TypeError, match="engine.timeline"):
        plot_serving_timeline("steps")
    with pytest.raises(ValueError, match="max_steps=2"):
        plot_serving_timeline(TIMELINE, max_steps=2)
