"""Attention layers: agreement with torch.nn.MultiheadAttention, MHA/MQA as ends of GQA, head_dim decoupled
from hidden_dim / num_heads, one cache per layer, dropout modes."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F

import attn_core as ac

F64 = torch.float64


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    """A reproducible float64 standard-normal tensor."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def make_layer_pair(
    hidden_dim: int, num_heads: int, seed: int = 0
) -> tuple[ac.MultiHeadAttention, nn.MultiheadAttention]:
    """Our MultiHeadAttention and an nn.MultiheadAttention(batch_first=True) with the same float64 weights."""
    torch.manual_seed(seed)
    ours = ac.MultiHeadAttention(hidden_dim, num_heads).double().eval()
    theirs = nn.MultiheadAttention(hidden_dim, num_heads, batch_first=True, dtype=F64).eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        theirs.out_proj.weight.copy_(ours.o_proj.weight)
        theirs.out_proj.bias.copy_(ours.o_proj.bias)
    return ours, theirs


def torch_mha(theirs: nn.MultiheadAttention, x, context=None, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """Run nn.MultiheadAttention returning per-head weights (B, H, Lq, Lk)."""
    source = x if context is None else context
    return theirs(x, source, source, need_weights=True, average_attn_weights=False, **kwargs)


def assert_close64(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected, rtol=1e-9, atol=1e-10)


# --------------------------------------------------------------------------- vs nn.MultiheadAttention


@pytest.mark.parametrize(("hidden_dim", "num_heads"), [(16, 4), (12, 3), (8, 1), (6, 6)])
def test_self_attention_matches_nn_multihead_attention(hidden_dim, num_heads):
    """Self-attention output and per-head weights equal nn.MultiheadAttention with copied weights."""
    ours, theirs = make_layer_pair(hidden_dim, num_heads)
    x = randn(2, 5, hidden_dim, seed=1)
    out, weights = ours(x)
    expected_out, expected_weights = torch_mha(theirs, x)
    assert weights.shape == (2, num_heads, 5, 5)
    assert_close64(out, expected_out)
    assert_close64(weights, expected_weights)


@pytest.mark.parametrize("context_len", [1, 3, 9])
def test_cross_attention_matches_nn_multihead_attention(context_len):
    """Cross-attention (keys/values from a context of another length) equals nn.MultiheadAttention."""
    ours, theirs = make_layer_pair(16, 4, seed=2)
    x, context = randn(3, 4, 16, seed=3), randn(3, context_len, 16, seed=4)
    out, weights = ours(x, context)
    expected_out, expected_weights = torch_mha(theirs, x, context)
    assert weights.shape == (3, 4, 4, context_len)
    assert_close64(out, expected_out)
    assert_close64(weights, expected_weights)


@pytest.mark.parametrize("via", ["is_causal", "mask"])
def test_causal_self_attention_matches_nn_multihead_attention(via):
    """is_causal=True (or mask=causal_mask) equals nn.MHA with attn_mask=mask_to_blocked(causal_mask)."""
    ours, theirs = make_layer_pair(16, 4, seed=5)
    x = randn(2, 6, 16, seed=6)
    out, weights = ours(x, is_causal=True) if via == "is_causal" else ours(x, mask=ac.causal_mask(6))
    expected_out, expected_weights = torch_mha(theirs, x, attn_mask=ac.mask_to_blocked(ac.causal_mask(6)))
    assert_close64(out, expected_out)
    assert_close64(weights, expected_weights)


@pytest.mark.parametrize("causal", [False, True], ids=["padding", "padding+causal"])
def test_key_padding_matches_nn_multihead_attention(causal):
    """padding_mask(lengths) equals nn.MHA's key_padding_mask (True = blocked), also combined with causal."""
    ours, theirs = make_layer_pair(12, 3, seed=7)
    lengths = [5, 2, 1]  # every length >= 1: no fully masked rows (nn.MHA gives NaN there)
    x = randn(3, 5, 12, seed=8)
    padding = ac.padding_mask(lengths)  # (B, 1, 1, L)
    out, weights = ours(x, mask=padding, is_causal=causal)
    kwargs = {"key_padding_mask": ac.mask_to_blocked(padding[:, 0, 0, :])}
    if causal:
        kwargs["attn_mask"] = ac.mask_to_blocked(ac.causal_mask(5))
    expected_out, expected_weights = torch_mha(theirs, x, **kwargs)
    assert_close64(out, expected_out)
    assert_close64(weights, expected_weights)
    assert torch.equal(weights[1, :, :, 2:], torch.zeros(3, 5, 3, dtype=F64))


# --------------------------------------------------------------------------- layer family


def test_layer_parameter_shapes_follow_num_kv_heads():
    """k/v projections have num_kv_heads * head_dim outputs; q/o keep hidden_dim."""
    layer = ac.GroupedQueryAttention(32, 8, 2)
    assert layer.head_dim == 4
    assert layer.q_proj.weight.shape == (32, 32)
    assert layer.k_proj.weight.shape == (8, 32) and layer.v_proj.weight.shape == (8, 32)
    assert layer.o_proj.weight.shape == (32, 32)
    assert ac.MultiHeadAttention(32, 8).num_kv_heads == 8
    assert ac.MultiQueryAttention(32, 8).num_kv_heads == 1


def test_bias_false_removes_biases():
    """bias=False builds projections without bias parameters."""
    layer = ac.GroupedQueryAttention(8, 2, 1, bias=False)
    assert all(proj.bias is None for proj in (layer.q_proj, layer.k_proj, layer.v_proj, layer.o_proj))


@st.composite
def layer_cases(draw):
    """(kind, hidden_dim, num_heads, x) with tiny sizes."""
    kind = draw(st.sampled_from(["mha", "mqa"]))
    num_heads = draw(st.integers(1, 4))
    head_dim = draw(st.integers(1, 3))
    batch, length = draw(st.integers(1, 2)), draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**16))
    return kind, num_heads * head_dim, num_heads, randn(batch, length, num_heads * head_dim, seed=seed), seed


