"""Notebook 12d's figures and chunk explorer: they draw, say what they show, and refuse impossible settings."""

import json
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

import attn_core as ac
from attn_core.viz import linear_attention as la_viz
from attn_core.viz import widgets

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("length, chunk_size", [(1, 1), (24, 8), (13, 5), (10, 64)])
def test_render_and_explain_chunks(length, chunk_size):
    figure = la_viz.render_chunks(length=length, chunk_size=chunk_size, gate=0.3, values=True)
    assert isinstance(figure, Figure) and figure.dpi >= 110
    text = la_viz.explain_chunks(length=length, chunk_size=chunk_size, gate=0.3)
    chunks = -(-length // chunk_size)
    assert f"{chunks} chunks" in text and f"instead of {length}" in text
    difference = float(text.rsplit("= ", 1)[1].rstrip("."))
    assert difference < 1e-12  # the chunked form equals the recurrence on the toy inputs


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(length=0), "length must be an int >= 1"),
        (dict(chunk_size=2.5), "chunk_size must be an int >= 1"),
        (dict(gate=-1.0), "gate must be in"),
    ],
)
def test_bad_settings_are_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        la_viz.render_chunks(**overrides)
    with pytest.raises(TypeError, match="unknown|chunk explorer"):
        la_viz.render_chunks(chunks=3)


def test_chunk_explorer_redraws_and_explains():
    explorer = la_viz.chunk_explorer()
    assert isinstance(explorer, widgets.Explorer) and explorer.error is None
    explorer.controls["chunk_size"].value = 3
    assert "chunk size 3" in explorer.explanation.value and explorer.image.value


def test_chinese_explanation(monkeypatch):
    ac.set_language("zh")
    try:
        text = ac.i18n.translate(la_viz.explain_chunks(length=24, chunk_size=8))
    finally:
        ac.set_language("en")
    assert text.startswith("L = 24，块大小 8")


def test_measurement_figures():
    bench = json.loads((ROOT / "data" / "linear_attention_bench.json").read_text())
    assert isinstance(la_viz.plot_state_vs_kv(bench["memory"]), Figure)
    assert isinstance(la_viz.plot_capacity([2, 4], {"linear attention": [0.1, 0.5]}, 16), Figure)
    recall = {"accuracy": {"softmax": {"4": 1.0, "8": 0.5}}}
    assert isinstance(la_viz.plot_recall(recall), Figure)
    stored = json.loads((ROOT / "data" / "linear_attention_recall.json").read_text())
    figure = la_viz.plot_recall(stored)
    ax = figure.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == sorted(
        {p for by_pairs in stored["accuracy"].values() for p in by_pairs}, key=int
    )  # one tick per measured P, on a log-2 axis
    chance = 1 / (stored["setup"]["vocab"] - stored["setup"]["vocab"] // 2)
    assert any(list(line.get_ydata()) == [chance, chance] for line in ax.lines)  # the dotted chance line


def test_chunk_explorer_greys_out_display_controls_that_do_nothing():
    # The decay spans 0–1 by construction (1 on the diagonal, 0 above), so "fixed scale" cannot change the figure;
    # values are printed only up to VALUES_UP_TO tokens, and the default length (24) is past that.
    explorer = la_viz.chunk_explorer()
    fixed_scale, values = explorer.controls["fixed_scale"], explorer.controls["values"]
    assert fixed_scale.disabled and "no effect" in fixed_scale.tooltip
    assert explorer.controls["length"].value > la_viz.VALUES_UP_TO
    assert values.disabled and "up to 16 tokens" in values.tooltip
    explorer.controls["length"].value = 12
    assert not values.disabled
    png = explorer.image.value
    values.value = not values.value
    assert explorer.image.value != png  # enabled: it does change the figure
    explorer.controls["length"].value = 17
    assert values.disabled


def test_recall_figure_legend_beside_the_axes_and_every_marker_visible():
    stored = json.loads((ROOT / "data" / "linear_attention_recall.json").read_text())
    figure = la_viz.plot_recall(stored)
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)  # constrained layout places the legend at draw time
    ax = figure.axes[0]
    legend_box = ax.get_legend().get_window_extent(renderer)
    assert legend_box.x0 >= ax.get_window_extent(renderer).x1  # the legend never covers data
    xs = [tuple(container.lines[0].get_xdata()) for container in ax.containers]  # one errorbar per mixer
    assert len(set(xs)) == len(xs) == len(stored["accuracy"])  # softmax and the hybrid at 1.0 side by side
    figure = la_viz.plot_capacity([2, 4], {"linear attention": [0.1, 0.5]}, 16)
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)
    ax = figure.axes[0]
    assert ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1


@pytest.mark.parametrize("panel_size, font_scale", [(2.8, 1.0), (1.5, 2.0), (1.5, 2.5)])
def test_chunk_figure_titles_never_overprint(panel_size, font_scale):
    # the smallest panel with the largest font overprinted both titles (matplotlib's layout and the glyph-path one):
    # each panel is now at least as wide as its title, and the two titles do not meet
    from attn_core.viz.textpaths import text_items, text_width

    figure = la_viz.render_chunks(panel_size=panel_size, font_scale=font_scale)
    spans = sorted(
        (label.x - text_width(label.text, label.size) / 2, label.x + text_width(label.text, label.size) / 2)
        for role, label, _ in text_items(figure)
        if role == "title"
    )
    assert len(spans) == 2 and spans[0][0] >= 0 and spans[0][1] < spans[1][0]
    assert spans[1][1] <= figure.get_figwidth()
