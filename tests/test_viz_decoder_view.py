"""The decoder head view (notebook 11): each scale draws exactly the weights it claims, masked cells look
different from a weight of 0, the explanation's numbers are the measured ones, bad input is refused in
words, and the explorer re-runs the model only when the prompt changes.

Everything runs on hand-made maps or a tiny randomly initialised Gemma3 (3 layers, window 4); one smoke
test loads the real Gemma 3 270M (about 3 s from the converted cache)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg

import attn_core as ac
from attn_core.models.gemma3 import Gemma3, Gemma3Config
from attn_core.viz import decoder_view as dv
from attn_core.viz.plotting import DPI
from attn_core.viz.textpaths import text_items

TOKENS = ["<bos>", "The", "cat", "sat", "on", "the", "mat", "."]
WINDOWS = [3, 3, None]  # layers 0, 1 local (window 3), layer 2 global


def softmax_maps(length: int, windows=WINDOWS, heads: int = 4, seed: int = 0) -> torch.Tensor:
    """Float64 weights ``(layers, heads, L, L)`` of random scores under each layer's causal/window mask."""
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(len(windows), heads, length, length, generator=generator, dtype=torch.float64)
    visible = torch.stack([dv.visible_keys(length, w) for w in windows])[:, None]  # (layers, 1, L, L)
    return scores.masked_fill(~visible, float("-inf")).softmax(-1)  # (layers, H, L, L)


def images(figure) -> list[np.ndarray]:
    return [np.asarray(image.get_array()) for image in figure.axes[0].images]


def texts(figure, role: str) -> list[str]:
    return [label.text for r, label, _ in text_items(figure) if r == role]


def masked_patch(figure):
    found = [p for p in figure.axes[0].patches if p.get_gid() == "masked"]
    return found[0] if found else None


def cell_centres(figure, panel: int = 0) -> np.ndarray:
    """``(Lq, Lk, 2)`` centres of a panel's cells, in the Axes' units (inches)."""
    image = figure.axes[0].images[panel]
    x0, x1, y0, y1 = image.get_extent()
    rows, cols = image.get_array().shape
    xs = x0 + (np.arange(cols) + 0.5) * (x1 - x0) / cols  # (Lk,)
    ys = y1 - (np.arange(rows) + 0.5) * (y1 - y0) / rows  # (Lq,)
    return np.stack(np.meshgrid(xs, ys), -1)  # (Lq, Lk, 2)


# ------------------------------------------------------------------------------------------ pure render


@pytest.mark.parametrize(("layer", "head"), [(0, "all"), (2, "all"), (1, 3), (2, 0)])
def test_fixed_scale_draws_the_layers_weights(layer, head):
    maps = softmax_maps(8)
    figure = dv.render_decoder_heads(maps, TOKENS, layer, head, "fixed", windows=WINDOWS)
    expected = maps[layer] if head == "all" else maps[layer, head][None]  # (panels, L, L)
    drawn = images(figure)
    assert len(drawn) == len(expected)
    for image, weights in zip(drawn, expected, strict=True):
        np.testing.assert_array_equal(image, weights.numpy())  # float64 in, float64 drawn: exact


def test_log_scale_is_the_log10_position_and_zeros_clip_without_warnings():
    maps = softmax_maps(8)
    maps[2, 1, 5, 2] = 0.0  # a visible key with weight exactly 0 (renormalise the row: still a distribution)
    maps[2, 1, 5] /= maps[2, 1, 5].sum()
    maps[2, 1, 3] = torch.tensor([1e-6, 1 - 1e-6, 0, 0, 0, 0, 0, 0], dtype=torch.float64)  # below the floor
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # log10(0) would warn: the view must clip first
        figure = dv.render_decoder_heads(maps, TOKENS, 2, 1, "log", windows=WINDOWS)
        dv.explain_decoder_heads(maps, TOKENS, 2, 1, "log", windows=WINDOWS)
    (image,) = images(figure)
    expected = (np.log10(np.maximum(maps[2, 1].numpy(), 1e-4)) + 4) / 4  # 1e-4 -> 0, 1e-2 -> 0.5, 1 -> 1
    np.testing.assert_allclose(image, expected, rtol=0, atol=1e-12)
    assert image[5, 2] == 0.0 and image[3, 0] == 0.0 and image[0, 0] == 1.0  # zero, 1e-6 and <bos>'s own 1.0
    assert texts(figure, "colorbar") == ["1", "0.1", "0.01", "1e-3", "1e-4"]
    assert texts(figure, "caption") == ["weight, log scale"]


