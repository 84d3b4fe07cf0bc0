"""Checks for notebook 12, the backward pass of attention and merging partial results.

Each ``check_…`` takes the learner's function, prints a verdict through
:func:`attn_core.exercises.feedback` and returns True/False. It never raises on a wrong answer, and
it names the usual mistakes distinctly: the softmax gradient passed straight through or missing
its ``− D`` term, ``D`` summed without ``P`` or over the wrong axis, a flipped sign, the log-softmax
gradient; in the FlashAttention backward ``D = rowsum(dO)`` instead of ``rowsum(dO ∘ O)``, ``P`` recomputed
without the log-sum-exp or without the scale, ``P dO`` for ``Pᵀ dO``, the scale missing from dQ and dK,
the ``scale`` argument ignored for ``1/√D``, the sign of dS flipped, dq and dk swapped; in
a merge a plain average, ``exp`` without the max (overflow), ``max`` or ``+`` for the merged
log-sum-exp, and NaN for a query that saw no key on either side.

The references here are written out in float64 from the formulas on purpose: a grader must not
share a bug with the code it grades.

One piece: the checks of notebook 12's exercises, each next to the reference it grades against and the mistakes it
names.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from attn_core.exercises import call_learner, feedback, never_raises

__all__ = [
    "reference_softmax_backward",
    "reference_attention_backward",
    "reference_merge",
    "check_softmax_backward",
    "check_attention_backward",
    "check_merge_partials",
]

# float64 throughout: every reference value is a sum of at most a few dozen products of numbers
# below ~30 in size, so two correct codes differ by < 100 · 30 · u ≈ 3e-13 whatever their summation
# order; 1e-10 leaves a wide margin and still catches every mistake below (they are off by > 1e-3).
ATOL = 1e-10


def _tensor_problem(answer, expected: torch.Tensor, what: str) -> str | None:
    """Type, shape, dtype and finiteness of an answer that should look like ``expected``."""
    if not isinstance(answer, torch.Tensor):
        return f"expected a torch.Tensor ({what}, shape {tuple(expected.shape)}), got {type(answer).__name__}."
    if tuple(answer.shape) != tuple(expected.shape):
        return f"{what} has shape {tuple(answer.shape)}, expected {tuple(expected.shape)}."
    if answer.dtype != expected.dtype:
        return f"{what} has dtype {answer.dtype}, the inputs were {expected.dtype}: keep their dtype."
    if expected.isfinite().all() and not answer.isfinite().all():
        return f"{what} contains NaN or inf."
    return None


def _close(answer: torch.Tensor, expected: torch.Tensor) -> bool:
    if answer.shape != expected.shape:
        return False
    both_inf = (answer == expected) & expected.isinf()  # -inf == -inf is right; inf - inf would be NaN
    return bool((both_inf | ((answer - expected).abs() <= ATOL)).all())


def _first_match(answer: torch.Tensor, candidates: list[tuple[torch.Tensor, str]]) -> str | None:
    for candidate, diagnosis in candidates:
        if candidate.shape == answer.shape and _close(answer, candidate):
            return diagnosis
    return None


# ----------------------------------------------------------------------------------------------
# Exercise 1: the softmax backward, dS = P ∘ (dP − rowsum(P ∘ dP))
# ----------------------------------------------------------------------------------------------


def reference_softmax_backward(probs: torch.Tensor, grad_probs: torch.Tensor) -> torch.Tensor:
    """``dL/dS`` for ``P = softmax(S, dim=-1)`` given ``dL/dP``: ``P ∘ (dP − rowsum(P ∘ dP))``."""
    row_dot = (probs * grad_probs).sum(-1, keepdim=True)  # (..., 1) D: one number per row
    return probs * (grad_probs - row_dot)  # (..., L)


def _softmax_cases() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(21)
    cases = []
    for shape, causal in (((6,), False), ((4, 7), False), ((2, 3, 5, 5), True)):
        scores = 2 * torch.randn(shape, dtype=torch.float64, generator=generator)  # (..., L)
        if causal:  # a causal row has zeros on the masked keys
            scores = scores.masked_fill(~torch.ones(shape[-2:], dtype=torch.bool).tril(), -math.inf)
        grad = torch.randn(shape, dtype=torch.float64, generator=generator)  # (..., L) dL/dP
        cases.append((scores.softmax(-1), grad))
    return cases


@never_raises("softmax backward")
def check_softmax_backward(fn: Callable) -> bool:
    """``fn(probs, grad_probs)``: ``probs (..., L)`` = softmax of some scores over the last axis,
    ``grad_probs (..., L)`` = dL/dprobs. Return dL/dscores ``(..., L)``, the vector-Jacobian product
    with ``diag(p) − p pᵀ`` for every row (float64, same shape)."""
    name = "softmax backward"
    for probs, grad in _softmax_cases():
        answer, problem = call_learner(fn, probs.clone(), grad.clone())
        if problem is not None:
            return feedback(name, problem)
        expected = reference_softmax_backward(probs, grad)  # (..., L)
        where = f"probs {tuple(probs.shape)}"
        problem = _tensor_problem(answer, expected, "dL/dscores")
        if problem is not None:
            return feedback(name, f"{where}: {problem}")
        if _close(answer, expected):
            continue
        candidates = [
            (
                grad,
                "you passed the gradient straight through (dS = dP), the bug pjreddie/darknet PR #96 reports in "
                "its softmax layer. Softmax couples every score of a row: multiply by its Jacobian "
                "diag(p) − p pᵀ, i.e. dS = P ∘ (dP − rowsum(P ∘ dP)).",
            ),  # fmt: skip
            (
                probs * grad,
                "the − D term is missing: you computed P ∘ dP, the diag(p) half of the Jacobian. Raising "
                "one score lowers every other probability of the row (the − p pᵀ half): subtract "
                "D = rowsum(P ∘ dP) from dP first.",
            ),  # fmt: skip
            (
                probs * (grad - grad.sum(-1, keepdim=True)),
                "D must weight dP by the probabilities: D = Σ_j P_j · dP_j (rowsum(P ∘ dP)), not Σ_j dP_j.",
            ),  # fmt: skip
            (
                probs * (grad - grad.mean(-1, keepdim=True)),
                "D is a P-weighted sum, Σ_j P_j · dP_j, not the mean of dP.",
            ),
            (-expected, "the sign is flipped: dS = P ∘ (dP − D), not P ∘ (D − dP)."),
            (
                grad - probs * grad.sum(-1, keepdim=True),
                "that is the backward of log_softmax (dS = dP − p · Σ dP), whose output is log p. For "
                "P = softmax(S) itself multiply by p first: dS = P ∘ (dP − rowsum(P ∘ dP)).",
            ),
        ]
        if probs.ndim >= 2:
            wrong_axis = probs * (grad - (probs * grad).sum(-2, keepdim=True))  # (..., L)
            candidates.append((wrong_axis, "D is summed over the wrong axis: one number per row, "
                               "(P * dP).sum(dim=-1, keepdim=True), the axis softmax normalised."))  # fmt: skip
        diagnosis = _first_match(answer, candidates)
        if diagnosis is not None:
            return feedback(name, f"{where}: {diagnosis}")
        error = float((answer - expected).abs().max())
        return feedback(name, f"{where}: wrong values, largest error {error:.3g}. dS = P ∘ (dP − rowsum(P ∘ dP)).")
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 2: FlashAttention's backward from O and the log-sum-exp
# ----------------------------------------------------------------------------------------------


def reference_attention_backward(q, k, v, out, lse, grad_out, scale):
    """``(dq, dk, dv)`` of ``out = softmax(q kᵀ · scale) v`` from the saved ``out`` and ``lse``."""
    probs = torch.exp(q @ k.transpose(-2, -1) * scale - lse.unsqueeze(-1))  # (..., Lq, Lk) P recomputed
    grad_v = probs.transpose(-2, -1) @ grad_out  # (..., Lk, Dv)
    grad_probs = grad_out @ v.transpose(-2, -1)  # (..., Lq, Lk)
    row_dot = (grad_out * out).sum(-1, keepdim=True)  # (..., Lq, 1) D = rowsum(dO ∘ O)
    grad_scores = probs * (grad_probs - row_dot)  # (..., Lq, Lk)
    return grad_scores @ k * scale, grad_scores.transpose(-2, -1) @ q * scale, grad_v


def _backward_cases():
    # Lq == Lk first: there P dO (for Pᵀ dO) has the right shape and gets its diagnosis. The last case's scale is
    # not 1/√D (MLA's is 1/√(nope + rope), a tuned model's anything): an answer that ignores `scale` fails there.
    generator = torch.Generator().manual_seed(22)
    for shape_q, shape_k, scale in (
        ((2, 3, 6, 8), (2, 3, 6, 8), None),
        ((5, 4), (7, 4), None),
        ((1, 2, 3, 4), (1, 2, 9, 4), None),
        ((2, 4, 8), (2, 6, 8), 0.3),
    ):
        q = torch.randn(shape_q, dtype=torch.float64, generator=generator)  # (..., Lq, D)
        k = torch.randn(shape_k, dtype=torch.float64, generator=generator)  # (..., Lk, D)
        v = torch.randn(shape_k, dtype=torch.float64, generator=generator)  # (..., Lk, Dv)
        scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
        scores = q @ k.transpose(-2, -1) * scale  # (..., Lq, Lk)
        lse = torch.logsumexp(scores, dim=-1)  # (..., Lq)
        out = scores.softmax(-1) @ v  # (..., Lq, Dv)
        grad_out = torch.randn(out.shape, dtype=torch.float64, generator=generator)  # (..., Lq, Dv)
        yield q, k, v, out, lse, grad_out, scale


def _backward_mistakes(q, k, v, out, lse, grad_out, scale) -> list[tuple[tuple, str]]:
    def backward(probs, row_dot, q_scale=scale, dv=None):
        grad_scores = probs * (grad_out @ v.transpose(-2, -1) - row_dot)  # (..., Lq, Lk)
        grad_v = probs.transpose(-2, -1) @ grad_out if dv is None else dv
        return grad_scores @ k * q_scale, grad_scores.transpose(-2, -1) @ q * q_scale, grad_v

    scores = q @ k.transpose(-2, -1)  # (..., Lq, Lk) unscaled
    probs = torch.exp(scores * scale - lse.unsqueeze(-1))  # (..., Lq, Lk)
    right_d = (grad_out * out).sum(-1, keepdim=True)  # (..., Lq, 1)
    mistakes = [
        (
            backward(probs, grad_out.sum(-1, keepdim=True)),
            "D = rowsum(dO ∘ O), not rowsum(dO): multiply by the "
            "output before summing (D_i = dO_i · O_i = Σ_j P_ij dP_ij). Your dV is right, dQ and dK are not.",
        ),  # fmt: skip
        (
            backward(probs, 0.0),
            "dS = P ∘ (dP − D): the − D term is missing, so dQ and dK are wrong while dV is "
            "right. D = rowsum(dO ∘ O) is one number per query row.",
        ),  # fmt: skip
        (
            backward(torch.exp(scores * scale), right_d),
            "P = exp(S − lse): you used exp(S), the unnormalised "
            "weights. The saved log-sum-exp is what turns a recomputed score tile into probabilities.",
        ),  # fmt: skip
        (
            backward(torch.exp(scores - lse.unsqueeze(-1)), right_d),
            "recompute S with the scale: P = exp(q kᵀ · scale − lse); lse was computed from the scaled scores.",
        ),  # fmt: skip
        (
            backward(probs, right_d, q_scale=1.0),
            "dQ and dK miss the factor scale: S = q kᵀ · scale, so dQ = dS k · scale and dK = dSᵀ q · scale.",
        ),  # fmt: skip
    ]
    right = reference_attention_backward(q, k, v, out, lse, grad_out, scale)
    mistakes.append(((right[1], right[0], right[2]), "you swapped dq and dk: return (dq, dk, dv) in that order."))
    mistakes.append(
        (
            (-right[0], -right[1], right[2]),
            "dq and dk have the wrong sign, dV is right: dS = P ∘ (dP − D), not P ∘ (D − dP).",
        )
    )
    usual = 1 / math.sqrt(q.shape[-1])
    if not math.isclose(scale, usual):  # the argument ignored for the usual 1/√D, in P and in dQ, dK
        mistakes.append(
            (
                backward(torch.exp(scores * usual - lse.unsqueeze(-1)), right_d, q_scale=usual),
                f"you used 1/√D = {usual:.4g} instead of the `scale` you were given ({scale:g}): use the argument "
                "in P = exp(q kᵀ · scale − lse) and in dQ, dK (MLA's scale, for one, is 1/√(nope + rope)).",
            )
        )
    if probs.shape[-1] == probs.shape[-2]:  # P dO has the right shape only when Lq == Lk
        mistakes.append((backward(probs, right_d, dv=probs @ grad_out), "dV = Pᵀ dO (each key collects the "
                         "gradient of every query that read it), not P dO."))  # fmt: skip
    return mistakes


@never_raises("FlashAttention backward")
def check_attention_backward(fn: Callable) -> bool:
    """``fn(q, k, v, out, lse, grad_out, scale)``: ``q (..., Lq, D)``, ``k (..., Lk, D)``, ``v (..., Lk, Dv)``,
    the forward's ``out (..., Lq, Dv)`` and ``lse (..., Lq)`` (log-sum-exp of each row of ``q kᵀ · scale``),
    and ``grad_out = dL/dout``. Return ``(dq, dk, dv)`` without the forward's weights: recompute
    ``P = exp(q kᵀ · scale − lse)`` and use ``D = rowsum(grad_out ∘ out)`` (float64)."""
    name = "FlashAttention backward"
    for case in _backward_cases():
        answer, problem = call_learner(fn, *(t.clone() if isinstance(t, torch.Tensor) else t for t in case))
        if problem is not None:
            return feedback(name, problem)
        q, k, v, *_ = case
        where = f"q {tuple(q.shape)}, k {tuple(k.shape)}"
        if not (isinstance(answer, tuple | list) and len(answer) == 3):
            return feedback(name, f"{where}: return three tensors (dq, dk, dv), got {type(answer).__name__}.")
        expected = reference_attention_backward(*case)
        for got, want, what in zip(answer, expected, ("dq", "dk", "dv"), strict=True):
            problem = _tensor_problem(got, want, what)
            if problem is not None:
                if (  # a shape that is the other gradient's: the swap explains it (not a dtype or a NaN)
                    what in ("dq", "dk")
                    and isinstance(got, torch.Tensor)
                    and tuple(got.shape) != tuple(want.shape)
                    and tuple(got.shape) == tuple(expected[1 if what == "dq" else 0].shape)
                ):
                    problem += " Did you swap dq and dk? Return (dq, dk, dv) in that order."
                return feedback(name, f"{where}: {problem}")
        right = [_close(got, want) for got, want in zip(answer, expected, strict=True)]
        if all(right):
            continue
        for mistake, diagnosis in _backward_mistakes(*case):
            if all(_close(got, want) for got, want in zip(answer, mistake, strict=True)):
                return feedback(name, f"{where}: {diagnosis}")
        wrong = ", ".join(what for what, ok in zip(("dq", "dk", "dv"), right, strict=True) if not ok)
        hint = (
            " dV is right, so P is: look at dS = P ∘ (dP − D) and the products with k and q."
            if right[2]
            else " Start from dV = Pᵀ dO with P = exp(q kᵀ · scale − lse)."
        )
        return feedback(name, f"{where}: {wrong} wrong.{hint}")
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 3: merge two partial results by their log-sum-exp
# ----------------------------------------------------------------------------------------------


def reference_merge(out_a, lse_a, out_b, lse_b):
    """Attention over keys A ∪ B from the partial results over A and B (float64, -inf rows handled)."""
    lse = torch.logaddexp(lse_a, lse_b)  # (..., Lq): -inf only where both are -inf
    seen = lse > -math.inf  # (..., Lq)
    safe = torch.where(seen, lse, 0.0)  # (..., Lq)
    share_a = torch.where(seen, torch.exp(lse_a - safe), 0.0).unsqueeze(-1)  # (..., Lq, 1)
    share_b = torch.where(seen, torch.exp(lse_b - safe), 0.0).unsqueeze(-1)  # (..., Lq, 1)
    return share_a * out_a + share_b * out_b, lse  # (..., Lq, Dv), (..., Lq)


def _merge_cases():
    lse_a = torch.tensor([[0.3, 2.0, -1.0, 5.0]], dtype=torch.float64)  # (1, Lq) plain values
    lse_b = torch.tensor([[1.1, -0.5, -1.0, 4.0]], dtype=torch.float64)
    yield "ordinary rows", lse_a, lse_b
    yield "large log-sum-exps (long rows of large scores)", lse_a + 800.0, lse_b + 800.0  # exp(800) overflows
    yield (
        "a query that saw no key in A",
        torch.tensor([[-math.inf, 0.7]], dtype=torch.float64),
        torch.tensor([[0.2, 0.1]], dtype=torch.float64),
    )
    yield (
        "a query that saw no key at all",
        torch.tensor([[0.5, -math.inf]], dtype=torch.float64),
        torch.tensor([[0.4, -math.inf]], dtype=torch.float64),
    )


def _merge_inputs(lse_a, lse_b):
    generator = torch.Generator().manual_seed(24)
    out_a = torch.randn(*lse_a.shape, 3, dtype=torch.float64, generator=generator)  # (1, Lq, Dv)
    out_b = torch.randn(*lse_b.shape, 3, dtype=torch.float64, generator=generator)  # (1, Lq, Dv)
    out_a[lse_a == -math.inf] = 0.0  # a query that saw no key has output 0, as tiled_attention returns
    out_b[lse_b == -math.inf] = 0.0
    return out_a, lse_a, out_b, lse_b


@never_raises("merge two partial results")
def check_merge_partials(fn: Callable) -> bool:
    """``fn(out_a, lse_a, out_b, lse_b)``: the attention outputs ``(..., Lq, Dv)`` and log-sum-exps
    ``(..., Lq)`` of the same queries over two disjoint sets of keys A and B. Return ``(out, lse)`` over
    A ∪ B. ``lse = -inf`` marks a query that saw no key of that set (its output row is 0); a query that
    saw no key in either must come out as ``out = 0``, ``lse = -inf``, never NaN."""
    name = "merge two partial results"
    for what, lse_a, lse_b in _merge_cases():
        inputs = _merge_inputs(lse_a, lse_b)
        answer, problem = call_learner(fn, *(t.clone() for t in inputs))
        if problem is not None:
            return feedback(name, problem)
        where = f"{what}: lse_a {lse_a.tolist()[0]}, lse_b {lse_b.tolist()[0]}"
        if isinstance(answer, torch.Tensor):
            return feedback(name, f"{where}: return two tensors (out, lse); the merged lse is needed to merge again.")
        if not (isinstance(answer, tuple | list) and len(answer) == 2):
            return feedback(name, f"{where}: return (out, lse), got {type(answer).__name__}.")
        out_a, _, out_b, _ = inputs
        expected = reference_merge(*inputs)
        for got, want, label in zip(answer, expected, ("out", "lse"), strict=True):
            problem = _tensor_problem(got, want, label)
            if problem is not None:
                break
        if problem is None and all(_close(got, want) for got, want in zip(answer, expected, strict=True)):
            continue
        out, lse = answer
        nan = isinstance(out, torch.Tensor) and out.isnan().any() or isinstance(lse, torch.Tensor) and lse.isnan().any()
        if nan and "no key at all" in what:
            return feedback(name, f"{where}: NaN for the query that saw no key: with both lse = -inf, "
                            "lse_a − max = (−inf) − (−inf) = NaN, the bug of logsumexp over all −inf (e.g. "
                            "JuliaStats/StatsFuns.jl #22). Use 0 as the reference there: out 0, lse −inf.")  # fmt: skip
        if (nan or (isinstance(out, torch.Tensor) and out.isinf().any())) and "large" in what:
            return feedback(name, f"{where}: exp(lse) overflows to inf at lse = 800: subtract "
                            "m = max(lse_a, lse_b) first, weights exp(lse_a − m) and exp(lse_b − m).")  # fmt: skip
        if problem is not None:
            return feedback(name, f"{where}: {problem}")
        diagnosis = None
        if not _close(lse, expected[1]):
            diagnosis = _first_match(lse, [
                (torch.maximum(lse_a, lse_b), "the merged lse is log(e^lse_a + e^lse_b) (torch.logaddexp), "
                 "not max(lse_a, lse_b): both sets add to the normaliser."),
                (lse_a + lse_b, "the merged lse is log(e^lse_a + e^lse_b), not lse_a + lse_b: adding logs "
                 "multiplies the normalisers (asked and answered in zhuzilin/ring-flash-attention issue #20)."),
            ]) or "the merged lse is wrong: lse = log(e^lse_a + e^lse_b) = torch.logaddexp(lse_a, lse_b)."  # fmt: skip
        elif not _close(out, expected[0]):
            weights_by_lse = (lse_a.unsqueeze(-1) * out_a + lse_b.unsqueeze(-1) * out_b) / (lse_a + lse_b).unsqueeze(-1)
            diagnosis = _first_match(out, [
                ((out_a + out_b) / 2, "a plain average of the two outputs: weight each by its share of the "
                 "normaliser, exp(lse_a − lse) and exp(lse_b − lse)."),
                (out_a + out_b, "the outputs are normalised averages: adding them double-counts. Weight "
                 "each by exp(lse_x − lse) (the two weights sum to 1)."),
                (weights_by_lse, "weight by the normalisers e^lse, not by the log-sum-exps themselves."),
            ]) or "out is wrong: out = exp(lse_a − lse) · out_a + exp(lse_b − lse) · out_b."  # fmt: skip
        return feedback(name, f"{where}: {diagnosis}")
    return feedback(name, None)
