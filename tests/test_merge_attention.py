"""merge_attention: partial results over disjoint key chunks combine into one pass over all keys.

Chunks come from tiled_attention(..., return_lse=True). Split keys into 2..5 chunks and merge them
pairwise in any order: equal to a single pass (float64, 1e-12), gradients included. Rows that saw
no key in one or both parts; causal over chunks (prefix chunks fully visible, the last one causal);
clear errors on mismatched shapes.
"""

from __future__ import annotations

import math
import random

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import attn_core as ac
from attn_core.flash.merge import merge_attention

F64 = torch.float64
MINUS_INF = -math.inf


def make_qkv(hq: int, hkv: int, lq: int, lk: int, d: int = 4, dv: int = 3, *, seed: int = 0, batch=(2,)):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, hq, lq, d, generator=generator, dtype=F64)  # (..., Hq, Lq, D)
    k = torch.randn(*batch, hkv, lk, d, generator=generator, dtype=F64)  # (..., Hkv, Lk, D)
    v = torch.randn(*batch, hkv, lk, dv, generator=generator, dtype=F64)  # (..., Hkv, Lk, Dv)
    return q, k, v


def chunk_results(q, k, v, bounds: list[int], *, causal_last: bool = False, block_size: int = 3):
    """(out, lse) of q over each key chunk [bounds[i], bounds[i+1]); the last chunk causal if asked."""
    results = []
    for index, (start, end) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        is_causal = causal_last and index == len(bounds) - 2
        results.append(
            ac.tiled_attention(
                q, k[..., start:end, :], v[..., start:end, :], is_causal=is_causal, block_size=block_size,
                return_lse=True,
            )
        )  # fmt: skip
    return results


def merge_in_order(results: list, order: random.Random) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge a list of (out, lse) pairwise, picking which neighbours to merge at random."""
    results = list(results)
    while len(results) > 1:
        i = order.randrange(len(results) - 1)
        results[i : i + 2] = [merge_attention(*results[i], *results[i + 1])]
    return results[0]


def merge_left_to_right(results):
    out, lse = results[0]
    for out_b, lse_b in results[1:]:
        out, lse = merge_attention(out, lse, out_b, lse_b)
    return out, lse


def assert_close(actual: torch.Tensor, expected: torch.Tensor, atol: float = 1e-12) -> None:
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    assert not actual.isnan().any(), "NaN"
    torch.testing.assert_close(actual, expected, rtol=0, atol=atol)  # -inf == -inf counts as equal


@pytest.mark.parametrize("num_chunks", [2, 3, 4, 5])
def test_chunks_merged_in_any_order_equal_one_pass(num_chunks):
    q, k, v = make_qkv(4, 2, 7, 23, seed=num_chunks)
    bounds = [0, *sorted(random.Random(num_chunks).sample(range(1, 23), num_chunks - 1)), 23]
    expected_out, expected_lse = ac.tiled_attention(q, k, v, return_lse=True)
    results = chunk_results(q, k, v, bounds)
    for trial in range(4):  # left to right, and three random association orders
        order = random.Random(trial)
        out, lse = merge_in_order(results, order) if trial else merge_left_to_right(results)
        assert_close(out, expected_out)
        assert_close(lse, expected_lse)


def test_merge_is_commutative_and_an_empty_chunk_is_neutral():
    q, k, v = make_qkv(2, 2, 5, 9, seed=1)
    (out_a, lse_a), (out_b, lse_b) = chunk_results(q, k, v, [0, 4, 9])
    ab, ba = merge_attention(out_a, lse_a, out_b, lse_b), merge_attention(out_b, lse_b, out_a, lse_a)
    assert_close(ab[0], ba[0], atol=0)
    assert_close(ab[1], ba[1], atol=0)
    empty_out, empty_lse = ac.tiled_attention(q, k[..., :0, :], v[..., :0, :], return_lse=True)  # no keys
    assert empty_lse.isneginf().all()
    out, lse = merge_attention(out_a, lse_a, empty_out, empty_lse)
    assert torch.equal(out, out_a) and torch.equal(lse, lse_a)


def test_causal_over_chunks():
    """Queries at the last 6 of 20 positions (a chunked prefill): query i sees keys <= 14 + i.

    Keys 0..14 are visible to every query, so chunks that end by 15 run without a mask. The last
    chunk, keys c..19, runs causal: bottom-right aligned inside it, query i sees its keys up to
    14 + i as in one pass, whatever c is. (A causal chunk anywhere else would need its own offset.)
    """
    q, k, v = make_qkv(4, 2, 6, 20, seed=2)
    expected_out, expected_lse = ac.tiled_attention(q, k, v, is_causal=True, return_lse=True)
    for bounds in ([0, 15, 20], [0, 4, 9, 15, 20], [0, 1, 20], [0, 3, 12, 20]):
        results = chunk_results(q, k, v, bounds, causal_last=True)
        out, lse = merge_in_order(results, random.Random(0))
        assert_close(out, expected_out)
        assert_close(lse, expected_lse)


def test_causal_chunk_with_a_key_less_row_takes_the_other_part():
    """8 queries at the last 8 of 15 positions; the last chunk holds keys 8..14. Query 0 sees keys
    0..7 only: none of the last chunk (lse -inf, zero output there), so the merge takes the prefix's."""
    q, k, v = make_qkv(2, 1, 8, 15, seed=3)
    (out_a, lse_a), (out_b, lse_b) = chunk_results(q, k, v, [0, 8, 15], causal_last=True)
    assert lse_b[..., 0].isneginf().all() and lse_b[..., 1:].isfinite().all()
    assert torch.equal(out_b[..., 0, :], torch.zeros(2, 2, 3, dtype=F64))
    out, lse = merge_attention(out_a, lse_a, out_b, lse_b)
    assert torch.equal(out[..., 0, :], out_a[..., 0, :]) and torch.equal(lse[..., 0], lse_a[..., 0])
    expected_out, expected_lse = ac.tiled_attention(q, k, v, is_causal=True, return_lse=True)
    assert_close(out, expected_out)
    assert_close(lse, expected_lse)


