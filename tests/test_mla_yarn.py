"""MultiHeadLatentAttention(rope_scaling=) with DeepSeek-V3's released YaRN config: equal to DeepseekV3Attention at
positions 0, 5000 and 131,000 (absorbed and naive), the softmax scale times g(40, 1)² ≈ 1.874, cached == full.

float64: HF's DeepseekV3RotaryEmbedding is built with its frequency code run in float64 (``hf_float64``), its
forward's formula is written in float64 and its RMSNorm is kept in the input dtype (test_latent_attention.py does
the same), so the comparison is exact to 1e-12.
"""

from __future__ import annotations

import math

import pytest
import torch
from reference import F64, randn
from test_rope_scaling import YARN_PLAIN, YARN_V3, hf_cos_sin, hf_float64
from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
    DeepseekV3Attention,
    DeepseekV3RMSNorm,
    DeepseekV3RotaryEmbedding,
)

import attn_core as ac

DIMS = dict(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=16, v_head_dim=10)  # rope 16: a real ramp
HIDDEN, HEADS = 32, 4
V3_SOFTMAX_FACTOR = (0.1 * math.log(40) + 1) ** 2  # 1.8738...


def make_mla(rope_scaling=YARN_V3, q_lora_rank=12, seed=0) -> ac.MultiHeadLatentAttention:
    torch.manual_seed(seed)
    mla = ac.MultiHeadLatentAttention(HIDDEN, HEADS, q_lora_rank=q_lora_rank, rope_scaling=rope_scaling, **DIMS)
    with torch.no_grad():
        for p in mla.parameters():
            p.normal_(0.0, 0.3)
    return mla.to(F64).eval()


def rms64(self, h):
    return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


def causal4(length: int) -> torch.Tensor:
    return torch.ones(length, length, dtype=torch.bool).tril()[None, None]  # (1, 1, L, L)


def test_v3_softmax_scale():
    mla = make_mla()
    assert V3_SOFTMAX_FACTOR == pytest.approx(1.8738, abs=1e-4)
    assert mla.scale == pytest.approx((8 + 16) ** -0.5 * V3_SOFTMAX_FACTOR, rel=1e-15)
    assert make_mla(rope_scaling=None).scale == (8 + 16) ** -0.5
    assert make_mla(rope_scaling=YARN_PLAIN).scale == (8 + 16) ** -0.5  # no mscale_all_dim: unchanged
    half = {**YARN_V3, "mscale_all_dim": 0.5}
    assert make_mla(rope_scaling=half).scale == pytest.approx(24**-0.5 * (0.05 * math.log(40) + 1) ** 2, rel=1e-15)


@pytest.mark.parametrize("start", [0, 5000, 131_000])
@pytest.mark.parametrize("absorb", [False, True])
@pytest.mark.parametrize("scaling", [YARN_V3, YARN_PLAIN], ids=["v3", "plain_yarn"])
def test_equals_deepseek_v3_attention(start, absorb, scaling, monkeypatch):
    mla = make_mla(rope_scaling=scaling)
    config = DeepseekV3Config(
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        q_lora_rank=12,
        attention_bias=False,
        rope_parameters={**scaling, "rope_theta": 10000.0},
        max_position_embeddings=163_840,
        **DIMS,
    )
    config._attn_implementation = "sdpa"  # stays in float64
    hf = DeepseekV3Attention(config, layer_idx=0).to(F64).eval()
    hf.load_state_dict(mla.state_dict(), strict=True)
    assert mla.scale == hf.scaling  # the same float: HF multiplies by mscale twice, as the layer does
    with hf_float64():
        rotary = DeepseekV3RotaryEmbedding(config)
    assert rotary.inv_freq.shape == (8,)
    monkeypatch.setattr(DeepseekV3RMSNorm, "forward", rms64)
    x = randn(2, 6, HIDDEN, seed=1)  # (B, L, hidden)
    position_ids = torch.arange(start, start + 6)[None]  # (1, L)
    expected, expected_weights = hf(
        x, hf_cos_sin(rotary.inv_freq, rotary.attention_scaling, position_ids), attention_mask=causal4(6)
    )
    out, weights = mla(x, is_causal=True, positions=position_ids[0], absorb=absorb)  # (B, L, hidden), (B, H, L, L)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    if scaling is YARN_V3:  # teeth: without the mscale² on its scale (V3 loaded without rope_scaling) it differs
        mla.scale = (8 + 16) ** -0.5
        assert not torch.allclose(mla(x, is_causal=True, positions=position_ids[0])[0], expected, atol=1e-6)


@pytest.mark.parametrize("absorb", [False, True])
def test_cached_decoding_equals_full_pass_far_out(absorb):
    mla = make_mla()
    x = randn(1, 7, HIDDEN, seed=2)  # (B, L, hidden)
    start = 131_000
    full, _ = mla(x, is_causal=True, positions=torch.arange(start, start + 7), absorb=absorb)
    cache, outs, done = ac.KVCache(), [], 0
    for size in (3, 1, 3):
        positions = torch.arange(start + done, start + done + size)  # (size,)
        outs.append(mla(x[:, done : done + size], is_causal=True, cache=cache, positions=positions, absorb=absorb)[0])
        done += size
    torch.testing.assert_close(torch.cat(outs, dim=1), full, rtol=0, atol=1e-12)


def test_bad_rope_scaling_is_caught_in_init():
    with pytest.raises(ValueError, match="original_max_position_embeddings"):
        make_mla(rope_scaling={"rope_type": "yarn", "factor": 40})
    with pytest.raises(ValueError, match="rope_theta"):
        make_mla(rope_scaling={**YARN_V3, "rope_theta": 10000.0})
    scaling = dict(YARN_V3)
    mla = make_mla(rope_scaling=scaling)
    scaling["factor"] = 1
    assert mla.rope_scaling["factor"] == 40 and "rope_scaling" in repr(mla)
