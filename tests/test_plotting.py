"""plot_attention: returns a Figure whose panels show exactly the weights given, labelled and coloured
honestly (a fixed 0-1 scale), legibly (110 dpi, >= 9 pt) and fast enough for explorers.

Text is drawn as glyph outlines (attn_core.viz.textpaths); the helpers read every string shown,
with its role, anchor, size and colour, from ``text_items``.
"""

from __future__ import annotations

import io

import matplotlib
import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

import attn_core as ac
from attn_core.viz.plotting import DPI, NAN_HATCH
from attn_core.viz.textpaths import text_items

VIRIDIS = matplotlib.colormaps["viridis"]


def random_weights(*shape: int, seed: int = 0) -> torch.Tensor:
    """Row-stochastic attention weights of the given shape (softmax over the last dim)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(*shape, generator=generator), dim=-1)


def panel_images(fig: Figure) -> list:
    """One image per panel, in panel order (all panels live in the first Axes)."""
    return list(fig.axes[0].images)


def labels(fig: Figure, role: str) -> list:
    """The Labels (text, x, y, size, rotation) drawn with ``role``, in drawing order."""
    return [label for found, label, _ in text_items(fig) if found == role]


def texts(fig: Figure, role: str) -> list[str]:
    return [label.text for label in labels(fig, role)]


def colours(fig: Figure, role: str) -> list[str]:
    return [colour for found, _, colour in text_items(fig) if found == role]


def is_repetition(found: list[str], tokens: list[str]) -> bool:
    """True when found == tokens * n for some n >= 1 (a grid labels each outer panel)."""
    return bool(found) and len(found) % len(tokens) == 0 and found == tokens * (len(found) // len(tokens))


# --------------------------------------------------------------------------- data


@pytest.mark.parametrize(
    "shape",
    [(4, 6), (3, 4, 5), (6, 2, 3), (2, 3, 4, 4), (3, 1, 2, 5)],
    ids=["map", "heads", "heads-wrapped", "layers-heads", "layers-one-head"],
)
def test_panels_show_the_given_weights_in_order(shape):
    """Each panel's image data equals the corresponding (layer, head) map, in row-major panel order."""
    weights = random_weights(*shape)
    fig = ac.plot_attention(weights)
    assert isinstance(fig, Figure)
    expected_maps = weights.double().reshape(-1, *shape[-2:]).numpy()
    images = panel_images(fig)
    assert len(images) == len(expected_maps)
    for image, expected in zip(images, expected_maps, strict=True):
        np.testing.assert_allclose(np.asarray(image.get_array()), expected, rtol=0, atol=1e-7)


def test_numpy_input_and_bfloat16_tensor_are_accepted():
    """A numpy array and a bf16 tensor plot the same values (converted to float64)."""
    weights = random_weights(2, 3, 3, seed=1)
    for given, expected in ((weights.numpy(), weights.numpy()), (weights.bfloat16(), weights.bfloat16().double())):
        images = panel_images(ac.plot_attention(given))
        for image, expected_map in zip(images, np.asarray(expected), strict=True):
            np.testing.assert_array_equal(np.asarray(image.get_array()), expected_map.astype(np.float64))


# --------------------------------------------------------------------------- titles and labels


def test_panel_titles_follow_heads_and_layers():
    """Default titles name the head (and layer); custom titles replace them in panel order."""
    assert texts(ac.plot_attention(random_weights(3, 2, 2)), "title") == ["head 0", "head 1", "head 2"]
    layers = texts(ac.plot_attention(random_weights(2, 2, 2, 2)), "title")
    assert layers == ["layer 0 · head 0", "layer 0 · head 1", "layer 1 · head 0", "layer 1 · head 1"]
    assert texts(ac.plot_attention(random_weights(2, 2, 2), titles=["a", "b"]), "title") == ["a", "b"]


