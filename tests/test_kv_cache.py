"""KVCache: cached decoding equals a full causal pass; size accounting; amortised growth; errors."""

from __future__ import annotations

import pytest
import torch

import attn_core as ac

F64 = torch.float64


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = F64) -> torch.Tensor:
    """A reproducible standard-normal tensor."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def expected_nbytes(cache: ac.KVCache, batch: int, kv_heads: int, head_dim: int, element_size: int = 8) -> int:
    """2 · B · Hkv · T · head_dim · element size (keys and values of equal width)."""
    return 2 * batch * kv_heads * len(cache) * head_dim * element_size


LAYERS = {
    "mha": lambda: ac.MultiHeadAttention(32, 8),
    "gqa-8q-2kv": lambda: ac.GroupedQueryAttention(32, 8, 2),
    "mqa": lambda: ac.MultiQueryAttention(32, 8),
}


@pytest.mark.parametrize("make_layer", LAYERS.values(), ids=LAYERS.keys())
@pytest.mark.parametrize("prefill", [1, 3], ids=["prefill1", "prefill3"])
def test_token_by_token_decoding_equals_full_causal_pass(make_layer, prefill):
    """Prefill + one token at a time with is_causal=True reproduces one full causal pass (outputs and weights)."""
    torch.manual_seed(0)
    layer = make_layer().double().eval()
    batch, length = 2, 7
    x = randn(batch, length, 32, seed=1)
    full_out, full_weights = layer(x, is_causal=True)

    cache = ac.KVCache(initial_capacity=4)
    step_out, _ = layer(x[:, :prefill], is_causal=True, cache=cache)
    outputs = [step_out]
    assert len(cache) == prefill
    assert cache.nbytes == expected_nbytes(cache, batch, layer.num_kv_heads, layer.head_dim)
    for t in range(prefill, length):
        step_out, step_weights = layer(x[:, t : t + 1], is_causal=True, cache=cache)
        outputs.append(step_out)
        assert len(cache) == t + 1
        assert cache.nbytes == expected_nbytes(cache, batch, layer.num_kv_heads, layer.head_dim)
        assert step_weights.shape == (batch, layer.num_heads, 1, t + 1)
        torch.testing.assert_close(step_weights[:, :, 0], full_weights[:, :, t, : t + 1], rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(torch.cat(outputs, dim=1), full_out, rtol=1e-9, atol=1e-12)


def test_multi_token_chunks_equal_full_causal_pass():
    """Decoding in chunks of several tokens (bottom-right causal within the chunk) also matches a full pass."""
    torch.manual_seed(2)
    layer = ac.GroupedQueryAttention(24, 6, 3).double().eval()
    x = randn(1, 9, 24, seed=3)
    full_out, _ = layer(x, is_causal=True)
    cache = ac.KVCache(initial_capacity=2)
    chunks = [layer(x[:, start:stop], is_causal=True, cache=cache)[0] for start, stop in [(0, 2), (2, 5), (5, 9)]]
    torch.testing.assert_close(torch.cat(chunks, dim=1), full_out, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_nbytes_counts_cached_tokens_not_capacity(dtype):
    """nbytes == 2·B·Hkv·T·D·element_size even while capacity > T; an empty cache has 0 bytes."""
    batch, heads, head_dim = 2, 3, 4
    cache = ac.KVCache(initial_capacity=16)
    assert len(cache) == 0 and cache.nbytes == 0 and cache.capacity == 0
    element_size = torch.tensor([], dtype=dtype).element_size()
    for step in range(1, 21):
        token = randn(batch, heads, 1, head_dim, seed=step, dtype=dtype)
        cache.update(token, token)
        assert len(cache) == step
        assert cache.nbytes == expected_nbytes(cache, batch, heads, head_dim, element_size)
        assert cache.capacity >= step
        if step < 16:
            assert cache.capacity > len(cache)


def test_nbytes_with_different_value_dim():
    """With Dv != D, nbytes counts B·Hkv·T·(D + Dv)·element_size."""
    cache = ac.KVCache()
    cache.update(randn(2, 3, 5, 4), randn(2, 3, 5, 7))
    assert cache.nbytes == 2 * 3 * 5 * (4 + 7) * 8


def test_appends_grow_geometrically():
    """100 single-token appends reallocate the key buffer O(log n) times, not every step."""
    cache = ac.KVCache(initial_capacity=1)
    buffers = []  # kept alive so a freed buffer's address cannot be reused and hide a reallocation
    for step in range(100):
        cache.update(randn(1, 2, 1, 4, seed=step), randn(1, 2, 1, 4))
        buffers.append(cache._keys)
    pointers = {buffer.data_ptr() for buffer in buffers}
    # Doubling from 1 to >= 100 takes 8 buffers (1, 2, 4, ..., 128); allow a little slack, far below 100.
    assert len(pointers) <= 10
    assert cache.capacity < 2 * 100


def test_keys_and_values_are_views_equal_to_concatenation():
    """cache.keys / cache.values are views of the buffer holding torch.cat of everything appended."""
    cache = ac.KVCache(initial_capacity=3)
    appended_k, appended_v = [], []
    for step, n in enumerate([2, 1, 4, 1, 5]):
        k, v = randn(2, 2, n, 3, seed=2 * step), randn(2, 2, n, 6, seed=2 * step + 1)
        all_k, all_v = cache.update(k, v)
        appended_k.append(k)
        appended_v.append(v)
        assert torch.equal(cache.keys, torch.cat(appended_k, dim=-2))
        assert torch.equal(cache.values, torch.cat(appended_v, dim=-2))
        assert torch.equal(all_k, cache.keys) and torch.equal(all_v, cache.values)
        assert cache.keys.data_ptr() == cache._keys.data_ptr()  # a view into the buffer, not a copy
        assert cache.values.data_ptr() == cache._values.data_ptr()
        assert cache.keys._base is not None


def test_reset_empties_the_cache():
    """reset() forgets every token; the cache can then take a different shape."""
    cache = ac.KVCache()
    cache.update(randn(1, 2, 3, 4), randn(1, 2, 3, 4))
    cache.reset()
    assert len(cache) == 0 and cache.nbytes == 0
    cache.update(randn(3, 1, 2, 5), randn(3, 1, 2, 5))
    assert cache.keys.shape == (3, 1, 2, 5)


def test_empty_cache_has_no_keys():
    """Reading keys before the first update raises ValueError pointing at the prefill."""
    with pytest.raises(ValueError, match="empty"):
        _ = ac.KVCache().keys


MISMATCHES = {
    "batch": ((2, 2, 1, 4), (2, 2, 1, 4)),
    "kv-heads": ((1, 3, 1, 4), (1, 3, 1, 4)),
    "key-dim": ((1, 2, 1, 5), (1, 2, 1, 4)),
    "value-dim": ((1, 2, 1, 4), (1, 2, 1, 6)),
}


@pytest.mark.parametrize(("key_shape", "value_shape"), MISMATCHES.values(), ids=MISMATCHES.keys())
def test_mismatched_append_raises(key_shape, value_shape):
    """Appending keys/values whose B, Hkv or feature dims differ from the cached ones raises ValueError."""
    cache = ac.KVCache()
    cache.update(randn(1, 2, 3, 4), randn(1, 2, 3, 4))
    with pytest.raises(ValueError, match=r"this cache holds keys \(1, 2, 'n', 4\)"):
        cache.update(randn(*key_shape), randn(*value_shape))
    assert len(cache) == 3  # the failed append changed nothing


@pytest.mark.parametrize(
    ("key_shape", "value_shape"),
    [((1, 2, 3), (1, 2, 3)), ((1, 2, 3, 4), (1, 2, 2, 4)), ((1, 2, 3, 4), (1, 3, 3, 4))],
    ids=["3d", "length", "heads"],
)
def test_malformed_keys_values_raise(key_shape, value_shape):
    """keys/values that are not 4-D or disagree in (B, Hkv, n) raise ValueError naming both shapes."""
    with pytest.raises(ValueError, match=r"matching first three dims.*got keys"):
        ac.KVCache().update(randn(*key_shape), randn(*value_shape))


def test_dtype_change_raises():
    """Appending float32 to a float64 cache raises ValueError naming both dtypes."""
    cache = ac.KVCache()
    cache.update(randn(1, 2, 1, 4), randn(1, 2, 1, 4))
    with pytest.raises(ValueError, match="torch.float64.*torch.float32"):
        cache.update(randn(1, 2, 1, 4).float(), randn(1, 2, 1, 4).float())


def test_cache_with_cross_attention_context_raises():
    """cache= together with a context raises ValueError (it would re-append the context every step)."""
    layer = ac.MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="cross-attention"):
        layer(torch.randn(1, 1, 8), torch.randn(1, 4, 8), cache=ac.KVCache())


@pytest.mark.parametrize("capacity", [0, -3, 2.5, True])
def test_bad_initial_capacity_raises(capacity):
    """initial_capacity must be an int >= 1."""
    with pytest.raises(ValueError, match=rf"initial_capacity must be an int >= 1, got {capacity!r}"):
        ac.KVCache(initial_capacity=capacity)


def test_truncate_keeps_a_prefix_and_later_appends_overwrite_the_rest():
    """truncate(n) forgets the newest tokens without copying; the next append continues from n."""
    cache = ac.KVCache()
    keys, values = (
        randn(1, 2, 6, 4, dtype=torch.float32),
        randn(1, 2, 6, 4, seed=1, dtype=torch.float32),
    )  # (B, Hkv, T, D)
    cache.update(keys, values)
    buffer = cache._keys.data_ptr()
    cache.truncate(4)
    assert len(cache) == 4 and cache.nbytes == 2 * 1 * 2 * 4 * 4 * 4
    assert torch.equal(cache.keys, keys[:, :, :4])  # copies, so exact
    new_k, new_v = randn(1, 2, 1, 4, seed=2, dtype=torch.float32), randn(1, 2, 1, 4, seed=3, dtype=torch.float32)
    all_k, all_v = cache.update(new_k, new_v)
    assert torch.equal(all_k, torch.cat([keys[:, :, :4], new_k], dim=2))
    assert torch.equal(all_v, torch.cat([values[:, :, :4], new_v], dim=2))
    assert cache._keys.data_ptr() == buffer
    for bad in (-1, 6, 2.0, True):
        with pytest.raises(ValueError, match="length must be an int"):
            cache.truncate(bad)
