"""Half precision: scores formed in float32, no fp16 overflow, and accuracy on par with torch's own kernels.

Every error here is measured against float64 on the *same rounded inputs*, so what is left is the
kernel's own rounding. Rather than guess a tolerance for each dtype, the reference for
``scaled_dot_product_attention`` is torch's own half-precision kernel on the same inputs: ours may
not be more than 1.5 times worse (it measures 0.77-1.0 times; scores rounded to half precision
before the softmax made it 2-580 times worse).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import attn_core as ac
from attn_core.flash.tiled import tiled_attention

F64 = torch.float64


def scaled_randn(*shape: int, scale: float, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """scale · standard normal, drawn in float32 and rounded once to `dtype`."""
    generator = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(*shape, generator=generator)).to(dtype)


def make_qkv(
    batch: tuple[int, ...], hq: int, hkv: int, lq: int, lk: int, d: int, dv: int, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q (*batch, hq, lq, d), k (*batch, hkv, lk, d), v (*batch, hkv, lk, dv), standard normal in float64."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, hq, lq, d, generator=generator, dtype=F64)
    k = torch.randn(*batch, hkv, lk, d, generator=generator, dtype=F64)
    v = torch.randn(*batch, hkv, lk, dv, generator=generator, dtype=F64)
    return q, k, v


def random_mask(*shape: int, seed: int) -> torch.Tensor:
    """A random boolean mask (True = may attend, p = 0.6) in which key 0 is always visible."""
    mask = torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) < 0.6
    mask[..., 0] = True
    return mask


def max_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return (actual.double() - expected).abs().max().item()


def test_fp16_scores_beyond_65504_do_not_overflow():
    """q = k = 100·ones, D = 64: every score is 100·100·64/8 = 80000 > 65504 (fp16's largest finite).

    All scores are equal, so the weights are exactly 1/4 and the output is the mean of the values.
    Forming Q Kᵀ in fp16 gave inf - inf = NaN for the whole row.
    """
    q = k = torch.full((1, 1, 4, 64), 100.0, dtype=torch.float16)  # (B, H, L, D)
    v = torch.arange(4 * 64, dtype=torch.float16).reshape(1, 1, 4, 64) / 64  # (B, H, L, D), exact in fp16
    out, weights = ac.scaled_dot_product_attention(q, k, v)
    assert out.dtype == weights.dtype == torch.float16
    assert torch.equal(weights, torch.full((1, 1, 4, 4), 0.25, dtype=torch.float16))
    # The mean of four fp16 numbers with 6 significant bits is exact in float32 and in fp16.
    assert torch.equal(out, v.float().mean(dim=-2, keepdim=True).expand(1, 1, 4, 64).half())
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=0)


def test_fp16_overflow_with_a_mask_and_is_causal():
    """The same overflow case through the mask path: still finite, and blind rows still zero."""
    q = k = torch.full((1, 1, 4, 64), 100.0, dtype=torch.float16)  # (B, H, L, D)
    v = torch.ones(1, 1, 4, 64, dtype=torch.float16)  # (B, H, L, D)
    mask = torch.tensor([True, True, True, False])  # (Lk,): the last key is padding
    out, weights = ac.scaled_dot_product_attention(q, k, v, mask, is_causal=True)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert torch.equal(out, torch.ones_like(out))  # every row averages ones
    assert torch.equal(weights[0, 0, 1], torch.tensor([0.5, 0.5, 0.0, 0.0], dtype=torch.float16))


# (dtype, scale of q and k, shape (B, H, L, D), is_causal)
ACCURACY_CASES = {
    "bf16 unit scores": (torch.bfloat16, 1.0, (2, 4, 64, 64), False),
    "bf16 q,k = 8 randn": (torch.bfloat16, 8.0, (2, 4, 64, 64), True),
    "bf16 q,k = 64 randn": (torch.bfloat16, 64.0, (2, 4, 16, 64), False),
    "fp16 unit scores": (torch.float16, 1.0, (2, 4, 64, 64), True),
    "fp16 q,k = 3 randn, L 512": (torch.float16, 3.0, (1, 2, 512, 64), False),
    "fp16 q,k = 20 randn": (torch.float16, 20.0, (1, 2, 128, 64), False),
}


@pytest.mark.parametrize(("dtype", "scale", "shape", "is_causal"), ACCURACY_CASES.values(), ids=ACCURACY_CASES.keys())
def test_half_precision_error_is_no_worse_than_torchs_own_kernel(dtype, scale, shape, is_causal):
    """max |ours - float64| <= 1.5 · max |torch's half kernel - float64| on the same inputs."""
    q = scaled_randn(*shape, scale=scale, seed=0, dtype=dtype)  # (B, H, L, D)
    k = scaled_randn(*shape, scale=scale, seed=1, dtype=dtype)  # (B, H, L, D)
    v = scaled_randn(*shape, scale=1.0, seed=2, dtype=dtype)  # (B, H, L, D)
    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=is_causal)
    torch_error = max_error(F.scaled_dot_product_attention(q, k, v, is_causal=is_causal), exact)
    out, weights = ac.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    assert out.dtype == weights.dtype == dtype
    assert torch_error > 1e-4  # the case really exercises rounding (a one-hot softmax would not)
    assert max_error(out, exact) <= 1.5 * torch_error


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("use_mask", [False, True], ids=["no-mask", "mask"])
def test_half_precision_keeps_dtype_and_is_close_to_float64(dtype, use_mask):
    """fp16/bf16 inputs return their own dtype, within one rounding of the exact result.

    The reference is float64 on the same rounded inputs. The work is float32, so what is left is
    rounding each result once to `dtype` (relative error <= u = eps/2: rtol) plus float32's own
    error (atol): u32 = 2^-24 per rounding; a score is a D-term dot product bounded by
    s = scale·max|q|·max|k|, so it is off by <= D·u32·s and a weight by twice that (relative);
    the output adds an Lk-term sum: (Lk + 10)·u32·max|v|.
    """
    q, k, v = (t.to(dtype) for t in make_qkv((2,), 4, 2, 6, 8, 16, 8, seed=22))
    mask = random_mask(6, 8, seed=23) if use_mask else None
    out, weights = ac.scaled_dot_product_attention(q, k, v, mask, is_causal=True)
    assert out.dtype == dtype and weights.dtype == dtype
    exact_out, exact_weights = ac.scaled_dot_product_attention(q.double(), k.double(), v.double(), mask, is_causal=True)

    u32 = torch.finfo(torch.float32).eps / 2
    head_dim, k_len, biggest_v = q.shape[-1], k.shape[-2], v.abs().max().item()
    score_bound = q.double().norm(dim=-1).max().item() * k.double().norm(dim=-1).max().item() / math.sqrt(head_dim)
    weights_atol = 2 * head_dim * u32 * score_bound
    out_atol = biggest_v * (weights_atol + (k_len + 10) * u32)
    rtol = torch.finfo(dtype).eps / 2
    torch.testing.assert_close(out.double(), exact_out, rtol=rtol, atol=out_atol)
    torch.testing.assert_close(weights.double(), exact_weights, rtol=rtol, atol=weights_atol)


