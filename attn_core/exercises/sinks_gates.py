"""Checks for notebook 12c (attention sinks: learned sink logits, output gates, differential attention).

Each ``check_…`` takes the learner's *function*, runs it on a few float64 cases and prints one verdict through
:func:`attn_core.exercises.feedback`; it never raises. Wrong answers are matched against the usual mistakes and named:
the sink logit scaled like a score, the rows renormalised to 1 (the sink dropped), the sink's column returned; the
query/gate halves split over the whole projection instead of per head, query and gate swapped, a SiLU for the
sigmoid; λ_init taken from a 1-based layer index, left out or fixed at 0.8, the two exponentials' products not
summed; the pair's values taken from adjacent kv heads, or interleaved instead of concatenated.

The references are written out here on purpose: a grader must not share a bug with the code it grades.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from attn_core.exercises import as_number, call_learner, feedback, never_raises
from attn_core.i18n import _

__all__ = ["check_sink_softmax", "check_gate_split", "check_diff_lambda", "check_pair_values"]

F64 = torch.float64


def _tensor_problem(answer, shape: tuple[int, ...], what: str) -> str | None:  # what: a _() noun
    if not isinstance(answer, torch.Tensor):
        return _("return {what} as a tensor of shape {shape}, got {type}.").format(
            what=what, shape=shape, type=type(answer).__name__
        )
    if tuple(answer.shape) != shape:
        return _("{what} must have shape {shape}, got {got}.").format(what=what, shape=shape, got=tuple(answer.shape))
    return None


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(torch.isfinite(a).all()) and torch.allclose(a.to(F64), b, rtol=1e-9, atol=1e-9)


def _first_match(answer: torch.Tensor, expected: torch.Tensor, mistakes: dict[str, torch.Tensor]) -> str | None:
    """None when right; else the named mistake the answer equals, or ""."""
    if _close(answer, expected):
        return None
    for message, wrong in mistakes.items():
        if _close(answer, wrong):
            return message
    return ""


# --------------------------------------------------------------------------- exercise 1: the softmax with a sink


def sink_softmax(scores: torch.Tensor, sinks: torch.Tensor, scale: float) -> torch.Tensor:
    """Reference: scores (B, H, Lq, Lk) unscaled, sinks (H,) -> weights (B, H, Lq, Lk), rows summing below 1."""
    scaled = scores * scale  # (B, H, Lq, Lk): only the scores are scaled
    column = sinks.view(1, -1, 1, 1).expand(*scaled.shape[:-1], 1)  # (B, H, Lq, 1)
    return torch.softmax(torch.cat([scaled, column], dim=-1), dim=-1)[..., :-1]  # (B, H, Lq, Lk)


@never_raises(_("check_sink_softmax"))
def check_sink_softmax(fn: Callable) -> bool:
    """``fn(scores, sinks, scale)``: q·kᵀ scores (B, H, Lq, Lk), sink logits (H,) -> the weights gpt-oss returns."""
    name = _("check_sink_softmax")
    generator = torch.Generator().manual_seed(25)
    for batch, heads, q_len, k_len, dim in [(1, 2, 3, 4, 16), (2, 3, 2, 5, 64)]:
        scores = 3 * torch.randn(batch, heads, q_len, k_len, generator=generator, dtype=F64)  # (B, H, Lq, Lk)
        sinks = torch.randn(heads, generator=generator, dtype=F64) + 1.0  # (H,)
        scale = 1 / math.sqrt(dim)
        answer, error = call_learner(fn, scores.clone(), sinks.clone(), scale)
        if error:
            return feedback(name, error)
        shape = (batch, heads, q_len, k_len)
        if isinstance(answer, torch.Tensor) and tuple(answer.shape) == (batch, heads, q_len, k_len + 1):
            return feedback(
                name,
                _(
                    "you returned the sink's column too, shape {got}: the sink has no value, so drop its "
                    "column after the softmax and return {shape}."
                ).format(got=tuple(answer.shape), shape=shape),
            )
        problem = _tensor_problem(answer, shape, _("the weights"))
        if problem:
            return feedback(name, problem)
        mistakes = {
            _(
                "the sink logit was scaled too: it is a learned logit that joins the softmax as it is; only the q·k "
                "scores are multiplied by 1/sqrt(head_dim)."
            ): sink_softmax(scores, sinks * scale, scale),
            _(
                "your rows sum to 1: that is the plain softmax, the sink dropped (or the rows renormalised after "
                "dropping its column). The sink's share must stay missing: rows sum to 1 − p_sink."
            ): torch.softmax(scores * scale, dim=-1),
            _(
                "the scores were not scaled: multiply q·kᵀ by scale (1/sqrt(head_dim)) before the softmax."
            ): sink_softmax(scores, sinks, 1.0),
        }
        verdict = _first_match(answer, sink_softmax(scores, sinks, scale), mistakes)
        if verdict:
            return feedback(name, verdict)
        if verdict == "":
            return feedback(
                name,
                _(
                    "the weights differ from exp(s_ij·scale) / (exp(sink_h) + Σ_j' exp(s_ij'·scale)): append each "
                    "head's sink logit as one more column, softmax over the row, drop that column."
                ),
            )
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 2: query and gate halves


def gate_split(projected: torch.Tensor, num_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference: q_proj(x) (B, L, H·2·D) -> query (B, H, L, D), gate (B, L, H·D); per head [query_h | gate_h]."""
    batch, length, width = projected.shape
    per_head = projected.view(batch, length, num_heads, width // num_heads)  # (B, L, H, 2D)
    query, gate = per_head.chunk(2, dim=-1)  # (B, L, H, D) each
    return query.transpose(1, 2), gate.reshape(batch, length, -1)  # (B, H, L, D), (B, L, H·D)


@never_raises(_("check_gate_split"))
def check_gate_split(fn: Callable) -> bool:
    """``fn(projected, num_heads)``: Qwen3-Next's q_proj output (B, L, H·2·D) -> (query, gate).

    query (B, H, L, D), gate (B, L, H·D); per head h the 2·D features are [query_h | gate_h].
    """
    name = _("check_gate_split")
    generator = torch.Generator().manual_seed(26)
    for batch, length, heads, dim in [(1, 3, 2, 4), (2, 2, 4, 3)]:
        projected = torch.randn(batch, length, heads * 2 * dim, generator=generator, dtype=F64)  # (B, L, H·2D)
        answer, error = call_learner(fn, projected.clone(), heads)
        if error:
            return feedback(name, error)
        if not isinstance(answer, tuple | list) or len(answer) != 2:
            return feedback(name, _("return two tensors (query, gate), got {type}.").format(type=type(answer).__name__))
        query, gate = answer
        problem = _tensor_problem(query, (batch, heads, length, dim), _("the query"))
        problem = problem or _tensor_problem(gate, (batch, length, heads * dim), _("the gate"))
        if problem:
            return feedback(name, problem)
        expected_query, expected_gate = gate_split(projected, heads)
        if _close(query, expected_query) and _close(gate, expected_gate):
            continue
        whole_query, whole_gate = projected.chunk(2, dim=-1)  # (B, L, H·D) each: the layout mistake
        layout = (whole_query.view(batch, length, heads, dim).transpose(1, 2), whole_gate)
        if _close(query, layout[0]) and _close(gate, layout[1]):
            return feedback(
                name,
                _(
                    "you split the whole projection in two (all queries, then all gates): Qwen3-Next lays q_proj's "
                    "rows out per head as [query_h | gate_h]. View it as (B, L, H, 2·D) first, then split the "
                    "last axis."
                ),
            )
        if _close(query, expected_gate.view(batch, length, heads, dim).transpose(1, 2)):
            return feedback(name, _("query and gate are swapped: in each head's 2·D features the query comes first."))
        return feedback(
            name, _("query or gate differs from q_proj(x).view(B, L, H, 2·D) split in halves along the last axis.")
        )
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 3: λ of differential attention


def diff_lambda(q1, k1, q2, k2, layer_idx: int) -> float:
    """Reference: λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init, λ_init = 0.8 − 0.6·exp(−0.3·layer_idx)."""
    init = 0.8 - 0.6 * math.exp(-0.3 * layer_idx)
    return math.exp(float(q1 @ k1)) - math.exp(float(q2 @ k2)) + init


@never_raises(_("check_diff_lambda"))
def check_diff_lambda(fn: Callable) -> bool:
    """``fn(lambda_q1, lambda_k1, lambda_q2, lambda_k2, layer_idx)`` -> λ, a number (or a one-element tensor)."""
    name = _("check_diff_lambda")
    generator = torch.Generator().manual_seed(27)
    for layer_idx, dim in [(0, 4), (3, 8), (11, 6)]:
        vectors = [0.3 * torch.randn(dim, generator=generator, dtype=F64) for _vector in range(4)]  # (D,) each
        raw, error = call_learner(fn, *[v.clone() for v in vectors], layer_idx)
        if error:
            return feedback(name, error)
        if isinstance(raw, torch.Tensor) and raw.numel() == dim:
            return feedback(
                name,
                _(
                    "you returned {n} numbers: λ_q1·λ_k1 is a dot product (sum the element-wise products), so "
                    "λ is one number per layer."
                ).format(n=dim),
            )
        answer = as_number(raw)
        if answer is None:
            return feedback(name, _("return λ as one number, got {type}.").format(type=type(raw).__name__))
        q1, k1, q2, k2 = vectors
        rest = math.exp(float(q1 @ k1)) - math.exp(float(q2 @ k2))
        expected = diff_lambda(q1, k1, q2, k2, layer_idx)
        mistakes = {
            _("λ_init is missing: λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init."): rest,
            _("λ_init is the constant 0.8: it depends on the layer, 0.8 − 0.6·exp(−0.3·layer_idx) (0.2 in layer 0)."): (
                rest + 0.8
            ),
            _("λ_init used a 1-based layer index: layer_idx counts from 0, so layer 0 gets 0.8 − 0.6 = 0.2."): (
                rest + 0.8 - 0.6 * math.exp(-0.3 * (layer_idx + 1))
            ),
            _("the exponent's sign is flipped: λ_init = 0.8 − 0.6·exp(−0.3·layer_idx) grows towards 0.8 with depth."): (
                rest + 0.8 - 0.6 * math.exp(0.3 * layer_idx)
            ),
        }
        if math.isclose(answer, expected, rel_tol=1e-9, abs_tol=1e-12):
            continue
        for message, wrong in mistakes.items():
            if math.isclose(answer, wrong, rel_tol=1e-9, abs_tol=1e-12):
                return feedback(name, message)
        return feedback(
            name,
            _(
                "for layer_idx={i} you returned {got}, expected {expected}: exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + "
                "0.8 − 0.6·exp(−0.3·layer_idx)."
            ).format(i=layer_idx, got=f"{answer:.6g}", expected=f"{expected:.6g}"),
        )
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 4: the value a pair reads


def pair_values(v: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Reference: v (B, Hkv, T, D) -> (B, H/2, T, 2D); pair p reads cat(v[g], v[g + Hkv/2]), g = p // (H / Hkv)."""
    kv_heads = v.shape[1]
    group = num_heads // kv_heads
    pairs = []
    for p in range(num_heads // 2):
        g = p // group
        pairs.append(torch.cat([v[:, g], v[:, g + kv_heads // 2]], dim=-1))  # (B, T, 2D)
    return torch.stack(pairs, dim=1)  # (B, H/2, T, 2D)


@never_raises(_("check_pair_values"))
def check_pair_values(fn: Callable) -> bool:
    """``fn(v, num_heads)``: v (B, Hkv, T, D) -> the value of each head pair, (B, H/2, T, 2·D)."""
    name = _("check_pair_values")
    generator = torch.Generator().manual_seed(28)
    for batch, heads, kv_heads, length, dim in [(1, 4, 4, 3, 2), (2, 8, 4, 2, 3), (1, 8, 2, 2, 2)]:
        v = torch.randn(batch, kv_heads, length, dim, generator=generator, dtype=F64)  # (B, Hkv, T, D)
        answer, error = call_learner(fn, v.clone(), heads)
        if error:
            return feedback(name, error)
        problem = _tensor_problem(answer, (batch, heads // 2, length, 2 * dim), _("the pair values"))
        if problem:
            return feedback(name, problem)
        group = heads // kv_heads
        adjacent = torch.stack(  # kv heads 2g and 2g + 1 side by side: the wrong pairing
            [
                torch.cat([v[:, 2 * (p // group) % kv_heads], v[:, (2 * (p // group) + 1) % kv_heads]], -1)
                for p in range(heads // 2)
            ],
            dim=1,
        )
        expected = pair_values(v, heads)
        interleaved = expected.view(batch, heads // 2, length, 2, dim).transpose(-1, -2).reshape(expected.shape)
        mistakes = {
            _(
                "you paired adjacent kv heads (2g, 2g + 1): DiffLlama splits the kv heads in two halves, so pair p "
                "reads v[g] and v[g + Hkv/2] (g = p // (H / Hkv)), as it splits query heads into p and p + H/2."
            ): adjacent,
            _(
                "you interleaved the two values' features: concatenate them, cat(v[g], v[g + Hkv/2]) over the last "
                "axis, as torch.cat(..., dim=-1) does."
            ): interleaved,
        }
        verdict = _first_match(answer, expected, mistakes)
        if verdict:
            return feedback(name, verdict)
        if verdict == "":
            return feedback(
                name,
                _(
                    "for v of shape {shape} and num_heads={h}: pair p must read cat(v[g], v[g + Hkv/2]) with g "
                    "= p // (H / Hkv)."
                ).format(shape=tuple(v.shape), h=heads),
            )
    return feedback(name, None)