@given(layer_cases(), st.booleans())
def test_property_mha_and_mqa_equal_gqa_with_same_weights(case, is_causal):
    """MultiHeadAttention / MultiQueryAttention == GroupedQueryAttention(num_kv_heads=H / 1) after load_state_dict."""
    kind, hidden_dim, num_heads, x, seed = case
    torch.manual_seed(seed)
    if kind == "mha":
        special, num_kv_heads = ac.MultiHeadAttention(hidden_dim, num_heads), num_heads
    else:
        special, num_kv_heads = ac.MultiQueryAttention(hidden_dim, num_heads), 1
    general = ac.GroupedQueryAttention(hidden_dim, num_heads, num_kv_heads)
    general.load_state_dict(special.state_dict())
    special, general = special.double().eval(), general.double().eval()
    out, weights = special(x, is_causal=is_causal)
    general_out, general_weights = general(x, is_causal=is_causal)
    torch.testing.assert_close(out, general_out, rtol=0, atol=0)
    torch.testing.assert_close(weights, general_weights, rtol=0, atol=0)


def test_gqa_layer_matches_expanded_mha_layer():
    """A GQA layer equals an MHA layer whose k/v projections repeat each kv head's rows for its group."""
    hidden_dim, num_heads, num_kv_heads = 16, 8, 2
    head_dim, group = hidden_dim // num_heads, num_heads // num_kv_heads
    torch.manual_seed(9)
    gqa = ac.GroupedQueryAttention(hidden_dim, num_heads, num_kv_heads).double().eval()
    mha = ac.MultiHeadAttention(hidden_dim, num_heads).double().eval()

    def expand_rows(t: torch.Tensor) -> torch.Tensor:  # (Hkv * head_dim, ...) -> (H * head_dim, ...)
        return t.unflatten(0, (num_kv_heads, head_dim)).repeat_interleave(group, dim=0).flatten(0, 1)

    with torch.no_grad():
        for name in ("q_proj", "o_proj"):
            getattr(mha, name).load_state_dict(getattr(gqa, name).state_dict())
        for name in ("k_proj", "v_proj"):
            getattr(mha, name).weight.copy_(expand_rows(getattr(gqa, name).weight))
            getattr(mha, name).bias.copy_(expand_rows(getattr(gqa, name).bias))
    x = randn(2, 5, hidden_dim, seed=10)
    out, weights = gqa(x, is_causal=True)
    expected_out, expected_weights = mha(x, is_causal=True)
    assert_close64(out, expected_out)
    assert_close64(weights, expected_weights)


