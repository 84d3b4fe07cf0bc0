"""``check_mha`` and ``check_gqa`` (notebook 16): a multi-head / grouped-query layer from a blank cell.

Each wrong answer is matched against the reference forward replayed with one deliberate mistake (``_variant``).
See :mod:`attn_core.exercises.handwrite` for what each check diagnoses.
"""

from __future__ import annotations

import math

import torch

from attn_core.attention import scaled_dot_product_attention
from attn_core.exercises import NOT_DONE, call_learner, feedback, is_stub, never_raises
from attn_core.exercises.handwrite_common import (
    _DROPOUT_ON,
    _F64,
    _MERGE_FIX,
    _RTOL,
    _close,
    _is_random,
    _layer_problem,
    _pair,
    _shape,
    _worst,
)
from attn_core.layers import GroupedQueryAttention
from attn_core.masks import causal_mask, padding_mask

__all__ = ["check_mha", "check_gqa"]


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
