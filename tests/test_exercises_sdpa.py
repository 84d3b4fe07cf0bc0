"""Exercise checks of notebook 01: each accepts a right answer, reports a stub as not attempted,
and names the mistake in the usual wrong answers (never raising)."""

from __future__ import annotations

import math

import pytest
import torch
from learner_answers import JUNK, one_red_line
from torch import nn

from attn_core.exercises import NOT_DONE
from attn_core.exercises.sdpa import (
    TEMPERATURE_SCORES,
    TEMPERATURE_TARGET,
    check_attention,
    check_fused_qkv_split,
    check_score_variance,
    check_temperature,
)


def verdict(check, answer, capsys) -> tuple[bool, str]:
    result = check(answer)
    return result, capsys.readouterr().out


def attention_with(scale_of=lambda d: 1 / math.sqrt(d), dim=-1, transpose=False, skip_values=False):
    def attention(q, k, v):
        scores = q @ k.transpose(-2, -1) * scale_of(q.shape[-1])  # (..., Lq, Lk)
        weights = torch.softmax(scores, dim=dim)  # (..., Lq, Lk)
        output = weights if skip_values else weights @ v  # (..., Lq, Dv)
        return output, (weights.transpose(-2, -1) if transpose else weights)

    return attention


# ---- exercise 1: attention from scratch ---------------------------------------------------------


def test_attention_accepts_correct_answers(capsys):
    assert verdict(check_attention, attention_with(), capsys) == (True, "✅ attention from scratch: correct.\n")

    def via_torch(q, k, v):
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v), weights

    assert verdict(check_attention, via_torch, capsys)[0]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (attention_with(scale_of=lambda d: 1.0), "no scale at all"),
        (attention_with(scale_of=lambda d: 1.0 / d), "you divided by d_k"),
        (attention_with(scale_of=math.sqrt), "you multiplied by √d_k"),
        (attention_with(dim=-2), "softmax ran over the queries (dim=-2)"),
        (attention_with(transpose=True), "transposed"),
        (attention_with(skip_values=True), "wrong shape: output"),
    ],
)
def test_attention_diagnoses_mistakes(answer, expected, capsys):
    ok, out = verdict(check_attention, answer, capsys)
    assert not ok
    assert out.startswith("❌ attention from scratch:")
    assert expected in out


def test_attention_output_must_be_weights_times_values(capsys):
    def wrong_output(q, k, v):
        out, weights = attention_with()(q, k, v)
        return out + 1, weights

    ok, out = verdict(check_attention, wrong_output, capsys)
    assert not ok and "output = weights @ v" in out


def test_attention_stub_crash_and_wrong_type(capsys):
    def stub(q, k, v):
        raise NotImplementedError

    def ellipsis(q, k, v): ...

    def crash(q, k, v):
        return q @ k  # (B, Lq, d) @ (B, Lk, d): inner dims do not match

    assert verdict(check_attention, stub, capsys) == (False, f"❌ attention from scratch: {NOT_DONE}\n")
    assert NOT_DONE in verdict(check_attention, ellipsis, capsys)[1]
    ok, out = verdict(check_attention, crash, capsys)
    assert not ok and "raised RuntimeError" in out
    ok, out = verdict(check_attention, lambda q, k, v: q, capsys)
    assert not ok and "return a tuple (output, weights)" in out


# ---- exercise 2: variance of q·k ----------------------------------------------------------------


def test_variance_accepts_formula(capsys):
    def right(d_k, std, scaled):
        variance = d_k * std**4
        return variance / d_k if scaled else variance

    assert verdict(check_score_variance, right, capsys) == (True, "✅ variance of q·k: correct.\n")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (lambda d, s, scaled: (s**4 if scaled else d * s**4) ** 0.5, "standard deviation"),
        (lambda d, s, scaled: s**2 if scaled else d * s**2, "std⁴, not std²"),
        (lambda d, s, scaled: d * s**4, "scaled=True must change the answer"),
        (lambda d, s, scaled: d * s**4 / math.sqrt(d) if scaled else d * s**4, "by d_k, not by √d_k"),
        (lambda d, s, scaled: 1.1 * (s**4 if scaled else d * s**4), "simulation estimate"),
        (lambda d, s, scaled: 1.0, "hint: q·k is a sum"),
        (lambda d, s, scaled: ..., NOT_DONE),
        (lambda d, s, scaled: "big", "return a number"),
    ],
)
def test_variance_diagnoses_mistakes(answer, expected, capsys):
    ok, out = verdict(check_score_variance, answer, capsys)
    assert not ok and expected in out


