"""The notebook 12e checkers accept right answers written several ways and name the usual wrong ones."""

import pytest
import torch
import torch.nn.functional as F
from learner_answers import JUNK, has_chinese_entry, one_red_line

import attn_core as ac
from attn_core.exercises.kda import (
    check_kda_pair_decay,
    check_kda_step,
    check_kimi_forget_gate,
    forget_gate,
    kda_step,
    pair_decay,
)


def verdict(capsys, check, answer) -> tuple[bool, str]:
    ok = check(answer)
    return ok, capsys.readouterr().out


def read(state, k):
    return torch.einsum("bhkv,bhk->bhv", state, k)  # (B, H, Dv)


def outer(k, delta):
    return k[..., :, None] * delta[..., None, :]  # (B, H, Dk, Dv)


# --------------------------------------------------------------------------- right answers, written differently


def step_with_diag(state, k, v, g, beta):
    state = torch.diag_embed(g.exp()) @ state  # (B, H, Dk, Dk) @ (B, H, Dk, Dv)
    return state + outer(k, beta[..., None] * (v - read(state, k)))


def step_erase_form(state, k, v, g, beta):
    state = state * g.exp().unsqueeze(-1)
    eye = torch.eye(k.shape[-1], dtype=k.dtype)
    erase = eye - beta[..., None, None] * outer(k, k)  # (B, H, Dk, Dk)
    return erase @ state + beta[..., None, None] * outer(k, v)


def step_via_library(state, k, v, g, beta):
    # one token of ac.kda_rule: q is irrelevant to the state; scale 1
    _, new_state = ac.kda_rule(k[:, :, None], k[:, :, None], v[:, :, None], g[:, :, None], beta[:, :, None],
                               initial_state=state)  # fmt: skip
    return new_state


def decay_by_loop(g):
    size = g.shape[-2]
    out = torch.zeros(*g.shape[:-2], size, size, g.shape[-1], dtype=g.dtype)
    for i in range(size):
        for j in range(i + 1):
            out[..., i, j, :] = g[..., j + 1 : i + 1, :].sum(-2).exp()
    return out


def decay_masked_fill(g):
    cum = g.cumsum(-2)  # (..., C, Dk)
    future = torch.ones(g.shape[-2], g.shape[-2], dtype=torch.bool).triu(1)[..., None]
    return (cum[..., :, None, :] - cum[..., None, :, :]).masked_fill(future, float("-inf")).exp()


def decay_where_after(g):
    cum = g.cumsum(-2)
    past = torch.ones(g.shape[-2], g.shape[-2], dtype=torch.bool).tril()[..., None]
    diff = cum[..., :, None, :] - cum[..., None, :, :]
    return torch.where(past, diff.clamp(max=0).exp(), torch.zeros_like(diff))


def gate_log1p(pre, dt_bias, A_log):
    h, d = pre.shape[-2:]
    return -torch.exp(A_log).view(h, 1) * torch.log1p(torch.exp(pre + dt_bias.reshape(h, d)))


def gate_hf_bounded(pre, dt_bias, A_log):
    x = pre + dt_bias.view(1, 1, *pre.shape[-2:])
    soft = torch.where(x > 20.0, x, torch.log(1.0 + torch.exp(x)))
    return -A_log.exp()[None, None, :, None] * soft


def gate_logaddexp(pre, dt_bias, A_log):
    x = pre + dt_bias.unflatten(0, pre.shape[-2:])
    return -(A_log.exp().unsqueeze(-1) * torch.logaddexp(torch.zeros_like(x), x))


RIGHT = {
    check_kda_step: [kda_step, step_with_diag, step_erase_form, step_via_library],
    check_kda_pair_decay: [pair_decay, decay_by_loop, decay_masked_fill, decay_where_after],
    check_kimi_forget_gate: [forget_gate, gate_log1p, gate_hf_bounded, gate_logaddexp],
}


@pytest.mark.parametrize(
    "check, answer", [(c, a) for c, answers in RIGHT.items() for a in answers], ids=lambda x: x.__name__
)
def test_right_answers_pass(capsys, check, answer):
    ok, out = verdict(capsys, check, answer)
    assert ok and out.startswith("✅"), out


@pytest.mark.parametrize("check", RIGHT, ids=lambda c: c.__name__)
def test_stub_is_not_attempted(capsys, check):
    ok, out = verdict(capsys, check, lambda *args: ...)
    assert not ok and "not attempted" in out


@pytest.mark.parametrize("check", RIGHT, ids=lambda c: c.__name__)
@pytest.mark.parametrize("junk", range(len(JUNK)))
def test_junk_gets_one_red_line(capsys, check, junk):
    ok, out = verdict(capsys, check, lambda *args: JUNK[junk])
    assert not ok and one_red_line(out), out