@pytest.mark.parametrize(
    "shape", [(3, 4), (2, 3, 4), (6, 3, 4), (2, 2, 3, 4)], ids=["map", "heads", "wrapped", "layers"]
)
def test_token_labels_become_tick_labels(shape):
    """key_labels label the x axis and query_labels the y axis, once per outer panel."""
    queries, keys = ["the", "cat", "sat"], ["<s>", "the", "cat", "sat"]
    fig = ac.plot_attention(random_weights(*shape), query_labels=queries, key_labels=keys)
    assert is_repetition(texts(fig, "key-label"), keys)
    assert is_repetition(texts(fig, "query-label"), queries)


def test_a_grid_labels_only_its_outer_panels():
    """8 heads in 2 rows of 4: keys under the 4 bottom panels, queries left of the 2 left panels."""
    tokens = ["a", "b", "c"]
    fig = ac.plot_attention(random_weights(8, 3, 3), query_labels=tokens, key_labels=tokens)
    assert texts(fig, "key-label") == tokens * 4 and texts(fig, "query-label") == tokens * 2


def test_each_panel_can_have_its_own_labels():
    """A list of label lists (one per panel) labels every panel with its own tokens."""
    causal_tokens, padded_tokens = ["t0", "t1", "t2"], ["the", "cat", "<pad>"]
    fig = ac.plot_attention(
        torch.stack([ac.causal_mask(3), torch.tensor([True, True, False]).expand(3, 3)]),
        query_labels=[causal_tokens, padded_tokens],
        key_labels=[causal_tokens, padded_tokens],
    )
    assert texts(fig, "key-label") == causal_tokens + padded_tokens
    assert texts(fig, "query-label") == causal_tokens + padded_tokens
    with pytest.raises(ValueError, match="3 key_labels lists given for 2 panels"):
        ac.plot_attention(random_weights(2, 3, 3), key_labels=[causal_tokens] * 3)
    with pytest.raises(ValueError, match=r"2 query_labels given for a map with 3 positions on that axis \(panel 1\)"):
        ac.plot_attention(random_weights(2, 3, 3), query_labels=[causal_tokens, ["a", "b"]])


def test_long_token_lists_thin_out_instead_of_overlapping():
    """64 tokens on a 2.8-inch panel: every k-th label, spaced at least one text line apart."""
    tokens = [f"w{i}" for i in range(64)]
    fig = ac.plot_attention(random_weights(64, 64), query_labels=tokens, key_labels=tokens)
    for role in ("query-label", "key-label"):
        shown = labels(fig, role)
        assert 4 <= len(shown) < 64 and all(label.text in tokens for label in shown)
        along = sorted(label.y if role == "query-label" else label.x for label in shown)
        assert min(np.diff(along)) >= shown[0].size / 72, role  # inches between neighbours >= the font height


def test_figure_title_is_set():
    """title= becomes the figure's suptitle."""
    fig = ac.plot_attention(random_weights(3, 3), title="causal attention")
    assert fig.get_suptitle() == "causal attention"


# --------------------------------------------------------------------------- kv-group colours


@pytest.mark.parametrize(("num_heads", "num_kv_heads"), [(8, 2), (6, 3), (4, 4), (4, 1)])
def test_kv_groups_share_colours(num_heads, num_kv_heads):
    """With num_kv_heads, heads sharing a kv head get one title colour; different groups get different ones."""
    fig = ac.plot_attention(random_weights(num_heads, 3, 3), num_kv_heads=num_kv_heads)
    found = dict(zip(texts(fig, "title"), colours(fig, "title"), strict=True))
    group_size = num_heads // num_kv_heads
    assert len(found) == num_heads
    by_group = [{found[f"head {h} · kv {g}"] for h in range(g * group_size, (g + 1) * group_size)}
                for g in range(num_kv_heads)]  # fmt: skip
    assert all(len(group) == 1 for group in by_group)
    assert len(set(found.values())) == num_kv_heads


