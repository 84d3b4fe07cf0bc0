"""MultiHeadLatentAttention(index_topk=k) is DeepSeek-V3.2's attention: equal to Hugging Face's
DeepseekV32Attention in float64 (its state_dict loads as is), exactly the dense layer when k >= Lk, absorb=True
equal to absorb=False, decoding (tokens or chunks) equal to the full pass, index keys held in the one KVCache.

HF rounds through float32 in three places for float64 inputs (RMSNorm, its indexer's `.float()` scores, its
float32 cos/sin); as in test_latent_attention.py those are removed (RMSNorm kept in the input dtype, `.float()`
a no-op on float64 during the call, float64 cos/sin passed in) so the comparison holds to 1e-12.
"""

from __future__ import annotations

import pytest
import torch
from reference import F64, randn
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3RMSNorm
from transformers.models.deepseek_v32.configuration_deepseek_v32 import DeepseekV32Config
from transformers.models.deepseek_v32.modeling_deepseek_v32 import DeepseekV32Attention, DeepseekV32RMSNorm

import attn_core as ac

DIMS = dict(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=6, v_head_dim=10, q_lora_rank=12)
INDEX = dict(index_n_heads=3, index_head_dim=10)
HIDDEN, HEADS = 32, 4


def make_layer(topk: int, seed: int = 0) -> ac.MultiHeadLatentAttention:
    torch.manual_seed(seed)
    layer = ac.MultiHeadLatentAttention(HIDDEN, HEADS, index_topk=topk, **DIMS, **INDEX)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0.0, 0.3)  # norms' weights and LayerNorm's bias too: a wrong one cannot hide behind 1 / 0
    return layer.to(F64).eval()


def float64_cos_sin(positions: torch.Tensor, rope_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    freqs = ac.rope_angles(positions, rope_dim)  # (B, L, rope/2) float64
    emb = torch.cat([freqs, freqs], dim=-1)  # (B, L, rope): HF's cat(freqs, freqs) layout
    return emb.cos(), emb.sin()


@pytest.fixture
def exact_hf(monkeypatch):
    """HF with its float32 round trips removed (see the module docstring)."""

    def rms64(self, h):
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    monkeypatch.setattr(DeepseekV3RMSNorm, "forward", rms64)
    monkeypatch.setattr(DeepseekV32RMSNorm, "forward", rms64)
    original_float = torch.Tensor.float
    monkeypatch.setattr(torch.Tensor, "float", lambda t: t if t.dtype == F64 else original_float(t))


def hf_twin(layer: ac.MultiHeadLatentAttention) -> DeepseekV32Attention:
    config = DeepseekV32Config(
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        index_topk=layer.indexer.topk,
        attention_bias=False,
        **DIMS,
        **INDEX,
    )
    config._attn_implementation = "sdpa"  # stays in float64
    hf = DeepseekV32Attention(config, layer_idx=0).to(F64).eval()
    hf.load_state_dict(layer.state_dict(), strict=True)  # same names, no renaming
    return hf


@pytest.mark.parametrize("topk", [1, 3, 5, 9])
@pytest.mark.parametrize("absorb", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_matches_hugging_face_deepseek_v32(topk, absorb, padded, exact_hf):
    layer = make_layer(topk)
    hf = hf_twin(layer)
    x = randn(2, 7, HIDDEN, seed=1)  # (B, L, hidden)
    mask = torch.ones(2, 1, 7, 7, dtype=torch.bool).tril()  # (B, 1, L, L): causal
    if padded:
        mask[1, :, :, :2] = False  # sequence 1 is left-padded by two tokens
        mask[1, :, :2, :2] = torch.eye(2, dtype=torch.bool)  # padding rows see themselves (HF needs a key per row)
    out, weights = layer(x, mask, absorb=absorb)  # (B, L, hidden), (B, H, L, L)
    positions = torch.arange(7).expand(2, -1)  # (B, L)
    expected, _ = hf(x, float64_cos_sin(positions, 6), attention_mask=mask)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    assert weights.shape == (2, HEADS, 7, 7)
    picks_per_row = (weights[:, 0] > 0).sum(-1)  # (B, L)
    assert int(picks_per_row.max()) <= topk


@pytest.mark.parametrize("absorb", [False, True])
def test_topk_at_least_lk_is_exactly_the_dense_layer(absorb):
    sparse = make_layer(topk=8, seed=2)
    dense = ac.MultiHeadLatentAttention(HIDDEN, HEADS, **DIMS).to(F64)
    dense.load_state_dict({k: v for k, v in sparse.state_dict().items() if not k.startswith("indexer.")})
    x = randn(2, 8, HIDDEN, seed=3)  # (B, L, hidden)
    for kwargs in ({"is_causal": True}, {}):
        out, weights = sparse(x, absorb=absorb, **kwargs)
        dense_out, dense_weights = dense(x, absorb=absorb, **kwargs)
        torch.testing.assert_close(out, dense_out, rtol=0, atol=1e-12)
        torch.testing.assert_close(weights, dense_weights, rtol=0, atol=1e-12)


def test_weights_are_zero_off_the_picks_and_absorb_agrees():
    layer = make_layer(topk=3, seed=4)
    x = randn(1, 9, HIDDEN, seed=5)  # (B, L, hidden)
    out, weights = layer(x, is_causal=True)
    out_abs, weights_abs = layer(x, is_causal=True, absorb=True)
    torch.testing.assert_close(out_abs, out, rtol=0, atol=1e-12)
    torch.testing.assert_close(weights_abs, weights, rtol=0, atol=1e-12)
    q_latent = layer.q_a_layernorm(layer.q_a_proj(x))  # (B, L, q_lora_rank)
    picks, _ = layer.indexer(x, q_latent, is_causal=True)  # (B, L, 3)
    picked = torch.zeros(1, 9, 10, dtype=torch.bool).scatter(-1, torch.where(picks < 0, 9, picks), True)[..., :9]
    assert torch.equal(weights[0] > 0, picked[0].expand(HEADS, -1, -1))  # every head reads the same picks
    assert not bool(torch.triu(weights[0], diagonal=1).any())  # nothing from the future


@pytest.mark.parametrize("chunks", [[1] * 9, [4, 1, 1, 3], [2, 7], [9]])
@pytest.mark.parametrize("absorb", [False, True])
def test_decoding_equals_the_full_pass_and_cache_holds_index_keys(chunks, absorb):
    layer = make_layer(topk=3, seed=6)
    x = randn(2, 9, HIDDEN, seed=7)  # (B, L, hidden)
    full, _ = layer(x, is_causal=True, absorb=absorb)
    cache, outs, start = ac.KVCache(), [], 0
    for n in chunks:
        out, weights = layer(x[:, start : start + n], is_causal=True, cache=cache, absorb=absorb)
        assert weights.shape == (2, HEADS, n, start + n)
        outs.append(out)
        start += n
    torch.testing.assert_close(torch.cat(outs, 1), full, rtol=0, atol=1e-12)
    per_token = DIMS["kv_lora_rank"] + DIMS["qk_rope_head_dim"] + INDEX["index_head_dim"]
    assert cache.nbytes == 2 * 9 * per_token * 8
    assert len(cache) == 9


def test_decoding_equals_hugging_face_full_pass_with_positions(exact_hf):
    layer = make_layer(topk=2, seed=8)
    hf = hf_twin(layer)
    x = randn(1, 6, HIDDEN, seed=9)  # (B, L, hidden)
    positions = torch.arange(3, 9)[None]  # (B, L): a sequence that starts at position 3
    expected, _ = hf(x, float64_cos_sin(positions, 6), attention_mask=torch.ones(1, 1, 6, 6, dtype=torch.bool).tril())
    out, _ = layer(x, is_causal=True, positions=positions)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


def test_no_indexer_by_default_and_parameter_names():
    assert ac.MultiHeadLatentAttention(HIDDEN, HEADS, **DIMS).indexer is None
    layer = make_layer(topk=2)
    names = {k: tuple(v.shape) for k, v in layer.indexer.state_dict().items()}
    assert names == {
        "wq_b.weight": (3 * 10, 12),
        "wk.weight": (10, HIDDEN),
        "k_norm.weight": (10,),
        "k_norm.bias": (10,),
        "weights_proj.weight": (3, HIDDEN),
    }
    assert isinstance(layer.indexer, ac.LightningIndexer) and layer.indexer.topk == 2


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(index_topk=0), "index_topk"),
        (dict(index_topk=2.5), "index_topk"),
        (dict(index_topk=2, q_lora_rank=None), "q_lora_rank"),
        (dict(index_topk=2, index_head_dim=4), "index_head_dim"),
        (dict(index_topk=2, index_n_heads=0), "index_n_heads"),
    ],
)
def test_bad_indexer_settings_are_refused(kwargs, words):
    with pytest.raises(ValueError, match=words):
        ac.MultiHeadLatentAttention(HIDDEN, HEADS, **{**DIMS, **kwargs})


