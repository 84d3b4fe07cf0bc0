"""Checks for notebook 02 (multi-head attention).

Each ``check_…`` takes the learner's function, runs it on small fixed inputs, prints a
verdict through :func:`attn_core.exercises.feedback` and returns True/False. It never
raises on a wrong answer; it names the usual mistake when it recognises one:

- ``check_split_heads(split_heads)``: ``(B, L, hidden) -> (B, H, L, head_dim)``
- ``check_merge_heads(merge_heads)``: ``(B, H, L, head_dim) -> (B, L, hidden)``
- ``check_param_count(mha_param_count)``: ``(hidden_dim, num_heads, bias=True) -> int``
- ``check_mha_forward(mha_forward)``: ``(x, layer, context=None, mask=None) -> (B, Lq, hidden)``,
  graded against ``attn_core.MultiHeadAttention`` with the same weights.

One piece: the checks of notebook 02's exercises, each next to the reference it grades against and the mistakes it
names.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from attn_core.attention import scaled_dot_product_attention
from attn_core.exercises import NOT_DONE, as_number, call_learner, feedback, never_raises
from attn_core.layers import MultiHeadAttention
from attn_core.masks import causal_mask, padding_mask

__all__ = ["check_split_heads", "check_merge_heads", "check_param_count", "check_mha_forward"]

_F64 = torch.float64
_VIEW_HINT = (
    "`.view` needs a contiguous tensor, and `transpose` only swaps strides. "
    "Use `.reshape(...)` or `.contiguous().view(...)` after the transpose."
)


class _Failed(Exception):
    """A verdict found deep inside a helper (a stub, a crash, a wrong return type): the message says it."""


def _run(fn: Callable, *args, **kwargs):
    """:func:`call_learner` that raises its problem as :class:`_Failed`, with a hint for the `.view` error."""
    result, problem = call_learner(fn, *args, **kwargs)
    if problem:
        if "RuntimeError: view size is not compatible" in problem:
            problem += " " + _VIEW_HINT
        raise _Failed(problem)
    return result


def _verdict(name: str, fn, problem_of: Callable, cases) -> bool:
    """Feedback on the first case ``problem_of(fn, *case)`` finds wrong (a raised :class:`_Failed` included)."""
    try:
        problem = next(filter(None, (problem_of(fn, *case) for case in cases)), None)
    except _Failed as err:
        problem = str(err)
    return feedback(name, problem)


def _as_tensor(result, what: str) -> torch.Tensor:
    if isinstance(result, tuple) and result and isinstance(result[0], torch.Tensor):
        result = result[0]  # (out, weights) is fine: grade the output
    if not isinstance(result, torch.Tensor):
        raise _Failed(f"{what} should be a torch.Tensor, got {type(result).__name__}.")
    return result


def _grid(*shape: int) -> torch.Tensor:
    """Distinct values 0, 1, 2, ... so that any misplaced element shows."""
    return torch.arange(math.prod(shape), dtype=_F64).view(*shape)


# --------------------------------------------------------------------------- split / merge


@never_raises("split_heads")
def check_split_heads(split_heads) -> bool:
    """``split_heads(x, num_heads)``: ``(B, L, hidden) -> (B, num_heads, L, hidden // num_heads)``."""
    cases = ((2, 3, 8, 4), (1, 5, 6, 3), (3, 2, 4, 1))  # (batch, length, hidden, heads)
    return _verdict("split_heads", split_heads, _split_problem, cases)


def _split_problem(split_heads, batch: int, length: int, hidden: int, heads: int) -> str | None:
    head_dim = hidden // heads
    x = _grid(batch, length, hidden)  # (B, L, hidden)
    expected = x.view(batch, length, heads, head_dim).transpose(1, 2)  # (B, H, L, head_dim)
    got = _as_tensor(_run(split_heads, x.clone(), heads), "split_heads(x, num_heads)")
    config = f"x of shape {tuple(x.shape)} with num_heads={heads}"
    if tuple(got.shape) != tuple(expected.shape):
        if tuple(got.shape) == (batch, length, heads, head_dim):
            return (
                f"wrong shape for {config}: got (B, L, H, head_dim) = {tuple(got.shape)}. "
                "That is the `.view` step; now `.transpose(1, 2)` to bring the heads before the length."
            )
        return (
            f"wrong shape for {config}: expected (B, H, L, head_dim) = {tuple(expected.shape)}, got {tuple(got.shape)}."
        )
    if torch.equal(got.to(_F64), expected):
        return None
    if torch.equal(got.to(_F64), x.reshape(batch, heads, length, head_dim)):
        return (
            f"right shape, wrong numbers for {config}: you reshaped straight to (B, H, L, head_dim), which "
            "cuts the *sequence* into heads. A head is a block of *features* of every token: view as "
            "(B, L, H, head_dim) first, then transpose(1, 2)."
        )
    if torch.equal(got.to(_F64), x.view(batch, length, head_dim, heads).permute(0, 3, 1, 2)):
        return (
            f"right shape, wrong numbers for {config}: head h got every H-th feature (a strided slice). "
            "Head h owns the contiguous block of features h·head_dim .. (h+1)·head_dim - 1: "
            "view as (B, L, H, head_dim), not (B, L, head_dim, H)."
        )
    return f"right shape, wrong numbers for {config}: element [0, 1, 0, :] should be {expected[0, 1, 0].tolist()}."


@never_raises("merge_heads")
def check_merge_heads(merge_heads) -> bool:
    """``merge_heads(t)``: ``(B, H, L, head_dim) -> (B, L, H * head_dim)``, the inverse of split_heads."""
    cases = ((2, 4, 3, 2), (1, 3, 5, 2), (3, 1, 2, 4))  # (batch, heads, length, head_dim)
    return _verdict("merge_heads", merge_heads, _merge_problem, cases)


def _merge_problem(merge_heads, batch: int, heads: int, length: int, head_dim: int) -> str | None:
    hidden = heads * head_dim
    t = _grid(batch, heads, length, head_dim)  # (B, H, L, head_dim), contiguous like attention's output
    expected = t.transpose(1, 2).reshape(batch, length, hidden)  # (B, L, hidden)
    got = _as_tensor(_run(merge_heads, t.clone()), "merge_heads(t)")
    config = f"t of shape (B, H, L, head_dim) = {tuple(t.shape)}"
    if tuple(got.shape) != tuple(expected.shape):
        if tuple(got.shape) == (batch, length, heads, head_dim):
            return (
                f"wrong shape for {config}: got (B, L, H, head_dim) = {tuple(got.shape)}. "
                "Concatenate the heads: flatten the last two dims into hidden = H·head_dim."
            )
        return f"wrong shape for {config}: expected (B, L, hidden) = {tuple(expected.shape)}, got {tuple(got.shape)}."
    if torch.equal(got.to(_F64), expected):
        return None
    if torch.equal(got.to(_F64), t.reshape(batch, length, hidden)):
        return (
            f"right shape, wrong numbers for {config}: you reshaped (B, H, L, head_dim) straight to "
            "(B, L, hidden) without transposing back, so one output token mixes rows of different tokens. "
            "transpose(1, 2) first, then reshape."
        )
    return f"right shape, wrong numbers for {config}: token 0 should be {expected[0, 0].tolist()}."


# --------------------------------------------------------------------------- parameter count


@never_raises("mha_param_count")
def check_param_count(mha_param_count) -> bool:
    """``mha_param_count(hidden_dim, num_heads, bias=True)``: parameters of one MHA layer."""
    cases = ((512, 8, True), (64, 4, True), (64, 16, True), (48, 3, False))  # (hidden_dim, num_heads, bias)
    return _verdict("mha_param_count", mha_param_count, _param_count_problem, cases)


def _as_int(value) -> int:
    number = as_number(value)
    if number is None:
        raise _Failed(f"mha_param_count should return a whole number, got {type(value).__name__}.")
    if isinstance(number, float):
        if not number.is_integer():
            raise _Failed(f"a parameter count is a whole number, got {number}.")
        number = int(number)
    return number


def _param_count_problem(fn, hidden: int, heads: int, bias: bool) -> str | None:
    got = _as_int(_run(fn, hidden, heads, bias=bias))
    weights, biases = 4 * hidden * hidden, 4 * hidden
    expected = weights + (biases if bias else 0)
    if got == expected:
        return None
    config = f"hidden_dim={hidden}, num_heads={heads}, bias={bias}"
    one_head = _as_int(_run(fn, hidden, 1, bias=bias))
    if one_head != got:
        return (
            f"for {config} you return {got}, but {one_head} with num_heads=1. The count does not "
            "depend on num_heads: heads split the hidden_dim features, they add no parameters."
        )
    if bias and got == weights:
        return f"for {config} you return {got} = 4·d², the weights only: add the 4 bias vectors (4·d)."
    if not bias and got == weights + biases:
        return f"for {config} you return {got}, which counts biases; with bias=False there are none (4·d²)."
    if got in (3 * hidden * hidden + 3 * hidden * bias, 3 * hidden * hidden):
        return (
            f"for {config} you return {got}: that is Q, K, V only. The output projection W_O "
            "(d·d weights + d bias) is a parameter matrix too."
        )
    return (
        f"for {config} expected {expected}, got {got}. Count the 4 projections (Q, K, V, O): d·d weights + d bias each."
    )


# --------------------------------------------------------------------------- full forward


def _make_layer(hidden: int, heads: int, seed: int) -> MultiHeadAttention:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MultiHeadAttention(hidden, heads).to(_F64).eval()


def _variant(
    layer, x, context, mask, *, scale="head", value="v", mask_mode="ours", out_proj=True, split="ok", merge="ok"
):
    """A reference forward with one deliberate mistake switched on (or none)."""
    source = x if context is None else context
    batch, q_len, hidden = x.shape
    heads, head_dim = layer.num_heads, layer.head_dim

    def to_heads(t):  # (B, L, hidden) -> (B, H, L, head_dim)
        if split == "view":
            return t.reshape(batch, heads, t.shape[1], head_dim)
        return t.view(batch, t.shape[1], heads, head_dim).transpose(1, 2)

    value_proj = layer.k_proj if value == "k" else layer.v_proj
    source_kv = x if value == "self" else source
    q = to_heads(layer.q_proj(x))  # (B, H, Lq, head_dim)
    k = to_heads(layer.k_proj(source_kv))  # (B, H, Lk, head_dim)
    v = to_heads(value_proj(source_kv))  # (B, H, Lk, head_dim)
    factor = {"head": 1 / math.sqrt(head_dim), "hidden": 1 / math.sqrt(hidden), "none": 1.0}[scale]
    if mask_mode == "multiply":  # scores * mask: a blocked score becomes 0, which softmax still weighs e^0 = 1
        weights = torch.softmax(q @ k.transpose(-2, -1) * factor * mask, dim=-1)  # (B, H, Lq, Lk)
        out = weights @ v  # (B, H, Lq, head_dim)
    elif mask_mode == "zero_after":  # softmax over every key, then the blocked weights zeroed: rows sum < 1
        weights = torch.softmax(q @ k.transpose(-2, -1) * factor, dim=-1) * mask  # (B, H, Lq, Lk)
        out = weights @ v  # (B, H, Lq, head_dim)
    else:
        used = {"ours": mask, "flipped": None if mask is None else ~mask, "ignored": None}[mask_mode]
        out, _ = scaled_dot_product_attention(q, k, v, used, scale=factor)  # (B, H, Lq, head_dim)
    if merge == "reshape":  # no transpose back: one output row mixes several tokens of one head
        out = out.reshape(batch, q_len, hidden)  # (B, Lq, hidden)
    else:
        out = out.transpose(1, 2).reshape(batch, q_len, hidden)  # (B, Lq, hidden)
    return layer.o_proj(out) if out_proj else out  # (B, Lq, hidden)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.to(_F64), b.to(_F64), rtol=1e-6, atol=1e-8)


@never_raises("mha_forward")
def check_mha_forward(mha_forward) -> bool:
    """``mha_forward(x, layer, context=None, mask=None)``: multi-head attention from scratch.

    Uses ``layer.q_proj / k_proj / v_proj / o_proj`` and ``layer.num_heads``; must equal
    ``layer(x, context, mask)[0]`` for self-attention, a causal mask and cross-attention with padding.
    """
    generator = torch.Generator().manual_seed(2)
    batch, q_len, k_len, hidden, heads = 2, 5, 7, 12, 3
    x = torch.randn(batch, q_len, hidden, generator=generator, dtype=_F64)  # (B, Lq, hidden)
    context = torch.randn(batch, k_len, hidden, generator=generator, dtype=_F64)  # (B, Lk, hidden)
    layer = _make_layer(hidden, heads, seed=3)
    cases = (  # (layer, x, context, mask, label)
        (layer, x, None, None, "self-attention, no mask"),
        (layer, x, None, causal_mask(q_len), "self-attention, causal mask (L, L)"),
        (layer, x, context, padding_mask([k_len, 4], k_len), "cross-attention, context padding mask (B, 1, 1, Lk)"),
    )
    return _verdict("mha_forward", mha_forward, _forward_problem, cases)


def _forward_problem(fn, layer, x, context, mask, label) -> str | None:
    batch, q_len, hidden = x.shape
    heads, head_dim = layer.num_heads, layer.head_dim
    k_len = x.shape[1] if context is None else context.shape[1]
    where = f"[{label}]"
    with torch.no_grad():
        expected = _variant(layer, x, context, mask)  # (B, Lq, hidden)
        try:
            got = _as_tensor(_run(fn, x.clone(), layer, context=context, mask=mask), "mha_forward(...)")
        except _Failed as err:
            if str(err) == NOT_DONE or not callable(fn):  # not about this case: say it plainly
                raise
            hint = ""
            if context is not None:
                hint = (
                    f" Hint: queries come from x (Lq={q_len}), keys and values from `context` (Lk={k_len}); "
                    f"the scores and the mask are (B, H, Lq, Lk)."
                )
            return f"{where} {err}{hint}"
    if tuple(got.shape) != tuple(expected.shape):
        if tuple(got.shape) == (batch, heads, q_len, head_dim):
            return f"{where} got (B, H, Lq, head_dim) = {tuple(got.shape)}: merge the heads and apply layer.o_proj."
        if context is not None and tuple(got.shape) == (batch, k_len, hidden):
            return (
                f"{where} got {tuple(got.shape)}: the output has one row per *query* (x), "
                f"Lq={q_len}, not per context token (Lk={k_len})."
            )
        return f"{where} expected shape (B, Lq, hidden) = {tuple(expected.shape)}, got {tuple(got.shape)}."
    if _close(got, expected):
        return None
    with torch.no_grad():
        suspects = [
            (
                _variant(layer, x, context, mask, scale="hidden"),
                "the scores are scaled by 1/√hidden_dim; the scale is per head: 1/√head_dim "
                f"(= 1/√{head_dim}, not 1/√{hidden}).",
            ),
            (_variant(layer, x, context, mask, scale="none"), "the 1/√head_dim scale is missing."),
            (
                _variant(layer, x, context, mask, value="k"),
                "the values come from layer.k_proj; use layer.v_proj "
                "(every shape is right, only a reference catches this).",
            ),
            (_variant(layer, x, context, mask, out_proj=False), "the output projection layer.o_proj is missing."),
            (
                _variant(layer, x, context, mask, split="view"),
                "heads were split with one reshape to (B, H, L, head_dim); "
                "view as (B, L, H, head_dim), then transpose(1, 2).",
            ),
            (
                _variant(layer, x, context, mask, merge="reshape"),
                "heads were merged with one reshape of (B, H, Lq, head_dim) to (B, Lq, hidden), without "
                "transposing back, so one output row mixes different tokens: transpose(1, 2), then reshape.",
            ),
        ]
        if mask is not None:
            suspects += [
                (
                    _variant(layer, x, context, mask, mask_mode="ignored"),
                    "the mask is ignored: blocked positions (False) must get weight 0.",
                ),
                (
                    _variant(layer, x, context, mask, mask_mode="multiply"),
                    "you multiplied the scores by the mask: a blocked score becomes 0, and softmax still gives it "
                    "weight e^0 > 0. Fill blocked scores with -inf instead: scores.masked_fill(~mask, float('-inf')).",
                ),
                (
                    _variant(layer, x, context, mask, mask_mode="zero_after"),
                    "you zeroed the blocked weights after the softmax, so the rows no longer sum to 1. Mask the "
                    "scores before the softmax: scores.masked_fill(~mask, float('-inf')), then softmax.",
                ),
            ]
        if context is not None:
            suspects.append(
                (
                    _variant(layer, x, context, mask, value="self"),
                    "keys and values came from x; in cross-attention they come from `context` (queries from x).",
                )
            )
    for candidate, diagnosis in suspects:
        if _close(got, candidate):
            return f"{where} {diagnosis}"
    if mask is not None and _flipped(layer, x, context, mask, got):
        return (
            f"{where} the mask convention is flipped: in attn_core True = may attend, so fill the scores "
            "where the mask is False (`scores.masked_fill(~mask, -inf)`), not where it is True."
        )
    if torch.isnan(got).any():
        return f"{where} the output contains NaN: did a query row end up with every key masked?"
    difference = (got.to(_F64) - expected).abs().max().item()
    return f"{where} right shape, wrong numbers: largest difference from the reference is {difference:.3g}."


def _flipped(layer, x, context, mask, got) -> bool:
    """Does ``got`` match attention with ``~mask``, on the query rows that still see some key?"""
    batch, q_len, _ = x.shape
    k_len = q_len if context is None else context.shape[1]
    flipped = ~mask
    sees_a_key = flipped.expand(batch, layer.num_heads, q_len, k_len).any(-1).all(1)  # (B, Lq)
    if not sees_a_key.any():
        return False
    with torch.no_grad():
        candidate = _variant(layer, x, context, mask, mask_mode="flipped")  # (B, Lq, hidden)
    return torch.allclose(got.to(_F64)[sees_a_key], candidate[sees_a_key], rtol=1e-6, atol=1e-8)
