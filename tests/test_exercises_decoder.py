"""The real-decoder notebook's checkers accept right answers and diagnose the usual wrong ones.

For each checker: the stub fails, the reference passes, correct answers written differently pass, each
usual mistake gets its own diagnosis (a phrase only that diagnosis contains), junk gets one ❌ line.
"""

import numpy as np
import pytest
import torch
from learner_answers import JUNK, one_red_line, stub, verdict

import attn_core as ac
from attn_core.exercises import decoder as ex


@pytest.mark.parametrize(
    "check, reference",
    [
        (ex.check_kv_cache_bytes, ex.kv_cache_bytes),
        (ex.check_ring_visibility, ex.ring_visibility),
        (ex.check_min_p, ex.min_p_filter),
    ],
)
def test_stub_fails_reference_passes(check, reference, capsys):
    assert not check(stub)
    assert "not attempted" in capsys.readouterr().out
    assert check(reference)
    assert "✅" in capsys.readouterr().out


# ----- exercise 1: KV-cache bytes ------------------------------------------------------------------


def bytes_loop(config, seq_len, bytes_per_element):
    total = 0
    for layer in range(config["num_layers"]):
        is_global = (layer + 1) % config["global_every"] == 0
        tokens = seq_len if is_global else min(seq_len, config["sliding_window"])
        total += 2 * config["num_kv_heads"] * config["head_dim"] * tokens * bytes_per_element
    return total


def bytes_counts(config, seq_len, bytes_per_element):
    num_global = config["num_layers"] // config["global_every"]
    num_local = config["num_layers"] - num_global
    tokens = num_global * seq_len + num_local * min(seq_len, config["sliding_window"])
    return torch.tensor(2 * config["num_kv_heads"] * config["head_dim"] * tokens * bytes_per_element)


def bytes_float(config, seq_len, bytes_per_element):
    return float(bytes_loop(config, seq_len, bytes_per_element))


def bytes_numpy(config, seq_len, bytes_per_element):
    """np.sum over the layers: a numpy.int64, as right as a Python int."""
    is_global = (np.arange(config["num_layers"]) + 1) % config["global_every"] == 0  # (layers,)
    tokens = np.where(is_global, seq_len, min(seq_len, config["sliding_window"]))  # (layers,)
    return np.sum(2 * config["num_kv_heads"] * config["head_dim"] * tokens * bytes_per_element)


def _bytes(config, seq_len, b, *, window_of, per_token_heads="num_kv_heads", factor=2):
    total = 0
    for layer in range(config["num_layers"]):
        window = window_of(layer, config)
        tokens = seq_len if window is None else min(seq_len, window)
        total += factor * config[per_token_heads] * config["head_dim"] * tokens * b
    return total


def _shipped(layer, c):
    return None if (layer + 1) % c["global_every"] == 0 else c["sliding_window"]


CACHE_MISTAKES = {
    "ignored the sliding windows": lambda c, n, b: _bytes(c, n, b, window_of=lambda i, c: None),
    "capped every layer": lambda c, n, b: _bytes(c, n, b, window_of=lambda i, c: c["sliding_window"]),
    "counted query heads": lambda c, n, b: _bytes(c, n, b, window_of=_shipped, per_token_heads="num_heads"),
    "keys only": lambda c, n, b: _bytes(c, n, b, window_of=_shipped, factor=1),
    "from layer 0": lambda c, n, b: _bytes(
        c, n, b, window_of=lambda i, c: None if i % c["global_every"] == 0 else c["sliding_window"]
    ),
    "not sliding_window + 1": lambda c, n, b: _bytes(
        c, n, b, window_of=lambda i, c: None if (i + 1) % c["global_every"] == 0 else c["sliding_window"] + 1
    ),
    "bits, not bytes": lambda c, n, b: 8 * ex.kv_cache_bytes(c, n, b),
    "number of elements": lambda c, n, b: ex.kv_cache_bytes(c, n, b) // b,
}


def test_gemma3_270m_numbers():
    # 15 local layers x 512 tokens + 3 global layers x 4096 tokens, one kv head of 256, K and V, bf16
    assert ex.kv_cache_bytes(ex.GEMMA3_270M, 4096, 2) == 2 * 256 * (15 * 512 + 3 * 4096) * 2
    assert ex.kv_cache_bytes(ex.GEMMA3_270M, 100, 2) == 18 * 2 * 256 * 100 * 2  # shorter than the window


def test_cache_bytes_equal_real_caches():
    # the reference counts what ac.KVCache holds: 18 caches laid out like Gemma 3 270M's, one token each step
    config = dict(ex.GEMMA3_270M, head_dim=4, sliding_window=6)  # small: 6-token windows, head_dim 4
    caches = [
        ac.KVCache() if (i + 1) % config["global_every"] == 0 else ac.KVCache(window=config["sliding_window"])
        for i in range(config["num_layers"])
    ]
    for step in range(1, 10):
        for cache in caches:
            k = torch.zeros(1, config["num_kv_heads"], 1, config["head_dim"], dtype=torch.float64)  # (B, Hkv, 1, D)
            cache.update(k, torch.zeros_like(k))
        assert sum(c.nbytes for c in caches) == ex.kv_cache_bytes(config, step, 8)


@pytest.mark.parametrize("fn", [bytes_loop, bytes_counts, bytes_float, bytes_numpy])
def test_cache_bytes_variants(fn, capsys):
    assert ex.check_kv_cache_bytes(fn)


@pytest.mark.parametrize("phrase", list(CACHE_MISTAKES))
def test_cache_bytes_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_kv_cache_bytes, CACHE_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


# ----- exercise 2: ring-buffer visibility ----------------------------------------------------------


