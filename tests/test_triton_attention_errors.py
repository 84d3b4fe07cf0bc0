"""ac.triton_attention's errors, all raised before any kernel runs, and the TRITON_INTERPRET rules.

The input checks run before triton is looked at, so they are tested with or without the extra. The
environment rules need fresh processes (whether triton was already imported is per process).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

os.environ.setdefault("TRITON_INTERPRET", "1")  # as in test_triton_attention.py: before anything imports triton

import pytest  # noqa: E402
import torch  # noqa: E402

import attn_core as ac  # noqa: E402

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason='needs the triton extra: pip install -e ".[triton]"'
)


def qkv(q_shape=(1, 2, 8, 16), kv_shape=(1, 2, 8, 16), dtype=torch.float32, v_shape=None):
    q = torch.zeros(q_shape, dtype=dtype)  # (B, Hq, Lq, D)
    k = torch.zeros(kv_shape, dtype=dtype)  # (B, Hkv, Lk, D)
    return q, k, torch.zeros(v_shape or kv_shape, dtype=dtype)  # v (B, Hkv, Lk, Dv)


@pytest.mark.parametrize(
    "inputs, kwargs, error, words",
    [
        (qkv(dtype=torch.float64), {}, TypeError, "ac.tiled_attention"),
        (qkv(dtype=torch.int32), {}, TypeError, "float16, bfloat16 or float32"),
        ((qkv()[0], *qkv(dtype=torch.float16)[1:]), {}, TypeError, "one dtype"),
        (qkv((2, 8, 16), (2, 8, 16)), {}, ValueError, "4-D"),
        (qkv((1, 2, 8, 24), (1, 2, 8, 24)), {}, ValueError, "head_dim D = 24"),
        (qkv((1, 2, 8, 8), (1, 2, 8, 8)), {}, ValueError, "head_dim D = 8"),
        (qkv(v_shape=(1, 2, 8, 32)), {}, ValueError, "Dv != D"),
        (qkv((1, 2, 8, 16), (1, 2, 8, 32)), {}, ValueError, "share the head dim"),
        (qkv((1, 3, 8, 16), (1, 2, 8, 16)), {}, ValueError, "multiple of kv heads"),
        (qkv((2, 2, 8, 16), (1, 2, 8, 16)), {}, ValueError, "batch size"),
        (qkv(v_shape=(1, 2, 9, 16)), {}, ValueError, "k's heads and length"),
        (qkv(), {"block_size": 48}, ValueError, "block_size must be one of"),
        (qkv(), {"block_size": 256}, ValueError, "block_size must be one of"),
        (qkv(), {"block_size": True}, ValueError, "block_size must be one of"),
        (qkv(), {"is_causal": 1}, TypeError, "is_causal"),
        (qkv(), {"return_lse": "yes"}, TypeError, "return_lse"),
        (qkv(), {"scale": float("inf")}, ValueError, "scale must be finite"),
        (qkv(), {"scale": torch.tensor(0.5)}, TypeError, "float(scale)"),
    ],
    ids=[
        "float64", "int", "mixed-dtype", "3-D", "D24", "D8", "Dv", "Dk", "Hq%Hkv", "batch", "v-len",
        "block48", "block256", "block-bool", "causal-int", "lse-str", "scale-inf", "scale-tensor",
    ],
)  # fmt: skip
def test_bad_inputs_raise_a_clear_error_before_any_kernel(inputs, kwargs, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        ac.triton_attention(*inputs, **kwargs)


def test_non_tensor_input_is_a_type_error():
    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        ac.triton_attention([[1.0]], *qkv()[1:])


def test_missing_triton_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # how Python marks a package that cannot be imported
    with pytest.raises(ImportError, match=r'pip install -e "\.\[triton\]"'):
        ac.triton_attention(*qkv())


@needs_triton
def test_cpu_tensors_without_the_interpreter_name_the_variable(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        ac.triton_attention(*qkv())
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        ac.triton_attention(*qkv())


def run_fresh(code: str) -> str:
    """Run ``code`` in a new Python process without TRITON_INTERPRET; return its stdout (fail on a crash)."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@needs_triton
def test_import_never_imports_triton_and_setting_the_variable_then_works():
    """A fresh process: ``import attn_core`` leaves triton unimported; a CPU call without the variable raises
    *before* importing triton, so setting it and calling again runs the interpreter."""
    stdout = run_fresh("""
        import os, sys
        import torch
        import attn_core as ac
        print("imported", "triton" in sys.modules)
        q = torch.randn(1, 1, 4, 16)  # (B, H, L, D)
        try:
            ac.triton_attention(q, q, q)
        except RuntimeError as error:
            print("raised", "TRITON_INTERPRET" in str(error), "triton" in sys.modules)
        os.environ["TRITON_INTERPRET"] = "1"
        out = ac.triton_attention(q, q, q, block_size=16)  # (1, 1, 4, 16)
        print("works", torch.allclose(out, torch.softmax(q @ q.mT / 4, -1) @ q, atol=1e-6))
    """)
    assert stdout.split() == ["imported", "False", "raised", "True", "False", "works", "True"]


@needs_triton
def test_variable_set_after_triton_was_imported_is_a_runtime_error():
    stdout = run_fresh("""
        import os
        import torch
        import triton  # imported first: its tl.max / tl.sum are compiled for a GPU
        os.environ["TRITON_INTERPRET"] = "1"
        import attn_core as ac
        q = torch.randn(1, 1, 4, 16)  # (B, H, L, D)
        try:
            ac.triton_attention(q, q, q, block_size=16)
        except RuntimeError as error:
            print("raised", "before anything imports triton" in str(error))
    """)
    assert stdout.split() == ["raised", "True"]


class OutOfResources(Exception):
    """Stands for triton.runtime.errors.OutOfResources (matched by name: no triton import needed)."""


def test_gpu_retries_with_smaller_tiles_when_shared_memory_is_short():
    from attn_core.flash.kernels.triton_attention import run_with_tiles

    tried = []

    def run(block_size):
        tried.append(block_size)
        if block_size > 32:
            raise OutOfResources(f"shared memory: tiles of {block_size} do not fit")
        return block_size

    assert run_with_tiles(run, 128, torch.device("cuda")) == 32 and tried == [128, 64, 32]
    with pytest.raises(OutOfResources):  # the interpreter (CPU) has no shared memory: never retried
        run_with_tiles(run, 128, torch.device("cpu"))
    with pytest.raises(ValueError, match="other"):  # any other error is the caller's to see
        run_with_tiles(lambda block_size: (_ for _ in ()).throw(ValueError("other")), 64, torch.device("cuda"))


@needs_triton
def test_a_failing_triton_import_names_the_extra():
    """Installed but not importable (here: the import is blocked in a fresh process): still the extra's name."""
    stdout = run_fresh("""
        import builtins, os
        os.environ["TRITON_INTERPRET"] = "1"
        real_import = builtins.__import__

        def blocked(name, *args, **kwargs):
            if name == "triton" or name.startswith("triton."):
                raise ImportError("blocked for the test")
            return real_import(name, *args, **kwargs)

        builtins.__import__ = blocked
        import torch
        import attn_core as ac
        q = torch.randn(1, 1, 4, 16)  # (B, H, L, D)
        try:
            ac.triton_attention(q, q, q, block_size=16)
        except ImportError as error:
            print("raised", '.[triton]' in str(error))
    """)
    assert stdout.split() == ["raised", "True"]
