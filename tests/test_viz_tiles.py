"""The tile explorer (notebook 08): the schedule visits every tile once and skips exactly the fully
masked ones, the online-softmax trace ends at the true max and normaliser, the figure draws the
step it is given, and the explorer reacts to its controls without tracebacks."""

from __future__ import annotations

import math

import ipywidgets
import numpy as np
import pytest
import torch

import attn_core as ac
from attn_core.viz import tiles as tw

SHAPES = [  # (q_len, k_len, block_q, block_k)
    (32, 32, 8, 8),
    (37, 37, 8, 16),  # odd length: ragged last tiles
    (5, 19, 2, 4),  # fewer queries than keys (decoding-like)
    (19, 5, 4, 2),  # more queries than keys: the first rows see no key under causal
    (7, 9, 16, 32),  # blocks larger than the sequence: one tile
    (6, 6, 1, 1),  # one score per tile
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("is_causal", [False, True])
def test_schedule_covers_every_tile_once_in_loop_order(shape, is_causal):
    q_len, k_len, block_q, block_k = shape
    schedule = tw.tile_schedule(q_len, k_len, block_q, block_k, is_causal)
    num_q, num_k = -(-q_len // block_q), -(-k_len // block_k)
    assert [(t.q_block, t.k_block) for t in schedule] == [(i, j) for i in range(num_q) for j in range(num_k)]
    assert [t.index for t in schedule] == list(range(len(schedule)))
    covered = torch.zeros(q_len, k_len, dtype=torch.int64)  # (Lq, Lk)
    for tile in schedule:
        covered[tile.q_start : tile.q_stop, tile.k_start : tile.k_stop] += 1
    assert (covered == 1).all(), "every score entry belongs to exactly one tile"
    if not is_causal:
        assert all(t.status == "computed" and not t.partial for t in schedule)


@pytest.mark.parametrize("shape", SHAPES)
def test_causal_skips_exactly_the_fully_masked_tiles(shape):
    """Compare with ac.causal_mask (bottom-right aligned) tile by tile."""
    q_len, k_len, block_q, block_k = shape
    mask = ac.causal_mask(q_len, k_len)  # (Lq, Lk) True = may attend
    for tile in tw.tile_schedule(q_len, k_len, block_q, block_k, is_causal=True):
        visible = mask[tile.q_start : tile.q_stop, tile.k_start : tile.k_stop]  # (bq, bk)
        assert (tile.status == "skipped") == (not visible.any()), tile
        assert tile.partial == (bool(visible.any()) and not bool(visible.all())), tile


def test_square_causal_skips_the_tiles_above_the_diagonal():
    schedule = tw.tile_schedule(64, 64, 16, 16, is_causal=True)
    skipped = {(t.q_block, t.k_block) for t in schedule if t.status == "skipped"}
    assert skipped == {(i, j) for i in range(4) for j in range(4) if j > i}
    assert [t.partial for t in schedule if t.status == "computed"].count(True) == 4  # the diagonal tiles


@pytest.mark.parametrize("bad", [dict(q_len=0), dict(block_k=0), dict(block_q=2.5)])
def test_schedule_rejects_impossible_sizes(bad):
    args = {"q_len": 8, "k_len": 8, "block_q": 2, "block_k": 2, **bad}
    with pytest.raises(ValueError, match="must be an int"):
        tw.tile_schedule(**args)


@pytest.mark.parametrize("length, block_k", [(16, 4), (37, 8), (10, 1), (5, 64)])
def test_trace_ends_at_the_true_max_and_normaliser(length, block_k):
    row = torch.randn(length, generator=torch.Generator().manual_seed(length), dtype=torch.float64) * 3  # (Lk,)
    trace = tw.online_softmax_trace(row, block_k)
    assert len(trace.running_max) == -(-length // block_k)
    assert trace.final_max == float(row.max())
    assert math.isclose(trace.final_sum, float(torch.exp(row - row.max()).sum()), rel_tol=1e-12)
    # The invariant after every block j: m_j and l_j describe exactly the keys seen so far.
    for j in range(len(trace.running_max)):
        seen = row[: (j + 1) * block_k]  # (seen,)
        assert float(trace.running_max[j]) == float(seen.max())
        assert math.isclose(float(trace.running_sum[j]), float(torch.exp(seen - seen.max()).sum()), rel_tol=1e-12)
    # Softmax from the final state equals torch's softmax.
    torch.testing.assert_close(torch.exp(row - trace.final_max) / trace.final_sum, torch.softmax(row, -1))


def test_trace_handles_masked_keys_and_rescale_factors():
    row = torch.tensor([-math.inf, -math.inf, 1.0, 0.0, 3.0, -math.inf])  # (6,) keys 0, 1 and 5 masked
    trace = tw.online_softmax_trace(row, 2)
    assert trace.running_max.tolist() == [-math.inf, 1.0, 3.0]
    assert trace.running_sum[0] == 0 and trace.rescale[0] == 1  # nothing visible yet: no NaN
    assert trace.rescale[1] == 0  # first visible block: the (empty) old state is dropped
    assert math.isclose(float(trace.rescale[2]), math.exp(1.0 - 3.0))
    assert math.isclose(trace.final_sum, math.exp(-2.0) + math.exp(-3.0) + 1.0)
    nothing = tw.online_softmax_trace(torch.full((4,), -math.inf), 3)
    assert nothing.final_max == -math.inf and nothing.final_sum == 0.0


def test_demo_scores_are_masked_with_attn_core_causal_mask():
    scores = tw.demo_scores(5, 9, is_causal=True, seed=1)  # (5, 9)
    assert torch.equal(torch.isfinite(scores), ac.causal_mask(5, 9))
    torch.testing.assert_close(scores[ac.causal_mask(5, 9)], tw.demo_scores(5, 9, seed=1)[ac.causal_mask(5, 9)])


def current_tile_patch(figure):
    return [patch for patch in figure.axes[0].patches if patch.get_gid() == "current-tile"]


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"step": 1, "is_causal": False},
        {"step": 4, "q_len": 37, "k_len": 100, "block_q": 8, "block_k": 16, "row": 36},
        {"step": 3, "q_len": 19, "k_len": 5, "block_q": 4, "block_k": 2, "row": 2},  # a row that sees no key
        {"step": 16, "values": True},
        {"step": 0},
    ],
)
def test_render_draws_the_step(params):
    """The tile image is tile_codes for this step, and the red frame sits on the step's tile."""
    p = {**tw.TILE_DEFAULTS, **params}
    figure = tw.render_tiles(**params)
    image = figure.axes[0].images[0]
    codes = np.asarray(image.get_array())
    expected = tw.tile_codes(p["step"], p["q_len"], p["k_len"], p["block_q"], p["block_k"], p["is_causal"])
    np.testing.assert_array_equal(codes, expected)
    schedule = tw.tile_schedule(p["q_len"], p["k_len"], p["block_q"], p["block_k"], p["is_causal"])
    done = [t for t in schedule[: p["step"]] if t.status == "computed"]
    assert (codes == tw.DONE).sum() + (codes == tw.CURRENT).sum() == sum(
        (t.q_stop - t.q_start) * (t.k_stop - t.k_start) for t in done
    )
    frames = current_tile_patch(figure)
    if p["step"] == 0:
        assert not frames and not (codes == tw.CURRENT).any()
        return
    (frame,) = frames
    tile = schedule[p["step"] - 1]
    left, right, bottom, top = image.get_extent()
    cell_w, cell_h = (right - left) / p["k_len"], (top - bottom) / p["q_len"]
    np.testing.assert_allclose(
        [frame.get_x(), frame.get_y(), frame.get_width(), frame.get_height()],
        [
            left + tile.k_start * cell_w,
            top - tile.q_stop * cell_h,
            (tile.k_stop - tile.k_start) * cell_w,
            (tile.q_stop - tile.q_start) * cell_h,
        ],
    )
    if tile.status == "computed":
        assert (codes[tile.q_start : tile.q_stop, tile.k_start : tile.k_stop] == tw.CURRENT).all()


