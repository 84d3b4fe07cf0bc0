"""gated_delta_rule and linear_attention against Hugging Face's Qwen3.5 kernels, a textbook loop, and their promises.

Hugging Face's ``torch_recurrent_gated_delta_rule`` / ``torch_chunk_gated_delta_rule`` cast everything to float32
inside. So the comparison runs twice: (1) HF as shipped, with a bound derived from float32 rounding: eps 2^-24 per
operation, accumulated over L sequential state updates each summing Dk products, so 2^-24 · L · Dk relative to the
output's scale (measured 8e-7 absolute at L = 37, Dk = 8; bound 1.8e-5 · scale); (2) HF with ``torch.float32`` read
as float64 in its module, which must agree to 1e-12 (float64 eps 2^-53 times the same growth is ~1e-14; a real
mistake is O(1)).
"""

from __future__ import annotations

import contextlib
import math
import types

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import randn

import attn_core as ac
from attn_core.linear.gated_deltanet import GatedDeltaNet, LinearAttentionCache
from attn_core.linear.linear_attention import gated_delta_rule, linear_attention

F64 = torch.float64
EXACT = dict(rtol=0, atol=1e-12)


def hf_module():
    from transformers.models.qwen3_5 import modeling_qwen3_5

    return modeling_qwen3_5


@contextlib.contextmanager
def hf_float64(monkeypatch):
    """Inside: HF's Qwen3.5 module reads ``torch.float32`` as float64 and ``Tensor.float()`` keeps float64."""
    module = hf_module()
    proxy = types.SimpleNamespace(**{name: getattr(torch, name) for name in dir(torch) if not name.startswith("__")})
    proxy.float32 = torch.float64
    with monkeypatch.context() as patch:
        patch.setattr(module, "torch", proxy)
        patch.setattr(torch.Tensor, "float", lambda self, *args, **kwargs: self.to(F64))
        yield module


def inputs(batch=2, hk=2, hv=4, length=37, dk=8, dv=5, seed=0, unit_keys=True):
    """q, k (B, Hk, L, Dk), v (B, Hv, L, Dv), g <= 0 and beta in (0, 1) (B, Hv, L), a state (B, Hv, Dk, Dv)."""
    q = randn(batch, hk, length, dk, seed=seed)  # (B, Hk, L, Dk)
    k = randn(batch, hk, length, dk, seed=seed + 1)  # (B, Hk, L, Dk)
    if unit_keys:  # as in the layer: the delta rule is a contraction only for |beta · |k|²| <= 2
        k = k / k.norm(dim=-1, keepdim=True)  # (B, Hk, L, Dk)
    v = randn(batch, hv, length, dv, seed=seed + 2)  # (B, Hv, L, Dv)
    g = -randn(batch, hv, length, seed=seed + 3).abs()  # (B, Hv, L)
    beta = torch.sigmoid(randn(batch, hv, length, seed=seed + 4))  # (B, Hv, L)
    state = randn(batch, hv, dk, dv, seed=seed + 5)  # (B, Hv, Dk, Dv)
    return q, k, v, g, beta, state


def to_hf(t):
    return t.transpose(1, 2)  # (B, H, L, ...) <-> (B, L, H, ...)


