"""Forward + backward of tiled attention against the naive kernel and torch's fused kernel.

For B=1, 8 heads, D=64, float32, L=4096, causal and not, one training step of attention
(``out = attention(q, k, v)`` then ``torch.autograd.grad(out, (q, k, v), dO)``):

- time (median, round-robin: one step of each kernel per round, so a burst of load from other
  processes hits all alike) of (a) ``ac.scaled_dot_product_attention``, the naive kernel whose
  autograd graph keeps the (L, L) weights, (b) ``ac.tiled_attention`` with its hand-written
  FlashAttention-2 backward (key tiles in the outer loop, ``attn_core/flash/tiled_backward.py``),
  (c) ``F.scaled_dot_product_attention`` (torch's fused CPU kernel, forward and backward); the
  ratios of (a) and (b) to (c). The key-outer loop (since 2026-11-27) runs as fast as the
  query-outer one it replaced: CPU time, 1 thread, L=4096, same process, round-robin, 5 rounds:
  0.985x (no mask) and 0.981x (causal) of the old loop, peak memory the same within 1 MiB.
- peak extra memory of one step, each configuration in a fresh process (see ``measure_peak``).

Targets (issue #14): tiled forward+backward <= 3x F.sdpa's; tiled peak extra memory <= 96 MiB
(the naive kernel's weights alone are 8·4096²·4 B = 512 MiB).

How memory is measured, and why: torch's CPU tensors come from malloc, which tracemalloc does not
see, and torch.profiler's ``profile_memory`` counts only what torch's allocator hands out (not
BLAS/OpenMP buffers, not fragmentation). What the operating system has to provide is the resident
set, so the peak is the high-water mark of the RSS (``ru_maxrss``) during the step minus the
high-water mark before it, in a fresh process. It includes the step's outputs: the attention output
(8 MiB here), the three gradients (24 MiB) and, for the naive kernel, everything autograd keeps.

``--cpu-time`` times with the process's CPU time instead of wall time: on a shared machine that
is what the code costs (with 2 threads it also counts threads spinning while they wait).
``--lengths`` prints the peak-memory curve at L = 512 ... 4096 (for a plot), ``--csv`` prints it as
CSV. Run: ``python benchmarks/bench_tiled_backward.py [--threads N] [--lengths [--csv]]`` (about 2
minutes on 2 cores, ~2.5 GiB at the peak; ``--lengths`` adds about 2 minutes).

On a busy machine set ``OMP_WAIT_POLICY=PASSIVE`` or use ``--threads 1``. The tiled kernels run
~10 small torch ops per tile, each an OpenMP parallel region whose threads spin while they wait
for one another; when other jobs hold the cores, a spinning thread burns the time slice its
partner needs. Measured at L=2048 with 2 threads and a load average of 9 on 2 cores (one
forward+backward): tiled 13.7 s, F.sdpa 1.5 s (one parallel region per call) by default; with
``OMP_WAIT_POLICY=PASSIVE`` tiled 2.5 s, F.sdpa 1.5 s; with 1 thread 1.17 s and 1.02 s.
The header prints the policy in effect.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from timing import round_robin_medians  # benchmarks/timing.py (scripts run from their folder)

import attn_core as ac

BATCH, NUM_HEADS, HEAD_DIM = 1, 8, 64
LENGTH = 4096
CURVE_LENGTHS = (512, 1024, 2048, 3072, 4096)
KERNELS = ("naive", "tiled", "torch")
MiB = 1024 * 1024
TIME_TARGET, MEMORY_TARGET_MIB = 3.0, 96.0


def make_inputs(length: int) -> tuple[torch.Tensor, ...]:
    """q, k, v (B, H, L, D) requiring grad, and the upstream gradient dO (B, H, L, D)."""
    generator = torch.Generator().manual_seed(0)
    q, k, v, grad_out = (torch.randn(BATCH, NUM_HEADS, length, HEAD_DIM, generator=generator) for _ in range(4))
    return q.requires_grad_(True), k.requires_grad_(True), v.requires_grad_(True), grad_out


def attention_fn(name: str, is_causal: bool) -> Callable[..., torch.Tensor]:
    """The forward being measured, returning the output (B, H, L, D) only."""
    if name == "naive":
        return lambda q, k, v: ac.scaled_dot_product_attention(q, k, v, is_causal=is_causal)[0]
    if name == "tiled":
        return lambda q, k, v: ac.tiled_attention(q, k, v, is_causal=is_causal)
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


def training_step(name: str, is_causal: bool, q, k, v, grad_out) -> tuple[torch.Tensor, ...]:
    """Forward and backward: the output and dq, dk, dv (returned, not accumulated into .grad)."""
    out = attention_fn(name, is_causal)(q, k, v)  # (B, H, L, D)
    return (out, *torch.autograd.grad(out, (q, k, v), grad_out))


# --------------------------------------------------------------------------- memory


def current_rss_kib() -> int:
    """Resident set size now (the ``VmRSS`` line of /proc/self/status), KiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def peak_rss_kib() -> int:
    """High-water mark of the resident set size, KiB (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def measure_peak_in_this_process(kernel: str, length: int, is_causal: bool, threads: int) -> dict:
    """Child-process side of ``measure_peak``: one training step, RSS high-water mark before and after.

    1. torch and attn_core are imported; 2. warm-up: the same step at L=256 (code pages, the
    OpenMP pool and BLAS state become resident); 3. glibc's free lists are trimmed, so freed
    warm-up memory the step could reuse without growing the RSS goes back to the OS; 4. the
    inputs are allocated, setting a new high-water mark: the baseline is then the current RSS
    (``baseline_slack_mib`` reports any gap); 5. the step runs once, its results kept alive
    until the high-water mark is read. ru_maxrss also carries the parent's high-water mark at
    exec time, which is why the parent measures before it allocates anything large.
    """
    torch.set_num_threads(threads)
    training_step(kernel, is_causal, *make_inputs(256))
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    inputs = make_inputs(length)
    baseline_peak, baseline_rss = peak_rss_kib(), current_rss_kib()
    results = training_step(kernel, is_causal, *inputs)
    after_peak = peak_rss_kib()
    del results
    return {
        "extra_mib": (after_peak - baseline_peak) / 1024,
        "baseline_slack_mib": (baseline_peak - baseline_rss) / 1024,
    }


def measure_peak(kernel: str, length: int, is_causal: bool, threads: int) -> dict:
    """Peak extra memory (MiB) of one forward+backward step, measured in a fresh Python process."""
    command = [sys.executable, __file__, "--measure-peak", json.dumps([kernel, length, is_causal, threads])]
    completed = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def outputs_mib(length: int) -> float:
    """The step's unavoidable results: the output and three gradients, each (B, H, L, D) float32."""
    return 4 * BATCH * NUM_HEADS * length * HEAD_DIM * 4 / MiB


