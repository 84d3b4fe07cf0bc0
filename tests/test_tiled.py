"""tiled_attention: equal to torch's attention in float64, float32 and half precision; clear errors.

Memory and work (no (Lq, Lk) matrix, skipped causal tiles) are in test_core_tiled_edges.py.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import attn_core as ac
from attn_core.flash.tiled import tiled_attention

F32 = torch.float32
F64 = torch.float64


# --------------------------------------------------------------------------- helpers


def make_qkv(
    batch: tuple[int, ...], hq: int, hkv: int, lq: int, lk: int, d: int, dv: int, *, seed: int = 0, dtype=F32
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reproducible q (*batch, hq, lq, d), k (*batch, hkv, lk, d), v (*batch, hkv, lk, dv)."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, hq, lq, d, generator=generator, dtype=dtype)
    k = torch.randn(*batch, hkv, lk, d, generator=generator, dtype=dtype)
    v = torch.randn(*batch, hkv, lk, dv, generator=generator, dtype=dtype)
    return q, k, v


def torch_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, is_causal: bool, scale=None) -> torch.Tensor:
    """F.scaled_dot_product_attention with kv heads expanded and our bottom-right causal mask.

    ``F``'s own ``is_causal`` aligns top-left, so the causal case passes ``causal_mask(Lq, Lk)``
    instead (identical when ``Lq == Lk``). Rows that see no key come out as zeros in this torch.
    """
    group = q.shape[-3] // k.shape[-3]
    k = k.repeat_interleave(group, dim=-3)  # (..., Hq, Lk, D)
    v = v.repeat_interleave(group, dim=-3)  # (..., Hq, Lk, Dv)
    mask = ac.causal_mask(q.shape[-2], k.shape[-2]) if is_causal else None  # (Lq, Lk)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)  # (..., Hq, Lq, Dv)


def float32_atol(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None) -> float:
    """A first-order worst-case bound on float32 attention's error against float64 on the same inputs.

    u = eps/2 = 2^-24 per rounding. A score is a D-term dot product: off by <= D·u·s, where
    s = scale·max|q|·max|k| (Cauchy-Schwarz) bounds scale·Σ|q_i k_i|. exp turns an absolute score
    error into a relative weight error of the same size, counted twice (each weight and the row
    sum). The output sums Lk weighted values: off by <= (Lk + 10)·u·max|v| (10 for exp, the max
    shift and the division). A bound, not a typical error: measured errors are 10-100x smaller,
    but a bound holds for any BLAS summation order.
    """
    head_dim, k_len = q.shape[-1], k.shape[-2]
    scale = head_dim**-0.5 if scale is None else scale
    biggest = max(v.abs().max().item(), 1e-30) if v.numel() else 0.0
    score_bound = scale * q.norm(dim=-1).max().item() * k.norm(dim=-1).max().item()  # s
    u = torch.finfo(torch.float32).eps / 2
    return u * biggest * (2 * head_dim * score_bound + k_len + 10)


def assert_close(actual: torch.Tensor, expected: torch.Tensor, atol: float) -> None:
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert not actual.isnan().any(), "tiled_attention produced NaN"
    error = (actual - expected).abs().max().item() if actual.numel() else 0.0
    assert error <= atol, f"max abs error {error:.2e} > {atol:.0e}"


# --------------------------------------------------------------------------- agreement with torch

# (batch, hq, hkv, lq, lk, d, dv, block_size)
CASES = {
    "odd length 300, block 64": ((1,), 4, 4, 300, 300, 16, 16, 64),
    "length 7": ((2,), 2, 2, 7, 7, 8, 8, 64),
    "length 1": ((1,), 2, 2, 1, 1, 8, 8, 64),
    "Lq < Lk (decoding with a cache)": ((2,), 2, 2, 37, 300, 16, 16, 64),
    "Lq > Lk": ((2,), 2, 2, 300, 37, 16, 16, 64),
    "GQA 8 q heads / 2 kv heads": ((2,), 8, 2, 130, 130, 16, 16, 64),
    "GQA with Lq != Lk": ((1,), 8, 2, 70, 150, 16, 16, 32),
    "two batch dims": ((2, 3), 2, 1, 45, 45, 8, 8, 16),
    "no batch dims": ((), 4, 2, 45, 60, 8, 8, 16),
    "Dv != D": ((2,), 4, 2, 100, 90, 16, 24, 32),
    "block larger than the sequence": ((2,), 4, 2, 50, 70, 8, 8, 1024),
    "block 1": ((1,), 4, 2, 19, 23, 8, 8, 1),
}


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_matches_torch_sdpa_float32(case, is_causal):
    batch, hq, hkv, lq, lk, d, dv, block_size = case
    q, k, v = make_qkv(batch, hq, hkv, lq, lk, d, dv)
    out = tiled_attention(q, k, v, is_causal=is_causal, block_size=block_size)  # (..., Hq, Lq, Dv)
    assert out.shape == (*batch, hq, lq, dv)
    expected = torch_reference(q.double(), k.double(), v.double(), is_causal=is_causal)  # same inputs, float64
    assert_close(out.double(), expected, atol=float32_atol(q, k, v))


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_matches_attn_core_sdpa_float64(case, is_causal):
    batch, hq, hkv, lq, lk, d, dv, block_size = case
    q, k, v = make_qkv(batch, hq, hkv, lq, lk, d, dv, seed=1, dtype=F64)
    expected, _ = ac.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    out = tiled_attention(q, k, v, is_causal=is_causal, block_size=block_size)
    assert_close(out, expected, atol=1e-12)


def test_causal_square_equals_torch_is_causal():
    # With Lq == Lk the bottom-right and top-left alignments coincide: F's own flag applies.
    q, k, v = make_qkv((2,), 4, 4, 200, 200, 16, 16, seed=2)
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    out = tiled_attention(q, k, v, is_causal=True, block_size=48)
    assert_close(out.double(), expected, atol=float32_atol(q, k, v))


def test_custom_scale():
    q, k, v = make_qkv((1,), 4, 2, 40, 50, 8, 8, seed=3)
    for is_causal in (False, True):
        expected = torch_reference(q.double(), k.double(), v.double(), is_causal=is_causal, scale=0.3)
        out = tiled_attention(q, k, v, is_causal=is_causal, scale=0.3, block_size=16)
        assert_close(out.double(), expected, atol=float32_atol(q, k, v, scale=0.3))


def test_non_contiguous_inputs():
    # Layers produce (B, L, H, D) and transpose: q/k/v arrive with strides, not contiguous.
    generator = torch.Generator().manual_seed(4)
    q = torch.randn(2, 33, 4, 8, generator=generator).transpose(1, 2)  # (B, H, L, D), strided
    k = torch.randn(2, 41, 2, 8, generator=generator).transpose(1, 2)  # (B, Hkv, Lk, D), strided
    v = torch.randn(2, 41, 2, 8, generator=generator).transpose(1, 2)  # (B, Hkv, Lk, Dv), strided
    assert not q.is_contiguous()
    for is_causal in (False, True):
        expected = torch_reference(q.double(), k.double(), v.double(), is_causal=is_causal)
        out = tiled_attention(q, k, v, is_causal=is_causal, block_size=16)
        assert_close(out.double(), expected, atol=float32_atol(q, k, v))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_returns_input_dtype_computed_in_float32(dtype):
    q, k, v = make_qkv((1,), 4, 2, 100, 120, 16, 16, seed=5, dtype=dtype)
    # The reference sees the same rounded inputs in float64, and the work is float32: what is left
    # is rounding the output once to `dtype` (half its eps, relative to |out| <= max|v|) plus the
    # float32 bound. (fp16: 2^-11·max|v| ~ 2e-3; bf16: 2^-8·max|v| ~ 1.6e-2.)
    atol = torch.finfo(dtype).eps / 2 * v.abs().max().item() + float32_atol(q.float(), k.float(), v.float())
    for is_causal in (False, True):
        out = tiled_attention(q, k, v, is_causal=is_causal, block_size=32)
        assert out.dtype == dtype
        expected = torch_reference(q.double(), k.double(), v.double(), is_causal=is_causal)
        assert_close(out.double(), expected, atol=atol)


def test_queries_that_see_no_key_are_zero():
    # Causal with Lq > Lk: the first Lq - Lk queries precede every key.
    q, k, v = make_qkv((2,), 4, 2, 50, 20, 8, 8, seed=6)
    out = tiled_attention(q, k, v, is_causal=True, block_size=8)  # (2, 4, 50, 8)
    assert not out.isnan().any()
    assert torch.equal(out[..., :30, :], torch.zeros(2, 4, 30, 8))
    assert (out[..., 30:, :] != 0).any(dim=-1).all()
    expected = torch_reference(q.double(), k.double(), v.double(), is_causal=True)
    assert_close(out.double(), expected, atol=float32_atol(q, k, v))


def test_no_keys_gives_zeros():
    q, k, v = make_qkv((2,), 2, 2, 5, 0, 8, 8)
    for is_causal in (False, True):
        assert torch.equal(tiled_attention(q, k, v, is_causal=is_causal), torch.zeros(2, 2, 5, 8))


def test_no_queries_gives_empty_output():
    q, k, v = make_qkv((2,), 2, 2, 0, 7, 8, 8)
    assert tiled_attention(q, k, v, is_causal=True).shape == (2, 2, 0, 8)


@given(
    batch=st.lists(st.integers(1, 2), max_size=2).map(tuple),
    kv_heads=st.integers(1, 2),
    group=st.integers(1, 3),
    q_len=st.integers(0, 12),
    k_len=st.integers(0, 12),
    head_dim=st.integers(1, 4),
    v_dim=st.integers(1, 4),
    block_size=st.integers(1, 14),
    is_causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_matches_attn_core_sdpa(
    batch, kv_heads, group, q_len, k_len, head_dim, v_dim, block_size, is_causal, seed
):
    q, k, v = make_qkv(batch, kv_heads * group, kv_heads, q_len, k_len, head_dim, v_dim, seed=seed, dtype=F64)
    expected, _ = ac.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    out = tiled_attention(q, k, v, is_causal=is_causal, block_size=block_size)
    assert_close(out, expected, atol=1e-12)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("block_size", [0, -1, 2.5, True, "64", None])
def test_bad_block_size_raises(block_size):
    q, k, v = make_qkv((1,), 2, 2, 4, 4, 8, 8)
    with pytest.raises(ValueError, match="block_size must be an int >= 1"):
        tiled_attention(q, k, v, block_size=block_size)


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((4, 8), (4, 8), (4, 8)), "at least 3 dims"),
        (((1, 3, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)), "must be a multiple of key/value heads"),
        (((1, 2, 4, 8), (1, 2, 4, 6), (1, 2, 4, 8)), "same feature dim"),
        (((1, 2, 4, 8), (1, 2, 5, 8), (1, 2, 4, 8)), "same length"),
        (((2, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)), "share their batch dims"),
    ],
)
def test_bad_shapes_raise_value_error(shapes, message):
    q, k, v = (torch.randn(*shape) for shape in shapes)
    with pytest.raises(ValueError, match=message):
        tiled_attention(q, k, v)


def test_integer_inputs_raise_type_error():
    q = torch.ones(1, 2, 4, 8, dtype=torch.long)
    with pytest.raises(TypeError, match="floating point"):
        tiled_attention(q, q, q)


def test_exported_from_the_package():
    assert ac.tiled_attention is tiled_attention
    assert "tiled_attention" in ac.__all__