def test_rows_with_no_key_on_both_sides_are_zero_and_minus_inf_without_nan():
    out_a = torch.randn(2, 3, 4, dtype=F64)  # (H, Lq, Dv): rows 0 and 1 saw no key of A
    out_b = torch.randn(2, 3, 4, dtype=F64)  # rows 0 and 2 saw no key of B
    lse_a = torch.tensor([[MINUS_INF, MINUS_INF, 0.5]] * 2, dtype=F64)  # (H, Lq)
    lse_b = torch.tensor([[MINUS_INF, 1.5, MINUS_INF]] * 2, dtype=F64)  # (H, Lq)
    for t in (out_a, lse_a, out_b, lse_b):
        t.requires_grad_(True)
    out, lse = merge_attention(out_a, lse_a, out_b, lse_b)
    assert torch.equal(out[:, 0], torch.zeros(2, 4, dtype=F64)) and lse[:, 0].isneginf().all()
    assert torch.equal(out[:, 1], out_b[:, 1]) and torch.equal(lse[:, 1], lse_b[:, 1])
    assert torch.equal(out[:, 2], out_a[:, 2]) and torch.equal(lse[:, 2], lse_a[:, 2])
    finite_lse = lse.masked_fill(lse.isneginf(), 0.0)  # (H, Lq)
    grads = torch.autograd.grad(out.sum() + finite_lse.sum(), (out_a, lse_a, out_b, lse_b))
    assert all(g.isfinite().all() for g in grads)
    assert torch.equal(grads[0][:, :2], torch.zeros(2, 2, 4, dtype=F64))  # a side that saw nothing gets no gradient