# --------------------------------------------------------------------------- report


def ok(met: bool) -> str:
    return "met" if met else "NOT MET"


def print_curve(threads: int, as_csv: bool) -> None:
    """Peak extra memory of one forward+backward step against L, every kernel, causal and not."""
    rows = [
        (length, is_causal, kernel, measure_peak(kernel, length, is_causal, threads)["extra_mib"])
        for length in CURVE_LENGTHS
        for is_causal in (False, True)
        for kernel in KERNELS
    ]
    if as_csv:
        print("length,causal,kernel,peak_extra_mib,outputs_mib")
        for length, is_causal, kernel, mib in rows:
            print(f"{length},{int(is_causal)},{kernel},{mib:.1f},{outputs_mib(length):.1f}")
        return
    print("\n## Peak extra memory (MiB) of forward+backward against L\n")
    print("| L | causal | naive | tiled | F.sdpa | outputs + grads |")
    print("|---:|:---:|---:|---:|---:|---:|")
    by_key = {(length, is_causal, kernel): mib for length, is_causal, kernel, mib in rows}
    for length in CURVE_LENGTHS:
        for is_causal in (False, True):
            mib = " | ".join(f"{by_key[(length, is_causal, kernel)]:.1f}" for kernel in KERNELS)
            print(f"| {length} | {'yes' if is_causal else 'no'} | {mib} | {outputs_mib(length):.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch intra-op threads")
    parser.add_argument("--lengths", action="store_true", help=f"peak memory curve at L = {CURVE_LENGTHS}")
    parser.add_argument("--csv", action="store_true", help="print the --lengths curve as CSV (and nothing else)")
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds (medians are taken)")
    parser.add_argument(
        "--cpu-time", action="store_true", help="time with this process's CPU time (steadier on a busy machine)"
    )
    parser.add_argument("--measure-peak", help=argparse.SUPPRESS)  # child-process mode, see measure_peak
    args = parser.parse_args()
    if args.measure_peak:
        kernel, length, is_causal, threads = json.loads(args.measure_peak)
        print(json.dumps(measure_peak_in_this_process(kernel, length, is_causal, threads)))
        return
    if args.csv:
        print_curve(args.threads, as_csv=True)
        return

    torch.set_num_threads(args.threads)
    print("# Tiled attention, forward + backward")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; python {platform.python_version()}; "
        f"torch {torch.__version__}; torch threads {torch.get_num_threads()}; "
        f"tiled block_size {ac.tiled_attention.__kwdefaults__['block_size']}; "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}"
    )
    clock_name = "CPU (this process)" if args.cpu_time else "wall"
    print(
        f"B={BATCH}, heads={NUM_HEADS}, L={LENGTH}, D={HEAD_DIM}, float32; {clock_name} times, medians of {args.rounds}"
    )

    # Memory first, while this process is still small (a child inherits its high-water mark).
    peaks = {
        (kernel, is_causal): measure_peak(kernel, LENGTH, is_causal, args.threads)
        for is_causal in (False, True)
        for kernel in KERNELS
    }
    if args.lengths:
        print_curve(args.threads, as_csv=False)
    times = {}
    for is_causal in (False, True):
        inputs = make_inputs(LENGTH)
        fns = {name: functools.partial(training_step, name, is_causal, *inputs) for name in KERNELS}
        clock = time.process_time if args.cpu_time else time.perf_counter
        times[is_causal] = round_robin_medians(fns, rounds=args.rounds, warmup=1, clock=clock)

    print("\n| causal | naive (ms) | tiled (ms) | F.sdpa (ms) | naive / F | tiled / F |", end="")
    print(" peak extra MiB: naive | tiled | F.sdpa |")
    print("|:---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for is_causal in (False, True):
        t = times[is_causal]
        mib = [peaks[(kernel, is_causal)]["extra_mib"] for kernel in KERNELS]
        print(
            f"| {'yes' if is_causal else 'no'} | {t['naive'] * 1e3:.0f} | {t['tiled'] * 1e3:.0f} | "
            f"{t['torch'] * 1e3:.0f} | {t['naive'] / t['torch']:.2f}× | {t['tiled'] / t['torch']:.2f}× | "
            f"{mib[0]:.0f} | {mib[1]:.1f} | {mib[2]:.1f} |"
        )
    slack = max(0.0, *(peak["baseline_slack_mib"] for peak in peaks.values()))
    print(
        f"\n(outputs + gradients: {outputs_mib(LENGTH):.0f} MiB of every peak; largest baseline slack: {slack:.1f} MiB)"
    )

    print("\nTargets:")
    for is_causal in (False, True):
        causal = "causal" if is_causal else "unmasked"
        ratio = times[is_causal]["tiled"] / times[is_causal]["torch"]
        tiled = peaks[("tiled", is_causal)]["extra_mib"]
        met_time, met_memory = ok(ratio <= TIME_TARGET), ok(tiled <= MEMORY_TARGET_MIB)
        print(f"- {causal}: tiled / F.sdpa forward+backward = {ratio:.2f}× (target <= {TIME_TARGET:.0f}×) {met_time}")
        print(f"- {causal}: tiled peak extra {tiled:.1f} MiB (target <= {MEMORY_TARGET_MIB:.0f}) {met_memory}")


if __name__ == "__main__":
    main()
