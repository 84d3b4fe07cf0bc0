"""attn_core.positions.rope: apply_rope / rope_angles against Hugging Face's rotary code, and RoPE's properties.

References (installed with transformers, nothing downloaded):
- rotate-half layout: ``transformers.models.llama.modeling_llama.apply_rotary_pos_emb`` with the cos/sin of
  ``LlamaRotaryEmbedding``;
- interleaved layout: ``transformers.models.deepseek_v3.modeling_deepseek_v3.apply_rotary_pos_emb_interleave``.
  What we found: DeepSeek's helper takes its input in interleaved order (pairs ``(2i, 2i+1)``) but returns the
  rotated pairs in rotate-half order ``[x'_0, x'_2, ..., x'_1, x'_3, ...]`` (its docstring: "bit-identical to the
  de-interleaved rotate_half formulation"). So ``deepseek(x) == apply_rope(x, interleaved=True)[..., EVEN_ODD]``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from reference import F64, randn
from transformers import LlamaConfig
from transformers.models.deepseek_v3.modeling_deepseek_v3 import apply_rotary_pos_emb_interleave
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

import attn_core as ac

EPS32 = torch.finfo(torch.float32).eps  # 2^-23


def even_odd(head_dim: int) -> torch.Tensor:
    """The permutation interleaved -> rotate-half: features 0, 2, 4, ..., then 1, 3, 5, ..."""
    return torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))  # (D,)


def hf_cos_sin_float64(positions: torch.Tensor, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """LlamaRotaryEmbedding.forward's formula, written out in float64 (HF itself forces float32 angles)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=F64) / head_dim))  # (D/2,)
    freqs = positions[..., None].to(F64) * inv_freq  # (..., L, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (..., L, D)
    return emb.cos(), emb.sin()


def llama_rotary(head_dim: int, base: float) -> LlamaRotaryEmbedding:
    config = LlamaConfig(hidden_size=4 * head_dim, num_attention_heads=4, head_dim=head_dim, rope_theta=base)
    return LlamaRotaryEmbedding(config)


POSITION_CASES = {
    "from 0": lambda batch, length: torch.arange(length).expand(batch, length),
    "offset": lambda batch, length: torch.arange(1000, 1000 + length).expand(batch, length),
    "per sequence": lambda batch, length: torch.stack([torch.arange(length) + 7 * b for b in range(batch)]),
}


# ----------------------------------------------------------------------------- rotate-half == Hugging Face
@pytest.mark.parametrize("head_dim", [2, 8, 64, 128])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
@pytest.mark.parametrize("case", POSITION_CASES)
def test_rotate_half_equals_hf_apply_rotary_pos_emb_float64(head_dim, base, case):
    batch, heads, length = 2, 3, 5
    q = randn(batch, heads, length, head_dim, seed=1)  # (B, H, L, D)
    k = randn(batch, 1, length, head_dim, seed=2)  # (B, 1, L, D)
    position_ids = POSITION_CASES[case](batch, length)  # (B, L)
    cos, sin = hf_cos_sin_float64(position_ids, head_dim, base)  # (B, L, D) each
    q_hf, k_hf = apply_rotary_pos_emb(q, k, cos, sin)  # (B, H, L, D), (B, 1, L, D)
    positions = position_ids[:, None, :]  # (B, 1, L): broadcast over heads
    # Same angles, same operations: equal to the last bit in float64.
    assert torch.equal(ac.apply_rope(q, positions, base=base), q_hf)
    assert torch.equal(ac.apply_rope(k, positions, base=base), k_hf)


