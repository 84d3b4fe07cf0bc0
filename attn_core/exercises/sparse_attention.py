"""Checks for notebook 09b, sparse attention in DeepSeek-V3.2 and V4.

Each ``check_…`` takes the learner's function, prints a verdict through :func:`attn_core.exercises.feedback`
and returns True/False; it never raises on a wrong answer and names the usual mistakes:

1. ``check_index_scores``: the lightning indexer's scores. A softmax over the heads (on the head weights, or on
   the per-head scores; any answer whose head weights lose their signs is probed for), the ReLU forgotten or
   taken after the head sum, the ``1/sqrt(num_heads)`` or ``1/sqrt(head_dim)`` scale forgotten.
2. ``check_indexer_rope``: the indexer's RoPE. Interleaved pairs (MLA's layout, not the indexer's), the LAST
   features rotated instead of the first, every feature rotated.
3. ``check_top_k_picks``: causal top-k of a chunk of queries that starts at position ``start`` (a decode step or
   a chunk of prefill). Picks of future keys, a causal mask not offset by ``start`` (the index keys of the
   earlier tokens come from the cache), hidden keys picked instead of ``-1``, a query hiding its own key, and
   rows shorter than ``topk`` (the first decode steps): ``min(topk, Lk)`` columns, not ``topk`` padded with -1.
4. ``check_visible_entries``: which V4 compressed entries a query may read. An entry visible before its window
   has closed (``w · m <= t``), or one token late.

The references are written out here on purpose: a grader must not share a bug with the code it grades.

One piece: the checks of notebook 09b's exercises, each next to the reference it grades against and the mistakes it
names.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from attn_core.exercises import call_learner, feedback, never_raises
from attn_core.i18n import _

__all__ = [
    "check_index_scores",
    "check_indexer_rope",
    "check_top_k_picks",
    "check_visible_entries",
    "index_scores",
    "indexer_rope",
    "top_k_picks",
    "visible_entries",
]


def _tensor_problem(answer, expected: torch.Tensor, what: str) -> str | None:
    if not isinstance(answer, torch.Tensor):
        return _("return a torch.Tensor ({what}, shape {shape}), got {type}.").format(
            what=what, shape=tuple(expected.shape), type=type(answer).__name__
        )
    if tuple(answer.shape) != tuple(expected.shape):
        return _("{what} has shape {got}, expected {shape}.").format(
            what=what, got=tuple(answer.shape), shape=tuple(expected.shape)
        )
    if answer.dtype != expected.dtype:
        return _("{what} has dtype {got}, expected {dtype}.").format(what=what, got=answer.dtype, dtype=expected.dtype)
    return None


def _same(answer: torch.Tensor, expected: torch.Tensor) -> bool:
    # float64 sums of ≤ 64 products of O(1) numbers: exact to ~1e-13; -inf must sit where the reference's does
    if expected.dtype.is_floating_point:
        finite = torch.isfinite(expected)
        if not torch.equal(torch.isfinite(answer), finite) or not torch.equal(answer[~finite], expected[~finite]):
            return False
        return bool(((answer[finite] - expected[finite]).abs() <= 1e-10).all())
    return torch.equal(answer, expected)


def _first_match(answer: torch.Tensor, mistakes: list[tuple[torch.Tensor, str]]) -> str | None:
    for candidate, diagnosis in mistakes:
        if candidate.shape == answer.shape and _same(answer, candidate):
            return diagnosis
    return None


# ----------------------------------------------------------------------------------------------
# Exercise 1: the lightning indexer's scores
# ----------------------------------------------------------------------------------------------


def index_scores(q: torch.Tensor, k: torch.Tensor, head_weights: torch.Tensor) -> torch.Tensor:
    """``q (B, H, Lq, D)``, one shared ``k (B, Lk, D)``, ``head_weights (B, Lq, H)`` (``weights_proj(x)``) ->
    ``Σ_h head_weights/sqrt(H) · relu(q_h · k) / sqrt(D)``, ``(B, Lq, Lk)``."""
    per_head = torch.relu(q @ k.unsqueeze(1).mT)  # (B, H, Lq, Lk)
    w = head_weights / math.sqrt(q.shape[1])  # (B, Lq, H)
    return (w.transpose(1, 2).unsqueeze(-1) * per_head).sum(1) / math.sqrt(q.shape[-1])  # (B, Lq, Lk)


def _score_cases() -> list[tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(24)
    cases = []
    for batch, heads, q_len, k_len, dim in ((2, 4, 3, 5, 8), (1, 3, 4, 4, 6)):
        q = torch.randn(batch, heads, q_len, dim, dtype=torch.float64, generator=g)  # (B, H, Lq, D)
        k = torch.randn(batch, k_len, dim, dtype=torch.float64, generator=g)  # (B, Lk, D)
        w = torch.randn(batch, q_len, heads, dtype=torch.float64, generator=g)  # (B, Lq, H)
        cases.append((q, k, w))
    return cases


def _score_mistakes(q, k, w) -> list[tuple[torch.Tensor, str]]:
    heads, dim = q.shape[1], q.shape[-1]
    dots = q @ k.unsqueeze(1).mT  # (B, H, Lq, Lk)
    weighted = w.transpose(1, 2).unsqueeze(-1)  # (B, H, Lq, 1)
    softmaxed = torch.softmax(w, dim=-1).transpose(1, 2).unsqueeze(-1)  # (B, H, Lq, 1)
    return [
        (
            (softmaxed * torch.relu(dots)).sum(1) / math.sqrt(dim),
            _(
                "you took a softmax over the head weights: DeepSeek scales them by 1/sqrt(num_heads) and keeps their "
                "signs (no softmax); only the ranking matters, and a head may vote against a key."
            ),
        ),
        (
            index_scores(q, k, torch.softmax(w, dim=-1)),
            _(
                "you took a softmax over the head weights: DeepSeek scales them by 1/sqrt(num_heads) and keeps their "
                "signs (no softmax); only the ranking matters, and a head may vote against a key."
            ),
        ),
        (
            (weighted * dots).sum(1) / math.sqrt(heads * dim),
            _(
                "you forgot the ReLU on each head's q · k: a head that does not care about a key would then vote "
                "against it."
            ),
        ),
        (
            torch.relu((weighted * dots).sum(1)) / math.sqrt(heads * dim),
            _(
                "you applied the ReLU after summing the heads: it belongs on each head's q · k, before the "
                "weighted sum."
            ),
        ),
        (
            (weighted * torch.relu(dots)).sum(1) / math.sqrt(dim),
            _("you forgot to scale the head weights by 1/sqrt(num_heads)."),
        ),
        (
            (weighted * torch.relu(dots)).sum(1) / math.sqrt(heads),
            _("you forgot the 1/sqrt(head_dim) scale of q · k."),
        ),
        ((weighted * torch.relu(dots)).sum(1), _("you forgot both scales: 1/sqrt(num_heads) and 1/sqrt(head_dim).")),
        (
            (weighted * torch.relu(dots).softmax(dim=1)).sum(1) / math.sqrt(heads * dim),
            _HEAD_SOFTMAX_SCORES,
        ),
        (
            (weighted * torch.relu(dots / math.sqrt(dim)).softmax(dim=1)).sum(1) / math.sqrt(heads),
            _HEAD_SOFTMAX_SCORES,
        ),
    ]


_HEAD_SOFTMAX_SCORES = _(
    "you took a softmax over the heads of the per-head scores relu(q_h · k): the indexer weights each head by "
    "head_weights[h] / sqrt(num_heads) and sums, with no normalisation across the heads."
)
_LOST_SIGNS = _(
    "your head weights lost their signs: with every head weight negative, every score must be <= 0 (each head "
    "votes against the key), and yours are >= 0. A softmax over the heads (or exp, sigmoid) makes the weights "
    "positive; DeepSeek only scales them by 1/sqrt(num_heads) (no softmax)."
)


def _sign_probe(fn: Callable, q: torch.Tensor, k: torch.Tensor, w: torch.Tensor) -> str | None:
    """A softmax over the heads in any form makes every head weight positive: with all-negative weights the
    right scores are all <= 0 (and some < 0); an answer that is >= 0 everywhere lost the signs."""
    negative = -(w.abs() + 0.5)  # (B, Lq, H): every head votes against every key it fires on
    answer, problem = call_learner(fn, q.clone(), k.clone(), negative)
    expected = index_scores(q, k, negative)
    if problem is not None or _tensor_problem(answer, expected, "the scores") is not None:
        return None
    finite = answer[torch.isfinite(answer)]
    if finite.numel() and bool((finite >= 0).all()) and bool((finite > 0).any()) and bool((expected < 0).any()):
        return _LOST_SIGNS
    return None


@never_raises(_("the indexer's scores"))
def check_index_scores(fn: Callable) -> bool:
    """``fn(q, k, head_weights)``: ``q (B, H, Lq, D)`` the indexer's rotated queries, ``k (B, Lk, D)`` the one
    shared rotated key per token, ``head_weights (B, Lq, H)`` = ``weights_proj(x)``. Return ``(B, Lq, Lk)``."""
    name = _("the indexer's scores")
    for q, k, w in _score_cases():
        answer, problem = call_learner(fn, q.clone(), k.clone(), w.clone())
        if problem is not None:
            return feedback(name, problem)
        expected = index_scores(q, k, w)
        problem = _tensor_problem(answer, expected, _("the scores"))
        if problem is not None:
            return feedback(name, problem)
        if _same(answer, expected):
            continue
        diagnosis = _first_match(answer, _score_mistakes(q, k, w)) or _sign_probe(fn, q, k, w)
        return feedback(
            name,
            diagnosis
            or _("the scores differ from Σ_h head_weights[h] / sqrt(num_heads) · relu(q_h · k) / sqrt(head_dim)."),
        )
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 2: the indexer's RoPE
# ----------------------------------------------------------------------------------------------


def _rotate(t: torch.Tensor, positions: torch.Tensor, base: float, pairs: str) -> torch.Tensor:
    """Rotate all of ``t (..., L, r)`` at ``positions (L,)``: ``pairs`` "half" (i, i + r/2) or "interleaved"."""
    r = t.shape[-1]
    inv_freq = base ** (-torch.arange(0, r, 2, dtype=torch.float64) / r)  # (r/2,)
    angle = positions.to(torch.float64)[:, None] * inv_freq  # (L, r/2)
    cos, sin = angle.cos().to(t.dtype), angle.sin().to(t.dtype)  # (L, r/2)
    if pairs == "half":
        a, b = t[..., : r // 2], t[..., r // 2 :]  # (..., L, r/2)
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)  # (..., L, r)
    a, b = t[..., 0::2], t[..., 1::2]  # (..., L, r/2)
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)  # (..., L, r)


def indexer_rope(t: torch.Tensor, positions: torch.Tensor, rope_dim: int, base: float) -> torch.Tensor:
    """The indexer's RoPE: the FIRST ``rope_dim`` features of ``t (..., L, D)``, rotate-half pairs."""
    return torch.cat([_rotate(t[..., :rope_dim], positions, base, "half"), t[..., rope_dim:]], dim=-1)


