"""tiled_attention's hand-written backward (FlashAttention-2) and its log-sum-exp output.

Gradients against PyTorch autograd through F.scaled_dot_product_attention in float64; lse against
torch.logsumexp of the masked scores; torch.autograd.gradcheck; what the backward saves; rows that
see no key; half precision against a derived error bound. merge_attention is in test_merge_attention.py.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import attn_core as ac

F64 = torch.float64


def make_inputs(
    batch: tuple[int, ...], hq: int, hkv: int, lq: int, lk: int, d: int, dv: int, *, seed: int = 0, dtype=F64
) -> tuple[torch.Tensor, ...]:
    """Reproducible q (*batch, hq, lq, d), k, v (*batch, hkv, lk, d / dv), dO (*batch, hq, lq, dv), dlse."""
    generator = torch.Generator().manual_seed(seed)
    shapes = [(hq, lq, d), (hkv, lk, d), (hkv, lk, dv), (hq, lq, dv), (hq, lq)]
    return tuple(torch.randn(*batch, *shape, generator=generator, dtype=F64).to(dtype) for shape in shapes)


def visible(q: torch.Tensor, k: torch.Tensor, is_causal: bool) -> torch.Tensor:
    """Boolean (Lq, Lk), True = may attend; attn_core's causal is aligned bottom-right, F's top-left."""
    q_len, k_len = q.shape[-2], k.shape[-2]
    return ac.causal_mask(q_len, k_len) if is_causal else torch.ones(q_len, k_len, dtype=torch.bool)


def reference(q, k, v, *, is_causal: bool, scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, lse) by PyTorch: F.sdpa (kv heads shared with enable_gqa) and logsumexp of the masked scores.

    Masked scores are set to the lowest finite number, not -inf, so that a row with no visible key
    keeps a finite logsumexp (and finite gradients); its lse is then replaced by -inf, the convention.
    """
    mask = visible(q, k, is_causal)  # (Lq, Lk)
    output = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True)  # (..., Hq, Lq, Dv)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    group = q.shape[-3] // k.shape[-3]
    scores = scale * q @ k.repeat_interleave(group, dim=-3).transpose(-2, -1)  # (..., Hq, Lq, Lk)
    lse = torch.logsumexp(scores.masked_fill(~mask, torch.finfo(q.dtype).min), dim=-1)  # (..., Hq, Lq)
    return output, lse.masked_fill(~mask.any(dim=-1), -math.inf)  # (..., Hq, Lq)


def loss(output: torch.Tensor, lse: torch.Tensor, grad_out: torch.Tensor, grad_lse: torch.Tensor) -> torch.Tensor:
    """<output, dO> + <lse, dlse> over rows with a finite lse: backprop with both upstream gradients."""
    finite = lse.isfinite()  # (..., Hq, Lq): -inf for rows that see no key (-inf · x would be NaN)
    return (output * grad_out).sum() + (lse.masked_fill(~finite, 0.0) * grad_lse).sum()


def gradients(fn, q, k, v, grad_out, grad_lse) -> tuple[torch.Tensor, ...]:
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    output, lse = fn(q, k, v)
    return torch.autograd.grad(loss(output, lse, grad_out, grad_lse), (q, k, v))


# float64 on O(1) inputs: each gradient entry is a sum of at most a few hundred products of
# numbers below ~25 (scores, dP): n·eps·max|term| <= 300 · 2.2e-16 · 25 ~ 2e-12.
ATOL_F64 = 1e-11

