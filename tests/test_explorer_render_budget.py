"""Every explorer's move stays within the series' render budget (issue #33's explorer speed), in process CPU time.

A move is what JupyterLab runs when a control changes: ``render`` + PNG + the explanation line
(``benchmarks/bench_explorers.py`` lists one move per explorer). The budget is 50 ms per move on a quiet core.
The test machine is shared and its speed unknown, so the bound is relative, measured in the same process and the
same interleaved rounds: a move may cost at most BUDGET_MS / REFERENCE_MS times the reference move, 01's single
8×8 map, whose quiet cost is REFERENCE_MS (README's explorer table: 12–14 ms, the upper value taken so the bound
is the stricter one). Load from other processes inflates both alike (CPU time, interleaved rounds: measured
1.4–1.6× for every explorer at load 11 on 2 cores), so the ratio holds where an absolute time would flake.
Before this change 12d's chunk explorer took ~20× the reference, 11's and 09's ~10×, 12b's ~5×.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_explorers.py"
BUDGET_MS = 50.0  # the series' goal per move
REFERENCE_MS = 14.0  # 01's single map on a quiet core (README: 12 and 14 ms in two runs)
MAX_RATIO = BUDGET_MS / REFERENCE_MS  # 3.57
REFERENCE = "temperature (01): 1 map, L=8"
ROUNDS = 7  # medians of 7 interleaved rounds (2 warm-up rounds first): a GC pause in one round does not count
NOTEBOOK_DEFINED = ("(12c)", "(13)", "(13b)")  # explorers written in a notebook: timed by the benchmark only


def _bench():
    spec = importlib.util.spec_from_file_location("bench_explorers", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_explorers", module)
    spec.loader.exec_module(module)
    return module


BENCH_MODULE = _bench()
VIEWS = [view for view, *_ in BENCH_MODULE.CASES if view != REFERENCE and not any(t in view for t in NOTEBOOK_DEFINED)]


@pytest.fixture(scope="module")
def ratios() -> dict[str, float]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the benchmark: the explorers' own tensors are tiny
    try:
        moves = BENCH_MODULE.build_moves({*VIEWS, REFERENCE})
        times = BENCH_MODULE.cpu_per_move(moves, ROUNDS)
    finally:
        torch.set_num_threads(threads)
    reference = statistics.median(times[REFERENCE])
    return {view: statistics.median(t) / reference for view, t in times.items() if view != REFERENCE}


def test_every_explorer_of_attn_core_is_timed():
    assert len(VIEWS) >= 16  # 02-12g's explorers (06b twice), all but the reference


@pytest.mark.parametrize("view", VIEWS)
def test_explorer_move_is_within_the_budget(ratios, view):
    ratio = ratios[view]
    assert ratio <= MAX_RATIO, (
        f"{view}: a move costs {ratio:.2f}× the single map, over {BUDGET_MS:.0f} ms ≈ {MAX_RATIO:.2f}× "
        f"(≈ {ratio * REFERENCE_MS:.0f} ms on a quiet core)"
    )
