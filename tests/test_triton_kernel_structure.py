"""The Triton kernels' structure, checked without a GPU: 64-bit offsets, exp2, masks only where needed, dK/dV grid.

- **Offsets.** ``program_id`` and integer arguments are int32; an offset such as ``batch·stride_b`` wraps past 2³¹
  elements unless it is formed in int64. Two checks: under the interpreter, every pointer addition of a forward and
  backward run adds int64 offsets (a spy on the interpreter's ``create_addptr``); and the Triton IR that triton's
  frontend builds for an H100 (sm_90; no GPU needed) has only ``i64`` offsets in ``tt.addptr``, and ``math.exp2``,
  never ``math.exp`` (log₂e folded into the scale).
- **Masks.** The (query tile, key tile) pairs each kernel computes with a mask are exactly the ones
  ``attn_core.viz.kernel_schedule`` draws as masked (the causal diagonal and a partial last key tile), and every other
  visited pair runs the unmasked code: spies on the kernels' per-tile helpers record which branch ran.
- **dK/dV grid.** Under GQA/MQA the dK/dV kernel runs one program per (key tile, batch, query head), not per kv head.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton (see test_triton_attention.py)


def _interpreter_triton() -> None:
    """If triton was imported before TRITON_INTERPRET was set, import its Python modules again under it."""
    language = sys.modules.get("triton.language")
    if language is None or type(language.max).__name__ == "InterpretedFunction":
        return
    for name in [name for name in sys.modules if name.split(".")[0] == "triton" and not name.startswith("triton._C")]:
        del sys.modules[name]
    import triton.language  # noqa: F401


_interpreter_triton()

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import attn_core as ac  # noqa: E402
from attn_core.viz import kernel_schedule as schedule  # noqa: E402

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason='needs the triton extra: pip install -e ".[triton]"'
)


def randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def run_forward_and_backward(q_len, k_len, num_heads, num_kv_heads, is_causal, block_size, head_dim=16):
    q = randn(1, num_heads, q_len, head_dim, seed=0).requires_grad_()  # (B, Hq, Lq, D)
    k = randn(1, num_kv_heads, k_len, head_dim, seed=1).requires_grad_()  # (B, Hkv, Lk, D)
    v = randn(1, num_kv_heads, k_len, head_dim, seed=2).requires_grad_()  # (B, Hkv, Lk, D)
    out = ac.triton_attention(q, k, v, is_causal=is_causal, block_size=block_size)  # (B, Hq, Lq, D)
    out.backward(randn(*out.shape, seed=3))


def test_every_pointer_offset_is_64_bit_under_the_interpreter(monkeypatch):
    from triton.runtime import interpreter

    offset_types = set()
    add_pointer = interpreter.interpreter_builder.create_addptr

    def spy(ptr, offset):
        offset_types.add(str(offset.dtype))
        return add_pointer(ptr, offset)

    monkeypatch.setattr(interpreter.interpreter_builder, "create_addptr", spy)
    run_forward_and_backward(20, 36, 4, 2, True, 16)  # forward, Δ, dK/dV and dQ kernels
    assert offset_types == {"int64"}


SHAPES = [  # (Lq, Lk, Hq, Hkv, is_causal, block)
    (40, 50, 2, 1, True, 16),  # a chunk after cached keys; the last key tile partial
    (48, 48, 2, 2, True, 16),  # square: only the diagonal tiles masked
    (40, 24, 4, 2, True, 16),  # Lq > Lk: blind queries
    (40, 40, 2, 2, False, 16),  # no mask but the partial last key tile
    (64, 64, 1, 1, False, 32),  # nothing masked at all
]


@pytest.mark.parametrize("q_len, k_len, num_heads, num_kv_heads, is_causal, block", SHAPES)
def test_masks_only_on_the_tiles_the_schedule_marks(monkeypatch, q_len, k_len, num_heads, num_kv_heads, is_causal,
                                                    block):  # fmt: skip
    from attn_core.flash.kernels import flash_backward, flash_forward

    calls = {"forward": [], "backward": []}

    def spy(kind, original, rows_at, keys_at):
        def record(*args):  # the helper's last positional argument is its MASKED constexpr
            rows, keys = args[rows_at].handle.data, args[keys_at].handle.data
            calls[kind].append((int(rows[0]) // block, int(keys[0]) // block, bool(args[-1])))
            return original(*args)

        return record

    monkeypatch.setattr(flash_forward, "_attend_key_tile", spy("forward", flash_forward._attend_key_tile, 7, 8))
    backward_helper = flash_backward._probs_and_grad_scores
    monkeypatch.setattr(flash_backward, "_probs_and_grad_scores", spy("backward", backward_helper, 6, 7))
    run_forward_and_backward(q_len, k_len, num_heads, num_kv_heads, is_causal, block)

    status = schedule.tile_status(q_len, k_len, block, is_causal)  # (Tq, Tk)
    expected = {(qi, kj, bool(code == schedule.MASKED)) for (qi, kj), code in np.ndenumerate(status) if code}
    # each visited pair once per query head in the forward; twice in the backward (dK/dV and dQ kernels)
    assert sorted(calls["forward"]) == sorted(list(expected) * num_heads)
    assert sorted(calls["backward"]) == sorted(list(expected) * 2 * num_heads)


def test_grad_kv_runs_one_program_per_query_head(monkeypatch):
    """MQA (Hkv = 1, Gemma 3's layout): 8 query heads give 8 dK/dV programs per key tile, not 1."""
    from attn_core.flash.kernels import flash_backward

    grids = []

    class GridSpy:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            grids.append(tuple(grid))
            return self.kernel[grid]

    monkeypatch.setattr(flash_backward, "_grad_kv_kernel", GridSpy(flash_backward._grad_kv_kernel))
    run_forward_and_backward(16, 48, 8, 1, True, 16)
    assert grids == [(3, 8)]  # ⌈48 / 16⌉ key tiles × (B = 1)·(Hq = 8)


# The frontend's IR for an H100, built in a process without TRITON_INTERPRET (this one runs the interpreter).
IR_SCRIPT = textwrap.dedent(
    """
    import inspect, json, re
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend
    from attn_core.flash.kernels import flash_backward, flash_forward

    target = GPUTarget("cuda", 90, 32)  # H100
    backend = make_backend(target)
    options = backend.parse_options({})
    INTS = ("num_heads", "group", "q_len", "k_len", "rows_total")
    FLOAT32_POINTERS = ("Lse", "Delta", "GradLse", "GradK", "GradV")

    def source_ir(kernel, constexprs):
        names = list(inspect.signature(kernel.fn).parameters)
        signature = {
            name: "constexpr" if name in constexprs else "fp32" if name == "scale"
            else "i32" if name.startswith("stride") or name in INTS
            else "*fp32" if name in FLOAT32_POINTERS else "*fp16"
            for name in names
        }
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        source = ASTSource(fn=kernel, signature=signature, constexprs=constexprs)
        codegen = backend.get_codegen_implementation(options)
        return str(source.make_ir(target, options, codegen, backend.get_module_map(), context))

    tiles = {"BLOCK_M": 64, "BLOCK_N": 64, "HEAD_DIM": 256}
    kernels = {"delta": (flash_backward._delta_kernel, {"HAS_GRAD_LSE": True, "BLOCK_M": 64, "HEAD_DIM": 256})}
    for causal in (False, True):
        kernels[f"forward causal={causal}"] = (flash_forward._flash_forward_kernel, {"IS_CAUSAL": causal, **tiles})
        kernels[f"dK/dV causal={causal}"] = (flash_backward._grad_kv_kernel, {"IS_CAUSAL": causal, **tiles})
        kernels[f"dQ causal={causal}"] = (flash_backward._grad_q_kernel, {"IS_CAUSAL": causal, **tiles})
    report = {}
    for name, (kernel, constexprs) in kernels.items():
        text = source_ir(kernel, constexprs)
        offsets = re.findall(r"tt\\.addptr [^:]+: [^,]+, (?:tensor<[0-9x]+x)?(i\\d+)", text)
        report[name] = {"offsets": sorted(set(offsets)), "count": len(offsets),
                        "math": sorted(set(re.findall(r"math\\.\\w+", text)))}
    print(json.dumps(report))
    """
)


def test_ir_for_an_h100_has_64_bit_offsets_and_exp2_only():
    import json

    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"  # triton 3.9 warns when it is unset
    result = subprocess.run(
        [sys.executable, "-c", IR_SCRIPT], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(report) == 7
    for name, found in report.items():
        assert found["count"] > 0 and found["offsets"] == ["i64"], (name, found)
        assert "math.exp" not in found["math"], (name, found)  # exp2 with log₂e folded into the scale
        if name != "delta":
            assert "math.exp2" in found["math"], (name, found)