# --------------------------------------------------------------------------- head_dim != hidden_dim / num_heads


def reference_attention(layer: ac.GroupedQueryAttention, x: torch.Tensor, mask: torch.Tensor | None = None):
    """Textbook attention with the layer's weights: F.linear projections, torch's SDPA (enable_gqa) for the
    output, and softmax(q kᵀ / sqrt(head_dim)) with kv heads repeated for the per-head weights."""
    batch, length, _ = x.shape
    heads, kv_heads, head_dim = layer.num_heads, layer.num_kv_heads, layer.head_dim
    q = F.linear(x, layer.q_proj.weight, layer.q_proj.bias).view(batch, length, heads, head_dim).transpose(1, 2)
    k = F.linear(x, layer.k_proj.weight, layer.k_proj.bias).view(batch, length, kv_heads, head_dim).transpose(1, 2)
    v = F.linear(x, layer.v_proj.weight, layer.v_proj.bias).view(batch, length, kv_heads, head_dim).transpose(1, 2)
    # q (B, H, L, head_dim); k, v (B, Hkv, L, head_dim)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)  # (B, H, L, head_dim)
    out = F.linear(out.transpose(1, 2).reshape(batch, length, heads * head_dim), layer.o_proj.weight, layer.o_proj.bias)
    k_per_head = k.repeat_interleave(heads // kv_heads, dim=1)  # (B, H, L, head_dim)
    scores = q @ k_per_head.transpose(-2, -1) / head_dim**0.5  # (B, H, L, L)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return out, scores.softmax(-1)  # (B, L, hidden), (B, H, L, L)


# (hidden_dim, num_heads, num_kv_heads, head_dim): head_dim * num_heads != hidden_dim in every case
HEAD_DIM_CASES = [(12, 4, 2, 5), (10, 4, 1, 6), (6, 4, 4, 3), (9, 2, 2, 2)]


@pytest.mark.parametrize(("hidden_dim", "num_heads", "num_kv_heads", "head_dim"), HEAD_DIM_CASES)
@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "causal+padding"])
def test_explicit_head_dim_matches_textbook_reference(hidden_dim, num_heads, num_kv_heads, head_dim, masked):
    """A layer whose head_dim is not hidden_dim / num_heads equals F.scaled_dot_product_attention on its weights."""
    torch.manual_seed(20)
    layer = ac.GroupedQueryAttention(hidden_dim, num_heads, num_kv_heads, head_dim=head_dim).double().eval()
    assert layer.head_dim == head_dim
    x = randn(3, 5, hidden_dim, seed=21)
    mask = ac.causal_mask(5) & ac.padding_mask([5, 2, 1]) if masked else None  # (B, 1, L, L); no empty rows
    out, weights = layer(x, mask=mask)
    expected_out, expected_weights = reference_attention(layer, x, mask)
    assert out.shape == (3, 5, hidden_dim) and weights.shape == (3, num_heads, 5, 5)
    assert_close64(out, expected_out)
    assert_close64(weights, expected_weights)