# --------------------------------------------------------------------------- wrong answers, each named


def step_from(decay_rows, *, read_old=False, erase=True, beta_on_erase=True, use_beta=True, decay_after=False):
    def answer(state, k, v, g, beta):
        factor = decay_rows(g)  # broadcastable to (B, H, Dk, Dv)
        decayed = state if decay_after else state * factor
        b = beta if use_beta else torch.ones_like(beta)
        recalled = read(state if read_old else decayed, k) if erase else 0 * v
        correction = b[..., None] * v - (b[..., None] if beta_on_erase else 1) * recalled
        new = decayed + outer(k, correction)
        return new * factor if decay_after else new

    return answer


def rows(g):
    return g.exp()[..., :, None]


def step_in_place(state, k, v, g, beta):
    state.mul_(g.exp()[..., :, None])
    return state + outer(k, beta[..., None] * (v - read(state, k)))


WRONG_STEP = [
    (step_from(lambda g: g.exp()[..., None, :]), "value columns"),
    (step_from(lambda g: g.mean(-1).exp()[..., None, None]), "whole head"),
    (step_from(lambda g: g.exp().mean(-1)[..., None, None]), "whole head"),
    (step_from(lambda g: torch.ones_like(g)[..., :, None]), "no decay at all"),
    (step_from(rows, decay_after=True), "decayed after the write"),
    (step_from(rows, read_old=True), "before its decay"),
    (step_from(rows, erase=False), "erase term is missing"),
    (step_from(rows, use_beta=False), "beta is missing"),
    (step_from(rows, beta_on_erase=False), "beta multiplies v only"),
    (step_from(lambda g: g[..., :, None]), "log decay"),
    (step_from(lambda g: (-g).exp()[..., :, None]), "exp(−g)"),
    (lambda s, k, v, g, b: step_from(rows)(s, k, v, g, b) - s * rows(g), "only the write"),
    (step_in_place, "in place"),
    (lambda *a: kda_step(*a).transpose(-1, -2), "transposed"),
    (lambda *a: kda_step(*a)[..., 0], "must have shape"),
]


def factored(g):
    cum = g.cumsum(-2)
    past = torch.ones(g.shape[-2], g.shape[-2], dtype=g.dtype).tril()[..., None]
    return cum.exp()[..., :, None, :] * (-cum).exp()[..., None, :, :] * past


def ratio_of_exps(g):
    cum = g.cumsum(-2)  # exp(G_j) underflows to 0 in a long strong chunk: 0 / 0 = NaN
    future = torch.ones(g.shape[-2], g.shape[-2], dtype=torch.bool).triu(1)[..., None]
    return (cum.exp()[..., :, None, :] / cum.exp()[..., None, :, :]).masked_fill(future, 0.0)


def masked_to_inf(g):
    cum = g.cumsum(-2)  # masks the future to +inf: exp(+inf) = inf
    future = torch.ones(g.shape[-2], g.shape[-2], dtype=torch.bool).triu(1)[..., None]
    return (cum[..., :, None, :] - cum[..., None, :, :]).masked_fill(future, float("inf")).exp()


def multiplied_mask(g):
    cum = g.cumsum(-2)
    past = torch.ones(g.shape[-2], g.shape[-2], dtype=g.dtype).tril()[..., None]
    return (cum[..., :, None, :] - cum[..., None, :, :]).exp() * past


def unmasked(g):
    cum = g.cumsum(-2)
    return (cum[..., :, None, :] - cum[..., None, :, :]).exp()


def zero_before_exp(g):
    cum = g.cumsum(-2)
    future = torch.ones(g.shape[-2], g.shape[-2], dtype=torch.bool).triu(1)[..., None]
    return (cum[..., :, None, :] - cum[..., None, :, :]).masked_fill(future, 0.0).exp()


def inclusive(g):
    return decay_masked_fill(g) * g.exp()[..., None, :, :]  # [i, j] also decayed by g_j


def strict_lower(g):
    return decay_masked_fill(g) * (1 - torch.eye(g.shape[-2], dtype=g.dtype))[..., None]


def channel_cumsum(g):
    cum = g.cumsum(-1)
    future = torch.ones(g.shape[-2], g.shape[-2], dtype=torch.bool).triu(1)[..., None]
    return (cum[..., :, None, :] - cum[..., None, :, :]).masked_fill(future, float("-inf")).exp()


def head_mean(g):
    return decay_masked_fill(g.mean(-1, keepdim=True).expand_as(g))


