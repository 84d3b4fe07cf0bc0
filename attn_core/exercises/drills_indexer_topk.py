"""``check_indexer_topk`` (the interview gym's drills, issue #38): DeepSeek Sparse Attention's top-k selection.

The learner writes ``select(index_scores, k) -> chosen``: ``index_scores`` ``(Lq, Lk)`` from the lightning indexer, the
queries being the *last* ``Lq`` tokens (bottom-right causal, as with a KV cache), and returns a boolean ``(Lq, Lk)``
mask, True = the query reads that key. Each query reads its ``min(k, visible)`` highest-scoring *visible* keys: the
causal mask goes on **before** the top-k, and a query with fewer than ``k`` visible keys reads them all.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attn_core.exercises import call_learner, feedback, never_raises
from attn_core.i18n import _

__all__ = ["check_indexer_topk"]


def _visible(q_len: int, k_len: int) -> torch.Tensor:
    return torch.arange(k_len) <= torch.arange(q_len)[:, None] + (k_len - q_len)  # (Lq, Lk), bottom-right


def _diagonal(q_len: int, k_len: int) -> torch.Tensor:
    return torch.arange(k_len) == torch.arange(q_len)[:, None] + (k_len - q_len)  # (Lq, Lk): each query's own key


def _topk(scores: torch.Tensor, k: int, allowed: torch.Tensor) -> torch.Tensor:
    masked = scores.masked_fill(~allowed, float("-inf"))  # (Lq, Lk)
    index = masked.topk(min(k, scores.shape[-1]), dim=-1).indices  # (Lq, k)
    chosen = torch.zeros_like(allowed).scatter(-1, index, True)
    return chosen & allowed


def _diagnose(chosen: torch.Tensor, scores: torch.Tensor, k: int) -> str | None:
    q_len, k_len = scores.shape
    visible = _visible(q_len, k_len)
    expected = _topk(scores, k, visible)
    if torch.equal(chosen, expected):
        return None
    if (chosen & ~visible).any():
        if torch.equal(chosen, _topk(scores, k, torch.ones_like(visible))):
            return _(
                "you chose the top-k before masking: future keys were selected. Mask (set to -inf) first, then top-k."
            )
        return _("some selected keys are in the future of their query: apply the causal (bottom-right) mask first.")
    top_left = torch.ones(q_len, k_len, dtype=torch.bool).tril()
    if q_len < k_len and torch.equal(chosen, _topk(scores, k, top_left)):
        return _("top-left alignment: the queries are the last Lq tokens, so query i sees keys 0..i + (Lk - Lq).")
    if torch.equal(chosen, _topk(-scores, k, visible)):
        return _("you kept the k *lowest* scores: topk(largest=True), or argsort descending.")
    if torch.equal(chosen, _topk(scores, k, visible & ~_diagonal(q_len, k_len))):
        return _("the diagonal is visible: a query may read its own token (key i + Lk - Lq).")
    counts, want = chosen.sum(-1), expected.sum(-1)
    if (counts > want).any():
        return _("a query reads {got} keys; it reads min(k, visible) = at most {k}.").format(got=int(counts.max()), k=k)
    if (counts < want).any():
        return _("a query reads fewer than min(k, visible) keys: mask before the top-k, not after it.")
    return _("the selected keys are not each query's highest-scoring visible keys.")


@never_raises(_("check_indexer_topk"))
def check_indexer_topk(fn: Callable) -> bool:
    """``fn(index_scores (Lq, Lk), k) -> bool (Lq, Lk)``: each query's top-``min(k, visible)`` visible keys."""
    name = _("check_indexer_topk")
    g = torch.Generator().manual_seed(3)
    for q_len, k_len, k in ((6, 6, 3), (3, 7, 4), (5, 5, 8)):
        scores = torch.randn(q_len, k_len, generator=g, dtype=torch.float64)  # (Lq, Lk)
        result, problem = call_learner(fn, scores.clone(), k)
        if problem:
            return feedback(name, problem)
        try:
            array = result.detach().cpu().numpy() if isinstance(result, torch.Tensor) else np.asarray(result)
            chosen = torch.as_tensor(array)
        except (TypeError, ValueError):
            return feedback(name, _("return a boolean (Lq, Lk) mask, got {type}.").format(type=type(result).__name__))
        if tuple(chosen.shape) == (q_len, min(k, k_len)) != (q_len, k_len):
            return feedback(
                name, _("you returned top-k indices: return a boolean (Lq, Lk) mask, True = the key is read.")
            )
        if tuple(chosen.shape) != (q_len, k_len):
            return feedback(name, _("return a boolean mask of shape (Lq, Lk) = {shape}.").format(shape=(q_len, k_len)))
        if chosen.dtype != torch.bool:
            if not bool(((chosen == 0) | (chosen == 1)).all()):
                return feedback(name, _("return a boolean mask (True = read), not scores or indices."))
            chosen = chosen != 0
        problem = _diagnose(chosen, scores, k)
        if problem:
            return feedback(name, problem)
    return feedback(name, None)
