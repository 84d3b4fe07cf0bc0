"""The serving notebook's checkers accept right answers and diagnose the usual wrong ones.

For each checker: the stub fails, the reference passes, correct answers written differently pass, each usual
mistake gets its own diagnosis (a phrase only that diagnosis contains), junk gets one ❌ line. The references
are checked against attn_core itself: blocks against PagedKVCache's tables, lookups against its pool, the
streaming keys against the mask GroupedQueryAttention builds over a KVCache(window, num_sinks).
"""

import math

import numpy as np
import pytest
import torch
from learner_answers import JUNK, one_red_line, stub, verdict

import attn_core as ac
from attn_core.exercises import serving as ex

CHECKS = [
    (ex.check_blocks_needed, ex.blocks_needed),
    (ex.check_block_lookup, ex.block_lookup),
    (ex.check_streaming_keys, ex.streaming_keys),
]


@pytest.mark.parametrize("check, reference", CHECKS)
def test_stub_fails_reference_passes(check, reference, capsys):
    assert not check(stub)
    assert "not attempted" in capsys.readouterr().out
    assert check(reference)
    assert "✅" in capsys.readouterr().out


# ----- exercise 1: blocks needed --------------------------------------------------------------------


def test_blocks_needed_matches_a_paged_cache():
    lens, block_size = [5, 16, 17, 0, 33], 16
    paged = ac.PagedKVCache(block_size, num_blocks=20)
    for seq_id, length in enumerate(lens):
        paged.sequence(seq_id)
        if length:
            keys = torch.zeros(1, 1, length, 2)  # (1, Hkv, n, D)
            paged.sequence(seq_id).update(keys, keys)
    assert ex.blocks_needed(lens, block_size) == 20 - paged.num_free_blocks == 7


