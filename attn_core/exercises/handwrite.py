"""Checks for notebook 16 (hand-write it: SDPA, causal mask, MHA, GQA from a blank cell).

Interview-style exercises: the learner writes each piece from nothing and the check grades it
against the ``attn_core`` references on several shapes. Each ``check_…`` prints one verdict
through :func:`attn_core.exercises.feedback` and returns True/False; it never raises on a wrong
answer. A stub (``...``, ``None``, ``raise NotImplementedError``) gets the "not attempted" line.
Wrong answers are matched against the usual mistakes so the message says *which* one:

- ``check_sdpa(fn)``: ``fn(q, k, v, mask=None) -> (out, weights)``; diagnoses a swapped
  ``(weights, out)`` return, a wrong output or weights shape, transposed weights, softmax over
  the wrong dim, a missing or wrong scale (d_k, √d_v, √d_model), a flipped or ignored mask, the
  mask applied after the softmax or added as numbers, dropout left on, a parameter not named
  ``mask``, NaN on fully masked rows, else the largest error and where.
- ``check_causal_mask(fn)``: ``fn(q_len, k_len) -> bool (q_len, k_len)``; diagnoses a float or
  integer mask (each in its own words), a flipped (``triu``) mask, top-left alignment (for
  q_len < k_len and q_len > k_len) and an off-by-one diagonal.
- ``check_mha(cls)``: ``cls(hidden_dim, num_heads)`` with ``q_proj/k_proj/v_proj/o_proj``;
  diagnoses attribute names and shapes, the head split and merge (bare ``reshape``, no
  transpose), V from ``k_proj``, a missing ``o_proj``, scaling by √hidden_dim, softmax over the
  queries, the mask ignored, flipped, applied after the softmax or to the query rows, a causal
  mask always on, dropout left on in eval, and "weights right, out wrong" (merge or ``o_proj``).
- ``check_gqa(cls)``: ``cls(hidden_dim, num_heads, num_kv_heads)``; the same, plus the K/V
  projection sizes and ``repeat`` instead of ``repeat_interleave``.
- ``check_rope_mha(cls)`` (in :mod:`attn_core.exercises.handwrite_rope`, importable from here):
  ``cls(hidden_dim, num_heads, rope_base=10000.0)`` with ``forward(x, cache=None)``, MHA + KV cache +
  RoPE; diagnoses rotated V, positions restarting at 0 in each decode step, the wrong pairing layout,
  keys rotated after caching, and the usual layer mistakes.
- ``check_mla(cls)`` (in :mod:`attn_core.exercises.handwrite_mla`, importable from here): naive
  multi-head latent attention with DeepSeek's parameter names and a latent KV cache.

The checks clone every input they pass, so an answer that modifies its arguments in place is
graded on its result alone.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable

import torch
from torch import nn

from attn_core import i18n
from attn_core.attention import scaled_dot_product_attention
from attn_core.exercises import NOT_DONE, call_learner, feedback, is_stub, never_raises
from attn_core.layers import GroupedQueryAttention
from attn_core.masks import causal_mask, padding_mask

__all__ = ["check_sdpa", "check_causal_mask", "check_mha", "check_gqa", "check_rope_mha", "check_mla"]  # noqa: F822 (lazy, below)

_F64 = torch.float64
_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
# A correct answer may compute in float32. Its error, derived for these cases (entries of std 2,
# d_k <= 16, u = 2**-24 ~ 6e-8 the float32 unit roundoff): each score is a d_k-term dot product
# whose rounding error is at most d_k·u·Σ|q_i k_i| ~ d_k·u·2.5·d_k, divided by √d_k: <= 2.5·d_k^1.5·u
# ~ 1e-5 for d_k = 16; a softmax weight's relative error is at most twice its score error, 2e-5. The
# checks allow 5e-5 (measured: float32 answers use under a fifth of it); every wrong answer they
# diagnose is off by more than 1e-3.
_RTOL = 5e-5


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and a.shape == b.shape
        and torch.allclose(a.to(_F64), b.to(_F64), rtol=_RTOL, atol=1e-7, equal_nan=False)
    )


def _worst(got: torch.Tensor, expected: torch.Tensor) -> str:
    """'largest difference 0.123 at index (0, 2, 1)' (NaN counts as infinitely wrong)."""
    diff = (got.to(_F64) - expected.to(_F64)).abs().nan_to_num(nan=math.inf)  # same shape as expected
    flat = int(diff.flatten().argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
    return f"largest difference {diff.flatten()[flat].item():.3g} at index {index}"


def _shape(value) -> str:
    return str(tuple(value.shape)) if isinstance(value, torch.Tensor) else type(value).__name__


def _cache_growth_problem(cache, cached_before: int, new_tokens: int, where: str, update_hint: str) -> str | None:
    """A decode step must append exactly its new tokens to the cache: say what went wrong, or None."""
    grew = len(cache) - cached_before
    if grew == new_tokens:
        return None
    if grew == 0:
        return (
            f"{where} your forward did not add this step's tokens to the cache (len(cache) stayed "
            f"{cached_before}): {update_hint}."
        )
    return f"{where} the cache grew by {grew} tokens for {new_tokens} new ones: call cache.update once."


def _pair(result, what: str) -> tuple[tuple[torch.Tensor, torch.Tensor] | None, str | None]:
    if isinstance(result, (tuple, list)) and len(result) == 2 and all(isinstance(t, torch.Tensor) for t in result):
        return (result[0], result[1]), None
    if isinstance(result, torch.Tensor):
        return None, f"{what} returned one tensor {_shape(result)}; return the pair (out, weights)."
    return None, f"{what} should return a tuple (out, weights) of two tensors, got {type(result).__name__}."


# =============================================================================== check_sdpa


def _sdpa_reference(q, k, v, mask, scale):
    return scaled_dot_product_attention(q, k, v, mask, scale=scale)  # (..., Lq, Dv), (..., Lq, Lk)


def _sdpa_cases():
    gen = torch.Generator().manual_seed(0)

    def rand(*shape, std=1.0):
        return std * torch.randn(*shape, generator=gen, dtype=_F64)

    cases = []
    # (B, Lq, D) with Lq ≠ Lk: a transposed result has the wrong shape. std 2 makes a wrong scale obvious.
    cases.append(
        ("q (2, 3, 8), k/v (2, 5, 8), no mask", rand(2, 3, 8, std=2), rand(2, 5, 8, std=2), rand(2, 5, 8), None)
    )
    # (B, H, L, D), square: transposed weights keep their shape here, only the numbers catch them.
    q, k, v = rand(2, 3, 4, 16, std=2), rand(2, 3, 4, 16, std=2), rand(2, 3, 4, 6)
    cases.append(("q/k (2, 3, 4, 16), v (2, 3, 4, 6), no mask", q, k, v, None))
    # causal mask, Lq ≠ Lk, bottom-right aligned (2-D mask broadcast over batch and heads)
    q, k, v = rand(2, 2, 3, 8, std=2), rand(2, 2, 5, 8, std=2), rand(2, 2, 5, 8)
    cases.append(("q (2, 2, 3, 8), k/v (2, 2, 5, 8), causal mask (3, 5)", q, k, v, causal_mask(3, 5)))
    # per-sequence padding mask (B, 1, 1, Lk)
    q, k, v = rand(2, 2, 4, 8, std=2), rand(2, 2, 4, 8, std=2), rand(2, 2, 4, 8)
    cases.append(("q/k/v (2, 2, 4, 8), padding mask (2, 1, 1, 4) for lengths [4, 2]", q, k, v, padding_mask([4, 2], 4)))
    return cases


def _fully_masked_case():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 4, 8, generator=gen, dtype=_F64) for _ in range(3))  # (B, H, L, D)
    mask = causal_mask(4) & torch.tensor([True, False, True, True]).unsqueeze(-1)  # (4, 4): query 1 sees nothing
    return q, k, v, mask


def _sdpa_problem(fn, label, q, k, v, mask) -> str | None:
    where = f"[{label}]"
    args = (q.clone(), k.clone(), v.clone())
    result, problem = call_learner(fn, *args) if mask is None else call_learner(fn, *args, mask=mask.clone())
    if problem:
        return problem if problem == NOT_DONE or problem.startswith("pass the function") else f"{where} {problem}"
    pair, problem = _pair(result, "your function")
    if problem:
        return f"{where} {problem}"
    out, weights = pair
    d_k = q.shape[-1]
    expected_out, expected_w = _sdpa_reference(q, k, v, mask, 1 / math.sqrt(d_k))
    lq, lk = q.shape[-2], k.shape[-2]
    if out.shape == expected_w.shape and weights.shape == expected_out.shape and out.shape != weights.shape:
        return (
            f"{where} did you return (weights, out)? Your first tensor has the weights' shape (..., Lq, Lk) = "
            f"{tuple(expected_w.shape)}: return (out, weights), out first."
        )
    if weights.shape != expected_w.shape:
        if lq != lk and weights.shape == expected_w.transpose(-2, -1).shape:
            return (
                f"{where} weights have shape {_shape(weights)} = (..., Lk, Lq): transposed. The scores are "
                "Q Kᵀ = q @ k.transpose(-2, -1), one row per query, one column per key."
            )
        return f"{where} weights should have shape (..., Lq, Lk) = {tuple(expected_w.shape)}, got {_shape(weights)}."
    if out.shape != expected_out.shape:
        return (
            f"{where} out should have shape (..., Lq, Dv) = {tuple(expected_out.shape)}, got {_shape(out)}: "
            "out = weights @ v, one mixed value vector per query."
        )
    if _close(weights, expected_w) and _close(out, expected_out):
        return None
    if _is_random(fn, args, {} if mask is None else {"mask": mask}):
        return f"{where} {_DROPOUT_ON}"
    if _close(weights, expected_w):
        return f"{where} the weights are right but out is not ({_worst(out, expected_out)}): out = weights @ v."
    return f"{where} " + _sdpa_diagnosis(weights.to(_F64), q, k, v, mask, expected_w)


_DROPOUT_ON = (
    "your results change from call to call on the same input: dropout is still on. F.dropout(x, p) "
    "defaults to training=True; pass training=self.training (or use nn.Dropout, which .eval() turns off). "
    "Attention in eval mode, and in this check, must be deterministic."
)


def _is_random(fn, args: tuple, kwargs: dict) -> bool:
    """Do two calls of ``fn`` on the same inputs, from two random states, return different tensors?"""
    results = []
    for seed in (0, 1):
        with torch.random.fork_rng(devices=[]), contextlib.redirect_stdout(io.StringIO()):  # quiet, RNG untouched
            torch.manual_seed(seed)
            result, problem = call_learner(fn, *(a.clone() for a in args), **{n: t.clone() for n, t in kwargs.items()})
        if problem:
            return False
        results.append(result if isinstance(result, (tuple, list)) else (result,))
    first, second = results

    def differ(a, b) -> bool:  # NaN == NaN here: a NaN in the same place twice is not randomness
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        return a.shape != b.shape or not bool(((a == b) | (a.isnan() & b.isnan())).all())

    return len(first) == len(second) and any(differ(a, b) for a, b in zip(first, second, strict=True))


def _sdpa_diagnosis(weights, q, k, v, mask, expected_w) -> str:
    d_k = q.shape[-1]
    if q.shape[-2] == k.shape[-2] and mask is None:
        swapped = torch.softmax(k @ q.transpose(-2, -1) / math.sqrt(d_k), dim=-1)  # (..., Lk, Lq)
        if _close(weights, expected_w.transpose(-2, -1)) or _close(weights, swapped):
            return (
                "the weights are transposed: weights[..., i, j] must be how much query i attends to key j. "
                "Use q @ k.transpose(-2, -1), not k @ q.transpose(-2, -1)."
            )
    row_sums = weights.sum(-1)  # (..., Lq)
    col_sums = weights.sum(-2)  # (..., Lk)
    if not torch.allclose(row_sums, torch.ones_like(row_sums), atol=1e-6):
        if torch.allclose(col_sums, torch.ones_like(col_sums), atol=1e-6):
            return (
                "softmax over the wrong dim: your columns sum to 1, not your rows. Each query spreads one unit "
                "of attention over the keys: torch.softmax(scores, dim=-1)."
            )
    if mask is not None:
        unmasked = _sdpa_reference(q, k, v, None, 1 / math.sqrt(d_k))[1]  # (..., Lq, Lk)
        if _close(weights, unmasked):
            return "the mask is ignored: scores where the mask is False must be filled with -inf before the softmax."
        if _close(weights, unmasked * mask):
            return (
                "you applied the mask after the softmax: the blocked weights are zeroed, but the remaining ones "
                "no longer sum to 1 (the blocked keys still took their share). Fill the blocked *scores* with "
                "-inf before the softmax: scores.masked_fill(~mask, float('-inf')), then softmax."
            )
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., Lq, Lk)
        if _close(weights, torch.softmax(scores + mask.to(_F64), dim=-1)):
            return (
                "you added the mask to the scores as numbers (True -> +1, False -> 0): a blocked key only loses "
                "1 from its score and keeps most of its weight. A boolean mask selects: "
                "scores.masked_fill(~mask, float('-inf')) (an additive mask would hold 0 and -inf)."
            )
        flipped = ~mask
        sees = mask.any(-1) & flipped.any(-1)  # rows with visible keys under both conventions
        sees = sees.expand(expected_w.shape[:-1])  # (..., Lq)
        candidate = _sdpa_reference(q, k, v, flipped, 1 / math.sqrt(d_k))[1]
        if sees.any() and torch.allclose(weights[sees], candidate[sees], rtol=_RTOL, atol=1e-7):
            return (
                "the mask convention is flipped: you blocked the True positions. Here True = may attend "
                "(as in F.scaled_dot_product_attention), so fill where the mask is False: "
                "scores.masked_fill(~mask, float('-inf'))."
            )
    if torch.isnan(weights).any():
        return (
            "the weights contain NaN on rows that do see some key. Fill blocked scores with a large negative "
            "number (or -inf) *before* the softmax, and never where the mask is True."
        )
    scales = {
        "no scale: divide the scores by √d_k before the softmax.": 1.0,
        f"you divided by d_k = {d_k}; divide by √d_k = √{d_k} (math.sqrt(q.size(-1))).": 1 / d_k,
        "you multiplied by √d_k; divide by it.": math.sqrt(d_k),
    }
    d_v = v.shape[-1]
    if d_v != d_k:
        scales[
            f"you divided by √d_v = √{d_v} (the last dim of v); the scale belongs to the dot products q·k: "
            f"√d_k = √{d_k} (the last dim of q)."
        ] = 1 / math.sqrt(d_v)
    if q.ndim >= 4:
        d_model = q.shape[-3] * d_k
        scales[
            f"you scaled by √d_model = √(heads·d_k) = √{d_model}; the scale is per head: √d_k = √{d_k} "
            "(the last dim of q)."
        ] = 1 / math.sqrt(d_model)
    for message, scale in scales.items():
        if _close(weights, _sdpa_reference(q, k, v, mask, scale)[1]):
            return message
    return f"the weights differ from softmax(Q Kᵀ / √d_k) with the mask applied ({_worst(weights, expected_w)})."


@never_raises("check_sdpa")
def check_sdpa(fn: Callable) -> bool:
    """``fn(q, k, v, mask=None) -> (out, weights)``: scaled dot-product attention from scratch.

    q ``(..., Lq, d_k)``, k ``(..., Lk, d_k)``, v ``(..., Lk, d_v)``; ``mask`` boolean, True = may
    attend, broadcastable to ``(..., Lq, Lk)``. Graded on 3-D and 4-D inputs, Lq ≠ Lk, a causal
    and a padding mask; a fully masked row is an optional extra (NaN there only earns a note).
    """
    name = "check_sdpa"
    for case in _sdpa_cases():
        problem = _sdpa_problem(fn, *case)
        if problem:
            return feedback(name, problem)
    # Optional: a query that may attend to no key at all.
    q, k, v, mask = _fully_masked_case()
    result, problem = call_learner(fn, q.clone(), k.clone(), v.clone(), mask=mask)
    pair, _ = (None, None) if problem else _pair(result, "")
    ok = feedback(name, None)
    row = (slice(None), slice(None), 1)  # query 1, every batch and head
    if pair is not None and pair[1].shape == (1, 2, 4, 4):
        weights = pair[1]
        others = [0, 2, 3]
        expected_w = _sdpa_reference(q, k, v, mask, 1 / math.sqrt(q.shape[-1]))[1]
        if torch.isnan(weights[row]).any() and _close(weights[..., others, :], expected_w[..., others, :]):
            note = (
                "note: a query whose keys are ALL masked gets NaN weights (softmax of a row of -inf). "
                "Fine for a causal mask, but padding queries hit it. Fill with torch.finfo(dtype).min instead "
                "of -inf, or zero such rows afterwards (attn_core returns zero weights there)."
            )
            print("   " + i18n.localize(note))  # not a verdict: translated here (ac.set_language("zh"))
    return ok


# =============================================================================== check_causal_mask


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


# =============================================================================== check_mha / check_gqa


def _variant(ref: GroupedQueryAttention, x, mask, **mistake):
    """The reference forward with one deliberate mistake switched on (none by default)."""
    batch, length, hidden = x.shape
    heads, kv_heads, head_dim = ref.num_heads, ref.num_kv_heads, ref.head_dim
    group = heads // kv_heads

    def to_heads(t, n):  # (B, L, n·head_dim) -> (B, n, L, head_dim)
        if mistake.get("split") == "reshape":
            return t.reshape(batch, n, length, head_dim)
        return t.view(batch, length, n, head_dim).transpose(1, 2)

    q = to_heads(ref.q_proj(x), heads)  # (B, H, L, head_dim)
    k = to_heads(ref.k_proj(x), kv_heads)  # (B, G, L, head_dim)
    v = to_heads((ref.k_proj if mistake.get("value") == "k" else ref.v_proj)(x), kv_heads)  # (B, G, L, head_dim)
    if mistake.get("expand") == "repeat":  # tiles [0, 1, 0, 1]: wrong grouping
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)  # (B, H, L, head_dim)
    else:  # [0, 0, 1, 1]: the right grouping
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, H, L, head_dim)
    scale = {"hidden": 1 / math.sqrt(hidden), "none": 1.0}.get(mistake.get("scale"), 1 / math.sqrt(head_dim))
    mask_mode = mistake.get("mask_mode")
    causal = causal_mask(length)  # (L, L)
    used = {
        "flipped": None if mask is None else ~mask,
        "ignored": None,
        "causal": causal if mask is None else mask & causal,  # a causal mask added whatever was passed
        "rows": None if mask is None else mask.transpose(-2, -1),  # (B, 1, L, 1): padding blocks query rows
    }.get(mask_mode, mask)
    if mistake.get("softmax_dim") == -2 or mask_mode == "after":
        scores = q @ k.transpose(-2, -1) * scale  # (B, H, L, L)
        if mask is not None and mask_mode != "after":
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # (B, H, L, L)
        weights = scores.softmax(dim=mistake.get("softmax_dim", -1))  # (B, H, L, L)
        if mask is not None and mask_mode == "after":  # blocked weights zeroed after the softmax: rows sum < 1
            weights = weights.masked_fill(~mask, 0.0)  # (B, H, L, L)
        out = weights @ v  # (B, H, L, head_dim)
    else:
        out, weights = scaled_dot_product_attention(q, k, v, used, scale=scale)  # (B, H, L, hd), (B, H, L, L)
    if mistake.get("merge") == "reshape":  # no transpose back: row l mixes several tokens of one head
        out = out.reshape(batch, length, hidden)  # (B, L, hidden)
    else:
        out = out.transpose(1, 2).reshape(batch, length, hidden)  # (B, L, hidden)
    if mistake.get("o_proj") != "missing":
        out = ref.o_proj(out)  # (B, L, hidden)
    return out, weights


_MERGE_FIX = "transpose(1, 2) back to (B, L, H, head_dim), then reshape to (B, L, hidden_dim)"
_SUSPECTS = [
    (
        dict(split="reshape"),
        "wrong head split: you reshaped (B, L, hidden) straight to (B, H, L, head_dim), which cuts the "
        "*sequence* into heads. view(B, L, H, head_dim) first, then transpose(1, 2) (and transpose back "
        "before merging).",
    ),
    (
        dict(split="reshape", merge="reshape"),
        "heads split AND merged with a bare reshape: (B, L, hidden) -> (B, H, L, head_dim) cuts the *sequence* "
        "into heads, and reshaping back does not undo it inside the attention. Split with view(B, L, H, head_dim) "
        f"+ transpose(1, 2); merge with {_MERGE_FIX}.",
    ),
    (
        dict(merge="reshape"),
        "heads merged without the transpose: reshaping (B, H, L, head_dim) straight to (B, L, hidden_dim) mixes "
        f"tokens of one head into one row. {_MERGE_FIX}.",
    ),
    (
        dict(value="k"),
        "V comes from k_proj: use self.v_proj(x) for the values "
        "(every shape is right; only a reference test catches this).",
    ),
    (dict(o_proj="missing"), "the output projection is missing: return self.o_proj(merged heads)."),
    (
        dict(scale="hidden"),
        "scores scaled by √hidden_dim; the scale is per head: 1/√head_dim (head_dim = hidden_dim // num_heads).",
    ),
    (dict(scale="none"), "the 1/√head_dim scale is missing."),
    (
        dict(softmax_dim=-2),
        "softmax over the wrong dim (-2, the queries): each query spreads one unit of attention over the "
        "keys, so normalise over the last dim: scores.softmax(dim=-1).",
    ),
    (
        dict(expand="repeat"),
        "K/V heads expanded with .repeat (tiles kv heads 0,1,0,1): query heads 2h and 2h+1 must share kv head h. "
        "Use repeat_interleave(num_heads // num_kv_heads, dim=1).",
    ),
]
_MASK_SUSPECTS = [
    (dict(mask_mode="ignored"), "the mask is ignored: scores where mask is False must become -inf."),
    (
        dict(mask_mode="after"),
        "the mask is applied after the softmax: zeroing blocked weights leaves rows that sum to less than 1. "
        "Fill the blocked *scores* with -inf before the softmax: scores.masked_fill(~mask, float('-inf')).",
    ),
]
_ALWAYS_CAUSAL = (
    "you applied a causal mask although the check passed {what}: the `mask` argument decides what a query "
    "sees (mask=None: every key). Apply the mask you are given, and add no causal mask of your own."
)


def _matches_on_rows(out: torch.Tensor, candidate: torch.Tensor, rows: torch.Tensor) -> bool:
    """Does ``out (B, L, hidden)`` equal ``candidate`` on the query rows ``rows (B, L)``?"""
    return bool(rows.any()) and torch.allclose(out[rows], candidate[rows], rtol=_RTOL, atol=1e-7)


def _layer_problem(layer, ref: GroupedQueryAttention) -> str | None:
    """Check the four projections and copy the reference's parameters into them."""
    if not isinstance(layer, nn.Module):
        return f"your class should be an nn.Module (class ...(nn.Module)), got an instance of {type(layer).__name__}."
    missing = [p for p in _PROJECTIONS if not isinstance(getattr(layer, p, None), nn.Linear)]
    if missing:
        found = [n for n, m in layer.named_children() if isinstance(m, nn.Linear)]
        return (
            f"no nn.Linear attribute {', '.join(missing)}. Name the projections self.q_proj, self.k_proj, "
            f"self.v_proj, self.o_proj (one nn.Linear each); found nn.Linear attributes {found}."
        )
    hidden, kv_dim = ref.hidden_dim, ref.num_kv_heads * ref.head_dim
    for p in _PROJECTIONS:
        mine, theirs = getattr(layer, p), getattr(ref, p)
        if mine.weight.shape != theirs.weight.shape:
            got = (mine.in_features, mine.out_features)
            want = (theirs.in_features, theirs.out_features)
            message = f"self.{p} maps {got[0]} -> {got[1]} features, expected {want[0]} -> {want[1]}."
            if p in ("k_proj", "v_proj") and ref.num_kv_heads != ref.num_heads:
                message += (
                    f" In GQA the keys and values have num_kv_heads·head_dim = {ref.num_kv_heads}·{ref.head_dim} "
                    f"= {kv_dim} features, not hidden_dim = {hidden}"
                    + (" (that is MHA-sized)." if got[1] == hidden else ".")
                )
            return message
    with torch.no_grad():
        for p in _PROJECTIONS:
            mine, theirs = getattr(layer, p), getattr(ref, p)
            mine.weight.copy_(theirs.weight.to(mine.weight.dtype))
            if mine.bias is None:
                theirs.bias.zero_()  # grade a bias-free layer against a bias-free reference
            else:
                mine.bias.copy_(theirs.bias.to(mine.bias.dtype))
    layer.to(_F64).eval()
    return None


