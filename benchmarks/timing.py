"""Timing shared by the benchmark scripts: medians, taken round-robin.

Every round runs each contender once, in turn, so a burst of load from another process hits
all of them alike and the ratios stay honest on a shared 2-core machine.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def round_robin_medians(
    fns: dict[str, Callable[[], object]], rounds: int, warmup: int = 2, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    """Median seconds of each fn; every round runs each fn once, in turn.

    ``clock=time.process_time`` measures this process's CPU time instead of wall time (on a
    shared machine CPU time is what the code costs; wall time is what a user waits).
    """
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = clock()
            fn()
            times[name].append(clock() - start)
    return {name: statistics.median(t) for name, t in times.items()}