def test_gradients_through_merged_chunks_equal_one_pass():
    """merge_attention is differentiable by autograd, and its lse gradient flows into tiled_attention's backward."""
    q, k, v = make_qkv(4, 2, 6, 17, seed=4)
    generator = torch.Generator().manual_seed(5)
    grad_out = torch.randn(2, 4, 6, 3, generator=generator, dtype=F64)  # (B, Hq, Lq, Dv)
    grad_lse = torch.randn(2, 4, 6, generator=generator, dtype=F64)  # (B, Hq, Lq)

    def grads(fn):
        inputs = [t.detach().requires_grad_(True) for t in (q, k, v)]
        out, lse = fn(*inputs)
        return torch.autograd.grad((out * grad_out).sum() + (lse * grad_lse).sum(), inputs)

    def merged(q, k, v):
        results = chunk_results(q, k, v, [0, 5, 6, 12, 17], causal_last=True)
        return merge_in_order(results, random.Random(1))

    one_pass = grads(lambda q, k, v: ac.tiled_attention(q, k, v, is_causal=True, return_lse=True))
    for got, want in zip(grads(merged), one_pass, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_keeps_the_dtypes_it_was_given(dtype):
    q, k, v = (t.to(dtype) for t in make_qkv(2, 2, 5, 8, seed=6))
    (out_a, lse_a), (out_b, lse_b) = chunk_results(q, k, v, [0, 3, 8])
    out, lse = merge_attention(out_a, lse_a, out_b, lse_b)
    assert out.dtype == dtype and lse.dtype == torch.float32


def test_mixed_dtypes_compute_in_the_widest_and_return_out_a_and_lse_a_dtypes():
    """out in out_a's dtype, lse in lse_a's, whatever the other side: a float64 side makes the weights float64
    but does not leak into the returned dtypes."""
    q, k, v = make_qkv(2, 2, 5, 8, seed=7)
    (out_a, lse_a), (out_b, lse_b) = chunk_results(q, k, v, [0, 3, 8])  # float64
    expected_out, expected_lse = merge_attention(out_a, lse_a, out_b, lse_b)
    out, lse = merge_attention(out_a.float(), lse_a.float(), out_b, lse_b)  # side a float32, side b float64
    assert out.dtype == torch.float32 and lse.dtype == torch.float32
    # one float32 rounding of side a's inputs (2^-24 relative, |out| and |lse| of order 1..10) and of the result
    torch.testing.assert_close(out, expected_out.float(), rtol=0, atol=8 * 2**-24 * 10)
    torch.testing.assert_close(lse, expected_lse.float(), rtol=0, atol=8 * 2**-24 * 10)
    out, lse = merge_attention(out_a, lse_a.half(), out_b, lse_b)  # a half lse_a: lse comes back half
    assert out.dtype == F64 and lse.dtype == torch.float16


@given(
    batch=st.lists(st.integers(1, 2), max_size=2).map(tuple),
    kv_heads=st.integers(1, 2),
    group=st.integers(1, 2),
    q_len=st.integers(1, 6),
    k_len=st.integers(1, 12),
    num_chunks=st.integers(2, 5),
    block_size=st.integers(1, 8),
    seed=st.integers(0, 2**16),
)
def test_property_any_split_any_order_equals_one_pass(
    batch, kv_heads, group, q_len, k_len, num_chunks, block_size, seed
):
    q, k, v = make_qkv(kv_heads * group, kv_heads, q_len, k_len, seed=seed, batch=batch)
    rng = random.Random(seed)
    # Chunks may be empty (repeated bounds): a chunk with no key is -inf / zeros and must merge neutrally.
    bounds = [0, *sorted(rng.choices(range(k_len + 1), k=num_chunks - 1)), k_len]
    out, lse = merge_in_order(chunk_results(q, k, v, bounds, block_size=block_size), rng)
    expected_out, expected_lse = ac.tiled_attention(q, k, v, return_lse=True)
    assert_close(out, expected_out)
    assert_close(lse, expected_lse)


# --------------------------------------------------------------------------- errors


def partials(out_shape=(2, 3, 4), lse_shape=(2, 3)):
    return torch.zeros(out_shape), torch.zeros(lse_shape)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (
            (*partials(), *partials((2, 3, 5))),
            ValueError,
            r"out_a and out_b must have one shape.*\(2, 3, 4\).*\(2, 3, 5\)",
        ),
        ((*partials(), *partials((2, 4, 4), (2, 4))), ValueError, "out_a and out_b must have one shape"),
        ((*partials(lse_shape=(2, 3, 1)), *partials()), ValueError, r"lse_a must have shape \(2, 3\).*return_lse=True"),
        ((*partials(), *partials(lse_shape=(3,))), ValueError, r"lse_b must have shape \(2, 3\)"),
        ((torch.zeros(2, 3, 4), [0.0] * 6, *partials()), TypeError, "lse_a must be a torch.Tensor"),
        ((*partials(), torch.zeros(2, 3, 4, dtype=torch.long), torch.zeros(2, 3)), TypeError, "out_b must be floating"),
        (
            (torch.zeros(()), torch.zeros(()), *partials()),
            ValueError,
            r"out_a and out_b must have one shape.*Got out_a \(\)",
        ),
        (
            (*partials(), torch.zeros(2, 3, 4, device="meta"), torch.zeros(2, 3, device="meta")),
            ValueError,
            r"one device, got out_a cpu, lse_a cpu, out_b meta, lse_b meta",
        ),
    ],
)
def test_bad_inputs_raise_clear_errors(args, error, message):
    with pytest.raises(error, match=message):
        merge_attention(*args)


def test_exported_from_the_package():
    assert ac.merge_attention is merge_attention
    assert "merge_attention" in ac.__all__
