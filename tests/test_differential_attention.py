"""ac.DifferentialAttention: equal to Hugging Face's DiffLlamaAttention, to the contract's formula, cache-consistent.

HF rounds to float32 twice in a float64 run: its eager softmax (``dtype=torch.float32``) and λ
(``torch.sum(..., dtype=torch.float32)``). The exact comparison keeps both in float64 (patched for the test; the
formulas are unchanged), so 1e-12 holds; one more test runs HF unpatched and allows float32 rounding.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import DiffLlamaConfig
from transformers.models.diffllama.modeling_diffllama import DiffLlamaAttention

import attn_core as ac
from tests.reference import randn

F64 = torch.float64
TOL64 = {"rtol": 1e-12, "atol": 1e-12}
TOL32 = {"rtol": 1e-5, "atol": 1e-6}  # float32 eps ≈ 6e-8, a few ops deep, on O(1) numbers


@pytest.fixture
def hf_in_float64(monkeypatch):
    real_softmax, real_sum = torch.nn.functional.softmax, torch.sum

    def softmax(x, dim=None, _stacklevel=3, dtype=None):
        return real_softmax(x, dim=dim, dtype=None if x.dtype == F64 else dtype)

    def total(x, *args, dtype=None, **kwargs):
        return real_sum(x, *args, dtype=None if x.dtype == F64 else dtype, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "softmax", softmax)
    monkeypatch.setattr(torch, "sum", total)


def cos_sin(length: int, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=F64) / head_dim))  # (D/2,)
    angles = torch.arange(length, dtype=F64)[None, :, None] * inv_freq  # (1, L, D/2)
    angles = torch.cat([angles, angles], dim=-1)  # (1, L, D)
    return angles.cos(), angles.sin()


def additive(mask: torch.Tensor) -> torch.Tensor:
    return torch.zeros(mask.shape, dtype=F64).masked_fill(~mask, float("-inf"))


def diffllama_pair(layer_idx: int, *, heads=4, kv_heads=2, head_dim=8, hidden=32, bias=True, seed=0):
    config = DiffLlamaConfig(
        hidden_size=hidden,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        rope_theta=10000.0,
        attention_bias=bias,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    hf = DiffLlamaAttention(config, layer_idx=layer_idx).to(F64).eval()
    for parameter in hf.parameters():
        torch.nn.init.normal_(parameter, std=0.3)
    ours = ac.DifferentialAttention(
        hidden, heads, kv_heads, head_dim=head_dim, rope_base=10000.0, layer_idx=layer_idx, bias=bias
    ).to(F64)
    ours.load_state_dict(hf.state_dict(), strict=True)  # the same names: no renaming
    assert config.rms_norm_eps == 1e-5
    return hf, ours.eval()


@pytest.mark.parametrize("layer_idx", [0, 1, 5])
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 2), (4, 4), (8, 2)])
def test_equals_diffllama_attention(hf_in_float64, layer_idx, heads, kv_heads):
    hf, ours = diffllama_pair(layer_idx, heads=heads, kv_heads=kv_heads)
    x = randn(2, 7, 32, seed=1)  # (B, L, hidden)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    hf_out, hf_weights = hf(x, position_embeddings=cos_sin(7, 8, 10000.0), attention_mask=additive(causal))
    out, weights = ours(x, is_causal=True)
    assert ours.lambda_init == hf.lambda_init
    torch.testing.assert_close(out, hf_out, **TOL64)
    # HF returns the first of its two attention calls' weights: every head's softmax, as ours
    torch.testing.assert_close(weights, hf_weights, **TOL64)


def test_equals_diffllama_with_padding_mask_and_no_bias(hf_in_float64):
    hf, ours = diffllama_pair(2, bias=False)
    x = randn(2, 6, 32, seed=2)
    mask = torch.ones(2, 1, 6, 6, dtype=torch.bool).tril()  # (B, 1, L, L)
    mask[0, :, 3:, 1] = False  # a hole in sequence 0
    hf_out, hf_weights = hf(x, position_embeddings=cos_sin(6, 8, 10000.0), attention_mask=additive(mask))
    out, weights = ours(x, mask)
    torch.testing.assert_close(out, hf_out, **TOL64)
    torch.testing.assert_close(weights, hf_weights, **TOL64)


def test_equals_unpatched_diffllama_to_float32_rounding():
    hf, ours = diffllama_pair(3)
    x = randn(1, 7, 32, seed=3)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    hf_out, hf_weights = hf(x, position_embeddings=cos_sin(7, 8, 10000.0), attention_mask=additive(causal))
    out, weights = ours(x, is_causal=True)
    torch.testing.assert_close(out, hf_out, **TOL32)
    torch.testing.assert_close(weights, hf_weights, **TOL32)


def contract_by_hand(layer: ac.DifferentialAttention, x: torch.Tensor) -> torch.Tensor:
    """The issue's formula, one pair at a time, from the projections (float64)."""
    batch, length, _ = x.shape
    heads, kv_heads, dim = layer.num_heads, layer.num_kv_heads, layer.head_dim
    positions = torch.arange(length)
    q = ac.apply_rope(layer.q_proj(x).view(batch, length, heads, dim).transpose(1, 2), positions)  # (B, H, L, D)
    k = ac.apply_rope(layer.k_proj(x).view(batch, length, kv_heads, dim).transpose(1, 2), positions)  # (B, Hkv, L, D)
    v = layer.v_proj(x).view(batch, length, kv_heads, dim).transpose(1, 2)  # (B, Hkv, L, D)
    group = heads // kv_heads
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    maps = []
    for h in range(heads):
        scores = q[:, h] @ k[:, h // group].transpose(-2, -1) / math.sqrt(dim)  # (B, L, L)
        maps.append(torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1))
    lam = (
        math.exp(float(layer.lambda_q1.detach() @ layer.lambda_k1.detach()))
        - math.exp(float(layer.lambda_q2.detach() @ layer.lambda_k2.detach()))
        + layer.lambda_init
    )
    outputs = []
    for p in range(heads // 2):
        g = p // group
        value = torch.cat([v[:, g], v[:, g + kv_heads // 2]], dim=-1)  # (B, L, 2D)
        o = (maps[p] - lam * maps[p + heads // 2]) @ value  # (B, L, 2D)
        o = o / torch.sqrt(o.pow(2).mean(-1, keepdim=True) + 1e-5)  # RMSNorm, no weight
        outputs.append((1 - layer.lambda_init) * o)
    return layer.o_proj(torch.cat(outputs, dim=-1))  # (B, L, hidden)


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 2), (6, 2), (8, 4)])
def test_equals_the_contract_formula(heads, kv_heads):
    torch.manual_seed(0)
    layer = ac.DifferentialAttention(48, heads, kv_heads, head_dim=8, rope_base=10000.0, layer_idx=2).to(F64)
    x = randn(2, 5, 48, seed=4)
    out, weights = layer(x, is_causal=True)
    torch.testing.assert_close(out, contract_by_hand(layer, x), **TOL64)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, heads, 5, dtype=F64), **TOL64)


@settings(max_examples=15, deadline=None)
@given(
    kv_pairs=st.integers(1, 2),
    group=st.integers(1, 3),
    length=st.integers(1, 6),
    layer_idx=st.integers(0, 12),
    seed=st.integers(0, 10_000),
)
def test_property_equals_the_contract_formula(kv_pairs, group, length, layer_idx, seed):
    kv_heads = 2 * kv_pairs
    heads = kv_heads * group
    if heads % 2:
        heads, group = 2 * heads, 2 * group
    torch.manual_seed(seed)
    layer = ac.DifferentialAttention(heads * 4, heads, kv_heads, head_dim=4, rope_base=10000.0, layer_idx=layer_idx)
    layer = layer.to(F64)
    x = randn(1, length, heads * 4, seed=seed)
    out, weights = layer(x, is_causal=True)
    torch.testing.assert_close(out, contract_by_hand(layer, x), **TOL64)
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, heads, length, dtype=F64), **TOL64)