@pytest.mark.parametrize("head_dim", [2, 8, 64, 128])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_rotate_half_matches_llama_rotary_embedding_within_its_float32_angles(head_dim, base):
    """LlamaRotaryEmbedding computes inv_freq and position * inv_freq in float32 whatever the input dtype."""
    position_ids = torch.tensor([[0, 1, 5, 100, 2047]])  # (1, L)
    x = randn(1, 2, 5, head_dim, seed=3)  # (1, H, L, D)
    cos, sin = llama_rotary(head_dim, base)(x, position_ids)  # (1, L, D) each, float32 angles cast to float64
    x_hf, _ = apply_rotary_pos_emb(x, x, cos, sin)  # (1, H, L, D)
    # float32 angle p * f: inv_freq off by <= 1 ulp (pow, divide), the product by 1/2 ulp, f <= 1, so
    # |angle error| <= 1.5 p eps32; cos/sin evaluated in float32 add eps32/2. Bound each cos/sin by
    # (2 p + 1) eps32; an output x1 cos - x2 sin is then off by <= (|x1| + |x2|) that.
    max_pos = int(position_ids.max())
    atol = 2 * float(x.abs().max()) * (2 * max_pos + 1) * EPS32
    torch.testing.assert_close(ac.apply_rope(x, position_ids[:, None], base=base), x_hf, rtol=0, atol=atol)


