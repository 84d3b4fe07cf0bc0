"""The chunked gated delta rule and linear attention with extreme gates and in half precision (issue #32, D1 and D7).

The chunked form used to compute its cumulative gates ``G = cumsum(g)`` and the decays ``exp(G_i − G_j)`` in the input
dtype. One ``g = −inf`` token made ``G_i − G_j = −inf − (−inf) = NaN`` for every later pair; in float16 a 64-token
chunk of ``g ≈ −1100`` overflowed ``G`` to ``−inf`` (past 65504) with the same NaN; and in bfloat16 the difference of
two large rounded sums cost ~10x the recurrence's error. The recurrence stayed finite and accurate in all three.

The references: the token-by-token recurrence (float64, the definition), and for half precision the float64 recurrence
on the *same rounded inputs*, so that what remains is the chunked form's own error: one rounding of the output to the
half dtype (at most ``u·|out|``, ``u`` its unit roundoff) plus the float32 arithmetic inside, bounded by
``chunk · u₃₂ · max|out|`` (sums of at most one chunk of terms of that size, each rounded once).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import attn_core as ac
from attn_core.linear.linear_attention import gated_delta_rule, linear_attention

F64_TOL = dict(rtol=0, atol=1e-12)  # float64, sums of O(10) terms of size O(1): rounding ~1e-15, margin 1000x
U32 = torch.finfo(torch.float32).eps / 2  # float32 unit roundoff, 2^-24


def inputs(length, *, dtype=torch.float64, batch=1, heads=2, dim=8, seed=0, gate=-0.5):
    """q, k (unit rows), v, g in [2·gate, 0], beta in (0, 1): (B, H, L, D) / (B, H, L), computed in float64."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, length, dim, generator=gen, dtype=torch.float64)  # (B, H, L, D)
    k = F.normalize(torch.randn(batch, heads, length, dim, generator=gen, dtype=torch.float64), dim=-1)  # (B, H, L, D)
    v = torch.randn(batch, heads, length, dim, generator=gen, dtype=torch.float64)  # (B, H, L, D)
    g = 2 * gate * torch.rand(batch, heads, length, generator=gen, dtype=torch.float64)  # (B, H, L)
    beta = torch.rand(batch, heads, length, generator=gen, dtype=torch.float64)  # (B, H, L)
    return [t.to(dtype) for t in (q, k, v, g, beta)]


def linear_recurrence(q, k, v, g):
    """``S ← exp(g_t) S + k_t v_tᵀ``, ``o_t = Sᵀq_t / sqrt(D)``, token by token (the definition)."""
    state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])  # (B, H, Dk, Dv)
    outputs = []
    for t in range(q.shape[2]):
        state = state * g[:, :, t, None, None].exp() + k[:, :, t, :, None] * v[:, :, t, None, :]  # (B, H, Dk, Dv)
        outputs.append(torch.einsum("bhkv,bhk->bhv", state, q[:, :, t]) / math.sqrt(q.shape[-1]))  # (B, H, Dv)
    return torch.stack(outputs, dim=2), state  # (B, H, L, Dv), (B, H, Dk, Dv)


@pytest.mark.parametrize("where", [0, 1, 3, 5])
@pytest.mark.parametrize("chunk_size", [2, 4, 8])
def test_a_minus_inf_gate_is_a_full_reset_not_nan(where, chunk_size):
    """g = −inf at one token: the state before it is forgotten. Chunked = recurrence, finite."""
    q, k, v, g, beta = inputs(7)
    g[:, :, where] = -math.inf
    expected, expected_state = gated_delta_rule(q, k, v, g, beta)
    assert expected.isfinite().all()
    out, state = gated_delta_rule(q, k, v, g, beta, chunk_size=chunk_size)
    torch.testing.assert_close(out, expected, **F64_TOL)
    torch.testing.assert_close(state, expected_state, **F64_TOL)
    lin_expected, lin_state = linear_recurrence(q, k, v, g)
    lin_out, lin_final = linear_attention(q, k, v, g)
    torch.testing.assert_close(lin_out, lin_expected, **F64_TOL)
    torch.testing.assert_close(lin_final, lin_state, **F64_TOL)


def test_the_reviews_minus_inf_example():
    """g = [0, −inf, 0, 0]: the tokens after the reset still decay by exp(0) = 1 between each other."""
    q, k, v, _, beta = inputs(4, heads=1)
    g = torch.tensor([0.0, -math.inf, 0.0, 0.0], dtype=torch.float64).view(1, 1, 4)  # (B, H, L)
    expected, _ = gated_delta_rule(q, k, v, g, beta)
    out, _ = gated_delta_rule(q, k, v, g, beta, chunk_size=4)
    torch.testing.assert_close(out, expected, **F64_TOL)
    torch.testing.assert_close(linear_attention(q, k, v, g)[0], linear_recurrence(q, k, v, g)[0], **F64_TOL)


def half_bound(reference: torch.Tensor, dtype: torch.dtype, chunk: int) -> torch.Tensor:
    """Per element: one rounding of the output to ``dtype`` plus the float32 arithmetic of one chunk."""
    unit_roundoff = torch.finfo(dtype).eps / 2  # 2^-8 bfloat16, 2^-11 float16
    return unit_roundoff * reference.abs() + chunk * U32 * reference.abs().max()


