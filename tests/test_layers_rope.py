"""Layers with rope_base: equal to Hugging Face's LlamaAttention, cache-consistent, v never rotated, clear errors.

float64 throughout. HF's "sdpa" attention stays in float64 (its eager path takes the softmax in float32),
so the comparisons are exact to ~1e-12.
"""

from __future__ import annotations

import math

import pytest
import torch
from reference import F64, assert_close64, randn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention

import attn_core as ac

LAYERS = {  # name: (num_heads, num_kv_heads)
    "MHA": (4, 4),
    "GQA": (4, 2),
    "MQA": (4, 1),
}


def make_layer(num_heads: int, num_kv_heads: int, *, hidden: int = 32, head_dim=None, base=10000.0, seed=0):
    torch.manual_seed(seed)
    layer = ac.GroupedQueryAttention(hidden, num_heads, num_kv_heads, head_dim=head_dim, rope_base=base, bias=False)
    return layer.to(F64).eval()


def llama_twin(layer: ac.GroupedQueryAttention) -> LlamaAttention:
    config = LlamaConfig(
        hidden_size=layer.hidden_dim,
        num_attention_heads=layer.num_heads,
        num_key_value_heads=layer.num_kv_heads,
        head_dim=layer.head_dim,
        rope_theta=layer.rope_base,
        attention_bias=False,
    )
    config._attn_implementation = "sdpa"  # stays in float64 (eager takes the softmax in float32)
    llama = LlamaAttention(config, layer_idx=0).to(F64).eval()
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        getattr(llama, name).weight.data.copy_(getattr(layer, name).weight.data)
    return llama


