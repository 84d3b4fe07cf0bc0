"""Browser latency of the later notebooks' explorers (issue #33's explorer speed), without running their notebooks.

One scratch notebook creates 06b's band explorer, 09b's mask explorer, 12b's schedule explorer, 12d's chunk
explorer and 11's sampling explorer (on random logits: its cost is the vocabulary's size, not the model) directly;
the test moves one slider or dropdown on each, waits (bounded) for the redrawn image to settle and records the
latency from the input event to the settled image in the session's latency report (``ATTN_E2E_REPORT``).
11b's decoder view needs Gemma's weights and 12c's sink explorer lives in its notebook: not here.
"""

from __future__ import annotations

import pytest
from test_lab_widgets import (
    assert_no_errors,
    change_dropdown,
    change_slider,
    explanation,
    explorer,
    measured_change,
    open_notebook,
    run_all,
    screenshot_on_failure,
    write_notebook,
)

# (explorer CSS name, the cell that shows it, the control to move: ("slider"|"dropdown", label, option))
EXPLORERS = [
    ("rope_bands", "rope_scaling.band_explorer()", ("dropdown", "head_dim", "128")),
    ("sparse_masks", "sparse.sparse_mask_explorer()", ("slider", "tokens", None)),
    ("kernel_schedule", "kernel_schedule.schedule_explorer()", ("slider", "program", None)),
    ("chunks", "linear_attention.chunk_explorer()", ("slider", "chunk size", None)),
    (
        "sampling",
        "sampling.sampling_explorer(torch.randn(32_000, generator=g) * 3)",
        ("slider", "top-k (0: off)", None),
    ),
]
SETUP = (
    "import torch\n"
    "from attn_core.viz import kernel_schedule, linear_attention, rope_scaling, sampling, sparse\n"
    "g = torch.Generator().manual_seed(0)"
)
REDRAW_TIMEOUT_S = 20  # one redraw is ~50 ms of Python; generous for a shared 2-core machine, still bounded


def test_later_explorers_redraw_in_the_browser(page, lab, latency_log, screenshot_dir):
    notebook = write_notebook(lab.notebooks / "e2e_explorer_latency.ipynb", SETUP, *(cell for _, cell, _ in EXPLORERS))
    with screenshot_on_failure(page, screenshot_dir, "explorer-latency"):
        open_notebook(page, lab, notebook)
        run_all(page)
        assert_no_errors(page)
        for name, _, (kind, label, option) in EXPLORERS:
            box = explorer(page, name)
            if kind == "slider":
                change = lambda box=box, label=label: change_slider(page, box, label)  # noqa: E731
            else:
                change = lambda box=box, label=label, option=option: change_dropdown(page, box, label, option)  # noqa: E731
            what, timings = measured_change(page, box, change, REDRAW_TIMEOUT_S)
            text = explanation(box)
            assert not text.startswith("Not possible"), f"{name}: {what} gave an impossible setting: {text}"
            assert_no_errors(page)
            latency_log.append({"notebook": f"scratch: {name}", "explorer": name, "kind": kind, "change": what,
                                **timings})  # fmt: skip


pytestmark = pytest.mark.e2e
