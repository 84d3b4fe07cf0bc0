"""Notebook 11's sampling explorer (attn_core/viz/sampling.py): the distribution it draws is generate's, its line
counts what is left, its bars mark what was cut, bad settings are clear errors, and the Chinese edition is Chinese."""

from __future__ import annotations

import math

import pytest
import torch

import attn_core as ac
from attn_core.models.generation import next_token_distribution
from attn_core.viz import sampling as sv
from attn_core.viz.textpaths import text_items

LOGITS = torch.randn(300, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3  # (V,)


@pytest.mark.parametrize(
    "settings, options",
    [
        (dict(), dict()),
        (dict(temperature=0.5), dict(temperature=0.5)),
        (dict(top_k=7), dict(top_k=7)),
        (dict(top_p=0.6, temperature=2.0), dict(top_p=0.6, temperature=2.0)),
        (dict(top_k=0, top_p=1.0), dict()),  # 0 and 1 mean off
    ],
)
def test_the_distribution_is_the_one_generate_samples_from(settings, options):
    torch.testing.assert_close(
        sv.sampling_distribution(LOGITS, **settings),
        next_token_distribution(LOGITS[None], **options)[0],
        rtol=0,
        atol=0,
    )


@pytest.mark.parametrize("temperature", [0.1, 1.0, 5.0])
@pytest.mark.parametrize("top_k", [0, 1, 7, 299, 300, 500])
@pytest.mark.parametrize("top_p", [0.05, 0.5, 0.9, 1.0])
def test_the_explorers_sorted_fast_path_is_the_same_distribution(temperature, top_k, top_p):
    settings = dict(temperature=temperature, top_k=top_k, top_p=top_p)
    ordered, order = LOGITS.sort(descending=True)  # (V,), (V,)
    expected = sv.sampling_distribution(LOGITS, **settings)[order]  # (V,) in the same order
    # float64 sums over 300 terms in another order: a few ulps (eps 2.2e-16 x log2(300) levels ~ 2e-15)
    torch.testing.assert_close(sv.sorted_distribution(ordered, **settings), expected, rtol=4e-15, atol=1e-300)


def test_ties_at_the_cut_are_kept_as_generate_keeps_them():
    tied = torch.tensor([3.0, 2.0, 2.0, 2.0, 1.0, 0.0], dtype=torch.float64)  # (V,), already sorted
    for settings in (dict(top_k=2), dict(top_p=0.6)):
        fast, slow = sv.sorted_distribution(tied, **settings), sv.sampling_distribution(tied, **settings)
        torch.testing.assert_close(fast, slow, rtol=4e-15, atol=0)
        assert int((fast > 0).sum()) == 4  # the three tied tokens all stay


def test_the_line_counts_what_is_left():
    assert sv.explain_sampling(LOGITS, top_k=5).startswith("5 of 300 tokens can be drawn")
    flat = sv.explain_sampling(torch.zeros(256))  # uniform: 8 bits, as uncertain as 256 tokens
    assert "entropy 8.00 bits" in flat and "among 256 tokens" in flat
    top = sv.sampling_distribution(LOGITS, temperature=0.1).max()
    assert f"p = {float(top):.2f}" in sv.explain_sampling(LOGITS, temperature=0.1) and float(top) > 0.5


def test_cut_tokens_are_marked_and_kept_ones_are_not():
    fig = sv.render_sampling(LOGITS, top_k=4, shown=10)  # every string drawn as glyph outlines: read text_items
    texts = [label.text for role, label, _ in text_items(fig) if role in ("cut", "value")]
    assert texts.count("cut") == 6 and len(texts) == 10  # 4 kept (their values printed), 6 cut
    assert fig.dpi >= 110 and min(label.size for _, label, _ in text_items(fig)) >= 9
    untouched = sv.render_sampling(LOGITS, shown=10, values=False)
    assert [label for role, label, _ in text_items(untouched) if role in ("cut", "value")] == []


def test_bar_names_follow_the_temperature_one_order():
    names = [f"token {i}" for i in LOGITS.topk(5).indices.tolist()]
    fig = sv.render_sampling(LOGITS, names, shown=5, temperature=3.0, top_p=0.2)
    assert [label.text for role, label, _ in text_items(fig) if role == "ytick"] == names


@pytest.mark.parametrize(
    "logits, settings, message",
    [
        (LOGITS, dict(temperature=0.0), "temperature must be > 0"),
        (LOGITS, dict(top_k=-1), "top_k must be an int >= 0"),
        (LOGITS, dict(top_k=True), "top_k must be an int >= 0"),
        (LOGITS, dict(top_p=0.0), r"top_p must lie in \(0, 1\]"),
        (LOGITS, dict(shown=0), "shown must be a positive int"),
        (LOGITS[None], dict(), r"logits must be one next-token vector \(V,\).*got \(1, 300\)"),
    ],
)
def test_bad_settings_are_clear_errors(logits, settings, message):
    with pytest.raises(ValueError, match=message):
        sv.render_sampling(logits, **settings)


def test_unknown_settings_name_the_known_ones():
    with pytest.raises(TypeError, match="top_p"):
        sv.sampling_distribution(LOGITS, nucleus=0.9)


def test_the_explorer_redraws_when_a_slider_moves():
    explorer = sv.sampling_explorer(LOGITS, decode=lambda i: f" w{i}\n")
    assert explorer.error is None and "300 of 300 tokens" in explorer.explanation.value
    first = explorer.image.value
    explorer.controls["top_k"].value = 3
    assert explorer.image.value != first and explorer.explanation.value.startswith("3 of 300 tokens")
    assert explorer.names[0] == f" w{int(LOGITS.argmax())}\\n"  # repr: a space and a newline stay visible
    for settings in (dict(top_p=0.3), dict(temperature=2.0, top_k=9)):
        assert explorer.explain(**settings) == sv.explain_sampling(LOGITS, **settings)
    assert "entropy 0.00 bits" in explorer.explain(top_k=1)
    assert math.isclose(10 ** explorer.controls["temperature"].max, 5.0)  # a log slider: 0.1 .. 5


def test_chinese_labels_and_line():
    ac.set_language("zh")
    try:
        explorer = sv.sampling_explorer(LOGITS, top_k=3)
        assert explorer.explanation.value.startswith("300 个词元中有 3 个可能被抽到")
        assert explorer.explain(top_k=1).endswith("熵 0.00 比特（相当于在 1 个词元中均匀地选一个）。")
        assert explorer.controls["top_k"].description == "top-k（0：关闭）"
        fig = sv.render_sampling(LOGITS, top_k=3, shown=5)
        assert "被截掉" in [label.text for role, label, _ in text_items(fig) if role == "cut"]
    finally:
        ac.set_language("en")
