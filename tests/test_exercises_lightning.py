"""The notebook 12g checkers accept right answers (several ways of writing each) and name the usual wrong ones."""

import math

import pytest
import torch
from learner_answers import JUNK, has_chinese_entry, one_red_line

import attn_core as ac
from attn_core.exercises.lightning import check_intra_block, check_slopes, check_state_update

F64 = torch.float64


def verdict(capsys, check, answer) -> tuple[bool, str]:
    ok = check(answer)
    return ok, capsys.readouterr().out


# --------------------------------------------------------------------------- right answers, several ways


def slopes_hf(n, layer, layers):
    base = 1 / (2 ** (8 / n))
    return base ** (torch.arange(n, dtype=F64) + 1) * (1 - layer / (layers - 1 + 1e-5) + 1e-5)


def slopes_float32(n, layer, layers):
    heads = torch.arange(1, n + 1)  # int64: 2 ** (float) promotes to float32
    return 2 ** (-8 * heads / n) * (1 - layer / (layers - 1 + 1e-5) + 1e-5)


def slopes_loop(n, layer, layers):
    factor = 1 - layer / (layers - 1 + 1e-5) + 1e-5
    return torch.tensor([math.pow(2, -8 * (h + 1) / n) * factor for h in range(n)], dtype=F64)


def slopes_exp(n, layer, layers):
    heads = torch.arange(n, dtype=F64) + 1
    return torch.exp(-math.log(2) * 8 * heads / n) * (1 - layer / (layers - 1 + 1e-5) + 1e-5)


def decay(s, size, dtype=F64):
    gap = torch.arange(size, dtype=dtype)[:, None] - torch.arange(size, dtype=dtype)[None, :]
    return torch.where(gap >= 0, torch.exp(-s[:, None, None] * gap.clamp(min=0)), 0.0)


def intra_right(q, k, v, s):
    return ((q @ k.transpose(-1, -2)) * decay(s, q.shape[2])) @ v


def intra_loop(q, k, v, s):  # the recurrence inside the block, from a zero state
    state = torch.zeros(*q.shape[:2], q.shape[-1], v.shape[-1], dtype=q.dtype)
    outs = []
    for t in range(q.shape[2]):
        state = torch.exp(-s)[:, None, None] * state + k[:, :, t, :, None] * v[:, :, t, None, :]
        outs.append(torch.einsum("bhk,bhkv->bhv", q[:, :, t], state))
    return torch.stack(outs, dim=2)


def intra_library(q, k, v, s):
    return ac.lightning_attention(q, k, v, s, block_size=q.shape[2])[0]


def intra_log_space(q, k, v, s):
    size = q.shape[2]
    gap = torch.arange(size, dtype=q.dtype)[:, None] - torch.arange(size, dtype=q.dtype)
    log_decay = (-s[:, None, None] * gap).masked_fill(gap < 0, float("-inf"))
    return torch.einsum("bhij,bhjd->bhid", torch.einsum("bhid,bhjd->bhij", q, k) * log_decay.exp(), v)


def state_right(state, k, v, s):
    size = k.shape[2]
    to_end = torch.exp(-s[:, None, None] * (size - 1 - torch.arange(size, dtype=k.dtype))[:, None])
    return torch.exp(-s * size)[:, None, None] * state + (k * to_end).transpose(-1, -2) @ v


def state_loop(state, k, v, s):
    for t in range(k.shape[2]):
        state = torch.exp(-s)[:, None, None] * state + k[:, :, t, :, None] * v[:, :, t, None, :]
    return state


def state_library(state, k, v, s):
    return ac.lightning_attention(torch.zeros_like(k), k, v, s, block_size=k.shape[2], initial_state=state)[1]


def state_einsum(state, k, v, s):
    size = k.shape[2]
    age = size - 1 - torch.arange(size, dtype=k.dtype)
    weights = torch.exp(-s[:, None] * age)  # (H, b)
    return torch.exp(-s * size)[:, None, None] * state + torch.einsum("hj,bhjk,bhjv->bhkv", weights, k, v)


RIGHT = [
    (check_slopes, ac.lightning_slopes),
    (check_slopes, slopes_hf),
    (check_slopes, slopes_float32),
    (check_slopes, slopes_loop),
    (check_slopes, slopes_exp),
    (check_intra_block, intra_right),
    (check_intra_block, intra_loop),
    (check_intra_block, intra_library),
    (check_intra_block, intra_log_space),
    (check_state_update, state_right),
    (check_state_update, state_loop),
    (check_state_update, state_library),
    (check_state_update, state_einsum),
]
CHECKS = [check_slopes, check_intra_block, check_state_update]


