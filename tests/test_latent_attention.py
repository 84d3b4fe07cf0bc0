"""MultiHeadLatentAttention: equal to Hugging Face's DeepseekV3Attention and to a textbook float64 reference;
absorb=True equal to absorb=False; cached decoding equal to one full pass; the cache holds only the latent.

HF's DeepseekV3RMSNorm rounds through float32 and its rotary embedding computes cos/sin in float32, even for
float64 inputs. So the HF comparison runs twice: (1) HF as shipped, with a tolerance derived from float32
rounding; (2) HF with its RMSNorm kept in the input dtype and float64 cos/sin passed in (position_embeddings
is an argument of its forward), which must agree to 1e-12.
"""

from __future__ import annotations

import math

import pytest
import torch
from reference import F64, randn
from transformers.models.deepseek_v3.configuration_deepseek_v3 import DeepseekV3Config
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
    DeepseekV3Attention,
    DeepseekV3RMSNorm,
    DeepseekV3RotaryEmbedding,
)

import attn_core as ac

DIMS = dict(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=6, v_head_dim=10)
HIDDEN, HEADS = 32, 4


def make_mla(q_lora_rank=None, rope_interleave=True, seed=0) -> ac.MultiHeadLatentAttention:
    torch.manual_seed(seed)
    mla = ac.MultiHeadLatentAttention(HIDDEN, HEADS, q_lora_rank=q_lora_rank, rope_interleave=rope_interleave, **DIMS)
    with torch.no_grad():
        for p in mla.parameters():
            p.normal_(0.0, 0.3)  # RMSNorm weights too, so a wrong norm weight cannot hide behind ones
    return mla.to(F64).eval()


def hf_twin(mla: ac.MultiHeadLatentAttention) -> tuple[DeepseekV3Attention, DeepseekV3Config]:
    config = DeepseekV3Config(
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        q_lora_rank=mla.q_lora_rank,
        rope_interleave=mla.rope_interleave,
        attention_bias=False,
        **DIMS,
    )
    config._attn_implementation = "sdpa"  # stays in float64 (eager takes the softmax in float32)
    hf = DeepseekV3Attention(config, layer_idx=0).to(F64).eval()
    hf.load_state_dict(mla.state_dict(), strict=True)  # same names, no renaming
    return hf, config


