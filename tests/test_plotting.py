"""plot_attention: returns a Figure whose panels show exactly the weights given, labelled and coloured.

The helpers read panels through the public matplotlib objects only (heatmap images, texts, tick
labels), so the tests hold whether each panel is its own Axes or an image in one shared Axes.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
import torch
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

import attn_core as ac

NUMBER = re.compile(r"^-?\d+(\.\d+)?$")  # cell annotations such as "0.25"


def random_weights(*shape: int, seed: int = 0) -> torch.Tensor:
    """Row-stochastic attention weights of the given shape (softmax over the last dim)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(*shape, generator=generator), dim=-1)


def heatmap_axes(fig: Figure) -> list:
    """Axes that draw attention maps (the colorbar left out)."""
    return [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]


def panel_images(fig: Figure) -> list:
    """One image per panel, in panel order."""
    return [image for ax in heatmap_axes(fig) for image in ax.images]


def _anchor(text) -> tuple[float, float]:
    """Where a text is anchored, in display coordinates (no rendering needed)."""
    return tuple(text.get_transform().transform(text.get_position()))


def _annotations_and_titles(ax) -> list:
    """Texts of an Axes that are not axis labels: anchored neither below nor left of it."""
    texts = [t for t in (ax.title, *ax.texts) if t.get_text() and t.get_visible()]
    return [t for t in texts if _anchor(t)[0] >= ax.bbox.x0 and _anchor(t)[1] >= ax.bbox.y0]


def panel_titles(fig: Figure) -> list:
    """The Text objects titling the panels, in panel order (axes titles or texts; cell numbers left out)."""
    return [t for ax in heatmap_axes(fig) for t in _annotations_and_titles(ax) if not NUMBER.match(t.get_text())]


def axis_labels(ax, axis: str) -> list[str]:
    """Labels along the x axis (tick labels or texts anchored below the Axes) or the y axis (left of it)."""
    ticks = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    labels = [t.get_text() for t in ticks if t.get_visible() and t.get_text()]
    for text in ax.texts:
        x, y = _anchor(text)
        if text.get_visible() and ((axis == "x" and y < ax.bbox.y0) or (axis == "y" and x < ax.bbox.x0)):
            labels.append(text.get_text())
    return labels


def is_repetition(texts: list[str], tokens: list[str]) -> bool:
    """True when texts == tokens * n for some n >= 1 (a grid may label each column/row block)."""
    return bool(texts) and len(texts) % len(tokens) == 0 and texts == tokens * (len(texts) // len(tokens))


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
    heads = panel_titles(ac.plot_attention(random_weights(3, 2, 2), annotate=False))
    assert [t.get_text() for t in heads] == ["head 0", "head 1", "head 2"]
    layers = panel_titles(ac.plot_attention(random_weights(2, 2, 2, 2), annotate=False))
    assert [t.get_text() for t in layers] == [
        "layer 0 · head 0",
        "layer 0 · head 1",
        "layer 1 · head 0",
        "layer 1 · head 1",
    ]
    custom = panel_titles(ac.plot_attention(random_weights(2, 2, 2), titles=["a", "b"], annotate=False))
    assert [t.get_text() for t in custom] == ["a", "b"]


@pytest.mark.parametrize(
    "shape", [(3, 4), (2, 3, 4), (6, 3, 4), (2, 2, 3, 4)], ids=["map", "heads", "wrapped", "layers"]
)
def test_token_labels_become_tick_labels(shape):
    """key_labels label the x axis and query_labels the y axis (once per panel block at most)."""
    queries, keys = ["the", "cat", "sat"], ["<s>", "the", "cat", "sat"]
    fig = ac.plot_attention(random_weights(*shape), query_labels=queries, key_labels=keys)
    x_labels = [axis_labels(ax, "x") for ax in heatmap_axes(fig)]
    y_labels = [axis_labels(ax, "y") for ax in heatmap_axes(fig)]
    assert any(is_repetition(labels, keys) for labels in x_labels)
    assert any(is_repetition(labels, queries) for labels in y_labels)
    assert all(labels == [] or is_repetition(labels, keys) for labels in x_labels)
    assert all(labels == [] or is_repetition(labels, queries) for labels in y_labels)


def test_figure_title_is_set():
    """title= becomes the figure's suptitle."""
    fig = ac.plot_attention(random_weights(3, 3), title="causal attention")
    assert fig.get_suptitle() == "causal attention"


# --------------------------------------------------------------------------- kv-group colours


def title_colours(fig: Figure) -> list[str]:
    return [to_hex(t.get_color()) for t in panel_titles(fig)]


@pytest.mark.parametrize(("num_heads", "num_kv_heads"), [(8, 2), (6, 3), (4, 4), (4, 1)])
def test_kv_groups_share_colours(num_heads, num_kv_heads):
    """With num_kv_heads, heads sharing a kv head get one title colour; different groups get different ones."""
    fig = ac.plot_attention(random_weights(num_heads, 3, 3), num_kv_heads=num_kv_heads, annotate=False)
    colours = title_colours(fig)
    titles = [t.get_text() for t in panel_titles(fig)]
    group_size = num_heads // num_kv_heads
    assert len(colours) == num_heads
    for head in range(num_heads):
        assert titles[head].endswith(f"kv {head // group_size}")
    by_group = [set(colours[g * group_size : (g + 1) * group_size]) for g in range(num_kv_heads)]
    assert all(len(group) == 1 for group in by_group)
    assert len(set(colours)) == num_kv_heads


def test_layer_grid_colours_kv_groups_per_head():
    """In a (layers, heads) grid the colour depends on the head's kv group, the same in every layer."""
    colours = title_colours(ac.plot_attention(random_weights(2, 4, 3, 3), num_kv_heads=2, annotate=False))
    assert len(colours) == 8
    assert colours[:4] == colours[4:]
    assert colours[0] == colours[1] != colours[2] == colours[3]


def test_without_num_kv_heads_titles_are_uncoloured():
    """Without num_kv_heads every panel title has the same (neutral) colour."""
    colours = title_colours(ac.plot_attention(random_weights(4, 3, 3), annotate=False))
    assert len(colours) == 4 and len(set(colours)) == 1


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


def test_nan_cells_get_a_visible_label():
    """A NaN weight (what -inf masking produces) is blank in the image; its label must not be white."""
    fig = ac.plot_attention(torch.tensor([[float("nan"), 1.0]]), annotate=True)
    labels = {text.get_text(): to_hex(text.get_color()) for ax in fig.axes for text in ax.texts}
    assert labels["nan"] not in ("#ffffff", "#000000") and labels["1.00"] in ("#ffffff", "#000000")
