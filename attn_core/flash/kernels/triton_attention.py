"""``triton_attention``: FlashAttention-2 (forward and backward) in Triton, checked before any kernel runs.

CUDA tensors run the compiled kernels. CPU tensors run Triton's *interpreter*, which executes the same
kernel source with NumPy, one program after another. It must be switched on with ``TRITON_INTERPRET=1``
before triton is first imported: ``@triton.jit`` reads it when a function is decorated, and triton's own
``tl.max`` / ``tl.sum`` / ``tl.zeros`` are decorated while triton is imported. So this module never imports
triton at import time (``import attn_core`` must not), and checks the variable *before* importing triton.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import torch

from attn_core.attention import check_flag, check_scale, default_scale

__all__ = ["triton_attention", "HEAD_DIMS", "BLOCK_SIZES", "interpreter_enabled"]

# tl.arange needs a power of two, and tl.dot at least 16; 256 is Gemma 3's head dim (FlashAttention-2 goes to 256 too).
# On a GPU, D = 256 tiles need about twice the shared memory of D = 128 ones: run_with_tiles halves the tile if needed.
HEAD_DIMS = (16, 32, 64, 128, 256)
BLOCK_SIZES = (16, 32, 64, 128)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
INSTALL_HINT = 'pip install -e ".[triton]"'
_TRUE = {"1", "true", "on", "yes"}  # what triton's getenv_bool accepts (case-insensitive)


def interpreter_enabled() -> bool:
    """True when ``TRITON_INTERPRET`` is set to a true value (as triton reads it)."""
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in _TRUE


def _triton_installed() -> bool:
    if "triton" in sys.modules:
        return sys.modules["triton"] is not None  # None: import blocked (how tests simulate a missing package)
    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


def _check_triton_ready(device: torch.device) -> None:
    """ImportError without triton; RuntimeError for CPU tensors without the interpreter; before importing triton."""
    if not _triton_installed():
        raise ImportError(f"ac.triton_attention needs the optional triton extra: {INSTALL_HINT} (triton==3.9.0).")
    if device.type == "cuda":
        return
    if device.type != "cpu":
        raise RuntimeError(
            f"ac.triton_attention runs on CUDA tensors or, with TRITON_INTERPRET=1, on CPU ones; got "
            f"{device.type} tensors."
        )
    if not interpreter_enabled():
        raise RuntimeError(
            "ac.triton_attention got CPU tensors, which run under Triton's interpreter: set the environment variable "
            "TRITON_INTERPRET=1 before triton is first imported (os.environ['TRITON_INTERPRET'] = '1' at the top of "
            "the script or notebook, or `TRITON_INTERPRET=1 python ...`), then call again, or use CUDA tensors."
        )
    language = sys.modules.get("triton.language")
    if language is not None and type(language.max).__name__ != "InterpretedFunction":
        raise RuntimeError(
            "TRITON_INTERPRET=1 is set, but triton was imported before it was set, so its tl.max / tl.sum were "
            "compiled for a GPU and the interpreter cannot run them. Set TRITON_INTERPRET=1 before anything imports "
            "triton: restart the Python process (the notebook's kernel) and set it first."
        )


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_size: object) -> None:
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}.")
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        if tensor.dtype not in DTYPES:
            hint = (
                " For float64 use ac.tiled_attention (the same algorithm in PyTorch)."
                if tensor.is_floating_point()
                else ""
            )
            raise TypeError(
                f"{name} has dtype {tensor.dtype}; triton_attention takes float16, bfloat16 or float32.{hint}"
            )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(
            f"q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}: convert with .to(q.dtype)."
        )
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}.")
    if not (q.ndim == k.ndim == v.ndim == 4):
        raise ValueError(
            f"q, k, v must be 4-D (B, H, L, D), got shapes {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}. Add a batch dim with .unsqueeze(0)."
        )
    (batch, num_heads, _, head_dim), (_, num_kv_heads, k_len, kd) = q.shape, k.shape
    if k.shape[0] != batch or v.shape[0] != batch:
        raise ValueError(
            f"q, k, v must share the batch size, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}."
        )
    if tuple(v.shape[1:3]) != (num_kv_heads, k_len):
        raise ValueError(f"v {tuple(v.shape)} must have k's heads and length: (B, {num_kv_heads}, {k_len}, D).")
    if head_dim not in HEAD_DIMS:
        raise ValueError(
            f"head_dim D = {head_dim} (q's last dim) must be one of {HEAD_DIMS}; pad q, k, v with zeros "
            f"to the next of these (and pass scale=1/sqrt({head_dim})), or use ac.tiled_attention."
        )
    if kd != head_dim or v.shape[3] != head_dim:
        raise ValueError(
            f"q, k, v must share the head dim D (this kernel has Dv = D), got q {head_dim}, k {kd}, "
            f"v {v.shape[3]}. For Dv != D use ac.tiled_attention."
        )
    if num_kv_heads == 0 or num_heads % num_kv_heads != 0:
        raise ValueError(
            f"query heads Hq = {num_heads} must be a multiple of kv heads Hkv = {num_kv_heads} "
            f"(GQA: query head h uses kv head h // (Hq // Hkv))."
        )
    if isinstance(block_size, bool) or block_size not in BLOCK_SIZES:
        raise ValueError(f"block_size must be one of {BLOCK_SIZES} (queries and keys per tile), got {block_size!r}.")


def triton_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    block_size: int = 64,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """FlashAttention-2 in Triton: ``softmax(scale·Q Kᵀ) V`` tile by tile, differentiable w.r.t. q, k, v.

    Args:
        q: ``(B, Hq, Lq, D)``; k, v: ``(B, Hkv, Lk, D)``, any strides. ``Hq`` a multiple of ``Hkv`` (query
            head ``h`` uses kv head ``h // (Hq // Hkv)``); D in 16/32/64/128/256; one dtype among float16,
            bfloat16, float32 (bfloat16 is computed as float32 under the interpreter, which cannot do bf16
            arithmetic: triton#11584).
        is_causal: bottom-right like ``ac.causal_mask``: query i sees keys j <= i + Lk - Lq. A query that
            sees no key gets output 0, lse -inf and zero gradients.
        scale: multiplies ``Q Kᵀ``; default ``1/sqrt(D)``.
        block_size: queries and keys per tile, 16/32/64/128.
        return_lse: also return lse ``(B, Hq, Lq)`` float32, ``log Σ_j exp(scale·q·k_j)`` over visible keys.

    Returns:
        out ``(B, Hq, Lq, D)`` in q's dtype, or ``(out, lse)``.

    CUDA tensors run compiled kernels; CPU tensors need ``TRITON_INTERPRET=1`` set before triton is imported.
    """
    _check_inputs(q, k, v, block_size)
    check_flag("is_causal", is_causal)
    check_flag("return_lse", return_lse)
    check_scale(scale)
    scale = default_scale(q.shape[-1]) if scale is None else float(scale)
    _check_triton_ready(q.device)
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        out, lse = TritonAttentionFunction.apply(q, k, v, is_causal, scale, block_size)
    else:
        out, lse = _forward(q, k, v, is_causal, scale, block_size)
    return (out, lse) if return_lse else out


def _kernel_inputs(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """bfloat16 as float32 under the interpreter (it multiplies bf16 bit patterns as integers); others unchanged."""
    if tensors[0].dtype == torch.bfloat16 and tensors[0].device.type == "cpu":
        return tuple(tensor.float() for tensor in tensors)
    return tensors


def run_with_tiles(run, block_size: int, device: torch.device):
    """``run(block_size)``; on a GPU whose shared memory cannot hold those tiles (triton's ``OutOfResources``),
    again with half the tile size, down to 16. The interpreter has no shared memory: it uses exactly block_size."""
    while True:
        try:
            return run(block_size)
        except Exception as error:
            if device.type != "cuda" or block_size <= 16 or type(error).__name__ != "OutOfResources":
                raise
            block_size //= 2


def _kernel_module(name: str):
    """``attn_core.flash.kernels.<name>``, which imports triton: only now, after the checks."""
    try:
        return importlib.import_module(f"attn_core.flash.kernels.{name}")
    except ImportError as error:  # triton missing or broken, however the import was blocked
        raise ImportError(
            f"ac.triton_attention needs the optional triton extra: {INSTALL_HINT} (triton==3.9.0). Importing it "
            f"failed: {error}"
        ) from error


def _forward(q, k, v, is_causal: bool, scale: float, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    flash_forward = _kernel_module("flash_forward").flash_forward

    batch, num_heads, q_len, head_dim = q.shape
    if batch * num_heads * q_len == 0:
        return q.new_empty(q.shape), torch.empty(batch, num_heads, q_len, dtype=torch.float32, device=q.device)
    inputs = _kernel_inputs(q, k, v)
    out, lse = run_with_tiles(
        lambda tiles: flash_forward(*inputs, is_causal=is_causal, scale=scale, block_size=tiles), block_size, q.device
    )
    return out.to(q.dtype), lse  # (B, Hq, Lq, D), (B, Hq, Lq)


class TritonAttentionFunction(torch.autograd.Function):
    """The forward kernel, and a backward of Triton kernels; saves q, k, v, out and lse only."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal: bool, scale: float, block_size: int):
        out, lse = _forward(q, k, v, is_causal, scale, block_size)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.is_causal, ctx.scale, ctx.block_size = is_causal, scale, block_size
        ctx.set_materialize_grads(False)  # an unused output's gradient arrives as None
        return out, lse

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        if torch.is_grad_enabled():
            raise RuntimeError(
                "triton_attention has no double backward (create_graph=True): its backward runs "
                "kernels autograd cannot follow. Use ac.scaled_dot_product_attention for that."
            )
        q, k, v, out, lse = ctx.saved_tensors
        if q.numel() == 0 or k.numel() == 0 or (grad_out is None and grad_lse is None):
            return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v), None, None, None
        flash_backward = _kernel_module("flash_backward").flash_backward
        q32, k32, v32, out32 = _kernel_inputs(q, k, v, out)
        if grad_out is not None:
            grad_out = grad_out.to(q32.dtype)  # (B, Hq, Lq, D)
        grad_q, grad_k, grad_v = run_with_tiles(
            lambda tiles: flash_backward(
                q32,
                k32,
                v32,
                out32,
                lse,
                grad_out,
                grad_lse,
                is_causal=ctx.is_causal,
                scale=ctx.scale,
                block_size=tiles,
            ),  # fmt: skip
            ctx.block_size,
            q.device,
        )
        return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype), None, None, None