def test_lambda_init_and_state_dict():
    for layer_idx in (0, 1, 4, 30):
        layer = ac.DifferentialAttention(16, 2, 2, layer_idx=layer_idx)
        assert layer.lambda_init == pytest.approx(0.8 - 0.6 * math.exp(-0.3 * layer_idx), abs=1e-15)
    assert sorted(ac.DifferentialAttention(16, 2, 2, bias=False).state_dict()) == [
        "k_proj.weight",
        "lambda_k1",
        "lambda_k2",
        "lambda_q1",
        "lambda_q2",
        "o_proj.weight",
        "q_proj.weight",
        "v_proj.weight",
    ]


def test_identical_maps_cancel_to_the_lambda_weighted_rest():
    """If λ = 1 and both heads of a pair see the same map, their difference is 0: the pair outputs 0 (plus bias)."""
    torch.manual_seed(0)
    layer = ac.DifferentialAttention(16, 2, 2, layer_idx=0).to(F64)
    with torch.no_grad():
        for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            getattr(layer, name).zero_()  # λ = 1 − 1 + λ_init = λ_init; now make the maps and λ match
        layer.q_proj.weight[8:] = layer.q_proj.weight[:8]
        layer.q_proj.bias[8:] = layer.q_proj.bias[:8]
        layer.k_proj.weight[8:] = layer.k_proj.weight[:8]
        layer.k_proj.bias[8:] = layer.k_proj.bias[:8]
        layer.lambda_q1.fill_(math.sqrt(math.log(2 - layer.lambda_init) / 8))  # exp(λ_q1·λ_k1) = 2 − λ_init
        layer.lambda_k1.copy_(layer.lambda_q1)
    assert float(layer.lambda_full().detach()) == pytest.approx(1.0, abs=1e-12)
    out, weights = layer(randn(1, 4, 16, seed=5), is_causal=True)
    torch.testing.assert_close(weights[:, 0], weights[:, 1], **TOL64)
    torch.testing.assert_close(out, layer.o_proj.bias.expand(1, 4, 16), **TOL64)


