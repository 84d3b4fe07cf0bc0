"""scaled_dot_product_attention: agreement with torch, grouped-query semantics, masks, dropout.

Half precision is in test_core_half_precision.py, hypothesis properties in test_core_attention_properties.py.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from reference import assert_close64, expand_kv, make_qkv, randn, random_mask, reference_attention

import attn_core as ac

F64 = torch.float64


# --------------------------------------------------------------------------- helpers


# --------------------------------------------------------------------------- agreement with F.sdpa

SHAPES = {
    # name: (batch, hq, hkv, lq, lk, d, dv)
    "4d-square": ((2,), 3, 3, 5, 5, 8, 8),
    "4d-lq<lk": ((2,), 2, 2, 3, 7, 4, 4),
    "4d-lq>lk": ((1,), 2, 2, 6, 2, 4, 4),
    "dv!=d": ((2,), 2, 2, 4, 5, 6, 3),
    "3d-inputs": ((), 4, 4, 5, 6, 8, 5),
    "5d-inputs": ((2, 3), 2, 2, 3, 4, 4, 4),
    "single-query-key": ((1,), 1, 1, 1, 1, 1, 1),
}


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_matches_torch_sdpa_without_mask(shape):
    """Unmasked attention equals F.scaled_dot_product_attention (3-D/4-D/5-D, Lq != Lk, Dv != D)."""
    q, k, v = make_qkv(*shape)
    out, weights = ac.scaled_dot_product_attention(q, k, v)
    assert out.shape == (*q.shape[:-1], v.shape[-1])
    assert weights.shape == (*q.shape[:-1], k.shape[-2])
    assert_close64(out, F.scaled_dot_product_attention(q, k, v))
    assert_close64(weights, reference_attention(q, k, v)[1])


MASK_SHAPES = {
    "(Lk,)": lambda b, h, lq, lk: (lk,),
    "(Lq,Lk)": lambda b, h, lq, lk: (lq, lk),
    "(1,Lk)": lambda b, h, lq, lk: (1, lk),
    "(H,1,Lk)": lambda b, h, lq, lk: (h, 1, lk),
    "(B,1,1,Lk)": lambda b, h, lq, lk: (b, 1, 1, lk),
    "(B,1,Lq,Lk)": lambda b, h, lq, lk: (b, 1, lq, lk),
    "(1,H,Lq,Lk)": lambda b, h, lq, lk: (1, h, lq, lk),
    "(B,H,Lq,Lk)": lambda b, h, lq, lk: (b, h, lq, lk),
}


@pytest.mark.parametrize("mask_shape", MASK_SHAPES.values(), ids=MASK_SHAPES.keys())
def test_matches_torch_sdpa_with_broadcast_bool_mask(mask_shape):
    """A boolean mask of any broadcastable shape gives the same result as F.sdpa's attn_mask."""
    b, h, lq, lk = 2, 3, 4, 6
    q, k, v = make_qkv((b,), h, h, lq, lk, 5, 7, seed=3)
    mask = random_mask(*mask_shape(b, h, lq, lk), seed=4)
    out, weights = ac.scaled_dot_product_attention(q, k, v, mask)
    full_mask = mask.expand(b, h, lq, lk)  # F.sdpa rejects a 1-D mask; expanding changes no value
    assert_close64(out, F.scaled_dot_product_attention(q, k, v, attn_mask=full_mask))
    assert_close64(weights, reference_attention(q, k, v, mask)[1])


@pytest.mark.parametrize("scale", [0.05, 0.5, 1.0, 3.0])
def test_matches_torch_sdpa_with_custom_scale(scale):
    """`scale` multiplies Q Kᵀ exactly as F.sdpa's `scale` does."""
    q, k, v = make_qkv((2,), 2, 2, 4, 5, 6, 6, seed=5)
    mask = random_mask(4, 5, seed=6)
    out, _ = ac.scaled_dot_product_attention(q, k, v, mask, scale=scale)
    assert_close64(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale))


def test_default_scale_is_inverse_sqrt_head_dim():
    """scale=None equals scale=1/sqrt(D)."""
    q, k, v = make_qkv((1,), 2, 2, 3, 4, 9, 4, seed=7)
    default, _ = ac.scaled_dot_product_attention(q, k, v)
    explicit, _ = ac.scaled_dot_product_attention(q, k, v, scale=1 / 3)
    assert_close64(default, explicit)