def textbook(q, k, v, g, beta, state, scale):
    """Per batch, head and token, with the erase written as a projection: S ← (I − β k kᵀ) exp(g) S + β k vᵀ."""
    group = v.shape[1] // k.shape[1]
    out = torch.zeros_like(v)  # (B, Hv, L, Dv)
    final = state.clone()  # (B, Hv, Dk, Dv)
    eye = torch.eye(k.shape[-1], dtype=k.dtype)  # (Dk, Dk)
    for b in range(v.shape[0]):
        for h in range(v.shape[1]):
            s = state[b, h].clone()  # (Dk, Dv)
            for t in range(v.shape[2]):
                kt, qt = k[b, h // group, t], q[b, h // group, t]  # (Dk,)
                s = (eye - beta[b, h, t] * torch.outer(kt, kt)) @ (math.exp(g[b, h, t]) * s)  # (Dk, Dv)
                s = s + beta[b, h, t] * torch.outer(kt, v[b, h, t])  # (Dk, Dv)
                out[b, h, t] = scale * s.T @ qt  # (Dv,)
            final[b, h] = s
    return out, final


@pytest.mark.parametrize("chunk_size", [None, 1, 5, 16, 64])
def test_matches_textbook(chunk_size):
    q, k, v, g, beta, state = inputs(length=23)
    expected, expected_state = textbook(q, k, v, g, beta, state, 1 / math.sqrt(8))
    out, final = gated_delta_rule(q, k, v, g, beta, chunk_size=chunk_size, initial_state=state)
    assert out.shape == (2, 4, 23, 5) and final.shape == (2, 4, 8, 5) and out.dtype == final.dtype == F64
    torch.testing.assert_close(out, expected, **EXACT)
    torch.testing.assert_close(final, expected_state, **EXACT)


@pytest.mark.parametrize("chunk_size", [None, 1, 7, 16, 64])
def test_matches_hugging_face(chunk_size, monkeypatch):
    q, k, v, g, beta, state = inputs(length=37)
    out, final = gated_delta_rule(q, k, v, g, beta, chunk_size=chunk_size, initial_state=state)

    def hf_run(module):
        args = (to_hf(q), to_hf(k), to_hf(v), to_hf(g), to_hf(beta))
        if chunk_size is None:
            theirs, state_out = module.torch_recurrent_gated_delta_rule(
                *args, initial_state=state, output_final_state=True
            )
        else:
            theirs, state_out = module.torch_chunk_gated_delta_rule(
                *args, chunk_size=chunk_size, initial_state=state, output_final_state=True
            )
        return to_hf(theirs), state_out

    shipped, shipped_state = hf_run(hf_module())  # float32 inside
    bound = 2**-24 * 37 * 8 * shipped.abs().max()
    assert (out - shipped).abs().max() <= bound and (final - shipped_state).abs().max() <= bound * 10
    with hf_float64(monkeypatch) as module:
        exact, exact_state = hf_run(module)
    assert exact.dtype == F64
    torch.testing.assert_close(out, exact, **EXACT)
    torch.testing.assert_close(final, exact_state, **EXACT)


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 2),
    hk=st.integers(1, 2),
    group=st.integers(1, 3),
    length=st.integers(0, 40),
    dk=st.integers(1, 6),
    dv=st.integers(1, 4),
    chunk_size=st.integers(1, 20),
    split=st.floats(0, 1),
    seed=st.integers(0, 1000),
)
def test_chunked_equals_recurrence_and_state_carries(batch, hk, group, length, dk, dv, chunk_size, split, seed):
    q, k, v, g, beta, state = inputs(batch, hk, hk * group, length, dk, dv, seed=seed)
    out, final = gated_delta_rule(q, k, v, g, beta, initial_state=state)
    chunked, chunked_final = gated_delta_rule(q, k, v, g, beta, chunk_size=chunk_size, initial_state=state)
    torch.testing.assert_close(chunked, out, **EXACT)
    torch.testing.assert_close(chunked_final, final, **EXACT)
    # Two calls carrying final_state = one call (the second may be chunked differently).
    cut = int(split * length)
    first, mid = gated_delta_rule(q[:, :, :cut], k[:, :, :cut], v[:, :, :cut], g[..., :cut], beta[..., :cut],
                                  initial_state=state)  # fmt: skip
    second, end = gated_delta_rule(q[:, :, cut:], k[:, :, cut:], v[:, :, cut:], g[..., cut:], beta[..., cut:],
                                   chunk_size=chunk_size, initial_state=mid)  # fmt: skip
    torch.testing.assert_close(torch.cat([first, second], dim=2), out, **EXACT)
    torch.testing.assert_close(end, final, **EXACT)


@pytest.mark.parametrize("chunk_size", [None, 4])
def test_future_tokens_do_not_change_past_outputs(chunk_size):
    q, k, v, g, beta, state = inputs(length=12)
    out, _ = gated_delta_rule(q, k, v, g, beta, chunk_size=chunk_size, initial_state=state)
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    q2[:, :, 7:], k2[:, :, 7:], v2[:, :, 7:] = 5.0, -3.0, 9.0
    changed, _ = gated_delta_rule(q2, k2, v2, g, beta, chunk_size=chunk_size, initial_state=state)
    torch.testing.assert_close(changed[:, :, :7], out[:, :, :7], rtol=0, atol=0)
    assert not torch.allclose(changed[:, :, 7:], out[:, :, 7:])


