"""ac.kda_rule (chunked == recurrence in float64, every chunking) and ac.KimiDeltaAttention == HF's
KimiLinearDeltaAttention (float64 exactly with HF's float32 casts lifted; float32 bound as shipped)."""

from __future__ import annotations

import pytest
import torch
from hf_float64 import float32_bound, hf_in_float64
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.models.kimi_linear import modeling_kimi_linear as hf_kimi
from transformers.models.kimi_linear.configuration_kimi_linear import KimiLinearConfig

import attn_core as ac

F64 = torch.float64


def _inputs(seed, batch=2, heads=2, length=13, dk=4, dv=3, strong_decay=1.0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, length, dk, generator=gen, dtype=F64)
    k = torch.nn.functional.normalize(torch.randn(batch, heads, length, dk, generator=gen, dtype=F64), dim=-1)
    v = torch.randn(batch, heads, length, dv, generator=gen, dtype=F64)
    g = -strong_decay * torch.rand(batch, heads, length, dk, generator=gen, dtype=F64)
    beta = torch.rand(batch, heads, length, generator=gen, dtype=F64)
    return q, k, v, g, beta


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    length=st.integers(0, 20),
    chunk=st.integers(1, 9),
    with_state=st.booleans(),
)
def test_chunked_equals_recurrence_float64(seed, length, chunk, with_state):
    q, k, v, g, beta = _inputs(seed, length=length)
    state = torch.randn(2, 2, 4, 3, dtype=F64) if with_state else None
    want, want_state = ac.kda_rule(q, k, v, g, beta, initial_state=state)
    got, got_state = ac.kda_rule(q, k, v, g, beta, chunk_size=chunk, initial_state=state)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(got_state, want_state, rtol=0, atol=1e-12)


def test_recurrence_is_the_per_channel_rule_by_hand():
    q, k, v, g, beta = _inputs(1, batch=1, heads=1, length=3)
    state = torch.zeros(4, 3, dtype=F64)
    outs = []
    for t in range(3):
        state = torch.diag(g[0, 0, t].exp()) @ state
        state = state + beta[0, 0, t] * torch.outer(k[0, 0, t], v[0, 0, t] - state.T @ k[0, 0, t])
        outs.append(state.T @ q[0, 0, t] * 0.5)  # scale 1/sqrt(4)
    out, final = ac.kda_rule(q, k, v, g, beta)
    torch.testing.assert_close(out[0, 0], torch.stack(outs), rtol=0, atol=1e-14)
    torch.testing.assert_close(final[0, 0], state, rtol=0, atol=1e-14)


def test_split_sequence_through_state_equals_whole():
    q, k, v, g, beta = _inputs(2, length=17)
    whole, _ = ac.kda_rule(q, k, v, g, beta, chunk_size=5)
    first, state = ac.kda_rule(*(t[:, :, :6] for t in (q, k, v, g, beta)), chunk_size=4)
    second, _ = ac.kda_rule(*(t[:, :, 6:] for t in (q, k, v, g, beta)), chunk_size=3, initial_state=state)
    torch.testing.assert_close(torch.cat([first, second], 2), whole, rtol=0, atol=1e-12)


def test_float16_chunked_gates_do_not_overflow():
    q, k, v, g, beta = _inputs(3, length=64, strong_decay=2000.0)  # cumulative gates far past float16's 65504
    out, state = ac.kda_rule(*(t.half() for t in (q, k, v, g, beta)), chunk_size=64)
    assert torch.isfinite(out).all() and torch.isfinite(state).all()


def test_bad_inputs_raise_typed_errors():
    q, k, v, g, beta = _inputs(4)
    with pytest.raises(ValueError, match="per-channel"):
        ac.kda_rule(q, k, v, g[..., 0], beta)
    with pytest.raises(ValueError, match="g <= 0"):
        ac.kda_rule(q, k, v, -g, beta)
    with pytest.raises(ValueError, match="chunk_size"):
        ac.kda_rule(q, k, v, g, beta, chunk_size=0)


def _tiny_pair(seed=0):
    config = KimiLinearConfig(
        hidden_size=32,
        linear_num_heads=2,
        linear_head_dim=8,
        num_hidden_layers=2,
        layer_types=["linear_attention", "full_attention"],
    )
    torch.manual_seed(seed)
    hf = hf_kimi.KimiLinearDeltaAttention(config, 0).double()
    with torch.no_grad():
        for p in hf.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    ours = ac.KimiDeltaAttention(
        32, num_heads=2, head_dim=8, conv_kernel_size=config.linear_conv_kernel_dim, eps=config.rms_norm_eps
    ).double()
    ours.load_state_dict(hf.state_dict(), strict=True)
    return hf, ours


@torch.no_grad()
def test_layer_equals_hf_in_float64_and_within_float32_bound():
    hf, ours = _tiny_pair()
    x = torch.randn(2, 70, 32, dtype=F64)
    got = ours(x)
    with hf_in_float64(hf_kimi):
        torch.testing.assert_close(got, hf(x), rtol=0, atol=1e-10)
    # As shipped HF rounds q, k, v, g, beta to float32 and runs the rule and the gated norm in float32: the longest
    # accumulation is a 64-token chunk plus the Dk-long state read, so γ_(64 + Dk) · max|out| bounds the difference.
    shipped = hf(x)
    assert (got - shipped).abs().max() <= float32_bound(64 + 8, shipped.abs().max().item())


@torch.no_grad()
@pytest.mark.parametrize("splits", [[1] * 20, [5, 15], [3, 1, 16], [20]])
def test_decode_and_chunked_prefill_through_cache_equal_prefill(splits):
    _, ours = _tiny_pair(1)
    x = torch.randn(2, 20, 32, dtype=F64)
    whole = ours(x)
    cache, outs, start = ac.LinearAttentionCache(), [], 0
    for size in splits:
        outs.append(ours(x[:, start : start + size], cache=cache))
        start += size
    torch.testing.assert_close(torch.cat(outs, 1), whole, rtol=0, atol=1e-12)
    assert len(cache) == 20
