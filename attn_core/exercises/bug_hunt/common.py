"""What every bug of notebook 14 shares: the :class:`Bug` record and the probes' float64 comparison."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

DTYPE = torch.float64  # probes compare in float64: a real bug is off by far more than 1e-12
ATOL, RTOL = 1e-8, 1e-6


@dataclass(frozen=True)
class Bug:
    """One planted bug: where it comes from, the buggy code, a probe, a hint and the fix."""

    id: str
    title: str
    story: str
    signature: str
    buggy: Callable
    fixed: Callable
    probe: Callable[[Callable], str | None]
    hint: str


def catalogue(*bugs: Bug) -> dict[str, Bug]:
    """``{bug.id: bug}`` in the order given."""
    return {bug.id: bug for bug in bugs}


def _randn(*shape: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=generator, dtype=DTYPE)


def _qkv(batch: int, heads: int, q_len: int, k_len: int, dim: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    q = _randn(batch, heads, q_len, dim, generator=generator)  # (B, H, Lq, D)
    k = _randn(batch, heads, k_len, dim, generator=generator)  # (B, H, Lk, D)
    v = _randn(batch, heads, k_len, dim, generator=generator)  # (B, H, Lk, D)
    return q, k, v


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.to(DTYPE), b.to(DTYPE), atol=ATOL, rtol=RTOL)


def _unpack(result, out_shape: tuple, weights_shape: tuple) -> tuple[torch.Tensor, torch.Tensor, str | None]:
    """Split ``(out, weights)`` and check their types and shapes."""
    if not (isinstance(result, tuple) and len(result) == 2 and all(isinstance(t, torch.Tensor) for t in result)):
        return None, None, f"return a pair (out, weights) of tensors, got {type(result).__name__}."
    out, weights = result
    if tuple(out.shape) != out_shape:
        return None, None, f"out should have shape {out_shape}, got {tuple(out.shape)}."
    if tuple(weights.shape) != weights_shape:
        return None, None, f"weights should have shape {weights_shape}, got {tuple(weights.shape)}."
    return out.detach().to(DTYPE), weights.detach().to(DTYPE), None
