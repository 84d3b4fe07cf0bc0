"""attn_core.viz.kernel_schedule (notebook 12b's figure and explorer) agrees with the mask and the kernels' loops."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attn_core as ac
from attn_core.exercises.triton_kernel import causal_key_end
from attn_core.viz import kernel_schedule as schedule
from attn_core.viz import widgets

SHAPES = [(48, 64, 16), (64, 48, 16), (37, 37, 8), (16, 80, 32), (5, 3, 4)]


@pytest.mark.parametrize("q_len, k_len, block_size", SHAPES)
@pytest.mark.parametrize("is_causal", [True, False])
def test_status_matches_the_causal_mask(q_len, k_len, block_size, is_causal):
    visible = ac.causal_mask(q_len, k_len) if is_causal else torch.ones(q_len, k_len, dtype=torch.bool)  # (Lq, Lk)
    status = schedule.tile_status(q_len, k_len, block_size, is_causal)  # (Tq, Tk)
    for (qi, kj), code in np.ndenumerate(status):
        block = visible[qi * block_size : (qi + 1) * block_size, kj * block_size : (kj + 1) * block_size]
        partial_key_tile = (kj + 1) * block_size > k_len  # the kernels check the key bound there
        expected = (
            schedule.SKIPPED
            if not block.any()
            else schedule.FULL
            if block.all() and not partial_key_tile
            else schedule.MASKED
        )
        assert code == expected, (qi, kj)


@pytest.mark.parametrize("q_len, k_len, block_size", SHAPES)
def test_forward_programs_stop_where_the_kernel_loop_stops(q_len, k_len, block_size):
    for program in range(-(-q_len // block_size)):
        visits = schedule.program_visits("forward", program, q_len, k_len, block_size, True)
        end = causal_key_end(program, block_size, q_len, k_len)  # the kernel's keys_end
        assert [kj for _, kj in visits] == list(range(-(-end // block_size)))


@pytest.mark.parametrize("q_len, k_len, block_size", SHAPES)
def test_both_kernels_visit_the_same_tiles(q_len, k_len, block_size):
    by_rows = {pair for p in range(-(-q_len // block_size)) for pair in
               schedule.program_visits("forward", p, q_len, k_len, block_size, True)}  # fmt: skip
    by_columns = {pair for p in range(-(-k_len // block_size)) for pair in
                  schedule.program_visits("dK/dV", p, q_len, k_len, block_size, True)}  # fmt: skip
    assert by_rows == by_columns


def test_explanations_and_errors():
    assert "visits key tiles 0–2: 2 without a mask, 1 with one; 1 skipped" in schedule.explain_schedule()
    assert "sees no key" in schedule.explain_schedule(program=0, q_len=48, k_len=16)
    assert "visits query tiles 0–2" in schedule.explain_schedule(kernel="dK/dV", program=1)
    with pytest.raises(ValueError, match="program 9 does not exist"):
        schedule.explain_schedule(program=9)
    with pytest.raises(ValueError, match="kernel must be one of"):
        schedule.program_visits("dQ", 0, 8, 8, 8, True)
    with pytest.raises(ValueError, match=">= 1"):
        schedule.tile_status(0, 8, 8, True)


def test_explorer_renders_and_reports_impossible_settings():
    explorer = schedule.schedule_explorer()
    assert isinstance(explorer, widgets.Explorer) and explorer.error is None and explorer.figure is not None
    explorer.controls["program"].value = 15  # 48 queries in tiles of 16: programs 0..2
    assert explorer.error is not None and "does not exist" in explorer.error
    explorer.controls["kernel"].value = "dK/dV"
    explorer.controls["program"].value = 3
    assert explorer.error is None and "keys 48–63" in explorer.explanation.value


def test_explorer_kernel_names_in_the_notebooks_language():
    """zh/12b showed the dropdown's "forward" in English: the labels are localized, the values stay."""
    ac.set_language("zh")
    try:
        explorer = schedule.schedule_explorer()
        assert explorer.controls["kernel"].options == (("前向", "forward"), ("dK/dV", "dK/dV"))
        explorer.controls["kernel"].value = "dK/dV"
        assert explorer.error is None and "需要掩码" in explorer.explanation.value
    finally:
        ac.set_language("en")
    assert schedule.schedule_explorer().controls["kernel"].options[0] == ("forward", "forward")


def test_partial_last_key_tile_is_masked_even_without_causal():
    status = schedule.tile_status(40, 40, 16, False)  # (3, 3): keys 32..39 of a 16-key tile
    assert (status[:, :2] == schedule.FULL).all() and (status[:, 2] == schedule.MASKED).all()
    assert "2 without a mask, 1 with one; 0 skipped" in schedule.explain_schedule(q_len=40, k_len=40, is_causal=False)
