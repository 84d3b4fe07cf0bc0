"""Notebook 13b's checkers accept right answers and name the usual wrong ones.

For each checker: the stub fails, the reference passes, a right answer written differently passes, each usual
mistake gets its own diagnosis (a phrase only it contains), junk gets one ❌ line. The references are checked
against the engine's own BlockManager (prefix hits, eviction order)."""

import pytest
from learner_answers import JUNK, has_chinese_entry, one_red_line, stub

from attn_core.exercises import serving_engine as ex
from attn_core.serving import BlockManager, chain_block_hashes

CHECKS = [
    (ex.check_prefix_hit_tokens, ex.prefix_hit_tokens),
    (ex.check_eviction_order, ex.eviction_order),
    (ex.check_max_concurrent_seqs, ex.max_concurrent_seqs),
]


@pytest.mark.parametrize("check, reference", CHECKS)
def test_stub_fails_reference_passes(check, reference, capsys):
    assert not check(stub)
    assert "not attempted" in capsys.readouterr().out
    assert check(reference)
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("check, reference", CHECKS)
@pytest.mark.parametrize("junk", JUNK, ids=range(len(JUNK)))
def test_junk_gets_one_red_line(check, reference, junk, capsys):
    assert not check(lambda *args: junk)
    assert one_red_line(capsys.readouterr().out)


def test_prefix_hits_match_the_block_manager():
    for cached, prompt, bs in ex._HIT_CASES:
        manager = BlockManager(16, bs)
        table = [manager.allocate() for _ in range(-(-len(cached) // bs))]
        hashes = chain_block_hashes(cached, bs)
        for i in range(len(cached) // bs):
            manager.register(table[i], hashes[i - 1] if i else None, cached[i * bs : (i + 1) * bs])
        hits = manager.lookup(prompt, chain_block_hashes(prompt, bs))
        assert len(hits) * bs == ex.prefix_hit_tokens(cached, prompt, bs)


def test_eviction_order_matches_the_block_manager():
    for released, hit_again, n in ex._EVICT_CASES:
        manager = BlockManager(10, 1)
        blocks = [manager.allocate() for _ in range(10)]  # every block taken: no free block is left
        for block in blocks:
            manager.register(block, None, [block])
        for block in released:
            manager.release(block)
        for block in hit_again:
            manager.retain(block)
        assert [manager.allocate() for _ in range(n)] == ex.eviction_order(released, hit_again, n)


def hits_token_by_token(cached, prompt, bs):
    common = 0
    while common < min(len(cached), len(prompt)) and cached[common] == prompt[common]:
        common += 1
    return min(common, len(prompt) - 1)


def hits_with_last_token(cached, prompt, bs):
    hits = 0
    while hits + bs <= min(len(cached), len(prompt)) and cached[hits : hits + bs] == prompt[hits : hits + bs]:
        hits += bs
    return hits


def hits_unchained(cached, prompt, bs):
    limit = min(len(cached) // bs, (len(prompt) - 1) // bs) * bs
    return sum(bs for i in range(0, limit, bs) if cached[i : i + bs] == prompt[i : i + bs])


def budget_without(factor):
    def fn(memory, weights, layers, heads, kv_heads, dim, size, tokens):
        per_token = {
            "no 2": layers * kv_heads * dim * size,
            "query heads": 2 * layers * heads * dim * size,
        }.get(factor, 2 * layers * kv_heads * dim * size)
        free = memory if factor == "weights" else memory - weights
        return -(-free // (per_token * tokens)) if factor == "ceil" else free // (per_token * tokens)

    return fn


WRONG = [
    (ex.check_prefix_hit_tokens, hits_token_by_token, "token by token"),
    (ex.check_prefix_hit_tokens, hits_with_last_token, "includes the prompt's last token"),
    (ex.check_prefix_hit_tokens, hits_unchained, "chain the hash"),
    (ex.check_prefix_hit_tokens, lambda c, p, bs: 3, "expected"),
    (ex.check_eviction_order, lambda r, h, n: [b for b in r if b not in h][::-1][:n], "most recently released"),
    (ex.check_eviction_order, lambda r, h, n: r[:n], "took back"),
    (ex.check_eviction_order, lambda r, h, n: [99], "expected"),
    (ex.check_max_concurrent_seqs, budget_without("no 2"), "multiply by 2"),
    (ex.check_max_concurrent_seqs, budget_without("query heads"), "num_kv_heads"),
    (ex.check_max_concurrent_seqs, budget_without("weights"), "subtract weight_bytes"),
    (ex.check_max_concurrent_seqs, budget_without("ceil"), "round down"),
    (ex.check_max_concurrent_seqs, lambda *a: 1, "expected"),
]


@pytest.mark.parametrize("check, wrong, phrase", WRONG, ids=[w[2] for w in WRONG])
def test_each_mistake_is_named(check, wrong, phrase, capsys):
    assert not check(wrong)
    out = capsys.readouterr().out
    assert one_red_line(out) and phrase in out, out
    assert has_chinese_entry(out)  # every diagnosis has its Chinese entry


def test_right_answers_written_differently_pass():
    assert ex.check_eviction_order(lambda r, h, n: tuple(x for x in r if x not in set(h))[:n])
    assert ex.check_max_concurrent_seqs(lambda m, w, L, H, K, D, B, T: int((m - w) / (2 * L * K * D * B * T)))