def test_rope_angles_match_llama_inv_freq():
    for head_dim, base in ((8, 10000.0), (128, 500000.0)):
        angles = ac.rope_angles(torch.tensor(1), head_dim, base=base)  # (D/2,): position 1 = inv_freq
        assert angles.dtype == F64 and angles.shape == (head_dim // 2,)
        inv_freq = llama_rotary(head_dim, base).inv_freq  # (D/2,) float32
        torch.testing.assert_close(angles.float(), inv_freq, rtol=2 * EPS32, atol=0)


def test_rope_angles_shape_and_values():
    positions = torch.tensor([[0, 3], [10, 20]])  # (2, 2)
    angles = ac.rope_angles(positions, 6, base=100.0)  # (2, 2, 3)
    assert angles.shape == (2, 2, 3) and angles.dtype == F64
    expected = positions[..., None].double() * torch.tensor([1.0, 100.0 ** (-2 / 6), 100.0 ** (-4 / 6)], dtype=F64)
    torch.testing.assert_close(angles, expected, rtol=1e-15, atol=0)
    assert torch.equal(ac.rope_angles(range(4), 4), ac.rope_angles(torch.arange(4), 4))


# ----------------------------------------------------------------------------- interleaved == DeepSeek
@pytest.mark.parametrize("head_dim", [2, 8, 64])
@pytest.mark.parametrize("case", POSITION_CASES)
def test_interleaved_equals_deepseek_up_to_its_output_order(head_dim, case):
    batch, heads, length, base = 2, 2, 6, 10000.0
    q = randn(batch, heads, length, head_dim, seed=4)  # (B, H, L, D), interleaved pairs (2i, 2i+1)
    position_ids = POSITION_CASES[case](batch, length)  # (B, L)
    cos, sin = hf_cos_sin_float64(position_ids, head_dim, base)  # (B, L, D) each
    q_ds, _ = apply_rotary_pos_emb_interleave(q, q, cos, sin)  # (B, H, L, D), in rotate-half order
    ours = ac.apply_rope(q, position_ids[:, None], base=base, interleaved=True)  # (B, H, L, D), interleaved order
    assert torch.equal(ours[..., even_odd(head_dim)], q_ds)
    if head_dim > 2:  # the output order really differs: comparing without the permutation fails
        assert not torch.allclose(ours, q_ds)


@pytest.mark.parametrize("head_dim", [2, 4, 16])
def test_layouts_equal_up_to_the_pair_permutation(head_dim):
    x = randn(3, 7, head_dim, seed=5)  # (B, L, D), interleaved layout
    positions = torch.arange(40, 47)  # (L,)
    perm = even_odd(head_dim)  # interleaved -> rotate-half
    interleaved = ac.apply_rope(x, positions, interleaved=True)  # (B, L, D)
    half = ac.apply_rope(x[..., perm], positions)  # (B, L, D) in rotate-half layout
    assert torch.equal(interleaved[..., perm], half)
    assert torch.equal(interleaved, half[..., torch.argsort(perm)])


# ----------------------------------------------------------------------------- properties
@pytest.mark.parametrize("interleaved", [False, True])
def test_position_zero_is_the_identity(interleaved):
    x = randn(2, 5, 8, seed=6)  # (B, L, D)
    assert torch.equal(ac.apply_rope(x, [0] * 5, interleaved=interleaved), x)


@pytest.mark.parametrize("interleaved", [False, True])
def test_norm_of_every_pair_is_preserved(interleaved):
    x = randn(4, 9, 16, seed=7)  # (B, L, D)
    positions = torch.randint(0, 100_000, (4, 9), generator=torch.Generator().manual_seed(0))  # (B, L)
    rotated = ac.apply_rope(x, positions, interleaved=interleaved)  # (B, L, D)

    def pair_norms(t: torch.Tensor) -> torch.Tensor:
        t = t if interleaved else t[..., even_odd(16).argsort()]  # (B, L, D) in interleaved order
        return t.unflatten(-1, (8, 2)).norm(dim=-1)  # (B, L, D/2)

    torch.testing.assert_close(pair_norms(rotated), pair_norms(x), rtol=1e-14, atol=0)
    assert not torch.allclose(rotated, x)


@given(
    m=st.integers(-5_000, 5_000),
    n=st.integers(-5_000, 5_000),
    shift=st.integers(-5_000, 5_000),
    interleaved=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_score_depends_only_on_relative_position(m, n, shift, interleaved, seed):
    q, k = randn(2, 8, seed=seed).unbind(0)  # (D,) each

    def score(pos_q: int, pos_k: int) -> torch.Tensor:
        rq = ac.apply_rope(q[None], [pos_q], interleaved=interleaved)  # (1, D)
        rk = ac.apply_rope(k[None], [pos_k], interleaved=interleaved)  # (1, D)
        return (rq * rk).sum()  # ()

    # |angle| <= 10_000 rad; float64 angles are off by ~1e4 * 2^-53 ~ 1e-12 rad, scores by |q||k| times that.
    atol = 1e-10 * float(q.norm() * k.norm())
    torch.testing.assert_close(score(m + shift, n + shift), score(m, n), rtol=0, atol=atol)
    torch.testing.assert_close(score(m, n), score(0, n - m), rtol=0, atol=atol)


def test_score_changes_with_relative_position():
    """The property above is not vacuous: the score does move with m - n."""
    q, k = randn(2, 8, seed=8).unbind(0)  # (D,) each
    rk = ac.apply_rope(k[None], [0])  # (1, D)
    scores = torch.stack([(ac.apply_rope(q[None], [m]) * rk).sum() for m in range(4)])  # (4,)
    assert (scores.diff().abs() > 1e-3).all()


def test_float32_far_positions_have_no_angle_drift():
    """Angles in float64, only cos/sin cast: float32 x at position 50_000 stays within a few ulps."""
    x = randn(2, 4, 64, seed=9, dtype=torch.float32)  # (B, L, D)
    positions = torch.arange(50_000, 50_004)  # (L,)
    out = ac.apply_rope(x, positions)  # (B, L, D) float32
    assert out.dtype == torch.float32
    reference = ac.apply_rope(x.double(), positions)  # (B, L, D) float64 angles and arithmetic
    # cos/sin cast to float32: eps32/2 relative each; x1*cos, x2*sin rounded: eps32/2 relative each;
    # their difference rounded: eps32/2 of a result <= |x1| + |x2|. Total <= 1.5 eps32 (|x1| + |x2|).
    atol = 1.5 * EPS32 * 2 * float(x.abs().max())
    torch.testing.assert_close(out, reference.float(), rtol=0, atol=atol)
    # The tolerance has teeth: Llama's float32 angles (50_000 * 2^-24 ~ 3e-3 rad off) fail it.
    cos, sin = llama_rotary(64, 10000.0)(x, positions[None])  # (1, L, D) each
    x_hf, _ = apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=0)  # (B, L, D)
    assert (x_hf.double() - reference).abs().max() > 10 * atol


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_shape_and_dtype_kept(dtype):
    x = randn(2, 3, 5, 8, seed=10).to(dtype)  # (B, H, L, D)
    out = ac.apply_rope(x, range(5))  # (B, H, L, D)
    assert out.shape == x.shape and out.dtype == dtype
    torch.testing.assert_close(out.double(), ac.apply_rope(x.double(), range(5)), rtol=0.02, atol=0.02)


def test_positions_as_python_sequences_and_broadcasting():
    x = randn(2, 3, 4, 6, seed=11)  # (B, H, L, D)
    expected = ac.apply_rope(x, torch.arange(4))  # (B, H, L, D)
    assert torch.equal(ac.apply_rope(x, range(4)), expected)
    assert torch.equal(ac.apply_rope(x, [0, 1, 2, 3]), expected)
    assert torch.equal(ac.apply_rope(x, torch.arange(4, dtype=torch.int32)), expected)
    assert torch.equal(ac.apply_rope(x, torch.arange(4).expand(2, 1, 4)), expected)  # (B, 1, L)
    per_sequence = torch.tensor([[0, 1, 2, 3], [5, 6, 7, 8]])[:, None]  # (B, 1, L)
    out = ac.apply_rope(x, per_sequence)  # (B, H, L, D)
    assert torch.equal(out[1], ac.apply_rope(x[1], range(5, 9)))
    assert torch.equal(ac.apply_rope(x[0, 0, 0], 3), ac.apply_rope(x[0, 0, :1], [3])[0])  # one vector, one position


def test_gradients_flow_through_the_rotation():
    x = randn(1, 3, 4, seed=12).requires_grad_()  # (B, L, D)
    assert torch.autograd.gradcheck(lambda t: ac.apply_rope(t, [2, 7, 11], interleaved=True), (x,))


# ----------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize(
    "positions, dtype_name",
    [
        (torch.arange(4.0), "torch.float32"),
        (torch.arange(4, dtype=F64), "torch.float64"),
        (torch.ones(4, dtype=torch.bool), "torch.bool"),
        ([0.0, 1.0, 2.0, 3.0], "torch.float32"),
    ],
)
def test_non_integer_positions_raise_type_error(positions, dtype_name):
    with pytest.raises(TypeError, match=rf"integers.*{dtype_name}.*\.long\(\)"):
        ac.apply_rope(randn(4, 8), positions)
    with pytest.raises(TypeError, match=rf"{dtype_name}.*\.long\(\)"):
        ac.rope_angles(positions, 8)