def _rope_mistakes(t, positions, rope_dim, base) -> list[tuple[torch.Tensor, str]]:
    first, rest = t[..., :rope_dim], t[..., rope_dim:]
    head, last = t[..., :-rope_dim], t[..., -rope_dim:]
    return [
        (
            torch.cat([_rotate(first, positions, base, "interleaved"), rest], dim=-1),
            _(
                "you rotated interleaved pairs (2i, 2i + 1), MLA's layout: the indexer rotates rotate-half pairs "
                "(i, i + rope_dim/2)."
            ),
        ),
        (
            torch.cat([head, _rotate(last, positions, base, "half")], dim=-1),
            _(
                "you rotated the LAST rope_dim features (where MLA and V4 put their rotary part): the V3.2 indexer "
                "rotates the FIRST rope_dim features."
            ),
        ),
        (
            torch.cat([head, _rotate(last, positions, base, "interleaved")], dim=-1),
            _(
                "you rotated the last rope_dim features in interleaved pairs, as MLA does: the indexer rotates the "
                "FIRST rope_dim features in rotate-half pairs (i, i + rope_dim/2)."
            ),
        ),
        (
            _rotate(t, positions, base, "half"),
            _("you rotated every feature: only the first rope_dim are rotated, the rest pass through."),
        ),
        (t.clone(), _("nothing was rotated: rotate the first rope_dim features at the given positions.")),
        (
            torch.cat([_rotate(first, torch.arange(t.shape[-2]), base, "half"), rest], dim=-1),
            _("you rotated at positions 0, 1, 2, …: use the given positions (a decode step starts after the cache)."),
        ),
        (
            torch.cat([_rotate(first, positions, 10000.0, "half"), rest], dim=-1),
            _("you ignored base: the frequencies are base^(-2i/rope_dim)."),
        ),
    ]


