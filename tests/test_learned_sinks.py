"""GroupedQueryAttention(sinks=True): gpt-oss's learned sink logits, equal to Hugging Face's GptOssAttention.

One logit per head joins every softmax row with no value and no scale, so the returned weights sum to 1 − p_sink.
HF's eager path keeps float64 in float64 here (its softmax takes the logits' dtype), so the comparison is exact
to float64 rounding: a few ulps of O(1) numbers, hence 1e-12.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import GptOssConfig
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssAttention

import attn_core as ac
from tests.reference import randn

F64 = torch.float64
TOL64 = {"rtol": 1e-12, "atol": 1e-12}


def gpt_oss_cos_sin(length: int, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GptOssRotaryEmbedding's half-size cos/sin (default RoPE) in float64: (1, L, head_dim / 2) each."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=F64) / head_dim))  # (D/2,)
    angles = torch.arange(length, dtype=F64)[None, :, None] * inv_freq  # (1, L, D/2)
    return angles.cos(), angles.sin()


def additive(mask: torch.Tensor) -> torch.Tensor:
    """Boolean (True = may attend) -> HF's additive float mask (0 / -inf)."""
    return torch.zeros(mask.shape, dtype=F64).masked_fill(~mask, float("-inf"))


def causal_window(length: int, window: int | None) -> torch.Tensor:
    i, j = torch.arange(length)[:, None], torch.arange(length)[None, :]  # (L, 1), (1, L)
    allowed = j <= i  # (L, L)
    return allowed & (i - j < window) if window is not None else allowed


def gpt_oss_pair(layer_idx: int, *, heads=4, kv_heads=2, head_dim=8, hidden=32, window=3, seed=0):
    """A GptOssAttention (eager, float64, random sinks) and our layer loaded from its state_dict, no renaming."""
    config = GptOssConfig(
        hidden_size=hidden,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        sliding_window=window,
        num_hidden_layers=2,
        attention_bias=True,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    hf = GptOssAttention(config, layer_idx=layer_idx).to(F64).eval()
    for parameter in hf.parameters():
        torch.nn.init.normal_(parameter, std=0.3)
    ours = ac.GroupedQueryAttention(
        hidden,
        heads,
        kv_heads,
        head_dim=head_dim,
        rope_base=10000.0,
        sinks=True,
        bias=True,
        sliding_window=window if config.layer_types[layer_idx] == "sliding_attention" else None,
    ).to(F64)
    ours.load_state_dict(hf.state_dict(), strict=True)  # q/k/v/o_proj and sinks: the same names
    return hf, ours.eval()


@pytest.mark.parametrize("layer_idx", [0, 1], ids=["sliding", "full"])
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 2), (4, 4), (4, 1)])
def test_equals_gpt_oss_attention(layer_idx, heads, kv_heads):
    hf, ours = gpt_oss_pair(layer_idx, heads=heads, kv_heads=kv_heads)
    assert hf.config.layer_types == ["sliding_attention", "full_attention"]  # alternating, sliding first
    assert ours.sliding_window == hf.sliding_window
    x = randn(2, 9, 32, seed=1)  # (B, L, hidden)
    visible = causal_window(9, hf.sliding_window)  # (L, L): the mask HF builds outside the module
    hf_out, hf_weights = hf(x, position_embeddings=gpt_oss_cos_sin(9, 8, 10000.0), attention_mask=additive(visible))
    out, weights = ours(x, is_causal=True)
    torch.testing.assert_close(out, hf_out, **TOL64)
    torch.testing.assert_close(weights, hf_weights, **TOL64)


def test_rows_sum_to_one_minus_the_sink_share():
    _, layer = gpt_oss_pair(1)
    x = randn(2, 6, 32, seed=2)  # (B, L, hidden)
    _, weights = layer(x, is_causal=True)  # (B, H, L, L)
    q = layer._split_heads(layer.q_proj(x), layer.num_heads)  # (B, H, L, D)
    k = layer._split_heads(layer.k_proj(x), layer.num_kv_heads)  # (B, Hkv, L, D)
    q, k = ac.apply_rope(q, torch.arange(6)), ac.apply_rope(k, torch.arange(6))
    scores = q @ k.repeat_interleave(2, dim=1).transpose(-2, -1) / 8**0.5  # (B, H, L, L)
    scores = scores.masked_fill(~causal_window(6, None), float("-inf"))
    total = scores.exp().sum(-1) + layer.sinks.exp()[:, None]  # (B, H, L): keys plus the sink
    p_sink = layer.sinks.exp()[:, None] / total  # (B, H, L)
    torch.testing.assert_close(weights.sum(-1), 1 - p_sink, **TOL64)
    assert (weights.sum(-1) < 1).all()


