"""KVCache edges: gradients through the cache whatever its capacity, one owner per cache, input checks, boundaries."""

from __future__ import annotations

import gc
import math
import weakref

import pytest
import torch

import attn_core as ac

F64 = torch.float64


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# --------------------------------------------------------------------------- gradients through the cache


def project(x: torch.Tensor, weight: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, L, H·d) @ (H·d, H·d) -> (B, H, L, d)."""
    batch, length, width = x.shape
    return (x @ weight).view(batch, length, heads, width // heads).transpose(1, 2)  # (B, H, L, d)


def attend(x: torch.Tensor, weights: list[torch.Tensor], cache: ac.KVCache | None) -> torch.Tensor:
    """One causal attention step over x (B, L, 8) with 2 heads; keys/values go through `cache` if given."""
    q, k, v = (project(x, w, heads=2) for w in weights)  # (B, 2, L, 4) each
    if cache is not None:
        k, v = cache.update(k, v)  # (B, 2, T, 4): everything cached so far
    out, _ = ac.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, 2, L, 4)
    return out


@pytest.mark.parametrize(
    ("initial_capacity", "chunks"),
    [(8, [3, 1]), (3, [3, 1]), (2, [1, 1, 1, 1, 1, 1]), (16, [2, 3, 1])],
    ids=["step-fits", "step-grows", "both", "chunks-fit"],
)
def test_backward_through_the_cache_equals_the_full_pass(initial_capacity, chunks):
    """Prefill + steps through a cache, then backward: the same gradients as one full causal pass,
    whether the appends fit in spare capacity (they wrote in place, and backward raised
    'modified by an inplace operation') or grow the buffer."""
    torch.manual_seed(0)
    weights = [(torch.randn(8, 8, dtype=F64) / math.sqrt(8)).requires_grad_() for _ in range(3)]
    x = randn(2, sum(chunks), 8, seed=1).requires_grad_()
    full = attend(x, weights, cache=None)  # (B, 2, L, 4)
    full_grads = torch.autograd.grad(full.square().sum(), [x, *weights])

    cache = ac.KVCache(initial_capacity=initial_capacity)
    starts = [sum(chunks[:i]) for i in range(len(chunks))]
    steps = [attend(x[:, start : start + n], weights, cache) for start, n in zip(starts, chunks, strict=True)]
    cached = torch.cat(steps, dim=2)  # (B, 2, L, 4)
    torch.testing.assert_close(cached, full, rtol=1e-12, atol=1e-12)
    cached_grads = torch.autograd.grad(cached.square().sum(), [x, *weights])
    for cached_grad, full_grad in zip(cached_grads, full_grads, strict=True):
        torch.testing.assert_close(cached_grad, full_grad, rtol=1e-12, atol=1e-12)


def test_inference_appends_stay_in_place():
    """Without tensors that require grad, an append that fits writes into the same buffer (no copy)."""
    cache = ac.KVCache(initial_capacity=8)
    cache.update(randn(1, 2, 3, 4), randn(1, 2, 3, 4))
    buffer = cache._keys.data_ptr()
    cache.update(randn(1, 2, 1, 4), randn(1, 2, 1, 4))
    assert cache._keys.data_ptr() == buffer


def test_tracked_append_leaves_earlier_results_unchanged():
    """With grad-tracked keys an append copies the buffer, so a view returned earlier keeps its values."""
    cache = ac.KVCache(initial_capacity=8)
    first_keys, _ = cache.update(randn(1, 2, 3, 4).requires_grad_(), randn(1, 2, 3, 4))
    snapshot = first_keys.detach().clone()
    version = first_keys._version
    cache.update(randn(1, 2, 1, 4, seed=5).requires_grad_(), randn(1, 2, 1, 4))
    assert first_keys._version == version and torch.equal(first_keys, snapshot)


# --------------------------------------------------------------------------- one owner per cache


def test_bind_accepts_the_same_owner_and_rejects_another():
    """The first bind records the owner; the same owner again is fine; another layer raises ValueError."""
    first, second = ac.MultiHeadAttention(8, 2), ac.GroupedQueryAttention(8, 2, 1)
    cache = ac.KVCache()
    assert cache.bind(first) is None
    cache.bind(first)
    message = (
        r"this KVCache already holds the keys/values of another layer \(first used by a MultiHeadAttention, "
        r"now called by a GroupedQueryAttention\); give every layer its own KVCache"
    )
    with pytest.raises(ValueError, match=message):
        cache.bind(second)


def test_truncate_and_reset_keep_the_owner():
    """truncate(0) and reset() empty the cache but it still belongs to its first layer."""
    first, second = ac.MultiHeadAttention(8, 2), ac.MultiHeadAttention(8, 2)
    cache = ac.KVCache()
    cache.bind(first)
    cache.update(randn(1, 2, 3, 4), randn(1, 2, 3, 4))
    cache.truncate(0)
    with pytest.raises(ValueError, match="another layer"):
        cache.bind(second)
    cache.reset()
    with pytest.raises(ValueError, match="another layer"):
        cache.bind(second)
    cache.bind(first)


def test_bind_keeps_no_strong_reference():
    """The cache does not keep its layer alive (a weak reference), and stays bound after it dies."""
    layer = ac.MultiHeadAttention(8, 2)
    alive = weakref.ref(layer)
    cache = ac.KVCache()
    cache.bind(layer)
    del layer
    gc.collect()
    assert alive() is None
    with pytest.raises(ValueError, match="another layer"):
        cache.bind(ac.MultiHeadAttention(8, 2))


def test_bind_works_for_owners_without_weak_references():
    """Plain object() instances cannot be weakly referenced: the cache falls back to their id()."""
    first, second = object(), object()
    cache = ac.KVCache()
    cache.bind(first)
    cache.bind(first)
    with pytest.raises(ValueError, match=r"first used by a object, now called by a object"):
        cache.bind(second)


# --------------------------------------------------------------------------- input checks


@pytest.mark.parametrize(
    ("keys", "values", "match"),
    [
        ([[1.0]], randn(1, 2, 1, 4), r"takes tensors, got keys of type list"),
        (randn(1, 2, 1, 4), (1.0,), r"takes tensors, got values of type tuple"),
        (
            randn(1, 2, 3, 4),
            randn(1, 2, 3),
            r"matching first three dims, got keys \(1, 2, 3, 4\) and values \(1, 2, 3\)",
        ),
    ],
    ids=["list-keys", "tuple-values", "4d-keys-3d-values"],
)
def test_malformed_update_raises(keys, values, match):
    """Non-tensors raise TypeError; 4-D keys with 3-D values (first dims matching) raise ValueError."""
    error = TypeError if "tensors" in match else ValueError
    with pytest.raises(error, match=match):
        ac.KVCache().update(keys, values)


@pytest.mark.parametrize(
    ("values", "match"),
    [
        (randn(1, 2, 1, 4).float(), r"holds values of torch.float64 on cpu; got values of torch.float32 on cpu"),
        (torch.empty(1, 2, 1, 4, dtype=F64, device="meta"), r"holds values of torch.float64 on cpu; got values of "),
    ],
    ids=["dtype", "device"],
)
def test_values_dtype_and_device_are_checked_like_keys(values, match):
    """Values of another dtype or device raise ValueError (they were cast silently or failed in copy)."""
    cache = ac.KVCache()
    cache.update(randn(1, 2, 3, 4), randn(1, 2, 3, 4))
    with pytest.raises(ValueError, match=match):
        cache.update(randn(1, 2, 1, 4), values)
    assert len(cache) == 3  # nothing was appended


def test_mismatch_message_shows_the_values_real_shape():
    """The message shows the cached values as (B, Hkv, 'n', Dv), here (1, 2, 'n', 6) with capacity 16."""
    cache = ac.KVCache(initial_capacity=16)
    cache.update(randn(1, 2, 3, 4), randn(1, 2, 3, 6))
    with pytest.raises(ValueError, match=r"holds keys \(1, 2, 'n', 4\) and values \(1, 2, 'n', 6\); got keys"):
        cache.update(randn(1, 2, 1, 4), randn(1, 2, 1, 5))


def test_empty_cache_has_no_values():
    """Reading .values before the first update raises the same clear ValueError as .keys."""
    with pytest.raises(ValueError, match="the cache is empty"):
        _ = ac.KVCache().values


# --------------------------------------------------------------------------- boundaries


def test_truncate_to_zero_and_to_the_full_length():
    """truncate(len(cache)) changes nothing; truncate(0) empties it and the next append starts at 0."""
    cache = ac.KVCache(initial_capacity=8)
    keys, values = randn(1, 2, 5, 4), randn(1, 2, 5, 4, seed=1)
    cache.update(keys, values)
    cache.truncate(len(cache))
    assert len(cache) == 5 and torch.equal(cache.keys, keys) and torch.equal(cache.values, values)
    cache.truncate(0)
    assert len(cache) == 0 and cache.nbytes == 0 and cache.keys.shape == (1, 2, 0, 4)
    new_keys, new_values = randn(1, 2, 2, 4, seed=2), randn(1, 2, 2, 4, seed=3)
    all_keys, all_values = cache.update(new_keys, new_values)
    assert torch.equal(all_keys, new_keys) and torch.equal(all_values, new_values)


def test_growth_to_an_exact_fit_doubles_once():
    """Capacity 4 holding 4 tokens, plus 4 more, needs exactly 8: one doubling, not two."""
    cache = ac.KVCache(initial_capacity=4)
    cache.update(randn(1, 1, 4, 2), randn(1, 1, 4, 2))
    assert cache.capacity == 4
    cache.update(randn(1, 1, 4, 2), randn(1, 1, 4, 2))
    assert cache.capacity == 8 and len(cache) == 8
    cache.update(randn(1, 1, 1, 2), randn(1, 1, 1, 2))
    assert cache.capacity == 16