def test_without_bos_drops_the_sink_column_and_renormalises_each_row():
    maps = softmax_maps(8)
    figure = dv.render_decoder_heads(maps, TOKENS, 2, "all", "without_bos", windows=WINDOWS)
    rest = maps[2, :, 1:, 1:].numpy()  # (H, 7, 7)
    for image, weights in zip(images(figure), rest, strict=True):
        assert image.shape == (7, 7)
        np.testing.assert_allclose(image, weights / weights.sum(-1, keepdims=True), rtol=0, atol=1e-12)
        np.testing.assert_allclose(image.sum(-1), 1.0, rtol=0, atol=1e-12)  # rows are distributions again
        # Metamorphic: renormalising keeps the ratios between the other keys of a row.
        np.testing.assert_allclose(image[6, 2] / image[6, 0], weights[6, 2] / weights[6, 0], rtol=1e-12)
    one = dv.render_decoder_heads(maps, TOKENS, 2, 1, "without_bos", windows=WINDOWS)
    assert texts(one, "key-label") == texts(one, "query-label") == TOKENS[1:]  # <bos> gone from both axes
    assert texts(figure, "caption") == ["share without <bos>"]


def test_without_bos_row_that_gave_everything_to_bos_stays_zero():
    maps = softmax_maps(8)
    maps[2, 0, 4] = torch.tensor([1.0, 0, 0, 0, 0, 0, 0, 0], dtype=torch.float64)  # row 4: all on <bos>
    (image,) = images(dv.render_decoder_heads(maps, TOKENS, 2, 0, "without_bos", windows=WINDOWS))
    assert np.isfinite(image).all() and (image[3] == 0).all()  # row 4 of the map is row 3 without <bos>
    text = dv.explain_decoder_heads(maps, TOKENS, 2, 0, "without_bos", windows=WINDOWS)
    assert "as small as 0%" in text and "all-zero row stays 0" in text


@pytest.mark.parametrize(("layer", "window"), [(2, None), (0, 3)])
def test_the_hatched_patch_covers_exactly_the_masked_cells(layer, window):
    maps = softmax_maps(8)
    figure = dv.render_decoder_heads(maps, TOKENS, layer, "all", "fixed", windows=WINDOWS)
    visible = dv.visible_keys(8, window).numpy()  # (L, L)
    patch = masked_patch(figure)
    assert patch.get_hatch() == "///" and patch.get_zorder() > 3  # above the cells and any printed value
    for panel in range(4):
        centres = cell_centres(figure, panel).reshape(-1, 2)  # (L*L, 2)
        inside = patch.get_path().contains_points(centres).reshape(8, 8)
        np.testing.assert_array_equal(inside, ~visible)
    legend = texts(figure, "legend")
    assert legend == (["masked: future key"] if window is None else ["masked: future / outside window"])


def test_masked_cells_look_different_from_a_zero_weight():
    """Pixels: a future cell is light grey; a visible cell of weight exactly 0 is the colour map's bottom."""
    maps = softmax_maps(8)
    maps[2, 0, 6, 3] = 0.0
    maps[2, 0, 6] /= maps[2, 0, 6].sum()
    figure = dv.render_decoder_heads(maps, TOKENS, 2, 0, "fixed", windows=WINDOWS)
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())[..., :3].astype(int)  # (height px, width px, 3)
    height = figure.get_figheight()

    def pixel(row, col):
        x, y = cell_centres(figure)[row, col]
        return pixels[int((height - y) * figure.dpi), int(x * figure.dpi)]

    bottom = np.array(colormaps["viridis"](0.0)[:3]) * 255
    np.testing.assert_allclose(pixel(6, 3), bottom, atol=1)  # weight 0, visible: dark purple
    for row, col in [(0, 5), (2, 7), (6, 7)]:  # future keys
        r, g, b = pixel(row, col)
        assert max(r, g, b) - min(r, g, b) <= 2 and min(r, g, b) >= 0x90, (row, col, (r, g, b))


