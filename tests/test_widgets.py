"""Explorers: the pure render functions draw exactly the weights they compute, and the
controls re-render, report impossible settings in words and save figures."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attn_core as ac
from attn_core.viz import widgets

EXPLORERS = [widgets.temperature_explorer, widgets.heads_explorer, widgets.gqa_explorer, widgets.mask_explorer]


def shown_images(figure) -> list[np.ndarray]:
    """Panel images of a plot_attention figure, in panel order (the colorbar is a figimage)."""
    return [np.asarray(image.get_array()) for ax in figure.axes for image in ax.images]


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"seq_len": 5, "mask_kind": "causal"},
        {"num_heads": 4, "seq_len": 6},
        {"num_heads": 8, "num_kv_heads": 2, "head": 5},
        {"mask_kind": "causal + padding", "dropout_p": 0.3, "seed": 3},
        {"head_dim": 256, "scaled": False, "temperature": 0.5},
    ],
)
def test_render_draws_the_demo_weights(params):
    """The figure's image data equals demo_attention's weights for the heads shown."""
    weights = widgets.demo_attention(**params).numpy()  # (H, L, L)
    head = params.get("head", "all")
    expected = list(weights) if head == "all" else [weights[head]]
    images = shown_images(widgets.render_attention(**params))
    assert len(images) == len(expected)
    for image, weight in zip(images, expected, strict=True):
        np.testing.assert_allclose(image, weight, rtol=0, atol=1e-7)


def test_demo_attention_is_a_function_of_its_parameters():
    """Same parameters, same weights (dropout included); another seed, other weights."""
    params = {"num_heads": 2, "mask_kind": "causal", "dropout_p": 0.5, "seed": 4}
    torch.testing.assert_close(widgets.demo_attention(**params), widgets.demo_attention(**params))
    assert not torch.equal(widgets.demo_attention(**params), widgets.demo_attention(**{**params, "seed": 5}))


@pytest.mark.parametrize("mask_kind", widgets.MASK_KINDS)
def test_demo_masks_are_attn_core_masks(mask_kind):
    """Each explorer mask is the attn_core factory's, and blocked weights are exactly zero."""
    expected = {
        "none": None,
        "causal": ac.causal_mask(8),
        "padding": ac.padding_mask([6], 8)[0, 0].expand(8, 8),
        "causal + padding": ac.causal_mask(8) & ac.padding_mask([6], 8)[0, 0],
        "sliding window": ac.sliding_window_mask(8, 3),
        "prefix-LM": ac.prefix_lm_mask(8, 3),
    }[mask_kind]
    mask = widgets.demo_mask(mask_kind, 8, window=3, padding=2, prefix_len=3)
    if expected is None:
        assert mask is None
        return
    assert torch.equal(mask, expected)
    weights = widgets.demo_attention(seq_len=8, mask_kind=mask_kind)  # (1, 8, 8)
    assert (weights[0][~mask] == 0).all()


def test_explanation_names_the_mask_and_measures_the_rows():
    text = widgets.explain_attention(mask_kind="sliding window", window=2, seq_len=6)
    assert "sliding window 2" in text and "largest weight per row averages" in text
    gqa = widgets.explain_attention(num_heads=8, num_kv_heads=2)
    assert "8 query heads share 2 kv head(s)" in gqa and "h // 4" in gqa


def test_unscaled_large_head_dim_saturates_softmax():
    """The 01 lesson, measured: without 1/sqrt(d_k) rows go nearly one-hot at d_k=1024."""
    scaled = widgets.demo_attention(head_dim=1024, seq_len=8).amax(-1).mean()
    unscaled = widgets.demo_attention(head_dim=1024, seq_len=8, scaled=False).amax(-1).mean()
    assert scaled < 0.5 and unscaled > 0.8


