"""KVCache(window=W, num_sinks=S): a ring buffer. Decoding through it, in any chunking, equals one full pass
under the window mask; memory stays at S + W tokens; a decode step on a full ring copies nothing.

float64 throughout: every comparison is the same sums in another order, so 1e-12 is far above the rounding
(~1e-16 relative on O(1) values) and far below any real mistake (a wrong key moves outputs by ~1e-1).
The reference is always a layer WITHOUT a window and WITHOUT a cache, given the mask explicitly.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from reference import F64, randn
from torch.utils._python_dispatch import TorchDispatchMode

import attn_core as ac

HIDDEN, HEAD_DIM = 24, 6
LAYERS = {"MHA": (4, 4), "GQA": (4, 2), "MQA": (4, 1)}  # (num_heads, num_kv_heads)


def make_pair(heads=4, kv_heads=2, *, rope=True, sliding_window=None, seed=0):
    """(layer under test, reference twin with the same weights but no window)."""
    torch.manual_seed(seed)
    base = 100.0 if rope else None
    layer = ac.GroupedQueryAttention(
        HIDDEN, heads, kv_heads, head_dim=HEAD_DIM, rope_base=base, sliding_window=sliding_window
    )
    twin = ac.GroupedQueryAttention(HIDDEN, heads, kv_heads, head_dim=HEAD_DIM, rope_base=base)
    twin.load_state_dict(layer.state_dict())
    return layer.to(F64).eval(), twin.to(F64).eval()


def window_mask(length: int, window: int, num_sinks: int = 0) -> torch.Tensor:
    """Causal; key k visible to query q when q - window < k <= q, or k < num_sinks (the sinks)."""
    key = torch.arange(length)  # (L,)
    sinks = (key < num_sinks) & ac.causal_mask(length)  # (L, L)
    return ac.sliding_window_mask(length, window) | sinks  # (L, L)


def decode(layer, x, chunks, cache):
    """Feed the tokens of x (B, L, hidden) the cache does not hold yet (from len(cache) on) through `layer` in
    chunks of the given sizes; return their outputs (B, L', hidden) and their weights scattered back to key
    positions (B, H, L', L), using cache.key_positions."""
    batch, length, _ = x.shape
    first = start = len(cache)
    weights_full = torch.zeros(batch, layer.num_heads, length - first, length, dtype=F64)  # (B, H, L', L)
    outs = []
    for n in chunks:
        out, weights = layer(x[:, start : start + n], is_causal=True, cache=cache)  # (B, n, hidden), (B, H, n, T)
        key_positions = cache.key_positions
        if key_positions is None:  # tokens 0 .. T-1 in order
            key_positions = torch.arange(weights.shape[-1])  # (T,)
        assert key_positions.shape == (weights.shape[-1],)
        real = key_positions < start + n  # (T,): a slot emptied by truncate sits in the future
        assert not weights[..., ~real].any()
        weights_full[:, :, start - first : start - first + n, key_positions[real]] = weights[..., real]
        outs.append(out)
        start += n
    assert start == length
    return torch.cat(outs, dim=1), weights_full  # (B, L', hidden), (B, H, L', L)


def chunking(size: int, length: int) -> list[int]:
    return [size] * (length // size) + ([length % size] if length % size else [])


W = 4
LENGTH = 3 * W + 5  # wraps the ring several times
CHUNK_SIZES = [1, 2, W - 1, W, W + 1, 3 * W, LENGTH]


# --------------------------------------------------------------------------- decoding == the masked full pass
@pytest.mark.parametrize("size", CHUNK_SIZES)
@pytest.mark.parametrize("rope", [True, False], ids=["rope", "no-rope"])
@pytest.mark.parametrize("kind", LAYERS)
def test_window_cache_through_sliding_layer_equals_full_masked_pass(size, rope, kind):
    layer, twin = make_pair(*LAYERS[kind], rope=rope, sliding_window=W)
    x = randn(2, LENGTH, HIDDEN, seed=1)  # (B, L, hidden), batch 2
    mask = ac.sliding_window_mask(LENGTH, W)  # (L, L)
    expected, expected_weights = twin(x, mask=mask)  # (B, L, hidden), (B, H, L, L)
    no_cache, _ = layer(x, is_causal=True)  # the layer's own window, without a cache
    torch.testing.assert_close(no_cache, expected, rtol=0, atol=1e-12)
    out, weights = decode(layer, x, chunking(size, LENGTH), ac.KVCache(window=W))
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(weights, expected_weights, rtol=0, atol=1e-12)


@pytest.mark.parametrize("num_sinks", [1, 2, 5])
@pytest.mark.parametrize("size", [1, 2, W + 1, 3 * W])
def test_sinks_through_a_plain_layer_equal_window_or_sink_mask(num_sinks, size):
    layer, twin = make_pair(rope=True, sliding_window=None)
    x = randn(1, LENGTH, HIDDEN, seed=2)
    expected, expected_weights = twin(x, mask=window_mask(LENGTH, W, num_sinks))
    cache = ac.KVCache(window=W, num_sinks=num_sinks)
    out, weights = decode(layer, x, chunking(size, LENGTH), cache)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(weights, expected_weights, rtol=0, atol=1e-12)
    assert cache.num_cached == num_sinks + W and len(cache) == LENGTH


def test_sliding_layer_with_a_growing_cache_equals_full_masked_pass():
    """KVCache() keeps every token; the layer's own window still hides the old ones."""
    layer, twin = make_pair(sliding_window=W)
    x = randn(2, LENGTH, HIDDEN, seed=15)
    out, weights = decode(layer, x, [5, 1, 1, 7, 1, 2], ac.KVCache(initial_capacity=2))
    expected, expected_weights = twin(x, mask=ac.sliding_window_mask(LENGTH, W))
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(weights, expected_weights, rtol=0, atol=1e-12)


@given(
    window=st.integers(1, 5),
    num_sinks=st.integers(0, 3),
    sliding=st.booleans(),
    chunks=st.lists(st.integers(1, 16), min_size=1, max_size=16),
)
def test_random_chunkings_equal_full_masked_pass(window, num_sinks, sliding, chunks):
    sizes, total = [], 0
    for n in chunks:  # cut the drawn sizes to a length of 14; the last chunk takes whatever is left
        if total < 14:
            sizes.append(min(n, 14 - total))
            total += sizes[-1]
    if total < 14:
        sizes.append(14 - total)
    layer, twin = make_pair(sliding_window=window if sliding else None, seed=window)
    x = randn(1, 14, HIDDEN, seed=num_sinks)
    # what the cache keeps (window or sink); a layer's own sliding window (here the same W) bounds only the
    # non-sink keys: the cache's sinks stay visible
    expected, _ = twin(x, mask=window_mask(14, window, num_sinks))
    out, _ = decode(layer, x, sizes, ac.KVCache(window=window, num_sinks=num_sinks))
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- metamorphic
def test_changing_future_tokens_leaves_past_outputs_unchanged():
    layer, _ = make_pair(sliding_window=W)
    x = randn(1, LENGTH, HIDDEN, seed=4)
    x_changed = x.clone()
    x_changed[:, 9:] = randn(1, LENGTH - 9, HIDDEN, seed=5)
    out, _ = decode(layer, x, chunking(3, LENGTH), ac.KVCache(window=W))
    out_changed, _ = decode(layer, x_changed, chunking(3, LENGTH), ac.KVCache(window=W))
    assert torch.equal(out[:, :9], out_changed[:, :9])  # bitwise: the same ops on the same numbers
    assert not torch.allclose(out[:, 9:], out_changed[:, 9:], atol=1e-3)


@pytest.mark.parametrize("window", [LENGTH, LENGTH + 3])
def test_window_at_least_the_length_is_full_causal_attention(window):
    layer, twin = make_pair(sliding_window=window)
    x = randn(2, LENGTH, HIDDEN, seed=6)
    out, _ = decode(layer, x, chunking(2, LENGTH), ac.KVCache(window=window))
    torch.testing.assert_close(out, twin(x, is_causal=True)[0], rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- memory, order, no copies
@pytest.mark.parametrize(("window", "num_sinks"), [(4, 0), (4, 2), (1, 0), (3, 5)])
def test_nbytes_is_bounded_by_sinks_plus_window(window, num_sinks):
    batch, kv_heads, head_dim, value_dim = 2, 3, 4, 5
    cache = ac.KVCache(window=window, num_sinks=num_sinks)
    assert cache.nbytes == 0 and cache.num_cached == 0
    for step, n in enumerate([1, 2, 1, 7, 1, 1, 3, 1, 1, 1]):
        cache.update(randn(batch, kv_heads, n, head_dim, seed=step), randn(batch, kv_heads, n, value_dim))
        held = min(len(cache), num_sinks + window)
        assert cache.num_cached == held
        assert cache.nbytes == batch * kv_heads * held * (head_dim + value_dim) * 8
        assert cache.keys.shape == (batch, kv_heads, held, head_dim)
        assert cache.values.shape == (batch, kv_heads, held, value_dim)
    assert len(cache) == 19


@pytest.mark.parametrize("num_sinks", [0, 2])
def test_keys_values_positions_in_position_order_after_wrap(num_sinks):
    """Each token's key/value holds its own position, so the cached tensors must read 0..S-1, then the last W."""
    cache = ac.KVCache(window=W, num_sinks=num_sinks)
    for start, n in [(0, 3), (3, 1), (4, 5), (9, 1), (10, 1), (11, 2)]:
        pos = torch.arange(start, start + n, dtype=F64)  # (n,)
        cache.update(pos.expand(1, 2, n)[..., None].expand(1, 2, n, 3), -pos.expand(1, 2, n)[..., None])
        length = start + n
        expected = [p for p in range(length) if p < num_sinks or p >= length - W]
        assert cache.positions.tolist() == expected
        assert cache.keys[0, 1, :, 2].tolist() == expected
        assert cache.values[0, 0, :, 0].tolist() == [-p for p in expected]


class CountCopies(TorchDispatchMode):
    """Records every op that allocates at least `numel` new elements (a copy of the whole ring or more).
    Views (outputs sharing an input's storage) allocate nothing and are not counted."""

    def __init__(self, numel: int):
        super().__init__()
        self.numel, self.big = numel, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        inputs = [*args, *(kwargs or {}).values()]
        storages = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}
        for t in result if isinstance(result, (tuple, list)) else [result]:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in storages:
                if t.numel() >= self.numel:
                    self.big.append(f"{func} -> {tuple(t.shape)}")
        return result


@pytest.mark.parametrize("num_sinks", [0, 2])
def test_a_decode_step_on_a_full_ring_copies_nothing(num_sinks):
    layer, _ = make_pair(sliding_window=W)
    cache = ac.KVCache(window=W, num_sinks=num_sinks)
    x = randn(2, 40, HIDDEN, seed=7)
    with torch.no_grad():
        layer(x[:, :10], is_causal=True, cache=cache)  # prefill past the ring's size: it has wrapped
        buffer = cache._keys.data_ptr()
        ring_numel = cache._keys.numel()  # (B, Hkv, S + W, D)
        for t in range(10, 40):
            with CountCopies(ring_numel) as mode:
                keys, _ = cache.update(randn(2, 2, 1, HEAD_DIM, seed=t), randn(2, 2, 1, HEAD_DIM, seed=-t))
            assert mode.big == [], f"step {t} copied the ring: {mode.big}"
            assert keys.data_ptr() == buffer and cache._keys.data_ptr() == buffer
            with CountCopies(ring_numel) as mode:
                layer(x[:, t : t + 1], is_causal=True, cache=cache)
            assert mode.big == [], f"layer step {t} copied the ring: {mode.big}"
        assert cache._keys.data_ptr() == buffer
        with CountCopies(ring_numel) as mode:
            cache.keys  # noqa: B018 (position order after a wrap is a gather: the counter must see that copy)
        assert any("index" in op for op in mode.big), mode.big


# --------------------------------------------------------------------------- truncate, reset, errors
def test_truncate_before_wrap_then_decode_equals_the_shorter_sequence():
    layer, twin = make_pair(sliding_window=W)
    x, other = randn(1, 10, HIDDEN, seed=8), randn(1, 10, HIDDEN, seed=9)
    cache = ac.KVCache(window=W, num_sinks=1)
    layer(x[:, :5], is_causal=True, cache=cache)  # 5 == S + W tokens: full, nothing evicted yet
    cache.truncate(2)
    assert len(cache) == 2 and cache.num_cached == 2
    sequence = torch.cat([x[:, :2], other[:, 2:]], dim=1)  # the kept 2 tokens, then new ones: (1, 10, hidden)
    rest, rest_weights = decode(layer, sequence, [1, 3, 1, 3], cache)  # (1, 8, hidden), (1, H, 8, 10)
    expected, expected_weights = twin(sequence, mask=window_mask(10, W, 1))  # the sink stays visible
    torch.testing.assert_close(rest, expected[:, 2:], rtol=0, atol=1e-12)
    torch.testing.assert_close(rest_weights, expected_weights[:, :, 2:], rtol=0, atol=1e-12)


@pytest.mark.parametrize("sliding_window", [None, 3])
@pytest.mark.parametrize("seen", [3, 7])
def test_truncate_to_zero_after_a_wrap_starts_over(seen, sliding_window):
    """After the ring wrapped, truncate(0) then token-by-token decoding equals a fresh sequence: the discarded
    tokens' slots get no weight. (Before the fix the ring still counted as wrapped, the decode shortcut skipped
    the mask, and an emptied slot got weight 0.398.)"""
    layer, twin = make_pair(sliding_window=sliding_window, seed=seen)
    x, fresh = randn(1, seen, HIDDEN, seed=16), randn(1, 5, HIDDEN, seed=17)
    cache = ac.KVCache(window=2)  # Gemma 3's default: no sinks, no rollback slots
    decode(layer, x, [1] * seen, cache)  # more tokens than slots: wrapped
    cache.truncate(0)
    assert len(cache) == 0 and cache.num_cached == 0 and cache.positions.tolist() == []
    out, weights = decode(layer, fresh, [1] * 5, cache)  # (1, 5, hidden), (1, H, 5, 5)
    expected, expected_weights = twin(fresh, mask=ac.sliding_window_mask(5, 2))
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(weights, expected_weights, rtol=0, atol=1e-12)
    assert cache.positions.tolist() == [3, 4]


def test_truncate_that_needs_evicted_keys_raises_and_changes_nothing():
    cache = ac.KVCache(window=W)
    cache.update(randn(1, 1, 10, 2), randn(1, 1, 10, 2))  # holds positions 6..9
    keys = cache.keys.clone()
    with pytest.raises(ValueError, match=r"needs the keys at positions 5\.\.7.*max_rollback"):
        cache.truncate(8)  # the query at position 8 would need key 5
    assert len(cache) == 10 and cache.positions.tolist() == [6, 7, 8, 9] and torch.equal(cache.keys, keys)
    cache.truncate(10)  # no roll-back: allowed
    cache.truncate(9)  # the query at position 9 needs 6..8: all held
    assert cache.positions.tolist() == [6, 7, 8] and cache.num_cached == 3 and cache.nbytes == 3 * 2 * 2 * 8


@pytest.mark.parametrize("target", [0, 1, 2])
def test_truncate_into_the_sinks_after_wrap_keeps_working(target):
    """Sinks are never evicted, so rolling back to fewer tokens than num_sinks needs nothing the ring lost."""
    layer, twin = make_pair(sliding_window=None)
    x, other = randn(1, 12, HIDDEN, seed=13), randn(1, 12, HIDDEN, seed=14)
    cache = ac.KVCache(window=2, num_sinks=3)
    decode(layer, x[:, :9], [9], cache)  # wrapped: holds 0, 1, 2 and 7, 8
    cache.truncate(target)
    assert len(cache) == target and cache.positions.tolist() == list(range(target))
    sequence = torch.cat([x[:, :target], other[:, target:]], dim=1)  # (1, 12, hidden)
    out, _ = decode(layer, sequence, [1, 4, 1] + [12 - target - 6], cache)
    expected, _ = twin(sequence, mask=window_mask(12, 2, 3))
    torch.testing.assert_close(out, expected[:, target:], rtol=0, atol=1e-12)


OPS = st.lists(st.tuples(st.sampled_from(["append", "truncate"]), st.integers(1, 7)), min_size=1, max_size=12)


@given(window=st.integers(1, 4), num_sinks=st.integers(0, 2), max_rollback=st.integers(0, 3), ops=OPS)
def test_random_appends_and_rollbacks_equal_the_full_pass(window, num_sinks, max_rollback, ops):
    """Speculative decoding's pattern: append, roll back, append different tokens. Every appended chunk's output
    equals the full pass over the sequence as it now stands; a roll-back within max_rollback of the furthest
    position ever written must succeed; a refused one raises ValueError and changes nothing."""
    layer, twin = make_pair(sliding_window=None, seed=window)
    pool = randn(1, 90, HIDDEN, seed=max_rollback)  # every appended token is a fresh row, never a re-used one
    cache = ac.KVCache(window=window, num_sinks=num_sinks, max_rollback=max_rollback)
    sequence, furthest, used = [], 0, 0  # pool rows of the tokens in the cache; the high-water mark
    for kind, amount in ops:
        if kind == "append":
            sequence += list(range(used, used + amount))
            used += amount
            furthest = max(furthest, len(sequence))
            x = pool[:, sequence]  # (1, L, hidden)
            out, _ = decode(layer, x, [amount], cache)  # (1, amount, hidden)
            expected, _ = twin(x, mask=window_mask(len(sequence), window, num_sinks))
            torch.testing.assert_close(out, expected[:, -amount:], rtol=0, atol=1e-12)
        else:
            target = max(len(sequence) - amount, 0)
            must_work = furthest <= num_sinks + window + max_rollback or target >= furthest - max_rollback
            before = (len(cache), cache.positions.tolist() if len(cache) else [])
            try:
                cache.truncate(target)
            except ValueError:
                assert not must_work, f"truncate({target}) refused; furthest {furthest}, held {before[1]}"
                assert (len(cache), cache.positions.tolist() if len(cache) else []) == before
                continue
            sequence = sequence[:target]
        # Held at least: the sinks, and the keys the next query needs (after an append the last `window`
        # tokens, after a roll-back the `window - 1` before the next query, which brings its own key).
        length, recent = len(sequence), window if kind == "append" else window - 1
        needed = set(range(min(length, num_sinks))) | set(range(max(num_sinks, length - recent), length))
        assert needed <= set(cache.positions.tolist()) <= set(range(length))
        assert len(needed) <= cache.num_cached <= num_sinks + window + max_rollback
        assert cache.nbytes == 2 * cache.num_cached * 2 * HEAD_DIM * 8  # B = 1, Hkv = 2, keys and values


@pytest.mark.parametrize("kwargs", [dict(max_rollback=-1), dict(max_rollback=1.0), dict(max_rollback=True)])
def test_bad_max_rollback_raises(kwargs):
    with pytest.raises(ValueError, match="max_rollback must be an int >= 0"):
        ac.KVCache(window=W, **kwargs)


def test_reset_forgets_everything_and_the_cache_is_reusable():
    layer, twin = make_pair(sliding_window=W)
    cache = ac.KVCache(window=W, num_sinks=1)
    decode(layer, randn(3, 9, HIDDEN, seed=10), [9], cache)
    cache.reset()
    assert len(cache) == 0 and cache.nbytes == 0 and cache.num_cached == 0 and cache.key_positions is None
    x = randn(1, 11, HIDDEN, seed=11)  # another batch size after the reset
    out, _ = decode(layer, x, [1] * 11, cache)
    torch.testing.assert_close(out, twin(x, mask=window_mask(11, W, 1))[0], rtol=0, atol=1e-12)  # sink visible


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(window=0), "window must be None"),
        (dict(window=-3), "window must be None"),
        (dict(window=2.0), "window must be None"),
        (dict(window=True), "window must be None"),
        (dict(window=4, num_sinks=-1), "num_sinks must be an int >= 0"),
        (dict(window=4, num_sinks=1.0), "num_sinks must be an int >= 0"),
        (dict(window=4, num_sinks=True), "num_sinks must be an int >= 0"),
        (dict(num_sinks=2), r"Pass window=W as well"),
    ],
)
def test_bad_window_or_sinks_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ac.KVCache(**kwargs)


# --------------------------------------------------------------------------- gradients
@pytest.mark.parametrize(("num_sinks", "sliding"), [(0, True), (2, False)])
def test_gradients_through_a_window_cache_equal_the_full_masked_pass(num_sinks, sliding):
    layer, twin = make_pair(sliding_window=W if sliding else None)
    x = randn(2, LENGTH, HIDDEN, seed=12).requires_grad_()
    expected, _ = twin(x, mask=window_mask(LENGTH, W, num_sinks))
    expected_grads = torch.autograd.grad(expected.square().sum(), [x, *twin.parameters()])
    out, _ = decode(layer, x, [3, 1, 1, W + 1, 1, 2, 1, 1, 2], ac.KVCache(window=W, num_sinks=num_sinks))
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    grads = torch.autograd.grad(out.square().sum(), [x, *layer.parameters()])
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected_grad, rtol=0, atol=1e-12)