@pytest.mark.parametrize("chunk_size", [None, 3])
def test_beta_zero_writes_nothing(chunk_size):
    q, k, v, g, _, state = inputs(length=9)
    out, final = gated_delta_rule(q, k, v, g, torch.zeros_like(g), chunk_size=chunk_size, initial_state=state)
    decay = g.cumsum(-1).exp()  # (B, Hv, L)
    torch.testing.assert_close(final, decay[..., -1, None, None] * state, **EXACT)
    reads = decay[..., None] * (q.repeat_interleave(2, dim=1) @ state) / math.sqrt(8)  # (B, Hv, L, Dv)
    torch.testing.assert_close(out, reads, **EXACT)


@pytest.mark.parametrize("chunk_size", [None, 4])
@pytest.mark.parametrize("gate", ["zero", "random", "strong"])
def test_unit_key_full_write_reads_back_its_value(chunk_size, gate):
    q, k, v, g, _, state = inputs(hk=4, hv=4, length=11)
    g = {"zero": torch.zeros_like(g), "random": g, "strong": g * 30}[gate]
    out, _ = gated_delta_rule(k, k, v, g, torch.ones_like(g), scale=1.0, chunk_size=chunk_size, initial_state=state)
    torch.testing.assert_close(out, v, **EXACT)


@pytest.mark.parametrize("gated", [False, True])
def test_orthonormal_keys_full_write_is_linear_attention(gated):
    q, _, v, g, _, _ = inputs(hk=2, hv=4, length=6, dk=8)
    basis, _ = torch.linalg.qr(randn(8, 8, seed=9))  # (Dk, Dk) orthonormal columns
    k = basis.T[:6].expand(2, 2, 6, 8)  # (B, Hk, L, Dk): six orthonormal keys
    g = g if gated else None
    delta, delta_state = gated_delta_rule(q, k, v, torch.zeros_like(v[..., 0]) if g is None else g,
                                          torch.ones_like(v[..., 0]), chunk_size=4)  # fmt: skip
    linear, linear_state = linear_attention(q, k, v, g)
    torch.testing.assert_close(delta, linear, **EXACT)
    torch.testing.assert_close(delta_state, linear_state, **EXACT)


@pytest.mark.parametrize("length", [1, 9, 64, 130])
@pytest.mark.parametrize("gated", [False, True])
def test_linear_attention_is_attention_without_softmax(length, gated):
    q, k, v, g, _, state = inputs(length=length, unit_keys=False)
    g = g if gated else None
    out, final = linear_attention(q, k, v, g, scale=0.3, initial_state=state)
    cum = torch.zeros_like(v[..., 0]) if g is None else g.cumsum(-1)  # (B, Hv, L) G
    future = torch.ones(length, length, dtype=torch.bool).triu(1)  # (L, L) True = j > i
    decay = (cum[..., :, None] - cum[..., None, :]).masked_fill(future, float("-inf")).exp()  # (B, Hv, L, L)
    qe, ke = q.repeat_interleave(2, dim=1), k.repeat_interleave(2, dim=1)  # (B, Hv, L, Dk)
    expected = 0.3 * ((qe @ ke.transpose(-1, -2)) * decay) @ v + 0.3 * cum.exp()[..., None] * (qe @ state)
    torch.testing.assert_close(out, expected, **EXACT)
    expected_state = cum[..., -1, None, None].exp() * state + (ke * decay[..., -1, :, None]).transpose(-1, -2) @ v
    torch.testing.assert_close(final, expected_state, **EXACT)


def test_very_negative_gates_stay_finite():
    q, k, v, _, beta, state = inputs(length=150)
    g = torch.full_like(beta, -50.0)  # exp(G_i) alone underflows, exp(-G_j) alone overflows: only differences work
    out, final = gated_delta_rule(q, k, v, g, beta, chunk_size=64, initial_state=state)
    recurrent, recurrent_final = gated_delta_rule(q, k, v, g, beta, initial_state=state)
    assert out.isfinite().all() and final.isfinite().all()
    torch.testing.assert_close(out, recurrent, **EXACT)
    torch.testing.assert_close(final, recurrent_final, **EXACT)
    lin, _ = linear_attention(q, k, v, g)
    assert lin.isfinite().all()