def test_layer_grid_colours_kv_groups_per_head():
    """In a (layers, heads) grid the colour depends on the head's kv group, the same in every layer."""
    fig = ac.plot_attention(random_weights(2, 4, 3, 3), num_kv_heads=2)
    found = dict(zip(texts(fig, "title"), colours(fig, "title"), strict=True))
    assert len(found) == 8
    for layer in range(2):
        row = [found[f"layer {layer} · head {h} · kv {h // 2}"] for h in range(4)]
        assert row[0] == row[1] != row[2] == row[3]
        assert row == [found[f"layer 0 · head {h} · kv {h // 2}"] for h in range(4)]


def test_without_num_kv_heads_titles_are_uncoloured():
    """Without num_kv_heads every panel title has the same (neutral) colour."""
    assert set(colours(ac.plot_attention(random_weights(4, 3, 3)), "title")) == {"#000000"}


# --------------------------------------------------------------------------- colour scale


def cell_colour(fig: Figure, panel: int, row: int, col: int) -> np.ndarray:
    """RGB (0-255) of a cell's corner pixels as rendered (the number printed in its centre is avoided)."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())  # (H, W, 4), top row first
    image = panel_images(fig)[panel]
    left, right, bottom, top = image.get_extent()
    rows, cols = image.get_array().shape
    x = left + (col + 0.2) * (right - left) / cols
    y = top - (row + 0.2) * (top - bottom) / rows
    px, py = image.get_transform().transform((x, y))
    return pixels[int(pixels.shape[0] - py), int(px), :3].astype(int)


def expected_rgb(value: float) -> np.ndarray:
    return np.round(np.asarray(VIRIDIS(value)[:3]) * 255).astype(int)


def test_weights_sit_on_a_fixed_0_to_1_scale_by_default():
    """A 0.41 weight is painted as 0.41 of viridis, not as the top colour (the relative-scale trap)."""
    weights = torch.tensor([[0.41, 0.30, 0.29], [0.20, 0.30, 0.40]], dtype=torch.float64)
    fig = ac.plot_attention(weights)
    image = panel_images(fig)[0]
    assert (image.norm.vmin, image.norm.vmax) == (0.0, 1.0)
    assert np.abs(cell_colour(fig, 0, 0, 0) - expected_rgb(0.41)).max() <= 2
    assert np.abs(cell_colour(fig, 0, 0, 0) - expected_rgb(1.0)).max() > 100
    assert texts(fig, "caption") == ["fixed scale 0–1"]


def test_high_temperature_weights_look_pale():
    """At temperature 10 every weight is near 1/L: the map must stay in the bottom fifth of the scale."""
    from attn_core.viz import widgets

    fig = widgets.render_attention(temperature=10.0, head_dim=64)
    image = panel_images(fig)[0]
    assert image.norm.vmax == 1.0 and float(np.max(image.get_array())) < 0.2


def test_relative_scale_only_when_asked():
    weights = random_weights(4, 4) * 0.5  # (4, 4), largest value below 0.5
    fig = ac.plot_attention(weights, vmax="relative")
    assert panel_images(fig)[0].norm.vmax == pytest.approx(float(weights.max()))
    assert texts(fig, "caption") == ["relative: top = largest value"]


def test_values_above_one_extend_the_scale_and_say_so():
    """Dropout's 1/(1-p) boost gives weights above 1: the scale grows to them, and the caption says so."""
    weights = torch.tensor([[1.43, 0.0], [0.5, 0.5]])
    fig = ac.plot_attention(weights)
    assert panel_images(fig)[0].norm.vmax == pytest.approx(1.43)
    assert texts(fig, "caption") == ["0–1 extended to max 1.43"]
    assert "1.00" in texts(fig, "colorbar") and "1.43" in texts(fig, "colorbar")


def test_an_explicit_vmax_clips_and_says_so():
    fig = ac.plot_attention(torch.tensor([[0.9, 0.1]]), vmax=0.5)
    assert panel_images(fig)[0].norm.vmax == 0.5
    assert texts(fig, "caption") == ["scale 0–0.50; values above 0.50 clipped"]


@pytest.mark.parametrize("vmax", ["max", 0.0, -1.0])
def test_an_impossible_vmax_is_rejected(vmax):
    with pytest.raises(ValueError, match="vmax"):
        ac.plot_attention(random_weights(2, 2), vmax=vmax)


