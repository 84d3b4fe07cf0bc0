"""What 2025 decoders add to GroupedQueryAttention (qk_norm, scale, sliding_window) against Hugging Face's
Gemma3Attention and against from-scratch formulas; the errors for bad arguments.

HF's Gemma3RMSNorm rounds through float32 (``self._norm(x.float())``), Gemma3RotaryEmbedding computes cos/sin in
float32 and the eager attention takes its softmax in float32, even for float64 inputs. So the HF comparison runs
twice: (1) HF eager as shipped, with a tolerance derived from float32 rounding (weights compared too); (2) HF with
those round trips removed (RMSNorm kept in the input dtype, float64 cos/sin passed in, "sdpa" attention, which stays
in float64): exact to 1e-12.
"""

from __future__ import annotations

import math

import pytest
import torch
from reference import F64, randn, reference_attention
from transformers import Gemma3TextConfig
from transformers.masking_utils import (
    causal_mask_function,
    eager_mask,
    sdpa_mask,
    sliding_window_causal_mask_function,
)
from transformers.models.gemma3.modeling_gemma3 import Gemma3Attention, Gemma3RMSNorm, Gemma3RotaryEmbedding

import attn_core as ac

HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 32, 4, 2, 16  # head_dim 16 != hidden / heads = 8
QUERY_PRE_ATTN_SCALAR = 24  # != head_dim: the scale is 24 ** -0.5, not 16 ** -0.5
WINDOW, LENGTH = 4, 11
LAYER_TYPES = ["sliding_attention", "full_attention"]
ROPE_BASE = {"sliding_attention": 10_000.0, "full_attention": 1_000_000.0}


def gemma_config(attn_implementation: str) -> Gemma3TextConfig:
    config = Gemma3TextConfig(
        vocab_size=16,
        hidden_size=HIDDEN,
        intermediate_size=8,
        num_hidden_layers=2,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        query_pre_attn_scalar=QUERY_PRE_ATTN_SCALAR,
        sliding_window=WINDOW,
        layer_types=LAYER_TYPES,
        rope_parameters={kind: {"rope_type": "default", "rope_theta": base} for kind, base in ROPE_BASE.items()},
        rms_norm_eps=1e-6,
        attention_bias=False,
    )
    config._attn_implementation = attn_implementation
    return config


def make_pair(layer_type: str, attn_implementation: str = "sdpa", seed: int = 0):
    """(our layer, HF's Gemma3Attention) holding the same random weights, qk-norm weights included."""
    hf = Gemma3Attention(gemma_config(attn_implementation), layer_idx=LAYER_TYPES.index(layer_type)).to(F64).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in hf.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=F64) * 0.3)  # norm weights too: not zeros
    ours = ac.GroupedQueryAttention(
        HIDDEN,
        HEADS,
        KV_HEADS,
        head_dim=HEAD_DIM,
        rope_base=ROPE_BASE[layer_type],
        qk_norm=True,
        scale=QUERY_PRE_ATTN_SCALAR**-0.5,
        sliding_window=WINDOW if layer_type == "sliding_attention" else None,
        bias=False,
    ).to(F64)
    state = hf.state_dict()
    for name in ("q_norm.weight", "k_norm.weight"):
        state[name] = 1 + state[name]  # HF multiplies by (1 + w); ours holds 1 + w
    ours.load_state_dict(state, strict=True)
    return ours.eval(), hf


def float64_cos_sin(length: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    freqs = ac.rope_angles(range(length), HEAD_DIM, base=base)  # (L, D/2) float64
    emb = torch.cat([freqs, freqs], dim=-1)[None]  # (1, L, D): HF's rotate-half layout
    return emb.cos(), emb.sin()


def hf_mask_function(layer_type: str):
    return sliding_window_causal_mask_function(WINDOW) if layer_type == "sliding_attention" else causal_mask_function


@pytest.mark.parametrize("layer_type", LAYER_TYPES)
def test_equals_gemma3_attention_in_float64(layer_type, monkeypatch):
    ours, hf = make_pair(layer_type, "sdpa")
    x = randn(2, LENGTH, HIDDEN, seed=1)  # (B, L, hidden)

    def rms64(self, h):  # Gemma3RMSNorm.forward without the float32 round trip
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)

    monkeypatch.setattr(Gemma3RMSNorm, "forward", rms64)
    mask = sdpa_mask(2, LENGTH, LENGTH, mask_function=hf_mask_function(layer_type), allow_is_causal_skip=False)
    expected, _ = hf(x, float64_cos_sin(LENGTH, ROPE_BASE[layer_type]), attention_mask=mask)  # (B, L, hidden)
    out, weights = ours(x, is_causal=True)  # (B, L, hidden), (B, H, L, L)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    window = WINDOW if layer_type == "sliding_attention" else LENGTH
    assert torch.equal(weights[0, 0] > 0, ac.sliding_window_mask(LENGTH, window))  # the window really applies
    torch.testing.assert_close(mask[0, 0], ac.sliding_window_mask(LENGTH, window), rtol=0, atol=0)


