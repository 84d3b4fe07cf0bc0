"""The notebook 12d checkers accept right answers and name the usual wrong ones."""

import pytest
import torch
import torch.nn.functional as F
from learner_answers import JUNK, one_red_line

from attn_core.exercises.linear_attention import (
    check_chunk_decay,
    check_delta_step,
    check_expand_heads,
    check_gated_norm,
)


def verdict(capsys, check, answer) -> tuple[bool, str]:
    ok = check(answer)
    return ok, capsys.readouterr().out


def read(state, k):
    return torch.einsum("bhkv,bhk->bhv", state, k)  # (B, H, Dv)


def outer(k, delta):
    return k[..., :, None] * delta[..., None, :]  # (B, H, Dk, Dv)


def right_step(state, k, v, g, beta):
    state = state * g.exp()[..., None, None]
    return state + outer(k, beta[..., None] * (v - read(state, k)))


def right_decay(g):
    cum = g.cumsum(-1)
    size = g.shape[-1]
    future = torch.ones(size, size, dtype=torch.bool).triu(1)
    return (cum[..., :, None] - cum[..., None, :]).masked_fill(future, float("-inf")).exp()


def right_norm(o, z, weight):
    return weight * o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + 1e-6) * F.silu(z)


RIGHT = {
    check_delta_step: right_step,
    check_expand_heads: lambda qk, hv: qk.repeat_interleave(hv // qk.shape[1], dim=1),
    check_chunk_decay: right_decay,
    check_gated_norm: right_norm,
}


@pytest.mark.parametrize("check", RIGHT, ids=lambda c: c.__name__)
def test_right_answer_passes_and_stub_is_not_attempted(capsys, check):
    ok, out = verdict(capsys, check, RIGHT[check])
    assert ok and out.startswith("✅")
    ok, out = verdict(capsys, check, lambda *args: ...)
    assert not ok and "not attempted" in out


@pytest.mark.parametrize("check", RIGHT, ids=lambda c: c.__name__)
@pytest.mark.parametrize("junk", range(len(JUNK)))
def test_junk_gets_one_red_line(capsys, check, junk):
    ok, out = verdict(capsys, check, lambda *args: JUNK[junk])
    assert not ok and one_red_line(out), out


def decay_after_write(state, k, v, g, beta):
    return (state + outer(k, beta[..., None] * (v - read(state, k)))) * g.exp()[..., None, None]


def no_erase(state, k, v, g, beta):
    return state * g.exp()[..., None, None] + outer(k, beta[..., None] * v)


def erase_reads_old_state(state, k, v, g, beta):
    return state * g.exp()[..., None, None] + outer(k, beta[..., None] * (v - read(state, k)))


def no_beta(state, k, v, g, beta):
    state = state * g.exp()[..., None, None]
    return state + outer(k, v - read(state, k))


def g_as_factor(state, k, v, g, beta):
    state = state * g[..., None, None]
    return state + outer(k, beta[..., None] * (v - read(state, k)))


def in_place(state, k, v, g, beta):
    state.mul_(g.exp()[..., None, None])
    return state + outer(k, beta[..., None] * (v - read(state, k)))


def transposed(state, k, v, g, beta):
    return right_step(state, k, v, g, beta).transpose(-1, -2)


def overflowing(g):
    cum = g.cumsum(-1)
    return (cum.exp()[..., :, None] * (-cum).exp()[..., None, :]).tril()


def masked_after_exp(g):
    # Subtracts first (right) but masks by multiplying after the exp: inf · 0 = NaN above the diagonal.
    cum = g.cumsum(-1)
    future_is_zero = torch.ones(g.shape[-1], g.shape[-1], dtype=g.dtype).tril()
    return (cum[..., :, None] - cum[..., None, :]).exp() * future_is_zero


def unmasked(g):
    cum = g.clamp(min=-1).cumsum(-1)
    return (cum[..., :, None] - cum[..., None, :]).exp()


def decay_transposed(g):
    return right_decay(g).transpose(-1, -2)


def exclusive(g):
    return right_decay(torch.cat([torch.zeros_like(g[..., :1]), g[..., :-1]], dim=-1))


WRONG = [
    (check_delta_step, decay_after_write, "decayed after the write"),
    (check_delta_step, no_erase, "erase term is missing"),
    (check_delta_step, erase_reads_old_state, "before its decay"),
    (check_delta_step, no_beta, "beta is missing"),
    (check_delta_step, g_as_factor, "log decay"),
    (check_delta_step, in_place, "in place"),
    (check_delta_step, transposed, "transposed"),
    (check_expand_heads, lambda qk, hv: qk.repeat(1, hv // qk.shape[1], 1, 1), "`repeat`"),
    (check_expand_heads, lambda qk, hv: qk.flip(1).repeat_interleave(hv // qk.shape[1], dim=1), "h // "),
    (check_expand_heads, lambda qk, hv: qk, "must have shape"),
    (check_chunk_decay, overflowing, "exp(G_i)·exp(−G_j) overflows"),
    (check_chunk_decay, masked_after_exp, "masked after the exp"),
    (check_chunk_decay, unmasked, "above the diagonal"),
    (check_chunk_decay, decay_transposed, "transposed"),
    (check_chunk_decay, exclusive, "off by one"),
    (check_chunk_decay, lambda g: right_decay(g)[..., 0, :], "must have shape"),
    (check_gated_norm, lambda o, z, w: right_norm(o, z, 1 + w), "(1 + weight)"),
    (check_gated_norm, lambda o, z, w: right_norm(o * F.silu(z), torch.zeros_like(z) + 40, w) / 40, "after the norm"),
    (check_gated_norm, lambda o, z, w: right_norm(o, z, w) / z, "not sigmoid(z)"),
    (check_gated_norm, lambda o, z, w: right_norm(o, z, w) / F.silu(z), "gate silu(z) is missing"),
    (check_gated_norm, lambda o, z, w: 2 * right_norm(o, z, w), "expected weight"),
]


@pytest.mark.parametrize("check, answer, named", WRONG, ids=[f"{c.__name__}-{m}" for c, _, m in WRONG])
def test_wrong_answers_are_named(capsys, check, answer, named):
    ok, out = verdict(capsys, check, answer)
    assert not ok and one_red_line(out) and named in out, out