@pytest.mark.parametrize("chunks", [(1,) * 7, (3, 4), (2, 1, 4)])
def test_cached_decoding_equals_full_pass(chunks):
    torch.manual_seed(0)
    layer = ac.DifferentialAttention(32, 4, 2, rope_base=10000.0, layer_idx=1).to(F64).eval()
    x = randn(2, 7, 32, seed=6)
    full_out, full_weights = layer(x, is_causal=True)
    cache, outs, start = ac.KVCache(), [], 0
    for size in chunks:
        out, weights = layer(x[:, start : start + size], is_causal=True, cache=cache)
        torch.testing.assert_close(weights, full_weights[:, :, start : start + size, : start + size], **TOL64)
        outs.append(out)
        start += size
    torch.testing.assert_close(torch.cat(outs, dim=1), full_out, **TOL64)


def test_window_cache_decoding_equals_a_windowed_full_pass():
    torch.manual_seed(0)
    layer = ac.DifferentialAttention(32, 4, 2, rope_base=10000.0).to(F64).eval()
    x = randn(1, 6, 32, seed=7)
    window = ac.sliding_window_mask(6, 3)  # (L, L)
    full_out, _ = layer(x, window)
    cache = ac.KVCache(window=3)
    steps = [layer(x[:, i : i + 1], cache=cache)[0] for i in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full_out, **TOL64)


def test_future_tokens_do_not_change_past_outputs_and_gradients_reach_lambda():
    torch.manual_seed(0)
    layer = ac.DifferentialAttention(32, 4, 2, rope_base=10000.0).to(F64)
    x = randn(1, 6, 32, seed=8)
    changed = x.clone()
    changed[:, 3:] -= 2.0
    torch.testing.assert_close(layer(x, is_causal=True)[0][:, :3], layer(changed, is_causal=True)[0][:, :3], **TOL64)
    layer(x, is_causal=True)[0].sum().backward()
    assert all(getattr(layer, n).grad.abs().sum() > 0 for n in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"))


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((16, 3, 1), {"head_dim": 4}, ValueError, "must both be even"),
        ((16, 4, 1), {}, ValueError, "must both be even"),
        ((16, 4, 2), {"layer_idx": -1}, ValueError, "layer_idx must be an int >= 0"),
        ((16, 4, 2), {"head_dim": 0}, ValueError, "head_dim must be a positive int"),
        ((18, 4, 2), {}, ValueError, "divisible by num_heads"),
        ((16, 4, 2), {"rope_base": -1.0}, ValueError, "base must be"),
        ((16, 4, 2), {"bias": 1}, TypeError, "bias must be True or False"),
    ],
)
def test_bad_construction(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        ac.DifferentialAttention(*args, **kwargs)


def test_bad_forward_inputs():
    layer = ac.DifferentialAttention(16, 2, 2)
    with pytest.raises(ValueError, match="hidden_dim=16"):
        layer(torch.zeros(1, 3, 8))
    with pytest.raises(ValueError, match="rope_base=None"):
        layer(torch.zeros(1, 3, 16), positions=torch.arange(3))
    with pytest.raises(TypeError, match="KVCache"):
        layer(torch.zeros(1, 3, 16), cache={})
    with pytest.raises(ValueError, match="positions must have shape"):
        ac.DifferentialAttention(16, 2, 2, rope_base=10000.0)(torch.zeros(1, 3, 16), positions=torch.arange(4))
