"""Checks for notebook 12b, FlashAttention-2 in Triton: the index arithmetic a kernel gets wrong.

A Triton kernel computes, per program, which keys to visit, which kv head to read and what to subtract
in the backward; each is one line, and each mistake runs without an error: the interpreter and the GPU
happily compute attention over the wrong keys. Each ``check_…`` takes the learner's function, prints a
verdict through :func:`attn_core.exercises.feedback` and returns True/False; it never raises on a wrong
answer, and names the usual mistakes: the causal key bound one tile short (the diagonal tile skipped), one
key short, top-left instead of bottom-right causal, every key tile visited, the end past the last key; the
kv head of a query head interleaved (``h % Hkv``), divided by Hkv, or the query head itself; Δ missing,
lse's gradient dropped or added, ``rowsum(dO)`` without O.

The references are written out here on purpose: a grader must not share a bug with the code it grades.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attn_core.exercises import as_int, call_learner, feedback, never_raises
from attn_core.i18n import _

__all__ = [
    "causal_key_end",
    "kv_head_of",
    "delta_rows",
    "check_causal_key_end",
    "check_kv_head",
    "check_delta",
]


# ----------------------------------------------------------------------------------------------
# Exercise 1: where a query tile's key loop stops (bottom-right causal)
# ----------------------------------------------------------------------------------------------


def causal_key_end(tile: int, block_size: int, q_len: int, k_len: int) -> int:
    """Exclusive end of the keys query tile ``tile`` must visit: its last query ``(tile+1)·B − 1`` sees keys
    ``j <= i + Lk − Lq``; never past ``Lk``; 0 when it sees none."""
    return max(0, min(k_len, (tile + 1) * block_size + k_len - q_len))


_END_CASES = [(64, 64, 16), (16, 80, 16), (80, 48, 16), (50, 50, 32), (24, 40, 8)]  # (Lq, Lk, B)


def _end_mistakes(tile: int, bs: int, q_len: int, k_len: int) -> list[tuple[int, str]]:
    offset = k_len - q_len
    return [
        (
            min(k_len, tile * bs + offset),
            _(
                "one tile short: that is where the tile's FIRST query stops. The loop must reach the last query's "
                "keys, so the diagonal tile is computed: (tile + 1) * block_size + Lk - Lq."
            ),
        ),
        (
            min(k_len, (tile + 1) * bs + offset - 1),
            _("one key short: the last query i sees key i + Lk - Lq itself, so the exclusive end is one more."),
        ),
        (
            min(k_len, (tile + 1) * bs),
            _(
                "top-left causal: you ignored Lk - Lq, right only when Lq == Lk. With cached keys (Lk > Lq) the "
                "queries are the LAST ones and see more keys; the series aligns causal masks bottom-right."
            ),
        ),
        (
            k_len,
            _(
                "you visit every key tile: correct with the causal mask, but the tiles wholly in the future are "
                "computed and thrown away (about half the work). Stop at (tile + 1) * block_size + Lk - Lq."
            ),
        ),
        (
            (tile + 1) * bs + offset,
            _("the end runs past the last key: clamp it with min(k_len, ...)."),
        ),
    ]


@never_raises(_("causal key bound"))
def check_causal_key_end(fn: Callable) -> bool:
    """``fn(tile, block_size, q_len, k_len)``: return the exclusive end (an int) of the keys query tile
    ``tile`` (queries ``tile·block_size`` to ``(tile+1)·block_size − 1``) visits under bottom-right causal
    attention: no key it cannot see after it, none it can see beyond it. Any value ≤ 0 means no key."""
    name = _("causal key bound")
    for q_len, k_len, bs in _END_CASES:
        for tile in range(-(-q_len // bs)):
            answer, problem = call_learner(fn, tile, bs, q_len, k_len)
            if problem is not None:
                return feedback(name, problem)
            value = as_int(answer)
            if value is None:
                return feedback(
                    name, _("return the end of the key loop (an int), got {type}.").format(type=type(answer).__name__)
                )
            expected = causal_key_end(tile, bs, q_len, k_len)
            if value == expected or (expected == 0 and value <= 0):  # an empty loop either way
                continue
            case = dict(t=tile, b=bs, lq=q_len, lk=k_len, v=value)
            where = _("for tile={t}, block_size={b}, q_len={lq}, k_len={lk} you returned {v}").format(**case)
            for candidate, diagnosis in _end_mistakes(tile, bs, q_len, k_len):
                if value == candidate:
                    return feedback(name, _("{where}: {problem}").format(where=where, problem=diagnosis))
            problem = _(
                "for tile={t}, block_size={b}, q_len={lq}, k_len={lk} you returned {v}, expected {e}: "
                "min(k_len, (tile + 1) * block_size + k_len - q_len)."
            )
            return feedback(name, problem.format(e=expected, **case))
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 2: the kv head a query head reads (GQA / MQA)
# ----------------------------------------------------------------------------------------------


def kv_head_of(head: int, num_heads: int, num_kv_heads: int) -> int:
    """Query head ``h`` reads kv head ``h // G``, ``G = Hq // Hkv`` (consecutive query heads share one)."""
    return head // (num_heads // num_kv_heads)


