"""Checks for notebook 13b, a serving engine (prefix caching, eviction, the memory budget).

Each ``check_…`` takes the learner's function, prints a verdict through :func:`attn_core.exercises.feedback`
and returns True/False; it never raises on a wrong answer. The usual mistakes get their own diagnosis: prefix
hits that count a partly matching block, that include the last token, or that match blocks without their chain
(a block equal to another prompt's block after a difference); eviction in most-recently-released order, or of a
block a prefix hit took back; the memory budget without the factor 2 (keys AND values), with query heads
instead of KV heads, without subtracting the weights, or rounded up.

The references are written out here on purpose: a grader must not share a bug with the code it grades.
"""

from __future__ import annotations

from collections.abc import Callable

from attn_core.exercises import as_int, as_int_list, call_learner, feedback, never_raises
from attn_core.i18n import _

__all__ = [
    "check_prefix_hit_tokens",
    "check_eviction_order",
    "check_max_concurrent_seqs",
    "prefix_hit_tokens",
    "eviction_order",
    "max_concurrent_seqs",
]


# ----------------------------------------------------------------------------------------------
# Exercise 1: prefix-cache hits with chained block hashes
# ----------------------------------------------------------------------------------------------


def prefix_hit_tokens(cached: list[int], prompt: list[int], block_size: int) -> int:
    """Tokens of ``prompt`` served from the cached blocks of ``cached``: the longest run of leading FULL blocks
    equal in both (a chained hash names a block by everything before it too), never ``prompt``'s last token."""
    hits = 0
    while (
        hits + block_size <= min(len(cached) // block_size * block_size, len(prompt) - 1)
        and cached[hits : hits + block_size] == prompt[hits : hits + block_size]
    ):
        hits += block_size
    return hits


_HIT_CASES = [
    ([1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 5, 6, 0, 0], 2),  # 3 blocks, then a difference
    ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 7, 8], 4),  # same prompt: the last block holds the last token
    ([1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 9], 2),  # the common prefix (5) stops inside a block
    ([9, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6, 7], 2),  # same blocks 1, 2, but the first differs: no hit
    ([1, 2, 3], [1, 2, 3, 4, 5], 4),  # the cached sequence has no full block
    ([5, 5, 5, 5, 5, 5, 5, 5], [5, 5, 5, 5, 5], 1),
]