def test_sinks_start_at_zero_and_a_very_negative_sink_is_no_sink():
    torch.manual_seed(0)
    layer = ac.GroupedQueryAttention(16, 2, 1, sinks=True).to(F64)
    assert torch.equal(layer.sinks, torch.zeros(2, dtype=F64))
    plain = ac.GroupedQueryAttention(16, 2, 1).to(F64)
    plain.load_state_dict({k: v for k, v in layer.state_dict().items() if k != "sinks"})
    with torch.no_grad():
        layer.sinks.fill_(-800.0)  # exp(-800) underflows to 0 in float64: the sink takes nothing
    x = randn(1, 5, 16, seed=3)
    for got, expected in zip(layer(x, is_causal=True), plain(x, is_causal=True), strict=True):
        torch.testing.assert_close(got, expected, **TOL64)


def test_sink_equals_a_key_with_zero_value_and_the_sink_logit_as_its_score():
    q, k, v = randn(1, 2, 4, 8, seed=4), randn(1, 2, 5, 8, seed=5), randn(1, 2, 5, 8, seed=6)
    sinks = torch.tensor([0.7, -1.3], dtype=F64)  # (H,)
    out, weights = ac.scaled_dot_product_attention(q, k, v, sinks=sinks)
    scores = q @ k.transpose(-2, -1) / 8**0.5  # (1, H, 4, 5)
    extended = torch.cat([scores, sinks[None, :, None, None].expand(1, 2, 4, 1)], dim=-1)  # (1, H, 4, 6)
    full = torch.softmax(extended, dim=-1)  # (1, H, 4, 6): the sink column is a key ...
    zero_value = torch.cat([v, torch.zeros(1, 2, 1, 8, dtype=F64)], dim=-2)  # ... whose value is 0
    torch.testing.assert_close(weights, full[..., :-1], **TOL64)
    torch.testing.assert_close(out, full @ zero_value, **TOL64)


def test_fully_masked_row_gives_zero_weights_and_zero_output():
    q, k, v = randn(1, 2, 3, 4, seed=7), randn(1, 2, 3, 4, seed=8), randn(1, 2, 3, 4, seed=9)
    mask = torch.ones(3, 3, dtype=torch.bool)
    mask[1] = False  # query 1 sees no key
    out, weights = ac.scaled_dot_product_attention(q, k, v, mask, sinks=torch.tensor([1.0, -2.0], dtype=F64))
    assert torch.equal(weights[:, :, 1], torch.zeros(1, 2, 3, dtype=F64))
    assert torch.equal(out[:, :, 1], torch.zeros(1, 2, 4, dtype=F64))
    assert not out.isnan().any()


@pytest.mark.parametrize("chunks", [(1,) * 8, (3, 1, 4), (5, 3)])
@pytest.mark.parametrize("window", [None, 3])
def test_cached_decoding_equals_full_pass(chunks, window):
    torch.manual_seed(0)
    layer = ac.GroupedQueryAttention(16, 4, 2, rope_base=10000.0, sinks=True, sliding_window=window).to(F64).eval()
    torch.nn.init.normal_(layer.sinks)
    x = randn(2, 8, 16, seed=10)  # (B, L, hidden)
    full_out, full_weights = layer(x, is_causal=True)
    cache, outs, start = ac.KVCache(), [], 0
    for size in chunks:
        out, weights = layer(x[:, start : start + size], is_causal=True, cache=cache)
        outs.append(out)
        torch.testing.assert_close(weights, full_weights[:, :, start : start + size, : start + size], **TOL64)
        start += size
    torch.testing.assert_close(torch.cat(outs, dim=1), full_out, **TOL64)


def test_window_cache_decoding_equals_sliding_full_pass():
    torch.manual_seed(1)
    layer = ac.GroupedQueryAttention(16, 2, 2, rope_base=10000.0, sinks=True, sliding_window=3).to(F64).eval()
    torch.nn.init.normal_(layer.sinks)
    x = randn(1, 7, 16, seed=11)
    full_out, _ = layer(x, is_causal=True)
    cache = ac.KVCache(window=3)
    steps = [layer(x[:, i : i + 1], cache=cache)[0] for i in range(7)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full_out, **TOL64)


