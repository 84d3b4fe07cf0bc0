"""ac.LightningAttention == HF's MiniMaxLightningAttention (float64), every block size == the recurrence, and
decode / chunked prefill through ac.LinearAttentionCache == prefill."""

from __future__ import annotations

import pytest
import torch
from hf_float64 import float32_bound, hf_in_float64
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import MiniMaxConfig
from transformers.models.minimax import modeling_minimax as hf_minimax

import attn_core as ac

F64 = torch.float64


def _recurrence(q, k, v, slopes):
    state = torch.zeros(q.shape[0], q.shape[1], q.shape[-1], v.shape[-1], dtype=F64)
    outs = []
    for t in range(q.shape[2]):
        state = (-slopes)[:, None, None].exp() * state + k[:, :, t, :, None] * v[:, :, t, None, :]
        outs.append((q[:, :, t, None] @ state)[:, :, 0])
    return torch.stack(outs, 2), state


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), length=st.integers(1, 20), block=st.integers(1, 9))
def test_blocks_equal_recurrence_float64(seed, length, block):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 3, length, 4, generator=gen, dtype=F64) for _ in range(3))
    slopes = ac.lightning_slopes(3)
    want, want_state = _recurrence(q, k, v, slopes)
    got, got_state = ac.lightning_attention(q, k, v, slopes, block_size=block)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(got_state, want_state, rtol=0, atol=1e-12)


def _pair(layer_idx=1):
    config = MiniMaxConfig(
        hidden_size=32,
        num_attention_heads=4,
        head_dim=8,
        block_size=8,
        num_hidden_layers=4,
        layer_types=["full_attention", "linear_attention", "linear_attention", "linear_attention"],
    )
    hf = hf_minimax.MiniMaxLightningAttention(config, layer_idx).double()
    torch.manual_seed(0)
    with torch.no_grad():
        for p in hf.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    ours = ac.LightningAttention(32, num_heads=4, head_dim=8, block_size=8, layer_idx=layer_idx, num_layers=4).double()
    ours.load_state_dict(hf.state_dict(), strict=True)
    torch.testing.assert_close(ours.slope_rate, hf.slope_rate, rtol=1e-7, atol=0)  # same slopes, built by us
    return hf, ours


@torch.no_grad()
@pytest.mark.parametrize("layer_idx", [1, 3])
def test_layer_equals_hf(layer_idx):
    hf, ours = _pair(layer_idx)
    x = torch.randn(2, 21, 32, dtype=F64)
    got = ours(x)
    shipped = hf(x, None, None)[0]
    # HF's query/key/diagonal decay buffers were computed in float32 at init and its RMSNorm runs in float32:
    # rebuild the buffers in float64 from the same slopes and lift the casts, and the two agree to 1e-10.
    for name, value in zip(
        ("query_decay", "key_decay", "diagonal_decay"), hf.decay_factors(hf.slope_rate), strict=True
    ):
        setattr(hf, name, value)
    with hf_in_float64(hf_minimax):
        torch.testing.assert_close(got, hf(x, None, None)[0], rtol=0, atol=1e-10)
    # As shipped: decays rounded once to float32 and the norm in float32; the longest sum is one block (8) plus the
    # head dim (8), so γ_16 · max|out| bounds the difference.
    assert (got - shipped).abs().max() <= float32_bound(16, shipped.abs().max().item())


@torch.no_grad()
@pytest.mark.parametrize("splits", [[1] * 21, [5, 16], [9, 1, 11]])
def test_decode_and_chunked_prefill_through_cache_equal_prefill(splits):
    _, ours = _pair()
    x = torch.randn(2, 21, 32, dtype=F64)
    whole = ours(x)
    cache, outs, start = ac.LinearAttentionCache(), [], 0
    for size in splits:
        outs.append(ours(x[:, start : start + size], cache=cache))
        start += size
    torch.testing.assert_close(torch.cat(outs, 1), whole, rtol=0, atol=1e-12)