def _forward_problem(layer, ref, x, mask, label) -> str | None:
    where = f"[{label}]"
    args = {} if mask is None else {"mask": mask.clone()}
    result, problem = call_learner(layer, x.clone(), **args)
    if problem:
        if problem == NOT_DONE:
            return problem
        if problem.startswith("your function "):
            return f"{where} forward {problem.removeprefix('your function ')}"
        return f"{where} forward: {problem}"
    pair, problem = _pair(result, "forward")
    if problem:
        return f"{where} {problem}"
    out, weights = pair
    with torch.no_grad():
        expected_out, expected_w = _variant(ref, x, mask)
    batch, length, hidden = x.shape
    heads, head_dim = ref.num_heads, ref.head_dim
    if out.shape != expected_out.shape:
        if tuple(out.shape) == (batch, heads, length, head_dim):
            return (
                f"{where} out has shape (B, H, L, head_dim) = {_shape(out)}: merge the heads, then apply self.o_proj."
            )
        return f"{where} out should have shape (B, L, hidden_dim) = {tuple(expected_out.shape)}, got {_shape(out)}."
    if weights.shape != expected_w.shape:
        want = tuple(expected_w.shape)
        return f"{where} weights should have shape (B, num_heads, L, L) = {want}, got {_shape(weights)}."
    if _close(out, expected_out) and _close(weights, expected_w):
        return None
    if _is_random(layer, (x,), args):
        return f"{where} {_DROPOUT_ON}"
    out = out.detach().to(_F64)
    suspects = _SUSPECTS + (_MASK_SUSPECTS if mask is not None else [])
    with torch.no_grad():
        for mistake, diagnosis in suspects:
            if mistake.get("expand") and ref.num_kv_heads in (1, ref.num_heads):
                continue  # repeat == repeat_interleave there
            if _close(out, _variant(ref, x, mask, **mistake)[0]):
                return f"{where} {diagnosis}"
        if mask is None or mask.shape[-2] == length:  # no mask, or a causal one: always-causal leaves it alone
            if mask is None and _close(out, _variant(ref, x, mask, mask_mode="causal")[0]):
                return f"{where} " + _ALWAYS_CAUSAL.format(what="no mask")
        elif _close(out, _variant(ref, x, mask, mask_mode="causal")[0]):
            return f"{where} " + _ALWAYS_CAUSAL.format(what="a padding mask only")
        if mask is not None:
            flipped = ~mask
            sees = (mask.any(-1) & flipped.any(-1)).expand(expected_w.shape[:-1]).all(1)  # (B, L)
            if _matches_on_rows(out, _variant(ref, x, mask, mask_mode="flipped")[0], sees):
                return (
                    f"{where} the mask convention is flipped: True = may attend here, so fill the scores where "
                    "the mask is False: scores.masked_fill(~mask, float('-inf'))."
                )
            if mask.shape[-2] == 1:  # a key-padding mask (B, 1, 1, L): was it put on the query rows?
                rows = mask.transpose(-2, -1).any(-1).expand(expected_w.shape[:-1]).all(1)  # (B, L): rows kept
                if not rows.all() and _matches_on_rows(out, _variant(ref, x, mask, mask_mode="rows")[0], rows):
                    return (
                        f"{where} the padding mask blocked the padded query ROWS instead of the padded KEYS: a "
                        "(B, 1, 1, L) padding mask indexes the keys (the last axis), so that no query sees a padded "
                        "key. Use it as given (it broadcasts over heads and queries); do not transpose it."
                    )
    if torch.isnan(out).any():
        return f"{where} out contains NaN: is a query row fully masked, or the mask applied where it is True?"
    if _close(out, expected_out):
        return (
            f"{where} out is right but the returned weights are not ({_worst(weights, expected_w)}): "
            "return the softmax weights (B, H, L, L)."
        )
    if _close(weights, expected_w):
        return (
            f"{where} the weights are right but out is not ({_worst(out, expected_out)}): the mistake comes after "
            f"the softmax. Check weights @ v, the merge ({_MERGE_FIX}) and self.o_proj."
        )
    return f"{where} right shapes, wrong numbers: {_worst(out, expected_out)} in out."


