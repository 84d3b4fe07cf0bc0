"""More checks for the real-decoder notebooks: 11 (top-p, repetition penalty) and 11b (the first token's share).

Each ``check_…`` takes the learner's function, prints a verdict through :func:`attn_core.exercises.feedback` and
returns True/False; it never raises on a wrong answer. The usual mistakes get their own diagnosis: top-p that drops
the token crossing p (an empty nucleus when the top token alone is above p), that keeps the sorted order, or that is
not renormalised; a repetition penalty that divides negative logits (making a repeated token *more* likely), that
counts a token once per occurrence, that penalises every row with every row's tokens, or that penalises every token;
a first-token share that averages over query 0 as well, sums instead of averaging, reads the first *query*'s row, or
divides by the wrong count.

The references are written out here on purpose: a grader must not share a bug with the code it grades.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attn_core.exercises import call_learner, feedback, never_raises

__all__ = [
    "check_top_p",
    "check_repetition_penalty",
    "check_first_token_share",
    "top_p_filter",
    "repetition_penalty",
    "first_token_share",
]


def _answer_problem(answer: object, expected: torch.Tensor, where: str, what: str) -> str | None:
    """The type, shape, dtype and finiteness checks every checker here starts with."""
    if not isinstance(answer, torch.Tensor):
        return f"{where}: return a torch.Tensor of {what}, got {type(answer).__name__}."
    if answer.dtype == torch.bool:
        return f"{where}: you returned a mask; return the {what}."
    if tuple(answer.shape) != tuple(expected.shape):
        return f"{where}: wrong shape {tuple(answer.shape)}, expected {tuple(expected.shape)}."
    if answer.is_complex() or answer.dtype != expected.dtype:
        return f"{where}: dtype {answer.dtype}, expected {expected.dtype} (keep the input's dtype)."
    if torch.isnan(answer).any() or (torch.isinf(answer) & ~torch.isinf(expected)).any():
        return f"{where}: your result contains NaN or inf where the expected one is finite."
    return None


def _tolerance(dtype: torch.dtype) -> float:
    # a handful of roundings of numbers of order 1-10: float64 ~1e-15 each, float32 ~1e-6 each
    return 1e-12 if dtype == torch.float64 else 20 * torch.finfo(torch.float32).eps


def _close(answer: torch.Tensor, candidate: torch.Tensor, atol: float) -> bool:
    same_inf = torch.equal(torch.isinf(answer), torch.isinf(candidate))
    finite = ~torch.isinf(candidate)
    return (
        same_inf
        and tuple(answer.shape) == tuple(candidate.shape)
        and torch.allclose(answer[finite], candidate[finite].to(answer.dtype), rtol=0, atol=atol)
    )


def _diagnose(name: str, where: str, answer: torch.Tensor, candidates: list, atol: float, fallback: str) -> bool:
    for candidate, diagnosis in candidates:
        if _close(answer, candidate, atol):
            return feedback(name, f"{where}: {diagnosis}")
    return feedback(name, f"{where}: {fallback}")


# ----------------------------------------------------------------------------------------------
# Notebook 11: top-p (nucleus) filtering
# ----------------------------------------------------------------------------------------------


def _nucleus(probs: torch.Tensor, p: float, *, inclusive: bool) -> torch.Tensor:
    """The kept tokens, in vocabulary order: the most likely ones until their mass reaches p (the token that
    crosses p included when ``inclusive``)."""
    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, vocab)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (B, vocab): mass of the more likely tokens
    keep_sorted = mass_before < p if inclusive else sorted_probs.cumsum(dim=-1) < p  # (B, vocab)
    return torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)  # (B, vocab), vocabulary order


def top_p_filter(probs: torch.Tensor, p: float) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose probability reaches ``p``; renormalise.
    ``probs (B, vocab)`` -> ``(B, vocab)`` (Holtzman et al. 2019; the most likely token is always kept)."""
    kept = probs * _nucleus(probs, p, inclusive=True)  # (B, vocab)
    return kept / kept.sum(dim=-1, keepdim=True)  # (B, vocab), rows sum to 1


def _top_p_cases() -> list[tuple[torch.Tensor, float]]:
    g = torch.Generator().manual_seed(11)
    peaked = (torch.randn(2, 12, dtype=torch.float64, generator=g) * torch.tensor([[4.0], [1.0]])).softmax(-1)
    peaked[0] = torch.tensor([0.9] + [0.1 / 11] * 11, dtype=torch.float64)  # the top token alone is above p
    return [
        (peaked, 0.75),  # rows of different confidence: one keeps a single token, the other many
        (torch.randn(3, 20, dtype=torch.float64, generator=g).softmax(-1), 0.5),
        (torch.randn(2, 16, generator=g).softmax(-1), 0.9),  # float32
    ]