@pytest.mark.parametrize("check, answer", RIGHT, ids=[f"{c.__name__}-{a.__name__}" for c, a in RIGHT])
def test_right_answers_pass(capsys, check, answer):
    ok, out = verdict(capsys, check, answer)
    assert ok and out.startswith("✅"), out


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_stub_is_not_attempted(capsys, check):
    ok, out = verdict(capsys, check, lambda *args: ...)
    assert not ok and "not attempted" in out


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("junk", range(len(JUNK)))
def test_junk_gets_one_red_line(capsys, check, junk):
    ok, out = verdict(capsys, check, lambda *args: JUNK[junk])
    assert not ok and one_red_line(out), out


# --------------------------------------------------------------------------- wrong answers, each named


def factor(layer, layers):
    return 1 - layer / (layers - 1 + 1e-5) + 1e-5


def heads(n):
    return torch.arange(n, dtype=F64)


WRONG_SLOPES = [
    (lambda n, i, L: 2 ** (-8 * heads(n) / n) * factor(i, L), "exponent starts at 0"),
    (lambda n, i, L: 2 ** (8 * (heads(n) + 1) / n) * factor(i, L), "sign is flipped"),
    (lambda n, i, L: (1 / (2**8 / n)) ** (heads(n) + 1) * factor(i, L), "operator precedence"),
    (lambda n, i, L: torch.exp(-8 * (heads(n) + 1) / n) * factor(i, L), "not e"),
    (lambda n, i, L: ac.lightning_slopes(n, i, L).flip(0), "reverse order"),
    (lambda n, i, L: 2 ** (-8 * (heads(n) + 1) / n) * (i / (L - 1 + 1e-5) + 1e-5), "inverted"),
    (lambda n, i, L: 2 ** (-8 * (heads(n) + 1) / n) * (1 - i / (L - 1)), "1e-5 guards are missing"),
    (lambda n, i, L: 2 ** (-8 * (heads(n) + 1) / n) * (1 - i / (L + 1e-5) + 1e-5), "off by one in depth"),
    (lambda n, i, L: torch.exp(-ac.lightning_slopes(n, i, L)), "decay factor exp(−s)"),
    (lambda n, i, L: torch.log2(ac.lightning_slopes(n, i, L)), "log2"),
    (lambda n, i, L: 2 ** (-8 * (heads(n) + 1) / n), "layer factor is missing"),
    (lambda n, i, L: ac.lightning_slopes(n, i, L)[:, None, None], "slope_rate buffer"),
    (lambda n, i, L: ac.lightning_slopes(n, i, L)[:-1], "must have shape"),
    (lambda n, i, L: ac.lightning_slopes(n, i, L).tolist(), "as a tensor"),
]


def scores(q, k):
    return q @ k.transpose(-1, -2)


def masked(s, size, distance, keep):
    return torch.where(keep, torch.exp(-s[:, None, None] * distance), 0.0)


def gap(size):
    return torch.arange(size, dtype=F64)[:, None] - torch.arange(size, dtype=F64)[None, :]


def softmaxed(q, k, v, s):
    g = gap(q.shape[2])
    logits = scores(q, k) - s[:, None, None] * g.clamp(min=0)
    return torch.softmax(logits.masked_fill(g < 0, float("-inf")), -1) @ v


def normalised(q, k, v, s):
    w = scores(q, k) * decay(s, q.shape[2])
    return (w / w.sum(-1, keepdim=True)) @ v