def test_value_heads_read_their_key_head_by_repeat_interleave():
    q, k, v, g, beta, state = inputs(hk=2, hv=6)
    grouped, _ = gated_delta_rule(q, k, v, g, beta, chunk_size=8, initial_state=state)
    expanded, _ = gated_delta_rule(
        q.repeat_interleave(3, 1), k.repeat_interleave(3, 1), v, g, beta, initial_state=state
    )
    torch.testing.assert_close(grouped, expanded, **EXACT)
    tiled, _ = gated_delta_rule(q.repeat(1, 3, 1, 1), k.repeat(1, 3, 1, 1), v, g, beta, initial_state=state)
    assert not torch.allclose(grouped, tiled)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("chunk_size", [None, 8])
def test_dtype_kept_and_inputs_untouched(dtype, chunk_size):
    tensors = [t.to(dtype) for t in inputs(length=10)]
    copies = [t.clone() for t in tensors]
    q, k, v, g, beta, state = tensors
    out, final = gated_delta_rule(q, k, v, g, beta, chunk_size=chunk_size, initial_state=state)
    lin, lin_final = linear_attention(q, k, v, g, initial_state=state)
    assert out.dtype == final.dtype == lin.dtype == lin_final.dtype == dtype
    for before, after in zip(copies, tensors, strict=True):
        assert torch.equal(before, after)
    tolerance = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 0.1}[dtype]  # eps · ~L · Dk
    exact, _ = gated_delta_rule(*inputs(length=10)[:5], chunk_size=chunk_size, initial_state=inputs(length=10)[5])
    assert (out.to(F64) - exact).abs().max() <= tolerance * exact.abs().max()


def test_exports():
    assert ac.gated_delta_rule is gated_delta_rule and ac.linear_attention is linear_attention
    assert ac.GatedDeltaNet is GatedDeltaNet and ac.LinearAttentionCache is LinearAttentionCache


def bad_case(**changes):
    q, k, v, g, beta, state = inputs(length=5)
    args = dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=state, chunk_size=None)
    args.update(changes)
    return args


BAD = {
    "positive g": (bad_case(g=torch.full((2, 4, 5), 0.1, dtype=F64)), ValueError, "g must be <= 0"),
    "q vs k": (bad_case(q=randn(2, 2, 5, 7)), ValueError, r"q \(2, 2, 5, 7\), k \(2, 2, 5, 8\)"),
    "batch of v": (bad_case(v=randn(3, 4, 5, 5)), ValueError, "B and L of k"),
    "length of v": (bad_case(v=randn(2, 4, 6, 5)), ValueError, "B and L of k"),
    "Hv not a multiple": (bad_case(v=randn(2, 3, 5, 5), g=None, beta=None, initial_state=None), ValueError, "multiple"),
    "g shape": (bad_case(g=-randn(2, 4, 4).abs()), ValueError, r"g must be \(B, Hv, L\) = \(2, 4, 5\)"),
    "beta shape": (bad_case(beta=randn(2, 2, 5)), ValueError, r"beta must be \(B, Hv, L\)"),
    "state shape": (bad_case(initial_state=randn(2, 4, 5, 8)), ValueError, r"\(B, Hv, Dk, Dv\) = \(2, 4, 8, 5\)"),
    "3-D q": (bad_case(q=randn(2, 5, 8)), ValueError, "4-D"),
    "chunk 0": (bad_case(chunk_size=0), ValueError, "chunk_size"),
    "chunk float": (bad_case(chunk_size=4.0), ValueError, "chunk_size"),
    "chunk bool": (bad_case(chunk_size=True), ValueError, "chunk_size"),
    "integer q": (bad_case(q=torch.ones(2, 2, 5, 8, dtype=torch.long)), TypeError, "floating-point"),
    "list v": (bad_case(v=[[1.0]]), TypeError, "torch.Tensor"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_inputs_are_named(case):
    given_args, error, message = BAD[case]
    args = dict(given_args)
    with pytest.raises(error, match=message):
        gated_delta_rule(args.pop("q"), args.pop("k"), args.pop("v"), args.pop("g"), args.pop("beta"), **args)
    if "chunk" in case or "beta" in case:
        return  # linear_attention has neither
    with pytest.raises(error, match=message):
        linear_attention(
            given_args["q"],
            given_args["k"],
            given_args["v"],
            given_args["g"],
            initial_state=given_args["initial_state"],
        )


def test_gated_delta_rule_needs_g_and_beta():
    q, k, v, g, beta, _ = inputs(length=3)
    with pytest.raises(ValueError, match="needs g and beta"):
        gated_delta_rule(q, k, v, None, beta)