@never_raises(_("the indexer's RoPE"))
def check_indexer_rope(fn: Callable) -> bool:
    """``fn(t, positions, rope_dim, base)``: ``t (B, H, L, D)``, ``positions (L,)``. Return ``t`` with its first
    ``rope_dim`` features rotated as DeepSeek-V3.2's indexer does (rotate-half pairs), the rest unchanged."""
    name = _("the indexer's RoPE")
    g = torch.Generator().manual_seed(7)
    for shape, rope_dim, start, base in (((2, 3, 4, 10), 6, 5, 10000.0), ((1, 2, 3, 8), 4, 2, 500.0)):
        t = torch.randn(*shape, dtype=torch.float64, generator=g)  # (B, H, L, D)
        positions = torch.arange(start, start + shape[-2])  # (L,): not from 0
        answer, problem = call_learner(fn, t.clone(), positions.clone(), rope_dim, base)
        if problem is not None:
            return feedback(name, problem)
        expected = indexer_rope(t, positions, rope_dim, base)
        problem = _tensor_problem(answer, expected, _("the rotated tensor"))
        if problem is not None:
            return feedback(name, problem)
        if not _same(answer, expected):
            diagnosis = _first_match(answer, _rope_mistakes(t, positions, rope_dim, base))
            return feedback(name, diagnosis or _("the rotation differs from rotate-half RoPE on the first features."))
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 3: causal top-k of a chunk of queries that starts at position `start`
# ----------------------------------------------------------------------------------------------


