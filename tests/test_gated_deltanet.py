"""GatedDeltaNet against Hugging Face's Qwen3_5GatedDeltaNet (same state_dict), and LinearAttentionCache.

HF as shipped computes its kernels and gated norm in float32: the bound is 2^-24 · L · Dk · (a few layers of products)
relative to the output's scale (measured 3.7e-6 absolute on outputs of scale ~5 at L = 70). With float32 read as float64
in its module, the two agree to 1e-12.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import randn
from test_linear_attention import EXACT, hf_float64, hf_module

import attn_core as ac

HIDDEN, HK, HV, DK, DV, K = 32, 2, 4, 8, 6, 4
CONV_DIM = 2 * HK * DK + HV * DV


def make_pair(seed=0):
    """Our layer and HF's, in float64, with the same random weights (HF's init has ones/zeros that hide mistakes)."""
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig

    config = Qwen3_5TextConfig(
        hidden_size=HIDDEN,
        linear_num_key_heads=HK,
        linear_num_value_heads=HV,
        linear_key_head_dim=DK,
        linear_value_head_dim=DV,
        linear_conv_kernel_dim=K,
        num_hidden_layers=1,
        layer_types=["linear_attention"],
    )
    torch.manual_seed(seed)
    hf = hf_module().Qwen3_5GatedDeltaNet(config, 0).double()
    with torch.no_grad():
        for parameter in hf.parameters():
            parameter.normal_(0, 0.3)
    ours = ac.GatedDeltaNet(HIDDEN, num_k_heads=HK, num_v_heads=HV, head_k_dim=DK, head_v_dim=DV).double()
    ours.load_state_dict(hf.state_dict())  # strict: same keys and shapes
    return ours, hf


def test_state_dict_matches_hugging_face():
    ours, hf = make_pair()
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
        k: tuple(v.shape) for k, v in hf.state_dict().items()
    }
    assert tuple(ours.in_proj_qkv.weight.shape) == (CONV_DIM, HIDDEN)
    assert tuple(ours.conv1d.weight.shape) == (CONV_DIM, 1, K)
    assert all(
        m.bias is None for m in (ours.in_proj_qkv, ours.in_proj_z, ours.in_proj_a, ours.in_proj_b, ours.out_proj)
    )
    fresh = ac.GatedDeltaNet(HIDDEN, num_k_heads=HK, num_v_heads=HV, head_k_dim=DK, head_v_dim=DV)
    assert torch.equal(fresh.norm.weight, torch.ones(DV))  # the gated norm multiplies by weight, init ones


@pytest.mark.parametrize("length", [1, 3, 70])
def test_matches_hugging_face(length, monkeypatch):
    ours, hf = make_pair()
    x = randn(2, length, HIDDEN, seed=1)  # (B, L, hidden)
    with torch.no_grad():
        out = ours(x)  # (B, L, hidden)
        shipped = hf(x)  # float32 kernels and norm inside
        assert out.shape == (2, length, HIDDEN) and out.dtype == torch.float64
        assert (out - shipped).abs().max() <= 2**-24 * max(length, 8) * DK * 16 * shipped.abs().max()
        with hf_float64(monkeypatch):
            exact = hf(x)
    torch.testing.assert_close(out, exact, **EXACT)


def pieces_strategy():
    return st.lists(st.integers(1, 9), min_size=1, max_size=8)


@settings(max_examples=20, deadline=None)
@given(sizes=pieces_strategy())
def test_pieces_of_any_size_equal_one_pass(sizes):
    ours, _ = make_pair()
    length = sum(sizes)
    x = randn(2, length, HIDDEN, seed=2)  # (B, L, hidden)
    cache = ac.LinearAttentionCache()
    with torch.no_grad():
        full = ours(x)  # (B, L, hidden)
        outs, start = [], 0
        for size in sizes:
            outs.append(ours(x[:, start : start + size], cache=cache))  # (B, size, hidden)
            start += size
            assert len(cache) == start
            assert cache.nbytes == 2 * (CONV_DIM * (K - 1) + HV * DK * DV) * 8  # however many tokens
    torch.testing.assert_close(torch.cat(outs, dim=1), full, **EXACT)


def test_cache_holds_the_last_conv_inputs_and_the_state():
    ours, _ = make_pair()
    x = randn(1, 6, HIDDEN, seed=3)  # (B, L, hidden)
    cache = ac.LinearAttentionCache()
    assert cache.conv_state is None and cache.recurrent_state is None and len(cache) == 0 and cache.nbytes == 0
    with torch.no_grad():
        ours(x[:, :1], cache=cache)
        first = ours.in_proj_qkv(x[:, :1]).transpose(1, 2)  # (B, C, 1)
        assert cache.conv_state.shape == (1, CONV_DIM, K - 1)
        torch.testing.assert_close(cache.conv_state[:, :, :-1], torch.zeros(1, CONV_DIM, K - 2, dtype=torch.float64))
        torch.testing.assert_close(cache.conv_state[:, :, -1:], first, **EXACT)
        ours(x[:, 1:], cache=cache)
        last = ours.in_proj_qkv(x[:, -(K - 1) :]).transpose(1, 2)  # (B, C, K-1)
        torch.testing.assert_close(cache.conv_state, last, **EXACT)
    assert cache.recurrent_state.shape == (1, HV, DK, DV)


def test_cached_decode_matches_hugging_face_full_pass(monkeypatch):
    """A prefill of 5 (chunked) then single-token steps (recurrent) = HF's full pass in float64."""
    ours, hf = make_pair()
    x = randn(1, 9, HIDDEN, seed=4)  # (B, L, hidden)
    cache = ac.LinearAttentionCache()
    with torch.no_grad():
        ours_steps = torch.cat(
            [ours(x[:, :5], cache=cache)] + [ours(x[:, t : t + 1], cache=cache) for t in range(5, 9)], 1
        )
        with hf_float64(monkeypatch):
            theirs = hf(x)
    torch.testing.assert_close(ours_steps, theirs, **EXACT)