def test_figure_is_readable_and_states_its_scale():
    maps = softmax_maps(8)
    for scale, caption in [("fixed", "fixed scale 0–1"), ("log", "weight, log scale"), ("without_bos", None)]:
        figure = dv.render_decoder_heads(maps, TOKENS, 1, "all", scale, windows=WINDOWS)
        assert figure.dpi == DPI >= 110
        sizes = [label.size for _, label, _ in text_items(figure)]
        assert sizes and min(sizes) >= 9
        assert caption is None or texts(figure, "caption") == [caption]
        assert figure.get_suptitle() == "layer 1 (local, window 3)"
    figure = dv.render_decoder_heads(maps, TOKENS, 2, 3, "fixed", windows=WINDOWS, values=True)
    assert figure.get_suptitle() == "layer 2 (global) · head 3"
    assert len(texts(figure, "value")) == 64  # every cell printed (the 28 masked ones under the hatching)
    assert not texts(dv.render_decoder_heads(maps, TOKENS, 2, 3, "log", windows=WINDOWS, values=True), "value")


def test_the_colour_key_fits_inside_the_figure():
    maps = softmax_maps(8)
    for panel_size in (1.5, 2.4, 6.0):
        figure = dv.render_decoder_heads(maps, TOKENS, 0, "all", "without_bos", windows=WINDOWS, panel_size=panel_size)
        width, height = figure.get_size_inches()
        for _, label, _ in text_items(figure):
            assert 0 <= label.x <= width and 0 <= label.y <= height, label


def test_labels_thin_out_for_long_prompts_and_one_head_labels_every_token():
    short = [f"w{i}" for i in range(20)]
    one = dv.render_decoder_heads(softmax_maps(20, [None]), short, 0, 1, "fixed")
    assert texts(one, "query-label") == short and texts(one, "key-label") == short
    grid = dv.render_decoder_heads(softmax_maps(20, [None]), short, 0, "all", "fixed")
    assert 0 < len(texts(grid, "query-label")) < 20  # four 2.4-inch panels: every other token
    long = [f"w{i}" for i in range(120)]
    big = dv.render_decoder_heads(softmax_maps(120, [None], heads=1), long, 0, 0, "log")
    shown = texts(big, "query-label")
    assert 10 < len(shown) < 120 and shown[0] == "w0"  # capped at MAX_PANEL inches, then every k-th label
    assert big.get_size_inches()[0] < dv.MAX_PANEL + 3


@pytest.mark.parametrize(
    ("piece", "label"),
    [
        ("<bos>", "<bos>"),
        ("▁capital", "capital"),
        ("The", "The"),
        ("▁▁", "␣␣"),
        ("▁", "␣"),
        ("\n", "↵"),
        ("\t", "⇥"),
        ("\x07", "\\x07"),
        ("▁naïve", "naïve"),
        ("▁supercalifragilistic", "supercalifrag…"),
    ],
)
def test_token_label_makes_sentencepiece_pieces_readable(piece, label):
    assert dv.token_label(piece) == label


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: dv.render_decoder_heads(m[0], TOKENS, 0), r"maps must be \(layers, heads, L, L\)"),
        (lambda m: dv.render_decoder_heads(m[..., :5], TOKENS, 0), r"got shape \(3, 4, 8, 5\)"),
        (lambda m: dv.render_decoder_heads(m, TOKENS[:5], 0), "5 tokens given for maps over 8 positions"),
        (lambda m: dv.render_decoder_heads(m, TOKENS, 3), r"layer 3 does not exist; .* 0\.\.2"),
        (lambda m: dv.render_decoder_heads(m, TOKENS, True), "layer True does not exist"),
        (lambda m: dv.render_decoder_heads(m, TOKENS, 0, 4), r"head 4 does not exist: use 'all' or 0\.\.3"),
        (lambda m: dv.render_decoder_heads(m, TOKENS, 0, "two"), "head 'two' does not exist"),
        (lambda m: dv.render_decoder_heads(m, TOKENS, 0, 0, "linear"), "scale must be one of"),
        (lambda m: dv.render_decoder_heads(m, TOKENS, 0, windows=[3, None]), "one entry per layer"),
        (lambda m: dv.render_decoder_heads(m * 2, TOKENS, 2), "not attention weights"),
        (lambda m: dv.render_decoder_heads(m.log(), TOKENS, 2), r"not attention weights \(NaN or inf"),
        (lambda m: dv.render_decoder_heads(m - 0.5, TOKENS, 2), r"values from -0\.5 to"),
        (lambda m: dv.render_decoder_heads(list(m[:, None]), TOKENS, 2), None),  # lm's list of (1, H, L, L)
        (lambda m: dv.render_decoder_heads([m[0, None], m[1]], TOKENS, 2), "one \\(1, heads, L, L\\) tensor per layer"),
        (lambda m: dv.render_decoder_heads(m, TOKENS, 0, windows=[None] * 3), None),  # a window is narrower: fine
        (lambda m: dv.render_decoder_heads(m, TOKENS, 2, windows=[3, 3, 3]), "puts weight .* on a masked cell"),
        (lambda m: dv.explain_decoder_heads(m.transpose(-1, -2), TOKENS, 2), "on a masked cell"),
        (lambda m: dv.render_decoder_heads(m[:, :, :1, :1], ["<bos>"], 0, 0, "without_bos"), "after <bos>"),
    ],
)
def test_bad_input_is_refused_in_words(call, message):
    maps = softmax_maps(8)
    if message is None:
        call(maps)
        return
    with pytest.raises(ValueError, match=message):
        call(maps)


