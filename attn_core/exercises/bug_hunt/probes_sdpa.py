"""Probes for the bugs of an attention function ``attention(q, k, v, mask=None)`` (notebook 14: bugs 3-7, 12).

A probe runs an implementation against ``attn_core`` and returns a specific problem, or None when it behaves like
the reference.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attn_core.attention import scaled_dot_product_attention
from attn_core.exercises import NOT_DONE, call_learner
from attn_core.exercises.bug_hunt.common import _close, _qkv, _unpack
from attn_core.masks import causal_mask, padding_mask


def _nan_problem(out: torch.Tensor, weights: torch.Tensor) -> str | None:
    """A NaN/inf anywhere in ``out`` or in ``weights`` (any finite value is fine for a row with no visible key)."""
    bad_out = ~torch.isfinite(out).all(dim=-1)  # (..., Lq): rows of the output with a NaN/inf
    if bad_out.any():
        where = bad_out.nonzero()[0].tolist()
        return (
            f"{int(bad_out.sum())} output rows contain NaN/inf (the first at batch, head, query = {where}). "
            "Those are the padded queries whose every key is masked: softmax over a row that is all -inf "
            "computes 0/0."
        )
    bad_weights = ~torch.isfinite(weights).all(dim=-1)  # (..., Lq): rows of the weights with a NaN/inf
    if bad_weights.any():
        where = bad_weights.nonzero()[0].tolist()
        return (
            f"out is finite, but {int(bad_weights.sum())} rows of the weights you return contain NaN/inf (the "
            f"first at batch, head, query = {where}): the padded queries whose every key is masked, where "
            "softmax over a row of -inf computes 0/0. Cleaning the output (nan_to_num, or taking it from "
            "another kernel) leaves the weights you return broken: avoid the 0/0 itself and give those rows "
            "finite weights (zeros, as attn_core does)."
        )
    return None


def _weights_diagnosis(weights: torch.Tensor, want: torch.Tensor, mask: torch.Tensor | None, q, k) -> str:
    """Name the usual mistake behind weights that differ from the reference ``want``."""
    row_sums, col_sums = weights.sum(-1), weights.sum(-2)  # (..., Lq), (..., Lk)
    if mask is not None:
        blocked = ~mask.expand(weights.shape)  # (..., Lq, Lk)
        allowed_rows = mask.expand(weights.shape).any(-1)  # (..., Lq)
        if (weights[blocked].abs() > 1e-6).any():
            flipped = scaled_dot_product_attention(q, k, k, ~mask)[1]  # (..., Lq, Lk) with the mask inverted
            both = (allowed_rows & (~mask).expand(weights.shape).any(-1)).unsqueeze(-1).expand(weights.shape)
            if _close(weights[both], flipped[both]) or (weights[~blocked].abs() < 1e-6).all():
                return (
                    "your weights are zero exactly where the mask is True and non-zero where it is False: "
                    "the mask convention is flipped. Here True = may attend."
                )
            return "some weights on blocked keys (mask False) are not zero: the mask leaks."
        if not torch.allclose(row_sums[allowed_rows], torch.ones_like(row_sums[allowed_rows]), atol=1e-6):
            return (
                f"the blocked weights are zero, but the rows no longer sum to 1 (query 0 of head 0 sums to "
                f"{row_sums.flatten()[0].item():.3f}): zeroing after softmax removes probability mass instead "
                "of renormalising over the visible keys."
            )
    if not torch.allclose(row_sums, torch.ones_like(row_sums), atol=1e-6):
        if torch.allclose(col_sums, torch.ones_like(col_sums), atol=1e-6):
            return (
                "each row of your weights should sum to 1 over the keys, but yours sum to 1 down each "
                "column: the softmax normalised over the queries."
            )
        return f"the rows of your weights do not sum to 1 (the first sums to {row_sums.flatten()[0].item():.3f})."
    scores = q @ k.transpose(-2, -1)  # (..., Lq, Lk) unscaled
    for label, scale in (("no scale at all", 1.0), ("1/d instead of 1/sqrt(d)", 1 / q.shape[-1])):
        guess = (scores * scale).softmax(-1)  # (..., Lq, Lk)
        if mask is None and _close(weights, guess):
            return f"your weights use {label}; the scale is 1/sqrt(head_dim)."
    return "the weights differ from the reference softmax(q kᵀ / sqrt(d)) (masked)."


def _sdpa_problem(impl: Callable, args: tuple, want: tuple, mask: torch.Tensor | None, where: str) -> str | None:
    """Run ``impl(*args)`` and compare ``(out, weights)`` with the reference ``want``."""
    result, error = call_learner(impl, *args)
    if error:
        return error if error == NOT_DONE else f"{where}: {error}"
    want_out, want_weights = want
    out, weights, problem = _unpack(result, tuple(want_out.shape), tuple(want_weights.shape))
    if problem:
        return f"{where}: {problem}"
    problem = _nan_problem(out, weights)
    if problem:
        return f"{where}: {problem}"
    if mask is not None:  # a query with no visible key: any finite answer is fine (attn_core gives zeros)
        live = mask.expand(want_weights.shape).any(-1)  # (..., Lq)
    else:
        live = torch.ones(want_weights.shape[:-1], dtype=torch.bool)  # (..., Lq)
    if not _close(weights[live], want_weights[live]):
        q, k = args[0], args[1]
        return f"{where}: {_weights_diagnosis(weights, want_weights, mask, q, k)}"
    if not _close(out[live], want_out[live]):
        return f"{where}: the weights are right but out is not weights @ v."
    return None


def _sdpa_cases(with_fully_masked_rows: bool) -> list[tuple[str, torch.Tensor | None]]:
    """(what, mask) pairs for the kernel probes; masks True = may attend, broadcast to (B, H, L, L)."""
    lengths = [5, 3]
    pad_keys = padding_mask(lengths)  # (B, 1, 1, L)
    pad_queries = padding_mask(lengths).transpose(-2, -1)  # (B, 1, L, 1)
    cases = [
        ("without a mask", None),
        ("with a causal mask (L, L)", causal_mask(5)),
        ("with padding, lengths [5, 3], mask (B, 1, 1, L)", pad_keys),
    ]
    if with_fully_masked_rows:  # only bug 4 is about them: a -inf fix of another bug must not fail here
        cases.append(("with padded queries AND keys (rows of a padded query are fully masked)", pad_keys & pad_queries))
    return cases


def _sdpa_probe(impl: Callable, *, with_fully_masked_rows: bool = False) -> str | None:
    """``attention(q, k, v, mask=None)`` against ``ac.scaled_dot_product_attention``.

    Without ``with_fully_masked_rows`` every query sees at least one key, so a correct fix that
    fills with ``-inf`` (NaN only on rows with no visible key, bug 4) passes.
    """
    q, k, v = _qkv(2, 2, 5, 5, 4, seed=1)  # (B, H, L, D)
    for where, mask in _sdpa_cases(with_fully_masked_rows):
        want = scaled_dot_product_attention(q, k, v, mask)  # (B, H, L, D), (B, H, L, L)
        problem = _sdpa_problem(impl, (q, k, v, mask), want, mask, where)
        if problem:
            return problem
    return None


def _padded_query_probe(impl: Callable) -> str | None:
    """Bug 4: the kernel probe plus a padded batch whose padded queries see no key at all."""
    return _sdpa_probe(impl, with_fully_masked_rows=True)


def _dropout_probe(impl: Callable) -> str | None:
    """``attention(q, k, v, dropout_p)``: inverted dropout on the softmax weights, never flaky.

    Whatever the random draw, a correct implementation gives weights that are either exactly
    0 (dropped) or ``softmax / (1 - p)`` (kept), and some are dropped at p = 0.5 among 200.
    """
    q, k, v = _qkv(2, 2, 10, 10, 4, seed=2)  # (B, H, L, D)
    want_out, want_weights = scaled_dot_product_attention(q, k, v)  # no dropout
    problem = _sdpa_problem(impl, (q, k, v, 0.0), (want_out, want_weights), None, "with dropout_p=0")
    if problem:
        return problem
    p = 0.5
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        result, error = call_learner(impl, q, k, v, p)
    where = f"with dropout_p={p}"
    if error:
        return f"{where}: {error}"
    out, weights, problem = _unpack(result, tuple(want_out.shape), tuple(want_weights.shape))
    if problem:
        return f"{where}: {problem}"
    dropped = weights == 0  # (B, H, L, L)
    if not dropped.any():
        if weights.sum(-1).sub(1).abs().max() < 1e-6:
            return (
                f"{where} not one weight is exactly 0 and every row still sums to 1: the dropout zeroed "
                "scores before the softmax (exp(0) = 1 is not 0), so whole rows are renormalised instead of "
                "individual probabilities being dropped."
            )
        return f"{where} not one weight is exactly 0: the dropout must zero attention weights."
    kept = want_weights / (1 - p)  # (B, H, L, L)
    if not _close(weights[~dropped], kept[~dropped]):
        return (
            f"{where} the weights that survive are not softmax / (1 - p): apply dropout to the softmax "
            "output (inverted dropout scales the kept ones by 1/(1-p))."
        )
    if not _close(out, weights @ v):
        return f"{where} out is not weights @ v: use the dropped weights for the output."
    return None


def _causal_probe(impl: Callable) -> str | None:
    """``causal_attention(q, k, v)``: the queries are the newest Lq of Lk tokens (bottom-right)."""
    for where, q_len, k_len in (
        ("prefill (4 queries, 4 keys)", 4, 4),
        ("a decode step (1 new query, 5 cached keys)", 1, 5),
        ("a chunk of 2 new queries after 3 cached tokens (5 keys)", 2, 5),
    ):
        q, k, v = _qkv(1, 2, q_len, k_len, 4, seed=3)  # (B, H, Lq/Lk, D)
        want = scaled_dot_product_attention(q, k, v, is_causal=True)  # bottom-right aligned
        result, error = call_learner(impl, q, k, v)
        if error:
            return error if error == NOT_DONE else f"in {where}: {error}"
        out, weights, problem = _unpack(result, tuple(want[0].shape), tuple(want[1].shape))
        if problem:
            return f"in {where}: {problem}"
        if not _close(weights, want[1]):
            seen = (weights[0, 0, -1] > 1e-9).nonzero().flatten().tolist()
            return (
                f"in {where} your newest query attends to keys {seen}, but it must see all {k_len} keys "
                "(itself and everything before it): the causal mask is aligned top-left."
            )
        if not _close(out, want[0]):
            return f"in {where}: the weights are right but out is not weights @ v."
    return None
