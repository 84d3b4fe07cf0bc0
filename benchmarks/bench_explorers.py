"""Every explorer of the series, one real move each: the Python cost a learner waits for after moving a control.

A move sets one control of a live explorer (``explorer.controls[name].value = ...``), which runs exactly what the
widget runs in JupyterLab: ``render`` (figure + explanation line), the PNG encoding and the translation of the line.
Each move flips the control between two values, so every move redraws (the 09b and 11 explorers cache per setting
what a learner's repeated move would reuse; a flip back to a cached setting is a real move too, and the first row of
09b below clears its cache to show the uncached cost).

Time is **CPU time of this process** (``time.process_time``) with one torch thread, median over interleaved rounds
(every round moves each explorer once, in turn): the course machine is shared by other jobs, and CPU time is what the
render costs while wall time is what the other jobs add to it. Target: <= 50 ms per move (issue #33).

The explorers that live in a notebook (12c's sinks, 13's streaming mask, 13b's memory budget) are built from their
notebook's own cell. Not here: 10's head view and 11b's decoder view need pretrained weights, 12's training
explorer a training run (their notebooks time them).

Run: ``python benchmarks/bench_explorers.py [--rounds 20]`` (about a minute on a quiet core).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import attn_core as ac  # noqa: E402
from attn_core.i18n import localize  # noqa: E402
from attn_core.viz import (  # noqa: E402
    chunked,
    kda,
    kernel_schedule,
    lightning,
    linear_attention,
    mla,
    rope,
    rope_scaling,
    sampling,
    sparse,
    ssd,
    tiles,
    widgets,
)

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def notebook_explorer(notebook: str, variable: str):
    """The explorer ``variable`` made by its notebook's own cell (the one cell that defines it), run here."""
    cells = json.loads((NOTEBOOKS / notebook).read_text(encoding="utf-8"))["cells"]
    sources = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    (source,) = [s for s in sources if f"\n{variable} = " in s]
    namespace = {"torch": torch, "F": F, "math": math, "ac": ac, "widgets": widgets, "Figure": Figure}
    namespace.update(F64=torch.float64, localize=localize)
    exec(compile(source, f"{notebook}:{variable}", "exec"), namespace)  # noqa: S102  (exec: the repository's own notebook cell)
    return namespace[variable]


def sampling_on_gemma_vocab():
    vocab = torch.randn(262_144, generator=torch.Generator().manual_seed(0)) * 3  # (V,) costs as the model's do
    return sampling.sampling_explorer(vocab)


# (view, factory, control, the two values a move flips between)
CASES = [
    ("temperature (01): 1 map, L=8", widgets.temperature_explorer, "temperature", (1.0, 2.0)),
    ("heads (02): 8-head grid, L=8", lambda: widgets.heads_explorer(num_heads=8), "seed", (0, 1)),
    ("gqa (04): 8 heads / 2 kv heads", lambda: widgets.gqa_explorer(num_kv_heads=2), "seed", (0, 1)),
    ("masks (05): causal + dropout", lambda: widgets.mask_explorer(mask_kind="causal"), "dropout_p", (0.1, 0.2)),
    ("rope (06): position q", rope.rope_explorer, "q_position", (5, 6)),
    ("rope bands (06b): scheme", rope_scaling.band_explorer, "scaling", ("yarn", "llama3")),
    (
        "rope bands (06b): head_dim 128, context 8192",
        lambda: rope_scaling.band_explorer(head_dim=128, original_context=8192),
        "factor",
        (8.0, 16.0),
    ),
    ("tiles (08): step", tiles.tiles_explorer, "step", (5, 6)),
    ("mla cache (09): latent rank", mla.mla_cache_explorer, "kv_lora_rank", (512, 256)),
    ("sparse masks (09b): tokens", sparse.sparse_mask_explorer, "seq_len", (32, 48)),
    ("sampling (11): top-p, 262,144 tokens", sampling_on_gemma_vocab, "top_p", (0.9, 0.5)),
    ("chunked masks (11c): query", chunked.chunked_explorer, "query", (9, 10)),
    ("kernel schedule (12b): program", kernel_schedule.schedule_explorer, "program", (1, 2)),
    (
        "sinks (12c): sink logit",
        lambda: notebook_explorer("12c_attention_sinks_and_gates.ipynb", "sink_explorer"),
        "sink_logit",
        (1.0, 2.0),
    ),
    ("chunks (12d): chunk size", linear_attention.chunk_explorer, "chunk_size", (4, 8)),
    ("forgetting (12e): length", kda.forgetting_explorer, "length", (32, 33)),
    ("duality (12f): position", ssd.duality_explorer, "position", (12, 13)),
    ("blocks (12g): position", lightning.block_explorer, "position", (13, 14)),
    (
        "streaming (13): window",
        lambda: notebook_explorer("13_serving_caches.ipynb", "streaming_explorer"),
        "window",
        (4, 5),
    ),
    (
        "memory budget (13b): context",
        lambda: notebook_explorer("13b_serving_engine.ipynb", "memory_explorer"),
        "context",
        (8192, 16384),
    ),
]


def build_moves(names: set[str] | None = None) -> dict:
    """{view: a function making one move} for every case (or those named)."""
    moves = {}
    for view, factory, control, values in CASES:
        if names and view not in names:
            continue
        explorer = factory()
        slider = explorer.controls[control]
        slider.value = values[0]
        if explorer.error:
            raise RuntimeError(f"{view}: {control}={values[0]!r} is not possible: {explorer.error}")

        def move(slider=slider, values=values, explorer=explorer, view=view):
            slider.value = values[1] if slider.value == values[0] else values[0]
            if explorer.error:
                raise RuntimeError(f"{view}: a move gave {explorer.error}")

        moves[view] = move
    return moves


def cpu_per_move(moves: dict, rounds: int, warmup: int = 2) -> dict[str, list[float]]:
    """CPU seconds of every move, ``rounds`` interleaved rounds each (warm-up rounds not counted)."""
    times = {view: [] for view in moves}
    for round_ in range(warmup + rounds):
        for view, move in moves.items():
            start = time.process_time()
            move()
            if round_ >= warmup:
                times[view].append(time.process_time() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; python {platform.python_version()}; "
          f"torch {torch.__version__}, 1 thread; {args.rounds} interleaved rounds")  # fmt: skip
    moves = build_moves()

    def uncached_09b():  # a setting never seen: the four layers run again
        sparse._run_layers.cache_clear()
        moves["sparse masks (09b): tokens"]()

    moves = {"sparse masks (09b): tokens, layers re-run": uncached_09b, **moves}
    times = cpu_per_move(moves, args.rounds)
    print("\n| explorer view: one move | CPU median (ms) | CPU min–max (ms) |")
    print("|---|---:|---:|")
    for view, t in times.items():
        print(f"| {view} | {statistics.median(t) * 1e3:.0f} | {min(t) * 1e3:.0f}–{max(t) * 1e3:.0f} |")


if __name__ == "__main__":
    main()
