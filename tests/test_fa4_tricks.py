"""FA4's tricks in PyTorch (attn_core.flash.fa4_tricks): conditional rescaling and exp2 give the same attention.

References: F.scaled_dot_product_attention and torch.logsumexp in float64. Bounds: float32 sums of n terms
(n·2⁻²⁴ relative to Σ|terms|); the polynomial's relative error ε on every weight changes out by at most
2ε·Σ p|v| and lse by at most ε (log(1+ε) ≤ ε) per polynomial factor in l.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attn_core.flash.fa4_tricks import EXP2_POLY3_MAX_REL_ERROR, exp2_poly3, fa4_attention

F64 = torch.float64


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def reference(q, k, v, is_causal):
    """float64 out and lse (GQA, bottom-right causal) and Σ_j p_j |v_j| for the error bounds."""
    q, k, v = q.to(F64), k.to(F64), v.to(F64)
    group = q.shape[1] // k.shape[1]
    keys, values = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)  # (B, Hq, Lk, D)
    scores = q @ keys.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, Hq, Lq, Lk)
    if is_causal:
        visible = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril(k.shape[2] - q.shape[2])  # (Lq, Lk)
        scores = scores.masked_fill(~visible, -math.inf)
    probs = torch.softmax(scores, -1)  # (B, Hq, Lq, Lk)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=visible if is_causal else None, enable_gqa=True)
    return out, torch.logsumexp(scores, -1), probs @ values.abs()


@pytest.mark.parametrize("threshold", [0.0, 8.0, 64.0])
@pytest.mark.parametrize("polynomial", [False, True], ids=["exp2", "poly3"])
def test_same_attention_whatever_the_threshold(threshold, polynomial):
    q, k, v = randn(2, 4, 50, 16, seed=0), randn(2, 2, 70, 16, seed=1), randn(2, 2, 70, 16, seed=2)
    out, lse, _ = fa4_attention(q, k, v, is_causal=True, block_size=16, rescale_threshold=threshold,
                                polynomial_exp2=polynomial)  # fmt: skip
    out_ref, lse_ref, weighted_abs = reference(q, k, v, True)
    eps = EXP2_POLY3_MAX_REL_ERROR if polynomial else 0.0
    float_part = 2 * (70 + 16) * 2.0**-24  # doubled: sums of up to Lk + D terms
    assert ((out.to(F64) - out_ref).abs() <= (2 * eps + float_part) * (weighted_abs + out_ref.abs())).all()
    # l also carries the factor 2^(m_old - m_new) of every rescale, each a polynomial exp2 (error ε): up to one
    # per key tile (out = acc / l does not see them: acc and l get the same factor).
    lse_bound = eps * (1 + math.ceil(70 / 16)) + float_part * (lse_ref.abs() + 1)  # (B, Hq, Lq)
    assert ((lse.to(F64) - lse_ref).abs() <= lse_bound).all()


def test_float64_threshold_changes_nothing_but_rounding():
    q, k, v = (
        randn(1, 2, 40, 32, seed=3, dtype=F64),
        randn(1, 2, 40, 32, seed=4, dtype=F64),
        randn(1, 2, 40, 32, seed=5, dtype=F64),
    )
    out_fa2, lse_fa2, _ = fa4_attention(q, k, v, block_size=8, rescale_threshold=0.0)  # (1, 2, 40, 32)
    out_fa4, lse_fa4, _ = fa4_attention(q, k, v, block_size=8, rescale_threshold=8.0)
    torch.testing.assert_close(out_fa4, out_fa2, rtol=0, atol=1e-13)
    torch.testing.assert_close(lse_fa4, lse_fa2, rtol=0, atol=1e-13)
    torch.testing.assert_close(out_fa4, reference(q, k, v, False)[0], rtol=0, atol=1e-13)


def test_rescale_counts_fa2_every_growth_fa4_only_big_jumps():
    """τ = 0 rescales exactly when a row's running max grows (counted independently with cummax); τ = 8 skips
    them all on ordinary scores; a key tile whose scores jump by more than 8 (log₂) forces one rescale per row."""
    q, k, v = randn(1, 1, 32, 16, seed=6), randn(1, 1, 64, 16, seed=7), randn(1, 1, 64, 16, seed=8)
    scores2 = (q @ k.transpose(-1, -2)).squeeze() / 4 * math.log2(math.e)  # (32, 64) in log₂ units
    tile_max = scores2.view(32, 4, 16).amax(-1)  # (32, 4): 4 key tiles of 16
    grows = (tile_max[:, 1:] > tile_max.cummax(-1).values[:, :-1]).sum().item()  # running max grows
    count_fa2 = fa4_attention(q, k, v, block_size=16, rescale_threshold=0.0)[2]
    count_fa4 = fa4_attention(q, k, v, block_size=16, rescale_threshold=8.0)[2]
    assert count_fa2.rescaled == grows > 0 and count_fa2.steps == count_fa4.steps == 32 * 3
    assert count_fa4.rescaled == 0
    k_jump = k.clone()
    k_jump[:, :, 48:] = 20 * q[:, :, :1]  # (1, 1, 16, 16) last key tile: scores ~ 20·|q|²/4 ≫ 8 for query 0
    jumped = fa4_attention(q, k_jump, v, block_size=16, rescale_threshold=8.0)
    assert jumped[2].rescaled >= 1
    torch.testing.assert_close(jumped[0].to(F64), reference(q, k_jump, v, False)[0], rtol=0, atol=1e-5)


def test_blind_rows_are_zero_with_minus_inf_lse():
    q, k, v = randn(1, 2, 10, 16, seed=9), randn(1, 1, 4, 16, seed=10), randn(1, 1, 4, 16, seed=11)
    out, lse, _ = fa4_attention(q, k, v, is_causal=True, block_size=16)  # queries 0..5 see no key
    assert torch.equal(out[:, :, :6], torch.zeros_like(out[:, :, :6])) and torch.isneginf(lse[:, :, :6]).all()
    assert not out.isnan().any() and torch.isfinite(lse[:, :, 6:]).all()


def test_exp2_poly3_error_is_the_documented_one():
    x = torch.linspace(-100, 100, 400_001, dtype=torch.float32)  # many points per unit interval
    relative = (exp2_poly3(x).to(F64) / torch.exp2(x.to(F64)) - 1).abs()  # (400001,)
    assert relative.max() <= EXP2_POLY3_MAX_REL_ERROR + 2 * 2.0**-24  # + float32 rounding of p and f
    assert relative.max() >= 0.9 * EXP2_POLY3_MAX_REL_ERROR  # the constant is the measured error, not a loose one
    assert exp2_poly3(torch.tensor([-math.inf, -500.0])).eq(0).all()  # masked scores give weight exactly 0


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"rescale_threshold": -1.0}, ValueError, "rescale_threshold must be in"),
        ({"rescale_threshold": float("nan")}, ValueError, "rescale_threshold must be in"),
        ({"rescale_threshold": "8"}, TypeError, "rescale_threshold must be a number"),
        ({"rescale_threshold": True}, TypeError, "rescale_threshold must be a number"),
        ({"polynomial_exp2": 1}, TypeError, "polynomial_exp2"),
        ({"block_size": 0}, ValueError, "block_size"),
    ],
)
def test_bad_arguments_raise(kwargs, error, words):
    q = randn(1, 1, 4, 8, seed=0)  # (B, H, L, D)
    with pytest.raises(error, match=words):
        fa4_attention(q, q, q, **kwargs)


def test_runs_on_the_device_of_its_inputs():
    """D2: the running state (m, l, acc), the query positions and the causal mask are built on q's device. The meta
    device takes the same path as CUDA without a GPU: a CPU tensor mixed in raises "not on the expected device"."""
    q = torch.empty(2, 4, 24, 16, device="meta")  # (B, Hq, Lq, D)
    k, v = torch.empty(2, 2, 40, 16, device="meta"), torch.empty(2, 2, 40, 16, device="meta")  # (B, Hkv, Lk, D)
    for is_causal in (False, True):
        for polynomial in (False, True):
            out, lse, count = fa4_attention(q, k, v, is_causal=is_causal, block_size=16, polynomial_exp2=polynomial)
            assert out.device.type == lse.device.type == "meta"
            assert out.shape == (2, 4, 24, 16) and lse.shape == (2, 4, 24)
            assert count.rescaled.device.type == "meta"  # no values to count: the counts stay on the device


def test_counts_are_python_ints_on_a_real_device():
    q = randn(1, 1, 20, 16, seed=12)  # (B, H, L, D)
    count = fa4_attention(q, q, q, block_size=16, rescale_threshold=0.0)[2]
    assert type(count.rescaled) is int and type(count.steps) is int and count.steps == 20


def test_exp2_poly3_outside_attentions_range():
    """D6: overflow gives inf (the int32 exponent used to wrap: inf -> NaN, 1e10 -> 0), underflow 0, NaN stays."""
    x = torch.tensor([math.inf, 1e10, 128.0, 200.0, 127.5, -126.0, -126.5, -1e10, -math.inf, math.nan])
    got = exp2_poly3(x)  # (10,)
    assert got[:4].isposinf().all()  # 2^128 and above overflow float32
    assert math.isfinite(got[4]) and abs(got[4].item() / 2**127.5 - 1) <= EXP2_POLY3_MAX_REL_ERROR + 2**-23
    assert got[5].item() == pytest.approx(2.0**-126, rel=EXP2_POLY3_MAX_REL_ERROR)  # the smallest normal float32
    assert got[6:9].eq(0).all() and got[9].isnan()
    x64 = torch.tensor([1000.0, 1024.0, -1022.0, -1023.0], dtype=F64)  # float64's own range
    got64 = exp2_poly3(x64)  # (4,)
    assert abs(got64[0].item() / 2.0**1000 - 1) <= EXP2_POLY3_MAX_REL_ERROR and got64[1].isposinf()
    assert got64[2].item() == pytest.approx(2.0**-1022, rel=EXP2_POLY3_MAX_REL_ERROR) and got64[3] == 0
    with pytest.raises(TypeError, match="floating-point"):
        exp2_poly3(torch.arange(3))