def test_nan_maps_are_refused():
    maps = softmax_maps(8)
    maps[2, 0, 3, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        dv.render_decoder_heads(maps, TOKENS, 2)


def test_explanation_gives_the_measured_shares_and_the_layer_kind():
    maps = softmax_maps(8)
    w = maps[2, 1]  # (L, L)
    sink, previous, itself = w[1:, 0].mean(), w.diagonal(-1).mean(), w.diagonal()[1:].mean()
    text = dv.explain_decoder_heads(maps, TOKENS, 2, 1, "fixed", windows=WINDOWS, rope_bases=[1e4, 1e4, 1e6])
    assert text.startswith("8 tokens; layer 2 is GLOBAL (every earlier token, RoPE base 1e6).")
    assert f"head 1 puts {sink:.0%} of its attention on <bos>, {previous:.0%} on the previous token" in text
    assert f"and {itself:.0%} on itself (mean over the 7 queries after <bos>)" in text
    grid = dv.explain_decoder_heads(maps, TOKENS, 0, "all", "log", windows=WINDOWS, rope_bases=[1e4, 1e4, 1e6])
    assert "layer 0 is LOCAL (sliding window 3, RoPE base 1e4): query i sees keys i−2..i only" in grid
    shares = ", ".join(f"{s:.0%}" for s in maps[0, :, 1:, 0].mean(-1))
    assert f"<bos> takes {shares} of heads 0–3's attention" in grid and "log scale from 0.0001" in grid
    fits = dv.explain_decoder_heads(maps, TOKENS, 1, 0, windows=[16, 16, None])
    assert "sliding window 16): this 8-token prompt fits the window" in fits
    renormalised = dv.explain_decoder_heads(maps, TOKENS, 2, 1, "without_bos", windows=WINDOWS)
    smallest = float(w[1:, 1:].sum(-1).min())
    assert f"as small as {smallest:.0%} here: that row is magnified {1 / smallest:.0f}×" in renormalised


# ------------------------------------------------------------------------------------ a tiny real decoder


class WordTokenizer:
    """Splits on spaces into SentencePiece-style pieces (``▁`` marks a word after a space), new ids on demand."""

    def __init__(self, vocab_size: int):
        self.pieces = ["<pad>", "<eos>", "<bos>"]
        self.vocab_size = vocab_size

    def encode(self, text: str, add_special_tokens: bool = False):
        pieces = [("▁" if i else "") + word for i, word in enumerate(text.split(" ")) if word]
        for piece in pieces:
            if piece not in self.pieces:
                self.pieces.append(piece)
        assert len(self.pieces) <= self.vocab_size, "test prompts use too many distinct words"

        class Encoding:
            ids = [self.pieces.index(p) for p in pieces]

        return Encoding()

    def id_to_token(self, i: int) -> str:
        return self.pieces[i]


@pytest.fixture
def tiny_lm():
    torch.manual_seed(0)
    config = Gemma3Config(
        vocab_size=64,
        hidden_dim=16,
        num_layers=3,
        num_heads=4,
        num_kv_heads=1,
        head_dim=8,
        ffn_dim=32,
        sliding_window=3,
        global_every=3,
        rope_base_local=1e4,
        rope_base_global=1e6,
        query_pre_attn_scalar=8,
        rms_norm_eps=1e-6,
        bos_token_id=2,
        eos_token_id=1,
        pad_token_id=0,
    )
    return Gemma3(config, WordTokenizer(64)).double().eval()


def counting_forward(lm, monkeypatch) -> list[int]:
    calls = []
    forward = lm.forward

    def counted(*args, **kwargs):
        calls.append(1)
        return forward(*args, **kwargs)

    monkeypatch.setattr(lm, "forward", counted)
    return calls


def test_view_keeps_the_models_own_maps_and_runs_it_once_per_prompt(tiny_lm, monkeypatch):
    view = dv.DecoderView(tiny_lm)
    assert view.windows == [3, 3, None] and view.rope_bases == [1e4, 1e4, 1e6]
    calls = counting_forward(tiny_lm, monkeypatch)
    prompt = "the cat sat on the mat today"
    tokens, maps = view.attention(prompt)
    assert tokens == ["<bos>", "the", "cat", "sat", "on", "the", "mat", "today"] and len(calls) == 1
    ids = torch.tensor([tiny_lm.encode(prompt)])  # (1, L)
    _, expected = tiny_lm(ids, return_attention=True)  # 3 x (1, H, L, L)
    assert torch.equal(maps, torch.stack([w[0] for w in expected]))  # (layers, H, L, L)
    for layer, head, scale in [(0, "all", "fixed"), (1, 2, "log"), (2, 0, "without_bos")]:
        view.render(prompt, layer, head, scale)  # the local layers really are zero outside the window
        view.explain(prompt, layer, head, scale)
    assert len(calls) == 2  # the one above and the reference call: rendering never re-ran the model
    with pytest.raises(ValueError, match="type a prompt"):
        view.attention("   ")
    with pytest.raises(ValueError, match="the prompt is 9 tokens; this view draws at most 8"):
        dv.DecoderView(tiny_lm, max_tokens=8).attention("a b c d e f g h")


def test_remembered_maps_are_the_models_own_and_spare_a_forward_pass(tiny_lm, monkeypatch):
    prompt = "the cat sat on the mat today"
    ids = torch.tensor([tiny_lm.encode(prompt)])  # (1, L)
    with torch.no_grad():
        _, maps = tiny_lm(ids, return_attention=True)  # 3 x (1, H, L, L)
    expected = dv.DecoderView(tiny_lm).attention(prompt)  # the view's own forward pass
    view = dv.DecoderView(tiny_lm)
    calls = counting_forward(tiny_lm, monkeypatch)
    tokens, stacked = view.remember(prompt, maps)
    assert tokens == expected[0] and torch.equal(stacked, expected[1])
    assert view.attention(prompt)[1] is stacked and len(calls) == 0  # served from the cache: no forward pass
    view.render(prompt, 2, "all", "log")
    assert len(calls) == 0
    assert torch.equal(dv.DecoderView(tiny_lm).remember(prompt, expected[1])[1], expected[1])  # (layers, H, L, L)
    for wrong, message in [
        (maps[:2], r"maps of shape \(2, 4, 8, 8\) do not fit this prompt: 8 tokens and this model need"),
        ([w[:, :, :-1, :-1] for w in maps], r"\(layers, heads, L, L\) = \(3, 4, 8, 8\)"),
        ([w[0] for w in maps], r"a list of \(1, heads, L, L\) tensors, got shapes \[\(4, 8, 8\)"),
        ("weights", r"maps of shape \(\) do not fit"),
    ]:
        with pytest.raises(ValueError, match=message):
            view.remember(prompt, wrong)
    with pytest.raises(ValueError, match="the prompt is 8 tokens; this view draws at most 7"):
        dv.DecoderView(tiny_lm, max_tokens=7).remember(prompt, maps)
    with pytest.raises(ValueError, match="type a prompt"):
        view.remember(" ", maps)


def test_explorer_reacts_to_every_control_and_reruns_the_model_only_for_a_new_prompt(tiny_lm, monkeypatch):
    pytest.importorskip("ipywidgets")
    calls = counting_forward(tiny_lm, monkeypatch)
    explorer = dv.decoder_head_view(tiny_lm, "the cat sat on the mat today")
    assert explorer.error is None and bytes(explorer.image.value).startswith(b"\x89PNG") and len(calls) == 1
    assert "attn-explorer-decoder" in explorer.widget._dom_classes
    assert "fixed_scale" not in explorer.controls  # the scale selector replaces the checkbox
    assert explorer.controls["scale"].value == "log" and explorer.controls["head"].value == 0
    changes = {
        "layer": 2,
        "head": "all",
        "scale": "without_bos",
        "values": True,
        "panel_size": 3.0,
        "font_scale": 1.3,
        "prompt": "a dog ran",
    }
    for name, value in changes.items():
        before = bytes(explorer.image.value)
        explorer.controls[name].value = value
        assert explorer.error is None, (name, explorer.error)
        assert bytes(explorer.image.value) != before, f"moving {name!r} did not change the figure"
        assert explorer.render_ms is not None
    assert len(calls) == 2  # only the new prompt ran the model
    assert "4 tokens; layer 2 is GLOBAL" in explorer.explanation.value
    explorer.controls["prompt"].value = "the cat sat on the mat today"  # seen before: from the cache
    assert len(calls) == 2
    explorer.controls["prompt"].value = "  "
    assert explorer.error == "type a prompt." and "Not possible" in explorer.explanation.value


def test_explorer_saves_under_a_short_name(tiny_lm, tmp_path):
    pytest.importorskip("ipywidgets")
    explorer = dv.decoder_head_view(tiny_lm, "the cat sat on the mat today", save_dir=tmp_path)
    path = explorer.save("png")
    assert path.read_bytes().startswith(b"\x89PNG") and re.search(r"prompt-the-cat-sat-on_layer-0", path.name)


# ------------------------------------------------------------------------------------- the real model


def test_smoke_real_gemma3():
    """Gemma 3 270M: 18 layers of 4 heads, every sixth global; rows of the weights sum to 1 (float32)."""
    lm = ac.load_gemma3()
    view = dv.DecoderView(lm)
    prompt = "The capital of France is Paris, and the capital of Germany is"
    tokens, maps = view.attention(prompt)
    assert tokens[:4] == ["<bos>", "The", "capital", "of"] and maps.shape == (18, 4, 14, 14)
    # float32 softmax over <= 14 keys: each of the <= 14 additions rounds by at most 6e-8 relative.
    torch.testing.assert_close(maps.sum(-1), torch.ones(18, 4, 14), rtol=0, atol=1e-6)
    assert "layer 5 is GLOBAL (every earlier token, RoPE base 1e6)" in view.explain(prompt, 5)
    figure = view.render(prompt, 0, 2, "log")
    assert figure.get_suptitle() == "layer 0 (local, window 512) · head 2"


def test_explorer_dropdown_labels_follow_the_language(tiny_lm):
    # ipywidgets shows an option's label, so the Chinese edition needs Chinese labels; the values stay the same.
    pytest.importorskip("ipywidgets")
    ac.set_language("zh")
    try:
        explorer = dv.decoder_head_view(tiny_lm, "the cat sat on the mat today")
    finally:
        ac.set_language("en")
    assert explorer.controls["head"].options[0] == ("全部头", "all")
    assert explorer.controls["scale"].options == (
        ("固定 0–1", "fixed"),
        ("对数 1e-4–1", "log"),
        ("去掉 <bos>", "without_bos"),
    )
    english = dv.decoder_head_view(tiny_lm, "the cat sat on the mat today")
    assert [value for _, value in english.controls["scale"].options] == ["fixed", "log", "without_bos"]
    assert english.controls["head"].options[0] == ("all heads", "all")
