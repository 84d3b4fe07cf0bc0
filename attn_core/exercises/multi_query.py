"""Checks for notebook 03, multi-query attention.

- ``check_max_cached_tokens(fn)``: how many tokens of K/V cache fit in a memory budget.
- ``check_mqa_num_params(fn)``: the parameter count of an MQA layer, from its four projections.
- ``check_mqa_module(cls)``: a from-scratch ``nn.Module`` graded against ``ac.MultiQueryAttention``
  with copied weights, without and with a broadcast ``(L, L)`` mask.

Each check prints a verdict through :func:`attn_core.exercises.feedback` and returns True/False;
a wrong or unfinished answer never raises.

One piece: the checks of notebook 03's exercises, each next to the reference it grades against and the mistakes it
names.
"""

from __future__ import annotations

import contextlib
import io
import math

import torch
from torch import nn

from attn_core.exercises import NOT_DONE, as_number, call_learner, feedback, is_stub, never_raises
from attn_core.layers import GroupedQueryAttention, MultiQueryAttention
from attn_core.masks import causal_mask

__all__ = ["check_max_cached_tokens", "check_mqa_num_params", "check_mqa_module"]


def _fmt(value: float) -> str:
    """12,345 for whole numbers, 12,345.67 otherwise."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.2f}"


# --------------------------------------------------------------------------- exercise 1


def _cached_tokens(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element) -> int:
    per_token = 2 * num_layers * num_kv_heads * head_dim * bytes_per_element  # K and V, every layer
    return free_bytes // per_token


_TOKEN_FACTORS = ("num_layers", "num_kv_heads", "head_dim", "bytes_per_element")


@never_raises("max_cached_tokens")
def check_max_cached_tokens(fn) -> bool:
    """``fn(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element)`` -> the
    number of whole tokens (summed over the batch) whose keys and values fit in ``free_bytes``."""
    name = "max_cached_tokens"
    # Powers of two, so every factor divides the budget exactly. Each factor has its own value
    # (K and V: 2, bytes: 4, kv heads: 8, layers: 16, head_dim: 64), so a forgotten factor makes
    # the answer too large by a ratio that names it.
    base = dict(free_bytes=2**30, num_layers=16, num_heads=32, num_kv_heads=8, head_dim=64, bytes_per_element=4)
    expected = _cached_tokens(**base)
    got, problem = call_learner(fn, **base)
    if problem:
        return feedback(name, problem)
    value = as_number(got)
    if value is None:
        return feedback(name, f"return a number of tokens (an int), got {type(got).__name__}.")
    if value != expected:
        other, problem = call_learner(fn, **{**base, "num_heads": 2 * base["num_heads"]})
        if problem:
            return feedback(name, problem)
        if as_number(other) != value:
            return feedback(
                name,
                "your answer changes with num_heads. Only keys and values are cached, one pair per "
                "*kv* head; query heads are computed fresh for the new token and never stored. "
                "Use num_kv_heads.",
            )
        for factor in _TOKEN_FACTORS:  # a parameter left out: doubling it changes nothing
            doubled, problem = call_learner(fn, **{**base, factor: 2 * base[factor]})
            if problem:
                return feedback(name, problem)
            if as_number(doubled) == value:
                return feedback(
                    name, f"doubling {factor} should halve the number of tokens that fit, but your answer ignores it."
                )
        if value == 2 * expected:
            return feedback(
                name,
                f"you get {_fmt(value)} tokens, twice the right number: each token stores a key AND a value "
                "vector per kv head per layer (the factor 2).",
            )
        return feedback(
            name,
            f"for {base} you return {_fmt(value)}, expected {expected:,}. Bytes per token = "
            "2 · layers · kv_heads · head_dim · bytes_per_element; divide the budget by it.",
        )
    # A budget that does not divide evenly, with a remainder above half a token: a partial token
    # is useless, so the answer rounds down, and round() or ceil() would give one token more.
    per_token = 2 * 3 * 2 * 5 * 2  # 120 bytes: K and V, 3 layers, 2 kv heads, head_dim 5, 2 bytes
    uneven = dict(
        free_bytes=8333 * per_token + 100, num_layers=3, num_heads=8, num_kv_heads=2, head_dim=5, bytes_per_element=2
    )
    expected = _cached_tokens(**uneven)  # 8333: 8333.83 tokens fit
    got, problem = call_learner(fn, **uneven)
    if problem:
        return feedback(name, problem)
    value = as_number(got)
    if value is None or value != expected:
        if value is not None and not float(value).is_integer():
            return feedback(
                name,
                f"for {uneven} you return {_fmt(value)}; a token's K/V is stored whole or not at all: "
                f"round down with // (expected {expected:,}).",
            )
        if value == expected + 1:
            return feedback(
                name,
                f"for {uneven} you return {_fmt(value)}, one token too many: {uneven['free_bytes']:,} bytes hold "
                f"{uneven['free_bytes'] / per_token:.2f} tokens' K/V, and a partial token cannot be stored. "
                "round() and ceil() round up here; "
                f"round down with // (expected {expected:,}).",
            )
        return feedback(name, f"for {uneven} you return {got!r}, expected {expected:,} (round down with //).")
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 2


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _mqa_count_variants(hidden_dim: int, num_heads: int) -> dict[str, int]:
    head_dim = hidden_dim // num_heads
    square, thin = hidden_dim * hidden_dim, hidden_dim * head_dim
    return {
        "mha": 4 * (square + hidden_dim),
        "no_bias": 2 * square + 2 * thin,
        "no_o_proj": square + hidden_dim + 2 * (thin + head_dim),
        "one_kv_proj": 2 * (square + hidden_dim) + thin + head_dim,
        "hidden_biases": 2 * (square + hidden_dim) + 2 * (thin + hidden_dim),
    }


@never_raises("mqa_num_params")
def check_mqa_num_params(fn) -> bool:
    """``fn(hidden_dim, num_heads)`` -> parameters (weights and biases) of one MQA layer."""
    name = "mqa_num_params"
    for hidden_dim, num_heads in ((1024, 16), (512, 8), (96, 3), (64, 64)):
        with torch.device("meta"):  # shapes only: no memory, no random init cost
            expected = _count(MultiQueryAttention(hidden_dim, num_heads))
        got, problem = call_learner(fn, hidden_dim, num_heads)
        if problem:
            return feedback(name, problem)
        value = as_number(got)
        if value is None:
            return feedback(name, f"return a number (an int), got {type(got).__name__}.")
        if value == expected:
            continue
        variants = _mqa_count_variants(hidden_dim, num_heads)
        where = f"hidden_dim={hidden_dim}, num_heads={num_heads}: you return {_fmt(value)}, expected {expected:,}"
        hints = {
            "mha": "that is the multi-head count: in MQA k_proj and v_proj map hidden -> head_dim, "
            "not hidden -> hidden",
            "no_bias": "you left out the biases (each nn.Linear(in, out) has in·out weights + out biases)",
            "no_o_proj": "you left out o_proj (hidden -> hidden), which MQA keeps as in MHA",
            "one_kv_proj": "K and V share the head, not the projection: k_proj and v_proj are two separate "
            "hidden -> head_dim layers",
            "hidden_biases": "the biases of k_proj and v_proj have head_dim entries (their output size), "
            "not hidden_dim",
        }
        for key, hint in hints.items():
            if value == variants[key]:
                return feedback(name, f"{where}; {hint}.")
        return feedback(name, f"{where}. Count q_proj, k_proj, v_proj, o_proj: each Linear(in, out) has in·out + out.")
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 3


def _reference_variant(
    ref: GroupedQueryAttention,
    x: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    value_proj: str = "v_proj",
    transpose_heads: bool = True,
    use_o_proj: bool = True,
    softmax_dim: int = -1,
    flip_mask: bool = False,
    fill_value: float | None = None,
) -> torch.Tensor:
    """MQA forward with one knob turned: the wrong answers a learner typically writes."""
    batch, length, hidden = x.shape
    heads, head_dim = ref.num_heads, ref.head_dim
    q = ref.q_proj(x).view(batch, length, heads, head_dim).transpose(1, 2)  # (B, H, L, d)
    k = ref.k_proj(x).unsqueeze(1)  # (B, 1, L, d)
    v = getattr(ref, value_proj)(x).unsqueeze(1)  # (B, 1, L, d)
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(head_dim) if scale is None else scale)  # (B, H, L, L)
    if mask is not None:
        blocked = mask if flip_mask else ~mask
        value = torch.finfo(scores.dtype).min if fill_value is None else fill_value
        scores = scores.masked_fill(blocked, value)  # (B, H, L, L)
    weights = scores.softmax(dim=softmax_dim)  # (B, H, L, L)
    out = weights @ v  # (B, H, L, d)
    out = out.transpose(1, 2).reshape(batch, length, hidden) if transpose_heads else out.reshape(batch, length, hidden)
    return ref.o_proj(out) if use_o_proj else out  # (B, L, hidden)


def _run_forward(layer: nn.Module, *args, **kwargs):
    """``(output, printed_text, problem)`` of one forward call."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), torch.no_grad():
        result, problem = call_learner(layer, *args, **kwargs)
    if problem is None:
        if isinstance(result, tuple) and result:
            result = result[0]  # (output, weights) is fine too
        if is_stub(result):
            problem = NOT_DONE
        elif not isinstance(result, torch.Tensor):
            problem = f"forward should return the output tensor, got {type(result).__name__}."
    elif problem.startswith("your function raised RuntimeError") and any(
        w in problem for w in ("view", "shape", "size")
    ):
        problem += (
            ". Hint: k_proj(x) is (B, L, head_dim), a single head: give it a head axis with .unsqueeze(1) "
            "instead of splitting it into num_heads heads."
        )
    return result, printed.getvalue(), problem