@pytest.mark.parametrize("layer_type", LAYER_TYPES)
def test_equals_gemma3_attention_eager_as_shipped(layer_type):
    ours, hf = make_pair(layer_type, "eager")
    x = randn(2, LENGTH, HIDDEN, seed=2)
    mask = eager_mask(2, LENGTH, LENGTH, mask_function=hf_mask_function(layer_type), dtype=F64)  # additive
    positions = torch.arange(LENGTH)[None].expand(2, -1)  # (B, L)
    cos_sin = Gemma3RotaryEmbedding(hf.config)(x, positions, layer_type)  # float32 angles, cast to float64
    expected, expected_weights = hf(x, cos_sin, attention_mask=mask)
    out, weights = ours(x, is_causal=True)
    # Float32 steps in HF, each a relative rounding of at most eps = 2^-24 per element: the RMSNorm of q and k
    # (~4 roundings), the angles pos * inv_freq with pos <= 10 (an absolute angle error <= 10 eps, so cos/sin
    # off by <= 10 eps) and the softmax (~4 roundings). q and k each carry <= 14 eps, a score <= 28 eps of
    # sum |q_i k_i| * scale, which after qk-norm is <= ||q|| ||k|| scale <= 16 (1 + 0.3 * 4)^2 / sqrt(24) ~ 16
    # (weights 0.3 * N(0, 1), below 4 sigma), so scores move by <= 28 * 16 eps; a softmax weight by at most twice
    # that plus 4 eps. Outputs are weight-averaged values through o_proj: bounded by the same relative error
    # times sum |w| |v| |W_o|, i.e. by the output's own scale times the sum over 64 inputs; all in all
    # eps * 2 * 28 * 16 * 64 ~ 3.4e-3 relative (measured ~1e-6): a wrong norm weight, scale or window moves
    # outputs by > 1e-1 relative.
    eps = 2.0**-24
    assert (weights - expected_weights).abs().max() <= eps * (2 * 28 * 16 + 4)
    assert (out - expected).abs().max() <= eps * 2 * 28 * 16 * 64 * expected.abs().max()


def test_qk_norm_matches_a_from_scratch_rms_norm():
    torch.manual_seed(3)
    layer = ac.GroupedQueryAttention(HIDDEN, HEADS, KV_HEADS, head_dim=HEAD_DIM, qk_norm=True).to(F64).eval()
    with torch.no_grad():
        layer.q_norm.weight.copy_(randn(HEAD_DIM, seed=4))
        layer.k_norm.weight.copy_(randn(HEAD_DIM, seed=5))
    x = randn(2, LENGTH, HIDDEN, seed=6)

    def rms(t, weight):  # over the last dim (head_dim), eps 1e-6
        return t / torch.sqrt(t.square().mean(-1, keepdim=True) + 1e-6) * weight

    def heads(t, count):  # (B, L, count * D) -> (B, count, L, D)
        return t.view(2, LENGTH, count, HEAD_DIM).transpose(1, 2)

    q = rms(heads(x @ layer.q_proj.weight.T + layer.q_proj.bias, HEADS), layer.q_norm.weight)  # (B, H, L, D)
    k = rms(heads(x @ layer.k_proj.weight.T + layer.k_proj.bias, KV_HEADS), layer.k_norm.weight)  # (B, Hkv, L, D)
    v = heads(x @ layer.v_proj.weight.T + layer.v_proj.bias, KV_HEADS)  # (B, Hkv, L, D)
    attended, expected_weights = reference_attention(q, k, v, mask=ac.causal_mask(LENGTH))  # (B, H, L, D)
    expected = attended.transpose(1, 2).reshape(2, LENGTH, HEADS * HEAD_DIM) @ layer.o_proj.weight.T
    out, weights = layer(x, is_causal=True)
    torch.testing.assert_close(out, expected + layer.o_proj.bias, rtol=0, atol=1e-12)
    torch.testing.assert_close(weights, expected_weights, rtol=0, atol=1e-12)