def test_bf16_weights_are_the_float32_weights_rounded_once():
    """The returned half weights are the float32 softmax rounded once; rows sum to 1 within bf16 rounding."""
    q = scaled_randn(1, 2, 8, 16, scale=4.0, seed=3, dtype=torch.bfloat16)  # (B, H, Lq, D)
    k = scaled_randn(1, 2, 8, 16, scale=4.0, seed=4, dtype=torch.bfloat16)  # (B, H, Lk, D)
    v = scaled_randn(1, 2, 8, 16, scale=1.0, seed=5, dtype=torch.bfloat16)  # (B, H, Lk, Dv)
    _, weights = ac.scaled_dot_product_attention(q, k, v)
    _, weights32 = ac.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert torch.equal(weights, weights32.to(torch.bfloat16))


def test_tiled_fp16_accumulates_in_float32_at_4096_keys():
    """fp16 in, fp16 out, but the running sums of 4096 keys are float32.

    v is drawn in [0.5, 1), so every output (a convex combination of values) lies in [0.5, 1]
    where fp16's spacing is 2^-11: rounding the result once costs at most 2^-12. The float32
    work adds at most about (256-term tile dot products + 16 tile rescales + exp) ~ 300 · 2^-24
    ~ 2e-5 relative; we allow 3e-5. Measured: float32 accumulation 2.44e-4 (the rounding), an fp16
    accumulator >= 9.3e-4 over 20 seeds (it rounds the running sums after every tile).
    """
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, 16, 16, generator=generator).half()  # (B, H, Lq, D)
    k = torch.randn(1, 1, 4096, 16, generator=generator).half()  # (B, H, Lk, D)
    v = (0.5 + 0.5 * torch.rand(1, 1, 4096, 16, generator=generator)).half()  # (B, H, Lk, Dv), in [0.5, 1)
    out = tiled_attention(q, k, v)  # (1, 1, 16, 16), default block 256: 16 key tiles
    assert out.dtype == torch.float16
    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    assert max_error(out, exact) <= 2.0**-12 + 3e-5


def test_sdpa_and_tiled_agree_in_fp16_beyond_65504():
    """Both kernels form scores in float32, so they agree on inputs whose fp16 scores would overflow."""
    q = scaled_randn(1, 2, 40, 64, scale=150.0, seed=6, dtype=torch.float16)  # (B, H, Lq, D), scores up to ~7e4
    k = scaled_randn(1, 2, 40, 64, scale=150.0, seed=7, dtype=torch.float16)  # (B, H, Lk, D)
    v = scaled_randn(1, 2, 40, 64, scale=1.0, seed=8, dtype=torch.float16)  # (B, H, Lk, Dv)
    scores = (q.double() @ k.double().transpose(-2, -1)) / 8  # (B, H, Lq, Lk)
    assert scores.abs().max() > 65504  # the case really overflows fp16
    out, _ = ac.scaled_dot_product_attention(q, k, v)
    tiled = tiled_attention(q, k, v, block_size=16)
    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    assert torch.isfinite(out).all() and torch.isfinite(tiled).all()
    # Both round the same float32 result to fp16 (|out| < 4: spacing <= 2^-9, half of it 2^-10).
    assert max_error(out, exact) <= 2.0**-10 + 1e-4 and max_error(tiled, exact) <= 2.0**-10 + 1e-4