@pytest.mark.parametrize("length", [1, 2, 5, 8])
def test_is_causal_square_matches_torch_is_causal(length):
    """For Lq == Lk our bottom-right causal equals F.sdpa(is_causal=True) (top-left)."""
    q, k, v = make_qkv((2,), 2, 2, length, length, 4, 3, seed=8)
    out, _ = ac.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close64(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))


@pytest.mark.parametrize(("q_len", "k_len"), [(1, 6), (3, 7), (4, 5)])
def test_is_causal_rectangular_is_bottom_right(q_len, k_len):
    """For Lq < Lk, is_causal equals F.sdpa with attn_mask=causal_mask(Lq, Lk) and differs from top-left."""
    q, k, v = make_qkv((2,), 2, 2, q_len, k_len, 4, 3, seed=9)
    out, _ = ac.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_close64(out, F.scaled_dot_product_attention(q, k, v, attn_mask=ac.causal_mask(q_len, k_len)))
    top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert not torch.allclose(out, top_left)


def test_is_causal_with_more_queries_than_keys_zeroes_the_blind_rows():
    """For Lq > Lk the first Lq - Lk queries see no key: zero output; the rest match F.sdpa."""
    q_len, k_len = 5, 3
    q, k, v = make_qkv((2,), 2, 2, q_len, k_len, 4, 3, seed=10)
    out, weights = ac.scaled_dot_product_attention(q, k, v, is_causal=True)
    blind = q_len - k_len
    assert torch.equal(out[..., :blind, :], torch.zeros_like(out[..., :blind, :]))
    assert torch.equal(weights[..., :blind, :], torch.zeros_like(weights[..., :blind, :]))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=ac.causal_mask(q_len, k_len))
    assert_close64(out[..., blind:, :], expected[..., blind:, :])


def test_is_causal_combines_with_a_mask_by_and():
    """is_causal=True with a mask equals passing mask & causal_mask."""
    q, k, v = make_qkv((2,), 3, 3, 4, 6, 5, 5, seed=11)
    mask = random_mask(2, 1, 4, 6, seed=12, every_row_sees_a_key=False)
    mask[..., 0] = True  # causal keeps key 0 for every query when Lq <= Lk
    out, _ = ac.scaled_dot_product_attention(q, k, v, mask, is_causal=True)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask & ac.causal_mask(4, 6))
    assert_close64(out, expected)


GQA_HEADS = [(4, 2), (6, 3), (6, 2), (8, 1), (3, 3)]


@pytest.mark.parametrize(("hq", "hkv"), GQA_HEADS)
@pytest.mark.parametrize("batch", [(), (2,), (2, 2)], ids=["3d", "4d", "5d"])
def test_gqa_matches_torch_enable_gqa(hq, hkv, batch):
    """Grouped-query attention equals F.sdpa(enable_gqa=True), with and without a mask."""
    q, k, v = make_qkv(batch, hq, hkv, 3, 5, 4, 6, seed=13)
    out, _ = ac.scaled_dot_product_attention(q, k, v)
    assert_close64(out, F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    mask = random_mask(hq, 3, 5, seed=14)
    out, _ = ac.scaled_dot_product_attention(q, k, v, mask)
    assert_close64(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True))


@pytest.mark.parametrize(("hq", "hkv"), GQA_HEADS)
def test_gqa_grouping_equals_repeat_interleave(hq, hkv):
    """Query head h uses kv head h // (Hq/Hkv): plain attention on repeat_interleave'd k/v."""
    q, k, v = make_qkv((2,), hq, hkv, 4, 5, 3, 2, seed=15)
    out, weights = ac.scaled_dot_product_attention(q, k, v)
    plain_out, plain_weights = ac.scaled_dot_product_attention(q, expand_kv(k, hq), expand_kv(v, hq))
    assert_close64(out, plain_out)
    assert_close64(weights, plain_weights)