@pytest.mark.parametrize("factory", EXPLORERS)
def test_every_explorer_renders_and_reacts_to_its_controls(factory):
    """Each explorer starts with a figure, and moving any control changes the image."""
    explorer = factory()
    assert explorer.error is None and bytes(explorer.image.value).startswith(b"\x89PNG")
    for name, control in explorer.controls.items():
        before = bytes(explorer.image.value)
        options = getattr(control, "options", None)
        if options:
            options = [o[1] if isinstance(o, tuple) else o for o in options]  # (label, value) pairs: the values
            control.value = options[-1] if options[-1] != control.value else options[0]
        elif isinstance(control.value, bool):
            control.value = not control.value
        else:
            control.value = control.max if control.value != control.max else control.min
        if explorer.error is None and not control.disabled:
            assert bytes(explorer.image.value) != before, f"moving {name!r} did not change the figure"


def test_mask_explorer_greys_out_sliders_the_mask_ignores():
    explorer = widgets.mask_explorer()
    explorer.controls["mask_kind"].value = "sliding window"
    disabled = {name for name, control in explorer.controls.items() if control.disabled}
    assert disabled == {"padding", "prefix_len"}
    explorer.controls["mask_kind"].value = "causal + padding"
    assert not explorer.controls["padding"].disabled and explorer.controls["window"].disabled


def test_impossible_setting_shows_a_message_not_a_traceback():
    explorer = widgets.gqa_explorer()
    explorer.controls["num_kv_heads"].value = 3  # 8 query heads cannot share 3 kv heads
    assert explorer.error is not None and "multiple of key/value heads" in explorer.error
    assert "Not possible" in explorer.explanation.value
    explorer.controls["num_kv_heads"].value = 4
    assert explorer.error is None and "share 4 kv head(s)" in explorer.explanation.value


def test_head_selector_follows_the_number_of_heads():
    explorer = widgets.heads_explorer()
    explorer.controls["num_heads"].value = 8
    explorer.controls["head"].value = 7
    explorer.controls["num_heads"].value = 2
    assert [value for _, value in explorer.controls["head"].options] == ["all", 0, 1]
    assert explorer.controls["head"].value == "all" and explorer.error is None


@pytest.mark.parametrize("fmt, magic", [("png", b"\x89PNG"), ("svg", b"<?xml")])
def test_save_writes_the_current_figure(tmp_path, fmt, magic):
    explorer = widgets.mask_explorer()
    explorer.save_dir = tmp_path
    path = explorer.save(fmt)
    assert path.parent == tmp_path and path.suffix == f".{fmt}"
    assert path.read_bytes().startswith(magic)
    assert "saved" in explorer.status.value


def test_keyword_naming_a_control_sets_its_start_and_stays_movable():
    explorer = widgets.gqa_explorer(num_kv_heads=4, seq_len=5, head_dim=8)
    assert explorer.controls["num_kv_heads"].value == 4 and explorer.params()["num_kv_heads"] == 4
    assert explorer.params()["head_dim"] == 8  # no control: stays fixed
    explorer.controls["num_kv_heads"].value = 1
    assert explorer.params()["num_kv_heads"] == 1 and "share 1 kv head(s)" in explorer.explanation.value


@pytest.mark.parametrize(
    "factory, name",
    [
        (widgets.temperature_explorer, "temperature"),
        (widgets.heads_explorer, "heads"),
        (widgets.gqa_explorer, "gqa"),
        (widgets.mask_explorer, "masks"),
    ],
)
def test_explorer_box_carries_its_name_as_a_css_class(factory, name):
    """The browser tests find each explorer by this class."""
    explorer = factory(seq_len=5)
    assert explorer.name == name and f"attn-explorer-{name}" in explorer.widget._dom_classes


def test_unknown_parameter_is_rejected():
    with pytest.raises(TypeError, match="unknown explorer parameter"):
        widgets.render_attention(heads=3)


def test_fixed_scale_is_the_default_and_the_checkbox_switches_to_relative():
    """Explorers colour weights on 0-1; unticking "fixed scale" stretches the colours to the largest weight."""
    explorer = widgets.temperature_explorer()
    image = explorer.figure.axes[0].images[0]
    largest = float(np.max(image.get_array()))
    assert explorer.controls["fixed_scale"].value is True and image.norm.vmax == 1.0 and largest < 1.0
    before = bytes(explorer.image.value)
    explorer.controls["fixed_scale"].value = False
    assert explorer.figure.axes[0].images[0].norm.vmax == pytest.approx(largest)
    assert bytes(explorer.image.value) != before


