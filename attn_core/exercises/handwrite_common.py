"""What notebook 16's hand-write graders share: float64 comparison, shapes in messages, the dropout probe.

``handwrite_sdpa``, ``handwrite_causal_mask``, ``handwrite_layers``, ``handwrite_rope`` and ``handwrite_mla`` import
these; none of them imports another grader (``handwrite`` gathers their ``check_…`` for the notebook).
"""

from __future__ import annotations

import contextlib
import io
import math

import torch
from torch import nn

from attn_core.exercises import call_learner
from attn_core.layers import GroupedQueryAttention

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


_MERGE_FIX = "transpose(1, 2) back to (B, L, H, head_dim), then reshape to (B, L, hidden_dim)"


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