def test_tile_codes_mark_skipped_tiles_from_the_start():
    codes = tw.tile_codes(0, 16, 16, 4, 4, True)  # (16, 16)
    skipped = ~ac.causal_mask(16, 16).reshape(4, 4, 4, 4).any(dim=(1, 3))  # (4, 4) fully masked tiles
    expected = skipped.repeat_interleave(4, 0).repeat_interleave(4, 1).numpy() * tw.SKIPPED  # (16, 16)
    np.testing.assert_array_equal(codes, expected)


def test_explanation_follows_the_row():
    text = tw.explain_tiles()  # default: step 6, tile (1, 1) on the diagonal, row 15
    assert text.startswith("step 6/16: query block 1 × key block 1")
    assert "running max 0.84 → 2.76, sum rescaled by exp(0.84−2.76)=0.15" in text
    assert "is skipped" in tw.explain_tiles(step=2)
    assert "has not started yet" in tw.explain_tiles(step=1, row=30)
    assert "is finished" in tw.explain_tiles(step=16, row=3)
    assert "saw no key at all" in tw.explain_tiles(step=10, q_len=19, k_len=5, block_q=4, block_k=2, row=2)
    assert tw.explain_tiles(step=0).startswith("step 0/16: nothing computed yet")


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"row": 32}, "row 32 is outside the sequence"),
        ({"step": 17}, "step 17 does not exist"),
        ({"block_k": 0}, "block_k must be an int"),
    ],
)
def test_impossible_settings_raise_value_errors(bad, message):
    with pytest.raises(ValueError, match=message):
        tw.render_tiles(**bad)