def test_every_heatmap_explorer_has_the_fixed_scale_box_in_its_display_row():
    for factory in EXPLORERS:
        explorer = factory()
        display_row = explorer.widget.children[-2].children
        assert explorer.controls["fixed_scale"] in display_row and explorer.controls["fixed_scale"].value is True


def test_figure_png_is_the_figure_pixel_for_pixel():
    """The fast encoder (up filter, zlib level 1) decodes to exactly what Agg drew."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    figure = widgets.render_attention(num_heads=4, mask_kind="causal")
    decoded = np.asarray(Image.open(io.BytesIO(widgets.figure_png(figure))))
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    np.testing.assert_array_equal(decoded, np.asarray(canvas.buffer_rgba()))
    assert decoded.shape[1] == int(figure.get_figwidth() * figure.dpi)  # Agg truncates to whole pixels


# ------------------------------------------------------------------ without a kernel, and the notebook's figure scale
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _png_size(png: bytes) -> tuple[int, int]:
    import struct

    return struct.unpack(">II", png[16:24])


@pytest.mark.parametrize("factory", [widgets.temperature_explorer, widgets.mask_explorer])
def test_explorer_displays_a_static_fallback_next_to_the_widget_view(factory, monkeypatch):
    import base64

    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kwargs: shown.append((obj, kwargs)))
    explorer = factory()
    explorer._ipython_display_()
    (widget, _), (bundle, kwargs) = shown
    assert widget is explorer.widget  # a live front end gets the widget ...
    assert kwargs == {"raw": True, "metadata": {widgets.FALLBACK_MARK: True}}
    assert bundle[WIDGET_VIEW]["model_id"] == ""  # ... and ipywidgets' Lab renderer hides a view of no model
    png = base64.b64decode(bundle["image/png"])
    assert png == explorer.image.value  # the figure of the state it was displayed in
    assert "Static figure at the default settings" in bundle["text/plain"]
    assert "temperature" in bundle["text/plain"] or "mask" in bundle["text/plain"]  # names its own controls
    assert bundle["image/png"] in bundle["text/html"]
    assert f'width="{_png_size(png)[0]}"' in bundle["text/html"]  # shown at its stored pixel size
    assert "JupyterLab" in bundle["text/html"]


def test_explorer_fallback_line_is_translated():
    ac.set_language("zh")
    try:
        line = widgets.temperature_explorer().fallback_bundle()["text/plain"]
    finally:
        ac.set_language("en")
    assert line.startswith("默认设置下的静态图") and "温度" in line


def test_set_figure_scale_enlarges_explorer_figures_and_keeps_the_saved_resolution():
    before = _png_size(widgets.temperature_explorer().image.value)
    ac.set_figure_scale(1.5)
    try:
        explorer = widgets.temperature_explorer()
        after = _png_size(explorer.image.value)
        assert explorer.figure.dpi == ac.plot_attention(torch.eye(3)).dpi  # the figure object is not changed
    finally:
        ac.set_figure_scale(1.0)
    assert after[0] == pytest.approx(1.5 * before[0], abs=2) and after[1] == pytest.approx(1.5 * before[1], abs=2)
    assert _png_size(widgets.temperature_explorer().image.value) == before


@pytest.mark.parametrize("bad", [0.1, 10, float("nan")])
def test_set_figure_scale_rejects_a_scale_out_of_range(bad):
    with pytest.raises((ValueError, TypeError), match="set_figure_scale"):
        ac.set_figure_scale(bad)


def test_set_figure_scale_rejects_a_non_number():
    with pytest.raises(TypeError, match="must be a number"):
        ac.set_figure_scale("1.5")


def test_head_dropdown_says_all_in_the_learners_language():
    import attn_core as ac

    try:
        ac.set_language("zh")
        labels = [label for label, _ in widgets.heads_explorer().controls["head"].options]
    finally:
        ac.set_language("en")
    assert labels[0] == "全部" and labels[1:] == ["0", "1", "2", "3"]
    assert [label for label, _ in widgets.heads_explorer().controls["head"].options][0] == "all"
