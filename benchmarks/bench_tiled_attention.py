"""Tiled (FlashAttention-style) attention against the naive kernel and torch's fused kernel.

For B=1, 8 heads, D=64, float32, L in {4096, 8192}, causal and not:

- time (median) of (a) ``ac.scaled_dot_product_attention``, the naive kernel that builds and
  returns the (L, L) weights, (b) ``ac.tiled_attention``, (c) ``F.scaled_dot_product_attention``,
  and the ratios of (a) and (b) to (c). The three are timed round-robin (one run of each per
  round) so that a burst of load from other processes hits all of them alike. The naive kernel
  at L=8192 is timed once: it needs ~4 GiB and several seconds.
- peak extra memory of one call, each configuration in a fresh process (see ``measure_peak``).
- the tiled kernel's causal / unmasked time ratio.

Targets (from the issue): tiled <= 1.5x F.sdpa at L = 4096 and 8192, causal and not; tiled
causal <= 0.6x tiled unmasked; tiled peak extra memory at L = 8192 <= 32 MiB (>= 100x less
than the naive kernel).

``--sweep`` adds the tiled/F.sdpa time ratio for block sizes 128/256/512 at 1 and 2 torch threads.

Run: ``python benchmarks/bench_tiled_attention.py [--threads N] [--sweep]`` (about 2 minutes on
2 cores, ~4.5 GiB of memory at the peak; ``--sweep`` adds about 2 minutes). Check ``uptime``
first: the tiled kernel runs ~10 small torch ops per tile, each a parallel region whose threads
wait for one another, so with 2 threads and another job on one of the cores it slows down
several times while F.sdpa (one parallel region per call) hardly moves. ``--threads 1`` gives
steadier ratios on a busy machine.
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
LENGTHS = (4096, 8192)
KERNELS = ("naive", "tiled", "torch")
MiB = 1024 * 1024


def make_inputs(length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return tuple(torch.randn(BATCH, NUM_HEADS, length, HEAD_DIM, generator=generator) for _ in range(3))  # (B, H, L, D)


def kernel_fn(name: str, is_causal: bool, block_size: int | None = None) -> Callable[..., object]:
    """The call being measured; each returns what its API returns (naive: output and weights)."""
    if name == "naive":
        return lambda q, k, v: ac.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    if name == "tiled":
        kwargs = {} if block_size is None else {"block_size": block_size}
        return lambda q, k, v: ac.tiled_attention(q, k, v, is_causal=is_causal, **kwargs)
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


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
    """Child-process side of ``measure_peak``: one call, RSS high-water mark before and after.

    The order makes the baseline exclude everything that is not the call's own memory:

    1. torch and attn_core are imported (library code and data are resident);
    2. warm-up: the same kernel on small inputs (L=512), so that the code pages it runs, the
       OpenMP thread pool and the BLAS state are already resident;
    3. glibc's free lists are trimmed, so freed warm-up memory that the measured call could
       reuse without growing the RSS is handed back to the OS;
    4. the inputs are allocated. They are larger than anything the warm-up held, so they set a
       new high-water mark: the baseline high-water mark is then the current RSS (checked).
    5. the call runs once and its result is kept alive until the high-water mark is read.

    extra = high-water after the call - high-water before. ru_maxrss also carries the parent's
    high-water mark at exec time (Linux copies it on exec), which is why the parent runs these
    before it allocates anything large; the check in 4 would report it otherwise.
    """
    torch.set_num_threads(threads)
    fn = kernel_fn(kernel, is_causal)
    small = make_inputs(512)
    with torch.inference_mode():
        fn(*small)
    del small
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    q, k, v = make_inputs(length)
    baseline_peak, baseline_rss = peak_rss_kib(), current_rss_kib()
    with torch.inference_mode():
        result = fn(q, k, v)
    after_peak = peak_rss_kib()
    del result
    return {
        "extra_mib": (after_peak - baseline_peak) / 1024,
        # > 0 means the high-water mark before the call was above the current RSS (set by an
        # earlier transient or inherited): then extra_mib undercounts by at most this much.
        "baseline_slack_mib": (baseline_peak - baseline_rss) / 1024,
    }


def measure_peak(kernel: str, length: int, is_causal: bool, threads: int) -> dict:
    """Peak extra memory (MiB) of one call, measured in a fresh Python process."""
    command = [sys.executable, __file__, "--measure-peak", json.dumps([kernel, length, is_causal, threads])]
    completed = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- time


def seconds_once(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def time_kernels(length: int, is_causal: bool) -> dict[str, float]:
    q, k, v = make_inputs(length)
    fns = {name: functools.partial(kernel_fn(name, is_causal), q, k, v) for name in KERNELS}
    with torch.inference_mode():
        if length <= 4096:
            return round_robin_medians(fns, rounds=5, warmup=1)
        naive = fns.pop("naive")
        medians = round_robin_medians(fns, rounds=3, warmup=1)
        medians["naive"] = seconds_once(naive)  # ~4 GiB and seconds per call: once, warm
        return medians


def sweep(threads_options: tuple[int, ...], block_sizes: tuple[int, ...]) -> None:
    print("\n## Sweep: tiled / F.sdpa time by block size and torch threads (medians of 3)\n")
    header = " | ".join(f"block {b}" for b in block_sizes)
    print(f"| threads | L | causal | F.sdpa (ms) | {header} |")
    print("|---:|---:|:---:|---:|" + "---:|" * len(block_sizes))
    initial_threads = torch.get_num_threads()
    for threads in threads_options:
        torch.set_num_threads(threads)
        for length in LENGTHS:
            q, k, v = make_inputs(length)
            for is_causal in (False, True):
                fns = {"torch": functools.partial(kernel_fn("torch", is_causal), q, k, v)}
                for block in block_sizes:
                    fns[block] = functools.partial(kernel_fn("tiled", is_causal, block), q, k, v)
                with torch.inference_mode():
                    medians = round_robin_medians(fns, rounds=3, warmup=1)
                ratios = " | ".join(f"{medians[b] / medians['torch']:.2f}×" for b in block_sizes)
                causal = "yes" if is_causal else "no"
                print(f"| {threads} | {length} | {causal} | {medians['torch'] * 1e3:.0f} | {ratios} |", flush=True)
    torch.set_num_threads(initial_threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch intra-op threads")
    parser.add_argument("--sweep", action="store_true", help="also sweep block sizes and thread counts")
    parser.add_argument("--measure-peak", help=argparse.SUPPRESS)  # child-process mode, see measure_peak
    args = parser.parse_args()
    if args.measure_peak:
        kernel, length, is_causal, threads = json.loads(args.measure_peak)
        print(json.dumps(measure_peak_in_this_process(kernel, length, is_causal, threads)))
        return

    torch.set_num_threads(args.threads)
    print("# Tiled attention benchmark")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; python {platform.python_version()}; "
        f"torch {torch.__version__}; torch threads {torch.get_num_threads()}; "
        f"tiled block_size {ac.tiled_attention.__kwdefaults__['block_size']}"
    )
    print(f"B={BATCH}, heads={NUM_HEADS}, D={HEAD_DIM}, float32; times are medians; ratios are to F.sdpa")

    # Memory first, while this process is still small (a child inherits its high-water mark).
    configs = [(length, is_causal) for length in LENGTHS for is_causal in (False, True)]
    peaks = {
        (kernel, length, is_causal): measure_peak(kernel, length, is_causal, args.threads)
        for length, is_causal in configs
        for kernel in KERNELS
    }
    times = {(length, is_causal): time_kernels(length, is_causal) for length, is_causal in configs}

    print("\n| L | causal | naive (ms) | tiled (ms) | F.sdpa (ms) | naive / F | tiled / F |", end="")
    print(" peak extra MiB: naive | tiled | F.sdpa |")
    print("|---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for length, is_causal in configs:
        t = times[(length, is_causal)]
        mib = [peaks[(kernel, length, is_causal)]["extra_mib"] for kernel in KERNELS]
        print(
            f"| {length} | {'yes' if is_causal else 'no'} | {t['naive'] * 1e3:.0f} | {t['tiled'] * 1e3:.0f} | "
            f"{t['torch'] * 1e3:.0f} | {t['naive'] / t['torch']:.2f}× | {t['tiled'] / t['torch']:.2f}× | "
            f"{mib[0]:.0f} | {mib[1]:.1f} | {mib[2]:.1f} |"
        )
    slack = max(0.0, *(peak["baseline_slack_mib"] for peak in peaks.values()))
    print(f"\n(largest baseline slack: {slack:.1f} MiB; peak extra memory may undercount by at most this)")

    print("\nTargets:")
    for length in LENGTHS:
        for is_causal in (False, True):
            ratio = times[(length, is_causal)]["tiled"] / times[(length, is_causal)]["torch"]
            causal = "causal" if is_causal else "unmasked"
            print(f"- L={length} {causal}: tiled / F.sdpa = {ratio:.2f}× (target <= 1.5×) {ok(ratio <= 1.5)}")
        causal_ratio = times[(length, True)]["tiled"] / times[(length, False)]["tiled"]
        print(f"- L={length}: tiled causal / unmasked = {causal_ratio:.2f} (target <= 0.6) {ok(causal_ratio <= 0.6)}")
    for is_causal in (False, True):
        tiled = peaks[("tiled", 8192, is_causal)]["extra_mib"]
        naive = peaks[("naive", 8192, is_causal)]["extra_mib"]
        print(
            f"- L=8192 {'causal' if is_causal else 'unmasked'}: tiled peak extra {tiled:.1f} MiB "
            f"(target <= 32) {ok(tiled <= 32)}, naive / tiled = {naive / tiled:.0f}× (target >= 100) "
            f"{ok(naive / tiled >= 100)}"
        )

    if args.sweep:
        sweep(threads_options=(1, 2), block_sizes=(128, 256, 512))


def ok(met: bool) -> str:
    return "met" if met else "NOT MET"


if __name__ == "__main__":
    main()