def test_sinks_learn_from_the_gradient():
    layer = ac.GroupedQueryAttention(16, 2, 1, sinks=True)
    layer(torch.randn(2, 5, 16), is_causal=True)[0].square().sum().backward()
    assert layer.sinks.grad is not None and layer.sinks.grad.abs().sum() > 0


def test_state_dict_keys_and_repr():
    layer = ac.GroupedQueryAttention(16, 2, 1, sinks=True, bias=False)
    assert sorted(layer.state_dict()) == ["k_proj.weight", "o_proj.weight", "q_proj.weight", "sinks", "v_proj.weight"]
    assert "sinks=True" in repr(layer) and "sinks" not in ac.GroupedQueryAttention(16, 2, 1).state_dict()


def test_half_precision_sinks_stay_finite():
    layer = ac.GroupedQueryAttention(16, 2, 1, sinks=True).half()
    out, weights = layer(torch.randn(1, 4, 16).half(), is_causal=True)
    assert out.dtype == weights.dtype == torch.float16 and out.isfinite().all()
    assert (weights.float().sum(-1) <= 1 + 1e-3).all()


@settings(max_examples=25, deadline=None)
@given(
    sinks=st.lists(st.floats(-30, 30), min_size=2, max_size=2),
    q_len=st.integers(1, 5),
    k_len=st.integers(1, 6),
    seed=st.integers(0, 1000),
)
def test_property_rows_sum_below_one_and_match_the_extended_softmax(sinks, q_len, k_len, seed):
    q, k, v = randn(2, q_len, 4, seed=seed), randn(1, k_len, 4, seed=seed + 1), randn(1, k_len, 3, seed=seed + 2)
    sink_logits = torch.tensor(sinks, dtype=F64)  # (H,)
    out, weights = ac.scaled_dot_product_attention(q, k, v, sinks=sink_logits)
    scores = q @ k.transpose(-2, -1) / 2.0  # (H, Lq, Lk); scale 1/sqrt(4)
    log_total = torch.logaddexp(scores.logsumexp(-1), sink_logits[:, None])  # (H, Lq)
    torch.testing.assert_close(weights, (scores - log_total[..., None]).exp(), **TOL64)
    torch.testing.assert_close(weights.sum(-1), 1 - (sink_logits[:, None] - log_total).exp(), **TOL64)
    assert (weights.sum(-1) < 1).all()


@pytest.mark.parametrize(
    ("sinks", "error", "match"),
    [
        ([0.0, 0.0], TypeError, "floating-point tensor"),
        (torch.zeros(2, dtype=torch.long), TypeError, "floating-point tensor"),
        (torch.zeros(3, dtype=F64), ValueError, r"\(num_heads,\) = \(2,\)"),
        (torch.zeros(1, 2, dtype=F64), ValueError, r"\(num_heads,\) = \(2,\)"),
    ],
)
def test_bad_sinks_raise(sinks, error, match):
    q = randn(2, 3, 4)
    with pytest.raises(error, match=match):
        ac.scaled_dot_product_attention(q, q, q, sinks=sinks)


@pytest.mark.parametrize("value", [1, "yes", None, torch.tensor(True)])
def test_sinks_flag_must_be_a_bool(value):
    with pytest.raises(TypeError, match="sinks must be True or False"):
        ac.GroupedQueryAttention(16, 2, 1, sinks=value)


@pytest.mark.parametrize("cache_kwargs", [{"window": 3, "num_sinks": 1}, {"window": 4}], ids=["window+sinks", "window"])
def test_sinks_and_gate_with_a_streaming_cache_one_pass_equals_token_by_token(cache_kwargs):
    """KVCache(window, num_sinks) keeps real first tokens; the learned sink logit still joins every row."""
    torch.manual_seed(2)
    layer = ac.GroupedQueryAttention(16, 2, 1, rope_base=10000.0, sinks=True, output_gate=True).to(F64).eval()
    torch.nn.init.normal_(layer.sinks)
    x = randn(1, 9, 16, seed=12)
    one_pass, weights = layer(x, is_causal=True, cache=ac.KVCache(**cache_kwargs))
    cache = ac.KVCache(**cache_kwargs)
    steps = [layer(x[:, i : i + 1], cache=cache)[0] for i in range(9)]
    torch.testing.assert_close(torch.cat(steps, dim=1), one_pass, **TOL64)
    assert (weights.sum(-1) < 1).all()