# ---- exercise 3: fused QKV split ----------------------------------------------------------------


def split_with(weight_rows=lambda w, i, d: w[i * d : (i + 1) * d], with_bias=True, order=(0, 1, 2)):
    def split_qkv(fused):
        d = fused.in_features
        layers = []
        for i in order:
            layer = nn.Linear(d, d, bias=with_bias).to(fused.weight.dtype)
            with torch.no_grad():
                layer.weight.copy_(weight_rows(fused.weight, i, d))
                if with_bias:
                    layer.bias.copy_(weight_rows(fused.bias, i, d))
            layers.append(layer)
        return tuple(layers)

    return split_qkv


def test_split_accepts_correct_answers(capsys):
    assert verdict(check_fused_qkv_split, split_with(), capsys) == (True, "✅ fused QKV split: correct.\n")

    def chunked(fused):
        d = fused.in_features
        layers = [nn.Linear(d, d).double() for _ in range(3)]
        with torch.no_grad():
            for layer, w, b in zip(layers, fused.weight.chunk(3), fused.bias.chunk(3), strict=True):
                layer.weight.copy_(w)
                layer.bias.copy_(b)
        return layers

    assert verdict(check_fused_qkv_split, chunked, capsys)[0]


def test_split_leaves_global_random_state_alone(capsys):
    def functional(fused):  # plain callables: builds no nn.Linear, so draws no random numbers itself
        pieces = zip(fused.weight.detach().chunk(3), fused.bias.detach().chunk(3), strict=True)
        return [lambda x, w=w, b=b: x @ w.T + b for w, b in pieces]

    state = torch.random.get_rng_state()
    assert verdict(check_fused_qkv_split, functional, capsys)[0]
    assert torch.equal(torch.random.get_rng_state(), state)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (split_with(order=(1, 0, 2)), "wrong order: your q_proj reproduces the fused layer's k chunk"),
        (split_with(with_bias=False), "biases are missing"),
        (split_with(weight_rows=lambda w, i, d: w[i::3]), "interleaved"),
        (split_with(weight_rows=lambda w, i, d: w.flip(0)[i * d : (i + 1) * d]), "differ from fused(x).chunk"),
    ],
)
def test_split_diagnoses_mistakes(answer, expected, capsys):
    ok, out = verdict(check_fused_qkv_split, answer, capsys)
    assert not ok and expected in out


