"""Graders of notebook 11c (Gemma 4 and Llama 4): Llama 4's chunked mask, its NoPE query temperature, and the bytes
a KV cache holds with windows, chunks, K = V and KV sharing.

- ``check_chunked_mask(fn)``: ``fn(seq_len, chunk_size) -> bool (L, L)``, True = may attend: query ``q`` sees key
  ``k`` when ``k <= q`` and ``k // C == q // C`` (HF's ``chunked_attention`` layers; ``ac.chunked_mask``).
- ``check_nope_temperature(fn)``: ``fn(positions (L,), floor_scale, attn_scale) -> (L,)``, the factor Llama 4
  multiplies a NoPE layer's queries by: ``1 + attn_scale · log(1 + floor((pos + 1) / floor_scale))``
  (``Llama4TextAttention``, ``attn_temperature_tuning``).
- ``check_kv_cache_bytes(fn)``: ``fn(layers, context, bytes_per_element) -> int``, the bytes one sequence's cache
  holds after ``context`` tokens; ``layers`` a list of dicts (``LAYER_KEYS``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from attn_core.exercises import as_int, as_number, call_learner, feedback, never_raises
from attn_core.masks import chunked_mask, sliding_window_mask

__all__ = ["check_chunked_mask", "check_nope_temperature", "check_kv_cache_bytes", "LAYER_KEYS"]

LAYER_KEYS = ("num_heads", "num_kv_heads", "head_dim", "window", "k_eq_v", "reuse")
U32 = 2.0**-24  # float32's unit roundoff: an answer computed in float32 (as HF does) is still right


def _as_tensor(result) -> torch.Tensor | None:
    try:
        array = result.detach().cpu().numpy() if isinstance(result, torch.Tensor) else np.asarray(result)
        return torch.as_tensor(array)
    except (TypeError, ValueError, RuntimeError):
        return None


# ------------------------------------------------------------------------------------------ the chunked mask
def _causal(seq_len: int) -> torch.Tensor:
    return torch.ones(seq_len, seq_len, dtype=torch.bool).tril()  # (L, L)


def _same_chunk(seq_len: int, size: int, shift: int = 0) -> torch.Tensor:
    index = torch.arange(seq_len) + shift  # (L,)
    return (index[:, None] // size) == (index[None, :] // size)  # (L, L)


def _diagnose_mask(mask: torch.Tensor, seq_len: int, size: int) -> str | None:
    expected = chunked_mask(seq_len, size)  # (L, L)
    if torch.equal(mask, expected):
        return None
    eye = torch.eye(seq_len, dtype=torch.bool)
    if torch.equal(mask, ~expected):
        return "your mask is inverted: True must mean the query may attend to the key."
    if torch.equal(mask, expected.T):
        return "your mask is transposed: rows are queries, columns are keys (key k <= query q)."
    if torch.equal(mask, _same_chunk(seq_len, size)):
        return "each chunk is bidirectional: inside a chunk a query still sees only keys k <= q (add the causal part)."
    if torch.equal(mask, _causal(seq_len)):
        return "that is the plain causal mask: cut it at chunk boundaries (k // chunk_size == q // chunk_size)."
    if torch.equal(mask, expected & ~eye):
        return "the diagonal is missing: a query sees its own token."
    for window in range(1, seq_len + 1):
        if torch.equal(mask, sliding_window_mask(seq_len, window)):
            return (
                f"that is a sliding window of {window} keys: a chunked query forgets everything before its chunk "
                "started, so the first token of a chunk sees only itself."
            )
    for shift in (1, -1):
        if torch.equal(mask, _causal(seq_len) & _same_chunk(seq_len, size, shift)):
            return "your chunk boundaries are shifted by one: chunks start at positions 0, C, 2C, ... (k // C)."
    for other in (size - 1, size + 1, size * 2):
        if other >= 1 and torch.equal(mask, chunked_mask(seq_len, other)):
            return f"those are chunks of {other} tokens; the chunk size is {size}."
    if (mask & ~_causal(seq_len)).any():
        return "some queries see future keys: the chunked mask is causal inside each chunk."
    return "some queries see the wrong keys: query q sees exactly the keys k <= q in its own chunk (k // C == q // C)."


@never_raises("check_chunked_mask")
def check_chunked_mask(fn: Callable) -> bool:
    """``fn(seq_len, chunk_size) -> bool (L, L)``: Llama 4's chunked causal mask, True = may attend."""
    name = "check_chunked_mask"
    for seq_len, size in ((10, 4), (7, 3), (5, 8), (6, 1), (9, 3)):
        result, problem = call_learner(fn, seq_len, size)
        if problem:
            return feedback(name, problem)
        mask = _as_tensor(result)
        if mask is None:
            return feedback(name, f"return a boolean (L, L) mask, got {type(result).__name__}.")
        if tuple(mask.shape) != (seq_len, seq_len):
            return feedback(name, f"return a mask of shape (L, L) = {(seq_len, seq_len)}, got {tuple(mask.shape)}.")
        if mask.dtype != torch.bool:
            if mask.is_floating_point() and bool(torch.isinf(mask).any()):
                return feedback(name, "that is an additive mask (0 / -inf): return booleans, True = may attend.")
            if not bool(((mask == 0) | (mask == 1)).all()):
                return feedback(name, "return a boolean mask (True = may attend), not scores.")
            mask = mask != 0
        problem = _diagnose_mask(mask, seq_len, size)
        if problem:
            return feedback(name, problem)
    return feedback(name, None)