@never_raises("top-p filtering")
def check_top_p(fn: Callable) -> bool:
    """``fn(probs, p)``: ``probs (B, vocab)`` next-token probabilities (rows sum to 1), ``p`` in (0, 1]. Return the
    distribution top-p sampling draws from ``(B, vocab)``, in vocabulary order: the smallest set of most likely
    tokens whose probabilities add up to at least ``p`` (so the token that crosses p is kept), the rest set to 0,
    renormalised."""
    name = "top-p filtering"
    for probs, p in _top_p_cases():
        answer, problem = call_learner(fn, probs.clone(), p)
        if problem is not None:
            return feedback(name, problem)
        expected = top_p_filter(probs, p)  # (B, vocab)
        where = f"probs {tuple(probs.shape)} {probs.dtype}, p {p}"
        exclusive = _nucleus(probs, p, inclusive=False)  # (B, vocab): the crossing token dropped
        crossing = (
            "you dropped the token that crosses p (cumsum < p): keep a token when the mass of the tokens "
            "*before* it is below p, so the nucleus reaches p and is never empty."
        )
        empty_rows = exclusive.sum(-1) == 0  # (B,): rows whose top token alone is above p
        if isinstance(answer, torch.Tensor) and answer.shape == probs.shape and empty_rows.any():
            if answer.is_floating_point() and torch.equal(torch.isnan(answer).any(-1), empty_rows):
                return feedback(name, f"{where}: {crossing}")
        problem = _answer_problem(answer, expected, where, "filtered probabilities, renormalised to sum to 1")
        if problem is not None:
            return feedback(name, problem)
        atol = _tolerance(probs.dtype)
        if torch.allclose(answer, expected, rtol=0, atol=atol):
            continue
        tail = ~_nucleus(probs, p, inclusive=True)  # (B, vocab): everything but the nucleus
        candidates = [
            (
                probs * _nucleus(probs, p, inclusive=True),
                "you did not renormalise: divide the kept probabilities by their sum so each row sums to 1.",
            ),
            ((probs * exclusive) / (probs * exclusive).sum(-1, keepdim=True), crossing),
            (
                expected.sort(dim=-1, descending=True).values,
                "your result is in sorted order: scatter the kept probabilities back to their vocabulary positions.",
            ),
            (
                (probs * tail) / (probs * tail).sum(-1, keepdim=True),
                "you kept the tail and dropped the nucleus: sort in descending order (most likely first).",
            ),
        ]
        return _diagnose(
            name, where, answer, candidates, atol, "wrong numbers; keep the most likely tokens until their mass "
            "reaches p (the crossing token included), zero the rest, then renormalise."
        )  # fmt: skip
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Notebook 11: repetition penalty
# ----------------------------------------------------------------------------------------------


def repetition_penalty(logits: torch.Tensor, generated: torch.Tensor, penalty: float) -> torch.Tensor:
    """Make every token already in a row's ``generated (B, T)`` less likely, once whatever its count: a positive
    logit divided by ``penalty``, a negative one multiplied by it (CTRL, Keskar et al. 2019; Hugging Face's
    ``RepetitionPenaltyLogitsProcessor``). ``logits (B, vocab)`` -> ``(B, vocab)``."""
    seen = logits.gather(-1, generated)  # (B, T): each generated token's logit (a repeat is read twice, same value)
    penalised = torch.where(seen < 0, seen * penalty, seen / penalty)  # (B, T): always towards less likely
    return logits.scatter(-1, generated, penalised)  # (B, vocab)


def _repetition_cases() -> list[tuple[torch.Tensor, torch.Tensor, float]]:
    g = torch.Generator().manual_seed(11)
    logits = torch.randn(2, 10, dtype=torch.float64, generator=g) * 3  # (2, 10): positive and negative logits
    generated = torch.tensor([[1, 4, 4, 7, 1], [0, 2, 2, 2, 9]])  # (2, 5): repeats, and rows that differ
    positive_seen = logits.gather(-1, generated).abs()  # (2, 5): make sure the seen tokens have both signs
    logits.scatter_(-1, generated, positive_seen * torch.tensor([[1, -1, -1, 1, 1], [-1, 1, 1, 1, -1]]))
    return [
        (logits, generated, 1.3),
        (torch.randn(3, 16, generator=g) * 2, torch.randint(0, 16, (3, 6), generator=g), 2.0),  # float32
    ]


