"""Decode-shaped GQA: the three ways to share a kv head agree, and attn_core's decode step never copies the cache.

Notebook 07 and benchmarks/bench_decode.py time these forms; here they are only checked (no timings):
equal outputs on one-token and few-token queries against a KVCache view (a strided slice of a
buffer with spare capacity), and an allocation count per decode step.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import attn_core as ac

F64 = torch.float64


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def attend_repeat_interleave(q, k, v, mask=None):
    """Copy each kv head n times, then plain multi-head attention."""
    n = q.shape[1] // k.shape[1]
    k_full, v_full = k.repeat_interleave(n, dim=1), v.repeat_interleave(n, dim=1)  # (B, H, T, d)
    scores = q @ k_full.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1) @ v_full  # (B, H, Lq, d)


def attend_broadcast_5d(q, k, v, mask=None):
    """The 5-D broadcast form: q (B, G, n, Lq, d) against k (B, G, 1, T, d)."""
    B, H, Lq, d = q.shape
    G = k.shape[1]
    scores = q.view(B, G, H // G, Lq, d) @ k.unsqueeze(2).transpose(-2, -1) / math.sqrt(d)  # (B, G, n, Lq, T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # an (Lq, T) mask broadcasts here too
    return (scores.softmax(dim=-1) @ v.unsqueeze(2)).reshape(B, H, Lq, d)  # (B, H, Lq, d)


def attend_grouped(q, k, v, mask=None):
    """attn_core's form: the group's query heads stacked along the length axis."""
    B, H, Lq, d = q.shape
    G = k.shape[1]
    scores = q.reshape(B, G, (H // G) * Lq, d) @ k.transpose(-2, -1) / math.sqrt(d)  # (B, G, n·Lq, T)
    scores = scores.view(B, H, Lq, -1)  # (B, H, Lq, T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1).reshape(B, G, (H // G) * Lq, -1)  # (B, G, n·Lq, T)
    return (weights @ v).reshape(B, H, Lq, d)  # (B, H, Lq, d)


FORMS = {"repeat_interleave": attend_repeat_interleave, "broadcast-5d": attend_broadcast_5d, "grouped": attend_grouped}


def cached(num_kv_heads: int, length: int, batch: int = 2, head_dim: int = 8, seed: int = 0) -> ac.KVCache:
    """A KVCache holding `length` tokens with spare capacity, so keys/values are strided views."""
    cache = ac.KVCache(initial_capacity=2 * length + 1)
    cache.update(randn(batch, num_kv_heads, length, head_dim, seed=seed), randn(batch, num_kv_heads, length, head_dim))
    assert not cache.keys.is_contiguous()
    return cache


@pytest.mark.parametrize("num_kv_heads", [8, 4, 2, 1], ids=["mha", "gqa4", "gqa2", "mqa"])
@pytest.mark.parametrize("q_len", [1, 3], ids=["one-token", "chunk-of-3"])
@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_decode_forms_equal_sdpa_enable_gqa(form, num_kv_heads, q_len):
    """Each form == F.sdpa(enable_gqa=True) == ac.scaled_dot_product_attention on a decode step over a cache view."""
    cache = cached(num_kv_heads, length=11)
    q = randn(2, 8, q_len, 8, seed=5)  # (B, H, Lq, d): the newest q_len tokens
    mask = ac.causal_mask(q_len, len(cache))  # (Lq, T), bottom-right: the new tokens see the whole cache
    reference = F.scaled_dot_product_attention(q, cache.keys, cache.values, attn_mask=mask, enable_gqa=True)
    ours, _ = ac.scaled_dot_product_attention(q, cache.keys, cache.values, is_causal=True)
    torch.testing.assert_close(ours, reference, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(form(q, cache.keys, cache.values, mask), reference, rtol=1e-10, atol=1e-12)


class FreshTensors(TorchDispatchMode):
    """Bytes of every tensor an aten op returns in memory none of its inputs owns (views/in-place are free)."""

    def __init__(self):
        super().__init__()
        self.sizes: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        self.sizes += [
            t.untyped_storage().nbytes()
            for t in tree_leaves(out)
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs
        ]
        return out


@pytest.mark.parametrize("num_kv_heads", [4, 1], ids=["gqa4", "mqa"])
def test_copying_forms_allocate_the_expanded_cache(num_kv_heads):
    """The detector works: repeat_interleave and the 5-D broadcast form both materialise K and V for all H heads."""
    cache = cached(num_kv_heads, length=64, head_dim=16)
    q = randn(2, 8, 1, 16)  # (B, H, 1, d)
    expanded = 2 * 8 * 64 * 16 * 8  # one of K/V expanded to 8 heads, float64
    for form in (attend_repeat_interleave, attend_broadcast_5d):
        with torch.no_grad(), FreshTensors() as log:
            form(q, cache.keys, cache.values)
        assert sorted(log.sizes)[-2:] == [expanded, expanded], form.__name__


@pytest.mark.parametrize("num_kv_heads", [8, 4, 1], ids=["mha", "gqa4", "mqa"])
def test_layer_decode_step_never_copies_the_cache(num_kv_heads):
    """A decode step of ac.GroupedQueryAttention with a KVCache creates no tensor as large as one cached kv head.

    Appending writes into spare capacity and the grouped-query attention reads K/V in place, so the
    step's largest new tensors are the scores/weights (B, H, 1, T), head_dim / H = 8 times smaller
    than one kv head's cached keys (B, 1, T, head_dim). A copy of K or V would be at least that big.
    """
    torch.manual_seed(0)
    layer = ac.GroupedQueryAttention(512, 8, num_kv_heads).double().eval()  # head_dim 64
    cache = ac.KVCache(initial_capacity=1024)
    with torch.no_grad():
        layer(randn(2, 512, 512, seed=1), is_causal=True, cache=cache)  # prefill 512 tokens
        one_head_keys = cache.keys[:, :1].numel() * cache.keys.element_size()  # bytes of (B, 1, T, head_dim)
        for step in range(3):
            with FreshTensors() as log:
                layer(randn(2, 1, 512, seed=2 + step), is_causal=True, cache=cache)
            assert len(cache) == 512 + step + 1
            assert max(log.sizes) < one_head_keys / 4, f"a {max(log.sizes)}-byte tensor in one decode step"
