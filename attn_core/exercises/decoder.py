"""Checks for notebook 11, a real decoder (Gemma 3 270M).

Each ``check_…`` takes the learner's function, prints a verdict through
:func:`attn_core.exercises.feedback` and returns True/False. It never raises on a wrong answer, and it
names the usual mistakes distinctly: a KV cache counted without the sliding windows (or with a window on
the global layers too), with query heads instead of kv heads, keys only, every 6th layer counted from 0,
one slot too many; a ring buffer's slots read as positions (litgpt #2182), empty slots or future tokens
let through, a window one too wide; min-p's threshold taken as absolute, across the batch, or not
renormalised.

The references are written out here on purpose: a grader must not share a bug with the code it grades.

One piece: the checks of notebook 11's exercises, each next to the reference it grades against and the mistakes it
names.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attn_core.exercises import as_number, call_learner, feedback, never_raises

__all__ = [
    "check_kv_cache_bytes",
    "check_ring_visibility",
    "check_min_p",
    "kv_cache_bytes",
    "ring_visibility",
    "min_p_filter",
    "GEMMA3_270M",
]

# ----------------------------------------------------------------------------------------------
# Exercise 1: KV-cache bytes of a model with local and global layers
# ----------------------------------------------------------------------------------------------

# Gemma 3 270M as the GGUF file states it (``lm.config``), under the field names of ``Gemma3Config``
GEMMA3_270M = dict(num_layers=18, num_heads=4, num_kv_heads=1, head_dim=256, sliding_window=512, global_every=6)


def _layer_tokens(config: dict, seq_len: int, window: int | None, is_global: Callable[[int], bool]) -> list[int]:
    return [seq_len if is_global(i) or window is None else min(seq_len, window) for i in range(config["num_layers"])]


def kv_cache_bytes(config: dict, seq_len: int, bytes_per_element: int) -> int:
    """Bytes of one sequence's KV cache: every layer caches a key and a value of ``head_dim`` numbers per kv
    head per token; a local layer (layer ``i`` with ``(i + 1) % global_every != 0``) keeps at most
    ``sliding_window`` tokens, a global one keeps all ``seq_len``."""
    every = config["global_every"]
    tokens = _layer_tokens(config, seq_len, config["sliding_window"], lambda i: (i + 1) % every == 0)
    return 2 * config["num_kv_heads"] * config["head_dim"] * sum(tokens) * bytes_per_element


_CACHE_CASES = [
    # (config, seq_len, bytes_per_element): the real model first, long and short; then made-up configs whose
    # layer count is not a multiple of global_every, so counting globals from layer 0 changes the answer
    (GEMMA3_270M, 4096, 4),
    (GEMMA3_270M, 100, 2),
    (dict(num_layers=8, num_heads=6, num_kv_heads=2, head_dim=16, sliding_window=8, global_every=3), 50, 2),
    (dict(num_layers=10, num_heads=8, num_kv_heads=2, head_dim=32, sliding_window=16, global_every=4), 5, 4),
]


def _cache_mistakes(c: dict, seq_len: int, b: int) -> list[tuple[int, str]]:
    every, window, kv = c["global_every"], c["sliding_window"], c["num_kv_heads"]
    per_token = 2 * kv * c["head_dim"] * b  # bytes per cached token per layer

    def total(tokens: list[int], per: int = per_token) -> int:
        return per * sum(tokens)

    shipped = _layer_tokens(c, seq_len, window, lambda i: (i + 1) % every == 0)
    return [
        (
            total(_layer_tokens(c, seq_len, None, lambda i: True)),
            "you ignored the sliding windows: a local layer never reads keys older than sliding_window tokens, "
            "so its ring buffer keeps at most min(seq_len, sliding_window) of them.",
        ),
        (
            total(_layer_tokens(c, seq_len, window, lambda i: False)),
            "you capped every layer at the window: the global layers (every global_every-th) keep all seq_len tokens.",
        ),
        (
            total(shipped, 2 * c["num_heads"] * c["head_dim"] * b),
            "you counted query heads (num_heads): only the num_kv_heads key/value heads are cached.",
        ),
        (total(shipped) // 2, "you counted the keys only: the cache holds a key AND a value per token (factor 2)."),
        (
            total(_layer_tokens(c, seq_len, window, lambda i: i % every == 0)),
            "you counted the global layers from layer 0 (i % global_every == 0): layer i is global when "
            "(i + 1) % global_every == 0, the 6th, 12th, 18th layer (indices 5, 11, 17).",
        ),
        (
            total(_layer_tokens(c, seq_len, window + 1, lambda i: (i + 1) % every == 0)),
            "a local layer keeps sliding_window tokens, the query's own included, not sliding_window + 1.",
        ),
        (total(shipped) * 8, "that is bits, not bytes: drop the factor 8."),
        (total(shipped) // b, "that is the number of elements: multiply by bytes_per_element."),
    ]


@never_raises("KV-cache bytes with sliding windows")
def check_kv_cache_bytes(fn: Callable) -> bool:
    """``fn(config, seq_len, bytes_per_element)``: ``config`` a dict with ``num_layers``, ``num_heads``,
    ``num_kv_heads``, ``head_dim``, ``sliding_window``, ``global_every`` (``Gemma3Config``'s names). Return the
    bytes of one sequence's KV cache after ``seq_len`` tokens, local layers holding at most the window (an int)."""
    name = "KV-cache bytes with sliding windows"
    for config, seq_len, b in _CACHE_CASES:
        answer, problem = call_learner(fn, dict(config), seq_len, b)
        if problem is not None:
            return feedback(name, problem)
        number = as_number(answer)
        if number is None:
            return feedback(name, f"return a number (bytes, an int), got {type(answer).__name__}.")
        answer = number
        expected = kv_cache_bytes(config, seq_len, b)
        if answer == expected:
            continue
        where = f"for {config} after {seq_len} tokens at {b} bytes per element you returned {answer!r}"
        for candidate, diagnosis in _cache_mistakes(config, seq_len, b):
            if answer == candidate:
                return feedback(name, f"{where}: {diagnosis}")
        return feedback(
            name,
            f"{where}, expected {expected:,}: sum over layers of 2 · num_kv_heads · head_dim · tokens kept · "
            "bytes_per_element, tokens kept = seq_len on a global layer, min(seq_len, sliding_window) on a local one.",
        )
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 2: which ring-buffer slots a query may see
# ----------------------------------------------------------------------------------------------


def ring_visibility(slot_positions: torch.Tensor, query_positions: torch.Tensor, window: int) -> torch.Tensor:
    """``(Lq, S)`` bool: query at position q may read the slot holding position p when the slot is filled
    (p >= 0), p is not in the future (p <= q) and p is one of the ``window`` latest keys (q - p < window)."""
    held = slot_positions.unsqueeze(0)  # (1, S): position held by each slot, -1 = empty
    query = query_positions.unsqueeze(-1)  # (Lq, 1)
    return (held >= 0) & (held <= query) & (query - held < window)  # (Lq, S)


_RING_CASES = [
    # (slot_positions, query_positions, window): a decode step on a wrapped ring of 5 slots, window 3
    (torch.tensor([8, 9, 5, 6, 7]), torch.tensor([9]), 3),
    # a ring not yet full: two empty slots, an early query (the window reaches past position 0)
    (torch.tensor([0, 1, -1, -1]), torch.tensor([1]), 4),
    # a prefill longer than the ring (litgpt #2182): the ring already holds positions after early queries
    (torch.tensor([8, 9, 10, 11, 4, 5, 6, 7]), torch.tensor([6, 7, 8, 9, 10, 11]), 4),
    # a decode step on a wrapped ring of 6, window 5 (one spare slot: the oldest key is held but not read)
    (torch.tensor([12, 13, 14, 9, 10, 11]), torch.tensor([14]), 5),
]


def _ring_mistakes(held: torch.Tensor, query: torch.Tensor, window: int) -> list[tuple[torch.Tensor, str]]:
    slots = torch.arange(held.shape[0])  # (S,)
    q, p = query.unsqueeze(-1), held.unsqueeze(0)  # (Lq, 1), (1, S)
    return [
        (
            ring_visibility(slots, query, window),
            "you used the slot index as the key's position: once the ring wraps, slot s holds position "
            "slot_positions[s], not s (this is litgpt #2182's bug). Compare the query with slot_positions.",
        ),
        (
            (p >= 0) & (p <= q) & (q - p <= window),
            "the window is one too wide: query q sees window keys, itself included: q - p < window.",
        ),
        (
            (p <= q) & (q - p < window),
            "you let the query read empty slots (position -1): a slot that holds no token must be masked (p >= 0).",
        ),
        (
            (p >= 0) & (q - p < window),
            "you let a query read tokens after it: in a prefill longer than the ring, slots already hold later "
            "positions; keep p <= q (causal).",
        ),
        (
            (p >= 0).expand(q.shape[0], -1),
            "you let every filled slot through: a slot is visible only when its position is within the window "
            "(q - p < window) and not after the query (p <= q).",
        ),
    ]


@never_raises("ring-buffer visibility")
def check_ring_visibility(fn: Callable) -> bool:
    """``fn(slot_positions, query_positions, window)``: ``slot_positions (S,)`` int64, the position each ring slot
    holds (``-1`` = empty), ``query_positions (Lq,)``. Return the boolean ``(Lq, S)`` mask, True where the query
    may attend to the slot's key under a sliding window of ``window`` keys (the query's own included)."""
    name = "ring-buffer visibility"
    for held, query, window in _RING_CASES:
        answer, problem = call_learner(fn, held.clone(), query.clone(), window)
        if problem is not None:
            return feedback(name, problem)
        expected = ring_visibility(held, query, window)  # (Lq, S)
        where = f"slot_positions {held.tolist()}, query_positions {query.tolist()}, window {window}"
        if not isinstance(answer, torch.Tensor):
            return feedback(name, f"{where}: return a torch.Tensor (a boolean mask), got {type(answer).__name__}.")
        if answer.dtype != torch.bool:
            return feedback(
                name,
                f"{where}: your mask has dtype {answer.dtype}; masks here are boolean with True = may attend "
                "(comparisons such as p <= q already give booleans).",
            )
        if tuple(answer.shape) != tuple(expected.shape):
            return feedback(
                name,
                f"{where}: wrong shape {tuple(answer.shape)}, expected (Lq, S) = {tuple(expected.shape)}: one row per "
                "query, one column per slot (query_positions[:, None] against slot_positions[None, :]).",
            )
        if torch.equal(answer, expected):
            continue
        if torch.equal(answer, ~expected):
            return feedback(
                name, f"{where}: flipped convention: your mask is True where attention is blocked; True = may attend."
            )
        for candidate, diagnosis in _ring_mistakes(held, query, window):
            if torch.equal(answer, candidate):
                return feedback(name, f"{where}: {diagnosis}")
        row, col = (answer != expected).nonzero()[0].tolist()
        return feedback(
            name,
            f"{where}: query {int(query[row])} and the slot holding {int(held[col])}: yours {bool(answer[row, col])}, "
            f"expected {bool(expected[row, col])}. A slot is visible when it is filled (p >= 0), not in the future "
            "(p <= q) and in the window (q - p < window).",
        )
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 3: min-p filtering
# ----------------------------------------------------------------------------------------------


def min_p_filter(probs: torch.Tensor, min_p: float) -> torch.Tensor:
    """Keep the tokens at least ``min_p`` times as likely as the row's most likely token; renormalise.
    ``probs (B, vocab)`` -> ``(B, vocab)`` (Hugging Face's ``MinPLogitsWarper``, transformers #30639)."""
    threshold = min_p * probs.amax(dim=-1, keepdim=True)  # (B, 1): relative to each row's top token
    kept = probs.masked_fill(probs < threshold, 0.0)  # (B, vocab)
    return kept / kept.sum(dim=-1, keepdim=True)  # (B, vocab), rows sum to 1


def _renormalised(probs: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    kept = probs * keep  # (B, vocab)
    return kept / kept.sum(dim=-1, keepdim=True)  # (B, vocab)


def _min_p_cases() -> list[tuple[torch.Tensor, float]]:
    g = torch.Generator().manual_seed(11)
    peaked = (torch.randn(2, 12, dtype=torch.float64, generator=g) * torch.tensor([[3.0], [1.0]])).softmax(-1)
    flat = torch.randn(3, 20, dtype=torch.float64, generator=g).softmax(-1)  # (3, 20)
    return [
        (peaked, 0.1),  # rows of different confidence: the threshold must follow each row's own top token
        (flat, 0.3),
        (torch.randn(2, 16, generator=g).softmax(-1), 0.05),  # float32
    ]


@never_raises("min-p filtering")
def check_min_p(fn: Callable) -> bool:
    """``fn(probs, min_p)``: ``probs (B, vocab)`` next-token probabilities (rows sum to 1), ``min_p`` in (0, 1].
    Return the distribution min-p sampling draws from ``(B, vocab)``: tokens with probability below
    ``min_p ×`` the row's largest probability set to 0, the rest renormalised to sum to 1."""
    name = "min-p filtering"
    for probs, min_p in _min_p_cases():
        answer, problem = call_learner(fn, probs.clone(), min_p)
        if problem is not None:
            return feedback(name, problem)
        expected = min_p_filter(probs, min_p)  # (B, vocab)
        where = f"probs {tuple(probs.shape)} {probs.dtype}, min_p {min_p}"
        if not isinstance(answer, torch.Tensor):
            return feedback(name, f"{where}: return a torch.Tensor of probabilities, got {type(answer).__name__}.")
        if answer.dtype == torch.bool:
            return feedback(
                name, f"{where}: you returned a mask; return the filtered probabilities, renormalised to sum to 1."
            )
        if tuple(answer.shape) != tuple(expected.shape):
            return feedback(name, f"{where}: wrong shape {tuple(answer.shape)}, expected {tuple(expected.shape)}.")
        if answer.is_complex() or answer.dtype != probs.dtype:
            return feedback(name, f"{where}: dtype {answer.dtype}, expected {probs.dtype} (keep the input's dtype).")
        if not torch.isfinite(answer).all():
            return feedback(name, f"{where}: your result contains NaN or inf (did a row lose every token?).")
        # float64: a handful of roundings of numbers <= 1; float32: the same, at float32's eps
        atol = 1e-12 if probs.dtype == torch.float64 else 20 * torch.finfo(torch.float32).eps
        if torch.allclose(answer, expected, rtol=0, atol=atol):
            continue
        top = probs.amax(dim=-1, keepdim=True)  # (B, 1)
        candidates = [
            (
                probs.masked_fill(probs < min_p * top, 0.0),
                "you did not renormalise: divide the kept probabilities by their sum so each row sums to 1.",
            ),
            (
                _renormalised(probs, probs >= min_p),
                "you used min_p as an absolute threshold: min-p keeps the tokens with p >= min_p × (the row's "
                "largest p), so the cut follows the model's confidence.",
            ),
            (
                _renormalised(probs, probs >= min_p * probs.max()),
                "you took the largest probability of the whole batch: each row has its own top token "
                "(probs.amax(dim=-1, keepdim=True)).",
            ),
            (
                _renormalised(probs, probs < min_p * top),
                "you kept the unlikely tokens and dropped the likely ones: keep p >= min_p × max p.",
            ),
        ]
        for candidate, diagnosis in candidates:
            if torch.isfinite(candidate).all() and torch.allclose(answer, candidate, rtol=0, atol=atol):
                return feedback(name, f"{where}: {diagnosis}")
        return feedback(
            name,
            f"{where}: wrong numbers; zero the tokens below min_p × each row's largest probability, then renormalise.",
        )
    return feedback(name, None)