def top_k_picks(scores: torch.Tensor, topk: int, start: int) -> torch.Tensor:
    """``scores (B, Lq, Lk)`` of queries at positions ``start .. start + Lq - 1`` against keys ``0 .. Lk - 1`` ->
    ``(B, Lq, min(topk, Lk))`` int64, best first, ``-1`` where a query sees fewer than topk keys."""
    q_len, k_len = scores.shape[-2:]
    future = torch.arange(k_len)[None, :] > torch.arange(start, start + q_len)[:, None]  # (Lq, Lk)
    best, indices = scores.masked_fill(future, -math.inf).topk(min(topk, k_len), dim=-1)  # (B, Lq, k)
    return indices.masked_fill(best == -math.inf, -1)  # (B, Lq, k)


def _picks_mistakes(scores, topk, start) -> list[tuple[torch.Tensor, str]]:
    q_len, k_len = scores.shape[-2:]
    k = min(topk, k_len)
    future_top_left = torch.arange(k_len)[None, :] > torch.arange(q_len)[:, None]  # (Lq, Lk): query i at i
    best, top_left = scores.masked_fill(future_top_left, -math.inf).topk(k, dim=-1)
    future = torch.arange(k_len)[None, :] > torch.arange(start, start + q_len)[:, None]  # (Lq, Lk)
    masked_best, masked = scores.masked_fill(future, -math.inf).topk(k, dim=-1)
    return [
        (
            masked,
            _("a query that sees fewer than topk keys got hidden (-inf) keys among its picks: mark those picks -1."),
        ),
        (
            scores.topk(k, dim=-1).indices,
            _("your picks include future keys: mask the keys after each query's position (-inf) before the top-k."),
        ),
        (
            top_left.masked_fill(best == -math.inf, -1),
            _(
                "your causal mask is not offset: query i of this chunk sits at position start + i, and the keys "
                "0 .. start - 1 (the index keys of earlier tokens, from the cache) are all in its past."
            ),
        ),
        (
            top_left,
            _(
                "your causal mask is not offset: query i of this chunk sits at position start + i, and the keys "
                "0 .. start - 1 (the index keys of earlier tokens, from the cache) are all in its past."
            ),
        ),
        (
            masked.masked_fill(masked_best == -math.inf, -1).flip(-1),
            _("your picks are in the wrong order: best (highest score) first."),
        ),
        (
            _own_key_hidden(scores, k, start),
            _(
                "a query hid its own key: the query at position start + i may read keys 0 .. start + i (itself "
                "included); mask only the keys after it (key > position), not key >= position."
            ),
        ),
    ]


def _own_key_hidden(scores: torch.Tensor, k: int, start: int) -> torch.Tensor:
    """The top-k with a ``>=`` causal mask: each query blind to its own key."""
    q_len, k_len = scores.shape[-2:]
    not_before = torch.arange(k_len)[None, :] >= torch.arange(start, start + q_len)[:, None]  # (Lq, Lk)
    best, picks = scores.masked_fill(not_before, -math.inf).topk(k, dim=-1)  # (B, Lq, k)
    return picks.masked_fill(best == -math.inf, -1)  # (B, Lq, k)


def _short_row_problem(answer, scores: torch.Tensor, topk: int) -> str | None:
    """Name the two ways to get a row shorter than topk wrong (the first steps of decoding: Lk < topk)."""
    k_len = scores.shape[-1]
    if topk <= k_len:
        return None
    if isinstance(answer, torch.Tensor) and answer.ndim == 3 and answer.shape[-1] == topk:
        return _(
            "with {keys} keys and topk={topk} you returned {got} picks per query: a row has only {keys2} keys, "
            "so return min(topk, Lk) = {k} columns; -1 marks a hidden key, not a missing one."
        ).format(keys=k_len, topk=topk, got=topk, keys2=k_len, k=k_len)
    return None


