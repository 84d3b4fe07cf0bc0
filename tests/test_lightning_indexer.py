"""LightningIndexer: the same picks as Hugging Face's DeepseekV32Indexer (float64, its `.float()` made a no-op),
scores equal to a textbook loop (ReLU per head, head weights / sqrt(H) with no softmax, rotate-half RoPE on the
FIRST features, LayerNorm with bias) to 1e-12, no pick from the future, -1 for hidden keys, bad input refused."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import F64, randn
from transformers.models.deepseek_v32.configuration_deepseek_v32 import DeepseekV32Config
from transformers.models.deepseek_v32.modeling_deepseek_v32 import DeepseekV32Indexer

import attn_core as ac

HIDDEN, Q_RANK, HEADS, HEAD_DIM, ROPE = 24, 12, 4, 10, 6


def make_indexer(topk: int = 3, seed: int = 0) -> ac.LightningIndexer:
    torch.manual_seed(seed)
    indexer = ac.LightningIndexer(HIDDEN, Q_RANK, num_heads=HEADS, head_dim=HEAD_DIM, qk_rope_head_dim=ROPE, topk=topk)
    with torch.no_grad():
        for p in indexer.parameters():
            p.normal_(0.0, 0.4)  # LayerNorm weight and bias too
    return indexer.to(F64)


def hf_indices(indexer: ac.LightningIndexer, x, q_latent, visible, positions, monkeypatch) -> torch.Tensor:
    config = DeepseekV32Config(
        hidden_size=HIDDEN,
        q_lora_rank=Q_RANK,
        index_n_heads=HEADS,
        index_head_dim=HEAD_DIM,
        qk_rope_head_dim=ROPE,
        index_topk=indexer.topk,
    )
    hf = DeepseekV32Indexer(config, layer_idx=0).to(F64)
    hf.load_state_dict(indexer.state_dict(), strict=True)
    freqs = ac.rope_angles(positions, ROPE)  # (B, L, rope/2) float64
    emb = torch.cat([freqs, freqs], dim=-1)  # (B, L, rope)
    original_float = torch.Tensor.float
    with monkeypatch.context() as patch:  # HF's scores in float64 rather than float32
        patch.setattr(torch.Tensor, "float", lambda t: t if t.dtype == F64 else original_float(t))
        return hf(x, q_latent, (emb.cos(), emb.sin()), visible, None).long()  # (B, L, k)


def textbook_scores(indexer: ac.LightningIndexer, x, q_latent, positions) -> torch.Tensor:
    """Loops over heads, explicit rotation matrices on features 0..rope-1 in pairs (i, i + rope/2)."""
    batch, length, _ = x.shape

    def rotate_first(t, pos):  # (L, D) at positions pos (L,)
        out = t.clone()
        for m in range(t.shape[0]):
            for i in range(ROPE // 2):
                angle = int(pos[m]) * 10000.0 ** (-2 * i / ROPE)
                a, b = t[m, i], t[m, i + ROPE // 2]
                out[m, i], out[m, i + ROPE // 2] = (
                    a * math.cos(angle) - b * math.sin(angle),
                    b * math.cos(angle) + a * math.sin(angle),
                )
        return out

    scores = torch.zeros(batch, length, length, dtype=F64)
    ln = indexer.k_norm
    for b in range(batch):
        h = x[b] @ indexer.wk.weight.T  # (L, D)
        mean, var = h.mean(-1, keepdim=True), h.var(-1, unbiased=False, keepdim=True)
        k = rotate_first((h - mean) / torch.sqrt(var + 1e-6) * ln.weight + ln.bias, positions[b])  # (L, D)
        q_all = q_latent[b] @ indexer.wq_b.weight.T  # (L, H * D)
        w = x[b] @ indexer.weights_proj.weight.T / math.sqrt(HEADS)  # (L, H)
        for head in range(HEADS):
            q = rotate_first(q_all[:, head * HEAD_DIM : (head + 1) * HEAD_DIM], positions[b])  # (L, D)
            scores[b] += w[:, head : head + 1] * torch.relu(q @ k.T) / math.sqrt(HEAD_DIM)  # (L, L)
    return scores


@pytest.mark.parametrize("topk", [1, 3, 7, 20])
def test_same_picks_as_hugging_face_and_textbook_scores(topk, monkeypatch):
    indexer = make_indexer(topk)
    x, q_latent = randn(2, 7, HIDDEN, seed=1), randn(2, 7, Q_RANK, seed=2)  # (B, L, hidden), (B, L, q_rank)
    positions = torch.stack([torch.arange(7), torch.arange(5, 12)])  # (B, L): the second one starts at 5
    mask = torch.ones(2, 1, 7, 7, dtype=torch.bool).tril()  # (B, 1, L, L)
    mask[1, 0, 3:, 1] = False  # a key some queries may not see
    indices, scores = indexer(x, q_latent, mask, positions=positions)
    assert indices.dtype == torch.int64 and indices.shape == (2, 7, min(topk, 7))
    expected = textbook_scores(indexer, x, q_latent, positions).masked_fill(~mask[:, 0], -math.inf)
    torch.testing.assert_close(scores, expected, rtol=0, atol=1e-12)
    hf = hf_indices(indexer, x, q_latent, mask[:, 0], positions, monkeypatch)  # HF may pick hidden keys
    picked = indices >= 0
    assert torch.equal(indices[picked], hf[picked])  # the same keys in the same order, best first
    visible_count = mask[:, 0].sum(-1, keepdim=True)  # (B, L, 1)
    slot = torch.arange(indices.shape[-1])  # (k,)
    assert torch.equal(picked, slot < visible_count)  # n visible keys -> n picks, then -1s


@settings(max_examples=25, deadline=None)
@given(length=st.integers(1, 9), topk=st.integers(1, 10), seed=st.integers(0, 999))
def test_causal_picks_never_come_from_the_future(length, topk, seed):
    indexer = make_indexer(topk, seed=seed % 7)
    x, q_latent = randn(1, length, HIDDEN, seed=seed), randn(1, length, Q_RANK, seed=seed + 1)
    indices, scores = indexer(x, q_latent, is_causal=True)
    query = torch.arange(length)[None, :, None]  # (1, L, 1)
    assert bool((indices <= query).all())
    assert torch.equal(indices >= 0, torch.arange(min(topk, length)) <= query)  # query i sees i + 1 keys
    assert bool(torch.isinf(scores).eq(torch.ones(length, length, dtype=torch.bool).triu(1)).all())
    best = scores.gather(-1, indices.clamp(min=0)).masked_fill(indices < 0, -math.inf)  # (1, L, k)
    assert bool((best[..., :-1] >= best[..., 1:]).all())  # best first


def test_head_weights_have_no_softmax_and_scores_follow_x_dtype():
    indexer = make_indexer(3)
    x, q_latent = randn(1, 5, HIDDEN, seed=3), randn(1, 5, Q_RANK, seed=4)
    _, scores = indexer(x, q_latent)
    with torch.no_grad():
        indexer.weights_proj.weight.mul_(2.0)  # a softmax over heads would not change; a linear weighting doubles
    _, doubled = indexer(x, q_latent)
    torch.testing.assert_close(doubled, 2 * scores, rtol=1e-14, atol=0)
    _, scores32 = indexer.float()(x.float(), q_latent.float())
    assert scores32.dtype == torch.float32


def test_indexer_rope_is_rotate_half_on_the_first_features():
    """A shift of every position by the same amount leaves the scores unchanged (relative positions);
    interleaved pairs or the last features would change them for this layer's weights."""
    indexer = make_indexer(3)
    x, q_latent = randn(1, 6, HIDDEN, seed=5), randn(1, 6, Q_RANK, seed=6)
    _, scores = indexer(x, q_latent)
    _, shifted = indexer(x, q_latent, positions=torch.arange(100, 106))
    torch.testing.assert_close(shifted, scores, rtol=0, atol=1e-12)
    positions = torch.arange(6)[None]  # (1, L)
    torch.testing.assert_close(scores, textbook_scores(indexer, x, q_latent, positions), rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(qk_rope_head_dim=5), "even"),
        (dict(qk_rope_head_dim=12), "at most head_dim"),
        (dict(topk=0), "topk"),
        (dict(num_heads=0), "num_heads"),
        (dict(rope_base=-1.0), "base"),
    ],
)
def test_bad_settings_are_refused(kwargs, words):
    settings_ = dict(num_heads=HEADS, head_dim=HEAD_DIM, qk_rope_head_dim=ROPE, topk=2) | kwargs
    with pytest.raises(ValueError, match=words):
        ac.LightningIndexer(HIDDEN, Q_RANK, **settings_)


def test_bad_inputs_are_refused():
    indexer = make_indexer(2)
    x, q_latent = randn(2, 4, HIDDEN), randn(2, 4, Q_RANK)
    with pytest.raises(ValueError, match="hidden_dim"):
        indexer(x[..., :5], q_latent)
    with pytest.raises(ValueError, match="q_latent"):
        indexer(x, q_latent[:, :3])
    with pytest.raises(ValueError, match="does not broadcast"):  # one set of picks for all heads
        indexer(x, q_latent, torch.ones(2, 2, 4, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="boolean"):
        indexer(x, q_latent, torch.ones(4, 4))
    with pytest.raises(ValueError, match="positions"):
        indexer(x, q_latent, positions=torch.arange(5))
    with pytest.raises(TypeError, match="is_causal"):
        indexer(x, q_latent, is_causal=1)
