"""sparse_attention: equal to dense attention under the mask "key listed for that query" (float64), to
torch's SDPA, to dense attention when every key is listed; empty picks and empty rows; bad indices refused."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import F64, make_qkv, reference_attention

import attn_core as ac


def random_indices(batch: int, q_len: int, k_len: int, n: int, seed: int, p_empty: float = 0.2) -> torch.Tensor:
    """(B, Lq, n) distinct key positions per row, some replaced by -1 (empty picks)."""
    generator = torch.Generator().manual_seed(seed)
    rows = torch.rand(batch, q_len, k_len, generator=generator).argsort(-1)[..., :n]  # (B, Lq, n) distinct
    empty = torch.rand(batch, q_len, n, generator=generator) < p_empty  # (B, Lq, n)
    return rows.masked_fill(empty, -1)  # (B, Lq, n)


def listed_mask(indices: torch.Tensor, k_len: int) -> torch.Tensor:
    """(B, 1, Lq, Lk) True where a key is listed for that query (the dense twin of the indices)."""
    mask = torch.zeros(*indices.shape[:2], k_len + 1, dtype=torch.bool)  # (B, Lq, Lk + 1): slot Lk takes the -1s
    mask.scatter_(-1, torch.where(indices < 0, k_len, indices), True)
    return mask[..., :k_len].unsqueeze(1)  # (B, 1, Lq, Lk)


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 2),
    kv_heads=st.integers(1, 2),
    group=st.integers(1, 3),
    q_len=st.integers(1, 5),
    k_len=st.integers(1, 9),
    n_frac=st.floats(0.0, 1.0),
    p_empty=st.sampled_from([0.0, 0.3, 1.0]),
    seed=st.integers(0, 2**16),
)
def test_equals_dense_attention_with_the_complement_masked(batch, kv_heads, group, q_len, k_len, n_frac, p_empty, seed):
    n = round(n_frac * k_len)
    q, k, v = make_qkv((batch,), kv_heads * group, kv_heads, q_len, k_len, 5, 3, seed=seed)
    indices = random_indices(batch, q_len, k_len, n, seed, p_empty)  # (B, Lq, n)
    out, weights = ac.sparse_attention(q, k, v, indices)  # (B, H, Lq, Dv), (B, H, Lq, n)
    mask = listed_mask(indices, k_len)  # (B, 1, Lq, Lk)
    dense_out, dense_weights = reference_attention(q, k, v, mask)  # textbook, empty rows -> zeros
    torch.testing.assert_close(out, dense_out, rtol=0, atol=1e-12)
    # weights[..., j] is the dense weight of key indices[..., j]; 0 for an empty pick
    gathered = dense_weights.gather(-1, indices.clamp(min=0)[:, None].expand(-1, q.shape[1], -1, -1))
    expected = gathered.masked_fill(indices[:, None] < 0, 0.0)  # (B, H, Lq, n)
    torch.testing.assert_close(weights, expected, rtol=0, atol=1e-12)
    assert weights.shape == (batch, kv_heads * group, q_len, n)


def test_equals_torch_sdpa_and_is_dense_when_every_key_is_listed():
    q, k, v = make_qkv((2,), 4, 2, 6, 6, 8, 5, seed=3)
    every = torch.arange(6).flip(0).expand(2, 6, 6)  # (B, Lq, Lk): every key, any order
    out, weights = ac.sparse_attention(q, k, v, every)
    torch_out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # (B, H, Lq, Dv)
    torch.testing.assert_close(out, torch_out, rtol=0, atol=1e-12)
    dense_out, dense_weights = ac.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, dense_out, rtol=0, atol=1e-12)
    torch.testing.assert_close(weights, dense_weights.flip(-1), rtol=0, atol=1e-12)


def test_causal_top_k_equals_sdpa_with_mask():
    q, k, v = make_qkv((1,), 2, 1, 5, 5, 4, 4, seed=7)
    indices = torch.tensor([[[0, -1], [1, 0], [2, 0], [3, 1], [4, 2]]])  # (1, 5, 2): causal picks
    out, _ = ac.sparse_attention(q, k, v, indices)
    torch_out = F.scaled_dot_product_attention(q, k, v, attn_mask=listed_mask(indices, 5), enable_gqa=True)
    torch.testing.assert_close(out, torch_out, rtol=0, atol=1e-12)


def test_nothing_listed_gives_zeros_and_scale_is_used():
    q, k, v = make_qkv((1,), 2, 2, 3, 4, 4, 2, seed=1)
    indices = torch.tensor([[[-1, -1], [2, 0], [-1, 3]]])  # (1, 3, 2)
    out, weights = ac.sparse_attention(q, k, v, indices, scale=0.3)
    assert torch.equal(out[:, :, 0], torch.zeros_like(out[:, :, 0]))
    assert torch.equal(weights[:, :, 0], torch.zeros_like(weights[:, :, 0]))
    assert torch.equal(weights[:, :, 2, 0], torch.zeros_like(weights[:, :, 2, 0]))
    dense_out, _ = reference_attention(q, k, v, listed_mask(indices, 4), scale=0.3)
    torch.testing.assert_close(out, dense_out, rtol=0, atol=1e-12)


def test_int32_indices_and_half_precision():
    q, k, v = make_qkv((1,), 2, 1, 4, 6, 8, 8, seed=2)
    indices = random_indices(1, 4, 6, 3, seed=2)
    out64, _ = ac.sparse_attention(q, k, v, indices.int())  # HF returns int32
    out16, w16 = ac.sparse_attention(q.half(), k.half(), v.half(), indices)
    assert out16.dtype == w16.dtype == torch.float16
    # float32 compute, inputs and outputs rounded to fp16: a few fp16 ulps of values of size O(1)
    torch.testing.assert_close(out16.double(), out64, rtol=0, atol=8 * 2**-10)


@pytest.mark.parametrize(
    ("indices", "error", "words"),
    [
        (torch.tensor([[[0, 6]]]).expand(1, 3, 2), ValueError, "[-1, 6)"),
        (torch.tensor([[[0, -2]]]).expand(1, 3, 2), ValueError, "[-1, 6)"),
        (torch.zeros(1, 3, dtype=torch.long), ValueError, "(B, Lq, n)"),
        (torch.zeros(2, 3, 2, dtype=torch.long), ValueError, "(B, Lq, n)"),
        (torch.zeros(1, 4, 2, dtype=torch.long), ValueError, "(B, Lq, n)"),
        (torch.zeros(1, 3, 2), TypeError, "integers"),
        (torch.zeros(1, 3, 2, dtype=torch.bool), TypeError, "integers"),
        ([[[0, 1]]], TypeError, "integer torch.Tensor"),
        (torch.tensor([[[1, 1], [0, 2], [3, -1]]]), ValueError, "twice"),
    ],
)
def test_bad_indices_are_refused(indices, error, words):
    q, k, v = make_qkv((1,), 2, 1, 3, 6, 4, 4, seed=0)
    with pytest.raises(error) as info:
        ac.sparse_attention(q, k, v, indices)
    assert words in str(info.value)


def test_repeated_empty_picks_are_allowed():
    q, k, v = make_qkv((1,), 1, 1, 1, 3, 4, 4, seed=0)
    out, weights = ac.sparse_attention(q, k, v, torch.tensor([[[2, -1, -1]]]))
    torch.testing.assert_close(out[0, 0, 0], v[0, 0, 2], rtol=0, atol=1e-15)
    assert weights[0, 0, 0].tolist() == [1.0, 0.0, 0.0]


def test_bad_q_k_v_are_refused():
    q, k, v = make_qkv((1,), 3, 2, 3, 6, 4, 4, seed=0)
    with pytest.raises(ValueError, match="multiple"):
        ac.sparse_attention(q, k, v, torch.zeros(1, 3, 1, dtype=torch.long))
    q, k, v = make_qkv((1, 1), 2, 1, 3, 6, 4, 4, seed=0)
    with pytest.raises(ValueError, match="4 dims"):
        ac.sparse_attention(q, k, v, torch.zeros(1, 3, 1, dtype=torch.long))
    assert q.dtype == F64


def test_indices_on_another_device_are_refused():
    q, k, v = make_qkv((1,), 1, 1, 2, 3, 4, 4, seed=0)
    with pytest.raises(ValueError, match="move them"):
        ac.sparse_attention(q, k, v, torch.zeros(1, 2, 1, dtype=torch.long, device="meta"))
