"""Shared memory each ac.triton_attention kernel needs on an H100 (sm_90), from triton's compiler, without a GPU.

triton compiles for a named target down to machine code (cubin) on a CPU-only machine: no driver is needed until a
kernel is launched. The compiled kernel's metadata says how much shared memory one program uses, which decides
whether a tile size fits (an H100 lets one program use up to 227 KB; more raises triton's ``OutOfResources`` at
launch, and ``ac.triton_attention`` then halves ``block_size``). Notebook 12b quotes the D = 256 rows.

Run: ``python benchmarks/triton_shared_memory_sm90.py`` (needs the triton extra; do not set TRITON_INTERPRET).
Measured (triton 3.9.0, float16 inputs, causal, triton's default 4 warps and 3 stages), shared memory in KB:

    D    block   forward   dK/dV    dQ
    128   64       48        73     64
    128  128       96       162    128
    256   32       48        66     64
    256   64       96       137    128
    256  128      192       290    256

So at the default ``block_size=64`` every kernel fits for every allowed D, and D = 256 with tiles of 128 does not
(the backward's two kernels exceed 227 KB): ``ac.triton_attention`` falls back to 64 there. About
11 min of wall time on a loaded 2-core machine (the D = 256, block 128 kernels take most of it).
"""

from __future__ import annotations

import inspect
import os

if os.environ.get("TRITON_INTERPRET", "").strip().lower() in {"1", "true", "on", "yes"}:
    raise SystemExit("unset TRITON_INTERPRET: this script compiles the kernels instead of interpreting them")

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from attn_core.flash.kernels import flash_backward, flash_forward  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)  # H100
INTEGERS = ("num_heads", "group", "q_len", "k_len")
FLOAT32_POINTERS = ("Lse", "Delta", "GradK", "GradV")  # GradK/GradV: the float32 per-query-head buffers under GQA
KERNELS = {
    "forward": flash_forward._flash_forward_kernel,
    "dK/dV": flash_backward._grad_kv_kernel,
    "dQ": flash_backward._grad_q_kernel,
}


def shared_bytes(kernel, head_dim: int, block: int) -> int:
    constexprs = {"IS_CAUSAL": True, "BLOCK_M": block, "BLOCK_N": block, "HEAD_DIM": head_dim}
    signature = {
        name: "constexpr" if name in constexprs else "fp32" if name == "scale"
        else "i32" if name.startswith("stride") or name in INTEGERS
        else "*fp32" if name in FLOAT32_POINTERS else "*fp16"
        for name in inspect.signature(kernel.fn).parameters
    }  # fmt: skip
    compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constexprs), target=TARGET)
    return compiled.metadata.shared


def main() -> None:
    print(f"{'D':>4} {'block':>6} " + " ".join(f"{name:>8}" for name in KERNELS) + "   (KB of shared memory, sm_90)")
    for head_dim, block in ((128, 64), (128, 128), (256, 32), (256, 64), (256, 128)):
        sizes = [shared_bytes(kernel, head_dim, block) / 1024 for kernel in KERNELS.values()]
        print(f"{head_dim:>4} {block:>6} " + " ".join(f"{size:>8.0f}" for size in sizes), flush=True)


if __name__ == "__main__":
    main()