@pytest.mark.parametrize(("hidden_dim", "num_heads", "num_kv_heads", "head_dim"), HEAD_DIM_CASES)
def test_explicit_head_dim_cached_decoding_equals_full_pass(hidden_dim, num_heads, num_kv_heads, head_dim):
    """Prefill 2 tokens, then decode one at a time through a KVCache: equals one full causal pass."""
    torch.manual_seed(22)
    layer = ac.GroupedQueryAttention(hidden_dim, num_heads, num_kv_heads, head_dim=head_dim).double().eval()
    x = randn(2, 6, hidden_dim, seed=23)
    full_out, full_weights = layer(x, is_causal=True)  # (B, 6, hidden), (B, H, 6, 6)
    cache = ac.KVCache(initial_capacity=2)
    steps = [layer(x[:, :2], is_causal=True, cache=cache)[0]]  # (B, 2, hidden)
    for t in range(2, 6):
        step_out, step_weights = layer(x[:, t : t + 1], is_causal=True, cache=cache)  # (B, 1, hidden), (B, H, 1, t+1)
        steps.append(step_out)
        assert_close64(step_weights[:, :, 0], full_weights[:, :, t, : t + 1])
    assert cache.keys.shape == (2, num_kv_heads, 6, head_dim)
    assert_close64(torch.cat(steps, dim=1), full_out)


@pytest.mark.parametrize(
    ("name", "hidden_dim", "num_heads", "num_kv_heads", "head_dim", "expected"),
    [
        # no biases: q and o are hidden x H*head_dim, k and v hidden x Hkv*head_dim
        ("Gemma-7B", 3072, 16, 16, 256, 4 * 3072 * 16 * 256),
        ("Gemma-3-270M", 640, 4, 1, 256, 2 * 640 * 4 * 256 + 2 * 640 * 1 * 256),
        ("default head_dim", 32, 8, 2, None, 2 * 32 * 32 + 2 * 32 * 8),
    ],
)
def test_parameter_count_follows_head_dim(name, hidden_dim, num_heads, num_kv_heads, head_dim, expected):
    """Parameter counts of real configurations (built on the meta device: shapes only, no memory)."""
    with torch.device("meta"):
        layer = ac.GroupedQueryAttention(hidden_dim, num_heads, num_kv_heads, head_dim=head_dim, bias=False)
    assert sum(p.numel() for p in layer.parameters()) == expected, name
    width = num_heads * layer.head_dim
    assert layer.q_proj.weight.shape == (width, hidden_dim) and layer.o_proj.weight.shape == (hidden_dim, width)
    assert layer.k_proj.weight.shape == layer.v_proj.weight.shape == (num_kv_heads * layer.head_dim, hidden_dim)


def test_head_dim_with_bias_counts_and_subclasses():
    """Biases add H*head_dim (q), 2*Hkv*head_dim (k, v) and hidden (o); MHA and MQA pass head_dim through."""
    layer = ac.GroupedQueryAttention(10, 4, 2, head_dim=3)
    assert sum(p.numel() for p in layer.parameters()) == (10 * 12 + 12) + 2 * (10 * 6 + 6) + (12 * 10 + 10)
    assert ac.MultiHeadAttention(10, 4, head_dim=3).k_proj.weight.shape == (12, 10)
    assert ac.MultiQueryAttention(10, 4, head_dim=3).k_proj.weight.shape == (3, 10)
    assert "head_dim=3" in repr(layer)


def test_default_head_dim_is_bit_identical_to_explicit_and_to_plain_linears():
    """head_dim=None builds exactly what it did before head_dim existed: same shapes, same draws, same outputs."""
    torch.manual_seed(24)
    default = ac.GroupedQueryAttention(16, 4, 2)
    torch.manual_seed(24)
    explicit = ac.GroupedQueryAttention(16, 4, 2, head_dim=4)
    torch.manual_seed(24)
    linears = [nn.Linear(16, 16), nn.Linear(16, 8), nn.Linear(16, 8), nn.Linear(16, 16)]  # q, k, v, o in order
    for name, linear in zip(("q_proj", "k_proj", "v_proj", "o_proj"), linears, strict=True):
        assert torch.equal(getattr(default, name).weight, linear.weight)
        assert torch.equal(getattr(default, name).bias, linear.bias)
    x = torch.randn(2, 5, 16)
    default_out, default_weights = default(x, is_causal=True)
    explicit_out, explicit_weights = explicit(x, is_causal=True)
    assert torch.equal(default_out, explicit_out) and torch.equal(default_weights, explicit_weights)


