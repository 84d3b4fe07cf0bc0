"""MultiHeadLatentAttention at its smallest sizes and with broadcast positions: every dimension may be 1
(qk_rope_head_dim 2, the smallest even one), and ``(1, Lq)`` positions serve a whole batch, as ``(Lq,)`` do.
Compared with the module's own naive path, the absorbed path and a hand-written float64 reference.
"""

from __future__ import annotations

import pytest
import torch
from reference import F64, randn

import attn_core as ac

ONES = dict(hidden_dim=1, num_heads=1, kv_lora_rank=1, qk_nope_head_dim=1, qk_rope_head_dim=2, v_head_dim=1)


def make(seed: int = 0, **overrides) -> ac.MultiHeadLatentAttention:
    torch.manual_seed(seed)
    kwargs = {**ONES, **overrides}
    mla = ac.MultiHeadLatentAttention(kwargs.pop("hidden_dim"), kwargs.pop("num_heads"), **kwargs)
    with torch.no_grad():
        for p in mla.parameters():
            p.normal_(0.0, 0.5)
    return mla.to(F64).eval()


def reference(mla: ac.MultiHeadLatentAttention, x: torch.Tensor) -> torch.Tensor:
    """Causal MLA written out: per head, keys [W_UK c, rope(k)], values W_UV c, softmax over keys <= query."""
    batch, length, _ = x.shape
    heads, nope, rope, v_dim = mla.num_heads, mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim
    q = mla.q_proj(x) if mla.q_lora_rank is None else mla.q_b_proj(mla.q_a_layernorm(mla.q_a_proj(x)))
    q = q.view(batch, length, heads, nope + rope).transpose(1, 2)  # (B, H, L, nope + rope)
    latent, k_rope = mla.kv_a_proj_with_mqa(x).split([mla.kv_lora_rank, rope], dim=-1)  # (B, L, r), (B, L, rope)
    latent = mla.kv_a_layernorm(latent)  # (B, L, r)
    positions = torch.arange(length)  # (L,)
    q_rope = ac.apply_rope(q[..., nope:], positions, base=mla.rope_base, interleaved=mla.rope_interleave)
    k_rope = ac.apply_rope(k_rope[:, None], positions, base=mla.rope_base, interleaved=mla.rope_interleave)
    kv = mla.kv_b_proj(latent).view(batch, length, heads, nope + v_dim).transpose(1, 2)  # (B, H, L, nope + v)
    k = torch.cat([kv[..., :nope], k_rope.expand(-1, heads, -1, -1)], dim=-1)  # (B, H, L, nope + rope)
    q = torch.cat([q[..., :nope], q_rope], dim=-1)  # (B, H, L, nope + rope)
    scores = q @ k.transpose(-2, -1) * mla.scale  # (B, H, L, L)
    scores = scores.masked_fill(~ac.causal_mask(length), float("-inf"))  # (B, H, L, L)
    out = scores.softmax(-1) @ kv[..., nope:]  # (B, H, L, v)
    return mla.o_proj(out.transpose(1, 2).reshape(batch, length, heads * v_dim))  # (B, L, hidden)


@pytest.mark.parametrize(
    "overrides",
    [{}, dict(q_lora_rank=1), dict(hidden_dim=6, num_heads=3), dict(kv_lora_rank=5, v_head_dim=1)],
    ids=["all-ones", "q_lora_rank-1", "heads-3", "v-1"],
)
@pytest.mark.parametrize("absorb", [False, True], ids=["naive", "absorbed"])
def test_dimensions_of_one(overrides, absorb):
    mla = make(**overrides)
    x = randn(2, 5, mla.hidden_dim, seed=1)  # (B, L, hidden)
    out, weights = mla(x, is_causal=True, absorb=absorb)
    assert out.shape == x.shape and weights.shape == (2, mla.num_heads, 5, 5)
    torch.testing.assert_close(out, reference(mla, x), rtol=0, atol=1e-12)


@pytest.mark.parametrize("absorb", [False, True], ids=["naive", "absorbed"])
def test_positions_of_shape_1_by_lq_serve_the_whole_batch(absorb):
    mla = make(hidden_dim=8, num_heads=2, kv_lora_rank=3, qk_rope_head_dim=4, v_head_dim=2)
    x = randn(3, 4, 8, seed=2)  # (B=3, L, hidden)
    positions = torch.tensor([[5, 6, 7, 8]])  # (1, Lq)
    out, _ = mla(x, is_causal=True, positions=positions, absorb=absorb)
    same, _ = mla(x, is_causal=True, positions=positions[0], absorb=absorb)  # (Lq,)
    per_row, _ = mla(x, is_causal=True, positions=positions.expand(3, -1), absorb=absorb)  # (B, Lq)
    torch.testing.assert_close(out, same, rtol=0, atol=1e-12)
    torch.testing.assert_close(out, per_row, rtol=0, atol=1e-12)
    with pytest.raises(
        ValueError, match=r"positions must have shape \(Lq,\) = \(4,\) or \(B, Lq\) = \(3, 4\), got \(2, 4\)"
    ):
        mla(x, positions=positions.expand(2, -1))


def test_rope_interleave_must_be_a_bool():
    with pytest.raises(ValueError, match=r"rope_interleave must be True or False, got 1"):
        make(rope_interleave=1)