# (batch, hq, hkv, lq, lk, d, dv, block_size)
CASES = {
    "full, odd length": ((2,), 2, 2, 13, 13, 5, 5, 3),
    "Lq < Lk (decode-like)": ((2,), 2, 2, 5, 19, 4, 4, 7),
    "Lq > Lk (key-less rows when causal)": ((2,), 2, 2, 19, 6, 4, 4, 3),
    "GQA 4 q heads / 2 kv heads": ((2,), 4, 2, 11, 14, 4, 4, 3),
    "MQA 4 q heads / 1 kv head": ((2,), 4, 1, 11, 9, 4, 4, 7),
    "batch dims (B, H)": ((2, 3), 2, 1, 9, 10, 4, 4, 4),
    "heads only (H,)": ((), 4, 2, 9, 12, 4, 4, 5),
    "Dv != D": ((1,), 4, 2, 10, 13, 4, 7, 3),
    "block 1": ((1,), 4, 2, 7, 8, 3, 3, 1),
    "block 256 (one tile)": ((1,), 4, 2, 23, 29, 4, 4, 256),
    "block equal to L": ((1,), 2, 2, 12, 12, 4, 4, 12),
}


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_gradients_equal_autograd_through_torch_sdpa(case, is_causal):
    batch, hq, hkv, lq, lk, d, dv, block_size = case
    q, k, v, grad_out, grad_lse = make_inputs(batch, hq, hkv, lq, lk, d, dv)

    def tiled(q, k, v):
        return ac.tiled_attention(q, k, v, is_causal=is_causal, block_size=block_size, return_lse=True)

    ours = gradients(tiled, q, k, v, grad_out, grad_lse)
    expected = gradients(lambda q, k, v: reference(q, k, v, is_causal=is_causal), q, k, v, grad_out, grad_lse)
    for name, got, want in zip("qkv", ours, expected, strict=True):
        assert got.shape == want.shape and got.dtype == F64, name
        torch.testing.assert_close(got, want, rtol=0, atol=ATOL_F64, msg=lambda m, name=name: f"d{name}: {m}")


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_scale_override(is_causal):
    q, k, v, grad_out, grad_lse = make_inputs((2,), 4, 2, 9, 11, 4, 4, seed=1)

    def tiled(q, k, v):
        return ac.tiled_attention(q, k, v, is_causal=is_causal, scale=0.3, block_size=4, return_lse=True)

    ours = gradients(tiled, q, k, v, grad_out, grad_lse)
    expected = gradients(lambda *x: reference(*x, is_causal=is_causal, scale=0.3), q, k, v, grad_out, grad_lse)
    for got, want in zip(ours, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=ATOL_F64)


def test_only_the_output_or_only_lse_used():
    """An unused output's gradient arrives as None: both one-sided cases match autograd."""
    q, k, v, grad_out, grad_lse = make_inputs((1,), 4, 2, 10, 12, 4, 4, seed=2)
    zeros_out, zeros_lse = torch.zeros_like(grad_out), torch.zeros_like(grad_lse)
    tiled = lambda q, k, v: ac.tiled_attention(q, k, v, is_causal=True, block_size=3, return_lse=True)  # noqa: E731
    ref = lambda q, k, v: reference(q, k, v, is_causal=True)  # noqa: E731
    for upstream in ((grad_out, zeros_lse), (zeros_out, grad_lse)):
        for got, want in zip(gradients(tiled, q, k, v, *upstream), gradients(ref, q, k, v, *upstream), strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=ATOL_F64)
    # Without return_lse, only the output: out.backward().
    q.requires_grad_(True)
    ac.tiled_attention(q, k, v, is_causal=True, block_size=3).backward(grad_out)
    (expected,) = torch.autograd.grad((reference(q, k, v, is_causal=True)[0] * grad_out).sum(), q)
    torch.testing.assert_close(q.grad, expected, rtol=0, atol=ATOL_F64)


def test_only_some_inputs_require_grad():
    q, k, v, grad_out, _ = make_inputs((1,), 2, 2, 6, 7, 4, 4, seed=3)
    v.requires_grad_(True)
    out = ac.tiled_attention(q, k, v, block_size=2)  # (1, 2, 6, 4)
    (grad_v,) = torch.autograd.grad(out, v, grad_out)
    (expected,) = torch.autograd.grad(reference(q, k, v, is_causal=False)[0], v, grad_out)
    torch.testing.assert_close(grad_v, expected, rtol=0, atol=ATOL_F64)


