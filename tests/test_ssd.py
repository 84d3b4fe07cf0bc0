"""ac.ssd (chunked == recurrence in float64, every chunking), ac.ssd_as_attention (the SSM as a masked-attention
matrix), ac.Mamba2Mixer == HF's Mamba2Mixer and NemotronHMamba2Mixer (torch path)."""

from __future__ import annotations

import pytest
import torch
from hf_float64 import float32_bound, hf_in_float64
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import Mamba2Config, NemotronHConfig
from transformers.models.mamba2 import modeling_mamba2 as hf_mamba2
from transformers.models.nemotron_h import modeling_nemotron_h as hf_nemotron

import attn_core as ac

F64 = torch.float64


def _inputs(seed, length=13, batch=2, heads=4, head_dim=3, groups=2, state=5):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, heads, length, head_dim, generator=gen, dtype=F64)
    dt = torch.rand(batch, heads, length, generator=gen, dtype=F64)
    A = -2 * torch.rand(heads, generator=gen, dtype=F64)
    B = torch.randn(batch, groups, length, state, generator=gen, dtype=F64)
    C = torch.randn(batch, groups, length, state, generator=gen, dtype=F64)
    return x, dt, A, B, C


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), length=st.integers(0, 20), chunk=st.integers(1, 9), with_state=st.booleans())
def test_chunked_equals_recurrence_float64(seed, length, chunk, with_state):
    x, dt, A, B, C = _inputs(seed, length)
    state = torch.randn(2, 4, 3, 5, dtype=F64) if with_state else None
    want, want_state = ac.ssd(x, dt, A, B, C, initial_state=state)
    got, got_state = ac.ssd(x, dt, A, B, C, chunk_size=chunk, initial_state=state)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(got_state, want_state, rtol=0, atol=1e-12)


def test_attention_form_equals_recurrence_and_is_causal():
    x, dt, A, B, C = _inputs(1, 11)
    matrix = ac.ssd_as_attention(dt, A, B, C)  # (batch, H, L, L)
    assert matrix.shape == (2, 4, 11, 11)
    assert (matrix.triu(1) == 0).all()
    want, _ = ac.ssd(x, dt, A, B, C)
    torch.testing.assert_close(matrix @ x, want, rtol=0, atol=1e-12)
    mask = ac.ssd_decay_mask(dt, A)  # 1-semiseparable: every [i, j] is a product of per-token decays
    torch.testing.assert_close(mask[..., 5, 2], (dt[..., 3:6] * A[:, None]).sum(-1).exp(), rtol=1e-14, atol=0)


def test_bad_inputs_raise_typed_errors():
    x, dt, A, B, C = _inputs(2)
    with pytest.raises(ValueError, match="A must be <= 0"):
        ac.ssd(x, dt, -A, B, C)
    with pytest.raises(ValueError, match="multiple of G"):
        ac.ssd(x, dt, A, B[:, :1].expand(2, 3, 13, 5), C[:, :1].expand(2, 3, 13, 5))
    with pytest.raises(TypeError):
        ac.ssd(x.long(), dt, A, B, C)


def _perturbed(module, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return module


def _mamba2_pair():
    config = Mamba2Config(
        hidden_size=16, num_heads=4, head_dim=8, expand=2, state_size=6, n_groups=2, chunk_size=8, num_hidden_layers=1
    )
    hf = _perturbed(hf_mamba2.Mamba2Mixer(config, 0).double(), 0)
    ours = ac.Mamba2Mixer(
        16,
        num_heads=4,
        head_dim=8,
        state_size=6,
        n_groups=2,
        conv_kernel_size=config.conv_kernel,
        chunk_size=8,
        use_bias=config.use_bias,
        use_conv_bias=config.use_conv_bias,
        eps=config.layer_norm_epsilon,
        time_step_limit=config.time_step_limit,
    ).double()
    ours.load_state_dict(hf.state_dict(), strict=True)
    return hf, ours, hf_mamba2


def _nemotron_pair():
    config = NemotronHConfig(
        hidden_size=16,
        mamba_num_heads=4,
        mamba_head_dim=8,
        ssm_state_size=6,
        n_groups=2,
        chunk_size=8,
        num_hidden_layers=2,
        layers_block_type=["mamba", "attention"],
    )
    hf = _perturbed(hf_nemotron.NemotronHMamba2Mixer(config, 0).double(), 1)
    ours = ac.Mamba2Mixer(
        16,
        num_heads=4,
        head_dim=8,
        state_size=6,
        n_groups=2,
        conv_kernel_size=config.conv_kernel,
        chunk_size=8,
        use_bias=config.mamba_proj_bias,
        use_conv_bias=config.use_conv_bias,
        eps=config.layer_norm_epsilon,
        time_step_limit=(config.time_step_min, float("inf")),
    ).double()
    ours.load_state_dict(hf.state_dict(), strict=True)
    return hf, ours, hf_nemotron


@torch.no_grad()
@pytest.mark.parametrize("pair", [_mamba2_pair, _nemotron_pair])
def test_mixer_equals_hf_in_float64_and_within_float32_bound(pair):
    hf, ours, module = pair()
    x = torch.randn(2, 21, 16, dtype=F64)
    got = ours(x)
    with hf_in_float64(module):
        torch.testing.assert_close(got, hf(x), rtol=0, atol=1e-10)
    # As shipped HF runs the chunk scan and the gated norm in float32: the longest accumulation is one chunk (8) plus
    # the state read over N = 6 and the scan over 3 chunks, so γ_(8 + 6 + 3) · max|out| bounds the difference.
    shipped = hf(x)
    assert (got - shipped).abs().max() <= float32_bound(8 + 6 + 3, shipped.abs().max().item())


@torch.no_grad()
@pytest.mark.parametrize("pair", [_mamba2_pair, _nemotron_pair])
@pytest.mark.parametrize("splits", [[1] * 21, [4, 17], [9, 1, 11]])
def test_decode_and_chunked_prefill_through_cache_equal_prefill(pair, splits):
    _, ours, _ = pair()
    x = torch.randn(2, 21, 16, dtype=F64)
    whole = ours(x)
    cache, outs, start = ac.LinearAttentionCache(), [], 0
    for size in splits:
        outs.append(ours(x[:, start : start + size], cache=cache))
        start += size
    torch.testing.assert_close(torch.cat(outs, 1), whole, rtol=0, atol=1e-12)


def test_float16_chunked_decays_do_not_overflow():
    x, dt, A, B, C = _inputs(5, 64)
    dt = dt * 3000  # summed log decays far past float16's 65504; a difference of cumulative sums would give inf - inf
    y, state = ac.ssd(*(t.half() for t in (x, dt, A, B, C)), chunk_size=32)
    assert torch.isfinite(y).all() and torch.isfinite(state).all()
