"""``check_gated_delta_chunk`` (the interview gym's drills, issue #38): one chunk of the gated delta rule.

The learner writes ``delta_chunk(state, q, k, v, alpha, beta) -> (out, new_state)``: ``state`` ``(d_k, d_v)`` carried
in from the previous chunk, ``q, k`` ``(C, d_k)`` (k unit-norm), ``v`` ``(C, d_v)``, gates ``alpha, beta`` ``(C,)``.
Per token: ``S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T`` and ``o_t = S_t^T q_t`` (Yang et al.
2024, Gated DeltaNet). Any exact formulation passes (a loop, or the chunked WY form).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attn_core.exercises import call_learner, feedback, never_raises
from attn_core.i18n import _

__all__ = ["check_gated_delta_chunk"]


def _run(state, q, k, v, alpha, beta, *, gate_after=False, erase=True, gate=True, read_before=False, keep_beta=True):
    outs = []
    eye = torch.eye(k.shape[1], dtype=k.dtype)
    for t in range(k.shape[0]):
        a = alpha[t] if gate else 1.0
        b = beta[t]
        previous = state
        erase_term = eye - (b if keep_beta else 1.0) * torch.outer(k[t], k[t]) if erase else eye
        if gate_after:
            state = a * (erase_term @ state + b * torch.outer(k[t], v[t]))
        else:
            state = a * erase_term @ state + b * torch.outer(k[t], v[t])
        outs.append((previous if read_before else state).T @ q[t])
    return torch.stack(outs), state


def _case():
    g = torch.Generator().manual_seed(4)
    c, d_k, d_v = 5, 4, 3
    state = torch.randn(d_k, d_v, generator=g, dtype=torch.float64)
    q = torch.randn(c, d_k, generator=g, dtype=torch.float64)
    k = torch.nn.functional.normalize(torch.randn(c, d_k, generator=g, dtype=torch.float64), dim=-1)
    v = torch.randn(c, d_v, generator=g, dtype=torch.float64)
    alpha = torch.rand(c, generator=g, dtype=torch.float64) * 0.5 + 0.4
    beta = torch.rand(c, generator=g, dtype=torch.float64) * 0.8 + 0.1
    return state, q, k, v, alpha, beta


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    # float32 answers: C sequential updates of O(1) values, a few roundings each: 64·eps32 is ample and still far
    # below the smallest difference between the formulations below (checked in the tests).
    return a.shape == b.shape and bool(((a - b).abs() <= 64 * torch.finfo(torch.float32).eps).all())


MISTAKES = (
    (dict(gate=False), _("alpha is missing: the state decays by alpha_t every token (the gate), S_t = alpha_t (...).")),
    (
        dict(erase=False),
        _(
            "no erase term: that is gated linear attention. The delta rule first removes what k_t read: "
            "(I - beta_t k_t k_t^T) S."
        ),
    ),
    (
        dict(keep_beta=False),
        _(
            "the erase term needs beta too: (I - beta_t k_t k_t^T), so beta_t is how much of the old value is "
            "overwritten."
        ),
    ),
    (
        dict(gate_after=True),
        _("the gate also scaled the new write: alpha_t multiplies the old state only, then + beta_t k_t v_t^T."),
    ),
    (dict(read_before=True), _("o_t reads the state before token t's update: read S_t (after the write) with q_t.")),
)


@never_raises(_("check_gated_delta_chunk"))
def check_gated_delta_chunk(fn: Callable) -> bool:
    """``fn(state, q, k, v, alpha, beta) -> (out (C, d_v), new_state (d_k, d_v))``: one chunk of Gated DeltaNet."""
    name = _("check_gated_delta_chunk")
    inputs = _case()
    result, problem = call_learner(fn, *(x.clone() for x in inputs))
    if problem:
        return feedback(name, problem)
    if not isinstance(result, tuple | list) or len(result) != 2:
        return feedback(name, _("return a pair (out, new_state), got {type}.").format(type=type(result).__name__))
    try:
        out, state = (
            torch.as_tensor(np.asarray(p.detach() if isinstance(p, torch.Tensor) else p, dtype=float)) for p in result
        )
    except (TypeError, ValueError):
        return feedback(name, _("return tensors: out (C, d_v) and new_state (d_k, d_v)."))
    expected = _run(*inputs)
    if _close(out, expected[0]) and _close(state, expected[1]):
        return feedback(name, None)
    if _close(out, _run(torch.zeros_like(inputs[0]), *inputs[1:])[0]):
        return feedback(name, _("you started from a zero state: carry the state passed in from the previous chunk."))
    for options, message in MISTAKES:
        wrong = _run(*inputs, **options)
        if _close(out, wrong[0]):
            return feedback(name, message)
    if _close(out, expected[0]):
        return feedback(
            name, _("the outputs are right but the returned state is not S_C, the state after the last token.")
        )
    return feedback(
        name,
        _(
            "the outputs differ from o_t = S_t^T q_t with S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + "
            "beta_t k_t v_t^T."
        ),
    )