def _check_layer(name: str, cls, configs) -> bool:
    if is_stub(cls):
        return feedback(name, NOT_DONE)
    gen = torch.Generator().manual_seed(4)
    label = getattr(cls, "__name__", type(cls).__name__)
    for args, num_kv_heads, seed in configs:
        hidden = args[0]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            ref = GroupedQueryAttention(hidden, args[1], num_kv_heads).to(_F64).eval()
            layer, problem = call_learner(cls, *args)
        if problem:
            return feedback(name, problem)
        problem = _layer_problem(layer, ref)
        if problem:
            return feedback(name, f"[{label}{args}] {problem}")
        length = 5
        x = torch.randn(2, length, hidden, generator=gen, dtype=_F64)  # (B, L, hidden)
        cases = (
            (None, "no mask"),
            (causal_mask(length), f"causal mask ({length}, {length})"),
            (padding_mask([length, 3], length), "padding mask (2, 1, 1, 5), lengths [5, 3]"),
        )
        for mask, case_label in cases:
            problem = _forward_problem(layer, ref, x, mask, f"{label}{args}, {case_label}")
            if problem:
                return feedback(name, problem)
    return feedback(name, None)


@never_raises("check_mha")
def check_mha(cls) -> bool:
    """``cls(hidden_dim, num_heads)``: an ``nn.Module`` with ``q_proj, k_proj, v_proj, o_proj``
    (``nn.Linear(hidden_dim, hidden_dim)``) and ``forward(x, mask=None) -> (out, weights)``:
    x ``(B, L, hidden_dim)`` -> out ``(B, L, hidden_dim)``, weights ``(B, num_heads, L, L)``.
    Graded with the parameters of an ``ac.MultiHeadAttention`` copied in."""
    return _check_layer("check_mha", cls, [((12, 3), 3, 0), ((16, 4), 4, 1)])


@never_raises("check_gqa")
def check_gqa(cls) -> bool:
    """``cls(hidden_dim, num_heads, num_kv_heads)``: like :func:`check_mha`, but k_proj/v_proj output
    ``num_kv_heads * head_dim`` features and query head h reads kv head ``h // (num_heads // num_kv_heads)``."""
    return _check_layer("check_gqa", cls, [((16, 4, 2), 2, 0), ((12, 6, 3), 3, 1), ((8, 4, 1), 1, 2)])


def __getattr__(name: str):
    """``check_rope_mha`` lives in :mod:`attn_core.exercises.handwrite_rope` (imported on first use: no cycle)."""
    if name == "check_rope_mha":
        from attn_core.exercises.handwrite_rope import check_rope_mha

        return check_rope_mha
    if name == "check_mla":
        from attn_core.exercises.handwrite_mla import check_mla

        return check_mla
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