def _hit_mistakes(cached: list[int], prompt: list[int], bs: int) -> list[tuple[int, str]]:
    common = 0
    while common < min(len(cached), len(prompt)) and cached[common] == prompt[common]:
        common += 1
    whole = common // bs * bs
    unchained = sum(
        bs
        for i in range(0, min(len(cached) // bs, (len(prompt) - 1) // bs) * bs, bs)
        if cached[i : i + bs] == prompt[i : i + bs]
    )
    return [
        (
            min(common, len(prompt) - 1),
            _(
                "you counted the common prefix token by token: the cache holds whole blocks, so a block that matches "
                "only partly cannot be shared. Round down to whole blocks."
            ),
        ),
        (
            min(whole, len(cached) // bs * bs),
            _(
                "that includes the prompt's last token: its logits are what the request needs, so it must be computed. "
                "Stop one token earlier: hits <= len(prompt) - 1."
            ),
        ),
        (
            unchained,
            _(
                "you matched each block on its own tokens: a block's keys depend on every earlier token, so after "
                "the first differing block nothing matches (chain the hash: hash(parent hash, tokens))."
            ),
        ),
    ]


@never_raises(_("prefix-cache hits"))
def check_prefix_hit_tokens(fn: Callable) -> bool:
    """``fn(cached, prompt, block_size)``: ``cached`` the tokens of a finished request whose full blocks are in
    the prefix cache; ``prompt`` a new request. Return how many of ``prompt``'s tokens are served from the cache."""
    name = _("prefix-cache hits")
    for cached, prompt, bs in _HIT_CASES:
        answer, problem = call_learner(fn, list(cached), list(prompt), bs)
        if problem is not None:
            return feedback(name, problem)
        value = as_int(answer)
        if value is None:
            return feedback(
                name, _("return a number of tokens (an int), got {type}.").format(type=type(answer).__name__)
            )
        expected = prefix_hit_tokens(cached, prompt, bs)
        if value == expected:
            continue
        where = _("for cached={cached}, prompt={prompt}, block_size={bs} you returned {value}").format(
            cached=cached, prompt=prompt, bs=bs, value=value
        )
        for candidate, diagnosis in _hit_mistakes(cached, prompt, bs):
            if value == candidate:
                return feedback(name, _("{where}: {problem}").format(where=where, problem=diagnosis))
        return feedback(
            name,
            _("{where}, expected {expected}: whole leading blocks equal in both, never the last token.").format(
                where=where, expected=expected
            ),
        )
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 2: which cached blocks are evicted
# ----------------------------------------------------------------------------------------------


def eviction_order(released: list[int], hit_again: list[int], num_needed: int) -> list[int]:
    """No block is free; ``released`` cached blocks reached refcount 0 in this order; a prefix hit took back
    ``hit_again`` (no longer evictable). The ``num_needed`` blocks an allocation evicts: least recently released."""
    return [block for block in released if block not in hit_again][:num_needed]


_EVICT_CASES = [([4, 7, 1, 3], [], 2), ([4, 7, 1, 3], [4], 2), ([0, 5, 2, 6, 3], [5, 6], 3), ([9, 8], [8], 1)]


@never_raises(_("eviction order"))
def check_eviction_order(fn: Callable) -> bool:
    """``fn(released, hit_again, num_needed)``: return the list of blocks evicted, in eviction order."""
    name = _("eviction order")
    for released, hit_again, n in _EVICT_CASES:
        answer, problem = call_learner(fn, list(released), list(hit_again), n)
        if problem is not None:
            return feedback(name, problem)
        value = as_int_list(answer)
        if value is None:
            return feedback(name, _("return a list of block ids, got {type}.").format(type=type(answer).__name__))
        expected = eviction_order(released, hit_again, n)
        if value == expected:
            continue
        where = _("for released={released}, hit_again={hit}, num_needed={n} you returned {value}").format(
            released=released, hit=hit_again, n=n, value=value
        )
        evictable = [b for b in released if b not in hit_again]
        if value == evictable[::-1][:n]:
            return feedback(
                name,
                _(
                    "{where}: that evicts the most recently released blocks first; LRU evicts the least "
                    "recently released (the oldest) first: they are the least likely to be hit again."
                ).format(where=where),
            )
        if value == released[:n] or value == released[::-1][:n]:
            return feedback(
                name,
                _(
                    "{where}: a block a prefix hit took back is in use again (refcount >= 1): it cannot be evicted."
                ).format(where=where),
            )
        return feedback(name, _("{where}, expected {expected}.").format(where=where, expected=expected))
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 3: the memory budget
# ----------------------------------------------------------------------------------------------


def max_concurrent_seqs(
    memory_bytes: int,
    weight_bytes: int,
    num_layers: int,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    bytes_per_element: int,
    tokens_per_seq: int,
) -> int:
    """Sequences of ``tokens_per_seq`` tokens whose KV cache fits next to the weights: keys AND values, KV heads."""
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element  # K and V, every layer
    return (memory_bytes - weight_bytes) // (per_token * tokens_per_seq)


GIB = 2**30
_BUDGET_CASES = [
    (80 * GIB, 140 * GIB // 2, 80, 64, 8, 128, 2, 8192),  # a 70B GQA model in bf16 (~140 GB... here 70 GiB)
    (16 * GIB, 536_000_000, 18, 4, 1, 256, 4, 4096),  # Gemma 3 270M in float32
    (24 * GIB, 16 * GIB, 32, 32, 8, 128, 2, 4096),  # an 8B GQA model in bf16
]


@never_raises(_("sequences that fit"))
def check_max_concurrent_seqs(fn: Callable) -> bool:
    """``fn(memory_bytes, weight_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element,
    tokens_per_seq)``: return how many sequences of ``tokens_per_seq`` tokens fit (an int)."""
    name = _("sequences that fit")
    for case in _BUDGET_CASES:
        answer, problem = call_learner(fn, *case)
        if problem is not None:
            return feedback(name, problem)
        value = as_int(answer)
        if value is None:
            return feedback(
                name, _("return a number of sequences (an int), got {type}.").format(type=type(answer).__name__)
            )
        expected = max_concurrent_seqs(*case)
        if value == expected:
            continue
        memory, weights, layers, heads, kv_heads, dim, size, tokens = case
        where = _("for the case {case} you returned {value}").format(case=case, value=value)
        per_seq = 2 * layers * kv_heads * dim * size * tokens
        mistakes = [
            ((memory - weights) // (per_seq // 2), _("the cache holds keys AND values: multiply by 2.")),
            (
                (memory - weights) // (per_seq // kv_heads * heads),
                _(
                    "only the KV heads are cached (grouped-query attention shares them): use num_kv_heads, not "
                    "num_heads."
                ),
            ),
            (memory // per_seq, _("the weights take their share of memory first: subtract weight_bytes.")),
            (-(-(memory - weights) // per_seq), _("a partly fitting sequence does not fit: round down (//).")),
        ]
        for candidate, diagnosis in mistakes:
            if value == candidate:
                return feedback(name, _("{where}: {problem}").format(where=where, problem=diagnosis))
        return feedback(
            name,
            _("{where}, expected {expected}: (memory - weights) // (2·layers·kv_heads·head_dim·bytes·tokens).").format(
                where=where, expected=expected
            ),
        )
    return feedback(name, None)