def test_unknown_parameter_is_rejected():
    with pytest.raises(TypeError, match="unknown tile explorer parameter"):
        tw.render_tiles(seq_len=8)


def test_explorer_builds_and_every_control_changes_the_picture():
    explorer = tw.tiles_explorer()
    assert explorer.error is None and bytes(explorer.image.value).startswith(b"\x89PNG")
    assert "attn-explorer-tiles" in explorer.widget._dom_classes
    changes = {  # "values" first: it prints numbers only once the row has been visited
        "values": True,
        "step": 3,
        "q_len": 48,
        "k_len": 64,
        "block_q": 16,
        "block_k": 4,
        "is_causal": False,
        "row": 20,
        "seed": 5,
        "panel_size": 3.5,
        "font_scale": 1.4,
    }
    assert set(changes) == set(explorer.controls)
    for name, value in changes.items():
        before = bytes(explorer.image.value)
        explorer.controls[name].value = value
        assert explorer.error is None, (name, explorer.error)
        assert bytes(explorer.image.value) != before, f"moving {name!r} did not change the figure"


def test_step_slider_and_play_follow_the_number_of_tiles():
    explorer = tw.tiles_explorer(step=16)
    step = explorer.controls["step"]
    assert step.max == explorer.play.max == 16 and step.value == 16
    explorer.controls["block_k"].value = 16  # 4 query blocks × 2 key blocks
    assert step.max == explorer.play.max == 8 and step.value == 8 and explorer.error is None
    assert explorer.explanation.value.startswith("step 8/8")
    explorer.controls["block_k"].value = 4  # 4 × 8: the maximum grows, the step stays
    assert step.max == 32 and step.value == 8
    assert isinstance(explorer.play, ipywidgets.Play)
    assert {(link.source[1], link.target[1]) for link in explorer.links} == {("value", "value"), ("max", "max")}
    assert explorer.widget.children[0].children == (explorer.play, step)


def test_row_outside_the_sequence_shows_a_message_not_a_traceback():
    explorer = tw.tiles_explorer()
    explorer.controls["row"].value = 100  # only 32 queries
    assert explorer.error is not None and "row 100 is outside the sequence" in explorer.error
    assert "Not possible" in explorer.explanation.value
    explorer.controls["q_len"].value = 128  # now row 100 exists
    assert explorer.error is None and "Not possible" not in explorer.explanation.value
    explorer.controls["k_len"].value = 128
    explorer.controls["step"].value = 1
    assert "row 100 lives in query block 12" in explorer.explanation.value


def test_keywords_set_where_controls_start():
    explorer = tw.tiles_explorer(is_causal=False, row=3, step=2, head_dim=4)
    assert explorer.controls["is_causal"].value is False and explorer.controls["row"].value == 3
    assert explorer.controls["step"].value == 2 and explorer.params()["head_dim"] == 4
    assert explorer.explanation.value.startswith("step 2/16: query block 0 × key block 1; row 3")


def test_figure_is_projector_sized_and_the_short_axis_gets_several_ticks():
    """8 queries in one block of 8 used to get a single tick "0"; now 0..8 (and key edges 0..100)."""
    from attn_core.viz.plotting import DPI
    from attn_core.viz.textpaths import text_items

    figure = tw.render_tiles(step=4, q_len=8, k_len=100, block_q=8, block_k=16, row=5)
    assert figure.dpi == DPI >= 110
    items = [label for _, label, _ in text_items(figure)]
    assert all(label.size >= 9 for label in items)
    image = figure.axes[0].images[0]
    left, right, bottom, top = image.get_extent()
    left_of_grid = sorted(label.text for label in items if label.x < left and label.rotation == 0)
    assert {"0", "2", "4", "6", "8"} <= set(left_of_grid)
    under_grid = {label.text for label in items if label.y < bottom and left <= label.x <= right}
    assert {"0", "16", "48", "100"} <= under_grid


def test_running_max_panel_explains_its_markers():
    """The crosses (each key block's own max) and the dots (running max m) are named in the panel."""
    from attn_core.viz.textpaths import text_items

    shown = {label.text for _, label, _ in text_items(tw.render_tiles(step=6))}
    assert {"running max m", "max of one key block"} <= shown


def test_printed_values_never_overlap_and_the_figure_says_when_they_are_hidden():
    """100 key blocks of one key: no room for numbers over the points; the axis label says they are hidden."""
    from attn_core.viz.textpaths import text_items

    narrow = tw.render_tiles(step=100, q_len=8, k_len=100, block_q=8, block_k=1, row=5, values=True)
    shown = [label.text for _, label, _ in text_items(narrow)]
    assert "key block (numbers hidden: blocks too narrow)" in shown
    assert not any(text.startswith("×") for text in shown)
    wide = [label.text for _, label, _ in text_items(tw.render_tiles(step=16, values=True))]
    assert "key block" in wide and "2.76" in wide  # 4 blocks: every running max is printed