@never_raises("mqa_module")
def check_mqa_module(cls) -> bool:
    """``cls(hidden_dim, num_heads)``: an nn.Module with q_proj/k_proj/v_proj/o_proj and
    ``forward(x, mask=None) -> (B, L, hidden_dim)``, equal to ``ac.MultiQueryAttention``."""
    name = "mqa_module"
    if is_stub(cls):
        return feedback(name, NOT_DONE)
    hidden_dim, num_heads, batch, length = 16, 4, 2, 5
    head_dim = hidden_dim // num_heads
    try:
        with torch.random.fork_rng():  # building the layer draws random init: leave the learner's stream alone
            layer = cls(hidden_dim, num_heads)
    except NotImplementedError:
        return feedback(name, NOT_DONE)
    except Exception as err:
        if not callable(cls):
            return feedback(name, f"pass the class itself (its name, no parentheses), got {type(cls).__name__}.")
        label = getattr(cls, "__name__", type(cls).__name__)
        return feedback(name, f"{label}({hidden_dim}, {num_heads}) raised {type(err).__name__}: {err}")
    if not isinstance(layer, nn.Module):
        return feedback(name, f"the class should subclass nn.Module, got an instance of {type(layer).__name__}.")

    expected_shapes = {
        "q_proj": (hidden_dim, hidden_dim),
        "k_proj": (hidden_dim, head_dim),
        "v_proj": (hidden_dim, head_dim),
        "o_proj": (hidden_dim, hidden_dim),
    }
    for proj, (fan_in, fan_out) in expected_shapes.items():
        linear = getattr(layer, proj, None)
        if not isinstance(linear, nn.Linear):
            return feedback(name, f"self.{proj} should be an nn.Linear (named exactly so the weights can be copied).")
        if (linear.in_features, linear.out_features) != (fan_in, fan_out):
            got = f"{linear.in_features} -> {linear.out_features}"
            if proj in ("k_proj", "v_proj") and linear.out_features == hidden_dim:
                return feedback(
                    name,
                    f"{proj} maps hidden -> hidden ({got}): that is one {proj[0].upper()} head per query head, "
                    f"i.e. multi-head attention. MQA has ONE shared head: hidden -> head_dim "
                    f"({fan_in} -> {fan_out}).",
                )
            return feedback(name, f"{proj} maps {got}, expected {fan_in} -> {fan_out}.")
        if linear.bias is None:
            return feedback(name, f"{proj} has no bias; keep nn.Linear's default bias=True to match attn_core.")

    with torch.random.fork_rng():  # leave the learner's random stream untouched
        torch.manual_seed(0)
        ref = MultiQueryAttention(hidden_dim, num_heads).double().eval()
        x = torch.randn(batch, length, hidden_dim, dtype=torch.float64)  # (B, L, hidden)
    try:
        layer.load_state_dict(ref.state_dict())
    except Exception as err:
        first = str(err).strip().splitlines()[0]
        return feedback(
            name, f"copying ac.MultiQueryAttention's weights failed ({first}); keep only q_proj/k_proj/v_proj/o_proj."
        )
    layer = layer.double().eval()

    with torch.no_grad():
        expected, _ = ref(x)  # (B, L, hidden)
    got, printed, problem = _run_forward(layer, x)
    if problem:
        return feedback(name, problem)
    if tuple(got.shape) != tuple(expected.shape):
        return feedback(
            name, f"output shape {tuple(got.shape)}, expected {tuple(expected.shape)} = (batch, seq_len, hidden_dim)."
        )
    got = got.detach().to(torch.float64)
    if not torch.allclose(got, expected, atol=1e-6, rtol=1e-5):
        if torch.isnan(got).any():
            return feedback(name, "the output (no mask given) contains NaN.")
        wrong = {
            "you did not scale the scores: multiply Q Kᵀ by 1/√head_dim": dict(scale=1.0),
            "the scale is per head: 1/√head_dim, not 1/√hidden_dim": dict(scale=1 / math.sqrt(hidden_dim)),
            "the values use k_proj: v must come from v_proj (a shapes-only test would not catch this)": dict(
                value_proj="k_proj"
            ),
            "the heads are merged in the wrong order: transpose (B, H, L, d) -> (B, L, H, d) before reshaping "
            "to (B, L, hidden)": dict(transpose_heads=False),
            "the output projection o_proj is missing": dict(use_o_proj=False),
            "softmax runs over the wrong axis: normalise over the keys, dim=-1": dict(softmax_dim=-2),
        }
        with torch.no_grad():
            for hint, knobs in wrong.items():
                variant = _reference_variant(ref, x, **knobs)
                if torch.allclose(got, variant, atol=1e-6, rtol=1e-5):
                    return feedback(name, f"wrong numbers: {hint}.")
        diff = (got - expected).abs().max().item()
        return feedback(
            name, f"wrong numbers (largest difference {diff:.3g}) against ac.MultiQueryAttention with the same weights."
        )

    mask = causal_mask(length)  # (L, L): must broadcast over batch and heads
    with torch.no_grad():
        expected, _ = ref(x, mask=mask)  # (B, L, hidden)
    got_masked, printed_masked, problem = _run_forward(layer, x, mask=mask)
    if problem:
        if "unexpected keyword" in problem:
            return feedback(name, f"{problem} Give forward a `mask=None` argument (boolean, True = may attend).")
        return feedback(name, f"with a ({length}, {length}) causal mask: {problem}")
    got_masked = got_masked.detach().to(torch.float64)
    if tuple(got_masked.shape) != tuple(expected.shape):
        return feedback(name, f"with a mask, output shape {tuple(got_masked.shape)}, expected {tuple(expected.shape)}.")
    if not torch.allclose(got_masked, expected, atol=1e-6, rtol=1e-5):
        with torch.no_grad():
            flipped = [_reference_variant(ref, x, mask, flip_mask=True, fill_value=v) for v in (float("-inf"), None)]
            ignored, _ = ref(x)
        if any(torch.allclose(got_masked, f, atol=1e-6, rtol=1e-5, equal_nan=True) for f in flipped):
            return feedback(
                name,
                "the mask convention is flipped: True means *may attend*, so fill the scores where the mask "
                "is False (masked_fill(~mask, ...)).",
            )
        if torch.allclose(got_masked, ignored, atol=1e-6, rtol=1e-5):
            return feedback(name, "the mask is ignored: the output with a causal mask equals the unmasked one.")
        if torch.isnan(got_masked).any():
            return feedback(name, "the masked output contains NaN: is the convention flipped (True = may attend)?")
        diff = (got_masked - expected).abs().max().item()
        return feedback(name, f"with a causal mask the numbers differ (largest difference {diff:.3g}).")

    if printed or printed_masked:
        lines = len((printed + printed_masked).splitlines())
        return feedback(
            name,
            f"the numbers are right, but forward printed {lines} line(s). Debug prints in forward run on every "
            "call (every decoding step): remove them, return what you want to inspect.",
        )
    return feedback(name, None)