def test_unconvertible_positions_raise_type_error():
    with pytest.raises(TypeError, match="positions must be an integer tensor or a sequence of ints"):
        ac.apply_rope(randn(2, 4), ["a", "b"])


@pytest.mark.parametrize(
    "x_shape, positions_shape",
    [((2, 5, 8), (4,)), ((2, 5, 8), (3, 5)), ((5, 8), (2, 5)), ((2, 3, 5, 8), (2, 5))],
)
def test_positions_that_do_not_broadcast_name_both_shapes(x_shape, positions_shape):
    x = randn(*x_shape)  # (..., L, D)
    positions = torch.zeros(positions_shape, dtype=torch.long)
    shape_text = str(tuple(positions_shape)).replace("(", r"\(").replace(")", r"\)")
    with pytest.raises(ValueError, match=rf"positions of shape {shape_text} do not broadcast.*x is"):
        ac.apply_rope(x, positions)


def test_odd_head_dim_raises():
    with pytest.raises(ValueError, match=r"last dimension must be even.*\(2, 5, 7\).*D = 7"):
        ac.apply_rope(randn(2, 5, 7), range(5))
    for head_dim in (7, 0, True, 8.0):
        with pytest.raises(ValueError, match="head_dim must be an even int"):
            ac.rope_angles(range(5), head_dim)


@pytest.mark.parametrize("base", [0, -1.0, float("nan"), float("inf"), True, "10000", None])
def test_bad_base_raises(base):
    with pytest.raises(ValueError, match="base must be a finite number > 0"):
        ac.apply_rope(randn(2, 4), range(2), base=base)
    with pytest.raises(ValueError, match="base must be a finite number > 0"):
        ac.rope_angles(range(2), 4, base=base)


@pytest.mark.parametrize("x", [torch.arange(8).view(2, 4), [[0.0, 1.0]], torch.zeros(())])
def test_x_must_be_a_floating_tensor(x):
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor of shape \(\.\.\., L, D\)"):
        ac.apply_rope(x, range(2))


def test_public_names():
    assert {"apply_rope", "rope_angles"} <= set(ac.__all__)
    from attn_core.positions import rope

    assert ac.apply_rope is rope.apply_rope and ac.rope_angles is rope.rope_angles