# ------------------------------------------------------------------------------------ the NoPE temperature
def _temperature(pos: torch.Tensor, floor_scale: float, attn_scale: float, *, shift=1.0, rounding=torch.floor):
    return torch.log1p(rounding((pos + shift) / floor_scale)) * attn_scale + 1.0  # (L,)


def _diagnose_temperature(got: torch.Tensor, pos: torch.Tensor, floor_scale: float, attn_scale: float) -> str | None:
    expected = _temperature(pos, floor_scale, attn_scale)  # (L,)

    def same(candidate: torch.Tensor) -> bool:
        # a float32 computation (HF's) rounds a few times on each value: 16 unit roundoffs of the largest value
        tol = 16 * U32 * max(float(expected.abs().max()), float(candidate.abs().max()))
        return bool(torch.isfinite(candidate).all()) and float((got - candidate).abs().max()) <= tol

    if not bool(torch.isfinite(got).all()):
        return "some factors are -inf or nan: log(0) at the first positions. It is log(1 + floor(...)) (torch.log1p)."
    if same(expected):
        return None
    floors = torch.floor((pos + 1) / floor_scale)  # (L,)
    if same(1.0 / expected):
        return "you divided: the query is multiplied by 1 + attn_scale · log(...), a factor >= 1 that grows."
    if same(torch.log1p(floors) * attn_scale):
        return "the factor is 1 + attn_scale · log(...): without the + 1 the first positions scale the query by 0."
    if same(torch.log1p((pos + 1) / floor_scale) * attn_scale + 1.0):
        return "the floor is missing: the factor steps up once every floor_scale tokens and is flat in between."
    if same(_temperature(pos, floor_scale, attn_scale, shift=0.0)):
        return "off by one: HF uses floor((pos + 1) / floor_scale), so the first step is at position floor_scale - 1."
    if same(_temperature(pos, floor_scale, attn_scale, rounding=torch.round)) or same(
        _temperature(pos, floor_scale, attn_scale, rounding=torch.ceil)
    ):
        return "round down: floor((pos + 1) / floor_scale), not round or ceil."
    if same(torch.log1p(floors * attn_scale) + 1.0):
        return "attn_scale multiplies the log, not its argument: 1 + attn_scale · log(1 + floor(...))."
    if same(torch.log2(1 + floors) * attn_scale + 1.0) or same(torch.log10(1 + floors) * attn_scale + 1.0):
        return "use the natural log (torch.log1p), as HF does."
    if same(_temperature(pos, attn_scale, floor_scale)):
        return "floor_scale and attn_scale are swapped: divide positions by floor_scale, scale the log by attn_scale."
    if same(torch.log1p(floors) / attn_scale + 1.0):
        return "you divided the log by attn_scale: multiply it."
    return "the factors differ from 1 + attn_scale · log(1 + floor((pos + 1) / floor_scale))."


@never_raises("check_nope_temperature")
def check_nope_temperature(fn: Callable) -> bool:
    """``fn(positions (L,), floor_scale, attn_scale) -> (L,)``: Llama 4's NoPE query temperature per position."""
    name = "check_nope_temperature"
    for start, length, floor_scale, attn_scale in ((0, 40, 8.0, 0.1), (100, 30, 16.0, 0.5), (0, 12, 3.0, 2.0)):
        positions = torch.arange(start, start + length)  # (L,) int64, as HF builds them
        result, problem = call_learner(fn, positions.clone(), floor_scale, attn_scale)
        if problem:
            return feedback(name, problem)
        got = _as_tensor(result)
        if got is None or not (got.is_floating_point() or got.dtype in (torch.int64, torch.int32)):
            return feedback(
                name, f"return one factor per position, a float tensor of shape (L,), got {type(result).__name__}."
            )
        if tuple(got.shape) != (length,):
            return feedback(name, f"return one factor per position: shape (L,) = ({length},), got {tuple(got.shape)}.")
        problem = _diagnose_temperature(got.to(torch.float64), positions.to(torch.float64), floor_scale, attn_scale)
        if problem:
            return feedback(name, problem)
    return feedback(name, None)


