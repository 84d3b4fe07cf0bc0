"""RoPE's module-level cos/sin cache and RoPE's edge inputs.

The cache (``attn_core.positions.rope._COS_SIN_CACHE``) must never change a result, stay bounded however long a
generation runs, stay off while torch.compile traces (its lookup reads position values), and never hand a
tensor made under ``torch.inference_mode()`` to a later training step (such tensors cannot be saved for
backward). Plus the edges: no positions at all, ``rope_angles``' defaults, bases in (0, 1], far and negative
positions, and a meta tensor.
"""

from __future__ import annotations

import math

import pytest
import torch
from reference import F64, randn

import attn_core as ac
from attn_core import rope


@pytest.fixture(autouse=True)
def empty_cache():
    rope._COS_SIN_CACHE.clear()
    yield
    rope._COS_SIN_CACHE.clear()


@pytest.mark.parametrize("layer", [False, True], ids=["apply_rope", "layer"])
def test_training_after_inference_mode_at_the_same_positions(layer):
    """Evaluate under inference_mode, then train at the same positions: backward works and gradients equal
    those of a process that never evaluated (before the fix: 'Inference tensors cannot be saved for backward')."""
    torch.manual_seed(0)
    if layer:
        module = ac.GroupedQueryAttention(8, 2, 1, rope_base=100.0).double()
        x = randn(1, 5, 8, seed=1)  # (B, L, hidden)

        def run(t):
            return module(t, is_causal=True)[0]  # (B, L, hidden)
    else:
        x = randn(1, 2, 5, 8, seed=1)  # (B, H, L, D)

        def run(t):
            return ac.apply_rope(t, range(5))  # (B, H, L, D)

    leaf = x.clone().requires_grad_()
    run(leaf).square().sum().backward()
    expected = leaf.grad.clone()  # (same shape as x)
    rope._COS_SIN_CACHE.clear()
    with torch.inference_mode():
        run(x)
    leaf = x.clone().requires_grad_()
    run(leaf).square().sum().backward()
    torch.testing.assert_close(leaf.grad, expected, rtol=0, atol=0)


def test_cache_is_bounded_and_evicts_the_least_recently_used():
    x = randn(1, 1, 1, 4, seed=2)  # (B, H, L=1, D): one decode step per call
    for step in range(3 * rope._COS_SIN_CACHE_SIZE):  # a long generation: a new position every step
        ac.apply_rope(x, [step])
        assert len(rope._COS_SIN_CACHE) == min(step + 1, rope._COS_SIN_CACHE_SIZE)
    ac.apply_rope(x, [3 * rope._COS_SIN_CACHE_SIZE - rope._COS_SIN_CACHE_SIZE])  # the oldest held: now the newest
    ac.apply_rope(x, [10**6])  # evicts the then-oldest, not the one just used
    held = [key[1] for key in rope._COS_SIN_CACHE]
    assert held[-2:] == [(2 * rope._COS_SIN_CACHE_SIZE,), (10**6,)]
    assert (2 * rope._COS_SIN_CACHE_SIZE + 1,) not in held


def test_only_small_position_sets_are_cached_and_values_equal_a_fresh_computation():
    small, large = rope._COS_SIN_CACHE_MAX_POSITIONS, rope._COS_SIN_CACHE_MAX_POSITIONS + 1
    for length, cached in ((small, 1), (large, 0)):
        rope._COS_SIN_CACHE.clear()
        x = randn(1, length, 6, seed=3)  # (H, L, D)
        first = ac.apply_rope(x, range(length))
        again = ac.apply_rope(x, range(length))  # from the cache when cached
        assert len(rope._COS_SIN_CACHE) == cached
        assert torch.equal(first, again)
        angles = ac.rope_angles(range(length), 6)  # (L, 3) float64
        fresh = torch.cat((x[..., :3] * angles.cos() - x[..., 3:] * angles.sin(), x[..., 3:] * angles.cos()
                           + x[..., :3] * angles.sin()), dim=-1)  # fmt: skip
        torch.testing.assert_close(again, fresh, rtol=0, atol=0)


def test_cache_stays_off_while_compiling():
    """One graph, no break, and nothing cached (a lookup reads position values: 5 graphs and 4 breaks)."""
    x = randn(1, 2, 3, 8, seed=4)  # (B, H, L, D)
    positions = torch.arange(3)  # (L,)
    explanation = torch._dynamo.explain(lambda t, p: ac.apply_rope(t, p))(x, positions)
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0)
    assert len(rope._COS_SIN_CACHE) == 0
    compiled = torch.compile(lambda t, p: ac.apply_rope(t, p), backend="eager")
    torch.testing.assert_close(compiled(x, positions), ac.apply_rope(x, positions), rtol=0, atol=0)


def test_meta_tensors_pass_through():
    x = torch.empty(2, 3, 4, 8, device="meta")  # (B, H, L, D), no data
    out = ac.apply_rope(x, torch.arange(4, device="meta"))
    assert out.shape == x.shape and out.device.type == "meta" and len(rope._COS_SIN_CACHE) == 0


def test_no_positions():
    x = randn(2, 0, 4, seed=5)  # (H, L=0, D)
    for positions in ([], range(0), torch.arange(0)):
        out = ac.apply_rope(x, positions)
        assert out.shape == (2, 0, 4) and out.dtype == F64
    assert ac.rope_angles([], 4).shape == (0, 2)


def test_rope_angles_defaults_and_bases_in_zero_one():
    angles = ac.rope_angles(range(3), 4)  # (L, D/2) with the default base
    expected = torch.arange(3, dtype=F64)[:, None] * torch.tensor([1.0, 10000.0**-0.5], dtype=F64)  # (3, 2)
    torch.testing.assert_close(angles, expected, rtol=0, atol=0)
    for base in (1, 0.5):  # any finite base > 0: base 1 turns every pair one radian per position
        torch.testing.assert_close(
            ac.rope_angles([2], 4, base=base), torch.tensor([[2.0, 2.0 * base**-0.5]], dtype=F64), rtol=0, atol=1e-15
        )


@pytest.mark.parametrize("head_dim", [0, 3, -2, 2.0, True])
def test_rope_angles_head_dim_must_be_even_and_positive(head_dim):
    with pytest.raises(ValueError, match=f"head_dim must be an even int >= 2.*got {head_dim!r}"):
        ac.rope_angles(range(3), head_dim)


@pytest.mark.parametrize("interleaved", [False, True])
def test_negative_positions_rotate_backwards(interleaved):
    """R_{-m} = R_m^T: rotating by m, then by -m, gives back x."""
    x = randn(2, 5, 8, seed=6)  # (H, L, D)
    positions = torch.tensor([0, 3, 7, 100, 12345])  # (L,)
    forth = ac.apply_rope(x, positions, interleaved=interleaved)
    back = ac.apply_rope(forth, -positions, interleaved=interleaved)
    torch.testing.assert_close(back, x, rtol=0, atol=8 * torch.finfo(F64).eps * math.sqrt(8))


@pytest.mark.parametrize("position", [2**40 + 1, -(2**41), 2**63 - 1])
def test_positions_beyond_two_to_the_forty_raise(position):
    with pytest.raises(ValueError, match=rf"within ±2\^40.*magnitude {abs(position)}"):
        ac.apply_rope(randn(1, 3, 4, seed=7), [1, position, 2])
    ac.apply_rope(randn(1, 1, 4, seed=7), [2**40])  # the bound itself is fine
