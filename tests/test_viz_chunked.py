"""Notebook 11c's chunked-mask explorer (attn_core/viz/chunked.py): what it draws, what its line says, its guards,
and its Chinese."""

import pytest
import torch

import attn_core as ac
from attn_core import i18n
from attn_core.viz import chunked
from attn_core.viz.textpaths import text_items


def test_the_three_masks_are_the_library_masks():
    masks = list(chunked.masks(10, 4, 3).values())
    assert torch.equal(masks[0], ac.causal_mask(10))
    assert torch.equal(masks[1], ac.sliding_window_mask(10, 3))
    assert torch.equal(masks[2], ac.chunked_mask(10, 4))


def test_render_titles_count_the_keys_the_query_reads():
    figure = chunked.render_chunked_masks(seq_len=16, chunk_size=4, window=4, query=9)
    # glyph-path text (viz.textpaths): each panel's title is two lines, the name then the count
    titles = [label.text for role, label, _ in text_items(figure) if role == "title" and "reads" in label.text]
    assert ["reads 10 keys" in titles[0], "reads 4 keys" in titles[1], "reads 2 keys" in titles[2]] == [True] * 3


def test_the_line_names_the_keys_of_each_rule():
    line = chunked.explain_chunked_masks(seq_len=16, chunk_size=4, window=4, query=8)
    assert "keys 0–8 (9)" in line and "keys 5–8 (4)" in line and "keys 8–8 (1)" in line  # a chunk's first query


@pytest.mark.parametrize(
    "bad, message",
    [(dict(seq_len=0), "seq_len must be an int >= 1"), (dict(chunk_size=2.5), "chunk_size"), (dict(query=16), "query")],
)
def test_impossible_settings_raise_a_clear_value_error(bad, message):
    with pytest.raises(ValueError, match=message):
        chunked.render_chunked_masks(**bad)


def test_every_label_and_line_has_chinese():
    for text in [
        chunked.explain_chunked_masks(query=3),
        "query 3 reads 4 keys",
        "sliding window W = 4",
        "chunked C = 4",
        "full causal",
        "key position",
        "query factor",
        "query must be a position 0 .. seq_len - 1 = 15, got 16.",
        "NoPE query temperature 1 + attn_scale · log(1 + floor((pos + 1) / floor_scale))",
    ]:
        assert i18n.translation(text) is not None, text


def test_the_explorer_follows_the_sequence_length_and_stores_a_fallback():
    explorer = chunked.chunked_explorer()
    explorer.controls["seq_len"].value = 6
    assert explorer.controls["query"].max == 5 and explorer.controls["query"].value <= 5
    assert explorer.error is None
    assert "image/png" in explorer.fallback_bundle()


def test_nope_plot_draws_one_step_line_per_setting():
    positions = torch.arange(0, 20)
    figure = chunked.plot_nope_temperature(
        positions,
        {"floor_scale 8192, attn_scale 0.1 (released)": torch.ones(20), "query factor": torch.full((20,), 2.0)},
    )
    assert len(figure.axes[0].get_lines()) == 2
