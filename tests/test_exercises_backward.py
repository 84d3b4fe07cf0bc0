"""Graders of notebook 12 (attn_core.exercises.backward): the stub fails, right answers written
several ways pass, each typical mistake gets its own diagnosis, and junk gets one ❌ line.

The references themselves are checked against torch autograd and attn_core in float64."""

import math
from operator import itemgetter

import pytest
import torch
from learner_answers import JUNK, one_red_line, stub

import attn_core as ac
from attn_core.exercises import backward as ex

# ----- the references are right -------------------------------------------------------------------


def test_softmax_reference_is_autograds_vector_jacobian_product():
    scores = torch.randn(3, 6, dtype=torch.float64, requires_grad=True)  # (rows, L)
    grad = torch.randn(3, 6, dtype=torch.float64)  # (rows, L)
    probs = scores.softmax(-1)  # (rows, L)
    (expected,) = torch.autograd.grad(probs, scores, grad)
    torch.testing.assert_close(ex.reference_softmax_backward(probs.detach(), grad), expected, rtol=0, atol=1e-14)


def test_attention_backward_reference_is_autograd():
    q = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)  # (H, Lq, D)
    k = torch.randn(2, 7, 4, dtype=torch.float64, requires_grad=True)  # (H, Lk, D)
    v = torch.randn(2, 7, 3, dtype=torch.float64, requires_grad=True)  # (H, Lk, Dv)
    out, _ = ac.scaled_dot_product_attention(q, k, v)  # (H, Lq, Dv)
    grad_out = torch.randn_like(out)  # (H, Lq, Dv)
    expected = torch.autograd.grad(out, (q, k, v), grad_out)
    lse = torch.logsumexp(q @ k.transpose(-2, -1) / 2, dim=-1)  # (H, Lq), scale 1/√4
    ours = ex.reference_attention_backward(
        q.detach(), k.detach(), v.detach(), out.detach(), lse.detach(), grad_out, 0.5
    )
    for got, want in zip(ours, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_merge_reference_is_one_pass_over_both_sets():
    q = torch.randn(1, 2, 4, 8, dtype=torch.float64)  # (B, H, Lq, D)
    k = torch.randn(1, 2, 10, 8, dtype=torch.float64)  # (B, H, Lk, D)
    v = torch.randn(1, 2, 10, 8, dtype=torch.float64)

    def partial(keys, values):
        scores = q @ keys.transpose(-2, -1) / math.sqrt(8)  # (B, H, Lq, n)
        return scores.softmax(-1) @ values, torch.logsumexp(scores, -1)  # (B, H, Lq, D), (B, H, Lq)

    out, lse = ex.reference_merge(*partial(k[..., :3, :], v[..., :3, :]), *partial(k[..., 3:, :], v[..., 3:, :]))
    full_out, full_lse = partial(k, v)
    torch.testing.assert_close(out, full_out, rtol=0, atol=1e-12)
    torch.testing.assert_close(lse, full_lse, rtol=0, atol=1e-12)


def test_merge_reference_equals_ac_merge_attention_on_the_grader_cases():
    for _, lse_a, lse_b in ex._merge_cases():
        inputs = ex._merge_inputs(lse_a, lse_b)
        for got, want in zip(ex.reference_merge(*inputs), ac.merge_attention(*inputs), strict=True):
            assert torch.equal(got.isinf(), want.isinf()) and not got.isnan().any()
            torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


# ----- exercise 1: softmax backward -----------------------------------------------------------------


def softmax_formula(p, dp):
    return p * (dp - (p * dp).sum(-1, keepdim=True))


def softmax_jacobian(p, dp):
    rows = p.reshape(-1, p.shape[-1])  # (N, L)
    jac = torch.diag_embed(rows) - rows[:, :, None] * rows[:, None, :]  # (N, L, L) diag(p) − p pᵀ
    return (jac @ dp.reshape(-1, p.shape[-1], 1)).reshape(p.shape)  # symmetric: Jᵀ v = J v


def softmax_autograd(p, dp):
    scores = torch.log(p).detach().requires_grad_()  # softmax(log p) = p for rows that sum to 1
    (grad,) = torch.autograd.grad(scores.softmax(-1), scores, dp)
    return grad


def softmax_loop(p, dp):
    out = torch.empty_like(p)
    rows, flat_dp = p.reshape(-1, p.shape[-1]), dp.reshape(-1, p.shape[-1])
    flat = out.view(-1, p.shape[-1])
    for r in range(rows.shape[0]):
        dot = sum(float(rows[r, j] * flat_dp[r, j]) for j in range(p.shape[-1]))
        for i in range(p.shape[-1]):
            flat[r, i] = rows[r, i] * (flat_dp[r, i] - dot)
    return out


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (None, False, "not attempted"),
        (stub, False, "not attempted"),
        (lambda p, dp: ..., False, "not attempted"),
        (softmax_formula, True, "✅"),
        (softmax_jacobian, True, "✅"),
        (softmax_autograd, True, "✅"),
        (softmax_loop, True, "✅"),
        (lambda p, dp: dp, False, "darknet"),
        (lambda p, dp: p * dp, False, "the − D term is missing"),
        (lambda p, dp: p * (dp - dp.sum(-1, keepdim=True)), False, "D must weight dP by the probabilities"),
        (lambda p, dp: p * (dp - dp.mean(-1, keepdim=True)), False, "not the mean of dP"),
        (lambda p, dp: -softmax_formula(p, dp), False, "the sign is flipped"),
        (lambda p, dp: dp - p * dp.sum(-1, keepdim=True), False, "the backward of log_softmax"),
        (
            lambda p, dp: p * (dp - (p * dp).sum(-2, keepdim=True)) if p.ndim > 1 else softmax_formula(p, dp),
            False,
            "wrong axis",
        ),  # fmt: skip
        (lambda p, dp: softmax_formula(p, dp).float(), False, "keep their dtype"),
        (lambda p, dp: softmax_formula(p, dp)[..., 1:], False, "has shape"),
        (lambda p, dp: softmax_formula(p, dp) * 1.01, False, "largest error"),
    ],
)
def test_softmax_backward_table(capsys, answer, passes, phrase):
    assert ex.check_softmax_backward(answer) is passes
    out = capsys.readouterr().out
    assert phrase in out, out