# --------------------------------------------------------------------------------------- cache bytes
def _cache_bytes(layers, context: int, bpe: int, **mistake) -> int:
    """The right count, or one with ``mistake`` (the graders' candidates): the bytes a cache holds after ``context``."""
    total = 0
    for layer in layers:
        if layer["reuse"] and not mistake.get("count_reuse"):
            continue  # reads the storing layer's cache: holds nothing of its own
        window = None if mistake.get("no_window") else layer["window"]
        tokens = context if window is None else (window if mistake.get("window_not_min") else min(context, window))
        if window is not None and mistake.get("window_minus_one"):
            tokens = min(context, window - 1)
        tensors = 1 if layer["k_eq_v"] and not mistake.get("ignore_k_eq_v") else 2
        if mistake.get("keys_only"):
            tensors = 1
        heads = layer["num_heads"] if mistake.get("query_heads") else layer["num_kv_heads"]
        total += tokens * heads * layer["head_dim"] * tensors * (1 if mistake.get("no_bpe") else bpe)
    return total


CACHE_MISTAKES = {
    "count_reuse": "a reusing layer (reuse=True) stores nothing: it reads the keys and values of the storing layer.",
    "ignore_k_eq_v": "a K = V layer needs one tensor per token, not two: its values are its keys before k_norm and "
    "RoPE, so keys can be rebuilt from them.",
    "keys_only": "keys and values: two tensors per token on layers without K = V.",
    "no_window": "a sliding-window or chunked layer (window set) keeps at most `window` tokens, not the whole context.",
    "window_not_min": "with a context shorter than the window a layer holds only the context: min(context, window).",
    "window_minus_one": "off by one: `window` is the most tokens the layer keeps, so it holds min(context, window).",
    "query_heads": "the cache holds the key/value heads (num_kv_heads), not the query heads.",
    "no_bpe": "multiply by bytes_per_element (2 for bfloat16).",
}


def _case_layers():
    gemma = [  # a tiny Gemma 4: sliding, global with K = V, and two reusing layers
        dict(num_heads=4, num_kv_heads=2, head_dim=8, window=4, k_eq_v=False, reuse=False),
        dict(num_heads=4, num_kv_heads=1, head_dim=16, window=None, k_eq_v=True, reuse=False),
        dict(num_heads=4, num_kv_heads=2, head_dim=8, window=4, k_eq_v=False, reuse=False),
        dict(num_heads=4, num_kv_heads=1, head_dim=16, window=None, k_eq_v=True, reuse=False),
        dict(num_heads=4, num_kv_heads=2, head_dim=8, window=4, k_eq_v=False, reuse=True),
        dict(num_heads=4, num_kv_heads=1, head_dim=16, window=None, k_eq_v=True, reuse=True),
    ]
    llama = [  # a tiny Llama 4: three chunked layers, one global
        *[dict(num_heads=6, num_kv_heads=2, head_dim=4, window=5, k_eq_v=False, reuse=False)] * 3,
        dict(num_heads=6, num_kv_heads=2, head_dim=4, window=None, k_eq_v=False, reuse=False),
    ]
    return ((gemma, 12, 2), (gemma, 3, 4), (llama, 16, 2), (llama, 2, 1))


@never_raises("check_kv_cache_bytes")
def check_kv_cache_bytes(fn: Callable) -> bool:
    """``fn(layers, context, bytes_per_element) -> int``: bytes of keys and values one sequence's cache holds."""
    name = "check_kv_cache_bytes"
    for layers, context, bpe in _case_layers():
        result, problem = call_learner(fn, [dict(layer) for layer in layers], context, bpe)
        if problem:
            return feedback(name, problem)
        number = as_number(result)
        if number is None:
            return feedback(name, f"return the number of bytes as an int, got {type(result).__name__}.")
        expected = _cache_bytes(layers, context, bpe)
        if context and math.isclose(number * context, expected, rel_tol=1e-12):
            return feedback(name, "return the total for the whole context, not bytes per token.")
        got = as_int(number)
        if got is None:
            return feedback(name, f"a cache holds a whole number of bytes, got {number!r}.")
        if got == expected:
            continue
        if got == expected * 8:
            return feedback(name, "that is bits: return bytes.")
        for mistake, message in CACHE_MISTAKES.items():
            if got == _cache_bytes(layers, context, bpe, **{mistake: True}):
                return feedback(name, message)
        return feedback(
            name,
            "the total differs from the sum over the storing layers of tokens kept × num_kv_heads × head_dim × "
            "tensors per token × bytes_per_element.",
        )
    return feedback(name, None)
