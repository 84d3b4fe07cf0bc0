"""Check for notebook 13b's scheduler exercise: which waiting requests a step admits (step 2 of a step).

:func:`check_admission` takes the learner's ``fn(waiting, num_running, free_blocks, budget_left, block_size,
max_num_seqs)`` and prints a verdict through :func:`attn_core.exercises.feedback` (True/False; it never raises on
a wrong answer). The usual mistakes get their own diagnosis: skipping a request that does not fit to admit a later
one (no FCFS), reserving blocks for the whole prompt or for the answer too, ignoring prefix hits, counting the last
token as a hit, ignoring the seat limit or the token budget, and a first chunk bigger than the budget left.

The reference is written out here on purpose (a grader must not share a bug with the code it grades);
tests/test_exercises_serving_admission.py checks it against ``attn_core.serving.Scheduler`` on every case.
"""

from __future__ import annotations

from collections.abc import Callable

from attn_core.exercises import as_int, call_learner, feedback, never_raises
from attn_core.i18n import _

__all__ = ["check_admission", "admitted"]

Waiting = list[tuple[str, int, int, int]]  # (request_id, prompt_tokens, max_new_tokens, cached_blocks)


def admitted(
    waiting: Waiting,
    num_running: int,
    free_blocks: int,
    budget_left: int,
    block_size: int,
    max_num_seqs: int,
    *,
    mistake: str | None = None,
) -> list[tuple[str, int]]:
    """The ``(request_id, tokens of its first chunk)`` pairs admitted, in order: first come, first served, while
    a seat, budget and free blocks for the first chunk after prefix hits last. ``cached_blocks``: the request's
    leading full blocks found in the prefix cache (held by running requests, so a hit takes no free block).
    ``mistake`` (for the diagnoses) computes a usual wrong answer instead."""
    out: list[tuple[str, int]] = []
    for rid, prompt_tokens, max_new_tokens, cached_blocks in waiting:
        if num_running + len(out) >= max_num_seqs and mistake != "seats":
            break  # no seat
        if budget_left <= 0 and mistake != "budget":
            break  # the step's token budget is spent
        hit_blocks = min(cached_blocks, (prompt_tokens - 1) // block_size)  # never the last token
        hit_blocks = {"no hits": 0, "last token": cached_blocks}.get(mistake, hit_blocks)
        left = prompt_tokens - hit_blocks * block_size
        chunk = left if mistake == "chunk" else max(0, min(left, budget_left))  # chunked prefill
        reserved = {"prompt": left, "answer": left + max_new_tokens}.get(mistake, chunk)
        need = -(-reserved // block_size)  # blocks for the chunk (hits are whole blocks)
        if need > free_blocks:
            if mistake == "fcfs":
                continue  # the mistake: overtake the request that does not fit
            break  # head-of-line: the first that does not fit stops admission
        out.append((rid, chunk))
        budget_left, free_blocks = budget_left - chunk, free_blocks - need
    return out


# (waiting, num_running, free_blocks, budget_left, block_size, max_num_seqs)
_CASES = [
    ([("A", 10, 4, 0), ("B", 6, 4, 0)], 0, 8, 32, 4, 4),  # both fit
    ([("A", 30, 4, 0), ("B", 5, 2, 0)], 1, 6, 40, 4, 4),  # A needs 8 blocks: B waits behind it
    ([("A", 9, 2, 0), ("B", 9, 2, 0)], 0, 9, 8, 4, 4),  # the budget cuts A's prompt to 8 tokens
    ([("A", 10, 8, 0), ("B", 9, 2, 0)], 1, 3, 32, 4, 4),  # A's prompt fits in 3 blocks; B does not
    ([("A", 20, 8, 0), ("B", 4, 2, 0)], 0, 4, 16, 4, 4),  # A's first chunk is 16 tokens, 4 blocks
    ([("A", 14, 8, 3), ("B", 10, 3, 0)], 1, 3, 40, 4, 4),  # A: 12 tokens cached, computes 2
    ([("A", 12, 2, 3), ("B", 8, 2, 0)], 1, 2, 40, 4, 4),  # A's 3 blocks are cached, but its last token is not
    ([("A", 6, 2, 0), ("B", 6, 2, 0), ("C", 6, 2, 0)], 2, 9, 40, 4, 3),  # one seat left
    ([("A", 8, 2, 0), ("B", 5, 2, 0), ("C", 3, 2, 0)], 0, 9, 8, 4, 4),  # A spends the whole budget
]

_MISTAKES = [
    (
        "fcfs",
        _(
            "you skipped a request that does not fit and admitted a later one: admission is first come, first "
            "served and stops at the first request that does not fit (otherwise a long request starves behind "
            "a stream of short ones)."
        ),
    ),
    (
        "prompt",
        _(
            "you reserved blocks for the whole prompt: a request needs free blocks only for its first chunk, the "
            "tokens it computes in this step; later chunks take their blocks when they run."
        ),
    ),
    (
        "answer",
        _(
            "you reserved blocks for the answer too (max_new_tokens): nothing is reserved ahead; a decode takes a "
            "block when it needs one, and preemption handles running out."
        ),
    ),
    (
        "no hits",
        _(
            "you ignored the prefix-cache hits: cached leading blocks are shared, not computed again, so they need "
            "neither budget nor new blocks."
        ),
    ),
    (
        "last token",
        _(
            "you counted the prompt's last token as a hit: its logits are needed, so at most "
            "(prompt_tokens - 1) // block_size blocks are hits and the last token is computed."
        ),
    ),
    (
        "seats",
        _("you admitted more requests than there are seats: running plus admitted stays <= max_num_seqs."),
    ),
    (
        "budget",
        _(
            "you admitted a request with no budget left: stop when the step's token budget is spent (a first chunk "
            "has at least one token)."
        ),
    ),
    (
        "chunk",
        _(
            "a first chunk bigger than the budget left: chunk = min(tokens left to compute, budget left) (chunked "
            "prefill), and it needs blocks for that chunk only."
        ),
    ),
]


def _short(value) -> str:
    """``repr(value)`` on one line, at most 40 characters (a verdict is one line)."""
    return " ".join(repr(value).split())[:40]


def _as_pairs(answer) -> tuple[list[tuple[str, int]] | None, str | None]:
    """The learner's answer as ``(request_id, tokens)`` pairs (lists or tuples; numpy ints count), or what is
    wrong with it."""
    if not isinstance(answer, list | tuple):
        return None, _("return a list of (request_id, first-chunk tokens) pairs, got {type}.").format(
            type=type(answer).__name__
        )
    pairs = []
    for item in answer:
        if not isinstance(item, list | tuple) or len(item) != 2 or not isinstance(item[0], str):
            return None, (
                _(
                    "each item must be a (request_id, first-chunk tokens) pair, with the request_id from "
                    "waiting (a str), got {type} {item}."
                ).format(type=type(item).__name__, item=_short(item))
            )
        tokens = as_int(item[1])
        if tokens is None:
            return None, _("a first chunk is a whole number of tokens, got {value} for {rid}.").format(
                value=_short(item[1]), rid=f"{item[0]!r:.20}"
            )
        pairs.append((item[0], tokens))
    return pairs, None


@never_raises(_("admission"))
def check_admission(fn: Callable) -> bool:
    """``fn(waiting, num_running, free_blocks, budget_left, block_size, max_num_seqs)``: ``waiting`` lists
    ``(request_id, prompt_tokens, max_new_tokens, cached_blocks)`` in arrival order. Return the admitted
    requests as ``(request_id, tokens of its first chunk)`` pairs, in admission order."""
    name = _("admission")
    for case in _CASES:
        waiting, *sizes = case
        answer, problem = call_learner(fn, [tuple(r) for r in waiting], *sizes)
        if problem is not None:
            return feedback(name, problem)
        value, problem = _as_pairs(answer)
        if problem is not None:
            return feedback(name, problem)
        expected = admitted(*case)
        if value == expected:
            continue
        running, free, budget, bs, seats = sizes
        where = _(
            "for waiting={waiting}, num_running={running}, free_blocks={free}, budget_left={budget}, "
            "block_size={bs}, max_num_seqs={seats} you returned {value}"
        ).format(waiting=waiting, running=running, free=free, budget=budget, bs=bs, seats=seats, value=value)
        for mistake, diagnosis in _MISTAKES:
            if value == admitted(*case, mistake=mistake):
                return feedback(name, _("{where}: {problem}").format(where=where, problem=diagnosis))
        problem = _(
            "{where}, expected {expected}: first come, first served; each needs a seat, budget left and free "
            "blocks for its first chunk after prefix hits."
        )
        return feedback(name, problem.format(where=where, expected=expected))
    return feedback(name, None)
