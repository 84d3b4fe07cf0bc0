"""Gemma 3's context (32,768 positions, from the GGUF) is enforced before any compute, and a long prompt goes
through the KV caches in query chunks (no (B, H, L, L) scores): chunked == unchunked.

Chunked vs unchunked in float64: both are the same sums in another grouping (the local layers' ring caches hand
back the same keys the window mask would show), so each is within the float64 bound of test_gemma3.py
(LOGIT_TOL64 * max|logit|, 18 blocks * 10 roundings * sqrt(2048) eps) of the exact logits: twice that apart.
"""

from __future__ import annotations

import math

import pytest
import torch

import attn_core as ac

LOGIT_TOL64 = 18 * 10 * math.sqrt(2048) * 2.0**-53
COLOURS, THINGS = ["red", "blue", "green", "old", "new", "small", "large"], ["box", "jar", "bag", "cart", "shelf"]
LONG_TEXT = " ".join(f"Item {i}: the {COLOURS[i % 7]} {THINGS[i % 5]} holds {i * 7 % 31} stones." for i in range(46))


class Computed(Exception):
    """Raised by a hook on the embedding: the model started computing."""


@pytest.fixture
def no_compute(lm):
    def hook(module, args):
        raise Computed

    handle = lm.embed.register_forward_pre_hook(hook)
    yield
    handle.remove()


def test_the_context_comes_from_the_gguf(lm):
    assert lm.config.context_length == 32768


def test_past_the_context_raises_before_any_compute(lm, no_compute):
    limit = lm.config.context_length
    too_long = torch.zeros(1, limit + 1, dtype=torch.long)  # (1, 32769)
    with pytest.raises(ValueError, match=r"the prompt \(32769 tokens\) exceeds the model's context length of 32768"):
        lm(too_long)
    with pytest.raises(ValueError, match=r"prompt \+ max_new_tokens \(32769 tokens\) exceeds .* 32768"):
        lm.generate(torch.zeros(1, limit - 9, dtype=torch.long), 10)
    with pytest.raises(ValueError, match="32768"):
        lm.generate(too_long, 0, attention_mask=torch.ones_like(too_long))
    with pytest.raises(Computed):  # exactly the context is fine: the model starts computing
        lm.generate(torch.zeros(1, limit - 10, dtype=torch.long), 10)


def test_past_the_context_through_caches_raises(lm, no_compute):
    caches = lm.new_caches()
    keys = torch.zeros(1, 1, lm.config.context_length, 1)  # (B, Hkv, 32768, 1): tiny stand-in keys
    for cache in caches:
        cache.update(keys, keys)  # as if 32,768 tokens were cached
    with pytest.raises(ValueError, match=r"32768 cached \+ 1 new tokens \(32769 tokens\) exceeds"):
        lm(torch.zeros(1, 1, dtype=torch.long), caches)


@pytest.fixture(scope="module")
def lm64():
    return ac.load_gemma3(dtype=torch.float64)


@pytest.fixture(scope="module")
def long_ids(lm64):
    ids = torch.tensor([lm64.encode(LONG_TEXT)])  # (1, L): past the 512-token window
    assert 600 <= ids.shape[1] <= 660
    return ids


@pytest.fixture(scope="module")
def unchunked(lm64, long_ids):
    with torch.no_grad():
        return lm64(long_ids, prefill_chunk=long_ids.shape[1])  # (1, L, vocab): one pass, no cache


def query_lengths(lm):
    """Record the number of queries of every attention call (the scores are (B, H, Lq, Lk))."""
    lengths = []
    handles = [
        block.attention.register_forward_hook(lambda module, args, out: lengths.append(out[1].shape[-2]))
        for block in lm.layers
    ]
    return lengths, handles


@pytest.mark.slow  # two float64 passes of the real model over a 1k-token prompt: the scheduled run
def test_chunked_prefill_equals_one_pass(lm64, long_ids, unchunked):
    """Chunks of 128 (a divisor of the 512 window): the local layers' rings wrap inside the prompt; every layer,
    local or global, sees what the full causal/window mask shows, and no layer scores more than 128 queries."""
    length = long_ids.shape[1]
    lengths, handles = query_lengths(lm64)
    try:
        with torch.no_grad():
            chunked = lm64(long_ids, prefill_chunk=128)  # (1, L, vocab)
    finally:
        for handle in handles:
            handle.remove()
    assert max(lengths) == 128 and len(lengths) == 18 * math.ceil(length / 128)  # never L x L scores
    assert (chunked - unchunked).abs().max() <= 2 * LOGIT_TOL64 * unchunked.abs().max()


@pytest.mark.slow  # two float64 passes of the real model over a 1k-token prompt: the scheduled run
def test_chunked_prefill_through_given_caches(lm64, long_ids, unchunked):
    """Chunks of 200 (they straddle the window's 512 boundary) through caches the caller holds: the last logits
    equal the one pass, and the caches hold the prompt afterwards, ready to decode."""
    length = long_ids.shape[1]
    caches = lm64.new_caches()
    with torch.no_grad():
        last = lm64(long_ids, caches, prefill_chunk=200, last_only=True)  # (1, 1, vocab)
    assert (last[:, -1] - unchunked[:, -1]).abs().max() <= 2 * LOGIT_TOL64 * unchunked.abs().max()
    for block, cache in zip(lm64.layers, caches, strict=True):
        assert len(cache) == length and cache.num_cached == (length if block.is_global else 512)


def test_generate_prefills_in_chunks(lm, long_ids, monkeypatch):
    """A prompt longer than PREFILL_CHUNK (1024) is prefilled in chunks by generate; the tokens equal a prefill
    in one pass (the chunk is lowered to 256 here, below this prompt's length)."""
    from attn_core.models import gemma3

    assert gemma3.PREFILL_CHUNK == 1024
    expected = lm.generate(long_ids, 4)  # (1, L + 4): one prefill pass
    monkeypatch.setattr(gemma3, "PREFILL_CHUNK", 256)
    lengths, handles = query_lengths(lm)
    try:
        chunked = lm.generate(long_ids, 4)  # (1, L + 4)
    finally:
        for handle in handles:
            handle.remove()
    assert max(lengths) == 256 and torch.equal(chunked, expected)


def test_bad_prefill_chunk_raises(lm):
    with pytest.raises(ValueError, match="prefill_chunk must be an int >= 1"):
        lm(torch.tensor([[2, 651]]), prefill_chunk=0)