BLOCK_VARIANTS = {
    "math.ceil": lambda lens, bs: sum(math.ceil(length / bs) for length in lens),
    "tensor": lambda lens, bs: torch.div(torch.tensor(lens) + bs - 1, bs, rounding_mode="floor").sum(),
    "float": lambda lens, bs: float(sum((length + bs - 1) // bs for length in lens)),
    "numpy": lambda lens, bs: np.ceil(np.array(lens) / bs).astype(np.int64).sum(),  # a numpy.int64
}

BLOCK_MISTAKES = {
    "floor division": lambda lens, bs: sum(length // bs for length in lens),
    "pooled the tokens": lambda lens, bs: math.ceil(sum(lens) / bs),
    "one block too many": lambda lens, bs: sum(length // bs + 1 for length in lens),
    "that is tokens": lambda lens, bs: sum(lens),
    "reserved the longest": lambda lens, bs: len(lens) * math.ceil(max(lens) / bs),
}


@pytest.mark.parametrize("fn", BLOCK_VARIANTS.values(), ids=BLOCK_VARIANTS.keys())
def test_blocks_needed_variants(fn, capsys):
    assert ex.check_blocks_needed(fn)


@pytest.mark.parametrize("phrase", list(BLOCK_MISTAKES))
def test_blocks_needed_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_blocks_needed, BLOCK_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


# ----- exercise 2: block-table lookup ---------------------------------------------------------------


def test_block_lookup_matches_the_pool():
    """Token p's key, read at (block, slot) of the pool, is the p-th key appended to the sequence."""
    paged = ac.PagedKVCache(block_size=3, num_blocks=12)
    for seq_id in range(3):  # three short sequences take blocks 0, 1, 2; freeing one leaves a hole
        paged.sequence(seq_id).update(*[torch.full((1, 1, 2, 1), -1.0, dtype=torch.float64)] * 2)
    paged.free(1)
    keys = torch.arange(10, dtype=torch.float64).reshape(1, 1, 10, 1)  # (1, Hkv, T, D): key p holds p
    paged.sequence("s").update(keys, keys)
    table = paged.block_table("s")
    assert table != list(range(len(table)))  # a lookup that ignores the table would read other blocks
    for position in range(10):
        block, slot = ex.block_lookup(table, position, 3)
        assert paged._key_pool[block, 0, slot, 0] == position


LOOKUP_VARIANTS = {
    "divmod": lambda table, p, bs: (table[divmod(p, bs)[0]], divmod(p, bs)[1]),
    "list": lambda table, p, bs: [table[p // bs], p - (p // bs) * bs],
    "tensor": lambda table, p, bs: torch.tensor([table[p // bs], p % bs]),
    "numpy ints": lambda table, p, bs: (np.int64(table[p // bs]), np.int64(p % bs)),
    "numpy array": lambda table, p, bs: np.array([table[p // bs], p % bs]),
}

LOOKUP_MISTAKES = {
    "logical block": lambda table, p, bs: (p // bs, p % bs),
    "swapped": lambda table, p, bs: (p % bs, table[p // bs]),
    "indexed the table by the token position": lambda table, p, bs: (table[min(p, len(table) - 1)], p % bs),
    "flat index": lambda table, p, bs: table[p // bs] * bs + p % bs,
    "a tuple of 3 numbers": lambda table, p, bs: (table[p // bs], p // bs, p % bs),
    "block_table[position // block_size], position % block_size": lambda table, p, bs: (table[p // bs] + 1, p % bs),
}


@pytest.mark.parametrize("fn", LOOKUP_VARIANTS.values(), ids=LOOKUP_VARIANTS.keys())
def test_block_lookup_variants(fn, capsys):
    assert ex.check_block_lookup(fn)


@pytest.mark.parametrize("phrase", list(LOOKUP_MISTAKES))
def test_block_lookup_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_block_lookup, LOOKUP_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


def test_block_lookup_index_error_is_reported(capsys):
    ok, out = verdict(ex.check_block_lookup, lambda table, p, bs: (table[len(table)], 0), capsys)
    assert not ok and "IndexError" in out and one_red_line(out), out


# ----- exercise 3: streaming keys -------------------------------------------------------------------


@pytest.mark.parametrize("window, num_sinks", [(4, 2), (3, 0), (2, 5), (6, 1)])
def test_streaming_keys_match_the_layer_mask(window, num_sinks):
    """One pass of 14 tokens through a layer over KVCache(window, num_sinks): row q of its weights is nonzero
    exactly at ex.streaming_keys(q, ...), as it is for the same queries decoded one at a time."""
    torch.manual_seed(0)
    layer = ac.GroupedQueryAttention(8, 2, 1, rope_base=10000.0).double()
    x = torch.randn(1, 14, 8, dtype=torch.float64)  # (B, L, hidden)
    _, weights = layer(x, cache=ac.KVCache(window=window, num_sinks=num_sinks))  # (1, H, 14, 14): one chunk
    for q in range(14):
        assert (weights[0, 0, q] > 0).nonzero().flatten().tolist() == ex.streaming_keys(q, window, num_sinks)
    cache = ac.KVCache(window=window, num_sinks=num_sinks)
    for q in range(14):
        _, step = layer(x[:, q : q + 1], cache=cache)  # (1, H, 1, held keys)
        seen = cache.key_positions if cache.key_positions is not None else torch.arange(step.shape[-1])
        assert sorted(seen[step[0, 0, 0] > 0].tolist()) == ex.streaming_keys(q, window, num_sinks)


STREAM_VARIANTS = {
    "union of ranges": lambda q, w, s: sorted(set(range(min(s, q + 1))) | set(range(max(0, q - w + 1), q + 1))),
    "comprehension": lambda q, w, s: [k for k in range(q + 1) if k < s or q - k < w],
    "tensor": lambda q, w, s: torch.arange(q + 1)[(torch.arange(q + 1) < s) | (q - torch.arange(q + 1) < w)],
    "numpy": lambda q, w, s: np.flatnonzero((np.arange(q + 1) < s) | (q - np.arange(q + 1) < w)),
}

STREAM_MISTAKES = {
    "left out the sinks": lambda q, w, s: list(range(max(0, q - w + 1), q + 1)),
    "one key too many": lambda q, w, s: [k for k in range(q + 1) if k < s or q - k <= w],
    "inside the window": lambda q, w, s: [k for k in range(q + 1) if k < s or q - k < w - s],
    "re-indexed": lambda q, w, s: list(range(len([k for k in range(q + 1) if k < s or q - k < w]))),
    "listed twice": lambda q, w, s: sorted(list(range(min(s, q + 1))) + list(range(max(0, q - w + 1), q + 1))),
    "in the query's future": lambda q, w, s: sorted(set(range(s)) | set(range(max(0, q - w + 1), q + 1))),
    "ascending order": lambda q, w, s: ex.streaming_keys(q, w, s)[::-1],
}


@pytest.mark.parametrize("fn", STREAM_VARIANTS.values(), ids=STREAM_VARIANTS.keys())
def test_streaming_keys_variants(fn, capsys):
    assert ex.check_streaming_keys(fn)


@pytest.mark.parametrize("phrase", list(STREAM_MISTAKES))
def test_streaming_keys_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_streaming_keys, STREAM_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


# ----- junk -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("check", [check for check, _ in CHECKS])
@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_junk_gets_one_red_line(check, junk, capsys):
    assert not check(lambda *args, **kwargs: junk)
    out = capsys.readouterr().out
    assert one_red_line(out), out
