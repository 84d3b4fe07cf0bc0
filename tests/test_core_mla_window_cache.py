"""MultiHeadLatentAttention through KVCache(window=W, num_sinks=S, max_rollback=R): decoding in any chunking,
with roll-backs, equals one full pass under the window-or-sink mask, as for the GQA layers (the same
``ac.masks.cache_window_mask``). Before the fix MLA ignored the window: 0.37-0.69 off on prefill and chunks, and
off on single steps too once rollback slots were attended to.

float64 throughout: the same sums in another order, so 1e-12 is far above the rounding (~1e-16 relative on O(1)
values) and far below a wrong key (outputs move by ~1e-1).
"""

from __future__ import annotations

import pytest
import torch
from reference import F64, randn

import attn_core as ac

HIDDEN = 16
DIMS = dict(kv_lora_rank=4, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4)
LENGTH = 12


def make_mla(seed: int = 0) -> ac.MultiHeadLatentAttention:
    torch.manual_seed(seed)
    mla = ac.MultiHeadLatentAttention(HIDDEN, 2, **DIMS)
    with torch.no_grad():
        for p in mla.parameters():
            p.normal_(0.0, 0.5)  # RMSNorm weights too
    return mla.to(F64).eval()


def window_or_sink_mask(length: int, window: int, num_sinks: int) -> torch.Tensor:
    """Causal; query q sees key k when q - window < k <= q, or k < num_sinks."""
    sinks = (torch.arange(length) < num_sinks) & ac.causal_mask(length)  # (L, L)
    return ac.sliding_window_mask(length, window) | sinks  # (L, L)


def decode(mla, x, chunks, cache, *, absorb):
    """Feed x (B, L, hidden) from len(cache) on in chunks; return the outputs (B, L', hidden)."""
    start, outs = len(cache), []
    for n in chunks:
        out, weights = mla(x[:, start : start + n], is_causal=True, cache=cache, absorb=absorb)  # (B, n, hidden)
        key_positions = cache.key_positions if cache.key_positions is not None else torch.arange(weights.shape[-1])
        assert not weights[..., key_positions >= start + n].any()  # emptied and rollback slots get no weight
        outs.append(out)
        start += n
    assert start == x.shape[1]
    return torch.cat(outs, dim=1)  # (B, L', hidden)


CHUNKINGS = [[LENGTH], [3, 3, 4, 2], [6, 1, 1, 1, 1, 1, 1], [2] * 6, [1] * LENGTH, [5, 7]]


@pytest.mark.parametrize("absorb", [False, True], ids=["naive", "absorbed"])
@pytest.mark.parametrize(
    ("window", "num_sinks", "max_rollback"), [(4, 0, 0), (3, 0, 0), (2, 0, 0), (3, 2, 0), (3, 0, 2), (2, 1, 3)]
)
@pytest.mark.parametrize("chunks", CHUNKINGS, ids=lambda c: "-".join(map(str, c)))
def test_window_cache_equals_the_masked_full_pass(chunks, window, num_sinks, max_rollback, absorb):
    mla = make_mla()
    x = randn(2, LENGTH, HIDDEN, seed=1)  # (B, L, hidden), batch 2
    expected, _ = mla(x, window_or_sink_mask(LENGTH, window, num_sinks))  # (B, L, hidden)
    cache = ac.KVCache(window=window, num_sinks=num_sinks, max_rollback=max_rollback)
    out = decode(mla, x, chunks, cache, absorb=absorb)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    assert cache.num_cached == min(LENGTH, num_sinks + window + max_rollback)


@pytest.mark.parametrize("absorb", [False, True], ids=["naive", "absorbed"])
@pytest.mark.parametrize(("keep", "rest_chunks"), [(9, [1, 1, 1]), (10, [2]), (8, [4]), (11, [1])])
def test_rollback_then_decode_equals_the_shorter_sequence(keep, rest_chunks, absorb):
    """Speculative decoding: append drafts, roll back to `keep` tokens, continue with other tokens."""
    mla = make_mla(seed=3)
    window, num_sinks, max_rollback = 3, 1, 4
    x, other = randn(1, LENGTH, HIDDEN, seed=4), randn(1, LENGTH, HIDDEN, seed=5)
    cache = ac.KVCache(window=window, num_sinks=num_sinks, max_rollback=max_rollback)
    decode(mla, x, [5, 1, 1, 1, 1, 1, 1, 1], cache, absorb=absorb)  # 12 tokens: the ring has wrapped
    cache.truncate(keep)  # the last 12 - keep tokens were rejected drafts
    sequence = torch.cat([x[:, :keep], other[:, keep:]], dim=1)  # (1, L, hidden)
    rest = decode(mla, sequence, rest_chunks, cache, absorb=absorb)  # (1, L - keep, hidden)
    expected, _ = mla(sequence, window_or_sink_mask(LENGTH, window, num_sinks))  # (1, L, hidden)
    torch.testing.assert_close(rest, expected[:, keep:], rtol=0, atol=1e-12)


@pytest.mark.parametrize("absorb", [False, True], ids=["naive", "absorbed"])
def test_truncate_to_zero_after_a_wrap_starts_over(absorb):
    """truncate(0) on a wrapped ring, then token by token: the discarded tokens get no weight."""
    mla = make_mla(seed=6)
    x, fresh = randn(1, 7, HIDDEN, seed=7), randn(1, 4, HIDDEN, seed=8)
    cache = ac.KVCache(window=2)
    decode(mla, x, [1] * 7, cache, absorb=absorb)  # 7 tokens through 2 slots
    cache.truncate(0)
    out = decode(mla, fresh, [1] * 4, cache, absorb=absorb)  # (1, 4, hidden)
    expected, _ = mla(fresh, ac.sliding_window_mask(4, 2))  # (1, 4, hidden)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


def test_window_and_a_caller_mask_combine():
    """A caller's (Lq, Lk) mask is ANDed with the window, before the ring wraps (keys still in order)."""
    mla = make_mla(seed=9)
    x = randn(1, 5, HIDDEN, seed=10)
    blocked = torch.ones(5, 5, dtype=torch.bool)  # (L, L)
    blocked[:, 1] = False  # nobody may see token 1
    window = window_or_sink_mask(5, 3, 0)  # (L, L)
    expected, _ = mla(x, window & blocked)
    out, weights = mla(x, blocked, cache=ac.KVCache(window=3, max_rollback=2))  # 5 slots: no wrap
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    assert torch.equal(weights[0, 0] > 0, window & blocked)