WRONG_INTRA = [
    (lambda q, k, v, s: (scores(q, k) * torch.exp(-s[:, None, None] * gap(q.shape[2]).abs())) @ v, "future leaks"),
    (lambda q, k, v, s: (scores(q, k) * torch.exp(-s[:, None, None] * gap(q.shape[2]))) @ v, "mask is missing"),
    (lambda q, k, v, s: (scores(q, k) * decay(-s, q.shape[2])) @ v, "sign is flipped"),
    (lambda q, k, v, s: (scores(q, k) * torch.ones(q.shape[2], q.shape[2], dtype=F64).tril()) @ v, "decay is missing"),
    (softmaxed, "no softmax"),
    (lambda q, k, v, s: intra_right(q, k, v, s) / math.sqrt(q.shape[-1]), "no 1/√d"),
    (
        lambda q, k, v, s: (scores(q, k) * decay(s, q.shape[2]) * torch.exp(-s)[:, None, None]) @ v,
        "diagonal is decayed",
    ),
    (lambda q, k, v, s: (scores(q, k) * decay(s, q.shape[2]).transpose(-1, -2)) @ v, "transposed"),
    (lambda q, k, v, s: (scores(q, k) * decay(s, q.shape[2]).tril(-1)) @ v, "diagonal is masked"),
    (lambda q, k, v, s: intra_right(q, k, v, s.flip(0)), "in reverse"),
    (lambda q, k, v, s: intra_right(q, k, v, s[:1].expand_as(s)), "slopes[0]"),
    (
        lambda q, k, v, s: (scores(q, k) * masked(s, q.shape[2], gap(q.shape[2])[:, :1] + 1, gap(q.shape[2]) >= 0)) @ v,
        "inter-block",
    ),
    (
        lambda q, k, v, s: (
            (
                scores(q, k)
                * masked(s, q.shape[2], q.shape[2] - 1 - torch.arange(q.shape[2], dtype=F64), gap(q.shape[2]) >= 0)
            )
            @ v
        ),
        "block's end",
    ),
    (normalised, "normalised"),
    (lambda q, k, v, s: (scores(q, k) * decay(s.float(), q.shape[2], torch.float32)) @ v, "float32"),
    (lambda q, k, v, s: intra_right(q, k, v, s).transpose(-1, -2), "must have shape"),
]


def update(state, k, v, s, state_age, key_age):
    writes = (k * torch.exp(-s[:, None, None] * key_age[:, None])).transpose(-1, -2) @ v
    return torch.exp(-s * state_age)[:, None, None] * state + writes


def to_end(k):
    return k.shape[2] - 1 - torch.arange(k.shape[2], dtype=F64)


def in_place(state, k, v, s):
    state.mul_(torch.exp(-s * k.shape[2])[:, None, None])
    return update(state, k, v, s, 0.0, to_end(k))


WRONG_STATE = [
    (lambda S, k, v, s: update(S, k, v, s, 0.0, to_end(k)), "not decayed"),
    (lambda S, k, v, s: update(S, k, v, s, 1.0, to_end(k)), "one token only"),
    (lambda S, k, v, s: update(S, k, v, s, k.shape[2] - 1.0, to_end(k)), "b − 1 tokens"),
    (lambda S, k, v, s: update(S, k, v, s, float(k.shape[2]), to_end(k) + 1), "off by one"),
    (lambda S, k, v, s: update(S, k, v, s, float(k.shape[2]), torch.arange(k.shape[2], dtype=F64)), "wrong end"),
    (lambda S, k, v, s: update(S, k, v, s, float(k.shape[2]), torch.zeros(k.shape[2], dtype=F64)), "not decayed: key"),
    (
        lambda S, k, v, s: torch.exp(-s * k.shape[2])[:, None, None] * update(S, k, v, s, 0.0, to_end(k)),
        "after the write",
    ),
    (lambda S, k, v, s: update(S, k, v, -s, float(k.shape[2]), to_end(k)), "sign is flipped"),
    (lambda S, k, v, s: update(S, k, v, s.flip(0), float(k.shape[2]), to_end(k)), "in reverse"),
    (lambda S, k, v, s: update(S, k, v, s[:1].expand_as(s), float(k.shape[2]), to_end(k)), "slopes[0]"),
    (lambda S, k, v, s: state_right(S, k, v, s).transpose(-1, -2), "not v kᵀ"),
    (in_place, "in place"),
    (lambda S, k, v, s: state_right(S, k, v, s.float()), "float32"),
    (lambda S, k, v, s: state_right(S, k, v, s)[0], "must have shape"),
]

WRONG = (
    [(check_slopes, a, m) for a, m in WRONG_SLOPES]
    + [(check_intra_block, a, m) for a, m in WRONG_INTRA]
    + [(check_state_update, a, m) for a, m in WRONG_STATE]
)


@pytest.mark.parametrize("check, answer, named", WRONG, ids=[f"{c.__name__}-{m}" for c, _, m in WRONG])
def test_wrong_answers_are_named_in_both_languages(capsys, check, answer, named):
    ok, out = verdict(capsys, check, answer)
    assert not ok and one_red_line(out) and named in out, out
    assert has_chinese_entry(out), out


def test_enough_named_mistakes_and_variants():
    for check in CHECKS:
        assert sum(c is check for c, _ in RIGHT) >= 3
        assert sum(c is check for c, _, _ in WRONG) >= 10