def since_start(g):
    cum = g.cumsum(-2)
    out = cum[..., :, None, :].expand(*g.shape[:-2], g.shape[-2], g.shape[-2], g.shape[-1])
    future = torch.ones(g.shape[-2], g.shape[-2], dtype=torch.bool).triu(1)[..., None]
    return out.masked_fill(future, float("-inf")).exp()


WRONG_DECAY = [
    (factored, "exp(G_i)·exp(−G_j) overflows"),
    (ratio_of_exps, "exp(G_j) is 0"),
    (multiplied_mask, "mask multiplies after the exp"),
    (unmasked, "no causal mask"),
    (zero_before_exp, "masked with 0 before the exp"),
    (inclusive, "own token is counted"),
    (strict_lower, "diagonal is 0"),
    (lambda g: decay_masked_fill(g).transpose(-2, -3), "swapped"),
    (lambda g: decay_masked_fill(-g), "sign is flipped"),
    (channel_cumsum, "over the channels"),
    (head_mean, "one decay for all channels"),
    (since_start, "since the chunk start"),
    (lambda g: decay_masked_fill(g)[..., 0], "must have shape"),
    (masked_to_inf, "inf or NaN"),
]


def gate_with(soft=F.softplus, *, sign=-1.0, rate=lambda a: a.exp()[:, None], bias_inside=True, bias=True):
    def answer(pre, dt_bias, A_log):
        b = dt_bias.view(pre.shape[-2:]) if bias else 0.0
        x = soft(pre + b) if bias_inside else soft(pre) + b
        return sign * rate(A_log) * x

    return answer


WRONG_GATE = [
    (gate_with(sign=1.0), "sign is missing"),
    (gate_with(rate=lambda a: a[:, None]), "multiply by exp(A_log)"),
    (gate_with(rate=lambda a: (-a).exp()[:, None]), "exp(−A_log) inverts"),
    (gate_with(soft=lambda x: x), "softplus is missing"),
    (gate_with(soft=torch.sigmoid), "sigmoid caps"),
    (gate_with(soft=torch.relu), "relu is not softplus"),
    (gate_with(soft=torch.exp), "exp is not softplus"),
    (gate_with(bias_inside=False), "inside the softplus"),
    (gate_with(bias=False), "dt_bias is missing"),
    (lambda *a: forget_gate(*a).exp(), "factor exp(g)"),
    (gate_with(rate=lambda a: a.exp()[None, :]), "one rate per head"),
    (
        lambda pre, dt, a: -a.exp()[:, None] * F.softplus(pre + dt.view(pre.shape[-1], pre.shape[-2]).T),
        "head by head",
    ),
    (lambda *a: forget_gate(*a)[..., 0], "must have shape"),
]

WRONG = (
    [(check_kda_step, answer, named) for answer, named in WRONG_STEP]
    + [(check_kda_pair_decay, answer, named) for answer, named in WRONG_DECAY]
    + [(check_kimi_forget_gate, answer, named) for answer, named in WRONG_GATE]
)


@pytest.mark.parametrize("check, answer, named", WRONG, ids=[f"{c.__name__}-{m}" for c, _, m in WRONG])
def test_wrong_answers_are_named_in_both_languages(capsys, check, answer, named):
    ok, out = verdict(capsys, check, answer)
    assert not ok and one_red_line(out) and named in out, out
    assert has_chinese_entry(out), f"no Chinese catalog entry for: {out}"


def test_every_grader_rejects_ten_named_mistakes():
    counts = {check: sum(c is check for c, _, _ in WRONG) for check in RIGHT}
    assert all(count >= 10 for count in counts.values()), counts


def test_pair_decay_reference_is_kda_rules_chunk():
    # The reference the grader uses equals the decay inside ac.kda_rule's chunks: a chunk's read of the pairs
    # written in it, o_i = Σ_j (q_i ∘ decay[i, j]) · k_j v_j (beta = 1, keys orthogonal so the erase does nothing).
    g = -torch.rand(1, 1, 4, 4, dtype=torch.float64)  # (B, H, C, Dk)
    k = torch.eye(4, dtype=torch.float64)[None, None]  # (1, 1, C, Dk) orthogonal unit keys
    q = torch.randn(1, 1, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    v = torch.randn(1, 1, 4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    out, _ = ac.kda_rule(q, k, v, g, torch.ones(1, 1, 4, dtype=torch.float64), scale=1.0, chunk_size=4)
    weights = torch.einsum("bhic,bhjc,bhijc->bhij", q, k, pair_decay(g))  # (B, H, C, C)
    torch.testing.assert_close(out, weights @ v, rtol=0, atol=1e-12)