# ----- exercise 2: FlashAttention backward ------------------------------------------------------------


def flash_formula(q, k, v, out, lse, grad_out, scale):
    return ex.reference_attention_backward(q, k, v, out, lse, grad_out, scale)


def flash_autograd(q, k, v, out, lse, grad_out, scale):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    recomputed = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1) @ v  # (..., Lq, Dv)
    return torch.autograd.grad(recomputed, (q, k, v), grad_out)


def flash_tiled(q, k, v, out, lse, grad_out, scale):
    """Loops over key tiles of 2, recomputing each P tile from lse: the notebook's algorithm."""
    row_dot = (grad_out * out).sum(-1, keepdim=True)  # (..., Lq, 1)
    dq = torch.zeros_like(q)
    dk, dv = torch.zeros_like(k), torch.zeros_like(v)
    for start in range(0, k.shape[-2], 2):
        kt, vt = k[..., start : start + 2, :], v[..., start : start + 2, :]
        probs = torch.exp(q @ kt.transpose(-2, -1) * scale - lse.unsqueeze(-1))  # (..., Lq, T)
        dv[..., start : start + 2, :] = probs.transpose(-2, -1) @ grad_out
        grad_scores = probs * (grad_out @ vt.transpose(-2, -1) - row_dot)  # (..., Lq, T)
        dq += grad_scores @ kt * scale
        dk[..., start : start + 2, :] = grad_scores.transpose(-2, -1) @ q * scale
    return dq, dk, dv


def flash_with_p_from_softmax(q, k, v, out, lse, grad_out, scale):
    probs = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)  # ignores lse, still right
    grad_scores = probs * (grad_out @ v.transpose(-2, -1) - (probs * (grad_out @ v.transpose(-2, -1))).sum(-1, True))
    return grad_scores @ k * scale, grad_scores.transpose(-2, -1) @ q * scale, probs.transpose(-2, -1) @ grad_out


def _mistake(index_of_diagnosis):
    """The grader's own mistake number i, so the table and the grader cannot drift apart."""

    def answer(q, k, v, out, lse, grad_out, scale):
        mistakes = ex._backward_mistakes(q, k, v, out, lse, grad_out, scale)
        return mistakes[min(index_of_diagnosis, len(mistakes) - 1)][0]

    return answer


def flash_p_not_transposed(q, k, v, out, lse, grad_out, scale):
    dq, dk, _ = flash_formula(q, k, v, out, lse, grad_out, scale)
    probs = torch.exp(q @ k.transpose(-2, -1) * scale - lse.unsqueeze(-1))
    return dq, dk, probs @ grad_out  # (..., Lq, Dv): right shape only when Lq == Lk, the grader's first case