def test_one_cache_per_layer_and_type():
    ours, _ = make_pair()
    other = ac.GatedDeltaNet(HIDDEN, num_k_heads=HK, num_v_heads=HV, head_k_dim=DK, head_v_dim=DV).double()
    x = randn(1, 3, HIDDEN, seed=5)  # (B, L, hidden)
    cache = ac.LinearAttentionCache()
    with torch.no_grad():
        ours(x, cache=cache)
        with pytest.raises(ValueError, match="another layer"):
            other(x, cache=cache)
        with pytest.raises(TypeError, match="LinearAttentionCache"):
            ours(x, cache=ac.KVCache())
        with pytest.raises(ValueError, match="fresh LinearAttentionCache"):
            ours(randn(2, 1, HIDDEN, seed=6), cache=cache)


SIZES = dict(num_k_heads=HK, num_v_heads=HV, head_k_dim=DK, head_v_dim=DV)
BAD_LAYERS = {
    "Hv not a multiple": (dict(SIZES, num_v_heads=3), "multiple of num_k_heads=2"),
    "zero heads": (dict(SIZES, num_k_heads=0), "num_k_heads must be a positive int"),
    "float dim": (dict(SIZES, head_k_dim=8.0), "head_k_dim must be a positive int"),
    "bool dim": (dict(SIZES, head_v_dim=True), "head_v_dim must be a positive int"),
    "conv kernel 0": (dict(SIZES, conv_kernel_size=0), "conv_kernel_size must be a positive int"),
}


@pytest.mark.parametrize("case", BAD_LAYERS, ids=list(BAD_LAYERS))
def test_bad_layer_sizes(case):
    kwargs, message = BAD_LAYERS[case]
    with pytest.raises(ValueError, match=message):
        ac.GatedDeltaNet(HIDDEN, **kwargs)
    with pytest.raises(ValueError, match="hidden_dim must be a positive int"):
        ac.GatedDeltaNet(-1, **SIZES)


@pytest.mark.parametrize("shape", [(5, HIDDEN), (1, 5, HIDDEN + 1), (1, 2, 3, HIDDEN)])
def test_bad_x_shape(shape):
    layer = ac.GatedDeltaNet(HIDDEN, **SIZES)
    with pytest.raises(ValueError, match=rf"x must be \(B, L, hidden_dim={HIDDEN}\)"):
        layer(torch.zeros(shape))


def test_attention_layers_refuse_a_linear_attention_cache():
    layer = ac.GroupedQueryAttention(HIDDEN, 4, 2)
    with pytest.raises(TypeError, match="KVCache"):
        layer(torch.randn(1, 3, HIDDEN), cache=ac.LinearAttentionCache())


def test_empty_and_repr():
    cache = ac.LinearAttentionCache()
    assert repr(cache) == "LinearAttentionCache(empty)"
    layer = ac.GatedDeltaNet(HIDDEN, **SIZES)
    with torch.no_grad():
        out = layer(torch.zeros(2, 0, HIDDEN), cache=cache)  # (B, 0, hidden): nothing to mix
    assert out.shape == (2, 0, HIDDEN) and len(cache) == 0
    assert cache.nbytes == 2 * (CONV_DIM * (K - 1) + HV * DK * DV) * 4 and "tokens=0" in repr(cache)