def test_split_wrong_dim_and_wrong_type(capsys):
    def along_columns(fused):
        d = fused.in_features
        return [nn.Linear(d // 3, 3 * d).double() for _ in range(3)]  # what chunk(3, dim=1) would shape

    ok, out = verdict(check_fused_qkv_split, along_columns, capsys)
    assert not ok and "raised RuntimeError" in out

    def wrong_out_features(fused):
        d = fused.in_features
        return [nn.Linear(d, 3 * d).double() for _ in range(3)]

    ok, out = verdict(check_fused_qkv_split, wrong_out_features, capsys)
    assert not ok and "wrong shape" in out and "split it along dim 0" in out

    ok, out = verdict(check_fused_qkv_split, lambda fused: fused.weight.chunk(3), capsys)
    assert not ok and "q_proj is a Tensor" in out

    def modifies(fused):
        with torch.no_grad():
            fused.weight.zero_()
        return split_with()(fused)

    ok, out = verdict(check_fused_qkv_split, modifies, capsys)
    assert not ok and "changed the fused layer" in out


# ---- exercise 4: temperature --------------------------------------------------------------------


def solve_temperature() -> float:
    low, high = 1e-3, 10.0  # top weight falls as T grows: bisect
    for _ in range(60):
        mid = (low + high) / 2
        top = torch.softmax(TEMPERATURE_SCORES.double() / mid, dim=-1).max().item()
        low, high = (mid, high) if top > TEMPERATURE_TARGET else (low, mid)
    return (low + high) / 2


def test_temperature(capsys):
    best = solve_temperature()
    assert verdict(check_temperature, best, capsys) == (True, "✅ temperature: correct.\n")
    assert verdict(check_temperature, torch.tensor(best), capsys)[0]
    assert "too flat, lower" in verdict(check_temperature, 1.0, capsys)[1]
    assert "too sharp, raise" in verdict(check_temperature, 0.1, capsys)[1]
    assert "positive" in verdict(check_temperature, -0.5, capsys)[1]
    assert "positive" in verdict(check_temperature, 0.0, capsys)[1]
    assert NOT_DONE in verdict(check_temperature, ..., capsys)[1]
    assert "one number" in verdict(check_temperature, [0.4], capsys)[1]


# ---- the ARENA-style tables: stub, reference, correct variants, each mistake's own diagnosis -------


def attention_einsum(q, k, v):
    weights = torch.einsum("...qd,...kd->...qk", q, k).div(q.shape[-1] ** 0.5).softmax(-1)  # (..., Lq, Lk)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def attention_float32(q, k, v):
    q32, k32, v32 = q.float(), k.float(), v.float()  # float32 rounding stays far inside rtol 1e-5
    weights = torch.softmax(q32 @ k32.mT / math.sqrt(q.shape[-1]), dim=-1)  # (..., Lq, Lk)
    return [weights @ v32, weights]  # a list is fine too


def attention_manual_softmax(q, k, v):
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)  # (..., Lq, Lk): q scaled first
    exp = (scores - scores.amax(-1, keepdim=True)).exp()  # (..., Lq, Lk), stable
    weights = exp / exp.sum(-1, keepdim=True)  # (..., Lq, Lk)
    return weights @ v, weights


def attention_torch_output(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)  # (..., Lq, Lk)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v), weights


def attention_k_T(q, k, v):
    weights = torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)  # bug: .T reverses every axis
    return weights @ v, weights


def attention_scaled_after(q, k, v):
    weights = torch.softmax(q @ k.transpose(-2, -1), dim=-1) / math.sqrt(q.shape[-1])  # bug: scale after
    return weights @ v, weights


def stub_attention(q, k, v):
    raise NotImplementedError


@pytest.mark.filterwarnings("ignore:The use of `x.T`:UserWarning")  # attention_k_T's own warning, handed on
@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (stub_attention, False, NOT_DONE),
        (attention_with(), True, "✅"),
        (attention_einsum, True, "✅"),
        (attention_float32, True, "✅"),
        (attention_manual_softmax, True, "✅"),
        (attention_torch_output, True, "✅"),
        (attention_scaled_after, False, "sums to 0.354 = 1/√d_k, not 1: you scaled after the softmax"),
        (lambda q, k, v: attention_with()(q, k, v)[::-1], False, "did you return (weights, output)?"),
        (attention_with(scale_of=lambda d: 1 / math.sqrt(6 if d == 8 else 4)), False, "you divided by √d_v"),
        (lambda q, k, v: (attention_torch_output(q, k, v)[0], None), False, "weights element is a NoneType"),
        (attention_k_T, False, "use k.transpose(-2, -1)"),
        (attention_with(dim=-2), False, "softmax ran over the queries"),
    ],
)
def test_attention_table(answer, passes, phrase, capsys):
    ok, out = verdict(check_attention, answer, capsys)
    assert ok is passes and phrase in out, out


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (lambda d, s, scaled: ..., False, NOT_DONE),
        (lambda d, s, scaled: d * s**4 / d if scaled else d * s**4, True, "✅"),
        (lambda d, s, scaled: torch.tensor(float(s**4 if scaled else d * s**4)), True, "✅"),
        (lambda d, s, scaled: __import__("numpy").float64(s**4 * (1 if scaled else d)), True, "✅"),
        (lambda d, s, scaled: (s * s) ** 2 * d ** (0 if scaled else 1), True, "✅"),
        (lambda d, s, scaled: s**2 if scaled else d * s**2, False, "std⁴, not std²"),
        (lambda d, s, scaled: d * s**4, False, "scaled=True must change the answer"),
        (lambda d, s, scaled: (s**4 if scaled else d * s**4) ** 0.5, False, "standard deviation"),
    ],
)
def test_variance_table(answer, passes, phrase, capsys):
    ok, out = verdict(check_score_variance, answer, capsys)
    assert ok is passes and phrase in out, out