def test_repeat_tiling_would_give_a_different_grouping():
    """Sanity check: tiling kv heads with `repeat` (head h -> h % Hkv) is distinguishable from ours."""
    hq, hkv = 6, 3
    q, k, v = make_qkv((2,), hq, hkv, 4, 5, 3, 2, seed=16)
    out, _ = ac.scaled_dot_product_attention(q, k, v)
    tiled_k, tiled_v = k.repeat(1, hq // hkv, 1, 1), v.repeat(1, hq // hkv, 1, 1)
    tiled_out, _ = ac.scaled_dot_product_attention(q, tiled_k, tiled_v)
    assert not torch.allclose(out, tiled_out)
    interleaved_out, _ = ac.scaled_dot_product_attention(q, expand_kv(k, hq), expand_kv(v, hq))
    assert torch.allclose(out, interleaved_out)


def test_bool_mask_equals_additive_float_mask_in_torch_sdpa():
    """mask_to_additive(m) as F.sdpa's float attn_mask gives the same output as our boolean m."""
    q, k, v = make_qkv((2,), 2, 2, 4, 5, 3, 3, seed=17)
    mask = random_mask(2, 1, 4, 5, seed=18)
    out, _ = ac.scaled_dot_product_attention(q, k, v, mask)
    additive = ac.mask_to_additive(mask, dtype=F64)
    assert_close64(out, F.scaled_dot_product_attention(q, k, v, attn_mask=additive))


def test_weights_returned_are_the_ones_multiplied_with_v():
    """output == weights @ v (no dropout), and the weights equal the textbook softmax."""
    q, k, v = make_qkv((2,), 4, 2, 3, 5, 4, 6, seed=19)
    mask = random_mask(3, 5, seed=20)
    out, weights = ac.scaled_dot_product_attention(q, k, v, mask)
    ref_out, ref_weights = reference_attention(q, k, v, mask)
    assert_close64(weights, ref_weights)
    assert_close64(out, ref_out)
    assert_close64(out, weights @ expand_kv(v, 4))


def test_fully_masked_rows_give_zeros_not_nan():
    """A query whose keys are all masked gets zero weights and zero output (never NaN)."""
    q, k, v = make_qkv((1,), 2, 2, 3, 4, 3, 3, seed=21)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False
    out, weights = ac.scaled_dot_product_attention(q, k, v, mask)
    assert not out.isnan().any() and not weights.isnan().any()
    assert torch.equal(out[..., 1, :], torch.zeros(1, 2, 3, dtype=F64))
    assert torch.equal(weights[..., 1, :], torch.zeros(1, 2, 4, dtype=F64))
    assert_close64(weights[..., [0, 2], :].sum(-1), torch.ones(1, 2, 2, dtype=F64))


# --------------------------------------------------------------------------- dropout


def test_dropout_is_inverted_and_unbiased_on_a_long_row():
    """Dropout zeroes about p of the weights, scales survivors by 1/(1-p), and keeps E[row sum] = 1."""
    p, k_len = 0.3, 20_000
    q = torch.zeros(1, 1, 1, 4, dtype=F64)  # zero scores: uniform weights 1/k_len
    k, v = randn(1, 1, k_len, 4, seed=24), randn(1, 1, k_len, 2, seed=25)
    torch.manual_seed(0)
    _, weights = ac.scaled_dot_product_attention(q, k, v, dropout_p=p)
    row = weights[0, 0, 0]
    dropped = row == 0
    # Binomial(20000, 0.3): sd of the dropped fraction is 0.0032, so 0.03 is > 9 sd.
    assert abs(dropped.double().mean().item() - p) < 0.03
    torch.testing.assert_close(row[~dropped], torch.full_like(row[~dropped], 1 / (k_len * (1 - p))))
    # Row sum = kept / (k_len (1 - p)); sd ≈ 0.0046, so 0.05 is > 10 sd.
    assert abs(row.sum().item() - 1.0) < 0.05


def test_dropout_is_reproducible_with_a_seed_and_changes_the_result():
    """Same torch seed -> same dropped weights; dropout output differs from the no-dropout output."""
    q, k, v = make_qkv((2,), 2, 2, 4, 16, 4, 4, seed=26)
    torch.manual_seed(1)
    out_a, weights_a = ac.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    torch.manual_seed(1)
    out_b, weights_b = ac.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert torch.equal(out_a, out_b) and torch.equal(weights_a, weights_b)
    assert (weights_a == 0).any()
    no_dropout, _ = ac.scaled_dot_product_attention(q, k, v)
    assert not torch.allclose(out_a, no_dropout)
