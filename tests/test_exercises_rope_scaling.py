"""Notebook 06b's checkers accept right answers and name the usual wrong ones (long context: YaRN, partial RoPE).

For each checker: the stub fails, right answers written differently pass, each usual mistake gets its own
diagnosis (a phrase only that diagnosis contains), junk gets one ❌ line. The graders' float64 references are
checked against ``ac.rope_frequencies`` / ``ac.apply_rope`` (themselves equal to Hugging Face).
"""

from __future__ import annotations

import math

import pytest
import torch
from learner_answers import JUNK, one_red_line, stub

import attn_core as ac
from attn_core.exercises import rope_scaling as ex

F64 = torch.float64


# ----- exercise 1: YaRN's inverse frequencies ---------------------------------------------------------------
def yarn_library(head_dim, base, factor, old_len):
    scaling = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": old_len}
    return ac.rope_frequencies(head_dim, base=base, scaling=scaling)[0]


def yarn_by_hand(head_dim, base, factor, old_len):  # written the way the notebook derives it: rotations per pair
    inv_freq = base ** -(torch.arange(0, head_dim, 2, dtype=F64) / head_dim)  # (D/2,)

    def pair(rotations):
        return head_dim * math.log(old_len / (2 * math.pi * rotations)) / (2 * math.log(base))

    low, high = max(math.floor(pair(32)), 0), min(math.ceil(pair(1)), head_dim - 1)
    ramp = ((torch.arange(head_dim // 2, dtype=F64) - low) / (high - low)).clamp(0, 1)  # (D/2,)
    return inv_freq * (1 - ramp) + inv_freq / factor * ramp  # (D/2,)


def yarn_mistake(**knobs):
    return lambda d, b, f, n: ex.reference_yarn_inv_freq(d, b, f, n, **knobs)


def yarn_float32(head_dim, base, factor, old_len):
    return ex.reference_yarn_inv_freq(head_dim, base, factor, old_len, dtype=torch.float32)


def yarn_pi(head_dim, base, factor, old_len):
    return base ** -(torch.arange(0, head_dim, 2, dtype=F64) / head_dim) / factor


def yarn_plain(head_dim, base, factor, old_len):
    return base ** -(torch.arange(0, head_dim, 2, dtype=F64) / head_dim)


@pytest.mark.parametrize("fn", [yarn_library, yarn_by_hand, ex.reference_yarn_inv_freq])
def test_yarn_right_answers_pass(fn, capsys):
    assert ex.check_yarn_inv_freq(fn)
    assert capsys.readouterr().out.startswith("✅")


def test_yarn_reference_equals_the_library():
    for head_dim, base, factor, old_len in ex.YARN_CASES:
        torch.testing.assert_close(
            ex.reference_yarn_inv_freq(head_dim, base, factor, old_len),
            yarn_library(head_dim, base, factor, old_len),
            rtol=1e-14,
            atol=0,
        )


@pytest.mark.parametrize(
    "fn, phrase",
    [
        (stub, "not attempted yet"),
        (yarn_mistake(ramp_step=2), "feature index 2i"),
        (yarn_mistake(swapped=True), "ends are swapped"),
        (yarn_mistake(clamp=False), "not clamped"),
        (yarn_mistake(truncate=False), "not truncated"),
        (yarn_pi, "position interpolation"),
        (yarn_plain, "plain RoPE"),
        (yarn_float32, "computed in float32"),
        (lambda d, b, f, n: yarn_library(d, b, f, n) * 1.01, "off by up to"),
        (lambda d, b, f, n: yarn_library(d, b, f, n)[:-1], "wrong shape"),
    ],
)
def test_yarn_mistakes_are_named(fn, phrase, capsys):
    assert ex.check_yarn_inv_freq(fn) is False
    out = capsys.readouterr().out
    assert one_red_line(out) and phrase in out, out


# ----- exercise 2: the temperature ----------------------------------------------------------------------------
def weights_with(multiplier_of_g, causal=True):
    def fn(q, k, factor):
        g = 0.1 * math.log(factor) + 1
        scores = q @ k.transpose(-2, -1) * multiplier_of_g(g, factor) / math.sqrt(q.shape[-1])  # (H, L, L)
        if causal:
            scores = scores.masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), float("-inf"))
        return scores.softmax(-1)

    return fn


def weights_through_rope(q, k, factor):  # the factor on both q and k, then the library's attention
    g = 0.1 * math.log(factor) + 1
    return ac.scaled_dot_product_attention(q * g, k * g, k, is_causal=True)[1]


@pytest.mark.parametrize("fn", [weights_with(lambda g, s: g * g), weights_through_rope])
def test_weights_right_answers_pass(fn, capsys):
    assert ex.check_yarn_weights(fn)
    assert capsys.readouterr().out.startswith("✅")


@pytest.mark.parametrize(
    "fn, phrase",
    [
        (stub, "not attempted yet"),
        (weights_with(lambda g, s: g), "applied once"),
        (weights_with(lambda g, s: g**4), "applied twice"),
        (weights_with(lambda g, s: 1.0), "no temperature"),
        (weights_with(lambda g, s: g**-2), "divides the scores"),
        (weights_with(lambda g, s: (0.1 * math.log10(s) + 1) ** 2), "log10"),
        (weights_with(lambda g, s: (0.1 * math.log(s)) ** 2), "lost its + 1"),
        (weights_with(lambda g, s: g * g, causal=False), "not causal"),
        (weights_with(lambda g, s: g * 3), "differ from softmax"),
    ],
)
def test_weights_mistakes_are_named(fn, phrase, capsys):
    assert ex.check_yarn_weights(fn) is False
    out = capsys.readouterr().out
    assert one_red_line(out) and phrase in out, out


# ----- exercise 3: partial RoPE --------------------------------------------------------------------------------
def partial_library(x, positions, base, factor):
    return ac.apply_rope(x, positions, base=base, partial_rotary_factor=factor)


def partial_by_hand(x, positions, base, factor):
    rotary_dim = int(x.shape[-1] * factor)
    x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
    inv_freq = base ** -(torch.arange(0, rotary_dim, 2, dtype=F64) / rotary_dim)  # (R/2,)
    angles = positions.to(F64)[:, None] * inv_freq  # (L, R/2)
    angles = torch.cat([angles, angles], -1)  # (L, R)
    half = rotary_dim // 2
    rotated = torch.cat([-x_rot[..., half:], x_rot[..., :half]], -1)  # (..., L, R)
    return torch.cat([x_rot * angles.cos() + rotated * angles.sin(), x_pass], -1)  # (..., L, D)


def partial_mistake(**knobs):
    def fn(x, positions, base, factor):
        return ex._partial(x, positions, base, int(x.shape[-1] * factor), **knobs)

    return fn


def partial_exponent_over_head(x, positions, base, factor):
    return ex._partial(x, positions, base, int(x.shape[-1] * factor), exponent_dim=x.shape[-1])


def partial_across_head(x, positions, base, factor):
    return ex._partial(x, positions, base, int(x.shape[-1] * factor), half=x.shape[-1] // 2)


def partial_at_the_end(x, positions, base, factor):
    rotary_dim = int(x.shape[-1] * factor)
    return ex._partial(x, positions, base, rotary_dim, start_feature=x.shape[-1] - rotary_dim)


def partial_everything(x, positions, base, factor):
    return ac.apply_rope(x, positions, base=base)


@pytest.mark.parametrize("fn", [partial_library, partial_by_hand])
def test_partial_right_answers_pass(fn, capsys):
    assert ex.check_partial_rope(fn)
    assert capsys.readouterr().out.startswith("✅")


@pytest.mark.parametrize(
    "fn, phrase",
    [
        (stub, "not attempted yet"),
        (partial_exponent_over_head, "exponent runs over head_dim"),
        (partial_across_head, "across the whole head"),
        (partial_at_the_end, "FIRST rotary_dim"),
        (partial_everything, "every feature was rotated"),
        (partial_mistake(dtype=torch.float32), "float32"),
        (lambda x, p, b, f: x, "off by"),
        (lambda x, p, b, f: x[..., :-1], "wrong shape"),
    ],
)
def test_partial_mistakes_are_named(fn, phrase, capsys):
    assert ex.check_partial_rope(fn) is False
    out = capsys.readouterr().out
    assert one_red_line(out) and phrase in out, out


@pytest.mark.parametrize("check", [ex.check_yarn_inv_freq, ex.check_yarn_weights, ex.check_partial_rope])
@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_checks_never_raise(check, junk, capsys):
    assert check(lambda *args, **kwargs: junk) is False
    assert one_red_line(capsys.readouterr().out)
    assert check(junk) is False
    assert one_red_line(capsys.readouterr().out)


@pytest.mark.parametrize(
    "check, fn",
    [
        (ex.check_yarn_inv_freq, yarn_mistake(swapped=True)),
        (ex.check_yarn_inv_freq, yarn_float32),
        (ex.check_yarn_weights, weights_with(lambda g, s: g)),
        (ex.check_yarn_weights, weights_with(lambda g, s: g * 3)),
        (ex.check_partial_rope, partial_exponent_over_head),
        (ex.check_partial_rope, lambda x, p, b, f: x),
    ],
)
def test_verdicts_in_chinese(check, fn, capsys):
    ac.set_language("zh")
    try:
        assert check(fn) is False
    finally:
        ac.set_language("en")
    out = capsys.readouterr().out
    assert one_red_line(out) and any("\u4e00" <= ch <= "\u9fff" for ch in out.split(":", 1)[-1]), out