def flash_fixed_scale(q, k, v, out, lse, grad_out, scale):
    """Ignores its `scale` argument and hard-codes 1/√D: right only when the caller's scale is 1/√D."""
    return flash_formula(q, k, v, out, lse, grad_out, q.shape[-1] ** -0.5)


def flash_sign_flipped(q, k, v, out, lse, grad_out, scale):
    probs = torch.exp(q @ k.transpose(-2, -1) * scale - lse.unsqueeze(-1))  # (..., Lq, Lk)
    row_dot = (grad_out * out).sum(-1, keepdim=True)  # (..., Lq, 1)
    grad_scores = probs * (row_dot - grad_out @ v.transpose(-2, -1))  # P ∘ (D − dP): sign flipped
    return grad_scores @ k * scale, grad_scores.transpose(-2, -1) @ q * scale, probs.transpose(-2, -1) @ grad_out


def flash_d_from_dout_only(q, k, v, out, lse, grad_out, scale):
    probs = torch.exp(q @ k.transpose(-2, -1) * scale - lse.unsqueeze(-1))
    grad_scores = probs * (grad_out @ v.transpose(-2, -1) - grad_out.sum(-1, keepdim=True))
    return grad_scores @ k * scale, grad_scores.transpose(-2, -1) @ q * scale, probs.transpose(-2, -1) @ grad_out


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (None, False, "not attempted"),
        (stub, False, "not attempted"),
        (lambda *args: ..., False, "not attempted"),
        (flash_formula, True, "✅"),
        (flash_autograd, True, "✅"),
        (flash_tiled, True, "✅"),
        (flash_with_p_from_softmax, True, "✅"),
        (flash_d_from_dout_only, False, "not rowsum(dO)"),
        (_mistake(1), False, "the − D term is missing"),
        (_mistake(2), False, "you used exp(S)"),
        (_mistake(3), False, "recompute S with the scale"),
        (_mistake(4), False, "miss the factor scale"),
        (flash_p_not_transposed, False, "not P dO"),
        (lambda *a: itemgetter(1, 0, 2)(flash_formula(*a)), False, "swapped dq and dk"),
        (flash_fixed_scale, False, "instead of the `scale` you were given (0.3)"),
        (flash_sign_flipped, False, "dq and dk have the wrong sign, dV is right"),
        (lambda *a: flash_formula(*a)[:2], False, "return three tensors"),
        (lambda *a: tuple(t.float() for t in flash_formula(*a)), False, "keep their dtype"),
        (lambda *a: (flash_formula(*a)[0] * 1.1, *flash_formula(*a)[1:]), False, "dq wrong. dV is right"),
        (lambda *a: (*flash_formula(*a)[:2], flash_formula(*a)[2] * 1.1), False, "dv wrong. Start from dV"),
    ],
)
def test_attention_backward_table(capsys, answer, passes, phrase):
    assert ex.check_attention_backward(answer) is passes
    out = capsys.readouterr().out
    assert phrase in out, out


def test_attention_backward_swap_hint_only_where_the_swap_explains_the_shape(capsys):
    """A float32 answer gets the dtype message alone; a swap shows in the shapes where Lq != Lk."""
    assert not ex.check_attention_backward(lambda *a: tuple(t.float() for t in flash_formula(*a)))
    out = capsys.readouterr().out
    assert "keep their dtype" in out and "swap" not in out, out

    def swapped_when_shapes_differ(*args):
        grads = flash_formula(*args)
        return itemgetter(1, 0, 2)(grads) if args[0].shape != args[1].shape else grads

    assert not ex.check_attention_backward(swapped_when_shapes_differ)
    out = capsys.readouterr().out
    assert "dq has shape (7, 4), expected (5, 4). Did you swap dq and dk?" in out, out


def test_attention_backward_accepts_ac_tiled_attention_gradients(capsys):
    def through_tiled(q, k, v, out, lse, grad_out, scale):
        out_q, k_in, v_in = q, k, v
        q, k, v = (t.detach().reshape(-1, *t.shape[-2:]).requires_grad_() for t in (q, k, v))  # (N, L, D): 3-D
        result = ac.tiled_attention(q, k, v, scale=scale, block_size=2)  # differentiable, tile by tile
        grads = torch.autograd.grad(result, (q, k, v), grad_out.reshape(result.shape))
        return tuple(g.reshape(t.shape) for g, t in zip(grads, (out_q, k_in, v_in), strict=True))

    assert ex.check_attention_backward(through_tiled)
    assert "✅" in capsys.readouterr().out


