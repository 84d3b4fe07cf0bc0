"""Layers with rope_scaling= / partial_rotary_factor=: equal to Hugging Face's LlamaAttention (yarn, llama3, linear;
positions from 0 and from 131,000), StableLmAttention (partial 0.5) and SmolLM3's NoPE layer; cached == full.

float64 throughout: HF's rotary modules are built with their frequency code run in float64 (``hf_float64``, see
test_rope_scaling.py) and their forward's formula (cat(freqs, freqs), cos/sin times attention_scaling) is written
in float64; HF's "sdpa" attention keeps float64. So the comparisons are exact to ~1e-12.
"""

from __future__ import annotations

import pytest
import torch
from reference import F64, assert_close64, randn
from test_rope_scaling import LINEAR, LLAMA3, YARN_PLAIN, YARN_V3, hf_cos_sin, hf_float64
from transformers import LlamaConfig, SmolLM3Config, StableLmConfig
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding
from transformers.models.smollm3.modeling_smollm3 import SmolLM3Attention
from transformers.models.stablelm import modeling_stablelm
from transformers.models.stablelm.modeling_stablelm import StableLmAttention, StableLmRotaryEmbedding

import attn_core as ac

SCALINGS = {"yarn": YARN_PLAIN, "yarn_v3": YARN_V3, "llama3": LLAMA3, "linear": LINEAR}
STARTS = [0, 131_000]
HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 32, 4, 2, 16


def make_layer(**rope) -> ac.GroupedQueryAttention:
    torch.manual_seed(0)
    layer = ac.GroupedQueryAttention(HIDDEN, HEADS, KV_HEADS, head_dim=HEAD_DIM, bias=False, **rope)
    return layer.to(F64).eval()


def copy_weights(hf: torch.nn.Module, layer: ac.GroupedQueryAttention) -> torch.nn.Module:
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        getattr(hf, name).weight.data.copy_(getattr(layer, name).weight.data)
    return hf.to(F64).eval()


