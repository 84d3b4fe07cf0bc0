"""Checks for notebook 05, masks & dropout.

Each ``check_…`` takes the learner's answer, prints a verdict through
:func:`attn_core.exercises.feedback` and returns True/False. It never raises on a wrong
answer, and it names the usual failure distinctly: not attempted, not a boolean mask,
wrong shape (e.g. a missing head axis), the flipped True = blocked convention, a missing
half of a combined mask, an off-by-one window, a forgotten dropout rescale.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from attn_core.exercises import NOT_DONE, call_learner, feedback, is_stub, never_raises
from attn_core.masks import causal_mask, padding_mask, sliding_window_mask

__all__ = [
    "check_sliding_window_mask",
    "check_causal_padding_mask",
    "check_mask_from_mha",
    "check_expected_row_sums",
    "ROW_SUM_SETTING",
]

FLIPPED = (
    "flipped convention: your mask is True where attention is BLOCKED. attn_core and "
    "F.scaled_dot_product_attention use True = may attend; invert it with ~mask (or ac.mask_from_blocked)."
)


def _mask_problem(answer, expected: torch.Tensor, near_misses: dict[str, torch.Tensor], where: str) -> str | None:
    """Compare a boolean mask with the expected one; explain the first difference."""
    if not isinstance(answer, torch.Tensor):
        return f"{where}: expected a torch.Tensor, got {type(answer).__name__}."
    if answer.dtype != torch.bool:
        return (
            f"{where}: your mask has dtype {answer.dtype}; attn_core masks are boolean (True = may attend). "
            "Comparisons such as `key <= query` already give booleans; convert a 0/1 mask with ac.mask_from_float(m)."
        )
    if tuple(answer.shape) != tuple(expected.shape):
        for diagnosis, candidate in near_misses.items():
            if tuple(candidate.shape) == tuple(answer.shape) and torch.equal(answer, candidate):
                return f"{where}: wrong shape {tuple(answer.shape)}, expected {tuple(expected.shape)}. {diagnosis}"
        return f"{where}: wrong shape {tuple(answer.shape)}, expected {tuple(expected.shape)}."
    if torch.equal(answer, expected):
        return None
    if torch.equal(answer, ~expected):
        return f"{where}: {FLIPPED}"
    for diagnosis, candidate in near_misses.items():
        if tuple(candidate.shape) == tuple(answer.shape) and torch.equal(answer, candidate):
            return f"{where}: {diagnosis}"
    wrong = (answer != expected).nonzero()
    first = tuple(wrong[0].tolist())
    return (
        f"{where}: wrong values: {len(wrong)} of {expected.numel()} entries differ, first at index {first}: "
        f"yours {bool(answer[first])}, expected {bool(expected[first])}."
    )


# ----------------------------------------------------------------------------------------------
# Exercise 1: a sliding-window mask from scratch
# ----------------------------------------------------------------------------------------------

SLIDING_CASES = ((6, 3), (5, 1), (4, 4), (7, 2), (3, 5))


@never_raises("sliding-window mask")
def check_sliding_window_mask(fn: Callable[[int, int], torch.Tensor]) -> bool:
    """``fn(seq_len, window)`` must return the boolean ``(seq_len, seq_len)`` sliding-window mask:
    query ``i`` may attend to keys ``i - window + 1 .. i`` (itself and the ``window - 1`` before it)."""
    name = "sliding-window mask"
    for seq_len, window in SLIDING_CASES:
        answer, problem = call_learner(fn, seq_len, window)
        if problem is not None:
            return feedback(name, problem)
        expected = sliding_window_mask(seq_len, window)  # (L, L)
        query = torch.arange(seq_len).unsqueeze(-1)  # (L, 1)
        key = torch.arange(seq_len)  # (L,)
        near_misses = {
            "the window is one too wide: count the query itself, so keep keys with query - key < window.": (
                sliding_window_mask(seq_len, window + 1)
            ),
            "the window is one too narrow: the query itself counts as one of the `window` keys.": (
                sliding_window_mask(seq_len, max(window - 1, 1))
            ),
            "you forgot the causal half: a query must not see keys after it (add key <= query).": (
                (query - key).abs() < window
            ),
            "you forgot the window: this is the plain causal mask (add query - key < window).": causal_mask(seq_len),
            "your window looks at keys after the query (key > query), the future: transpose it. Query i keeps "
            "keys i - window + 1 .. i, i.e. key <= query and query - key < window.": expected.T,
            "this lets every query see the keys after the query (the future) and blocks the past: it is the "
            "causal mask transposed. Keep key <= query, and query - key < window.": causal_mask(seq_len).T,
        }
        where = f"seq_len={seq_len}, window={window}"
        problem = _mask_problem(answer, expected, near_misses, where)
        if problem is not None and problem.startswith(f"{where}: wrong values"):
            future = answer & (key > query)  # (L, L): keys after the query that the answer lets through
            if future.any():
                first = tuple(future.nonzero()[0].tolist())
                problem = (
                    f"{where}: your mask lets a query see keys after the query (the future), first at index "
                    f"{first}: query {first[0]} sees key {first[1]}. A sliding window is causal: key <= query."
                )
        if problem is not None:
            return feedback(name, problem)
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 2: causal + padding for a batch
# ----------------------------------------------------------------------------------------------

BATCH_CASES = (([3, 5], 5), ([1, 4, 2], 4), ([6], 6))


@never_raises("causal + padding mask")
def check_causal_padding_mask(fn: Callable[[Sequence[int], int], torch.Tensor]) -> bool:
    """``fn(lengths, seq_len)`` must return the boolean ``(B, 1, L, L)`` mask of a right-padded batch:
    query ``i`` of sequence ``b`` may attend to key ``j`` iff ``j <= i`` and ``j < lengths[b]``."""
    name = "causal + padding mask"
    for lengths, seq_len in BATCH_CASES:
        answer, problem = call_learner(fn, list(lengths), seq_len)
        if problem is not None:
            return feedback(name, problem)
        batch = len(lengths)
        keys_real = padding_mask(lengths, seq_len)  # (B, 1, 1, L)
        causal = causal_mask(seq_len)  # (L, L)
        expected = keys_real & causal  # (B, 1, L, L)
        queries_real = keys_real.transpose(-1, -2)  # (B, 1, L, 1)
        full = (batch, 1, seq_len, seq_len)
        near_misses = {
            "a (B, L, L) mask lines up B with the HEAD axis of the (B, H, L, L) weights (broadcasting aligns "
            "from the right). Keep a singleton head axis: (B, 1, L, L), e.g. mask.unsqueeze(1).": expected.squeeze(1),
            "this is only the padding part (B, 1, 1, L): AND it with the causal (L, L) mask.": keys_real,
            "this is only the causal part: AND it with the padding mask (B, 1, 1, L).": causal,
            "you forgot the padding: padded keys (j >= length) must be blocked too.": causal.expand(full),
            "you forgot the causal part: key j must also satisfy j <= i.": keys_real.expand(full),
            "you combined with |: a key must pass BOTH masks, so combine with &.": keys_real | causal,
            "you also blocked the padded QUERIES' rows. This exercise asks for key padding only, "
            "(B, 1, 1, L) & causal: padded query rows stay as they are and the loss ignores them.": (
                expected & queries_real
            ),
        }
        problem = _mask_problem(answer, expected, near_misses, f"lengths={list(lengths)}, seq_len={seq_len}")
        if problem is not None:
            return feedback(name, problem)
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 3: convert nn.MultiheadAttention-style masks to ours
# ----------------------------------------------------------------------------------------------


def _mha_cases() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(5)
    square_blocked = ~causal_mask(4)  # (4, 4) True = blocked, like torch.triu(ones, 1).bool()
    square_padding = torch.tensor([[False, False, False, True], [False, False, False, False]])  # (2, 4) True = pad
    rect_blocked = torch.rand(3, 5, generator=generator) < 0.3  # (3, 5)
    rect_padding = torch.rand(2, 5, generator=generator) < 0.3  # (2, 5)
    return [(square_blocked, square_padding), (rect_blocked, rect_padding)]


def _on_query_axis(allowed: torch.Tensor, key_padding_mask: torch.Tensor) -> torch.Tensor:
    """``allowed & ~key_padding_mask`` with the padding on the query axis, when Lq == Lk (else an empty tensor)."""
    if allowed.shape[0] != key_padding_mask.shape[-1]:
        return torch.empty(0, dtype=torch.bool)  # Lq ≠ Lk: that mistake cannot even be built
    return allowed & (~key_padding_mask)[:, None, :, None]  # (B, 1, Lq, Lk)


@never_raises("nn.MultiheadAttention masks -> attn_core")
def check_mask_from_mha(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> bool:
    """``fn(attn_mask, key_padding_mask)`` gets ``nn.MultiheadAttention``'s boolean masks,
    ``attn_mask (Lq, Lk)`` and ``key_padding_mask (B, Lk)``, both True = BLOCKED, and must return
    the one attn_core mask ``(B, 1, Lq, Lk)`` with True = may attend."""
    name = "nn.MultiheadAttention masks -> attn_core"
    for attn_mask, key_padding_mask in _mha_cases():
        answer, problem = call_learner(fn, attn_mask.clone(), key_padding_mask.clone())
        if problem is not None:
            return feedback(name, problem)
        allowed = ~attn_mask  # (Lq, Lk)
        keys_real = (~key_padding_mask)[:, None, None, :]  # (B, 1, 1, Lk)
        expected = allowed & keys_real  # (B, 1, Lq, Lk)
        full = expected.shape
        near_misses = {
            "a (B, Lq, Lk) mask lines up B with the HEAD axis of the (B, H, Lq, Lk) weights. "
            "Keep a singleton head axis: (B, 1, Lq, Lk).": expected.squeeze(1),
            "you kept nn.MultiheadAttention's convention (True = blocked) for BOTH masks: invert each with ~.": (
                attn_mask & key_padding_mask[:, None, None, :]
            ),
            "you inverted attn_mask but not key_padding_mask: it is True = blocked too (True marks padding).": (
                allowed & key_padding_mask[:, None, None, :]
            ),
            "you inverted key_padding_mask but not attn_mask: it is True = blocked too.": attn_mask & keys_real,
            "you combined with |: a key must be allowed by BOTH masks, so combine with &.": allowed | keys_real,
            "you forgot key_padding_mask: padded keys must be blocked too.": allowed.expand(full),
            "you forgot attn_mask: only the padding is applied.": keys_real.expand(full),
            "you put key_padding_mask on the QUERY axis: it marks padded KEYS, so it indexes the last axis, "
            "(~key_padding_mask)[:, None, None, :] of shape (B, 1, 1, Lk).": _on_query_axis(allowed, key_padding_mask),
        }
        where = f"attn_mask {tuple(attn_mask.shape)}, key_padding_mask {tuple(key_padding_mask.shape)}"
        problem = _mask_problem(answer, expected, near_misses, where)
        if problem is not None:
            return feedback(name, problem)
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 4: expected row sums under dropout
# ----------------------------------------------------------------------------------------------

#: The setting of exercise 4: a batch padded on the right, queries AND keys masked at padding,
#: attn_core attention with inverted dropout ``p`` in training mode.
ROW_SUM_SETTING = {"lengths": [2, 4], "seq_len": 4, "dropout_p": 0.25}


@never_raises("expected row sums under dropout")
def check_expected_row_sums(answer) -> bool:
    """``answer``: the expected sum of each query's attention weights, shape ``(B, L)``, in the
    ``ROW_SUM_SETTING`` (mask ``real_query & real_key``, ``dropout_p = 0.25``, training mode).
    An estimate from sampling is accepted within 0.02."""
    name = "expected row sums under dropout"
    if is_stub(answer):
        return feedback(name, NOT_DONE)
    if isinstance(answer, torch.Tensor) and answer.is_complex():
        return feedback(name, f"expected a (B, L) tensor of real numbers, got dtype {answer.dtype}.")
    try:
        answer = torch.as_tensor(answer, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return feedback(name, f"expected a (B, L) tensor of numbers, got {type(answer).__name__}.")
    lengths, seq_len, p = ROW_SUM_SETTING["lengths"], ROW_SUM_SETTING["seq_len"], ROW_SUM_SETTING["dropout_p"]
    real = padding_mask(lengths, seq_len)[:, 0, 0, :].to(torch.float64)  # (B, L): 1 real query, 0 padded
    expected = real  # (B, L)
    shape = (len(lengths), seq_len)
    if tuple(answer.shape) != shape:
        return feedback(name, f"wrong shape {tuple(answer.shape)}: one expected sum per (sequence, query) = {shape}.")

    def close(candidate: torch.Tensor) -> bool:
        return bool(torch.allclose(answer, candidate, atol=0.02, rtol=0.0))

    if close(expected):
        return feedback(name, None)
    diagnoses = [
        (
            real * (1 - p),
            "that is (1 - p) per real row: dropout without the 1/(1 - p) rescale. attn_core (like "
            "nn.Dropout) uses inverted dropout, so the expected weights, and their sum, are unchanged.",
        ),
        (
            real / (1 - p),
            "that is 1/(1 - p) per real row: the rescale only compensates the zeros. Each weight survives "
            "with probability 1 - p and is then multiplied by 1/(1 - p): the expectation is the weight itself.",
        ),
        (
            torch.ones(shape, dtype=torch.float64),
            "padded queries see no key at all (the mask row is all False). attn_core gives them zero weights "
            "(not a uniform row), and dropout keeps zeros at zero: their expected sum is 0.",
        ),
        (
            torch.full(shape, 1 - p, dtype=torch.float64),
            "two mistakes: padded query rows are all zero (no visible key), and inverted dropout keeps the "
            "expected sum of a real row at 1.",
        ),
    ]
    for candidate, diagnosis in diagnoses:
        if close(candidate):
            return feedback(name, diagnosis)
    wrong = (answer - expected).abs().argmax()
    row, col = divmod(int(wrong), seq_len)
    yours, right = float(answer[row, col]), float(expected[row, col])
    return feedback(name, f"wrong values: entry ({row}, {col}) is {yours:.3f}, expected {right:.3f}.")