_HEAD_CASES = [(8, 2), (8, 4), (6, 3), (12, 4), (4, 1), (4, 4)]  # (Hq, Hkv)


def _head_mistakes(head: int, num_heads: int, num_kv_heads: int) -> list[tuple[int, str]]:
    group = num_heads // num_kv_heads
    return [
        (
            head % num_kv_heads,
            _(
                "interleaved: h % Hkv is what k.repeat(1, G, 1, 1) would pair, not repeat_interleave. Consecutive "
                "query heads share a kv head (Hugging Face's repeat_kv, ac.tiled_attention): h // (Hq // Hkv)."
            ),
        ),
        (
            head // num_kv_heads,
            _("you divided by Hkv; divide by the group size G = Hq // Hkv (the query heads per kv head)."),
        ),
        (
            head % group,
            _("that is the query head's index inside its group; the kv head is the group's number, h // G."),
        ),
        (head, _("you read kv head h: with fewer kv heads than query heads that is past the last kv head.")),
    ]


@never_raises(_("kv head of a query head"))
def check_kv_head(fn: Callable) -> bool:
    """``fn(head, num_heads, num_kv_heads)``: return the kv head (an int) query head ``head`` reads, as
    ``ac.triton_attention`` and ``ac.tiled_attention`` pair them."""
    name = _("kv head of a query head")
    answers = {}  # (Hq, Hkv, head) -> the learner's int; graded once all are in, so a mistake is named by
    for num_heads, num_kv_heads in _HEAD_CASES:  # the whole table it produces, not by one case's coincidence
        for head in range(num_heads):
            answer, problem = call_learner(fn, head, num_heads, num_kv_heads)
            if problem is not None:
                return feedback(name, problem)
            value = as_int(answer)
            if value is None:
                return feedback(
                    name, _("return a kv head index (an int), got {type}.").format(type=type(answer).__name__)
                )
            answers[num_heads, num_kv_heads, head] = value
    wrong = [key for key, value in answers.items() if value != kv_head_of(key[2], *key[:2])]
    if not wrong:
        return feedback(name, None)
    num_heads, num_kv_heads, head = wrong[0]
    case = dict(h=head, hq=num_heads, hkv=num_kv_heads, v=answers[wrong[0]])
    where = _("for head={h}, num_heads={hq}, num_kv_heads={hkv} you returned {v}").format(**case)
    for index, (_answer, diagnosis) in enumerate(_head_mistakes(head, num_heads, num_kv_heads)):
        if all(value == _head_mistakes(key[2], *key[:2])[index][0] for key, value in answers.items()):
            return feedback(name, _("{where}: {problem}").format(where=where, problem=diagnosis))
    expected = kv_head_of(head, num_heads, num_kv_heads)
    problem = _(
        "for head={h}, num_heads={hq}, num_kv_heads={hkv} you returned {v}, expected {e}: "
        "head // (num_heads // num_kv_heads)."
    )
    return feedback(name, problem.format(e=expected, **case))


# ----------------------------------------------------------------------------------------------
# Exercise 3: Δ, the backward's preprocessing
# ----------------------------------------------------------------------------------------------