def hf_rotary_cos_sin(rotary: torch.nn.Module, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return hf_cos_sin(rotary.inv_freq, rotary.attention_scaling, position_ids)  # (B, L, R) each


@pytest.mark.parametrize("name", SCALINGS)
@pytest.mark.parametrize("start", STARTS)
def test_equals_llama_attention_with_scaling(name, start):
    scaling = SCALINGS[name]
    layer = make_layer(rope_base=10000.0, rope_scaling=scaling)
    config = LlamaConfig(
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        attention_bias=False,
        rope_parameters={**scaling, "rope_theta": 10000.0},
        max_position_embeddings=131_072,
    )
    config._attn_implementation = "sdpa"  # stays in float64 (eager takes the softmax in float32)
    llama = copy_weights(LlamaAttention(config, layer_idx=0), layer)
    with hf_float64():
        rotary = LlamaRotaryEmbedding(config)  # HF's own rotary module: inv_freq and attention_scaling
    x = randn(2, 7, HIDDEN, seed=1)  # (B, L, hidden)
    position_ids = torch.arange(start, start + 7).expand(2, 7)  # (B, L)
    expected, _ = llama(x, position_embeddings=hf_rotary_cos_sin(rotary, position_ids), attention_mask=None)
    out, _ = layer(x, is_causal=True, positions=position_ids)  # (B, L, hidden)
    assert_close64(out, expected)
    plain = make_layer(rope_base=10000.0)  # the comparison has teeth: unscaled RoPE differs
    assert not torch.allclose(plain(x, is_causal=True, positions=position_ids)[0], expected, atol=1e-6)


@pytest.mark.parametrize("scaling", [None, YARN_PLAIN])
def test_partial_rotary_equals_stablelm_attention(scaling):
    torch.manual_seed(0)
    layer = ac.MultiHeadAttention(HIDDEN, HEADS, rope_base=10000.0, rope_scaling=scaling, partial_rotary_factor=0.5)
    layer = layer.to(F64).eval()
    layer.o_proj.bias = None  # StableLm's o_proj has no bias; q/k/v biases stay (use_qkv_bias=True)
    params = {**(scaling or {"rope_type": "default"}), "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
    config = StableLmConfig(
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        use_qkv_bias=True,
        rope_parameters=params,
        max_position_embeddings=131_072,
    )
    config._attn_implementation = "sdpa"
    stablelm = StableLmAttention(config, layer_idx=0).to(F64).eval()
    stablelm.load_state_dict(layer.state_dict())  # same names: q/k/v weight + bias, o_proj weight
    with hf_float64(modeling_stablelm):
        rotary = StableLmRotaryEmbedding(config)  # its default init applies the partial factor
    assert stablelm.rotary_ndims == 4 and rotary.inv_freq.shape == (2,)  # head_dim 8: 4 rotated, 4 untouched
    for start in STARTS:
        x = randn(1, 6, HIDDEN, seed=2)  # (B, L, hidden)
        position_ids = torch.arange(start, start + 6)[None]  # (B, L)
        cos_sin = hf_rotary_cos_sin(rotary, position_ids)
        expected, _ = stablelm(x, attention_mask=None, position_embeddings=cos_sin)
        assert_close64(layer(x, is_causal=True, positions=position_ids)[0], expected)


def test_nope_layer_equals_smollm3_no_rope_layer():
    # SmolLM3: no_rope_layers[i] == 1 means RoPE is ON; every 4th layer has 0 (NoPE): rope_base=None here.
    config = SmolLM3Config(
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        num_hidden_layers=4,
        attention_bias=False,
        use_sliding_window=False,
    )
    config._attn_implementation = "sdpa"
    assert config.no_rope_layers == [1, 1, 1, 0]
    x = randn(2, 6, HIDDEN, seed=3)  # (B, L, hidden)
    garbage = (randn(1, 6, HEAD_DIM, seed=4), randn(1, 6, HEAD_DIM, seed=5))  # a NoPE layer must ignore cos/sin
    nope = make_layer()  # rope_base=None
    smol = copy_weights(SmolLM3Attention(config, layer_idx=3), nope)
    expected, _ = smol(x, position_embeddings=garbage, attention_mask=None)
    assert_close64(nope(x, is_causal=True)[0], expected)
    # Layer 0 of the same model rotates: equal to our layer with rope_base.
    rope = make_layer(rope_base=config.rope_parameters["rope_theta"])
    smol0 = copy_weights(SmolLM3Attention(config, layer_idx=0), rope)
    position_ids = torch.arange(6)[None]  # (B, L)
    inv_freq, _ = ac.rope_frequencies(HEAD_DIM, base=config.rope_parameters["rope_theta"])
    expected0, _ = smol0(x, position_embeddings=hf_cos_sin(inv_freq, 1.0, position_ids), attention_mask=None)
    assert_close64(rope(x, is_causal=True)[0], expected0)


@pytest.mark.parametrize(
    "kwargs", [{"rope_scaling": YARN_V3}, {"partial_rotary_factor": 0.5}, {"rope_scaling": LLAMA3}]
)
@pytest.mark.parametrize("chunks", [[1] * 8, [3, 1, 4], [8]])
def test_cached_decoding_equals_full_pass(kwargs, chunks):
    layer = make_layer(rope_base=10000.0, **kwargs)
    x = randn(2, 8, HIDDEN, seed=6)  # (B, L, hidden)
    for start in STARTS:
        full, _ = layer(x, is_causal=True, positions=torch.arange(start, start + 8))  # (B, L, hidden)
        cache, outs, done = ac.KVCache(), [], 0
        for size in chunks:
            positions = torch.arange(start + done, start + done + size)  # (size,)
            outs.append(layer(x[:, done : done + size], is_causal=True, cache=cache, positions=positions)[0])
            done += size
        assert_close64(torch.cat(outs, dim=1), full)


def test_future_tokens_do_not_change_past_outputs():
    layer = make_layer(rope_base=10000.0, rope_scaling=YARN_PLAIN, partial_rotary_factor=0.5)
    x = randn(1, 8, HIDDEN, seed=7)  # (B, L, hidden)
    full, _ = layer(x, is_causal=True)
    assert_close64(layer(x[:, :5], is_causal=True)[0], full[:, :5])


def test_state_dict_gains_no_entries_and_input_is_copied():
    scaling = dict(YARN_V3)
    layer = make_layer(rope_base=10000.0, rope_scaling=scaling, partial_rotary_factor=0.5)
    assert layer.state_dict().keys() == make_layer(rope_base=10000.0).state_dict().keys()
    scaling["factor"] = 2  # the caller's dict changing later does not change the layer
    assert layer.rope_scaling["factor"] == 40
    assert "rope_scaling" in repr(layer) and "partial_rotary_factor=0.5" in repr(layer)
    for cls in (ac.MultiHeadAttention, ac.MultiQueryAttention):
        other = cls(HIDDEN, HEADS, rope_base=10000.0, rope_scaling=YARN_V3, partial_rotary_factor=0.5)
        assert other.rope_scaling == YARN_V3 and other.partial_rotary_factor == 0.5


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"rope_scaling": YARN_PLAIN}, "rope_base"),
        ({"partial_rotary_factor": 0.5}, "rope_base"),
        ({"rope_base": 10000.0, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "original_max_position"),
        ({"rope_base": 10000.0, "rope_scaling": {**LINEAR, "rope_theta": 1e4}}, "rope_theta"),
        ({"rope_base": 10000.0, "partial_rotary_factor": 0.1}, "partial_rotary_factor"),  # int(1.6) = 1: odd
        ({"rope_base": 10000.0, "partial_rotary_factor": 0.0}, "partial_rotary_factor"),
    ],
)
def test_bad_rope_arguments_are_caught_in_init(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        make_layer(**kwargs)


def test_partial_rotary_allows_an_odd_head_dim_when_rotary_dim_is_even():
    layer = ac.GroupedQueryAttention(30, 2, 1, head_dim=15, rope_base=10000.0, partial_rotary_factor=0.4)  # 6 rotate
    out, _ = layer(randn(1, 3, 30, seed=8).float(), is_causal=True)
    assert out.shape == (1, 3, 30)
    with pytest.raises(ValueError, match="even head_dim"):
        ac.GroupedQueryAttention(30, 2, 1, head_dim=15, rope_base=10000.0)
