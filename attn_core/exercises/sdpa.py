"""Checks for notebook 01 (scaled dot-product attention).

Each ``check_…`` takes the learner's answer, prints one verdict line through
:func:`attn_core.exercises.feedback` and returns True/False. It never raises on a wrong
answer: an unfinished stub (``...``, ``None`` or ``raise NotImplementedError``) gets the
"not attempted" message, and each usual mistake gets its own diagnosis.

One piece: the checks of notebook 01's exercises, each next to the reference it grades against and the mistakes it
names.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from attn_core.exercises import NOT_DONE, call_learner, feedback, is_stub, never_raises
from attn_core.i18n import _

__all__ = [
    "TEMPERATURE_SCORES",
    "TEMPERATURE_TARGET",
    "check_attention",
    "check_score_variance",
    "check_fused_qkv_split",
    "check_temperature",
]

# Exercise 4: one row of attention scores; find the temperature whose softmax gives the
# top key this weight (within ±TEMPERATURE_TOLERANCE).
TEMPERATURE_SCORES = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
TEMPERATURE_TARGET = 0.9
TEMPERATURE_TOLERANCE = 0.005


# A correct answer may compute in float32. Its error, derived for these cases (entries of std 2,
# d_k <= 16, u = 2**-24 ~ 6e-8 the float32 unit roundoff): each score is a d_k-term dot product
# whose rounding error is at most d_k·u·Σ|q_i k_i| ~ d_k·u·2.5·d_k, divided by √d_k: <= 2.5·d_k^1.5·u
# ~ 1e-5 for d_k = 16; a softmax weight's relative error is at most twice its score error, 2e-5. The
# checks allow 5e-5 (measured: float32 answers use under a fifth of it); every wrong answer they
# diagnose is off by more than 1e-3.
_RTOL = 5e-5


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), rtol=_RTOL, atol=1e-6)


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    weights = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)  # (..., Lq, Lk)
    return weights @ v, weights  # (..., Lq, Dv), (..., Lq, Lk)


# ---------------------------------------------------------------------------------------------
# Exercise 1: attention from a blank function


def _attention_case(shape_q, shape_k, shape_v, seed):
    generator = torch.Generator().manual_seed(seed)
    # std 2: unscaled scores are large enough that a missing or wrong scale is unmistakable.
    q = 2 * torch.randn(*shape_q, generator=generator, dtype=torch.float64)
    k = 2 * torch.randn(*shape_k, generator=generator, dtype=torch.float64)
    v = torch.randn(*shape_v, generator=generator, dtype=torch.float64)
    return q, k, v


def _diagnose_weights(weights: torch.Tensor, q, k, v) -> str:
    d_k, d_v = q.shape[-1], v.shape[-1]
    row_sums = weights.sum(-1)  # (..., Lq)
    col_sums = weights.sum(-2)  # (..., Lk)
    if not torch.allclose(row_sums, torch.ones_like(row_sums), atol=1e-6):
        if torch.allclose(col_sums, torch.ones_like(col_sums), atol=1e-6):
            return _(
                "the weights' columns sum to 1, not their rows: softmax ran over the queries (dim=-2). "
                "Each query shares one unit of attention among the keys: use softmax(..., dim=-1)."
            )
        first = row_sums.flatten()[0]
        if first.item() > 1e-6 and torch.allclose(row_sums, first.expand_as(row_sums), rtol=1e-6, atol=1e-9):
            # Every row sums to the same c ≠ 1: a softmax ran over the keys, then something rescaled it.
            c = first.item()
            which = " = 1/√d_k" if math.isclose(c, 1 / math.sqrt(d_k), rel_tol=1e-6) else ""
            message = (
                _(
                    "every row of your weights sums to {c} = 1/√d_k, not 1: you scaled after the softmax. "
                    "The scale divides the scores, before the softmax: softmax(q @ k.transpose(-2, -1) / √d_k, dim=-1)."
                )
                if which
                else _(
                    "every row of your weights sums to {c}, not 1: you scaled after the softmax. "
                    "The scale divides the scores, before the softmax: softmax(q @ k.transpose(-2, -1) / √d_k, dim=-1)."
                )
            )
            return message.format(c=f"{c:.3f}")
        return _(
            "the rows of your weights do not sum to 1 (first row sums to {c}): apply softmax over the keys (dim=-1)."
        ).format(c=f"{first.item():.3f}")
    wrong_scales = {
        _("no scale at all: the scores must be divided by √d_k before the softmax."): 1.0,
        _("you divided by d_k; divide by √d_k (math.sqrt(q.shape[-1]))."): 1.0 / d_k,
        _("you multiplied by √d_k; divide by it instead."): math.sqrt(d_k),
    }
    if d_v != d_k:
        message = _(
            "you divided by √d_v (v.shape[-1] = {d_v}); the scale belongs to the dot products q·k, "
            "so it is √d_k (q.shape[-1] = {d_k})."
        )
        wrong_scales[message.format(d_v=d_v, d_k=d_k)] = 1.0 / math.sqrt(d_v)
    for message, scale in wrong_scales.items():
        if _close(weights, _reference(q, k, v, scale)[1]):
            return message
    expected = _reference(q, k, v, 1.0 / math.sqrt(d_k))[1]
    worst = (weights.double() - expected).abs().max().item()
    return _("the weights differ from softmax(Q Kᵀ / √d_k) (largest difference {diff}).").format(diff=f"{worst:.3g}")


def _pair_problem(result) -> str | None:
    """Why ``result`` is not a pair (output, weights) of tensors, or None."""
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        return _("return a tuple (output, weights) of two tensors, got {type} instead.").format(
            type=type(result).__name__
        )
    not_tensor = {
        "output": _("return a tuple (output, weights) of two tensors: your output element is a {type}, not a tensor."),
        "weights": _(
            "return a tuple (output, weights) of two tensors: your weights element is a {type}, not a tensor."
        ),
    }
    not_tensor_none = {  # F.scaled_dot_product_attention's answer (output, None)
        "output": _(
            "return a tuple (output, weights) of two tensors: your output element is a {type}, not a tensor. "
            "(F.scaled_dot_product_attention returns the output only: compute the weights yourself, "
            "softmax(q @ k.transpose(-2, -1) / √d_k, dim=-1).)"
        ),
        "weights": _(
            "return a tuple (output, weights) of two tensors: your weights element is a {type}, not a tensor. "
            "(F.scaled_dot_product_attention returns the output only: compute the weights yourself, "
            "softmax(q @ k.transpose(-2, -1) / √d_k, dim=-1).)"
        ),
    }
    for position, item in zip(("output", "weights"), result, strict=True):
        if not isinstance(item, torch.Tensor):
            message = (not_tensor_none if item is None else not_tensor)[position]
            return message.format(type=type(item).__name__)
    return None


@never_raises(_("attention from scratch"))
def check_attention(attention: Callable) -> bool:
    """Exercise 1: ``attention(q, k, v) -> (output, weights)`` for q ``(..., Lq, d_k)``,
    k ``(..., Lk, d_k)``, v ``(..., Lk, d_v)``; no mask, no dropout."""
    name = _("attention from scratch")
    cases = [
        ((2, 3, 8), (2, 5, 8), (2, 5, 6), 0),  # (B, Lq, d_k), (B, Lk, d_k), (B, Lk, d_v): Lq, Lk, d_v all differ
        ((2, 4, 3, 16), (2, 4, 7, 16), (2, 4, 7, 4), 1),  # (B, H, Lq, d_k) ...: extra batch dims
    ]
    for shape_q, shape_k, shape_v, seed in cases:
        q, k, v = _attention_case(shape_q, shape_k, shape_v, seed)
        result, problem = call_learner(attention, q.clone(), k.clone(), v.clone())
        if problem:
            return feedback(name, problem)
        problem = _pair_problem(result)
        if problem:
            return feedback(name, problem)
        output, weights = result
        expected_out, expected_weights = _reference(q, k, v, 1.0 / math.sqrt(q.shape[-1]))
        where = dict(q=tuple(q.shape), k=tuple(k.shape), v=tuple(v.shape))  # the case, in every message below
        if output.shape == expected_weights.shape and weights.shape == expected_out.shape:
            problem = _(
                "did you return (weights, output)? for q {q}, k {k}, v {v} your first tensor has the weights' shape "
                "(..., Lq, Lk) = {shape}: return (output, weights), output first."
            )
            return feedback(name, problem.format(shape=tuple(expected_weights.shape), **where))
        if weights.shape == expected_weights.transpose(-2, -1).shape:
            problem = _(
                "wrong shape: weights {shape} for q {q}, k {k}, v {v} is (..., Lk, Lq), transposed: "
                "the scores are Q Kᵀ = q @ k.transpose(-2, -1), one row per query."
            )
            return feedback(name, problem.format(shape=tuple(weights.shape), **where))
        if weights.shape != expected_weights.shape:
            problem = _(
                "wrong shape: weights {shape} for q {q}, k {k}, v {v}; expected (..., Lq, Lk) = "
                "{expected}, one row per query, one column per key."
            )
            return feedback(
                name, problem.format(shape=tuple(weights.shape), expected=tuple(expected_weights.shape), **where)
            )
        if output.shape != expected_out.shape:
            problem = _(
                "wrong shape: output {shape} for q {q}, k {k}, v {v}; expected (..., Lq, d_v) = "
                "{expected}: each query gets a mix of the value vectors."
            )
            return feedback(
                name, problem.format(shape=tuple(output.shape), expected=tuple(expected_out.shape), **where)
            )
        if not _close(weights, expected_weights):
            diagnosis = _diagnose_weights(weights.double(), q, k, v)
            return feedback(
                name, _("wrong numbers for q {q}, k {k}, v {v}: {diagnosis}").format(diagnosis=diagnosis, **where)
            )
        if not _close(output, expected_out):
            problem = _(
                "the weights are right but the output is not for q {q}, k {k}, v {v}: output = weights @ v "
                "(weights (..., Lq, Lk) times values (..., Lk, d_v))."
            )
            return feedback(name, problem.format(**where))
    return feedback(name, None)


# ---------------------------------------------------------------------------------------------
# Exercise 2: the variance of a dot product

_VARIANCE_CASES = [
    (4, 1.0, False),
    (64, 1.0, False),
    (64, 1.0, True),
    (16, 0.5, False),
    (16, 2.0, True),
    (256, 2.0, False),
]


def _true_variance(d_k: int, std: float, scaled: bool) -> float:
    variance = d_k * std**4  # d_k independent products q_i·k_i, each of variance std²·std²
    return variance / d_k if scaled else variance


@never_raises(_("variance of q·k"))
def check_score_variance(score_variance: Callable) -> bool:
    """Exercise 2: ``score_variance(d_k, std, scaled) -> float``, the variance of ``q·k`` (divided
    by √d_k when ``scaled``) for q, k with independent zero-mean entries of standard deviation ``std``."""
    name = _("variance of q·k")
    answers = {}
    for case in _VARIANCE_CASES:
        result, problem = call_learner(score_variance, *case)
        if problem:
            return feedback(name, problem)
        try:
            answers[case] = float(result)
        except (TypeError, ValueError):
            return feedback(name, _("return a number, got {type}.").format(type=type(result).__name__))

    def all_match(formula) -> bool:
        return all(math.isclose(answers[c], formula(*c), rel_tol=1e-6) for c in _VARIANCE_CASES)

    if all_match(_true_variance):
        return feedback(name, None)
    unscaled = [c for c in _VARIANCE_CASES if not c[2]]
    scaled = [c for c in _VARIANCE_CASES if c[2]]
    if all(math.isclose(answers[c], _true_variance(*c), rel_tol=0.15) for c in _VARIANCE_CASES):
        return feedback(
            name, _("close, but not exact (a simulation estimate?): give the exact formula in d_k and std.")
        )
    if all(math.isclose(answers[c], math.sqrt(c[0]) * c[1] ** 2, rel_tol=1e-6) for c in unscaled):
        return feedback(name, _("that is the standard deviation of q·k; the variance is its square."))
    if all(math.isclose(answers[c], c[0] * c[1] ** 2, rel_tol=1e-6) for c in unscaled):
        return feedback(
            name,
            _(
                "each product q_i·k_i of two independent zero-mean entries has variance std²·std² = std⁴, "
                "not std²; the d_k products add up."
            ),
        )
    if all(math.isclose(answers[c], _true_variance(*c), rel_tol=1e-6) for c in unscaled):
        if all(math.isclose(answers[c], c[0] * c[1] ** 4, rel_tol=1e-6) for c in scaled):
            return feedback(name, _("scaled=True must change the answer: dividing q·k by √d_k divides its variance."))
        if all(math.isclose(answers[c], math.sqrt(c[0]) * c[1] ** 4, rel_tol=1e-6) for c in scaled):
            return feedback(
                name,
                _(
                    "multiplying a random number by c multiplies its variance by c², so dividing q·k by √d_k "
                    "divides the variance by d_k, not by √d_k."
                ),
            )
    case = next(c for c in _VARIANCE_CASES if not math.isclose(answers[c], _true_variance(*c), rel_tol=1e-6))
    d_k, std, is_scaled = case
    return feedback(
        name,
        _(
            "for d_k={d_k}, std={std}, scaled={scaled} you return {got}; hint: q·k is a sum of d_k independent "
            "products q_i·k_i."
        ).format(d_k=d_k, std=f"{std:g}", scaled=is_scaled, got=f"{answers[case]:g}"),
    )


# ---------------------------------------------------------------------------------------------
# Exercise 3: split a fused QKV projection into three


@never_raises(_("fused QKV split"))
def check_fused_qkv_split(split_qkv: Callable) -> bool:
    """Exercise 3: ``split_qkv(fused: nn.Linear(d, 3d)) -> (q_proj, k_proj, v_proj)``, three
    ``nn.Linear(d, d)`` whose outputs equal ``fused(x).chunk(3, dim=-1)``."""
    name = _("fused QKV split")
    d = 6
    with torch.random.fork_rng(devices=[]):  # leaves the learner's global random state alone
        torch.manual_seed(0)
        fused = nn.Linear(d, 3 * d).double()  # (3d, d) weight, (3d,) bias
    original = {key: value.clone() for key, value in fused.state_dict().items()}
    x = torch.randn(2, 4, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)  # (B, L, d)
    with torch.no_grad():
        expected = fused(x).chunk(3, dim=-1)  # 3 × (B, L, d)
    w_chunks = fused.weight.detach().chunk(3, dim=0)  # 3 × (d, d)

    result, problem = call_learner(split_qkv, fused)
    if problem:
        return feedback(name, problem)
    if not all(torch.equal(fused.state_dict()[key], value) for key, value in original.items()):
        return feedback(name, _("your function changed the fused layer's parameters; read them, do not modify them."))
    if not (isinstance(result, (tuple, list)) and len(result) == 3):
        return feedback(
            name, _("return three layers (q_proj, k_proj, v_proj), got {type}.").format(type=type(result).__name__)
        )
    outputs = []
    for label, layer in zip("qkv", result, strict=True):
        if not callable(layer):
            return feedback(
                name,
                _("{label}_proj is a {type}; return layers (nn.Linear(d, d)) that can be called.").format(
                    label=label, type=type(layer).__name__
                ),
            )
        try:
            with torch.no_grad():
                out = layer(x.to(getattr(getattr(layer, "weight", None), "dtype", x.dtype)))  # (B, L, ?)
        except Exception as err:
            return feedback(
                name,
                _("calling {label}_proj on x {shape} raised {type}: {error}").format(
                    label=label, shape=tuple(x.shape), type=type(err).__name__, error=err
                ),
            )
        if not isinstance(out, torch.Tensor) or out.shape != expected[0].shape:
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            return feedback(
                name,
                _(
                    "wrong shape: {label}_proj(x) has shape {shape}, expected {expected}. nn.Linear stores "
                    "weight as (out_features, in_features) = ({rows}, {cols}): split it along dim 0."
                ).format(label=label, shape=shape, expected=tuple(expected[0].shape), rows=3 * d, cols=d),
            )
        outputs.append(out.double())
    if all(_close(o, e) for o, e in zip(outputs, expected, strict=True)):
        return feedback(name, None)
    names = ("q", "k", "v")
    for i, out in enumerate(outputs):
        match = [j for j in range(3) if _close(out, expected[j])]
        if match and match[0] != i:
            return feedback(
                name,
                _(
                    "wrong order: your {mine}_proj reproduces the fused layer's {theirs} chunk. The fused "
                    "output is laid out [q | k | v]: rows 0..d-1 of the weight are q, then k, then v."
                ).format(mine=names[i], theirs=names[match[0]]),
            )
    without_bias = [x @ w.T for w in w_chunks]  # 3 × (B, L, d)
    if all(_close(o, e) for o, e in zip(outputs, without_bias, strict=True)):
        return feedback(name, _("the weights are right but the biases are missing: split fused.bias the same way."))
    weight, bias = fused.weight.detach(), fused.bias.detach()
    interleaved = [x @ weight[i::3].T + bias[i::3] for i in range(3)]  # 3 × (B, L, d)
    if all(_close(o, e) for o, e in zip(outputs, interleaved, strict=True)):
        return feedback(
            name, _("you took every third row (interleaved); chunk(3, dim=0) takes three contiguous blocks of d rows.")
        )
    worst = max((o - e).abs().max().item() for o, e in zip(outputs, expected, strict=True))
    return feedback(
        name,
        _("q_proj(x), k_proj(x), v_proj(x) differ from fused(x).chunk(3, dim=-1) (largest difference {diff}).").format(
            diff=f"{worst:.3g}"
        ),
    )


# ---------------------------------------------------------------------------------------------
# Exercise 4: a temperature for a one-hot-ish row


@never_raises(_("temperature"))
def check_temperature(temperature) -> bool:
    """Exercise 4: a temperature T with ``softmax(TEMPERATURE_SCORES / T).max() ≈ TEMPERATURE_TARGET``."""
    name = _("temperature")
    if is_stub(temperature):
        return feedback(name, NOT_DONE)
    try:
        value = float(temperature)
    except (TypeError, ValueError, RuntimeError):
        return feedback(
            name, _("give the temperature as one number, got {type}.").format(type=type(temperature).__name__)
        )
    if not value > 0 or math.isinf(value):
        return feedback(
            name, _("a temperature must be a positive finite number, got {value}.").format(value=f"{value:g}")
        )
    top = torch.softmax(TEMPERATURE_SCORES.double() / value, dim=-1).max().item()
    low, high = TEMPERATURE_TARGET - TEMPERATURE_TOLERANCE, TEMPERATURE_TARGET + TEMPERATURE_TOLERANCE
    if top < low:
        return feedback(
            name,
            _("at T={t} the top weight is {top}: too flat, lower the temperature to sharpen the row.").format(
                t=f"{value:.4g}", top=f"{top:.3f}"
            ),
        )
    if top > high:
        return feedback(
            name,
            _("at T={t} the top weight is {top}: too sharp, raise the temperature a little.").format(
                t=f"{value:.4g}", top=f"{top:.3f}"
            ),
        )
    return feedback(name, None)