def llama_cos_sin(position_ids: torch.Tensor, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """LlamaRotaryEmbedding.forward's formula in float64 (the module itself forces float32 angles)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=F64) / head_dim))  # (D/2,)
    freqs = position_ids[..., None].to(F64) * inv_freq  # (B, L, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (B, L, D)
    return emb.cos(), emb.sin()


def run_llama(llama: LlamaAttention, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
    cos_sin = llama_cos_sin(position_ids, llama.head_dim, llama.config.rope_parameters["rope_theta"])
    out, _ = llama(x, position_embeddings=cos_sin, attention_mask=None)  # causal (sdpa, no mask)
    return out  # (B, L, hidden)


# ----------------------------------------------------------------------------- == LlamaAttention
@pytest.mark.parametrize("kind", LAYERS)
@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_equals_llama_attention(kind, base):
    layer = make_layer(*LAYERS[kind], base=base)
    x = randn(2, 7, 32, seed=1)  # (B, L, hidden)
    position_ids = torch.arange(7).expand(2, 7)  # (B, L)
    expected = run_llama(llama_twin(layer), x, position_ids)  # (B, L, hidden)
    out, weights = layer(x, is_causal=True)  # (B, L, hidden), (B, H, L, L)
    assert_close64(out, expected)
    assert weights.shape == (2, LAYERS[kind][0], 7, 7)
    # The comparison has teeth: without RoPE (or with another base) the outputs differ.
    plain = ac.GroupedQueryAttention(32, *LAYERS[kind], bias=False).to(F64)
    plain.load_state_dict(layer.state_dict())
    assert not torch.allclose(plain(x, is_causal=True)[0], expected, atol=1e-6)


def test_equals_llama_attention_with_decoupled_head_dim_and_offset_positions():
    layer = make_layer(4, 2, hidden=24, head_dim=10)  # 4 heads x 10 on hidden 24 (as in Gemma)
    x = randn(2, 5, 24, seed=2)  # (B, L, hidden)
    position_ids = torch.tensor([[100, 101, 102, 103, 104], [3, 4, 5, 6, 7]])  # (B, L)
    expected = run_llama(llama_twin(layer), x, position_ids)  # (B, L, hidden)
    assert_close64(layer(x, is_causal=True, positions=position_ids)[0], expected)
    assert_close64(layer(x[:1], is_causal=True, positions=position_ids[0])[0], expected[:1])  # (Lq,) positions


def test_llama_default_positions_are_0_to_l():
    layer = make_layer(4, 2)
    x = randn(1, 6, 32, seed=3)  # (B, L, hidden)
    assert torch.equal(layer(x, is_causal=True)[0], layer(x, is_causal=True, positions=torch.arange(6))[0])


# ----------------------------------------------------------------------------- KV cache
@pytest.mark.parametrize("kind", LAYERS)
@pytest.mark.parametrize("chunks", [[1] * 10, [3, 1, 2, 4], [10], [6, 4]])
def test_cached_decoding_equals_full_pass(kind, chunks):
    layer = make_layer(*LAYERS[kind])
    x = randn(2, 10, 32, seed=4)  # (B, L, hidden)
    full, _ = layer(x, is_causal=True)  # (B, L, hidden)
    cache, outs, start = ac.KVCache(initial_capacity=2), [], 0
    for size in chunks:
        out, _ = layer(x[:, start : start + size], is_causal=True, cache=cache)  # (B, size, hidden)
        outs.append(out)
        start += size
    assert len(cache) == 10
    assert_close64(torch.cat(outs, dim=1), full)


def test_positions_restarting_each_step_is_caught():
    """The classic decoding bug (positions 0 .. n-1 in every step) gives different outputs."""
    layer = make_layer(4, 2)
    x = randn(1, 6, 32, seed=5)  # (B, L, hidden)
    full, _ = layer(x, is_causal=True)  # (B, L, hidden)
    cache = ac.KVCache()
    layer(x[:, :3], is_causal=True, cache=cache)  # prefill, positions 0..2
    wrong, _ = layer(x[:, 3:4], cache=cache, positions=torch.tensor([0]))  # (B, 1, hidden): should be 3
    assert not torch.allclose(wrong, full[:, 3:4], atol=1e-6)
    cache.truncate(3)
    right, _ = layer(x[:, 3:4], cache=cache, positions=torch.tensor([3]))  # (B, 1, hidden)
    assert_close64(right, full[:, 3:4])


def test_keys_are_rotated_before_caching_values_never():
    layer = make_layer(4, 2)
    x = randn(1, 5, 32, seed=6)  # (B, L, hidden)
    cache = ac.KVCache()
    layer(x, is_causal=True, cache=cache)
    k = layer.k_proj(x).view(1, 5, 2, 8).transpose(1, 2)  # (B, Hkv, L, head_dim)
    v = layer.v_proj(x).view(1, 5, 2, 8).transpose(1, 2)  # (B, Hkv, L, head_dim)
    assert torch.equal(cache.keys, ac.apply_rope(k, range(5)))
    assert torch.equal(cache.values, v)


# ----------------------------------------------------------------------------- left-padded batches
def test_left_padded_batch_with_explicit_positions_equals_each_sequence_alone():
    layer = make_layer(4, 2)
    lengths, pad = [6, 4], [0, 2]
    seqs = [randn(1, n, 32, seed=10 + i) for i, n in enumerate(lengths)]  # (1, n, hidden) each
    x = torch.cat(
        [torch.cat((torch.zeros(1, p, 32, dtype=F64), s), dim=1) for p, s in zip(pad, seqs, strict=True)]
    )  # (B, L, hidden), row 1 left-padded by 2
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3]])  # (B, L): pad slots get any position
    real = torch.tensor([[True] * 6, [False, False] + [True] * 4])  # (B, L)
    mask = ac.causal_mask(6, 6) & real[:, None, None, :]  # (B, 1, Lq, Lk)
    cache = ac.KVCache()
    out, _ = layer(x, mask=mask, positions=positions, cache=cache)  # (B, L, hidden)
    for b, (p, s) in enumerate(zip(pad, seqs, strict=True)):
        alone, _ = layer(s, is_causal=True)  # (1, n, hidden)
        assert_close64(out[b : b + 1, p:], alone)
    # One decode step each: per-sequence positions (B, 1), the padded keys still masked.
    step = randn(2, 1, 32, seed=20)  # (B, 1, hidden)
    step_mask = torch.cat((real, torch.ones(2, 1, dtype=torch.bool)), dim=1)[:, None, None, :]  # (B, 1, 1, 7)
    out_step, _ = layer(step, mask=step_mask, positions=torch.tensor([[6], [4]]), cache=cache)  # (B, 1, hidden)
    for b, s in enumerate(seqs):
        alone, _ = layer(torch.cat((s, step[b : b + 1]), dim=1), is_causal=True)  # (1, n + 1, hidden)
        assert_close64(out_step[b : b + 1], alone[:, -1:])
    # Positions must be consistent between prefill and decoding: the default (len(cache) = 6 for both rows)
    # puts row 1's new token at 6, three after its last key (at 3) instead of one, and its output changes.
    cache.truncate(6)
    default_step, _ = layer(step, mask=step_mask, cache=cache)  # (B, 1, hidden)
    assert_close64(default_step[:1], out_step[:1])
    assert not torch.allclose(default_step[1:], out_step[1:], atol=1e-6)
    # Whereas shifting *all* of a sequence's positions by the same amount changes nothing (RoPE is relative):
    # default positions 0..5 put row 1's real tokens at 2..5 and give the same outputs.
    shifted, _ = layer(x, mask=mask)  # (B, L, hidden)
    torch.testing.assert_close(shifted[1:, 2:], out[1:, 2:], rtol=1e-9, atol=1e-10)


# ----------------------------------------------------------------------------- computed by hand
def by_hand(layer, x, *, rotate_v: bool = False):
    """The RoPE layer written out: rotate q and k after the head split, causal softmax, o_proj."""
    batch, length, _ = x.shape
    heads, kv_heads, head_dim = layer.num_heads, layer.num_kv_heads, layer.head_dim
    q = layer.q_proj(x).view(batch, length, heads, head_dim).transpose(1, 2)  # (B, H, L, hd)
    k = layer.k_proj(x).view(batch, length, kv_heads, head_dim).transpose(1, 2)  # (B, Hkv, L, hd)
    v = layer.v_proj(x).view(batch, length, kv_heads, head_dim).transpose(1, 2)  # (B, Hkv, L, hd)
    q = ac.apply_rope(q, range(length), base=layer.rope_base)  # (B, H, L, hd)
    k = ac.apply_rope(k, range(length), base=layer.rope_base)  # (B, Hkv, L, hd)
    if rotate_v:
        v = ac.apply_rope(v, range(length), base=layer.rope_base)  # (B, Hkv, L, hd): the bug
    k = k.repeat_interleave(heads // kv_heads, dim=1)  # (B, H, L, hd)
    v = v.repeat_interleave(heads // kv_heads, dim=1)  # (B, H, L, hd)
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (B, H, L, L)
    scores = scores.masked_fill(~torch.ones(length, length, dtype=torch.bool).tril(), float("-inf"))  # (B, H, L, L)
    out = torch.softmax(scores, dim=-1) @ v  # (B, H, L, hd)
    return layer.o_proj(out.transpose(1, 2).reshape(batch, length, heads * head_dim))  # (B, L, hidden)


def test_v_is_not_rotated():
    layer = make_layer(4, 2)
    x = randn(2, 6, 32, seed=7)  # (B, L, hidden)
    out, _ = layer(x, is_causal=True)  # (B, L, hidden)
    assert_close64(out, by_hand(layer, x))
    assert not torch.allclose(out, by_hand(layer, x, rotate_v=True), atol=1e-6)


def test_rope_base_none_keeps_the_plain_layer_bit_identical():
    torch.manual_seed(0)
    plain = ac.GroupedQueryAttention(32, 4, 2).to(F64)  # bias=True, as before RoPE existed
    assert plain.rope_base is None and "rope_base" not in repr(plain)
    x = randn(2, 6, 32, seed=8)  # (B, L, hidden)
    batch, length, _ = x.shape
    q = plain.q_proj(x).view(batch, length, 4, 8).transpose(1, 2)  # (B, H, L, hd)
    k = plain.k_proj(x).view(batch, length, 2, 8).transpose(1, 2)  # (B, Hkv, L, hd)
    v = plain.v_proj(x).view(batch, length, 2, 8).transpose(1, 2)  # (B, Hkv, L, hd)
    ref, ref_weights = ac.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, L, hd), (B, H, L, L)
    ref = plain.o_proj(ref.transpose(1, 2).reshape(batch, length, 32))  # (B, L, hidden)
    out, weights = plain(x, is_causal=True)  # (B, L, hidden), (B, H, L, L)
    assert torch.equal(out, ref) and torch.equal(weights, ref_weights)
    # RoPE adds no parameters or buffers: checkpoints load into either layer.
    rope = ac.GroupedQueryAttention(32, 4, 2, rope_base=10000.0)  # (bias=True too)
    assert plain.state_dict().keys() == rope.state_dict().keys()


@pytest.mark.parametrize("cls", [ac.MultiHeadAttention, ac.MultiQueryAttention])
def test_mha_and_mqa_take_rope_base(cls):
    torch.manual_seed(0)
    layer = cls(32, 4, rope_base=500000, bias=False).to(F64)
    assert layer.rope_base == 500000.0 and "rope_base=500000.0" in repr(layer)
    x = randn(1, 5, 32, seed=9)  # (B, L, hidden)
    assert_close64(layer(x, is_causal=True)[0], run_llama(llama_twin(layer), x, torch.arange(5)[None]))


# ----------------------------------------------------------------------------- bad inputs
def test_positions_without_rope_raise():
    layer = ac.GroupedQueryAttention(32, 4, 2)
    with pytest.raises(ValueError, match=r"positions= only matters .* rope_base=None"):
        layer(torch.randn(1, 3, 32), positions=torch.arange(3))


def test_cross_attention_with_rope_raises():
    layer = make_layer(4, 2)
    x, context = randn(1, 3, 32), randn(1, 5, 32)  # (B, Lq, hidden), (B, Lk, hidden)
    with pytest.raises(ValueError, match=r"RoPE is defined for self-attention: .*context="):
        layer(x, context)
    plain = ac.GroupedQueryAttention(32, 4, 2).to(F64)
    assert plain(x, context)[0].shape == (1, 3, 32)  # cross-attention without RoPE still works


@pytest.mark.parametrize(
    "positions",
    [torch.arange(4), torch.arange(2), torch.zeros(3, 3, dtype=torch.long), torch.zeros(2, 1, 3, dtype=torch.long)],
)
def test_positions_of_the_wrong_shape_raise(positions):
    layer = make_layer(4, 2)
    shape = str(tuple(positions.shape)).replace("(", r"\(").replace(")", r"\)")
    with pytest.raises(
        ValueError, match=rf"positions must have shape \(Lq,\) = \(3,\) or \(B, Lq\) = \(2, 3\).*{shape}"
    ):
        layer(randn(2, 3, 32), positions=positions)


def test_float_positions_raise_type_error():
    layer = make_layer(4, 2)
    with pytest.raises(TypeError, match=r"torch\.float32.*\.long\(\)"):
        layer(randn(1, 3, 32), positions=torch.arange(3.0))


@pytest.mark.parametrize("base", [0, -10000.0, float("nan"), True, "10000"])
def test_bad_rope_base_raises(base):
    with pytest.raises(ValueError, match="base must be a finite number > 0"):
        ac.GroupedQueryAttention(32, 4, 2, rope_base=base)


def test_odd_head_dim_with_rope_raises():
    with pytest.raises(ValueError, match=r"rope_base needs an even head_dim .* head_dim=5"):
        ac.GroupedQueryAttention(20, 4, 2, rope_base=10000.0)
    assert ac.GroupedQueryAttention(20, 4, 2).head_dim == 5  # fine without RoPE
