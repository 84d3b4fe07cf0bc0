"""Bad inputs that used to be accepted silently or to fail with an unclear error: each now raises a typed error
whose message names the value (or shapes) and the fix. One row per input.

Legal neighbours stay legal: negative positions in ``apply_rope`` (a rotation backwards; a layer's positions,
though, are token indices >= 0), ``scale=0`` or a numpy scale, a finite or ``-inf`` lse.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from reference import randn

import attn_core as ac


def mla() -> ac.MultiHeadLatentAttention:
    torch.manual_seed(0)
    return ac.MultiHeadLatentAttention(8, 2, kv_lora_rank=4, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2)


def qkv() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return randn(1, 2, 3, 4, seed=1), randn(1, 2, 3, 4, seed=2), randn(1, 2, 3, 4, seed=3)  # (B, H, L, D) each


def merge_with(lse_a_value: float):
    out = randn(1, 2, 3, 4, seed=4)  # (B, H, Lq, Dv)
    lse_a = torch.zeros(1, 2, 3, dtype=out.dtype)  # (B, H, Lq)
    lse_a[0, 1, 2] = lse_a_value
    return ac.merge_attention(out, lse_a, out, torch.zeros_like(lse_a))


def gqa() -> ac.GroupedQueryAttention:
    torch.manual_seed(0)
    return ac.GroupedQueryAttention(8, 2, 1, rope_base=10000.0)


CASES = {
    # B1: a layer's positions are token indices
    "gqa negative positions": (
        lambda: gqa()(torch.zeros(1, 3, 8), positions=torch.tensor([-3, -2, -1])),
        ValueError,
        r"positions must be >= 0 \(token indices\), got \[-3, -2, -1\].*torch.arange",
    ),
    "gqa cache={}": (
        lambda: gqa()(torch.zeros(1, 3, 8), cache={}),
        TypeError,
        r"cache must be an attn_core.KVCache .*got dict.*ac.KVCache\(\)",
    ),
    "mla negative positions": (
        lambda: mla()(torch.zeros(1, 3, 8), positions=torch.tensor([-3, -2, -1])),
        ValueError,
        r"positions must be >= 0 \(token indices\), got \[-3, -2, -1\].*torch.arange",
    ),
    # B2: flags used by truthiness
    "apply_rope interleaved='yes'": (
        lambda: ac.apply_rope(randn(3, 4, seed=0), range(3), interleaved="yes"),
        TypeError,
        r"interleaved must be True .* or False .*got 'yes' of type str",
    ),
    "tiled is_causal='yes'": (
        lambda: ac.tiled_attention(*qkv(), is_causal="yes"),
        TypeError,
        r"is_causal must be True or False, got 'yes' of type str",
    ),
    "tiled return_lse='yes'": (
        lambda: ac.tiled_attention(*qkv(), return_lse="yes"),
        TypeError,
        r"return_lse must be True or False, got 'yes'",
    ),
    "sdpa is_causal=1": (
        lambda: ac.scaled_dot_product_attention(*qkv(), is_causal=1),
        TypeError,
        r"is_causal must be True or False, got 1 of type int",
    ),
    "mla absorb='yes'": (
        lambda: mla()(torch.zeros(1, 3, 8), absorb="yes"),
        TypeError,
        r"absorb must be True or False, got 'yes'",
    ),
    "mla is_causal='yes'": (
        lambda: mla()(torch.zeros(1, 3, 8), is_causal="yes"),
        TypeError,
        r"is_causal must be True or False",
    ),
    # B3: scale
    "tiled scale='x'": (
        lambda: ac.tiled_attention(*qkv(), scale="x"),
        TypeError,
        r"scale must be a number that multiplies Q Kᵀ .*got 'x' of type str",
    ),
    "tiled scale=nan": (
        lambda: ac.tiled_attention(*qkv(), scale=math.nan),
        ValueError,
        r"scale must be finite, got nan",
    ),
    "sdpa scale=inf": (
        lambda: ac.scaled_dot_product_attention(*qkv(), scale=math.inf),
        ValueError,
        r"scale must be finite, got inf",
    ),
    "sdpa scale=tensor": (
        lambda: ac.scaled_dot_product_attention(*qkv(), scale=torch.tensor(0.5)),
        TypeError,
        r"scale must be a number.*float\(scale\)",
    ),
    # B4: lse must be finite or -inf
    "merge NaN lse": (lambda: merge_with(math.nan), ValueError, r"lse_a holds nan at index \(0, 1, 2\).*finite"),
    "merge +inf lse": (lambda: merge_with(math.inf), ValueError, r"lse_a holds inf at index \(0, 1, 2\)"),
    # B5: the first append creates the buffers: keys and values must agree
    "KVCache dtypes differ on the first append": (
        lambda: ac.KVCache().update(torch.zeros(1, 1, 2, 4, dtype=torch.float64), torch.zeros(1, 1, 2, 4)),
        ValueError,
        r"keys and values must share one dtype and device, got keys of torch.float64 on cpu and values of "
        r"torch.float32 on cpu",
    ),
    "window KVCache dtypes differ on the first append": (
        lambda: ac.KVCache(window=2).update(torch.zeros(1, 1, 2, 4, dtype=torch.float16), torch.zeros(1, 1, 2, 4)),
        ValueError,
        r"keys and values must share one dtype and device",
    ),
    "PagedKVCache devices differ on the first append": (
        lambda: (
            ac.PagedKVCache(4, 2).sequence(0).update(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4, device="meta"))
        ),
        ValueError,
        r"keys and values must share one dtype and device, got keys of torch.float32 on cpu and values of "
        r"torch.float32 on meta",
    ),
    # B7: positions too far for any angle to mean something
    "apply_rope position 2**63 - 1": (
        lambda: ac.apply_rope(randn(3, 4, seed=0), [2**63 - 1] * 3),
        ValueError,
        r"positions must lie within ±2\^40.*magnitude 9223372036854775807",
    ),
    "mla position 2**50": (
        lambda: mla()(torch.zeros(1, 1, 8), positions=[2**50]),
        ValueError,
        r"positions must lie within ±2\^40",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_raises_a_clear_error(case):
    call, error, match = CASES[case]
    with pytest.raises(error, match=match):
        call()


def test_mla_rejecting_a_foreign_cache_leaves_it_free_for_its_own_layer():
    """A cache MLA refuses (wrong layout) is not bound to the MLA: its own layer can still use it."""
    gqa = ac.GroupedQueryAttention(8, 2, 1)
    cache = ac.KVCache()
    gqa(torch.zeros(1, 2, 8), cache=cache)  # binds to gqa, keys (1, 1, T, 4)
    fresh = ac.KVCache()
    fresh.update(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4))  # a foreign layout, bound to nobody
    with pytest.raises(ValueError, match=r"not the MLA layout"):
        mla()(torch.zeros(1, 1, 8), cache=fresh)
    gqa_two = ac.GroupedQueryAttention(8, 2, 1)
    gqa_two(torch.zeros(1, 1, 8), cache=fresh)  # before the fix: "already holds the keys/values of another layer"
    with pytest.raises(ValueError, match=r"another layer"):
        mla()(torch.zeros(1, 1, 8), cache=cache)  # someone else's cache: that error first


def test_legal_neighbours_stay_legal():
    q, k, v = qkv()
    for scale in (0, np.float32(0.5), -1.0, 2):
        ac.tiled_attention(q, k, v, scale=scale)
        ac.scaled_dot_product_attention(q, k, v, scale=scale)
    out = randn(1, 2, 3, 4, seed=4)  # (B, H, Lq, Dv)
    lse = torch.full((1, 2, 3), -math.inf)  # (B, H, Lq): no key seen on either side
    merged, merged_lse = ac.merge_attention(out, lse, out, lse)
    assert not merged.any() and torch.equal(merged_lse, lse)
    ac.apply_rope(randn(3, 4, seed=0), [-3, -2, -1])  # a rotation backwards
    ac.KVCache().update(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 6))  # Dv != D is fine
