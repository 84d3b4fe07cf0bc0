"""The notebook 12c checkers accept right answers and name the usual wrong ones."""

import math

import pytest
import torch
from learner_answers import JUNK, one_red_line

from attn_core.exercises.sinks_gates import check_diff_lambda, check_gate_split, check_pair_values, check_sink_softmax


def verdict(capsys, check, answer) -> tuple[bool, str]:
    ok = check(answer)
    return ok, capsys.readouterr().out


def right_sink_softmax(scores, sinks, scale):
    column = sinks[None, :, None, None].expand(*scores.shape[:-1], 1)  # (B, H, Lq, 1)
    return torch.softmax(torch.cat([scores * scale, column], dim=-1), dim=-1)[..., :-1]


def right_gate_split(projected, num_heads):
    batch, length, width = projected.shape
    query, gate = projected.view(batch, length, num_heads, width // num_heads).chunk(2, dim=-1)
    return query.transpose(1, 2), gate.reshape(batch, length, -1)


def right_lambda(q1, k1, q2, k2, layer_idx):
    return torch.exp(q1 @ k1) - torch.exp(q2 @ k2) + 0.8 - 0.6 * math.exp(-0.3 * layer_idx)


def right_pair_values(v, num_heads):
    first, second = v.chunk(2, dim=1)  # (B, Hkv/2, T, D) each
    pairs = torch.cat([first, second], dim=-1)  # (B, Hkv/2, T, 2D): kv head g with g + Hkv/2
    return pairs.repeat_interleave(num_heads // v.shape[1], dim=1)[:, : num_heads // 2]


RIGHT = {
    check_sink_softmax: right_sink_softmax,
    check_gate_split: right_gate_split,
    check_diff_lambda: right_lambda,
    check_pair_values: right_pair_values,
}


@pytest.mark.parametrize("check", RIGHT, ids=lambda c: c.__name__)
def test_right_answer_passes_and_stub_is_not_attempted(capsys, check):
    ok, out = verdict(capsys, check, RIGHT[check])
    assert ok and out.startswith("✅"), out
    ok, out = verdict(capsys, check, lambda *args: ...)
    assert not ok and "not attempted" in out


@pytest.mark.parametrize("check", RIGHT, ids=lambda c: c.__name__)
@pytest.mark.parametrize("junk", range(len(JUNK)))
def test_junk_gets_one_red_line(capsys, check, junk):
    ok, out = verdict(capsys, check, lambda *args: JUNK[junk])
    assert not ok and one_red_line(out), out


def with_sink_column(scores, sinks, scale):
    column = sinks[None, :, None, None].expand(*scores.shape[:-1], 1)
    return torch.softmax(torch.cat([scores * scale, column], dim=-1), dim=-1)


def whole_split(projected, num_heads):
    batch, length, width = projected.shape
    query, gate = projected.chunk(2, dim=-1)
    return query.view(batch, length, num_heads, -1).transpose(1, 2), gate


def swapped(projected, num_heads):
    query, gate = right_gate_split(projected, num_heads)
    return gate.view(*gate.shape[:2], num_heads, -1).transpose(1, 2), query.transpose(1, 2).flatten(2)


def adjacent_pairs(v, num_heads):
    group = num_heads // v.shape[1]
    return torch.stack(
        [
            torch.cat([v[:, 2 * (p // group) % v.shape[1]], v[:, (2 * (p // group) + 1) % v.shape[1]]], dim=-1)
            for p in range(num_heads // 2)
        ],
        dim=1,
    )


def interleaved(v, num_heads):
    right = right_pair_values(v, num_heads)
    batch, pairs, length, width = right.shape
    return right.view(batch, pairs, length, 2, width // 2).transpose(-1, -2).reshape(right.shape)


WRONG = [
    (check_sink_softmax, lambda s, k, c: right_sink_softmax(s, k * c, c), "sink logit was scaled"),
    (check_sink_softmax, lambda s, k, c: torch.softmax(s * c, dim=-1), "rows sum to 1"),
    (check_sink_softmax, lambda s, k, c: right_sink_softmax(s, k, 1.0), "were not scaled"),
    (check_sink_softmax, with_sink_column, "sink's column too"),
    (check_sink_softmax, lambda s, k, c: right_sink_softmax(s, k.flip(0), c), "append each head's sink"),
    (check_gate_split, whole_split, "split the whole projection"),
    (check_gate_split, swapped, "swapped"),
    (check_gate_split, lambda p, h: right_gate_split(p, h)[0], "return two tensors"),
    (check_gate_split, lambda p, h: (right_gate_split(p, h)[0].transpose(1, 2), right_gate_split(p, h)[1]), "shape"),
    (check_diff_lambda, lambda q1, k1, q2, k2, i: torch.exp(q1 @ k1) - torch.exp(q2 @ k2), "λ_init is missing"),
    (check_diff_lambda, lambda q1, k1, q2, k2, i: torch.exp(q1 @ k1) - torch.exp(q2 @ k2) + 0.8, "constant 0.8"),
    (check_diff_lambda, lambda q1, k1, q2, k2, i: right_lambda(q1, k1, q2, k2, i + 1), "1-based"),
    (check_diff_lambda, lambda q1, k1, q2, k2, i: torch.exp(q1 * k1) - torch.exp(q2 * k2), "dot product"),
    (check_diff_lambda, lambda q1, k1, q2, k2, i: right_lambda(q1, k1, q2, k2, -i), "sign is flipped"),
    (check_diff_lambda, lambda q1, k1, q2, k2, i: right_lambda(q1, k1, q2, k2, i) + 1, "expected"),
    (check_pair_values, adjacent_pairs, "paired adjacent kv heads"),
    (check_pair_values, interleaved, "interleaved"),
    (check_pair_values, lambda v, h: right_pair_values(v, h).flip(1), "pair p must read"),
    (check_pair_values, lambda v, h: v, "must have shape"),
]


@pytest.mark.parametrize("check, answer, named", WRONG, ids=[f"{c.__name__}-{m}" for c, _, m in WRONG])
def test_wrong_answers_are_named(capsys, check, answer, named):
    ok, out = verdict(capsys, check, answer)
    assert not ok and one_red_line(out) and named in out, out