def test_a_mask_that_varies_over_heads_is_refused():
    layer = make_layer(topk=2)
    x = randn(1, 4, HIDDEN, seed=0)
    per_head = torch.ones(1, HEADS, 4, 4, dtype=torch.bool).tril()  # (B, H, L, L)
    with pytest.raises(ValueError, match="varies over heads"):
        layer(x, per_head)
    with pytest.raises(ValueError, match="does not broadcast"):
        layer(x, torch.ones(3, 3, dtype=torch.bool))


@pytest.mark.parametrize(("window", "num_sinks"), [(4, 0), (3, 1)])
@pytest.mark.parametrize("chunks", [[1] * 10, [4, 1, 3, 2]])
def test_window_cache_decoding_equals_the_masked_full_pass(window, num_sinks, chunks):
    """A KVCache(window, num_sinks) holds the index keys too: the indexer picks among the keys the window
    keeps (slots out of order once the ring wraps), exactly as the full pass under the same mask."""
    layer = make_layer(topk=2, seed=10)
    x = randn(1, 10, HIDDEN, seed=11)  # (B, L, hidden)
    sinks = (torch.arange(10) < num_sinks) & ac.causal_mask(10)  # (L, L)
    full, _ = layer(x, ac.sliding_window_mask(10, window) | sinks)
    cache, outs, start = ac.KVCache(window=window, num_sinks=num_sinks), [], 0
    for n in chunks:
        outs.append(layer(x[:, start : start + n], is_causal=True, cache=cache)[0])
        start += n
    torch.testing.assert_close(torch.cat(outs, 1), full, rtol=0, atol=1e-12)


@pytest.mark.parametrize("absorb", [False, True])
def test_future_tokens_never_change_past_outputs(absorb):
    layer = make_layer(topk=3, seed=12)
    x = randn(1, 10, HIDDEN, seed=13)  # (B, L, hidden)
    changed = x.clone()
    changed[:, 6:] = randn(1, 4, HIDDEN, seed=14)  # (B, 4, hidden): a different future
    out, _ = layer(x, is_causal=True, absorb=absorb)
    out_changed, _ = layer(changed, is_causal=True, absorb=absorb)
    torch.testing.assert_close(out_changed[:, :6], out[:, :6], rtol=0, atol=1e-12)
