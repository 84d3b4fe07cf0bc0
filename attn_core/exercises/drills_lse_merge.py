"""``check_lse_merge`` (the interview gym's drills, issue #38): merge two partial attentions by their log-sum-exp.

The learner writes ``merge(out_a, lse_a, out_b, lse_b) -> (out, lse)``: the outputs ``(H, Lq, dv)`` and
natural-log log-sum-exps ``(H, Lq)`` of the same queries over two disjoint key sets (split-KV decoding, ring
attention, FlashAttention's tiles). Exact: ``lse = log(e^lse_a + e^lse_b)`` and
``out = e^(lse_a - lse) out_a + e^(lse_b - lse) out_b``.
Checked against attention over all keys, with scores large enough to overflow a naive ``exp`` and a query that saw no
key in one part (``lse = -inf``, as a causal mask makes in ring attention).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attn_core.exercises import call_learner, feedback, never_raises
from attn_core.i18n import _

__all__ = ["check_lse_merge"]


def _part(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor):
    scores = (q @ k.transpose(-1, -2)).masked_fill(~allowed, float("-inf"))  # (H, Lq, Lk)
    lse = torch.logsumexp(scores, dim=-1)  # (H, Lq): -inf where a query sees no key
    weights = torch.exp(scores - lse[..., None]).nan_to_num(0.0)  # (H, Lq, Lk)
    return weights @ v, lse  # (H, Lq, dv), (H, Lq)


def _case(scale: float):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 4, generator=g, dtype=torch.float64) for _draw in range(3))  # (H, L, d)
    q = q * scale
    allowed = torch.ones(3, 3, dtype=torch.bool)  # (Lq, Lk)
    allowed[0, 2] = allowed[1, 2] = False  # queries 0 and 1 see no key in part b: lse_b = -inf there
    out_a, lse_a = _part(q, k[:, :2], v[:, :2], allowed[:, :2])
    out_b, lse_b = _part(q, k[:, 2:], v[:, 2:], allowed[:, 2:])
    out, lse = _part(q, k, v, allowed)
    return (out_a, lse_a, out_b, lse_b), (out, lse)


def _as_tensor(value) -> torch.Tensor | None:
    try:
        array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value
        return torch.as_tensor(np.asarray(array, dtype=float)).to(torch.float64)
    except (TypeError, ValueError):
        return None


def _close(got: torch.Tensor, expected: torch.Tensor) -> bool:
    # float64 reference; a float32 answer carries a few roundings of eps32 on values of size <= max|x|.
    tol = 8 * torch.finfo(torch.float32).eps * max(1.0, float(expected[torch.isfinite(expected)].abs().max()))
    same_inf = torch.equal(torch.isinf(got), torch.isinf(expected)) and torch.equal(
        got[torch.isinf(got)], expected[torch.isinf(expected)]
    )
    finite = torch.isfinite(expected)
    return same_inf and bool(((got - expected).abs()[finite] <= tol).all())


def _diagnose(out, lse, inputs, expected) -> str | None:
    out_a, lse_a, out_b, lse_b = inputs
    true_out, true_lse = expected
    if torch.isnan(out).any() or torch.isnan(lse).any():
        return _(
            "NaN in your merge: exp of a large lse overflows (inf/inf), or -inf - -inf appears. Subtract the larger "
            "lse first (torch.logaddexp does): lse = m + log(e^(lse_a - m) + e^(lse_b - m)), m = max(lse_a, lse_b)."
        )
    if not _close(lse, true_lse):
        if _close(lse, torch.maximum(lse_a, lse_b)):
            return _("the merged lse is log(e^lse_a + e^lse_b), not max(lse_a, lse_b): the smaller part adds mass too.")
        if _close(lse, lse_a + lse_b):
            return _("adding log-sum-exps multiplies the sums: the merged lse is log(e^lse_a + e^lse_b).")
        if torch.isinf(lse).any() and not torch.isinf(true_lse).any():
            return _("the merged lse overflowed to inf: compute it as m + log(e^(lse_a - m) + e^(lse_b - m)).")
        return _("the merged lse is wrong: log(e^lse_a + e^lse_b) (torch.logaddexp).")
    if _close(out, true_out):
        return None
    if _close(out, (out_a + out_b) / 2):
        return _("you averaged the two outputs: weight each by its share of the softmax mass, e^(lse_i - lse).")
    if _close(out, torch.exp(lse_b - true_lse)[..., None] * out_a + torch.exp(lse_a - true_lse)[..., None] * out_b):
        return _("the weights are swapped: out_a gets e^(lse_a - lse), out_b gets e^(lse_b - lse).")
    if _close(out, torch.exp2(lse_a - true_lse)[..., None] * out_a + torch.exp2(lse_b - true_lse)[..., None] * out_b):
        return _(
            "these lse are natural logs: weight by e^(lse_i - lse), not 2^(lse_i - lse) (that is for log2 kernels)."
        )
    unnormalised = torch.exp(lse_a)[..., None] * out_a + torch.exp(lse_b)[..., None] * out_b
    if torch.isfinite(unnormalised).all() and _close(out, unnormalised):
        return _("the weighted sum is not normalised: divide by e^lse (i.e. weight by e^(lse_i - lse)).")
    return _("the merged output differs from attention over all keys: out = Σ_i e^(lse_i - lse) out_i.")


@never_raises(_("check_lse_merge"))
def check_lse_merge(fn: Callable) -> bool:
    """``fn(out_a, lse_a, out_b, lse_b) -> (out, lse)``: attention over the union of two disjoint key sets."""
    name = _("check_lse_merge")
    for scale in (1.0, 400.0):  # 400: scores in the hundreds, where a naive e^lse overflows float64
        inputs, expected = _case(scale)
        result, problem = call_learner(fn, *(x.clone() for x in inputs))
        if problem:
            return feedback(name, problem)
        if not isinstance(result, tuple | list) or len(result) != 2:
            return feedback(name, _("return a pair (out, lse), got {type}.").format(type=type(result).__name__))
        out, lse = (_as_tensor(part) for part in result)
        if out is None or lse is None or out.shape != expected[0].shape or lse.shape != expected[1].shape:
            return feedback(name, _("out must have the shape of out_a (H, Lq, dv) and lse the shape of lse_a (H, Lq)."))
        problem = _diagnose(out, lse, inputs, expected)
        if problem:
            return feedback(name, problem)
    return feedback(name, None)
