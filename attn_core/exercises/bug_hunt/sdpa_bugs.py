"""Notebook 14's bugs in an attention function (3-7, 12): the planted code, its fix, the story and the hint.

Data, not code to reuse: each buggy function is what people really write; its probe is in ``probes_sdpa``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attn_core.exercises.bug_hunt.common import Bug, catalogue
from attn_core.exercises.bug_hunt.probes_sdpa import _causal_probe, _dropout_probe, _padded_query_probe, _sdpa_probe

# Every implementation below is plain, readable attention with ONE planted bug, the kind
# people really write. The fixed version follows each one.


# ------------------------------------------------------------------ 3 · flipped mask convention
def flipped_mask_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(mask, -1e9)  # (B, H, Lq, Lk)
    weights = scores.softmax(dim=-1)  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


def flipped_mask_attention_fixed(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)  # (B, H, Lq, Lk)  FIX: True = may attend, block ~mask
    weights = scores.softmax(dim=-1)  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


# ------------------------------------------------------------------ 4 · -inf gives NaN on padded rows
def neg_inf_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # (B, H, Lq, Lk)
    weights = scores.softmax(dim=-1)  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


def neg_inf_attention_fixed(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # (B, H, Lq, Lk)
    weights = scores.softmax(dim=-1)  # (B, H, Lq, Lk)
    if mask is not None:  # FIX: a row with no visible key is all -inf -> NaN; make it zeros
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


# ------------------------------------------------------------------ 5 · softmax over the wrong dim
def wrong_dim_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)
    weights = scores.softmax(dim=-2)  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


def wrong_dim_attention_fixed(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)
    weights = scores.softmax(dim=-1)  # (B, H, Lq, Lk)  FIX: normalise over the keys
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


# ------------------------------------------------------------------ 6 · mask applied after softmax
def mask_after_softmax_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    weights = scores.softmax(dim=-1)  # (B, H, Lq, Lk)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


def mask_after_softmax_attention_fixed(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:  # FIX: mask the scores, then softmax renormalises over the visible keys
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)
    weights = scores.softmax(dim=-1)  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


# ------------------------------------------------------------------ 7 · dropout before softmax
def dropout_attention(q, k, v, dropout_p=0.0):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    scores = F.dropout(scores, p=dropout_p)  # (B, H, Lq, Lk)
    weights = scores.softmax(dim=-1)  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


def dropout_attention_fixed(q, k, v, dropout_p=0.0):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    weights = scores.softmax(dim=-1)  # (B, H, Lq, Lk)
    weights = F.dropout(weights, p=dropout_p)  # (B, H, Lq, Lk)  FIX: drop probabilities, after softmax
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


# ------------------------------------------------------------------ 12 · causal mask top-left in a decode step
def causal_attention(q, k, v):
    Lq, Lk = q.shape[-2], k.shape[-2]  # the queries are the newest Lq of Lk tokens
    causal = torch.ones(Lq, Lk, dtype=torch.bool).tril()  # (Lq, Lk)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)
    weights = scores.softmax(dim=-1)  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


def causal_attention_fixed(q, k, v):
    Lq, Lk = q.shape[-2], k.shape[-2]  # the queries are the newest Lq of Lk tokens
    causal = torch.ones(Lq, Lk, dtype=torch.bool).tril(diagonal=Lk - Lq)  # (Lq, Lk)  FIX: bottom-right
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)  # (B, H, Lq, Lk)
    weights = scores.softmax(dim=-1)  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


SDPA_BUGS = catalogue(
    Bug(
        "flipped_mask",
        "Flipped mask convention",
        "`scores.masked_fill(mask, -1e9)` with a mask that says True = may attend blocks exactly the keys "
        "that should be seen. The conventions really do differ: nn.MultiheadAttention blocks True, "
        "F.scaled_dot_product_attention's boolean attn_mask blocks False. A public instance: "
        "rasbt/LLMs-from-scratch issue #1061, where `torch.triu(...).bool()` (True above the diagonal, the "
        "future) went to F.scaled_dot_product_attention as attn_mask, which lets tokens see the future "
        "instead of the past; the fix is `~attn_mask`.",
        "flipped_mask_attention(q, k, v, mask=None) -> (out, weights); mask True = may attend; "
        "every query in this test sees at least one key",
        flipped_mask_attention,
        flipped_mask_attention_fixed,
        _sdpa_probe,
        "In this series a mask says True = may attend. masked_fill(m, value) writes value where m is True. "
        "Which positions should get -1e9?",
    ),
    Bug(
        "neg_inf_nan",
        "-inf turns padded rows into NaN",
        "`scores.masked_fill(~mask, float('-inf'))` is fine until a query has no visible key at all (a "
        "padding query in a padded batch, or causal attention with more queries than keys): softmax of a "
        "row of -inf is 0/0 = NaN, and the NaN spreads through the next layer and the loss. "
        "nn.MultiheadAttention does the same (pytorch/pytorch issue #41508: NaN gradients once a row is "
        "fully masked).",
        "neg_inf_attention(q, k, v, mask=None) -> (out, weights); mask True = may attend; a query with no "
        "visible key must get finite weights and output (attn_core gives zeros)",
        neg_inf_attention,
        neg_inf_attention_fixed,
        _padded_query_probe,
        "Find the rows where mask.any(-1) is False. Either give them a finite fill (torch.finfo(dtype).min) "
        "or zero their weights after the softmax, as attn_core does.",
    ),
    Bug(
        "softmax_wrong_dim",
        "Softmax over the wrong dimension",
        "softmax(dim=1) or dim=-2 where dim=-1 was meant: legal, same shape, no error. Each key's column "
        "sums to 1 instead of each query's row.",
        "wrong_dim_attention(q, k, v, mask=None) -> (out, weights); mask True = may attend; "
        "every query in this test sees at least one key",
        wrong_dim_attention,
        wrong_dim_attention_fixed,
        _sdpa_probe,
        "The weights of one query over all keys must sum to 1. Along which axis of (B, H, Lq, Lk) are the keys?",
    ),
    Bug(
        "mask_after_softmax",
        "Mask applied after the softmax",
        "Zeroing the blocked weights after the softmax looks equivalent to masking the scores before it. It "
        "is not: the remaining weights are never renormalised, and the future still shaped the denominator.",
        "mask_after_softmax_attention(q, k, v, mask=None) -> (out, weights); mask True = may attend; "
        "every query in this test sees at least one key",
        mask_after_softmax_attention,
        mask_after_softmax_attention_fixed,
        _sdpa_probe,
        "Do the rows of the weights still sum to 1? Block the scores with a very negative number before the "
        "softmax, so the softmax itself renormalises over the visible keys.",
    ),
    Bug(
        "dropout_before_softmax",
        "Dropout before the softmax",
        "Attention dropout drops attention probabilities, after the softmax: the Annotated Transformer's "
        "attention() applies dropout to p_attn, BERT calls it attention_probs_dropout_prob, and "
        "F.scaled_dot_product_attention's dropout_p does the same. (The 2017 Transformer paper itself "
        "describes only residual and embedding dropout.) Dropping scores instead sets them to 0, and "
        "exp(0) = 1: nothing is dropped, rows are just distorted and renormalised.",
        "dropout_attention(q, k, v, dropout_p=0.0) -> (out, weights); dropout always on when dropout_p > 0",
        dropout_attention,
        dropout_attention_fixed,
        _dropout_probe,
        "After dropout, some weights should be exactly 0 and the others softmax/(1-p). Which tensor must "
        "F.dropout see for that to happen?",
    ),
    Bug(
        "causal_top_left",
        "Causal mask aligned top-left in a decode step",
        "torch.ones(Lq, Lk).tril() lets query i see keys 0..i. With a KV cache the Lq queries are the "
        "NEWEST tokens, so the single query of a decode step sees only the first key. Prefill (Lq == Lk) "
        "hides the bug. F.scaled_dot_product_attention(is_causal=True) is top-left too (pytorch/pytorch "
        "issue #108108 discusses changing it; torch.nn.attention.bias.causal_lower_right builds the "
        "bottom-right mask).",
        "causal_attention(q, k, v) -> (out, weights); the queries are the last Lq of Lk tokens",
        causal_attention,
        causal_attention_fixed,
        _causal_probe,
        "Query i is token number i + (Lk - Lq) of the sequence. Which diagonal of tril keeps keys up to and "
        "including that position?",
    ),
)