def test_float16_chunk_of_very_negative_gates_stays_finite():
    """g = −1100 per token over a 64-token chunk: Σ g = −70400 overflows float16 (max 65504) but not float32."""
    q, k, v, _, beta = inputs(64, dtype=torch.float16)
    g = torch.full((1, 2, 64), -1100.0, dtype=torch.float16)  # (B, H, L)
    out, state = gated_delta_rule(q, k, v, g, beta, chunk_size=64)
    assert out.dtype == state.dtype == torch.float16
    assert out.isfinite().all() and state.isfinite().all()
    reference, _ = gated_delta_rule(*(t.double() for t in (q, k, v, g, beta)))  # (B, H, L, Dv)
    assert ((out.double() - reference).abs() <= half_bound(reference, torch.float16, 64)).all()
    lin_out, _ = linear_attention(q, k, v, g)
    lin_reference, _ = linear_recurrence(*(t.double() for t in (q, k, v, g)))
    assert ((lin_out.double() - lin_reference).abs() <= half_bound(lin_reference, torch.float16, 64)).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("seed", [0, 1])
def test_half_precision_chunked_costs_one_rounding(dtype, seed):
    """g ≈ −2 per token (the review's case): the chunked output is the exact result rounded once.

    Before the fix bfloat16 missed by up to 0.17 (max |out| ≈ 1.4), 20-40x the bound, and 10x the recurrence's error.
    """
    q, k, v, g, beta = inputs(64, dtype=dtype, batch=2, dim=16, seed=seed, gate=-2.0)
    reference, _ = gated_delta_rule(*(t.double() for t in (q, k, v, g, beta)))  # (B, H, L, Dv)
    out, _ = gated_delta_rule(q, k, v, g, beta, chunk_size=64)
    assert out.dtype == dtype
    assert ((out.double() - reference).abs() <= half_bound(reference, dtype, 64)).all()


# ---------------------------------------------------------------- D7: arguments that were not validated
def test_scale_is_validated_as_in_the_other_kernels():
    q, k, v, g, beta = inputs(3)
    with pytest.raises(TypeError, match=r"scale must be a number.*got 'x' of type str"):
        gated_delta_rule(q, k, v, g, beta, scale="x")
    with pytest.raises(ValueError, match=r"scale must be finite, got nan"):
        gated_delta_rule(q, k, v, g, beta, scale=math.nan, chunk_size=2)
    with pytest.raises(TypeError, match=r"scale must be a number"):
        linear_attention(q, k, v, g, scale=torch.tensor(0.5))
    # legal neighbours, as for sdpa: 0 (every score 0), a numpy number, a negative number
    gated_delta_rule(q, k, v, g, beta, scale=0)
    linear_attention(q, k, v, g, scale=-1.0)


@pytest.mark.parametrize("bad", [5.0, 1.5, 1.0001, -0.1])
@pytest.mark.parametrize("chunk_size", [None, 2])
def test_beta_outside_zero_one_is_refused(bad, chunk_size):
    """beta = 5 used to give outputs growing 16x in 3 tokens, silently."""
    q, k, v, g, beta = inputs(3)
    beta[0, 1, 2] = bad
    with pytest.raises(ValueError, match=r"beta is the write strength, a learning rate in \[0, 1\]"):
        gated_delta_rule(q, k, v, g, beta, chunk_size=chunk_size)


def test_beta_at_its_bounds_is_legal():
    q, k, v, g, beta = inputs(3)
    for value in (0.0, 0.5, 1.0):  # 0 writes nothing; 1 replaces what the key read
        out, _ = gated_delta_rule(q, k, v, g, torch.full_like(beta, value), chunk_size=2)
        assert out.isfinite().all()


def test_linear_attention_with_a_beta_says_which_function_takes_one():
    q, k, v, g, beta = inputs(3)
    with pytest.raises(TypeError, match=r"takes no beta.*gated_delta_rule\(q, k, v, g, beta\)"):
        linear_attention(q, k, v, g, beta)


def test_gated_deltanet_refuses_integer_or_mismatched_x_by_name():
    torch.manual_seed(0)
    layer = ac.GatedDeltaNet(16, num_k_heads=2, num_v_heads=2, head_k_dim=4, head_v_dim=4)
    with pytest.raises(TypeError, match=r"x must be a floating-point tensor.*got torch.int64.*embedding"):
        layer(torch.ones(1, 3, 16, dtype=torch.long))
    with pytest.raises(TypeError, match=r"x is torch.float64 but this layer's weights are torch.float32"):
        layer(torch.ones(1, 3, 16, dtype=torch.float64))


def test_gated_deltanet_cache_is_unchanged_by_a_failed_call(monkeypatch):
    """The conv state used to be stored before the rule ran: an error (or an interrupt) in between left the cache one
    call ahead in its conv and behind in its state. Now both are stored together, after the computation."""
    torch.manual_seed(0)
    layer = ac.GatedDeltaNet(16, num_k_heads=2, num_v_heads=2, head_k_dim=4, head_v_dim=4).double()
    x = torch.randn(1, 7, 16, dtype=torch.float64)  # (B, L, hidden)
    expected = layer(x)  # (B, L, hidden): one pass
    cache = ac.LinearAttentionCache()
    first = layer(x[:, :3], cache=cache)
    before = (cache.conv_state.clone(), cache.recurrent_state.clone(), len(cache))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(layer, "state_update", interrupted)
    with pytest.raises(KeyboardInterrupt):
        layer(x[:, 3:], cache=cache)
    monkeypatch.undo()
    assert torch.equal(cache.conv_state, before[0]) and torch.equal(cache.recurrent_state, before[1])
    assert len(cache) == before[2]
    rest = layer(x[:, 3:], cache=cache)  # the call repeated after the failure continues the sequence exactly
    torch.testing.assert_close(torch.cat([first, rest], dim=1), expected, **F64_TOL)