@never_raises(_("causal top-k picks"))
def check_top_k_picks(fn: Callable) -> bool:
    """``fn(scores, topk, start)``: ``scores (B, Lq, Lk)`` of queries at positions ``start .. start + Lq - 1``
    against keys at ``0 .. Lk - 1``. Return ``(B, Lq, min(topk, Lk))`` int64 key indices, best first, ``-1``
    for picks of hidden (future) keys."""
    name = _("causal top-k picks")
    g = torch.Generator().manual_seed(3)
    # the last two: fewer keys than topk (the first decode steps), where topk(topk) fails or pads
    for batch, q_len, start, topk in ((2, 5, 0, 3), (1, 3, 6, 4), (2, 1, 7, 5), (2, 2, 0, 6), (1, 1, 1, 6)):
        scores = torch.randn(batch, q_len, start + q_len, dtype=torch.float64, generator=g)  # (B, Lq, Lk)
        answer, problem = call_learner(fn, scores.clone(), topk, start)
        if problem is not None and topk > start + q_len and problem.startswith("your function raised"):
            hint = (
                _(
                    "{problem} With {keys} keys and topk={topk} (a row at the start of decoding), take "
                    "min(topk, Lk) picks."
                )
                if problem.endswith(".")
                else _(
                    "{problem}. With {keys} keys and topk={topk} (a row at the start of decoding), take "
                    "min(topk, Lk) picks."
                )
            )
            problem = hint.format(problem=problem, keys=start + q_len, topk=topk)
        if problem is not None:
            return feedback(name, problem)
        expected = top_k_picks(scores, topk, start)
        integer = isinstance(answer, torch.Tensor) and not (answer.is_floating_point() or answer.is_complex())
        if integer and answer.dtype != torch.bool:
            answer = answer.long()  # int32 (Hugging Face's) is as right as int64
        problem = _short_row_problem(answer, scores, topk) or _tensor_problem(answer, expected, _("the picks"))
        if problem is not None:
            return feedback(name, problem)
        if not torch.equal(answer, expected):
            diagnosis = _first_match(answer, _picks_mistakes(scores, topk, start))
            return feedback(
                name,
                diagnosis
                or _("for start={start}, topk={topk} your picks differ from the top-k.").format(start=start, topk=topk),
            )
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 4: when a compressed entry becomes visible
# ----------------------------------------------------------------------------------------------


def visible_entries(positions: torch.Tensor, num_entries: int, compress_rate: int) -> torch.Tensor:
    """``(Lq, T)`` bool: entry ``w`` pools tokens ``w·m .. (w+1)·m - 1``, so a query at ``t`` reads it once
    ``(w + 1) · m <= t + 1``."""
    entry = torch.arange(num_entries)[None, :]  # (1, T)
    return (entry + 1) * compress_rate <= positions[:, None] + 1  # (Lq, T)


@never_raises(_("visible compressed entries"))
def check_visible_entries(fn: Callable) -> bool:
    """``fn(positions, num_entries, compress_rate)``: ``positions (Lq,)`` of the queries. Return a boolean
    ``(Lq, num_entries)``: True where the query may read that compressed entry."""
    name = _("visible compressed entries")
    for positions, num_entries, rate in ((torch.arange(12), 3, 4), (torch.tensor([5, 6, 7, 8, 9]), 4, 2)):
        answer, problem = call_learner(fn, positions.clone(), num_entries, rate)
        if problem is not None:
            return feedback(name, problem)
        expected = visible_entries(positions, num_entries, rate)
        problem = _tensor_problem(answer, expected, _("the visibility mask"))
        if problem is not None:
            return feedback(name, problem)
        if torch.equal(answer, expected):
            continue
        entry, t = torch.arange(num_entries)[None, :], positions[:, None]
        mistakes = [
            (
                entry * rate <= t,
                _(
                    "an entry is visible too early: entry w pools tokens w·m .. (w+1)·m - 1, so a query at position t "
                    "may read it only once its window has closed, (w + 1)·m <= t + 1; before that it would see the "
                    "future."
                ),
            ),
            (entry * rate < t, _("an entry is visible too early: it needs its whole window, (w + 1)·m <= t + 1.")),
            (
                (entry + 1) * rate <= t,
                _(
                    "one token late: the query at t = (w + 1)·m - 1 is the window's last token, and may "
                    "already read it."
                ),
            ),
            (
                (entry + 1) * rate < t,
                _("too late: an entry is visible as soon as its window has closed, (w + 1)·m <= t + 1."),
            ),
        ]
        diagnosis = _first_match(answer, mistakes)
        return feedback(name, diagnosis or _("True where (w + 1) · compress_rate <= t + 1."))
    return feedback(name, None)