def test_non_contiguous_inputs_get_gradients_of_their_shape():
    generator = torch.Generator().manual_seed(4)
    q = torch.randn(2, 9, 4, 4, generator=generator, dtype=F64).transpose(1, 2)  # (B, H, L, D), strided
    k = torch.randn(2, 11, 2, 4, generator=generator, dtype=F64).transpose(1, 2)  # (B, Hkv, Lk, D), strided
    v = torch.randn(2, 11, 2, 4, generator=generator, dtype=F64).transpose(1, 2)  # (B, Hkv, Lk, Dv), strided
    grad_out, grad_lse = torch.randn(2, 4, 9, 4, dtype=F64), torch.randn(2, 4, 9, dtype=F64)
    tiled = lambda q, k, v: ac.tiled_attention(q, k, v, is_causal=True, block_size=4, return_lse=True)  # noqa: E731
    ours = gradients(tiled, q, k, v, grad_out, grad_lse)
    expected = gradients(lambda *x: reference(*x, is_causal=True), q, k, v, grad_out, grad_lse)
    for got, want, x in zip(ours, expected, (q, k, v), strict=True):
        assert got.shape == x.shape
        torch.testing.assert_close(got, want, rtol=0, atol=ATOL_F64)


# --------------------------------------------------------------------------- lse


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", [CASES["GQA 4 q heads / 2 kv heads"], CASES["Lq > Lk (key-less rows when causal)"]])
def test_lse_is_logsumexp_of_the_masked_scores(case, is_causal):
    batch, hq, hkv, lq, lk, d, dv, block_size = case
    q, k, v, _, _ = make_inputs(batch, hq, hkv, lq, lk, d, dv, seed=5)
    _, expected = reference(q, k, v, is_causal=is_causal)
    for grad_mode in (False, True):  # the plain loop and the autograd Function give the same lse
        with torch.set_grad_enabled(grad_mode):
            out, lse = ac.tiled_attention(
                q.requires_grad_(grad_mode), k, v, is_causal=is_causal, block_size=block_size, return_lse=True
            )
        assert lse.shape == (*batch, hq, lq) and lse.dtype == F64
        assert lse.requires_grad == grad_mode
        assert torch.equal(lse.isneginf(), expected.isneginf())
        torch.testing.assert_close(lse, expected, rtol=0, atol=1e-12)  # -inf == -inf counts as equal


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_lse_is_float32_for_float32_and_half_inputs(dtype):
    q, k, v, _, _ = make_inputs((1,), 2, 2, 5, 6, 4, 4, dtype=dtype)
    out, lse = ac.tiled_attention(q, k, v, return_lse=True)
    assert out.dtype == dtype and lse.dtype == torch.float32


# --------------------------------------------------------------------------- gradcheck, double backward


def test_gradcheck_on_a_tiny_float64_case():
    """Finite differences on both outputs: GQA, causal with Lq < Lk, tiles that do not divide L."""
    q, k, v, _, _ = make_inputs((1,), 4, 2, 3, 5, 2, 3, seed=6)
    inputs = tuple(t.requires_grad_(True) for t in (q, k, v))

    def tiled(q, k, v):
        return ac.tiled_attention(q, k, v, is_causal=True, block_size=2, return_lse=True)

    assert torch.autograd.gradcheck(tiled, inputs, eps=1e-6, atol=1e-8)


def test_double_backward_raises_a_clear_error():
    """create_graph=True (to differentiate the gradients again) is refused, not silently first-order."""
    q, k, v, grad_out, _ = make_inputs((1,), 2, 2, 4, 4, 2, 2, seed=7)
    q.requires_grad_(True)
    out = ac.tiled_attention(q, k, v, block_size=2)  # (1, 2, 4, 2)
    with pytest.raises(RuntimeError, match=r"no double backward.*create_graph=True.*scaled_dot_product_attention"):
        torch.autograd.grad(out, q, grad_out, create_graph=True)
    # First-order gradients of the same graph still work.
    (grad_q,) = torch.autograd.grad(out, q, grad_out)
    assert grad_q.isfinite().all()


# --------------------------------------------------------------------------- what is saved