# --------------------------------------------------------------------------- legibility


def test_defaults_are_projector_sized():
    """110 dpi; tick labels >= 9 pt; printed numbers >= 9 pt, i.e. digits ~10 px tall on the canvas."""
    fig = ac.plot_attention(torch.tensor([[0.5]]), query_labels=["q"], key_labels=["k"], annotate=True)
    assert fig.dpi == DPI >= 110
    for role in ("query-label", "key-label", "value", "title", "colorbar", "axis-name"):
        assert all(label.size >= 9 for label in labels(fig, role)), role
    (number,) = [patch for patch in fig.axes[0].patches if patch.get_gid() == "value"]
    FigureCanvasAgg(fig).draw()
    ink = number.get_path().get_extents(number.get_transform())  # display pixels
    assert ink.height >= 0.7 * 9 * fig.dpi / 72  # digits are ~0.73 em tall: >= 9.6 px at 9 pt, 110 dpi


@pytest.mark.parametrize(
    ("size", "panel_size", "annotate", "printed"),
    [
        (6, 2.8, None, True),  # 0.47-inch cells: numbers fit
        (12, 2.8, None, False),  # 0.23-inch cells: too small for 9-pt numbers
        (12, 6.0, None, True),  # same map, bigger panels: they fit again
        (16, 2.8, True, False),  # asked for, but illegible: not printed, and the figure says why
        (6, 2.8, False, False),
    ],
)
def test_numbers_are_printed_only_where_they_are_legible(size, panel_size, annotate, printed):
    fig = ac.plot_attention(random_weights(size, size), panel_size=panel_size, annotate=annotate)
    assert (len(texts(fig, "value")) == size * size) == printed and (not printed) == (texts(fig, "value") == [])
    assert bool(texts(fig, "note")) == (annotate is True and not printed)


def test_auto_annotation_stays_off_for_large_grids():
    """More than 4 panels: no numbers unless asked (they would clutter the grid)."""
    assert texts(ac.plot_attention(random_weights(8, 4, 4)), "value") == []
    assert len(texts(ac.plot_attention(random_weights(8, 4, 4), annotate=True), "value")) == 8 * 16


# --------------------------------------------------------------------------- masks and NaN


def test_a_boolean_mask_is_drawn_in_two_colours_with_a_legend():
    fig = ac.plot_attention(ac.causal_mask(4))
    image = panel_images(fig)[0]
    assert image.cmap.N == 2
    np.testing.assert_array_equal(np.asarray(image.get_array()), ac.causal_mask(4).double().numpy())
    assert texts(fig, "legend") == ["may attend", "blocked"]
    assert texts(fig, "colorbar") == [] and texts(fig, "caption") == []
    assert np.abs(cell_colour(fig, 0, 1, 0) - expected_rgb(1.0)).max() <= 2  # may attend: the top colour
    assert np.abs(cell_colour(fig, 0, 0, 1) - expected_rgb(0.0)).max() <= 2  # blocked: the bottom colour


def test_binary_takes_float_masks_and_rejects_weights():
    assert texts(ac.plot_attention(ac.causal_mask(3).float(), binary=True), "legend") == ["may attend", "blocked"]
    with pytest.raises(ValueError, match="values must be 0/1; found 0.5"):
        ac.plot_attention(torch.tensor([[0.5, 0.5]]), binary=True)


def test_nan_cells_are_hatched_and_named_in_the_legend():
    """The -inf -> NaN rows of notebook 05: hatched red cells (not blank white) and a "NaN" legend entry."""
    weights = torch.tensor([[0.5, 0.5], [float("nan"), float("nan")]])
    fig = ac.plot_attention(weights)
    (hatch,) = [patch for patch in fig.axes[0].patches if patch.get_gid() == "non-finite"]
    assert hatch.get_hatch() and len(hatch.get_path().vertices) == 2 * 5  # one closed square per NaN cell
    assert "NaN" in texts(fig, "legend")
    assert matplotlib.colors.to_hex(hatch.get_edgecolor()) == NAN_HATCH  # the hatch lines take the edge colour


