"""ac.triton_attention under Triton's interpreter (TRITON_INTERPRET=1, CPU): seconds per call.

The interpreter runs every program of the grid one after another with NumPy, so its cost is about
(number of programs) x (key tiles each visits) x (NumPy overhead per block operation), nearly independent of the
tile's size: bigger tiles mean fewer, equally cheap steps. This measures it for the forward alone and for forward
+ backward (three more kernels), at the sizes the tests and notebook 12b use, for block sizes 16 to 128, so a test
or a notebook cell can be sized from a number instead of a guess. These are not GPU timings: on a GPU the same
kernels are compiled, and the grid runs in parallel.

Run: ``python benchmarks/bench_triton_interpreter.py [--json data/triton_interpreter.json]`` (72 s of CPU time,
measured; 3 min 12 s of wall time on two cores shared with other jobs). The medians of 3 calls are printed (and
written as JSON when asked); run it on an idle machine: other load inflates every number. Under that load, the
forward at (1, 4, 2, 256, 64) took 7.5 s with tiles of 16 and 0.29 s with tiles of 64.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported (ac.triton_attention imports it)

import torch  # noqa: E402

import attn_core as ac  # noqa: E402

SHAPES = [  # (B, Hq, Hkv, L, D): a test's size, the notebook's GQA size, and a longer one
    (1, 2, 2, 40, 16),
    (1, 4, 2, 48, 16),
    (1, 4, 2, 256, 64),
]
BLOCKS = (16, 32, 64, 128)


def median_seconds(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(shape: tuple[int, ...], block_size: int) -> dict:
    batch, num_heads, num_kv_heads, length, head_dim = shape
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(batch, num_heads, length, head_dim, generator=generator)  # (B, Hq, L, D)
    k = torch.randn(batch, num_kv_heads, length, head_dim, generator=generator)  # (B, Hkv, L, D)
    v = torch.randn(batch, num_kv_heads, length, head_dim, generator=generator)  # (B, Hkv, L, D)

    def forward():
        ac.triton_attention(q, k, v, is_causal=True, block_size=block_size)

    def forward_backward():
        grads = [t.clone().requires_grad_() for t in (q, k, v)]
        ac.triton_attention(*grads, is_causal=True, block_size=block_size).sum().backward()

    forward()  # the interpreter's first call in a process also sets itself up
    return {"shape": list(shape), "block_size": block_size, "forward_s": median_seconds(forward),
            "forward_backward_s": median_seconds(forward_backward)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [measure(shape, block) for shape in SHAPES for block in BLOCKS if block <= max(16, shape[3] * 2)]
    print(f"{'(B, Hq, Hkv, L, D)':<22} {'block':>5} {'forward s':>10} {'fwd+bwd s':>10}")
    for row in rows:
        shape, block = str(tuple(row["shape"])), row["block_size"]
        print(f"{shape:<22} {block:>5} {row['forward_s']:>10.3f} {row['forward_backward_s']:>10.3f}")
    if args.json:
        meta = {
            "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
        }
        with open(args.json, "w") as handle:
            json.dump({"meta": meta, "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