@pytest.mark.parametrize("head_dim", [0, -4, 2.5, True, "8"])
def test_bad_head_dim_is_refused_by_name(head_dim):
    with pytest.raises(
        ValueError, match=r"head_dim must be a positive int .*got " + repr(head_dim).replace(".", r"\.")
    ):
        ac.GroupedQueryAttention(8, 2, 1, head_dim=head_dim)


def test_indivisible_hidden_dim_suggests_head_dim():
    """Without head_dim, hidden_dim % num_heads must be 0; the error names both fixes."""
    with pytest.raises(ValueError, match=r"hidden_dim \(10\) must be divisible by num_heads \(4\).*head_dim="):
        ac.MultiHeadAttention(10, 4)
    assert ac.MultiHeadAttention(10, 4, head_dim=8).head_dim == 8  # explicit head_dim: no divisibility needed


# --------------------------------------------------------------------------- one cache per layer


def test_one_cache_shared_by_two_layers_is_refused():
    """A KVCache binds to the first layer that uses it; a second layer gets a ValueError and the cache is intact."""
    torch.manual_seed(25)
    first, second = ac.MultiHeadAttention(8, 2).double(), ac.MultiHeadAttention(8, 2).double()
    x = randn(1, 3, 8, seed=26)
    cache = ac.KVCache()
    first(x, is_causal=True, cache=cache)
    first(x[:, :1], is_causal=True, cache=cache)  # the same layer again: fine
    with pytest.raises(ValueError, match="another layer"):
        second(x[:, :1], is_causal=True, cache=cache)
    assert len(cache) == 4  # the refused call appended nothing


# --------------------------------------------------------------------------- dropout modes


@pytest.mark.parametrize("layer_cls", [ac.MultiHeadAttention, ac.MultiQueryAttention])
def test_eval_mode_applies_no_dropout(layer_cls):
    """In eval() a dropout layer is deterministic, its weight rows sum to 1, and it equals a dropout-free copy."""
    torch.manual_seed(11)
    layer = layer_cls(16, 4, dropout=0.5).double().eval()
    plain = layer_cls(16, 4).double().eval()
    plain.load_state_dict(layer.state_dict())
    x = randn(2, 6, 16, seed=12)
    out_a, weights_a = layer(x)
    out_b, _ = layer(x)
    assert torch.equal(out_a, out_b)
    assert not (weights_a == 0).any()
    torch.testing.assert_close(weights_a.sum(-1), torch.ones(2, 4, 6, dtype=F64))
    assert_close64(out_a, plain(x)[0])


@pytest.mark.parametrize("layer_cls", [ac.MultiHeadAttention, ac.MultiQueryAttention])
def test_train_mode_applies_dropout(layer_cls):
    """In train() weights are dropped (exact zeros, scaled survivors) and the output changes."""
    torch.manual_seed(13)
    layer = layer_cls(16, 4, dropout=0.5).double()
    x = randn(2, 6, 16, seed=14)
    layer.eval()
    eval_out, eval_weights = layer(x)
    layer.train()
    torch.manual_seed(15)
    train_out, train_weights = layer(x)
    dropped = train_weights == 0
    assert dropped.any() and (~dropped).any()
    assert_close64(train_weights[~dropped], eval_weights[~dropped] * 2)  # 1 / (1 - 0.5)
    assert not torch.allclose(train_out, eval_out)


def test_train_mode_without_dropout_equals_eval():
    """dropout=0 (the default): train() and eval() give identical results."""
    torch.manual_seed(16)
    layer = ac.GroupedQueryAttention(12, 6, 3).double()
    x = randn(2, 4, 12, seed=17)
    train_out, _ = layer.train()(x)
    eval_out, _ = layer.eval()(x)
    assert torch.equal(train_out, eval_out)