def saved_numel(fn) -> int:
    """Number of elements autograd saves for backward while fn runs (the pack hook sees each one)."""
    numels = []

    def pack(tensor):
        numels.append(tensor.numel())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn()
    return sum(numels)


def test_saves_only_q_k_v_output_and_lse():
    length = 64
    q, k, v, _, _ = make_inputs((1,), 4, 2, length, length, 8, 8, seed=8)
    q.requires_grad_(True)
    out, lse = ac.tiled_attention(q, k, v, block_size=16, return_lse=True)
    budget = sum(t.numel() for t in (q, k, v, out, lse))  # 2048 + 1024 + 1024 + 2048 + 256
    assert saved_numel(lambda: ac.tiled_attention(q, k, v, is_causal=True, block_size=16)) <= budget
    # The counter sees what a kernel keeps: the naive one saves the (4, 64, 64) weights.
    naive = saved_numel(lambda: ac.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert naive > budget and naive >= 4 * length * length


def test_no_autograd_bookkeeping_without_grad():
    q, k, v, _, _ = make_inputs((1,), 2, 2, 5, 5, 4, 4)
    assert ac.tiled_attention(q, k, v).grad_fn is None
    q.requires_grad_(True)
    with torch.no_grad():
        assert ac.tiled_attention(q, k, v).grad_fn is None
    assert type(ac.tiled_attention(q, k, v).grad_fn).__name__ == "TiledAttentionFunctionBackward"


class LargestOutput(TorchDispatchMode):
    """The largest tensor any aten op returns while active, and how many bmm calls ran."""

    def __init__(self) -> None:
        super().__init__()
        self.largest, self.bmm_calls = 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if isinstance(result, torch.Tensor):
            self.largest = max(self.largest, result.numel())
        self.bmm_calls += func.overloadpacket.__name__ == "bmm"
        return result


def test_backward_never_materialises_the_score_matrix_and_skips_future_tiles():
    """Backward (2 query heads per kv head, L = 256, tiles of 32): no op returns more than the
    largest of q, k, v and one score tile, and causal computes 36 of the 64 tiles (2 bmm each)."""
    length, block = 256, 32
    q, k, v, grad_out, _ = make_inputs((1,), 2, 1, length, length, 8, 8, seed=11)
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    calls = {}
    for is_causal in (False, True):
        out = ac.tiled_attention(q, k, v, is_causal=is_causal, block_size=block)  # (1, 2, 256, 8)
        with LargestOutput() as recorder:
            torch.autograd.grad(out, (q, k, v), grad_out)
        assert recorder.largest <= max(q.numel(), 2 * block * block) < length * length / 8
        calls[is_causal] = recorder.bmm_calls
    tiles_per_side = length // block  # 8
    assert calls == {False: 2 * tiles_per_side**2, True: 2 * tiles_per_side * (tiles_per_side + 1) // 2}


class ScoreProducts(TorchDispatchMode):
    """The (query tile, key tile) of every score product ``scale·Q_i K_jᵀ``, in the order they run.

    A product is recognised by its operands: the first equals q on a query tile, the second kᵀ
    on a key tile, either one times scale (exact: the kernel multiplies by scale the same way).
    """

    def __init__(self, q: torch.Tensor, k: torch.Tensor, block: int, scale: float) -> None:
        super().__init__()
        starts_q, starts_k = range(0, q.shape[-2], block), range(0, k.shape[-2], block)
        self.query_tiles = [q[0, :, i : i + block] for i in starts_q]  # each (H, T, D)
        self.key_tiles = [k[0, :, j : j + block].transpose(-2, -1) for j in starts_k]  # each (H, D, T)
        self.scale = scale
        self.order: list[tuple[int, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ == "bmm":
            left, right = args[0], args[1]
            i = next((n for n, t in enumerate(self.query_tiles) if self.same(t, left)), None)
            j = next((n for n, t in enumerate(self.key_tiles) if self.same(t, right)), None)
            if i is not None and j is not None:
                self.order.append((i, j))
        return func(*args, **(kwargs or {}))

    def same(self, tile: torch.Tensor, operand: torch.Tensor) -> bool:
        return tile.shape == operand.shape and (torch.equal(tile, operand) or torch.equal(tile * self.scale, operand))


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_backward_loops_over_key_tiles_outside_as_flashattention_2(is_causal):
    """FlashAttention-2's order (its Algorithm 2): key tile j outside, so dK_j and dV_j are finished
    in one pass, and every query tile that sees it inside; query tiles fully in its past are skipped."""
    length, block, scale = 40, 10, 0.5
    q, k, v, grad_out, _ = make_inputs((1,), 2, 2, length, length, 4, 4, seed=12)
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    out = ac.tiled_attention(q, k, v, is_causal=is_causal, scale=scale, block_size=block)  # (1, 2, 40, 4)
    recorder = ScoreProducts(q.detach(), k.detach(), block, scale)
    with recorder:
        torch.autograd.grad(out, (q, k, v), grad_out)
    tiles = length // block  # 4
    expected = [(i, j) for j in range(tiles) for i in range(tiles) if not is_causal or i >= j]
    assert recorder.order == expected


# --------------------------------------------------------------------------- rows that see no key


def test_key_less_rows_have_zero_output_minus_inf_lse_and_zero_gradients():
    """Causal with Lq = 9 > Lk = 4: queries 0..4 see no key."""
    q, k, v, grad_out, grad_lse = make_inputs((2,), 4, 2, 9, 4, 3, 3, seed=9)
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    out, lse = ac.tiled_attention(q, k, v, is_causal=True, block_size=2, return_lse=True)
    assert torch.equal(out[..., :5, :], torch.zeros(2, 4, 5, 3, dtype=F64))
    assert lse[..., :5].isneginf().all() and lse[..., 5:].isfinite().all()
    grad_q, grad_k, grad_v = torch.autograd.grad(loss(out, lse, grad_out, grad_lse), (q, k, v))
    assert all(g.isfinite().all() for g in (grad_q, grad_k, grad_v))
    assert torch.equal(grad_q[..., :5, :], torch.zeros(2, 4, 5, 3, dtype=F64))
    assert (grad_q[..., 5:, :] != 0).any(dim=-1).all()


def test_no_keys_and_no_queries():
    q, k, v, grad_out, _ = make_inputs((2,), 2, 2, 5, 0, 4, 4)
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    for is_causal in (False, True):
        out, lse = ac.tiled_attention(q, k, v, is_causal=is_causal, return_lse=True)
        assert torch.equal(out, torch.zeros(2, 2, 5, 4, dtype=F64)) and lse.isneginf().all()
        (grad_q,) = torch.autograd.grad(out, q, grad_out)
        assert torch.equal(grad_q, torch.zeros_like(q))
    q, k, v, _, _ = make_inputs((2,), 2, 2, 0, 6, 4, 4)
    k.requires_grad_(True)
    out = ac.tiled_attention(q, k, v, is_causal=True)  # (2, 2, 0, 4)
    (grad_k,) = torch.autograd.grad(out, k, torch.zeros_like(out))
    assert torch.equal(grad_k, torch.zeros_like(k))


# --------------------------------------------------------------------------- property


@given(
    batch=st.lists(st.integers(1, 2), max_size=2).map(tuple),
    kv_heads=st.integers(1, 2),
    group=st.integers(1, 3),
    q_len=st.integers(1, 9),
    k_len=st.integers(1, 9),
    head_dim=st.integers(1, 4),
    v_dim=st.integers(1, 4),
    block_size=st.integers(1, 10),
    is_causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_gradients_equal_the_naive_kernel(
    batch, kv_heads, group, q_len, k_len, head_dim, v_dim, block_size, is_causal, seed
):
    """Against ac.scaled_dot_product_attention (its weights kept, autograd through them)."""
    q, k, v, grad_out, _ = make_inputs(batch, kv_heads * group, kv_heads, q_len, k_len, head_dim, v_dim, seed=seed)
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    ours = torch.autograd.grad(
        ac.tiled_attention(q, k, v, is_causal=is_causal, block_size=block_size), (q, k, v), grad_out
    )
    naive, _ = ac.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    for got, want in zip(ours, torch.autograd.grad(naive, (q, k, v), grad_out), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=ATOL_F64)


# --------------------------------------------------------------------------- half precision


def gradient_error_bounds(
    q, k, v, grad_out, *, is_causal: bool, storage_dtype: torch.dtype
) -> tuple[torch.Tensor, ...]:
    """Elementwise first-order bounds on |dq|, |dk|, |dv| errors of the float32 backward, in float64.

    Running-error analysis with u = 2⁻²⁴ (float32 rounding), on the float64 values of the inputs the
    kernel saw (so input rounding is no error): a sum of n terms computed in any order is off by at
    most n·u·Σ|terms|, and a relative error ρ in a factor adds ρ·|term|. Per element:

    - score s_ij = scale·q_i·k_j (D products, q scaled first): δs ≤ (D+1)·u·scale·(|q_i|·|k_j|);
    - lse_i = log Σ_j exp(s_ij), a weighted mean of the δs plus the sum: δlse ≤ max_j δs_ij + (Lk+2)·u;
    - P_ij = exp(s_ij − lse_i): relative ρ_ij = δs_ij + δlse_i + 2u;
    - the saved output O_i = Σ_j P_ij v_j: δO ≤ Σ_j P_ij·(ρ_ij + (Lk+1)·u)·|v_j| + u_s·|O_i| + η_s, u_s the
      rounding to ``storage_dtype`` (the output is saved in q's dtype);
    - dP_ij = dO_i·v_j: δdP ≤ Dv·u·(|dO_i|·|v_j|);  D_i = dO_i·O_i: δD ≤ (Dv+1)·u·(|dO_i|·|O_i|) + |dO_i|·δO_i;
    - dS_ij = P_ij·(dP_ij − D_i): δdS ≤ P_ij·((ρ_ij + 2u)·|dP_ij − D_i| + δdP_ij + δD_i);
    - dV_j = Σ_i P_ij dO_i over R = G·Lq rows: δdV ≤ Σ_i P_ij·(ρ_ij + (R+1)·u)·|dO_i|;
    - dQ_i = scale·Σ_j dS_ij k_j: δdQ ≤ scale·Σ_j (δdS_ij + (Lk+2)·u·|dS_ij|)·|k_j|;
    - dK_j = Σ_i dS_ij (scale·q_i): δdK ≤ scale·Σ_i (δdS_ij + (R+2)·u·|dS_ij|)·|q_i|;
    - each gradient is finally rounded to ``storage_dtype``: + u_s·|gradient| + η_s.

    η_s is half the smallest subnormal of ``storage_dtype`` (2⁻²⁵ for float16): below the normal
    range a rounding error is absolute, not relative (a float16 dV entry of -2.8e-5 is rounded
    to a multiple of 2⁻²⁴, off by 2.4e-8 where u_s·|dV| allows only 1.4e-8).

    A bound for any summation order, first order in u (the second-order terms are ~u² · the same
    sums, far below).
    """
    u = torch.finfo(torch.float32).eps / 2
    u_s = torch.finfo(storage_dtype).eps / 2 if storage_dtype != torch.float32 else u
    storage = torch.finfo(storage_dtype)
    eta_s = storage.smallest_normal * storage.eps / 2  # half the smallest subnormal
    q, k, v, grad_out = (t.double() for t in (q, k, v, grad_out))
    head_dim, v_dim, q_len, k_len = q.shape[-1], v.shape[-1], q.shape[-2], k.shape[-2]
    group = q.shape[-3] // k.shape[-3]
    rows = group * q_len
    scale = head_dim**-0.5
    k, v = k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)  # (B, Hq, Lk, D / Dv)
    mask = visible(q, k, is_causal)  # (Lq, Lk)
    probs = torch.softmax((scale * q @ k.transpose(-2, -1)).masked_fill(~mask, -math.inf), dim=-1)  # (B, Hq, Lq, Lk)
    output = probs @ v  # (B, Hq, Lq, Dv)
    grad_probs = grad_out @ v.transpose(-2, -1)  # (B, Hq, Lq, Lk)
    delta = (grad_out * output).sum(-1, keepdim=True)  # (B, Hq, Lq, 1)
    grad_scores = probs * (grad_probs - delta)  # (B, Hq, Lq, Lk)

    score_err = (head_dim + 1) * u * scale * (q.abs() @ k.abs().transpose(-2, -1))  # (B, Hq, Lq, Lk)
    lse_err = score_err.masked_fill(~mask, 0).amax(-1, keepdim=True) + (k_len + 2) * u  # (B, Hq, Lq, 1)
    rho = score_err + lse_err + 2 * u  # (B, Hq, Lq, Lk), relative error of each weight
    output_err = (probs * (rho + (k_len + 1) * u)) @ v.abs() + u_s * output.abs() + eta_s  # (B, Hq, Lq, Dv)
    grad_probs_err = v_dim * u * (grad_out.abs() @ v.abs().transpose(-2, -1))  # (B, Hq, Lq, Lk)
    delta_err = ((v_dim + 1) * u * grad_out.abs() * output.abs() + grad_out.abs() * output_err).sum(-1, keepdim=True)
    grad_scores_err = probs * (
        (rho + 2 * u) * (grad_probs - delta).abs() + grad_probs_err + delta_err
    )  # (B, Hq, Lq, Lk)

    def per_kv_head(x: torch.Tensor) -> torch.Tensor:  # (B, Hq, Lk, ·) -> (B, Hkv, Lk, ·): sum the group
        return x.unflatten(-3, (-1, group)).sum(-3)

    grad_q = scale * grad_scores @ k  # (B, Hq, Lq, D)
    grad_k = per_kv_head(scale * grad_scores.transpose(-2, -1) @ q)  # (B, Hkv, Lk, D)
    grad_v = per_kv_head(probs.transpose(-2, -1) @ grad_out)  # (B, Hkv, Lk, Dv)
    q_err = scale * (grad_scores_err + (k_len + 2) * u * grad_scores.abs()) @ k.abs()  # (B, Hq, Lq, D)
    k_err = per_kv_head(scale * (grad_scores_err + (rows + 2) * u * grad_scores.abs()).transpose(-2, -1) @ q.abs())
    v_err = per_kv_head((probs * (rho + (rows + 1) * u)).transpose(-2, -1) @ grad_out.abs())  # (B, Hkv, Lk, Dv)
    return tuple(err + u_s * g.abs() + eta_s for err, g in ((q_err, grad_q), (k_err, grad_k), (v_err, grad_v)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("kv_heads", [2, 4], ids=["GQA", "MHA"])  # MHA: dQ accumulated in place, no stacked copies
def test_half_and_single_precision_gradients_within_the_derived_bound(dtype, is_causal, kv_heads):
    q, k, v, grad_out, _ = make_inputs((2,), 4, kv_heads, 40, 48, 16, 16, seed=10, dtype=dtype)
    q, k, v = (t.requires_grad_(True) for t in (q, k, v))
    ours = torch.autograd.grad(ac.tiled_attention(q, k, v, is_causal=is_causal, block_size=16), (q, k, v), grad_out)
    # Reference: the same (rounded) inputs in float64.
    exact = [t.detach().double().requires_grad_(True) for t in (q, k, v)]
    expected = torch.autograd.grad(reference(*exact, is_causal=is_causal)[0], exact, grad_out.double())
    bounds = gradient_error_bounds(q, k, v, grad_out, is_causal=is_causal, storage_dtype=dtype)
    for name, got, want, bound in zip("qkv", ours, expected, bounds, strict=True):
        assert got.dtype == dtype
        error = (got.double() - want).abs()  # (..., H, L, D)
        assert (error <= bound).all(), (
            f"d{name}: error {error.max():.2e} above its bound at {(error > bound).sum()} entries"
        )
        # The bound is not vacuous: it stays within 1000x of the error actually made.
        assert bound.max() < 1000 * max(error.max().item(), torch.finfo(dtype).eps * want.abs().max().item())