@pytest.mark.parametrize("rope", [None, 100.0])
def test_scale_override_equals_scaling_q_by_hand(rope):
    """scale=s equals the default 1/sqrt(head_dim) with q_proj multiplied by s * sqrt(head_dim)."""
    torch.manual_seed(7)
    scale = 0.37
    layer = ac.GroupedQueryAttention(HIDDEN, HEADS, KV_HEADS, head_dim=HEAD_DIM, rope_base=rope, scale=scale)
    by_hand = ac.GroupedQueryAttention(HIDDEN, HEADS, KV_HEADS, head_dim=HEAD_DIM, rope_base=rope)
    by_hand.load_state_dict(layer.state_dict())
    layer, by_hand = layer.to(F64).eval(), by_hand.to(F64).eval()
    with torch.no_grad():
        by_hand.q_proj.weight.mul_(scale * math.sqrt(HEAD_DIM))  # RoPE is linear: scaling q commutes with it
        by_hand.q_proj.bias.mul_(scale * math.sqrt(HEAD_DIM))
    x = randn(1, LENGTH, HIDDEN, seed=8)
    out, weights = layer(x, is_causal=True)
    expected, expected_weights = by_hand(x, is_causal=True)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(weights, expected_weights, rtol=0, atol=1e-12)
    assert not torch.allclose(out, layer.__class__(HIDDEN, HEADS, KV_HEADS, head_dim=HEAD_DIM).to(F64)(x)[0])


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize("scale", [0, -0.5, 0.0, True, "0.1", float("nan"), float("inf")])
def test_bad_scale_raises(scale):
    with pytest.raises(ValueError, match="scale must be None"):
        ac.GroupedQueryAttention(HIDDEN, HEADS, KV_HEADS, scale=scale)


@pytest.mark.parametrize("window", [0, -1, 2.5, True, "4"])
def test_bad_sliding_window_raises(window):
    with pytest.raises(ValueError, match="sliding_window must be None or an int >= 1"):
        ac.GroupedQueryAttention(HIDDEN, HEADS, KV_HEADS, sliding_window=window)


@pytest.mark.parametrize("qk_norm", [1, 0, None, "yes"])
def test_bad_qk_norm_raises(qk_norm):
    with pytest.raises(TypeError, match="qk_norm must be True or False"):
        ac.GroupedQueryAttention(HIDDEN, HEADS, KV_HEADS, qk_norm=qk_norm)


def test_sliding_window_with_context_raises():
    layer = ac.GroupedQueryAttention(HIDDEN, HEADS, KV_HEADS, sliding_window=WINDOW)
    with pytest.raises(ValueError, match="sliding_window.*cross-attention"):
        layer(randn(1, 3, HIDDEN, dtype=torch.float32), context=randn(1, 5, HIDDEN, dtype=torch.float32))


@pytest.mark.parametrize("cache", [None, "kv"], ids=["no-cache", "KVCache"])
def test_seq_id_without_a_paged_cache_raises(cache):
    layer = ac.GroupedQueryAttention(HIDDEN, HEADS, KV_HEADS)
    x = randn(1, 3, HIDDEN, dtype=torch.float32)
    with pytest.raises(ValueError, match="seq_id=0 picks a sequence of a paged cache.*PagedKVCache"):
        layer(x, cache=ac.KVCache() if cache else None, seq_id=0)


def test_repr_names_the_new_features():
    layer = ac.GroupedQueryAttention(HIDDEN, HEADS, KV_HEADS, head_dim=HEAD_DIM, qk_norm=True, scale=0.25)
    text = repr(ac.GroupedQueryAttention(HIDDEN, HEADS, KV_HEADS, sliding_window=WINDOW)) + repr(layer)
    assert "sliding_window=4" in text and "scale=0.25" in text and "qk_norm=True" in text
