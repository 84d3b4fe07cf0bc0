"""Browser latency of the explorers that test_lab_widgets.py does not open (issue #33's explorer speed).

One scratch notebook creates 06b's band explorer, 08's tile explorer, 09b's mask explorer, 11's sampling explorer
(on random logits: its cost is the vocabulary's size, not the model), 11c's chunked-mask explorer, 12b's schedule
explorer, 12d's chunk explorer, 12e's forgetting, 12f's duality and 12g's block explorers directly, and 12c's
sink explorer, 13's streaming-mask explorer and 13b's memory-budget explorer from their
notebooks' own cells (they are defined there), without running the rest of those notebooks. The test moves one
slider or dropdown on each, waits (bounded) for the redrawn image to settle and records the latency from the input
event to the settled image in the session's latency report (``ATTN_E2E_REPORT``).
Not here: 10's head view (MiniLM's weights) and 11b's decoder view (Gemma's) need pretrained models; 01-06, 09,
11b and 12 are timed by test_lab_widgets.py in their own notebooks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_lab_widgets import (
    assert_no_errors,
    change_dropdown,
    explanation,
    explorer,
    labelled,
    measured_change,
    open_notebook,
    poll,
    run_all,
    screenshot_on_failure,
    write_notebook,
)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def notebook_cell(notebook: str, variable: str) -> str:
    """The one code cell of ``notebook`` that creates ``variable`` (an explorer defined in the notebook)."""
    cells = json.loads((NOTEBOOKS / notebook).read_text(encoding="utf-8"))["cells"]
    (source,) = [
        "".join(c["source"]) for c in cells if c["cell_type"] == "code" and f"\n{variable} = " in "".join(c["source"])
    ]
    return source


# (explorer CSS name, the cell that shows it, the control to move: ("slider"|"dropdown", label, options to alternate))
EXPLORERS = [
    ("rope_bands", "rope_scaling.band_explorer()", ("dropdown", "head_dim", ("128", "64"))),
    ("tiles", "tiles.tiles_explorer()", ("slider", "step", None)),
    ("sparse_masks", "sparse.sparse_mask_explorer()", ("slider", "tokens", None)),
    ("kernel_schedule", "kernel_schedule.schedule_explorer()", ("slider", "program", None)),
    ("chunks", "linear_attention.chunk_explorer()", ("slider", "chunk size", None)),
    (
        "sampling",
        "sampling.sampling_explorer(torch.randn(32_000, generator=g) * 3)",
        ("slider", "top-k (0: off)", None),
    ),
    ("chunked-masks", "chunked.chunked_explorer()", ("slider", "query", None)),
    ("forgetting", "kda.forgetting_explorer()", ("slider", "sequence length", None)),
    ("duality", "ssd.duality_explorer()", ("slider", "query position", None)),
    ("blocks", "lightning.block_explorer()", ("slider", "query position", None)),
    ("sinks", notebook_cell("12c_attention_sinks_and_gates.ipynb", "sink_explorer"), ("slider", "sink logit", None)),
    ("streaming", notebook_cell("13_serving_caches.ipynb", "streaming_explorer"), ("slider", "window", None)),
    ("memory_budget", notebook_cell("13b_serving_engine.ipynb", "memory_explorer"), ("slider", "tokens", None)),
]
SETUP = (
    "import math\n"
    "import torch\n"
    "import torch.nn.functional as F\n"
    "from matplotlib.figure import Figure\n"
    "import attn_core as ac\n"
    "from attn_core.i18n import localize\n"
    "from attn_core.viz import chunked, kda, kernel_schedule, lightning, linear_attention, rope_scaling, sampling\n"
    "from attn_core.viz import sparse, ssd, tiles, widgets\n"
    "F64 = torch.float64  # what 12c's cell uses from the notebook's setup\n"
    "g = torch.Generator().manual_seed(0)"
)
REDRAW_TIMEOUT_S = 20  # one redraw is ~50 ms of Python; generous for a shared 2-core machine, still bounded
MOVES = 3  # per explorer: one move is one sample, and a busy machine makes single samples swing 5x


def step_slider(box, label: str, key: str) -> str:
    """test_lab_widgets.change_slider with the direction given: right, back left, right again, so every move stays
    a possible setting (12b's program slider reaches past the last program of the default lengths)."""
    slider = box.locator(".widget-slider:not(.mod-disabled)").filter(has=labelled(box, label)).first
    handle = slider.locator(".noUi-handle").first
    before, text = handle.get_attribute("aria-valuenow"), handle.get_attribute("aria-valuetext")
    handle.focus()
    handle.press(key)
    poll(lambda: handle.get_attribute("aria-valuenow") != before, 5, f"slider {label!r} did not move on {key}")
    return f"{label} {text}→{handle.get_attribute('aria-valuetext')}"


def test_later_explorers_redraw_in_the_browser(page, lab, latency_log, screenshot_dir):
    notebook = write_notebook(lab.notebooks / "e2e_explorer_latency.ipynb", SETUP, *(cell for _, cell, _ in EXPLORERS))
    with screenshot_on_failure(page, screenshot_dir, "explorer-latency"):
        open_notebook(page, lab, notebook)
        run_all(page)
        assert_no_errors(page)
        for name, _, (kind, label, options) in EXPLORERS:
            box = explorer(page, name)
            for move in range(MOVES):
                if kind == "slider":
                    key = ("ArrowRight", "ArrowLeft")[move % 2]
                    change = lambda box=box, label=label, key=key: step_slider(box, label, key)  # noqa: E731
                else:
                    option = options[move % len(options)]
                    change = lambda box=box, label=label, option=option: change_dropdown(page, box, label, option)  # noqa: E731
                what, timings = measured_change(page, box, change, REDRAW_TIMEOUT_S)
                text = explanation(box)
                assert not text.startswith("Not possible"), f"{name}: {what} gave an impossible setting: {text}"
                assert_no_errors(page)
                latency_log.append({"notebook": f"scratch: {name}", "explorer": name, "kind": kind, "change": what,
                                    **timings})  # fmt: skip


pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a measurement (README's table): the scheduled run