def ring_loops(slot_positions, query_positions, window):
    rows = []
    for q in query_positions.tolist():
        rows.append([p != -1 and 0 <= q - p < window for p in slot_positions.tolist()])
    return torch.tensor(rows, dtype=torch.bool)  # (Lq, S)


def ring_distance(slot_positions, query_positions, window):
    distance = query_positions[:, None] - slot_positions[None, :]  # (Lq, S): how far back each key is
    filled = slot_positions[None, :] >= 0  # (1, S)
    return filled & (distance >= 0) & (distance <= window - 1)  # (Lq, S)


def ring_masked_fill(slot_positions, query_positions, window):
    held = slot_positions.masked_fill(slot_positions < 0, 2**62)  # empty slots: as if far in the future
    return (held[None, :] <= query_positions[:, None]) & (query_positions[:, None] - held[None, :] < window)


def _ring(held, query, window, *, filled=True, causal=True, width=0, slots_as_positions=False):
    p = torch.arange(held.shape[0]) if slots_as_positions else held
    q = query[:, None]  # (Lq, 1)
    visible = q - p[None, :] < window + width  # (Lq, S)
    if filled:
        visible &= p[None, :] >= 0
    if causal:
        visible &= p[None, :] <= q
    return visible


RING_MISTAKES = {
    "slot index as the key's position": lambda h, q, w: _ring(h, q, w, slots_as_positions=True),
    "one too wide": lambda h, q, w: _ring(h, q, w, width=1),
    "read empty slots": lambda h, q, w: _ring(h, q, w, filled=False),
    "read tokens after it": lambda h, q, w: _ring(h, q, w, causal=False),
    "every filled slot": lambda h, q, w: (h >= 0)[None, :].expand(q.shape[0], -1),
    "flipped convention": lambda h, q, w: ~ex.ring_visibility(h, q, w),
    "dtype torch.int64": lambda h, q, w: ex.ring_visibility(h, q, w).long(),
    "wrong shape": lambda h, q, w: ex.ring_visibility(h, q, w)[0],
}


def test_ring_visibility_matches_kv_cache():
    # Decode past the window with ac.KVCache(window=4): the slots it attends to are the ones the rule allows.
    cache = ac.KVCache(window=4)
    layer = ac.GroupedQueryAttention(8, 2, 1, rope_base=10000.0, sliding_window=4).double().eval()
    x = torch.randn(1, 11, 8, dtype=torch.float64)  # (B, L, hidden)
    layer(x[:, :6], is_causal=True, cache=cache)  # a prefill longer than the window
    for t in range(6, 11):
        _, weights = layer(x[:, t : t + 1], is_causal=True, cache=cache)  # (1, H, 1, slots)
        visible = ex.ring_visibility(cache.key_positions, torch.tensor([t]), 4)  # (1, slots)
        assert torch.equal(weights[0, 0] > 0, visible)


@pytest.mark.parametrize("fn", [ring_loops, ring_distance, ring_masked_fill])
def test_ring_variants(fn, capsys):
    assert ex.check_ring_visibility(fn)


@pytest.mark.parametrize("phrase", list(RING_MISTAKES))
def test_ring_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_ring_visibility, RING_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


# ----- exercise 3: min-p ---------------------------------------------------------------------------


def min_p_where(probs, min_p):
    keep = probs >= min_p * probs.max(dim=-1, keepdim=True).values  # (B, vocab)
    kept = torch.where(keep, probs, torch.zeros_like(probs))  # (B, vocab)
    return kept / kept.sum(dim=-1, keepdim=True)


def min_p_logits(probs, min_p):
    logits = probs.log()  # (B, vocab): softmax(log p) = p
    cut = logits.amax(dim=-1, keepdim=True) + torch.log(torch.tensor(min_p, dtype=probs.dtype))  # (B, 1)
    return logits.masked_fill(logits < cut, float("-inf")).softmax(dim=-1)  # (B, vocab)


def min_p_rows(probs, min_p):
    rows = []
    for row in probs:
        kept = row * (row >= min_p * row.max())  # (vocab,)
        rows.append(kept / kept.sum())
    return torch.stack(rows)  # (B, vocab)


def _renormalised(probs, keep):
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)


MIN_P_MISTAKES = {
    "did not renormalise": lambda p, m: p.masked_fill(p < m * p.amax(-1, keepdim=True), 0.0),
    "absolute threshold": lambda p, m: _renormalised(p, p >= m),
    "whole batch": lambda p, m: _renormalised(p, p >= m * p.max()),
    "kept the unlikely tokens": lambda p, m: _renormalised(p, p < m * p.amax(-1, keepdim=True)),
    "returned a mask": lambda p, m: p >= m * p.amax(-1, keepdim=True),
    "keep the input's dtype": lambda p, m: ex.min_p_filter(p, m).to(torch.float16),
}


def test_min_p_reference_matches_transformers():
    from transformers.generation.logits_process import MinPLogitsWarper

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 50, dtype=torch.float64, generator=g) * 2  # (B, vocab)
    for min_p in (0.05, 0.3):
        warped = MinPLogitsWarper(min_p)(None, logits.clone())  # -inf on the removed tokens
        torch.testing.assert_close(ex.min_p_filter(logits.softmax(-1), min_p), warped.softmax(-1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("fn", [min_p_where, min_p_logits, min_p_rows])
def test_min_p_variants(fn, capsys):
    assert ex.check_min_p(fn)


@pytest.mark.parametrize("phrase", list(MIN_P_MISTAKES))
def test_min_p_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_min_p, MIN_P_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


# ----- junk ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("check", [ex.check_kv_cache_bytes, ex.check_ring_visibility, ex.check_min_p])
@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_junk_gets_one_red_line(check, junk, capsys):
    assert not check(lambda *args, **kwargs: junk)
    out = capsys.readouterr().out
    assert one_red_line(out), out
