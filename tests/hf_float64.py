"""Run a Hugging Face modeling module's float32 round trips in float64, for exact (1e-10) comparisons.

Several HF linear / SSM mixers cast to float32 inside (``.to(torch.float32)``, ``.float()``) "because states are
susceptible to rounding". Under ``hf_in_float64(module)`` the module's ``torch.float32`` reads as ``torch.float64``
and ``Tensor.float()`` keeps float64, so the same code computes in float64 and our layer must match it to 1e-10;
the unpatched run is checked separately with a float32 bound.
"""

from __future__ import annotations

import contextlib
import types

import torch

UNIT_ROUNDOFF_32 = 2.0**-24  # float32's unit roundoff u


class _Float64Torch(types.ModuleType):
    def __getattr__(self, name):
        return torch.float64 if name == "float32" else getattr(torch, name)


@contextlib.contextmanager
def hf_in_float64(*modules):
    proxy = _Float64Torch("torch")
    saved = [m.torch for m in modules]
    tensor_float = torch.Tensor.float
    for m in modules:
        m.torch = proxy
    torch.Tensor.float = lambda self, *a, **k: self.to(torch.float64)
    try:
        yield
    finally:
        torch.Tensor.float = tensor_float
        for m, old in zip(modules, saved, strict=True):
            m.torch = old


def float32_bound(n_terms: int, scale: float) -> float:
    """Higham's γ_n = n·u/(1 − n·u) times the size of the terms: the first-order error of a length-n accumulation
    whose inputs and partial sums are rounded to float32 (u = 2⁻²⁴), for results of magnitude ``scale``."""
    nu = n_terms * UNIT_ROUNDOFF_32
    return nu / (1 - nu) * scale
