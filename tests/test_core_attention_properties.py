"""Hypothesis properties of scaled_dot_product_attention on tiny random problems (float64).

Batch dims, grouped-query heads, lengths, dims, broadcast masks (rows may be fully masked),
is_causal and dropout are drawn at random; every claim is exact in float64 (1e-9 / 1e-10).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from hypothesis import event, given
from hypothesis import strategies as st
from reference import assert_close64, expand_kv, make_qkv, random_mask, reference_attention

import attn_core as ac

F64 = torch.float64


# --------------------------------------------------------------------------- helpers


# --------------------------------------------------------------------------- hypothesis properties


class Case(NamedTuple):
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    mask: torch.Tensor | None  # what we pass: broadcastable, possibly None
    is_causal: bool
    allowed: torch.Tensor  # (..., Hq, Lq, Lk): mask & causal, fully broadcast
    seed: int


@st.composite
def attention_cases(draw) -> Case:
    """Tiny random attention problems: batch dims, GQA grouping, lengths, dims, masks, causal."""
    batch = tuple(draw(st.lists(st.integers(1, 2), max_size=2)))
    num_kv_heads = draw(st.integers(1, 3))
    group = draw(st.integers(1, 3))
    hq = num_kv_heads * group
    lq, lk = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    d, dv = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    is_causal = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    q, k, v = make_qkv(batch, hq, num_kv_heads, lq, lk, d, dv, seed=seed)
    weights_shape = (*batch, hq, lq, lk)

    mask = None
    if draw(st.booleans()):
        ndim = draw(st.integers(1, len(weights_shape)))
        mask_shape = tuple(size if draw(st.booleans()) else 1 for size in weights_shape[-ndim:])
        p_attend = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
        mask = random_mask(*mask_shape, seed=seed + 3, p_attend=p_attend, every_row_sees_a_key=False)

    allowed = torch.ones(weights_shape, dtype=torch.bool)
    if mask is not None:
        allowed = allowed & mask
    if is_causal:
        allowed = allowed & ac.causal_mask(lq, lk)
    return Case(q, k, v, mask, is_causal, allowed, seed)


def run_case(case: Case, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    return ac.scaled_dot_product_attention(case.q, case.k, case.v, case.mask, is_causal=case.is_causal, **kwargs)


@given(attention_cases())
def test_property_rows_sum_to_one_or_zero_and_no_nan(case):
    """Each weight row sums to 1, or is exactly 0 when all its keys are masked; nothing is NaN."""
    out, weights = run_case(case)
    row_has_key = case.allowed.any(dim=-1)
    event(f"has fully masked rows: {not row_has_key.all()}")
    event(f"group size {case.q.shape[-3] // case.k.shape[-3]}, is_causal={case.is_causal}")
    assert not out.isnan().any() and not weights.isnan().any()
    sums = weights.sum(dim=-1)
    torch.testing.assert_close(sums[row_has_key], torch.ones_like(sums[row_has_key]), rtol=0, atol=1e-12)
    assert torch.equal(weights[~row_has_key], torch.zeros_like(weights[~row_has_key]))


@given(attention_cases(), st.sampled_from([0.0, 0.2, 0.5, 0.9]))
def test_property_output_is_weights_times_expanded_values(case, dropout_p):
    """output == weights @ repeat_interleave(v) — also with dropout (the returned weights are post-dropout)."""
    torch.manual_seed(case.seed)
    out, weights = run_case(case, dropout_p=dropout_p)
    assert not out.isnan().any()
    assert_close64(out, weights @ expand_kv(case.v, case.q.shape[-3]))


@given(attention_cases(), st.sampled_from([0.0, 0.5]))
def test_property_masked_weights_are_exactly_zero(case, dropout_p):
    """Every weight whose (query, key) pair is masked (by mask or causality) is exactly 0."""
    torch.manual_seed(case.seed)
    _, weights = run_case(case, dropout_p=dropout_p)
    assert torch.equal(weights[~case.allowed], torch.zeros_like(weights[~case.allowed]))
    assert (weights >= 0).all()


@given(attention_cases())
def test_property_matches_torch_sdpa_on_rows_that_see_a_key(case):
    """Equals F.sdpa(enable_gqa=True) on rows with a visible key; zero output on fully masked rows."""
    out, _ = run_case(case)
    expected = F.scaled_dot_product_attention(case.q, case.k, case.v, attn_mask=case.allowed, enable_gqa=True)
    row_has_key = case.allowed.any(dim=-1)
    assert_close64(out[row_has_key], expected[row_has_key])
    assert torch.equal(out[~row_has_key], torch.zeros_like(out[~row_has_key]))


def broadcast_form(q, k, v, allowed):
    """GQA without copies: q as (..., Hkv, G, Lq, D) against k.unsqueeze(-3) (broadcast over G)."""
    *batch, hq, lq, d = q.shape
    hkv = k.shape[-3]
    q5 = q.reshape(*batch, hkv, hq // hkv, lq, d)
    scores = (q5 @ k.unsqueeze(-3).transpose(-2, -1)) / math.sqrt(d)  # (..., Hkv, G, Lq, Lk)
    allowed5 = allowed.reshape(scores.shape)
    weights = torch.softmax(scores.masked_fill(~allowed5, float("-inf")), dim=-1)
    weights = torch.where(allowed5.any(-1, keepdim=True), weights, torch.zeros_like(weights))
    out = weights @ v.unsqueeze(-3)  # (..., Hkv, G, Lq, Dv)
    return out.reshape(*batch, hq, lq, v.shape[-1]), weights.reshape(allowed.shape)


@given(attention_cases())
def test_property_broadcast_form_equals_repeat_interleave_form_and_ours(case):
    """Broadcast grouping == repeat_interleave grouping == ac.scaled_dot_product_attention."""
    out, weights = run_case(case)
    bc_out, bc_weights = broadcast_form(case.q, case.k, case.v, case.allowed)
    ri_out, ri_weights = reference_attention(case.q, case.k, case.v, case.allowed)
    assert_close64(bc_out, ri_out)
    assert_close64(bc_weights, ri_weights)
    assert_close64(out, ri_out)
    assert_close64(weights, ri_weights)
