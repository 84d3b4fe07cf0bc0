"""ac.triton_attention under Triton's interpreter (CPU) against float64 references: values, lse and gradients.

TRITON_INTERPRET=1 must be in the environment before triton is first imported in this process. It is set
below at import time, but that is not always first: pytest (and every pytest-xdist worker) imports all test
modules while collecting, in file order, and ``import torch._dynamo`` or a ``transformers`` model module at the
top of an earlier test file imports triton (tests/test_compressed_attention.py does). The robust place is the
top of tests/conftest.py. Until then, ``_interpreter_triton()`` below re-imports triton's Python modules (its
compiled extension ``triton._C`` stays loaded: it cannot be loaded twice) when an earlier import left them
compiled for a GPU; the code under test is unchanged and still raises on that state (test_triton_attention_errors.py).

Tolerances are derived, not tuned. With unit roundoff ``u_p`` of the dtype P (and dS) are rounded to before
a ``tl.dot`` (2⁻¹¹ float16, 2⁻²⁴ float32; bfloat16 is computed as float32 under the interpreter), ``u_o``
of the output dtype, and float32 sums of length ``n`` (``n·2⁻²⁴``), each result x = Σ a·b obeys
``|x̂ − x| ≤ (u_p + n·2⁻²⁴)·Σ|a||b| + u_o·|x|``; the bound below doubles that.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton (see the module docstring)


def _interpreter_triton() -> None:
    """If triton was imported before TRITON_INTERPRET was set, import its Python modules again under it."""
    language = sys.modules.get("triton.language")
    if language is None or type(language.max).__name__ == "InterpretedFunction":
        return  # not imported yet (it will see the variable), or already under the interpreter
    for name in [name for name in sys.modules if name.split(".")[0] == "triton" and not name.startswith("triton._C")]:
        del sys.modules[name]
    import triton.language  # noqa: F401  (now decorated for the interpreter)


_interpreter_triton()

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import attn_core as ac  # noqa: E402

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason='needs the triton extra: pip install -e ".[triton]"'
)
F64 = torch.float64
UNIT = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8, torch.float32: 2.0**-24}


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def visible_mask(q_len: int, k_len: int, is_causal: bool) -> torch.Tensor:
    """(Lq, Lk) bool, True = may attend; bottom-right causal as ac.causal_mask."""
    full = torch.ones(q_len, k_len, dtype=torch.bool)  # (Lq, Lk)
    return full.tril(k_len - q_len) if is_causal else full


def reference(q, k, v, is_causal, scale):
    """float64 (out, lse, P, dS-ready pieces) with blind rows giving out 0 and lse -inf (no NaN)."""
    group = q.shape[1] // k.shape[1]
    keys, values = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)  # (B, Hq, Lk, D)
    scores = scale * q @ keys.transpose(-1, -2)  # (B, Hq, Lq, Lk)
    scores = scores.masked_fill(~visible_mask(q.shape[2], k.shape[2], is_causal), -math.inf)  # (B, Hq, Lq, Lk)
    lse = torch.logsumexp(scores, -1)  # (B, Hq, Lq)
    probs = torch.exp(scores - torch.where(lse.isinf(), 0.0, lse)[..., None])  # (B, Hq, Lq, Lk), 0 on blind rows
    return probs @ values, lse, probs, keys, values


def check_against_reference(q, k, v, *, is_causal, scale=None, block_size, use_out=True, use_lse=True, seed=9):
    """Run triton_attention forward and backward; compare everything with float64 within the derived bounds."""
    batch, num_heads, q_len, head_dim = q.shape
    k_len = k.shape[2]
    scale_value = 1 / math.sqrt(head_dim) if scale is None else scale
    inputs = [t.detach().requires_grad_() for t in (q, k, v)]
    out, lse = ac.triton_attention(*inputs, is_causal=is_causal, scale=scale, block_size=block_size, return_lse=True)
    grad_out = randn(batch, num_heads, q_len, head_dim, seed=seed)  # (B, Hq, Lq, D)
    grad_lse = randn(batch, num_heads, q_len, seed=seed + 1)  # (B, Hq, Lq)
    loss = (out * grad_out.to(q.dtype)).sum() * use_out + torch.where(lse.isinf(), 0.0, lse * grad_lse).sum() * use_lse
    loss.backward()

    exact = [t.detach().to(F64).requires_grad_() for t in (q, k, v)]
    out_ref, lse_ref, probs, keys, values = reference(*exact, is_causal, scale_value)
    loss_ref = (out_ref * grad_out.to(q.dtype).to(F64)).sum() * use_out
    loss_ref = loss_ref + torch.where(lse_ref.isinf(), 0.0, lse_ref * grad_lse.to(F64)).sum() * use_lse
    loss_ref.backward()

    # P (and dS) are rounded to u_p before a dot; the saved output (which Δ = rowsum(dO∘O) reads) and every
    # result to u_o; float32 sums of up to n terms add n·2⁻²⁴.
    u_p = UNIT[torch.float32] if q.dtype == torch.bfloat16 else UNIT[q.dtype]  # bf16 runs as float32 here
    u_o, n = UNIT[q.dtype], k_len + q_len + head_dim
    with torch.no_grad():
        qa, ka, va = (t.detach().to(F64).abs() for t in (q, k, v))
        group = num_heads // k.shape[1]
        d_out = grad_out.to(q.dtype).to(F64) * use_out  # (B, Hq, Lq, D): autograd hands dO over in q's dtype
        # |dS| bound: P ∘ (|dO| |V|ᵀ + rowsum|dO ∘ O|), dS = P ∘ (dO Vᵀ − Δ) with each piece's terms in absolute value.
        d_scores_abs = probs * (
            d_out.abs() @ values.abs().transpose(-1, -2) + (d_out.abs() * out_ref.abs()).sum(-1)[..., None]
        )
        d_scores_abs = d_scores_abs + probs * (grad_lse.to(F64).abs() * use_lse)[..., None]  # (B, Hq, Lq, Lk)
        magnitudes = {
            "out": probs @ va.repeat_interleave(group, 1),  # (B, Hq, Lq, D)
            "dq": scale_value * d_scores_abs @ ka.repeat_interleave(group, 1),  # (B, Hq, Lq, D)
            "dk": scale_value * (d_scores_abs.transpose(-1, -2) @ qa).unflatten(1, (-1, group)).sum(2),
            "dv": (probs.transpose(-1, -2) @ d_out.abs()).unflatten(1, (-1, group)).sum(2),  # (B, Hkv, Lk, D)
        }
    pairs = {"out": (out, out_ref), "dq": (inputs[0].grad, exact[0].grad)}
    pairs |= {"dk": (inputs[1].grad, exact[1].grad), "dv": (inputs[2].grad, exact[2].grad)}
    for name, (got, want) in pairs.items():
        assert got.dtype == q.dtype and got.shape == want.shape, name
        assert not got.isnan().any(), name
        bound = (
            2 * ((u_p + u_o + n * 2.0**-24) * magnitudes[name] + u_o * want.abs()) + 1e-30
        )  # doubled first-order bound
        excess = (got.to(F64) - want).abs() - bound
        assert excess.max() <= 0, f"{name}: error exceeds the derived bound by {excess.max().item():.3g}"
    assert lse.dtype == torch.float32 and lse.shape == (batch, num_heads, q_len)
    assert torch.equal(lse.isinf(), lse_ref.isinf())
    finite = ~lse_ref.isinf()
    score_size = scale_value * (qa.amax() * ka.amax() * head_dim).item() + 1.0
    torch.testing.assert_close(lse[finite].to(F64), lse_ref[finite], rtol=0, atol=2 * n * 2.0**-24 * score_size)
    return out, lse, [t.grad for t in inputs]


@pytest.mark.parametrize(
    "shape, is_causal, dtype, block_size",
    [
        ((1, 2, 2, 40, 40, 16), False, torch.float32, 16),  # MHA, 3 partial tiles
        ((2, 4, 2, 20, 50, 32), True, torch.float32, 32),  # GQA, a chunk of queries after 30 cached keys
        ((1, 2, 1, 40, 24, 16), True, torch.float16, 16),  # MQA, Lq > Lk: 16 queries see no key
        ((1, 2, 2, 70, 70, 64), True, torch.bfloat16, 64),  # bf16 (computed as float32 here)
        ((1, 1, 1, 30, 20, 128), False, torch.float32, 128),  # D = 128, one tile
        ((1, 4, 1, 20, 36, 256), True, torch.float32, 16),  # D = 256 (Gemma 3's), MQA 4:1, partial tiles
    ],
    ids=["mha", "gqa-chunk-causal", "mqa-fp16-blind-rows", "bf16-causal", "d128", "d256-mqa"],
)
def test_matches_float64_reference_forward_and_backward(shape, is_causal, dtype, block_size):
    batch, num_heads, num_kv_heads, q_len, k_len, head_dim = shape
    q = randn(batch, num_heads, q_len, head_dim, seed=0, dtype=dtype)  # (B, Hq, Lq, D)
    k = randn(batch, num_kv_heads, k_len, head_dim, seed=1, dtype=dtype)  # (B, Hkv, Lk, D)
    v = randn(batch, num_kv_heads, k_len, head_dim, seed=2, dtype=dtype)  # (B, Hkv, Lk, D)
    out, lse, grads = check_against_reference(q, k, v, is_causal=is_causal, block_size=block_size)
    blind = q_len - k_len if is_causal and q_len > k_len else 0  # queries before this one see no key
    assert torch.equal(out[:, :, :blind], torch.zeros_like(out[:, :, :blind]))
    assert torch.isneginf(lse[:, :, :blind]).all() and torch.isfinite(lse[:, :, blind:]).all()
    assert torch.equal(grads[0][:, :, :blind], torch.zeros_like(grads[0][:, :, :blind]))


def test_reference_is_torch_sdpa():
    """The float64 reference above equals F.scaled_dot_product_attention (GQA, bottom-right causal)."""
    q, k, v = (
        randn(1, 4, 5, 8, seed=0, dtype=F64),
        randn(1, 2, 9, 8, seed=1, dtype=F64),
        randn(1, 2, 9, 8, seed=2, dtype=F64),
    )
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=visible_mask(5, 9, True), enable_gqa=True)
    torch.testing.assert_close(reference(q, k, v, True, 8**-0.5)[0], expected, rtol=1e-12, atol=1e-12)


def test_strided_views_scale_and_only_lse_used():
    """(B, L, H, D) tensors seen through .transpose(1, 2) (no copy), a custom scale, and a loss on lse alone
    (dO = None: merge_attention differentiates through lse)."""
    q = randn(2, 24, 4, 16, seed=3).transpose(1, 2)  # (B, Hq, Lq, D) view, not contiguous
    k = randn(2, 33, 2, 16, seed=4).transpose(1, 2)  # (B, Hkv, Lk, D) view
    v = randn(2, 33, 2, 16, seed=5).transpose(1, 2)  # (B, Hkv, Lk, D) view
    assert not q.is_contiguous()
    check_against_reference(q, k, v, is_causal=True, scale=0.3, block_size=32, use_out=False)


def test_no_grad_inputs_return_plain_tensors_and_match_tiled_attention():
    q, k, v = randn(1, 2, 45, 32, seed=6), randn(1, 1, 45, 32, seed=7), randn(1, 1, 45, 32, seed=8)
    out, lse = ac.triton_attention(q, k, v, is_causal=True, block_size=32, return_lse=True)  # (1, 2, 45, 32)
    assert out.grad_fn is None and lse.grad_fn is None
    tiled_out, tiled_lse = ac.tiled_attention(q, k, v, is_causal=True, block_size=16, return_lse=True)
    torch.testing.assert_close(out, tiled_out, rtol=0, atol=4 * 45 * 2.0**-24 * v.abs().max().item())
    torch.testing.assert_close(lse, tiled_lse, rtol=0, atol=4 * (45 + 32) * 2.0**-24 * (lse.abs().max().item() + 1))
    assert ac.triton_attention(q, k, v, block_size=16).shape == (1, 2, 45, 32)  # out alone without return_lse


def test_chunked_prefill_equals_one_call_and_future_keys_do_not_change_the_past():
    """Causal (bottom-right): queries in chunks against the keys so far == all queries at once, for two
    chunkings; and appending tokens leaves earlier outputs unchanged."""
    q, k, v = randn(1, 2, 48, 16, seed=10), randn(1, 2, 48, 16, seed=11), randn(1, 2, 48, 16, seed=12)
    full = ac.triton_attention(q, k, v, is_causal=True, block_size=16)  # (1, 2, 48, 16)
    tol = 4 * 48 * 2.0**-24 * v.abs().max().item()
    for cuts in ([0, 17, 48], [0, 5, 30, 48]):
        chunks = [
            ac.triton_attention(q[:, :, a:b], k[:, :, :b], v[:, :, :b], is_causal=True, block_size=16)
            for a, b in zip(cuts[:-1], cuts[1:], strict=True)
        ]  # each (1, 2, b - a, 16)
        torch.testing.assert_close(torch.cat(chunks, 2), full, rtol=0, atol=tol)
    prefix = ac.triton_attention(q[:, :, :20], k[:, :, :20], v[:, :, :20], is_causal=True, block_size=16)
    torch.testing.assert_close(prefix, full[:, :, :20], rtol=0, atol=tol)


@settings(max_examples=8, deadline=None)
@given(
    q_len=st.integers(1, 40),
    k_len=st.integers(0, 40),
    group=st.sampled_from([1, 2]),
    is_causal=st.booleans(),
    block_size=st.sampled_from([16, 32]),
)
def test_property_forward_matches_reference_any_lengths(q_len, k_len, group, is_causal, block_size):
    """Any lengths (Lk = 0 included: every query blind), causal or not, GQA or not: out and lse match float64."""
    q, k, v = (
        randn(1, 2 * group, q_len, 16, seed=q_len),
        randn(1, 2, k_len, 16, seed=k_len),
        randn(1, 2, k_len, 16, seed=7),
    )
    out, lse = ac.triton_attention(q, k, v, is_causal=is_causal, block_size=block_size, return_lse=True)
    out_ref, lse_ref, probs, _, values = reference(q.to(F64), k.to(F64), v.to(F64), is_causal, 0.25)
    bound = 2 * (q_len + k_len + 16) * 2.0**-24 * (probs @ values.abs() + out_ref.abs())  # (1, Hq, Lq, 16)
    assert ((out.to(F64) - out_ref).abs() <= bound).all()
    assert torch.equal(lse.isinf(), lse_ref.isinf())
    finite = ~lse_ref.isinf()
    assert ((lse.to(F64) - lse_ref)[finite].abs() <= 2 * (k_len + 16) * 2.0**-24 * (lse_ref[finite].abs() + 16)).all()