@never_raises("repetition penalty")
def check_repetition_penalty(fn: Callable) -> bool:
    """``fn(logits, generated, penalty)``: ``logits (B, vocab)`` next-token logits, ``generated (B, T)`` the token
    ids each row has so far (int64, repeats possible), ``penalty > 1``. Return the penalised logits ``(B, vocab)``:
    every token in a row's ``generated``, whatever its count, has its logit divided by ``penalty`` if positive and
    multiplied by ``penalty`` if negative; other tokens and other rows unchanged."""
    name = "repetition penalty"
    for logits, generated, penalty in _repetition_cases():
        answer, problem = call_learner(fn, logits.clone(), generated.clone(), penalty)
        if problem is not None:
            return feedback(name, problem)
        expected = repetition_penalty(logits, generated, penalty)  # (B, vocab)
        where = f"logits {tuple(logits.shape)} {logits.dtype}, generated {generated.tolist()}, penalty {penalty}"
        problem = _answer_problem(answer, expected, where, "penalised logits")
        if problem is not None:
            return feedback(name, problem)
        atol = _tolerance(logits.dtype) * 10
        if torch.allclose(answer, expected, rtol=0, atol=atol):
            continue
        seen = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, generated, True)  # (B, vocab)
        counts = torch.zeros_like(logits).scatter_add(-1, generated, torch.ones_like(generated, dtype=logits.dtype))
        anywhere = seen.any(dim=0, keepdim=True).expand_as(seen)  # (B, vocab): a token seen in any row
        signed = torch.where(logits < 0, logits * penalty, logits / penalty)  # (B, vocab): every token penalised
        per_count = torch.where(logits < 0, logits * penalty**counts, logits / penalty**counts)  # (B, vocab)
        candidates = [
            (
                torch.where(seen, logits / penalty, logits),
                "you divided every repeated logit by the penalty: a negative logit divided by penalty > 1 moves "
                "*up*, making the repeated token more likely; multiply negative logits by the penalty instead.",
            ),
            (
                per_count,
                "you penalised a token once per occurrence: the penalty applies once per token already generated, "
                "whatever its count (a scatter, not a scatter_add).",
            ),
            (
                torch.where(anywhere, signed, logits),
                "you penalised a row with the tokens of every row: each row has its own history (generated[b]).",
            ),
            (signed, "you penalised every token: only the tokens already generated in that row are changed."),
            (
                torch.where(seen, torch.where(logits < 0, logits / penalty, logits * penalty), logits),
                "you made repeated tokens more likely: divide positive logits by the penalty, multiply negative ones.",
            ),
        ]
        return _diagnose(
            name, where, answer, candidates, atol, "wrong numbers; for each token in the row's generated ids, once: "
            "logit / penalty if positive, logit × penalty if negative; leave the rest unchanged."
        )  # fmt: skip
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Notebook 11b: the first token's share per head
# ----------------------------------------------------------------------------------------------


def first_token_share(weights: torch.Tensor) -> torch.Tensor:
    """The mean weight each head gives key 0 (``<bos>``) over queries ``1 … L-1`` (query 0 has no other choice).
    ``weights (layers, H, L, L)`` causal attention weights -> ``(layers, H)``."""
    return weights[..., 1:, 0].mean(dim=-1)  # (layers, H)


def _share_cases() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    cases = []
    for layers, heads, length, dtype in ((2, 3, 6, torch.float64), (3, 2, 9, torch.float32)):
        scores = torch.randn(layers, heads, length, length, dtype=dtype, generator=g) * 2  # (layers, H, L, L)
        scores[..., 0] += torch.linspace(0, 3, heads, dtype=dtype)[:, None]  # some heads lean on the first key
        future = torch.ones(length, length, dtype=torch.bool).triu(1)  # (L, L)
        cases.append(scores.masked_fill(future, float("-inf")).softmax(dim=-1))  # (layers, H, L, L)
    return cases


@never_raises("first-token share")
def check_first_token_share(fn: Callable) -> bool:
    """``fn(weights)``: ``weights (layers, H, L, L)`` causal attention weights (rows are queries, columns keys).
    Return ``(layers, H)``: the mean weight on key 0 over queries ``1 … L-1`` (query 0 is left out: it can only
    attend to itself)."""
    name = "first-token share"
    for weights in _share_cases():
        answer, problem = call_learner(fn, weights.clone())
        if problem is not None:
            return feedback(name, problem)
        expected = first_token_share(weights)  # (layers, H)
        where = f"weights {tuple(weights.shape)} {weights.dtype}"
        problem = _answer_problem(answer, expected, where, "shares, one per layer and head")
        if problem is not None:
            return feedback(name, problem)
        atol = _tolerance(weights.dtype)
        if torch.allclose(answer, expected, rtol=0, atol=atol):
            continue
        length = weights.shape[-1]
        candidates = [
            (
                weights[..., 0].mean(-1),
                "you averaged over every query, query 0 included: it can only attend to itself (weight 1), so "
                "leave it out (weights[..., 1:, 0]).",
            ),
            (weights[..., 1:, 0].sum(-1), "you summed the weights on key 0: divide by the L - 1 queries (a mean)."),
            (
                weights[..., 0, 1:].mean(-1),
                "you read a row, not the column: key 0 is column 0 (weights[..., 1:, 0]); row 0 is the first query.",
            ),
            (
                weights[..., 1:, 0].sum(-1) / length,
                "you divided by L: the mean is over the L - 1 queries 1 … L-1.",
            ),
            (weights[..., :, -1].mean(-1), "you took the last key: the first token is key 0."),
        ]
        return _diagnose(
            name, where, answer, candidates, atol, "wrong numbers; the mean of weights[..., i, 0] over queries "
            "i = 1 … L-1, one number per layer and head."
        )  # fmt: skip
    return feedback(name, None)
