"""``check_causal_mask`` (notebook 16): a boolean causal mask, bottom-right aligned, and its usual mistakes.

See :mod:`attn_core.exercises.handwrite` for what each check diagnoses.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attn_core.exercises import call_learner, feedback, never_raises
from attn_core.exercises.handwrite_common import _shape

__all__ = ["check_causal_mask"]


def _causal_variants(q_len: int, k_len: int) -> dict[str, torch.Tensor]:
    query = torch.arange(q_len).unsqueeze(-1)  # (Lq, 1)
    key = torch.arange(k_len)  # (Lk,)
    offset = k_len - q_len
    return {
        "bottom-right": key <= query + offset,  # (Lq, Lk), the answer
        "top-left": key <= query,  # (Lq, Lk)
        "strict": key < query + offset,  # (Lq, Lk), diagonal excluded
        "strict top-left": key < query,  # (Lq, Lk)
        "one extra": key <= query + offset + 1,  # (Lq, Lk), one future key leaks
    }


def _causal_problem(fn, q_len: int, k_len: int) -> str | None:
    where = f"for q_len={q_len}, k_len={k_len}"
    result, problem = call_learner(fn, q_len, k_len)
    if problem:
        return problem
    if not isinstance(result, torch.Tensor):
        return f"{where} return a torch.Tensor, got {type(result).__name__}."
    variants = _causal_variants(q_len, k_len)
    expected = variants["bottom-right"]
    if tuple(result.shape) != (q_len, k_len):
        if tuple(result.shape) == (k_len, q_len):
            return f"{where} got shape {_shape(result)} = (k_len, q_len); one row per query: (q_len, k_len)."
        return f"{where} expected shape (q_len, k_len) = {(q_len, k_len)}, got {_shape(result)}."
    if result.dtype != torch.bool:
        if result.is_floating_point() and torch.isinf(result).any():
            return (
                f"{where} you returned an additive float mask (0 / -inf, dtype {result.dtype}). Return a torch.bool "
                "mask with True = may attend; ac.mask_to_additive converts it when an API wants the additive form."
            )
        if torch.equal(result != 0, expected):
            if result.is_floating_point():
                why = "a float 0/1 mask passed as attn_mask is *added* to the scores (+0 or +1: nothing blocked)"
            else:
                why = (
                    f"F.scaled_dot_product_attention refuses an integer ({result.dtype}) attn_mask, and older "
                    "nn.MultiheadAttention read a uint8 mask as True = *blocked*, the opposite"
                )
            return (
                f"{where} right pattern, wrong dtype: {result.dtype} 0/1. Masks here are torch.bool with "
                f"True = may attend (the convention of F.scaled_dot_product_attention); {why}. "
                "Return .bool() (or build it with a comparison)."
            )
        if torch.equal(result == 0, expected):
            return (
                f"{where} wrong dtype ({result.dtype}) and flipped: your 1s mark the *blocked* keys. Return a "
                "torch.bool mask with True = may attend, i.e. torch.tril(...).bool() rather than triu."
            )
        return f"{where} return a torch.bool mask (True = may attend), got dtype {result.dtype}."
    if torch.equal(result, expected):
        return None
    if torch.equal(result, ~expected) or torch.equal(result, ~variants["top-left"]):
        return (
            f"{where} the mask is flipped: True marks the future keys (a triu mask, True = blocked, as in "
            "nn.MultiheadAttention). Here True = may attend: keep the lower triangle (torch.tril) instead."
        )
    if q_len > k_len and torch.equal(result, variants["top-left"]):
        return (
            f"{where} top-left alignment. The rule is bottom-right for q_len > k_len too: the last query sees "
            f"every key and query i sees keys 0..i+(k_len-q_len), so the first q_len-k_len = {q_len - k_len} "
            "queries see no key at all (as ac.causal_mask). A negative diagonal does it: "
            "torch.tril(torch.ones(q_len, k_len, dtype=torch.bool), diagonal=k_len - q_len)."
        )
    if q_len < k_len and torch.equal(result, variants["top-left"]):
        return (
            f"{where} top-left alignment: query i sees keys 0..i. With a KV cache the {q_len} queries are the "
            f"*last* {q_len} of {k_len} tokens, so query i sees keys 0..i+(k_len-q_len): "
            "torch.tril(torch.ones(q_len, k_len, dtype=torch.bool), diagonal=k_len - q_len)."
        )
    if torch.equal(result, variants["strict"]) or torch.equal(result, variants["strict top-left"]):
        return (
            f"{where} off by one: the diagonal is excluded, so a token cannot see itself (diagonal=-1 or "
            "triu(..., 0)). A query may attend to its own position."
        )
    if torch.equal(result, variants["one extra"]):
        return f"{where} off by one: every query also sees the next (future) key. Shift the diagonal down by one."
    wrong = (result != expected).nonzero()[0].tolist()
    return (
        f"{where} entry {tuple(wrong)} is {bool(result[tuple(wrong)])}, expected "
        f"{bool(expected[tuple(wrong)])}: query i may attend to keys 0..i+(k_len-q_len)."
    )


@never_raises("check_causal_mask")
def check_causal_mask(fn: Callable) -> bool:
    """``fn(q_len, k_len) -> torch.bool (q_len, k_len)``, True = may attend, aligned to the bottom-right
    like :func:`attn_core.causal_mask` (the last query sees every key)."""
    name = "check_causal_mask"
    for q_len, k_len in ((4, 4), (3, 6), (1, 5), (5, 3)):
        problem = _causal_problem(fn, q_len, k_len)
        if problem:
            return feedback(name, problem)
    return feedback(name, None)