def test_nan_cells_get_a_visible_label():
    """A printed NaN is red (not white on white, not black like a number)."""
    fig = ac.plot_attention(torch.tensor([[float("nan"), 1.0]]), annotate=True)
    found = dict(zip(texts(fig, "value"), colours(fig, "value"), strict=True))
    assert found["nan"] not in ("#ffffff", "#000000") and found["1.00"] in ("#ffffff", "#000000")


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("shape", [(5,), (1, 2, 3, 4, 5)], ids=["1d", "5d"])
def test_wrong_number_of_dims_raises(shape):
    """Arrays that are not 2-D, 3-D or 4-D raise ValueError naming the shape."""
    with pytest.raises(ValueError, match=rf"got shape \({', '.join(map(str, shape))},?\)"):
        ac.plot_attention(np.zeros(shape))


def mentions(*numbers: int) -> str:
    """A regex that matches a message naming every one of `numbers` (in any order)."""
    return "".join(rf"(?=.*\b{n}\b)" for n in numbers)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"query_labels": ["a", "b"]}, mentions(2, 3)),
        ({"key_labels": ["a", "b", "c", "d", "e"]}, mentions(5, 4)),
        ({"titles": ["only one"]}, r"1 titles given for 2 panels"),
        ({"num_kv_heads": 3}, r"num_kv_heads \(3\) must divide the number of (query )?heads \(2\)"),
        ({"num_kv_heads": 0}, r"num_kv_heads \(0\) must divide the number of (query )?heads \(2\)"),
    ],
    ids=["query-labels", "key-labels", "titles", "kv-heads-3", "kv-heads-0"],
)
def test_inconsistent_arguments_raise(kwargs, match):
    """Wrong label counts, title counts or a non-dividing num_kv_heads raise ValueError naming the numbers."""
    with pytest.raises(ValueError, match=match):
        ac.plot_attention(random_weights(2, 3, 4), **kwargs)


# --------------------------------------------------------------------------- saving


@pytest.mark.parametrize(("fmt", "magic"), [("png", b"\x89PNG\r\n\x1a\n"), ("svg", b"<svg")])
def test_figure_saves_to_png_and_svg(fmt, magic):
    """The figure renders to a non-empty PNG / SVG in memory."""
    fig = ac.plot_attention(random_weights(2, 3, 3), num_kv_heads=1, query_labels=list("abc"), key_labels=list("xyz"))
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt)
    data = buffer.getvalue()
    assert len(data) > 1000
    assert magic in data[:2000]


def test_the_hidden_values_note_fits_even_a_small_figure():
    from attn_core.viz.textpaths import text_width

    fig = ac.plot_attention(random_weights(16, 16), panel_size=1.5, annotate=True)
    (note,) = labels(fig, "note")
    assert note.x + text_width(note.text, note.size) <= fig.get_figwidth()


def test_set_figure_scale_makes_ipython_show_plain_figures_larger():
    """The PNG a notebook shows for a returned Figure is drawn at dpi x scale (IPython's formatter), then restored."""
    import base64
    import functools
    import struct

    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import print_figure

    shell = InteractiveShell.instance()
    png_formatter = shell.display_formatter.formatters["image/png"]
    png_formatter.for_type(Figure, functools.partial(print_figure, fmt="png", base64=True))  # as matplotlib-inline
    figure = ac.plot_attention(torch.full((4, 4), 0.25))

    def shown_width() -> int:
        data, _ = shell.display_formatter.format(figure)
        return struct.unpack(">I", base64.b64decode(data["image/png"])[16:20])[0]

    plain = shown_width()
    ac.set_figure_scale(2.0)
    try:
        doubled = shown_width()
    finally:
        ac.set_figure_scale(1.0)
    assert doubled == pytest.approx(2 * plain, abs=3)  # a tight box: a pixel or two of rounding per side
    assert shown_width() == plain