def split_functional(fused):
    pieces = zip(fused.weight.detach().chunk(3), fused.bias.detach().chunk(3), strict=True)
    return [lambda x, w=w, b=b: x @ w.T + b for w, b in pieces]  # plain callables are layers too


def split_unflatten(fused):
    d = fused.in_features
    weights, biases = fused.weight.detach().unflatten(0, (3, d)), fused.bias.detach().unflatten(0, (3, d))
    layers = [nn.Linear(d, d).float() for _ in range(3)]  # float32 layers: the checker casts x to them
    with torch.no_grad():
        for layer, w, b in zip(layers, weights, biases, strict=True):
            layer.weight.copy_(w)
            layer.bias.copy_(b)
    return tuple(layers)


def split_load_state_dict(fused):
    d = fused.in_features
    pieces = zip(torch.split(fused.weight.detach(), d), torch.split(fused.bias.detach(), d), strict=True)
    layers = [nn.Linear(d, d, dtype=torch.float64) for _ in range(3)]
    for layer, (w, b) in zip(layers, pieces, strict=True):
        layer.load_state_dict({"weight": w, "bias": b})
    return layers


def split_stub(fused):
    raise NotImplementedError


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (split_stub, False, NOT_DONE),
        (split_with(), True, "✅"),
        (split_functional, True, "✅"),
        (split_unflatten, True, "✅"),
        (split_load_state_dict, True, "✅"),
        (split_with(order=(1, 0, 2)), False, "wrong order"),
        (split_with(with_bias=False), False, "biases are missing"),
        (split_with(weight_rows=lambda w, i, d: w[i::3]), False, "interleaved"),
    ],
)
def test_split_table(answer, passes, phrase, capsys):
    ok, out = verdict(check_fused_qkv_split, answer, capsys)
    assert ok is passes and phrase in out, out


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (..., False, NOT_DONE),
        (solve_temperature(), True, "✅"),
        (torch.tensor(solve_temperature()), True, "✅"),
        (__import__("numpy").float32(solve_temperature()), True, "✅"),
        (round(solve_temperature(), 3), True, "✅"),
        (1.0, False, "too flat, lower"),
        (0.1, False, "too sharp, raise"),
        (-0.4, False, "positive finite"),
        ("warm", False, "one number"),
    ],
)
def test_temperature_table(answer, passes, phrase, capsys):
    ok, out = verdict(check_temperature, answer, capsys)
    assert ok is passes and phrase in out, out


# ----- never raises: whatever the learner returns, a check prints one ❌ line and returns False -----


@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
@pytest.mark.parametrize("check", [check_attention, check_score_variance, check_fused_qkv_split])
def test_function_checks_never_raise(check, junk, capsys):
    assert check(lambda *args, **kwargs: junk) is False
    assert one_red_line(capsys.readouterr().out)
    assert check(junk) is False  # the value itself instead of a function
    assert one_red_line(capsys.readouterr().out)


@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_temperature_never_raises(junk, capsys):
    assert check_temperature(junk) is False
    assert one_red_line(capsys.readouterr().out)


def test_learner_warnings_are_handed_on_once(recwarn):
    import warnings

    from attn_core.exercises import call_learner

    def warns(q, k, v):
        warnings.warn("from the learner's own line", UserWarning, stacklevel=1)
        return attention_with()(q, k, v)

    assert check_attention(warns)  # two cases, so the answer runs twice
    ours = [w for w in recwarn if "from the learner's own line" in str(w.message)]
    assert len(ours) == 1  # shown once, as without the check, not once per call
    assert call_learner(warns, *[torch.ones(1, 2, 2)] * 3)[1] is None