def float64_cos_sin(length: int, rope_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    freqs = ac.rope_angles(range(length), rope_dim, base=base)  # (L, rope/2) float64
    emb = torch.cat([freqs, freqs], dim=-1)[None]  # (1, L, rope): HF's cat(freqs, freqs) layout
    return emb.cos(), emb.sin()


def causal4(length: int) -> torch.Tensor:
    return torch.ones(length, length, dtype=torch.bool).tril()[None, None]  # (1, 1, L, L)


@pytest.mark.parametrize("q_lora_rank", [None, 12])
@pytest.mark.parametrize("rope_interleave", [True, False])
@pytest.mark.parametrize("absorb", [False, True])
def test_matches_hugging_face(q_lora_rank, rope_interleave, absorb, monkeypatch):
    mla = make_mla(q_lora_rank, rope_interleave)
    hf, config = hf_twin(mla)
    x = randn(2, 7, HIDDEN, seed=1)  # (B, L, hidden)
    out, weights = mla(x, is_causal=True, absorb=absorb)  # (B, L, hidden), (B, H, L, L)
    assert weights.shape == (2, HEADS, 7, 7)

    # (1) HF as shipped: float32 RMSNorm (relative rounding 2^-24 per element) and float32 cos/sin. The error
    # passes through ~4 layers of products (norm -> kv_b -> scores -> o_proj) with O(10) terms each, so
    # 2^-24 * 4 * 64 ≈ 1.5e-5 relative to the output's scale is a safe bound; a real bug gives O(1).
    positions = torch.arange(7)[None].expand(2, -1)  # (B, L)
    shipped, _ = hf(x, DeepseekV3RotaryEmbedding(config)(x, positions), attention_mask=causal4(7))
    assert (out - shipped).abs().max() <= 2**-24 * 4 * 64 * shipped.abs().max()

    # (2) HF with the float32 round trips removed: exact to 1e-12.
    def rms64(self, h):
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    monkeypatch.setattr(DeepseekV3RMSNorm, "forward", rms64)
    exact, _ = hf(x, float64_cos_sin(7, DIMS["qk_rope_head_dim"]), attention_mask=causal4(7))
    torch.testing.assert_close(out, exact, rtol=0, atol=1e-12)


def textbook(mla: ac.MultiHeadLatentAttention, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Head by head, rotation matrices built explicitly, RMSNorm written out: no attn_core code used."""
    batch, length, _ = x.shape
    nope, rope, rank, vd = DIMS["qk_nope_head_dim"], DIMS["qk_rope_head_dim"], DIMS["kv_lora_rank"], DIMS["v_head_dim"]

    def rms(h, w):
        return w * h / torch.sqrt((h * h).mean(-1, keepdim=True) + 1e-6)

    def rotate(t):  # (B, L, rope): rotate the token at position m by R_m
        out = torch.empty_like(t)
        for m in range(length):
            r = torch.zeros(rope, rope, dtype=F64)
            for i in range(rope // 2):
                a, b = (2 * i, 2 * i + 1) if mla.rope_interleave else (i, i + rope // 2)
                angle = m * 10000.0 ** (-2 * i / rope)
                r[a, a], r[a, b], r[b, a], r[b, b] = math.cos(angle), -math.sin(angle), math.sin(angle), math.cos(angle)
            out[:, m] = t[:, m] @ r.T
        return out

    ckv = x @ mla.kv_a_proj_with_mqa.weight.T  # (B, L, rank + rope)
    c = rms(ckv[..., :rank], mla.kv_a_layernorm.weight)  # (B, L, rank)
    k_rope = rotate(ckv[..., rank:])  # (B, L, rope)
    q_all = x @ mla.q_proj.weight.T  # (B, L, H * (nope + rope))
    w_kv = mla.kv_b_proj.weight  # (H * (nope + v), rank)
    outs, weights = [], []
    for h in range(HEADS):
        qh = q_all[..., h * (nope + rope) : (h + 1) * (nope + rope)]  # (B, L, nope + rope)
        qh = torch.cat([qh[..., :nope], rotate(qh[..., nope:])], -1)  # (B, L, nope + rope)
        wh = w_kv[h * (nope + vd) : (h + 1) * (nope + vd)]  # (nope + v, rank)
        kh = torch.cat([c @ wh[:nope].T, k_rope], -1)  # (B, L, nope + rope)
        vh = c @ wh[nope:].T  # (B, L, v)
        s = (qh @ kh.transpose(1, 2)) / math.sqrt(nope + rope)  # (B, L, L)
        p = torch.softmax(s.masked_fill(~mask, -math.inf), -1)  # (B, L, L)
        outs.append(p @ vh)  # (B, L, v)
        weights.append(p)
    return torch.cat(outs, -1) @ mla.o_proj.weight.T, torch.stack(weights, 1)  # (B, L, hidden), (B, H, L, L)


@pytest.mark.parametrize("rope_interleave", [True, False])
@pytest.mark.parametrize("absorb", [False, True])
def test_matches_textbook_float64(rope_interleave, absorb):
    mla = make_mla(None, rope_interleave, seed=3)
    x = randn(2, 6, HIDDEN, seed=4)  # (B, L, hidden)
    mask = torch.rand(2, 6, 6, generator=torch.Generator().manual_seed(5)) < 0.6  # (B, L, L)
    mask[..., 0] = True  # every row sees a key
    expected_out, expected_w = textbook(mla, x, mask)
    out, weights = mla(x, mask[:, None], absorb=absorb)
    torch.testing.assert_close(out, expected_out, rtol=0, atol=1e-12)
    torch.testing.assert_close(weights, expected_w, rtol=0, atol=1e-12)


@pytest.mark.parametrize("q_lora_rank", [None, 12])
def test_absorbed_equals_naive(q_lora_rank):
    mla = make_mla(q_lora_rank, seed=6)
    x = randn(3, 5, HIDDEN, seed=7)  # (B, L, hidden)
    mask = torch.rand(3, 1, 5, 5, generator=torch.Generator().manual_seed(8)) < 0.5  # (B, 1, L, L)
    mask[0, 0, 2] = False  # a blind row: zero weights, zero attention output
    for kwargs in ({}, {"mask": mask}, {"is_causal": True}, {"mask": mask, "is_causal": True}):
        naive = mla(x, absorb=False, **kwargs)
        absorbed = mla(x, absorb=True, **kwargs)
        for a, b in zip(naive, absorbed, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    assert mla(x, mask, absorb=True)[1][0, :, 2].abs().max() == 0

    # Lq != Lk: 3 new tokens after a prefill of 4, causal bottom-right, with a per-head mask.
    head_mask = torch.rand(3, HEADS, 3, 7, generator=torch.Generator().manual_seed(9)) < 0.7  # (B, H, 3, 7)
    results = []
    for absorb in (False, True):
        cache = ac.KVCache()
        mla(x[:, :4], cache=cache, is_causal=True, absorb=absorb)
        results.append(mla(randn(3, 3, HIDDEN, seed=10), head_mask, is_causal=True, cache=cache, absorb=absorb))
    assert results[0][1].shape == (3, HEADS, 3, 7)
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


@pytest.mark.parametrize("absorb", [False, True])
@pytest.mark.parametrize("chunks", [(7,), (1,) * 7, (3, 1, 2, 1), (4, 3)])
def test_cached_decoding_equals_full_pass(absorb, chunks):
    mla = make_mla(12, seed=11)
    x = randn(2, 7, HIDDEN, seed=12)  # (B, L, hidden)
    full, full_w = mla(x, is_causal=True, absorb=absorb)  # (B, 7, hidden), (B, H, 7, 7)
    cache, start, pieces = ac.KVCache(initial_capacity=2), 0, []
    for n in chunks:
        out, w = mla(x[:, start : start + n], is_causal=True, cache=cache, absorb=absorb)  # (B, n, hidden)
        torch.testing.assert_close(w, full_w[:, :, start : start + n, : start + n], rtol=0, atol=1e-12)
        pieces.append(out)
        start += n
    torch.testing.assert_close(torch.cat(pieces, 1), full, rtol=0, atol=1e-12)
    # The cache holds the latent and the rotated shared key, nothing per head.
    assert cache.keys.shape == (2, 1, 7, DIMS["kv_lora_rank"])
    assert cache.values.shape == (2, 1, 7, DIMS["qk_rope_head_dim"])
    assert cache.nbytes == 2 * 7 * (DIMS["kv_lora_rank"] + DIMS["qk_rope_head_dim"]) * 8


def test_explicit_positions_match_default():
    mla = make_mla(seed=13)
    x = randn(2, 4, HIDDEN, seed=14)  # (B, L, hidden)
    shifted = mla(x, positions=torch.arange(5, 9))[0]  # (B, L, hidden)
    per_seq = mla(x, positions=torch.arange(5, 9).expand(2, -1))[0]  # (B, L, hidden)
    torch.testing.assert_close(shifted, per_seq, rtol=0, atol=1e-12)
    # Relative positions only: shifting every position changes no causal output (scores depend on m - n).
    torch.testing.assert_close(shifted, mla(x)[0], rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"kv_lora_rank": 0}, "kv_lora_rank must be a positive int"),
        ({"qk_rope_head_dim": 5}, "qk_rope_head_dim must be even"),
        ({"v_head_dim": 8.0}, "v_head_dim must be a positive int"),
        ({"q_lora_rank": -1}, "q_lora_rank"),
        ({"qk_nope_head_dim": True}, "qk_nope_head_dim must be a positive int"),
        ({"rope_base": -1.0}, "base must be"),
    ],
)
def test_bad_configs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ac.MultiHeadLatentAttention(HIDDEN, HEADS, **{**DIMS, **kwargs})


def test_bad_inputs_and_caches():
    mla = make_mla()
    with pytest.raises(ValueError, match=r"hidden_dim=32"):
        mla(randn(2, 3, 31))
    with pytest.raises(ValueError, match="positions must have shape"):
        mla(randn(2, 3, HIDDEN), positions=torch.arange(4))
    gqa_cache = ac.KVCache()
    ac.GroupedQueryAttention(HIDDEN, 4, 2, bias=False).double()(randn(2, 3, HIDDEN), cache=gqa_cache)
    with pytest.raises(ValueError, match="another layer"):
        mla(randn(2, 3, HIDDEN), cache=gqa_cache)
    foreign = ac.KVCache()
    foreign.update(randn(2, 4, 3, 8), randn(2, 4, 3, 8))  # filled by hand in a GQA layout
    with pytest.raises(ValueError, match="not the MLA layout"):
        mla(randn(2, 1, HIDDEN), cache=foreign)
    with pytest.raises(TypeError, match="KVCache"):
        mla(randn(2, 1, HIDDEN), cache={})


def test_bfloat16_and_gradients():
    mla = make_mla(12, seed=15)
    x = randn(1, 5, HIDDEN, seed=16)  # (B, L, hidden)
    expected = mla(x, is_causal=True)[0]  # (B, L, hidden) float64
    out = mla.to(torch.bfloat16)(x.to(torch.bfloat16), is_causal=True, absorb=True)[0]  # (B, L, hidden)
    assert out.dtype == torch.bfloat16
    # bf16 rounds each stored tensor to 8 bits (eps 2^-8); ~4 rounded stages (q/latent, scores, attention output,
    # o_proj), each at most ~2 eps relative (sums accumulate in float32): 2^-8 * 4 * 2 of the scale (measured 0.0065).
    assert (out.double() - expected).abs().max() <= 2**-8 * 4 * 2 * expected.abs().max()
    mla = mla.to(F64)
    x.requires_grad_(True)
    mla(x, is_causal=True, absorb=True)[0].sum().backward()
    grad_absorbed, x.grad = x.grad.clone(), None
    mla(x, is_causal=True)[0].sum().backward()
    torch.testing.assert_close(grad_absorbed, x.grad, rtol=0, atol=1e-12)
