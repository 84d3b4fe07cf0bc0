"""Shared test helpers: reproducible float64 tensors and the textbook attention every kernel is checked against."""

from __future__ import annotations

import math

import torch

F64 = torch.float64


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = F64) -> torch.Tensor:
    """A reproducible standard-normal tensor."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=dtype)


def make_qkv(
    batch: tuple[int, ...], hq: int, hkv: int, lq: int, lk: int, d: int, dv: int, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q (*batch, hq, lq, d), k (*batch, hkv, lk, d), v (*batch, hkv, lk, dv) in float64."""
    q = randn(*batch, hq, lq, d, seed=seed)
    k = randn(*batch, hkv, lk, d, seed=seed + 1)
    v = randn(*batch, hkv, lk, dv, seed=seed + 2)
    return q, k, v


def random_mask(*shape: int, seed: int = 0, p_attend: float = 0.6, every_row_sees_a_key: bool = True) -> torch.Tensor:
    """A random boolean mask (True = may attend); optionally key 0 is always visible."""
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(*shape, generator=generator) < p_attend
    if every_row_sees_a_key:
        mask[..., 0] = True
    return mask


def expand_kv(t: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Give every query head its kv head: repeat_interleave over the head dim (-3)."""
    return t.repeat_interleave(num_heads // t.shape[-3], dim=-3)


def reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, scale: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Textbook attention on repeat_interleave-expanded kv heads; fully masked rows give zeros."""
    k, v = expand_kv(k, q.shape[-3]), expand_kv(v, q.shape[-3])
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = torch.where(mask.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
    return weights @ v, weights


def assert_close64(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """float64 reference comparison (well inside the 1e-5 budget)."""
    torch.testing.assert_close(actual, expected, rtol=1e-9, atol=1e-10)