def delta_rows(out: torch.Tensor, grad_out: torch.Tensor, grad_lse: torch.Tensor) -> torch.Tensor:
    """``Δ = rowsum(dO ∘ O) − dlse``: ``(B, H, L)`` from ``(B, H, L, D)``, ``(B, H, L, D)``, ``(B, H, L)``."""
    return (grad_out * out).sum(-1) - grad_lse  # (B, H, L)


def _delta_case() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(27)
    out = torch.randn(2, 3, 5, 4, dtype=torch.float64, generator=generator)  # (B, H, L, D), L != D
    grad_out = torch.randn(2, 3, 5, 4, dtype=torch.float64, generator=generator)  # (B, H, L, D)
    grad_lse = torch.randn(2, 3, 5, dtype=torch.float64, generator=generator)  # (B, H, L)
    return out, grad_out, grad_lse


@never_raises(_("delta"))
def check_delta(fn: Callable) -> bool:
    """``fn(out, grad_out, grad_lse)``: ``out``, ``grad_out`` ``(B, H, L, D)``, ``grad_lse`` ``(B, H, L)``
    (float64). Return Δ ``(B, H, L)``, the number per query row the backward subtracts from dP."""
    name = _("delta")
    out, grad_out, grad_lse = _delta_case()
    answer, problem = call_learner(fn, out.clone(), grad_out.clone(), grad_lse.clone())
    if problem is not None:
        return feedback(name, problem)
    expected = delta_rows(out, grad_out, grad_lse)  # (B, H, L)
    if not isinstance(answer, torch.Tensor):
        return feedback(
            name,
            _("return a tensor (B, H, L) = {shape}, got {type}.").format(
                shape=tuple(expected.shape), type=type(answer).__name__
            ),
        )
    if tuple(answer.shape) != tuple(expected.shape):
        return feedback(
            name,
            _(
                "delta has shape {shape}, expected {e}: one number per query row, a sum over the last axis (D) "
                "without keepdim."
            ).format(shape=tuple(answer.shape), e=tuple(expected.shape)),
        )
    if answer.dtype != expected.dtype:
        return feedback(
            name,
            _("delta has dtype {dtype}, the inputs were {e}: keep their dtype.").format(
                dtype=answer.dtype, e=expected.dtype
            ),
        )
    if not answer.isfinite().all():
        return feedback(name, _("delta contains NaN or inf."))
    row_dot = (grad_out * out).sum(-1)  # (B, H, L)
    candidates = [
        (
            torch.zeros_like(expected),
            _(
                "delta is missing (all zeros): then dS = P ∘ dP, only the diagonal half of the softmax's Jacobian. "
                "Δ = rowsum(dO ∘ O) − dlse is what makes the rows' gradients sum to zero."
            ),
        ),
        (
            row_dot,
            _(
                "lse's gradient is dropped: Δ = rowsum(dO ∘ O) − dlse. Without − dlse, anything built on lse "
                "(merge_attention, a loss on lse) gets wrong gradients."
            ),
        ),
        (
            row_dot + grad_lse,
            _("the sign of dlse: ∂lse/∂S = P, so dS = P ∘ (dP − rowsum(dO ∘ O) + dlse): Δ subtracts it."),
        ),
        (
            grad_out.sum(-1) - grad_lse,
            _("rowsum(dO) is not enough: Δ = rowsum(dO ∘ O), each dO weighted by the output it is the gradient of."),
        ),
        (-expected, _("the sign is flipped: Δ = rowsum(dO ∘ O) − dlse.")),
    ]
    if torch.allclose(answer, expected, rtol=0, atol=1e-10):  # float64 sums of 4 products: ~1e-15 apart
        return feedback(name, None)
    for candidate, diagnosis in candidates:
        if torch.allclose(answer, candidate, rtol=0, atol=1e-10):
            return feedback(name, diagnosis)
    error = float((answer - expected).abs().max())
    return feedback(
        name,
        _("wrong values, largest error {err}. Δ = (grad_out * out).sum(-1) - grad_lse.").format(err=f"{error:.3g}"),
    )
