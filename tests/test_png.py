"""attn_core.viz.png: the fast PNG writer behind explorers and ``plot_attention(...).savefig``.

The same pixels as matplotlib's own PNG (decoded with Pillow), the figure's dpi recorded, and every save that is
not plain (another dpi, a tight box, transparency, SVG) left to matplotlib unchanged.
"""

import io

import matplotlib
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from PIL import Image

import attn_core as ac
from attn_core.viz import png


@pytest.fixture
def figure():
    return ac.plot_attention(torch.softmax(torch.randn(4, 6, 6, generator=torch.Generator().manual_seed(0)), -1))


def decode(data: bytes) -> tuple[np.ndarray, dict]:
    image = Image.open(io.BytesIO(data))
    return np.asarray(image.convert("RGBA")), image.info


def test_plot_attention_returns_a_fast_png_figure_that_prints_as_a_figure(figure):
    assert isinstance(figure, png.FastPngFigure)
    assert repr(figure) == Figure.__repr__(figure).replace("FastPngFigure", "Figure")
    assert repr(figure).startswith("<Figure size ")  # stored notebook outputs hold this text


def test_plain_savefig_writes_matplotlibs_pixels_fast(figure, tmp_path, monkeypatch):
    reference = io.BytesIO()
    Figure.savefig(figure, reference, format="png")  # matplotlib's own writer
    calls = []
    monkeypatch.setattr(Figure, "savefig", lambda *a, **k: calls.append(k))  # must not be reached
    for target in (tmp_path / "map.png", str(tmp_path / "map2.png"), io.BytesIO()):
        figure.savefig(target) if not isinstance(target, io.BytesIO) else figure.savefig(target, format="png")
        data = target.getvalue() if isinstance(target, io.BytesIO) else open(target, "rb").read()
        pixels, info = decode(data)
        expected, expected_info = decode(reference.getvalue())
        assert np.array_equal(pixels, expected)
        assert info["dpi"] == pytest.approx(expected_info["dpi"], abs=0.01)
    assert not calls


@pytest.mark.parametrize(
    "kwargs, suffix",
    [({"dpi": 55}, ".png"), ({"bbox_inches": "tight"}, ".png"), ({"transparent": True}, ".png"), ({}, ".svg")],
)
def test_any_other_save_is_matplotlibs(figure, tmp_path, monkeypatch, kwargs, suffix):
    called = []
    original = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: called.append(k) or original(self, *a, **k))
    figure.savefig(tmp_path / f"x{suffix}", **kwargs)
    assert called, "matplotlib's savefig must handle this save"
    if kwargs.get("dpi") == 55:
        assert decode((tmp_path / "x.png").read_bytes())[0].shape[1] < figure.get_size_inches()[0] * figure.dpi


def test_rcparams_that_change_a_save_are_honoured(figure, tmp_path, monkeypatch):
    monkeypatch.setitem(matplotlib.rcParams, "savefig.dpi", 55)
    figure.savefig(tmp_path / "x.png")
    width = decode((tmp_path / "x.png").read_bytes())[0].shape[1]
    assert width == pytest.approx(figure.get_size_inches()[0] * 55, abs=2)