# ----- exercise 3: merge two partial results ------------------------------------------------------------


def merge_formula(out_a, lse_a, out_b, lse_b):
    return ex.reference_merge(out_a, lse_a, out_b, lse_b)


def merge_max_trick(out_a, lse_a, out_b, lse_b):
    m = torch.maximum(lse_a, lse_b)  # (..., Lq)
    m = torch.where(m == -math.inf, 0.0, m)
    wa, wb = torch.exp(lse_a - m), torch.exp(lse_b - m)  # (..., Lq)
    total = wa + wb
    safe = torch.where(total > 0, total, 1.0)
    out = (wa / safe).unsqueeze(-1) * out_a + (wb / safe).unsqueeze(-1) * out_b
    return out, torch.where(total > 0, m + torch.log(safe), -math.inf)


def merge_sigmoid(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)  # (..., Lq)
    share_a = torch.sigmoid(lse_a - lse_b).nan_to_num(0.0).unsqueeze(-1)  # e^a / (e^a + e^b)
    return share_a * out_a + (1 - share_a) * out_b * (lse_b > -math.inf).unsqueeze(-1), lse


def merge_no_max(out_a, lse_a, out_b, lse_b):
    ea, eb = torch.exp(lse_a), torch.exp(lse_b)  # overflows at 800
    return (ea.unsqueeze(-1) * out_a + eb.unsqueeze(-1) * out_b) / (ea + eb).unsqueeze(-1), torch.log(ea + eb)


def merge_nan_when_empty(out_a, lse_a, out_b, lse_b):
    m = torch.maximum(lse_a, lse_b)  # -inf - -inf = NaN for an empty row
    wa, wb = torch.exp(lse_a - m), torch.exp(lse_b - m)
    return (wa.unsqueeze(-1) * out_a + wb.unsqueeze(-1) * out_b) / (wa + wb).unsqueeze(-1), m + torch.log(wa + wb)


def with_lse(fn_out, fn_lse):
    def merge(out_a, lse_a, out_b, lse_b):
        out, lse = merge_formula(out_a, lse_a, out_b, lse_b)
        return fn_out(out, out_a, out_b, lse_a, lse_b), fn_lse(lse, lse_a, lse_b)

    return merge


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (None, False, "not attempted"),
        (stub, False, "not attempted"),
        (lambda *args: ..., False, "not attempted"),
        (merge_formula, True, "✅"),
        (merge_max_trick, True, "✅"),
        (merge_sigmoid, True, "✅"),
        (ac.merge_attention, True, "✅"),
        (merge_no_max, False, "overflows"),
        (merge_nan_when_empty, False, "StatsFuns.jl #22"),
        (with_lse(lambda o, a, b, la, lb: (a + b) / 2, lambda lse, la, lb: lse), False, "a plain average"),
        (with_lse(lambda o, a, b, la, lb: a + b, lambda lse, la, lb: lse), False, "double-counts"),
        (
            with_lse(
                lambda o, a, b, la, lb: (la[..., None] * a + lb[..., None] * b) / (la + lb)[..., None],
                lambda lse, la, lb: lse,
            ),
            False,
            "not by the log-sum-exps",
        ),  # fmt: skip
        (with_lse(lambda o, *r: o, lambda lse, la, lb: torch.maximum(la, lb)), False, "not max(lse_a, lse_b)"),
        (with_lse(lambda o, *r: o, lambda lse, la, lb: la + lb), False, "not lse_a + lse_b"),
        (lambda *a: merge_formula(*a)[0], False, "return two tensors"),
        (with_lse(lambda o, *r: o * 1.1, lambda lse, la, lb: lse), False, "out is wrong"),
        (with_lse(lambda o, *r: o, lambda lse, la, lb: lse + 0.1), False, "the merged lse is wrong"),
    ],
)
def test_merge_table(capsys, answer, passes, phrase):
    assert ex.check_merge_partials(answer) is passes
    out = capsys.readouterr().out
    assert phrase in out, out


# ----- never raises: whatever the learner returns, a check prints one ❌ line and returns False -----


@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
@pytest.mark.parametrize("check", [ex.check_softmax_backward, ex.check_attention_backward, ex.check_merge_partials])
def test_checks_never_raise(check, junk, capsys):
    assert check(lambda *args, **kwargs: junk) is False
    assert one_red_line(capsys.readouterr().out)
    assert check(junk) is False  # the value itself instead of a function
    assert one_red_line(capsys.readouterr().out)
