"""Checks for notebook 13, caches for serving (paged KV blocks, attention sinks).

Each ``check_…`` takes the learner's function, prints a verdict through :func:`attn_core.exercises.feedback`
and returns True/False; it never raises on a wrong answer. The usual mistakes get their own diagnosis:
blocks counted with floor division, pooled across sequences, one too many, or as the contiguous reservation;
the logical block returned instead of the table's physical block, the pair swapped, a flat pool index; the
sinks left out, a window one key too wide, the sinks counted inside the window, positions re-indexed within
the cache, a key listed twice, a sink in the query's future.

The references are written out here on purpose: a grader must not share a bug with the code it grades.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attn_core.exercises import as_int, as_int_list, call_learner, feedback, never_raises

__all__ = [
    "check_blocks_needed",
    "check_block_lookup",
    "check_streaming_keys",
    "blocks_needed",
    "block_lookup",
    "streaming_keys",
]


# ----------------------------------------------------------------------------------------------
# Exercise 1: blocks a batch needs
# ----------------------------------------------------------------------------------------------


def blocks_needed(seq_lens: list[int], block_size: int) -> int:
    """Blocks of ``block_size`` tokens that sequences of these lengths occupy: each rounds up on its own."""
    return sum(-(-length // block_size) for length in seq_lens)  # ceil per sequence


_BLOCK_CASES = [([5, 16, 17, 0, 33], 16), ([1, 2, 3], 4), ([100, 7, 64], 32), ([8, 24, 40], 8), ([12, 3], 1)]


def _block_mistakes(lens: list[int], bs: int) -> list[tuple[int, str]]:
    ceil = -(-max(lens) // bs)
    return [
        (
            sum(length // bs for length in lens),
            "floor division drops each sequence's partly filled last block: round up, -(-length // block_size).",
        ),
        (
            -(-sum(lens) // bs),
            "you pooled the tokens of all sequences before rounding up: a block holds ONE sequence's tokens, so "
            "round up per sequence.",
        ),
        (
            sum(length // bs + 1 for length in lens),
            "length // block_size + 1 is one block too many when a length is a multiple of block_size (or 0): "
            "round up instead, -(-length // block_size).",
        ),
        (sum(lens), "that is tokens, not blocks: divide each length by block_size, rounding up."),
        (
            len(lens) * ceil,
            "you reserved the longest sequence's blocks for every sequence: that is the contiguous layout's "
            "waste; paged blocks follow each sequence's own length.",
        ),
    ]


@never_raises("blocks needed")
def check_blocks_needed(fn: Callable) -> bool:
    """``fn(seq_lens, block_size)``: ``seq_lens`` a list of token counts, one per sequence. Return the number
    of blocks the sequences occupy in a paged KV cache (an int)."""
    name = "blocks needed"
    for lens, bs in _BLOCK_CASES:
        answer, problem = call_learner(fn, list(lens), bs)
        if problem is not None:
            return feedback(name, problem)
        value = as_int(answer)
        if value is None:
            return feedback(name, f"return a number of blocks (an int), got {type(answer).__name__}.")
        expected = blocks_needed(lens, bs)
        if value == expected:
            continue
        where = f"for seq_lens={lens}, block_size={bs} you returned {value}"
        for candidate, diagnosis in _block_mistakes(lens, bs):
            if value == candidate:
                return feedback(name, f"{where}: {diagnosis}")
        return feedback(name, f"{where}, expected {expected}: the sum over sequences of ceil(length / block_size).")
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 2: the block-table lookup
# ----------------------------------------------------------------------------------------------


def block_lookup(block_table: list[int], position: int, block_size: int) -> tuple[int, int]:
    """Where token ``position`` of a sequence lives: ``(physical block, slot in it)``."""
    return block_table[position // block_size], position % block_size


_LOOKUP_CASES = [([7, 2, 9, 4], 4, range(16)), ([3, 0], 16, [0, 15, 16, 31]), ([5, 1, 8], 1, range(3))]


@never_raises("block-table lookup")
def check_block_lookup(fn: Callable) -> bool:
    """``fn(block_table, position, block_size)``: ``block_table`` the list of physical blocks of one sequence,
    in position order. Return ``(block, slot)``: the physical block holding token ``position``, and its slot."""
    name = "block-table lookup"
    for table, bs, positions in _LOOKUP_CASES:
        for position in positions:
            answer, problem = call_learner(fn, list(table), position, bs)
            if problem is not None:
                return feedback(name, problem)
            expected = block_lookup(table, position, bs)
            where = f"for block_table={table}, block_size={bs}, position={position} you returned"
            flat = expected[0] * bs + expected[1]
            pair = as_int_list(answer)
            if pair is None or len(pair) != 2:
                if as_int(answer) == flat and not isinstance(answer, list | tuple):
                    return feedback(
                        name,
                        f"{where} {flat}: the flat index block * block_size + slot into the pool. Return the pair "
                        f"(block, slot) = {expected}.",
                    )
                if isinstance(answer, torch.Tensor | np.ndarray):
                    kind = "a tensor" if isinstance(answer, torch.Tensor) else "an array"
                    got = f"{kind} of shape {tuple(answer.shape)}"
                elif pair is not None:  # whole numbers, but not two of them
                    got = f"a {type(answer).__name__} of {len(pair)} numbers"
                else:
                    got = type(answer).__name__
                return feedback(name, f"{where} {got}: return a pair of ints (block, slot).")
            if tuple(pair) == expected:
                continue
            logical = (position // bs, position % bs)
            if tuple(pair) == logical:
                return feedback(
                    name,
                    f"{where} {tuple(pair)}: {logical[0]} is the logical block (position // block_size), the "
                    f"sequence's {logical[0]}-th block. Its keys live in physical block "
                    f"block_table[{logical[0]}] = {expected[0]}.",
                )
            if position < len(table) and pair[0] == table[position] != expected[0]:
                return feedback(
                    name,
                    f"{where} {tuple(pair)}: you indexed the table by the token position; each entry covers "
                    f"block_size = {bs} tokens, so the entry is block_table[position // block_size].",
                )
            if tuple(pair) == expected[::-1]:
                return feedback(
                    name, f"{where} {tuple(pair)}: block and slot swapped; expected (block, slot) = {expected}."
                )
            return feedback(
                name,
                f"{where} {tuple(pair)}, expected {expected}: block_table[position // block_size], "
                "position % block_size.",
            )
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 3: the keys a query sees with a window and sinks
# ----------------------------------------------------------------------------------------------


def streaming_keys(query_position: int, window: int, num_sinks: int) -> list[int]:
    """Original positions of the keys a query attends to over ``KVCache(window, num_sinks)``, ascending."""
    sinks = range(min(num_sinks, query_position + 1))  # the first tokens, never a future one
    recent = range(max(0, query_position - window + 1), query_position + 1)  # the last `window`, itself included
    return sorted(set(sinks) | set(recent))


_STREAM_CASES = [(10, 4, 2), (6, 4, 2), (5, 4, 2), (3, 4, 2), (20, 8, 0), (1, 3, 4), (100, 16, 4)]


def _stream_mistakes(q: int, w: int, s: int) -> list[tuple[list[int], str]]:
    recent = list(range(max(0, q - w + 1), q + 1))
    return [
        (recent, "you left out the sinks: the first num_sinks positions stay visible to every later query."),
        (
            sorted(set(range(min(s, q + 1))) | set(range(max(0, q - w), q + 1))),
            "one key too many: the window holds `window` keys, the query's own included: q - window + 1 .. q.",
        ),
        (
            sorted(set(range(min(s, q + 1))) | set(range(max(0, q - (w - s) + 1), q + 1))),
            "you counted the sinks inside the window: KVCache(window=W, num_sinks=S) keeps S sinks ON TOP of the "
            "last W tokens (S + W slots).",
        ),
        (
            list(range(len(streaming_keys(q, w, s)))),
            "you numbered the keys by their place in the cache (0, 1, 2, ...: StreamingLLM's re-indexed "
            "positions); return the tokens' original positions, which is what this cache keeps.",
        ),
        (
            sorted(set(range(s)) | set(recent)),
            "a sink in the query's future: a query at position q < num_sinks sees only positions 0 .. q.",
        ),
    ]


@never_raises("keys a streaming query sees")
def check_streaming_keys(fn: Callable) -> bool:
    """``fn(query_position, window, num_sinks)``: return the ORIGINAL positions of the keys a query at
    ``query_position`` attends to over ``KVCache(window, num_sinks)`` (a list of ints, ascending)."""
    name = "keys a streaming query sees"
    for q, w, s in _STREAM_CASES:
        answer, problem = call_learner(fn, q, w, s)
        if problem is not None:
            return feedback(name, problem)
        values = as_int_list(answer)
        if values is None:
            return feedback(name, f"return a list of ints (key positions), got {type(answer).__name__}.")
        expected = streaming_keys(q, w, s)
        if values == expected:
            continue
        where = f"for query_position={q}, window={w}, num_sinks={s} you returned {values}"
        if len(set(values)) < len(values) and sorted(set(values)) == expected:
            return feedback(
                name, f"{where}: a position is listed twice. A sink inside the window is one key: take the union."
            )
        if sorted(values) == expected:
            return feedback(name, f"{where}: the right keys, but return them in ascending order: {expected}.")
        for candidate, diagnosis in _stream_mistakes(q, w, s):
            if sorted(values) == candidate:
                return feedback(name, f"{where}: {diagnosis}")
        return feedback(
            name, f"{where}, expected {expected}: the sinks 0 .. num_sinks - 1 and the last `window` positions."
        )
    return feedback(name, None)
