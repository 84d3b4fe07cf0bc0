"""scaled_dot_product_attention and tiled_attention under odd inputs: clear errors, and what garbage may do.

Every bad input raises an error that names the offending dtype/device/value and the fix; no
torch-internal message, no ZeroDivisionError. Masked positions may hold garbage, within the
promise the docstring states (checked here against F.scaled_dot_product_attention).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attn_core as ac
from attn_core.flash.tiled import tiled_attention

F64 = torch.float64
KERNELS = {
    "sdpa": lambda q, k, v, **kw: ac.scaled_dot_product_attention(q, k, v, **kw)[0],
    "tiled": lambda q, k, v, **kw: tiled_attention(q, k, v, **kw),
}


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# --------------------------------------------------------------------------- dtype, device, head_dim


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.complex64])
@pytest.mark.parametrize("kernel", KERNELS.values(), ids=KERNELS.keys())
def test_non_float_qkv_raise_type_error_naming_the_dtype(kernel, dtype):
    """int/bool/complex q, k, v: TypeError naming the dtype and the fix (.float())."""
    q = torch.ones(1, 2, 3, 4, dtype=dtype)
    with pytest.raises(TypeError, match=rf"must be floating point, got {dtype}; convert them with \.float\(\)"):
        kernel(q, q, q)


@pytest.mark.parametrize("kernel", KERNELS.values(), ids=KERNELS.keys())
def test_qkv_on_different_devices_raise_naming_the_devices(kernel):
    """A meta q with cpu k, v (any two devices): ValueError naming every device, not a CPU result."""
    k = v = randn(1, 2, 3, 4)
    q = torch.empty(1, 2, 3, 4, dtype=F64, device="meta")
    with pytest.raises(ValueError, match=r"one device, got q on meta, k on cpu, v on cpu.*\.to\(q\.device\)"):
        kernel(q, k, v)


def test_mask_on_another_device_raises_naming_both_devices():
    """A mask on another device than q: ValueError naming both (not 'Tensor.item() ... meta')."""
    q = k = v = randn(1, 2, 3, 4)
    mask = torch.ones(3, 3, dtype=torch.bool, device="meta")
    with pytest.raises(ValueError, match=r"mask is on meta but q, k, v are on cpu.*mask\.to\(q\.device\)"):
        ac.scaled_dot_product_attention(q, k, v, mask)


@pytest.mark.parametrize("kernel", KERNELS.values(), ids=KERNELS.keys())
def test_head_dim_zero_needs_an_explicit_scale(kernel):
    """head_dim 0 with the default scale: ValueError (not ZeroDivisionError); an explicit scale works."""
    q, k, v = randn(1, 2, 3, 0), randn(1, 2, 4, 0), randn(1, 2, 4, 5)
    with pytest.raises(ValueError, match=r"head_dim 0.*pass scale=\.\.\. explicitly"):
        kernel(q, k, v)
    # Every score is 0, so the weights are uniform and the output is the mean of the values.
    out = kernel(q, k, v, scale=1.0)
    torch.testing.assert_close(out, v.mean(dim=-2, keepdim=True).expand(1, 2, 3, 5), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel", KERNELS.values(), ids=KERNELS.keys())
@pytest.mark.parametrize("bad", ["q", [[1.0]], np.ones((1, 2, 3, 4))], ids=["str", "list", "numpy"])
def test_non_tensor_qkv_raise_type_error(kernel, bad):
    """A non-tensor q: TypeError naming its type."""
    k = randn(1, 2, 3, 4)
    with pytest.raises(TypeError, match=rf"q must be a torch.Tensor, got {type(bad).__name__}"):
        kernel(bad, k, k)


# --------------------------------------------------------------------------- dropout_p


@pytest.mark.parametrize("p", [np.float32(0.25), np.float64(0.25), np.float16(0.25), 0.25, 0, np.int64(0)])
def test_dropout_p_accepts_any_real_number(p):
    """numpy scalars and ints are real numbers: accepted, with the same dropout as the float."""
    q, k, v = randn(1, 2, 3, 4), randn(1, 2, 6, 4, seed=1), randn(1, 2, 6, 4, seed=2)
    torch.manual_seed(0)
    out, _ = ac.scaled_dot_product_attention(q, k, v, dropout_p=p)
    torch.manual_seed(0)
    expected, _ = ac.scaled_dot_product_attention(q, k, v, dropout_p=float(p))
    assert torch.equal(out, expected)


@pytest.mark.parametrize(
    "p", [True, np.bool_(False), torch.tensor(0.1), float("nan"), np.float32("nan"), "0.1", None, 1, -0.0001]
)
def test_dropout_p_rejects_non_numbers_and_out_of_range(p):
    """bool, tensor, NaN, str, None and values outside [0, 1): ValueError naming the value."""
    q = randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match=r"dropout_p must be a number in \[0, 1\), got"):
        ac.scaled_dot_product_attention(q, q, q, dropout_p=p)


# --------------------------------------------------------------------------- garbage in masked positions


def padded_problem() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Keys 4 and 5 are padding for every query; query 2 sees no key at all (a blind row)."""
    q, k, v = randn(1, 2, 3, 4), randn(1, 2, 6, 4, seed=1), randn(1, 2, 6, 5, seed=2)
    mask = torch.tensor([True, True, True, True, False, False]).expand(3, 6).clone()  # (Lq, Lk)
    mask[2] = False
    return q, k, v, mask


@pytest.mark.parametrize("garbage", [1e300, -1e300, 7.0, float("nan"), float("inf"), float("-inf")])
def test_masked_keys_may_hold_anything(garbage):
    """Any value in a masked key, NaN and inf included, leaves the result bitwise unchanged.

    torch's F.sdpa can give NaN for NaN/inf masked keys (measured on torch 2.13): ours is stricter.
    """
    q, k, v, mask = padded_problem()
    clean_out, clean_weights = ac.scaled_dot_product_attention(q, k, v, mask)
    k[..., 4:, :] = garbage
    out, weights = ac.scaled_dot_product_attention(q, k, v, mask)
    assert torch.equal(out, clean_out) and torch.equal(weights, clean_weights)
    assert torch.equal(out[..., 2, :], torch.zeros(1, 2, 5, dtype=F64))  # the blind row stays 0


@pytest.mark.parametrize("garbage", [1e300, -1e300, 7.0])
def test_masked_values_may_hold_any_finite_garbage(garbage):
    """Finite garbage in masked values is multiplied by weights of exactly 0: bitwise unchanged."""
    q, k, v, mask = padded_problem()
    clean_out, _ = ac.scaled_dot_product_attention(q, k, v, mask)
    v[..., 4:, :] = garbage
    out, _ = ac.scaled_dot_product_attention(q, k, v, mask)
    assert torch.equal(out, clean_out)
    assert torch.equal(out[..., 2, :], torch.zeros(1, 2, 5, dtype=F64))


@pytest.mark.parametrize("garbage", [float("nan"), float("inf")])
def test_nan_or_inf_in_masked_values_propagates_as_in_torch(garbage):
    """0 · NaN = NaN: NaN/inf in a masked value reaches every row, the blind one too, exactly where
    F.scaled_dot_product_attention puts NaN. The docstring states this limit."""
    q, k, v, mask = padded_problem()
    v[..., 4, 0] = garbage  # one masked value entry, feature 0
    out, _ = ac.scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.equal(out.isnan(), expected.isnan())
    assert out[..., 0].isnan().all() and not out[..., 1:].isnan().any()  # only feature 0, in every row
