"""Notebook 14 (bug hunt): attention implementations with one planted bug each.

The catalogue :data:`BUGS` maps a bug id to a :class:`Bug`: the story (where the bug comes
from), the buggy implementation, a hint, the reference fix, and a ``probe`` that runs an
implementation against ``attn_core`` and returns a specific problem (or ``None`` when it
behaves like the reference). The learner calls :func:`check_bug` on their fix and
:func:`check_all` (or :func:`bug_report`) for the scoreboard. Nothing here raises on a
wrong answer: a crash in the learner's code becomes a readable problem.

Two interfaces, one per kind of bug:

* ``sdpa``: a function ``attention(q, k, v, mask=None)`` with q/k/v ``(B, H, L, D)`` and a
  boolean ``mask`` (True = may attend) that broadcasts to ``(B, H, Lq, Lk)``; it returns
  ``(out (B, H, Lq, D), weights (B, H, Lq, Lk))``. A few bugs change the arguments
  (``dropout_p``, no mask, ...); their ``signature`` says how. Only bug 4's probe has queries
  with no visible key (fully masked rows), so a correct fix of another bug written with a
  ``-inf`` fill passes; bug 4's probe accepts any finite weights and output on such rows.
* ``layer``: a module ``Layer(hidden_dim, num_heads[, num_kv_heads][, dropout=0.0])`` with
  ``q_proj/k_proj/v_proj/o_proj`` laid out as in ``ac.GroupedQueryAttention`` and
  ``forward(x, mask=None) -> (out (B, L, hidden), weights (B, H, L, L))``, where ``mask`` is
  one boolean mask per sequence, ``(B, L, L)`` or ``(L, L)``, shared by every head.
* RoPE (bugs 13-15): a layer ``Layer(hidden_dim, num_heads, rope_base=10000.0)`` with
  ``forward(x, cache=None)``, causal, q and k rotated by ``apply_rope``; graded like notebook 16's
  ``check_rope_mha`` (a full pass, then prefill + decode steps through an ``ac.KVCache``); and a
  function ``rotary(x, positions, base=10000.0)`` graded against ``ac.apply_rope``.
* MLA (bugs 16-18): a layer ``Layer(hidden_dim, num_heads, *, kv_lora_rank, qk_nope_head_dim,
  qk_rope_head_dim, v_head_dim, rope_base=10000.0)`` with DeepSeek's parameter names and
  ``forward(x, cache=None)``, causal; graded like notebook 16's ``check_mla`` against
  ``ac.MultiHeadLatentAttention`` (the cache must hold the latent and the shared rotated key).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attn_core.attention import scaled_dot_product_attention
from attn_core.exercises import NOT_DONE, call_learner, feedback, is_stub
from attn_core.exercises.handwrite_mla import _CONFIGS as _MLA_CONFIGS
from attn_core.exercises.handwrite_mla import _config_problem as _mla_config_problem
from attn_core.exercises.handwrite_rope import _CONFIGS as _ROPE_CONFIGS
from attn_core.exercises.handwrite_rope import _config_problem as _rope_config_problem
from attn_core.i18n import localize
from attn_core.layers import GroupedQueryAttention
from attn_core.masks import causal_mask, padding_mask
from attn_core.positions.rope import apply_rope

__all__ = ["Bug", "BUGS", "check_bug", "bug_report", "check_all", "show_bug"]

DTYPE = torch.float64  # probes compare in float64: a real bug is off by far more than 1e-12
ATOL, RTOL = 1e-8, 1e-6

# =============================================================================== buggy code
# Every implementation below is plain, readable attention with ONE planted bug, the kind
# people really write. The fixed version follows each one.


class HeadsBase(nn.Module):
    """The projections of multi-head attention, laid out as in ``ac.MultiHeadAttention`` (no bug here)."""

    def __init__(self, hidden_dim, num_heads, dropout=0.0):
        super().__init__()
        self.hidden_dim, self.num_heads, self.dropout = hidden_dim, num_heads, dropout
        self.head_dim = hidden_dim // num_heads
        self.q_proj = nn.Linear(hidden_dim, hidden_dim)
        self.k_proj = nn.Linear(hidden_dim, hidden_dim)
        self.v_proj = nn.Linear(hidden_dim, hidden_dim)
        self.o_proj = nn.Linear(hidden_dim, hidden_dim)

    def split_heads(self, t):
        B, L, _ = t.shape  # t (B, L, hidden)
        return t.view(B, L, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, d)


# ------------------------------------------------------------------ 1 · scale by the model dim
class ScaleAttention(HeadsBase):
    def forward(self, x, mask=None):
        B, L, _ = x.shape  # x (B, L, hidden); mask (B, L, L) or (L, L), True = may attend
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.v_proj(x))  # (B, H, L, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.hidden_dim)  # (B, H, L, L)
        if mask is not None:
            scores = scores.masked_fill(~mask.unsqueeze(-3), torch.finfo(scores.dtype).min)  # (B, H, L, L)
        weights = scores.softmax(dim=-1)  # (B, H, L, L)
        out = (weights @ v).transpose(1, 2).reshape(B, L, self.hidden_dim)  # (B, L, hidden)
        return self.o_proj(out), weights


class ScaleAttentionFixed(HeadsBase):
    def forward(self, x, mask=None):
        B, L, _ = x.shape  # x (B, L, hidden); mask (B, L, L) or (L, L), True = may attend
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.v_proj(x))  # (B, H, L, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, L)  FIX: per-head dim
        if mask is not None:
            scores = scores.masked_fill(~mask.unsqueeze(-3), torch.finfo(scores.dtype).min)  # (B, H, L, L)
        weights = scores.softmax(dim=-1)  # (B, H, L, L)
        out = (weights @ v).transpose(1, 2).reshape(B, L, self.hidden_dim)  # (B, L, hidden)
        return self.o_proj(out), weights


# ------------------------------------------------------------------ 2 · V from the key projection
class ValueAttention(HeadsBase):
    def forward(self, x, mask=None):
        B, L, _ = x.shape  # x (B, L, hidden); mask (B, L, L) or (L, L), True = may attend
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, L)
        if mask is not None:
            scores = scores.masked_fill(~mask.unsqueeze(-3), torch.finfo(scores.dtype).min)  # (B, H, L, L)
        weights = scores.softmax(dim=-1)  # (B, H, L, L)
        out = (weights @ v).transpose(1, 2).reshape(B, L, self.hidden_dim)  # (B, L, hidden)
        return self.o_proj(out), weights


class ValueAttentionFixed(HeadsBase):
    def forward(self, x, mask=None):
        B, L, _ = x.shape  # x (B, L, hidden); mask (B, L, L) or (L, L), True = may attend
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.v_proj(x))  # (B, H, L, d)  FIX: v_proj, not k_proj
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, L)
        if mask is not None:
            scores = scores.masked_fill(~mask.unsqueeze(-3), torch.finfo(scores.dtype).min)  # (B, H, L, L)
        weights = scores.softmax(dim=-1)  # (B, H, L, L)
        out = (weights @ v).transpose(1, 2).reshape(B, L, self.hidden_dim)  # (B, L, hidden)
        return self.o_proj(out), weights


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


# ------------------------------------------------------------------ 8 · dropout still active in eval
class DropoutAttention(HeadsBase):
    def forward(self, x, mask=None):
        B, L, _ = x.shape  # x (B, L, hidden); mask (B, L, L) or (L, L), True = may attend
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.v_proj(x))  # (B, H, L, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, L)
        if mask is not None:
            scores = scores.masked_fill(~mask.unsqueeze(-3), torch.finfo(scores.dtype).min)  # (B, H, L, L)
        weights = F.dropout(scores.softmax(dim=-1), p=self.dropout)  # (B, H, L, L)
        out = (weights @ v).transpose(1, 2).reshape(B, L, self.hidden_dim)  # (B, L, hidden)
        return self.o_proj(out), weights


class DropoutAttentionFixed(HeadsBase):
    def forward(self, x, mask=None):
        B, L, _ = x.shape  # x (B, L, hidden); mask (B, L, L) or (L, L), True = may attend
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.v_proj(x))  # (B, H, L, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, L)
        if mask is not None:
            scores = scores.masked_fill(~mask.unsqueeze(-3), torch.finfo(scores.dtype).min)  # (B, H, L, L)
        # FIX: F.dropout defaults to training=True; follow the module's train()/eval() switch
        weights = F.dropout(scores.softmax(dim=-1), p=self.dropout, training=self.training)  # (B, H, L, L)
        out = (weights @ v).transpose(1, 2).reshape(B, L, self.hidden_dim)  # (B, L, hidden)
        return self.o_proj(out), weights


# ------------------------------------------------------------------ 9 · view without contiguous
class ViewAttention(HeadsBase):
    def forward(self, x, mask=None):
        B, L, _ = x.shape  # x (B, L, hidden); mask (B, L, L) or (L, L), True = may attend
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.v_proj(x))  # (B, H, L, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, L)
        if mask is not None:
            scores = scores.masked_fill(~mask.unsqueeze(-3), torch.finfo(scores.dtype).min)  # (B, H, L, L)
        weights = scores.softmax(dim=-1)  # (B, H, L, L)
        out = (weights @ v).transpose(1, 2).view(B, L, self.hidden_dim)  # (B, L, hidden)
        return self.o_proj(out), weights


class ViewAttentionFixed(HeadsBase):
    def forward(self, x, mask=None):
        B, L, _ = x.shape  # x (B, L, hidden); mask (B, L, L) or (L, L), True = may attend
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.v_proj(x))  # (B, H, L, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, L)
        if mask is not None:
            scores = scores.masked_fill(~mask.unsqueeze(-3), torch.finfo(scores.dtype).min)  # (B, H, L, L)
        weights = scores.softmax(dim=-1)  # (B, H, L, L)
        out = (weights @ v).transpose(1, 2).reshape(B, L, self.hidden_dim)  # (B, L, hidden)  FIX: reshape
        return self.o_proj(out), weights


# ------------------------------------------------------------------ 10 · repeat instead of repeat_interleave
class GroupedAttention(nn.Module):
    def __init__(self, hidden_dim, num_heads, num_kv_heads):
        super().__init__()
        self.hidden_dim, self.num_heads, self.num_kv_heads = hidden_dim, num_heads, num_kv_heads
        self.head_dim = hidden_dim // num_heads
        self.q_proj = nn.Linear(hidden_dim, num_heads * self.head_dim)
        self.k_proj = nn.Linear(hidden_dim, num_kv_heads * self.head_dim)
        self.v_proj = nn.Linear(hidden_dim, num_kv_heads * self.head_dim)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_dim)

    def forward(self, x, mask=None):
        B, L, _ = x.shape  # x (B, L, hidden)
        group = self.num_heads // self.num_kv_heads
        q = self.q_proj(x).view(B, L, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, d)
        k = self.k_proj(x).view(B, L, self.num_kv_heads, self.head_dim).transpose(1, 2)  # (B, G, L, d)
        v = self.v_proj(x).view(B, L, self.num_kv_heads, self.head_dim).transpose(1, 2)  # (B, G, L, d)
        k = k.repeat(1, group, 1, 1)  # (B, H, L, d)
        v = v.repeat(1, group, 1, 1)  # (B, H, L, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, L)
        if mask is not None:
            scores = scores.masked_fill(~mask.unsqueeze(-3), torch.finfo(scores.dtype).min)  # (B, H, L, L)
        weights = scores.softmax(dim=-1)  # (B, H, L, L)
        out = (weights @ v).transpose(1, 2).reshape(B, L, self.hidden_dim)  # (B, L, hidden)
        return self.o_proj(out), weights


class GroupedAttentionFixed(GroupedAttention):
    def forward(self, x, mask=None):
        B, L, _ = x.shape  # x (B, L, hidden)
        group = self.num_heads // self.num_kv_heads
        q = self.q_proj(x).view(B, L, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, d)
        k = self.k_proj(x).view(B, L, self.num_kv_heads, self.head_dim).transpose(1, 2)  # (B, G, L, d)
        v = self.v_proj(x).view(B, L, self.num_kv_heads, self.head_dim).transpose(1, 2)  # (B, G, L, d)
        k = k.repeat_interleave(group, dim=1)  # (B, H, L, d)  FIX: kv heads 0,0,1,1, not 0,1,0,1
        v = v.repeat_interleave(group, dim=1)  # (B, H, L, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, L)
        if mask is not None:
            scores = scores.masked_fill(~mask.unsqueeze(-3), torch.finfo(scores.dtype).min)  # (B, H, L, L)
        weights = scores.softmax(dim=-1)  # (B, H, L, L)
        out = (weights @ v).transpose(1, 2).reshape(B, L, self.hidden_dim)  # (B, L, hidden)
        return self.o_proj(out), weights


# ------------------------------------------------------------------ 11 · mask not broadcast per head
class MaskAttention(HeadsBase):
    def forward(self, x, mask=None):
        B, L, _ = x.shape  # x (B, L, hidden); mask (B, L, L) or (L, L), True = may attend
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.v_proj(x))  # (B, H, L, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, L)
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # (B, H, L, L)
        weights = scores.softmax(dim=-1)  # (B, H, L, L)
        out = (weights @ v).transpose(1, 2).reshape(B, L, self.hidden_dim)  # (B, L, hidden)
        return self.o_proj(out), weights


class MaskAttentionFixed(HeadsBase):
    def forward(self, x, mask=None):
        B, L, _ = x.shape  # x (B, L, hidden); mask (B, L, L) or (L, L), True = may attend
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.v_proj(x))  # (B, H, L, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, L)
        if mask is not None:  # FIX: (B, 1, L, L) or (1, L, L): one mask, broadcast over the heads
            scores = scores.masked_fill(~mask.unsqueeze(-3), torch.finfo(scores.dtype).min)  # (B, H, L, L)
        weights = scores.softmax(dim=-1)  # (B, H, L, L)
        out = (weights @ v).transpose(1, 2).reshape(B, L, self.hidden_dim)  # (B, L, hidden)
        return self.o_proj(out), weights


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


# ------------------------------------------------------------------ RoPE layers (bugs 13, 14): the shared part
class RopeBase(HeadsBase):
    """HeadsBase plus rotary embeddings and causal attention over a KV cache (no bug here).

    ``forward(x, cache=None)``: x ``(B, L, hidden)`` holds the L newest tokens; ``cache`` is None (one full
    pass) or an ``ac.KVCache`` with the ``len(cache)`` earlier tokens' rotated keys and values.
    """

    def __init__(self, hidden_dim, num_heads, rope_base=10000.0):
        super().__init__(hidden_dim, num_heads)
        self.rope_base = rope_base

    def attend(self, q, k, v):
        L, T = q.shape[-2], k.shape[-2]  # the L new queries are the last L of T tokens
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, T)
        scores = scores.masked_fill(~causal_mask(L, T), torch.finfo(scores.dtype).min)  # bottom-right causal
        weights = scores.softmax(dim=-1)  # (B, H, L, T)
        return weights @ v, weights  # (B, H, L, d), (B, H, L, T)

    def merge(self, out):
        B, _, L, _ = out.shape  # out (B, H, L, d)
        return self.o_proj(out.transpose(1, 2).reshape(B, L, self.hidden_dim))  # (B, L, hidden)


# ------------------------------------------------------------------ 13 · RoPE positions restart in each decode step
class RopeDecodeAttention(RopeBase):
    def forward(self, x, cache=None):
        B, L, _ = x.shape  # x (B, L, hidden): the L newest tokens
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.v_proj(x))  # (B, H, L, d)
        positions = torch.arange(L)  # (L,)
        q = apply_rope(q, positions, base=self.rope_base)  # (B, H, L, d)
        k = apply_rope(k, positions, base=self.rope_base)  # (B, H, L, d)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H, T, d): every token cached so far
        out, weights = self.attend(q, k, v)  # (B, H, L, d), (B, H, L, T)
        return self.merge(out), weights


class RopeDecodeAttentionFixed(RopeBase):
    def forward(self, x, cache=None):
        B, L, _ = x.shape  # x (B, L, hidden): the L newest tokens
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.v_proj(x))  # (B, H, L, d)
        start = 0 if cache is None else len(cache)  # FIX: the new tokens come after the cached ones
        positions = torch.arange(start, start + L)  # (L,)
        q = apply_rope(q, positions, base=self.rope_base)  # (B, H, L, d)
        k = apply_rope(k, positions, base=self.rope_base)  # (B, H, L, d)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H, T, d): every token cached so far
        out, weights = self.attend(q, k, v)  # (B, H, L, d), (B, H, L, T)
        return self.merge(out), weights


# ------------------------------------------------------------------ 14 · RoPE applied to V
class RopeValueAttention(RopeBase):
    def forward(self, x, cache=None):
        B, L, _ = x.shape  # x (B, L, hidden): the L newest tokens
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.v_proj(x))  # (B, H, L, d)
        start = 0 if cache is None else len(cache)
        positions = torch.arange(start, start + L)  # (L,)
        q, k, v = (apply_rope(t, positions, base=self.rope_base) for t in (q, k, v))  # (B, H, L, d) each
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H, T, d)
        out, weights = self.attend(q, k, v)  # (B, H, L, d), (B, H, L, T)
        return self.merge(out), weights


class RopeValueAttentionFixed(RopeBase):
    def forward(self, x, cache=None):
        B, L, _ = x.shape  # x (B, L, hidden): the L newest tokens
        q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
        k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
        v = self.split_heads(self.v_proj(x))  # (B, H, L, d)
        start = 0 if cache is None else len(cache)
        positions = torch.arange(start, start + L)  # (L,)
        q, k = (apply_rope(t, positions, base=self.rope_base) for t in (q, k))  # (B, H, L, d)  FIX: not v
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H, T, d)
        out, weights = self.attend(q, k, v)  # (B, H, L, d), (B, H, L, T)
        return self.merge(out), weights


# ------------------------------------------------------------------ 15 · RoPE pairs in the wrong layout
def rotary(x, positions, base=10000.0):
    d = x.shape[-1]  # x (..., L, d), positions (L,)
    angles = positions[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (L, d/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (L, d/2) each
    x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., L, d/2) each
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)  # (..., L, d)


def rotary_fixed(x, positions, base=10000.0):
    d = x.shape[-1]  # x (..., L, d), positions (L,)
    angles = positions[:, None] * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (L, d/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (L, d/2) each
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]  # (..., L, d/2) each  FIX: pair i with i + d/2
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)  # (..., L, d)


# ------------------------------------------------------------------ 16-18 · multi-head latent attention (MLA)
class MlaBase(nn.Module):
    """DeepSeek-style MLA (``q_lora_rank`` None), DeepSeek's parameter names, no bug here.

    ``forward(x, cache=None)``: causal; ``cache`` None or an ``ac.KVCache`` that holds the normalised latent
    ``(B, 1, T, kv_lora_rank)`` and the rotated shared rope key ``(B, 1, T, qk_rope_head_dim)``.
    """

    def __init__(self, hidden_dim, num_heads, *, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
                 rope_base=10000.0):  # fmt: skip
        super().__init__()
        self.num_heads, self.rank, self.rope_base = num_heads, kv_lora_rank, rope_base
        self.nope, self.rope, self.v_dim = qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        self.scale = (qk_nope_head_dim + qk_rope_head_dim) ** -0.5
        self.q_proj = nn.Linear(hidden_dim, num_heads * (qk_nope_head_dim + qk_rope_head_dim), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(hidden_dim, kv_lora_rank + qk_rope_head_dim, bias=False)
        self.kv_a_layernorm = nn.RMSNorm(kv_lora_rank, eps=1e-6)
        self.kv_b_proj = nn.Linear(kv_lora_rank, num_heads * (qk_nope_head_dim + v_head_dim), bias=False)
        self.o_proj = nn.Linear(num_heads * v_head_dim, hidden_dim, bias=False)

    def project(self, x, start):
        """q_nope (B, H, L, nope), q_rope (B, H, L, rope), latent (B, 1, L, r), k_rope (B, 1, L, rope): rotated."""
        B, L, _ = x.shape  # x (B, L, hidden)
        q = self.q_proj(x).view(B, L, self.num_heads, self.nope + self.rope).transpose(1, 2)  # (B, H, L, nope + rope)
        q_nope, q_rope = q.split([self.nope, self.rope], dim=-1)  # (B, H, L, nope), (B, H, L, rope)
        latent, k_rope = self.kv_a_proj_with_mqa(x).split([self.rank, self.rope], dim=-1)  # (B, L, r), (B, L, rope)
        latent = self.kv_a_layernorm(latent).unsqueeze(1)  # (B, 1, L, r)
        positions = torch.arange(start, start + L)  # (L,)
        q_rope = apply_rope(q_rope, positions, base=self.rope_base, interleaved=True)  # (B, H, L, rope)
        k_rope = apply_rope(k_rope.unsqueeze(1), positions, base=self.rope_base, interleaved=True)  # (B, 1, L, rope)
        return q_nope, q_rope, latent, k_rope

    def w_uk_uv(self):
        """kv_b_proj's weight per head: W_UK (H, nope, r) and W_UV (H, v, r)."""
        w = self.kv_b_proj.weight.view(self.num_heads, self.nope + self.v_dim, self.rank)  # (H, nope + v, r)
        return w[:, : self.nope], w[:, self.nope :]  # (H, nope, r), (H, v, r)

    def attend(self, scores, L):
        T = scores.shape[-1]  # scores (B, H, L, T), already scaled
        return scores.masked_fill(~causal_mask(L, T), float("-inf")).softmax(dim=-1)  # (B, H, L, T)

    def merge(self, out):
        B, _, L, _ = out.shape  # out (B, H, L, v)
        return self.o_proj(out.transpose(1, 2).reshape(B, L, -1))  # (B, L, hidden)


# ------------------------------------------------------------------ 16 · RoPE pushed through the absorbed W_UK
class MlaRopeAbsorbed(MlaBase):
    def forward(self, x, cache=None):
        L = x.shape[1]  # x (B, L, hidden)
        start = 0 if cache is None else len(cache)
        positions = torch.arange(start, start + L)  # (L,)
        q_nope, q_rope, latent, k_rope = self.project(x, start)  # see MlaBase.project
        w_uk, w_uv = self.w_uk_uv()  # (H, nope, r), (H, v, r)
        q_lat = torch.einsum("bhln,hnr->bhlr", q_nope, w_uk)  # (B, H, L, r): W_UK folded into the query
        q_lat = apply_rope(q_lat, positions, base=self.rope_base, interleaved=True)  # (B, H, L, r)
        latent = apply_rope(latent, positions, base=self.rope_base, interleaved=True)  # (B, 1, L, r)
        if cache is not None:
            latent, k_rope = cache.update(latent, k_rope)  # (B, 1, T, r), (B, 1, T, rope)
        scores = (q_lat @ latent.mT + q_rope @ k_rope.mT) * self.scale  # (B, H, L, T)
        weights = self.attend(scores, L)  # (B, H, L, T)
        out = torch.einsum("bhlr,hvr->bhlv", weights @ latent, w_uv)  # (B, H, L, v): W_UV after the sum
        return self.merge(out), weights


class MlaRopeAbsorbedFixed(MlaBase):
    def forward(self, x, cache=None):
        L = x.shape[1]  # x (B, L, hidden)
        start = 0 if cache is None else len(cache)
        q_nope, q_rope, latent, k_rope = self.project(x, start)  # only q_rope and k_rope are rotated
        w_uk, w_uv = self.w_uk_uv()  # (H, nope, r), (H, v, r)
        q_lat = torch.einsum("bhln,hnr->bhlr", q_nope, w_uk)  # (B, H, L, r)  FIX: no rotation in latent space
        if cache is not None:
            latent, k_rope = cache.update(latent, k_rope)  # (B, 1, T, r), (B, 1, T, rope)
        scores = (q_lat @ latent.mT + q_rope @ k_rope.mT) * self.scale  # (B, H, L, T)
        weights = self.attend(scores, L)  # (B, H, L, T)
        out = torch.einsum("bhlr,hvr->bhlv", weights @ latent, w_uv)  # (B, H, L, v)
        return self.merge(out), weights


# ------------------------------------------------------------------ 17 · W_UV folded with the wrong transpose
class MlaAbsorbedValue(MlaBase):
    def forward(self, x, cache=None):
        L = x.shape[1]  # x (B, L, hidden)
        start = 0 if cache is None else len(cache)
        q_nope, q_rope, latent, k_rope = self.project(x, start)
        w_uk, w_uv = self.w_uk_uv()  # (H, nope, r), (H, v, r)
        q_lat = torch.einsum("bhln,hnr->bhlr", q_nope, w_uk)  # (B, H, L, r)
        if cache is not None:
            latent, k_rope = cache.update(latent, k_rope)  # (B, 1, T, r), (B, 1, T, rope)
        scores = (q_lat @ latent.mT + q_rope @ k_rope.mT) * self.scale  # (B, H, L, T)
        weights = self.attend(scores, L)  # (B, H, L, T)
        w_uv = w_uv.reshape(self.num_heads, self.rank, self.v_dim)  # (H, r, v)
        out = (weights @ latent) @ w_uv  # (B, H, L, r) @ (H, r, v) -> (B, H, L, v)
        return self.merge(out), weights


class MlaAbsorbedValueFixed(MlaBase):
    def forward(self, x, cache=None):
        L = x.shape[1]  # x (B, L, hidden)
        start = 0 if cache is None else len(cache)
        q_nope, q_rope, latent, k_rope = self.project(x, start)
        w_uk, w_uv = self.w_uk_uv()  # (H, nope, r), (H, v, r)
        q_lat = torch.einsum("bhln,hnr->bhlr", q_nope, w_uk)  # (B, H, L, r)
        if cache is not None:
            latent, k_rope = cache.update(latent, k_rope)  # (B, 1, T, r), (B, 1, T, rope)
        scores = (q_lat @ latent.mT + q_rope @ k_rope.mT) * self.scale  # (B, H, L, T)
        weights = self.attend(scores, L)  # (B, H, L, T)
        w_uv = w_uv.transpose(1, 2)  # (H, r, v)  FIX: transpose, not reshape
        out = (weights @ latent) @ w_uv  # (B, H, L, r) @ (H, r, v) -> (B, H, L, v)
        return self.merge(out), weights


# ------------------------------------------------------------------ 18 · the up-projected keys cached, not the latent
class MlaCacheUpProjected(MlaBase):
    def forward(self, x, cache=None):
        B, L, _ = x.shape  # x (B, L, hidden)
        start = 0 if cache is None else len(cache)
        q_nope, q_rope, latent, k_rope = self.project(x, start)
        kv = self.kv_b_proj(latent.squeeze(1)).view(B, L, self.num_heads, -1).transpose(1, 2)  # (B, H, L, nope + v)
        k_nope, v = kv.split([self.nope, self.v_dim], dim=-1)  # (B, H, L, nope), (B, H, L, v)
        k = torch.cat([k_nope, k_rope.expand(-1, self.num_heads, -1, -1)], dim=-1)  # (B, H, L, nope + rope)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H, T, nope + rope), (B, H, T, v)
        q = torch.cat([q_nope, q_rope], dim=-1)  # (B, H, L, nope + rope)
        weights = self.attend(q @ k.mT * self.scale, L)  # (B, H, L, T)
        return self.merge(weights @ v), weights


class MlaCacheUpProjectedFixed(MlaBase):
    def forward(self, x, cache=None):
        B, L, _ = x.shape  # x (B, L, hidden)
        start = 0 if cache is None else len(cache)
        q_nope, q_rope, latent, k_rope = self.project(x, start)
        if cache is not None:
            latent, k_rope = cache.update(latent, k_rope)  # (B, 1, T, r), (B, 1, T, rope)  FIX: cache the latent
        T = latent.shape[-2]
        kv = self.kv_b_proj(latent.squeeze(1)).view(B, T, self.num_heads, -1).transpose(1, 2)  # (B, H, T, nope + v)
        k_nope, v = kv.split([self.nope, self.v_dim], dim=-1)  # (B, H, T, nope), (B, H, T, v)
        k = torch.cat([k_nope, k_rope.expand(-1, self.num_heads, -1, -1)], dim=-1)  # (B, H, T, nope + rope)
        q = torch.cat([q_nope, q_rope], dim=-1)  # (B, H, L, nope + rope)
        weights = self.attend(q @ k.mT * self.scale, L)  # (B, H, L, T)
        return self.merge(weights @ v), weights


# =============================================================================== probes


def _randn(*shape: int, generator: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=generator, dtype=DTYPE)


def _qkv(batch: int, heads: int, q_len: int, k_len: int, dim: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    q = _randn(batch, heads, q_len, dim, generator=generator)  # (B, H, Lq, D)
    k = _randn(batch, heads, k_len, dim, generator=generator)  # (B, H, Lk, D)
    v = _randn(batch, heads, k_len, dim, generator=generator)  # (B, H, Lk, D)
    return q, k, v


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.to(DTYPE), b.to(DTYPE), atol=ATOL, rtol=RTOL)


def _unpack(result, out_shape: tuple, weights_shape: tuple) -> tuple[torch.Tensor, torch.Tensor, str | None]:
    """Split ``(out, weights)`` and check their types and shapes."""
    if not (isinstance(result, tuple) and len(result) == 2 and all(isinstance(t, torch.Tensor) for t in result)):
        return None, None, f"return a pair (out, weights) of tensors, got {type(result).__name__}."
    out, weights = result
    if tuple(out.shape) != out_shape:
        return None, None, f"out should have shape {out_shape}, got {tuple(out.shape)}."
    if tuple(weights.shape) != weights_shape:
        return None, None, f"weights should have shape {weights_shape}, got {tuple(weights.shape)}."
    return out.detach().to(DTYPE), weights.detach().to(DTYPE), None


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


# ---------------------------------------------------------------------------- layer probes


def _reference_layer(hidden_dim: int, num_heads: int, num_kv_heads: int, dropout: float, seed: int):
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        ref = GroupedQueryAttention(hidden_dim, num_heads, num_kv_heads, dropout=dropout).to(DTYPE).eval()
    with torch.no_grad():
        for param in ref.parameters():
            param.copy_(torch.randn(param.shape, generator=generator, dtype=DTYPE) * 0.5)
    return ref


def _build_learner_layer(impl, args: tuple, kwargs: dict, ref: nn.Module) -> tuple[nn.Module | None, str | None]:
    """Construct the learner's layer and copy the reference weights into it."""
    with torch.random.fork_rng(devices=[]):
        layer, error = call_learner(impl, *args, **kwargs)
    if error:
        return None, error
    if not isinstance(layer, nn.Module):
        return None, f"pass the layer class itself; calling it gave a {type(layer).__name__}, not an nn.Module."
    try:
        layer.to(DTYPE).load_state_dict(ref.state_dict())
    except Exception as err:  # wrong parameter names or shapes
        first = str(err).strip().splitlines()[0]
        return None, (
            "keep the q_proj/k_proj/v_proj/o_proj linear layers of the original (the probe copies reference "
            f"weights into them): load_state_dict raised {type(err).__name__}: {first}"
        )
    return layer, None


def _layer_problem(
    impl: Callable,
    *,
    num_heads: int = 2,
    num_kv_heads: int | None = None,
    dropout: float | None = None,
    mask: torch.Tensor | None = None,
    batch: int = 2,
    seq_len: int = 5,
    hidden_dim: int = 8,
    seed: int = 0,
) -> str | None:
    """Compare the learner's layer (eval mode) with ``ac.GroupedQueryAttention`` holding the same weights."""
    args = (hidden_dim, num_heads) if num_kv_heads is None else (hidden_dim, num_heads, num_kv_heads)
    kwargs = {} if dropout is None else {"dropout": dropout}
    ref = _reference_layer(hidden_dim, num_heads, num_kv_heads or num_heads, dropout or 0.0, seed)
    layer, error = _build_learner_layer(impl, args, kwargs, ref)
    if error:
        return error
    layer.eval()
    x = _randn(batch, seq_len, hidden_dim, generator=torch.Generator().manual_seed(seed + 1))  # (B, L, hidden)
    with torch.no_grad():
        want_out, want_weights = ref(x, mask=None if mask is None else mask.unsqueeze(-3))
        result, error = call_learner(layer, x, mask)
    if error:
        return error
    out, weights, problem = _unpack(result, tuple(want_out.shape), tuple(want_weights.shape))
    if problem:
        return problem
    if _close(out, want_out) and _close(weights, want_weights):
        return None
    if not _close(weights, want_weights):
        if mask is not None and mask.ndim == 3 and batch == num_heads:
            with torch.no_grad():
                _, crossed = ref(x, mask=mask.unsqueeze(0))  # (1, B, L, L) read as (B, H, L, L)
            if _close(weights, crossed):
                return (
                    "head h of every sequence got the mask of sequence h: broadcasting lined the batch axis "
                    "of the mask (B, L, L) up with the head axis of the scores (B, H, L, L)."
                )
        head_dim = hidden_dim // num_heads
        for label, divisor in (("sqrt(hidden_dim)", math.sqrt(hidden_dim)), ("head_dim", head_dim), ("1", 1.0)):
            if _close(weights, _reference_weights(ref, x, mask, 1 / divisor)):
                return (
                    f"the weights match softmax(q kᵀ / {label}) with {label} = {divisor:g}: the scores must be "
                    f"divided by sqrt(head_dim) = {math.sqrt(head_dim):g}, the size of one head's vectors."
                )
        return "the attention weights differ from the reference layer's."
    return "the attention weights match the reference but the outputs do not: check how you compute v and out."


@torch.no_grad()
def _reference_weights(ref: GroupedQueryAttention, x: torch.Tensor, mask, scale: float) -> torch.Tensor:
    """The reference layer's weights computed with another ``scale``."""
    q = ref._split_heads(ref.q_proj(x), ref.num_heads)  # (B, H, L, d)
    k = ref._split_heads(ref.k_proj(x), ref.num_kv_heads)  # (B, G, L, d)
    mask = None if mask is None else mask.unsqueeze(-3)  # (B, 1, L, L) or (1, L, L)
    return scaled_dot_product_attention(q, k, k, mask, scale=scale)[1]  # (B, H, L, L)


def _scale_probe(impl: Callable) -> str | None:
    return _layer_problem(impl) or _layer_problem(impl, mask=causal_mask(5), seed=3)


def _value_probe(impl: Callable) -> str | None:
    problem = _layer_problem(impl)
    if problem is None:
        return None
    if problem.startswith("the attention weights match"):
        ref = _reference_layer(8, 2, 2, 0.0, seed=0)
        layer, error = _build_learner_layer(impl, (8, 2), {}, ref)
        if error:
            return error
        x = _randn(2, 5, 8, generator=torch.Generator().manual_seed(1))  # (B, L, hidden)
        with torch.no_grad():
            before, _ = layer.eval()(x)  # (B, L, hidden)
            layer.v_proj.weight.mul_(2.0)
            after, _ = layer(x)  # (B, L, hidden)
        if torch.equal(before, after):
            return (
                "the weights match the reference but the outputs do not, and doubling v_proj's weights "
                "does not change your output at all: v_proj is never used."
            )
    return problem


def _eval_dropout_probe(impl: Callable) -> str | None:
    p = 0.5
    ref = _reference_layer(8, 2, 2, p, seed=0)
    layer, error = _build_learner_layer(impl, (8, 2), {"dropout": p}, ref)
    if error:
        return error
    x = _randn(2, 5, 8, generator=torch.Generator().manual_seed(1))  # (B, L, hidden)
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer.eval()
        first, error = call_learner(layer, x)
        second, error2 = call_learner(layer, x)
        if error or error2:
            return error or error2
        layer.train()
        train, error = call_learner(layer, x)
    if error:
        return f"in train mode: {error}"
    where = f"built with dropout={p} and switched to .eval()"
    if not (isinstance(first, tuple) and isinstance(second, tuple) and isinstance(train, tuple)):
        return "return a pair (out, weights)."
    if not torch.equal(first[0], second[0]):
        return (
            f"{where}, two calls on the same input gave different outputs: dropout is still active in eval "
            "mode. F.dropout(x, p) defaults to training=True."
        )
    problem = _layer_problem(impl, dropout=p)
    if problem:
        return f"{where}: {problem}"
    if not (train[1] == 0).any():
        return "in train mode with dropout=0.5 no attention weight was dropped: keep dropout for training."
    return None


def _view_probe(impl: Callable) -> str | None:
    return _layer_problem(impl)


def _gqa_probe(impl: Callable) -> str | None:
    for num_heads, num_kv_heads in ((4, 2), (4, 4), (4, 1), (8, 2)):
        problem = _layer_problem(impl, num_heads=num_heads, num_kv_heads=num_kv_heads)
        if problem:
            where = f"with {num_heads} query heads and {num_kv_heads} kv heads"
            if (num_heads, num_kv_heads) == (4, 2) and not any(
                _layer_problem(impl, num_heads=4, num_kv_heads=g) for g in (4, 1)
            ):
                problem += (
                    " It is right for 4 kv heads (MHA) and 1 kv head (MQA): the query heads are paired with the "
                    "wrong kv heads (query head h must read kv head h // (num_heads // num_kv_heads))."
                )
            return f"{where}: {problem}"
    return None


def _mask_probe(impl: Callable) -> str | None:
    per_sequence = padding_mask([5, 3])[:, 0] & causal_mask(5)  # (B, L, L): one mask per sequence
    for where, mask, num_heads in (
        ("with a causal mask (L, L)", causal_mask(5), 2),
        ("with a per-sequence mask (B=2, L, L) and 2 heads", per_sequence, 2),
        ("with a per-sequence mask (B=2, L, L) and 4 heads", per_sequence, 4),
    ):
        problem = _layer_problem(impl, num_heads=num_heads, mask=mask)
        if problem and mask.ndim == 2 and "must match the size of tensor" in problem:
            return (
                f"{where}: {problem.rstrip('.')}. An (L, L) mask has no batch axis: mask.unsqueeze(1) turns it into "
                "(L, 1, L), which does not line up with the scores (B, H, L, L). unsqueeze(1), as in the "
                "Annotated Transformer, assumes a mask with a batch axis in front. Count the new head axis from "
                "the right instead: mask.unsqueeze(-3) makes (L, L) into (1, L, L) and (B, L, L) into (B, 1, L, L)."
            )
        if problem:
            return f"{where}: {problem}"
    return None


# ---------------------------------------------------------------------------- RoPE probes


def _rope_layer_probe(impl: Callable) -> str | None:
    """A RoPE layer ``(hidden_dim, num_heads, rope_base=...)`` against ``ac.MultiHeadAttention(rope_base=...)``:
    one full pass, then a prefill and one-token decode steps through a KV cache (notebook 16's check)."""
    generator = torch.Generator().manual_seed(11)
    for seed, (hidden_dim, num_heads, base) in enumerate(_ROPE_CONFIGS):
        problem, _ = _rope_config_problem(impl, hidden_dim, num_heads, base, seed, generator)
        if problem:
            return problem
    return None


def _rotary_probe(impl: Callable) -> str | None:
    """``rotary(x, positions, base=10000.0)`` against ``ac.apply_rope`` (rotate-half layout)."""
    generator = torch.Generator().manual_seed(5)
    x = _randn(2, 2, 5, 8, generator=generator)  # (B, H, L, D)
    for where, positions, base in (
        ("positions 0..4", torch.arange(5), 10000.0),
        ("positions 3..7, base 100", torch.arange(3, 8), 100.0),
    ):
        want = apply_rope(x, positions, base=base)  # (B, H, L, D)
        result, error = call_learner(impl, x.clone(), positions.clone(), base=base)
        if error:
            return error if error == NOT_DONE else f"with {where}: {error}"
        if not isinstance(result, torch.Tensor) or tuple(result.shape) != tuple(x.shape):
            got = tuple(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__
            return f"with {where}: return one tensor of x's shape {tuple(x.shape)}, got {got}."
        if _close(result, want):
            continue
        result = result.detach().to(DTYPE)
        if _close(result, apply_rope(x, positions, base=base, interleaved=True)):
            return (
                f"with {where}: your rotation pairs features (2i, 2i+1), the interleaved layout of the RoFormer "
                "paper and of Meta's original Llama code; the weights here (as in Hugging Face's Llama) expect "
                "pairs (i, i + d/2). Each layout works with weights in its own order, so the model runs, "
                "and every score is silently wrong."
            )
        if _close(result, x):
            return f"with {where}: your function returns x unrotated."
        if _close(result, apply_rope(x, -positions, base=base)):
            return f"with {where}: you rotate by -angle: sin has the wrong sign."
        return f"with {where}: the rotation differs from ac.apply_rope(x, positions, base=base)."
    return None


def _mla_layer_probe(impl: Callable) -> str | None:
    """An MLA layer against ``ac.MultiHeadLatentAttention`` (notebook 16's ``check_mla``): a full pass, then a
    prefill and one-token decode steps through a KV cache that must hold the latent and the shared rope key."""
    generator = torch.Generator().manual_seed(13)
    for seed, config in enumerate(_MLA_CONFIGS):
        problem = _mla_config_problem(impl, config, seed, generator)
        if problem:
            return problem
    return None


# =============================================================================== catalogue


@dataclass(frozen=True)
class Bug:
    """One planted bug: where it comes from, the buggy code, a probe, a hint and the fix."""

    id: str
    title: str
    story: str
    signature: str
    buggy: Callable
    fixed: Callable
    probe: Callable[[Callable], str | None]
    hint: str


BUGS: dict[str, Bug] = {
    bug.id: bug
    for bug in (
        Bug(
            "scale_by_model_dim",
            "Scaled by the model width",
            "The scores are divided by the square root of the model width, not of one head's width: "
            "`wei = q @ k.transpose(-2, -1) * C**-0.5` with C the embedding size. Karpathy's \"Let's build GPT\" "
            "code shipped exactly this line (karpathy/ng-video-lecture: fixed in gpt.py by pull request #6; "
            "issue #55 finds it still in the lecture's Colab). With H heads every score is √H times too small, "
            "so every head's weights are too flat; nothing crashes.",
            "ScaleAttention(hidden_dim, num_heads); forward(x, mask=None) -> (out, weights)",
            ScaleAttention,
            ScaleAttentionFixed,
            _scale_probe,
            "Each head takes dot products of vectors of length head_dim, not hidden_dim. Which number sets the "
            "variance of q·k inside one head?",
        ),
        Bug(
            "value_from_key_proj",
            "Values from the key projection",
            "`v = self.k_proj(x)`: a copy-paste slip from the line above. v_proj exists and has parameters, "
            "but it is never used (its .grad stays None after backward). Every shape is right, and so are the "
            "attention weights; only the output is wrong.",
            "ValueAttention(hidden_dim, num_heads); forward(x, mask=None) -> (out, weights)",
            ValueAttention,
            ValueAttentionFixed,
            _value_probe,
            "The weights are right, the output is not. Read the three projection lines slowly: which module "
            "produces each of q, k and v?",
        ),
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
            "dropout_in_eval",
            "Dropout still active in eval mode",
            "`F.dropout(weights, p=self.dropout)` inside a module: F.dropout has training=True by default, "
            "unlike nn.Dropout, which follows module.train()/eval(). Result: dropout stays on at inference, "
            "outputs are random and evaluation scores are noisy.",
            "DropoutAttention(hidden_dim, num_heads, dropout=0.0); forward(x, mask=None) -> (out, weights)",
            DropoutAttention,
            DropoutAttentionFixed,
            _eval_dropout_probe,
            "Look at the signature of torch.nn.functional.dropout. What does the module know about whether it "
            "is training?",
        ),
        Bug(
            "view_without_contiguous",
            "view after transpose",
            "Merging the heads back with .transpose(1, 2).view(B, L, hidden): transpose only swaps strides, and "
            "view needs memory laid out in order. The classic RuntimeError of every first multi-head layer.",
            "ViewAttention(hidden_dim, num_heads); forward(x, mask=None) -> (out, weights)",
            ViewAttention,
            ViewAttentionFixed,
            _view_probe,
            "Read the error message: it even names the fix. .reshape copies only when needed; .contiguous().view "
            "always works too.",
        ),
        Bug(
            "gqa_repeat",
            "repeat instead of repeat_interleave for GQA",
            "Expanding G kv heads to H query heads with k.repeat(1, H // G, 1, 1) tiles them 0,1,0,1; grouped-"
            "query attention pairs consecutive query heads with one kv head, 0,0,1,1. Same shape, no error, and "
            "right for MHA and MQA, so only a test with 1 < G < H catches it.",
            "GroupedAttention(hidden_dim, num_heads, num_kv_heads); forward(x, mask=None) -> (out, weights)",
            GroupedAttention,
            GroupedAttentionFixed,
            _gqa_probe,
            "With 4 query heads and 2 kv heads, which kv head should query head 1 read? Print "
            "torch.arange(2).repeat(2) and torch.arange(2).repeat_interleave(2).",
        ),
        Bug(
            "mask_not_per_head",
            "Per-sequence mask not broadcast over heads",
            "A data loader hands one mask per sequence, (B, L, L); the scores are (B, H, L, L). Broadcasting "
            "aligns shapes from the right, so the mask's batch axis meets the heads axis: silently wrong "
            "numbers when B == H, an error for other batch sizes (and right only by luck when B == 1). The fix "
            "inserts a head axis counted from the right, mask.unsqueeze(-3), which serves (L, L) and (B, L, L) "
            "masks alike. The Annotated Transformer writes mask.unsqueeze(1), which assumes a mask with a batch "
            "axis in front and crashes on an (L, L) mask.",
            "MaskAttention(hidden_dim, num_heads); forward(x, mask=None) -> (out, weights); mask (B, L, L) or (L, L)",
            MaskAttention,
            MaskAttentionFixed,
            _mask_probe,
            "Write the two shapes one above the other, right-aligned: (B, L, L) and (B, H, L, L). Insert a "
            "size-1 head axis so the same mask serves every head, and count its position from the right so an "
            "(L, L) mask works too.",
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
        Bug(
            "rope_positions_restart",
            "RoPE positions restart at 0 in every decode step",
            "`positions = torch.arange(L)` where L is the number of NEW tokens: right in the prefill, but in a "
            "decode step L = 1, so every generated token is rotated as if it stood at position 0 while its "
            "cached neighbours keep their real positions. Nothing crashes; the prefill is right and generation "
            "drifts. Hugging Face's RoFormer had exactly this: its rotary positions came from the length of "
            "the current hidden states, always 1 in generate(), ignoring the cached tokens "
            "(huggingface/transformers pull request #22416).",
            "RopeDecodeAttention(hidden_dim, num_heads, rope_base=10000.0); forward(x, cache=None) -> (out, "
            "weights); causal; cache None or an ac.KVCache with the earlier tokens' rotated keys and values",
            RopeDecodeAttention,
            RopeDecodeAttentionFixed,
            _rope_layer_probe,
            "In a decode step, how many tokens are already in the cache, and what is the position of the new one? "
            "len(cache) before cache.update is the offset.",
        ),
        Bug(
            "rope_on_values",
            "RoPE applied to the values",
            "`q, k, v = (apply_rope(t, positions) for t in (q, k, v))`: one line too generous. RoPE (Su et al. "
            "2021, RoFormer, arXiv 2104.09864) rotates queries and keys so that the SCORES depend on the "
            "distance m - n; the values carry content and are not rotated (the paper keeps the value term free "
            "of position, section 3.2; mistralai/mistral-inference issue #147 asks why and is answered from it). "
            "Rotated values make each token's contribution depend on its absolute position; the attention "
            "weights stay right, so only a reference test of the output catches it.",
            "RopeValueAttention(hidden_dim, num_heads, rope_base=10000.0); forward(x, cache=None) -> (out, "
            "weights); causal; cache None or an ac.KVCache",
            RopeValueAttention,
            RopeValueAttentionFixed,
            _rope_layer_probe,
            "The weights match, the output does not. Which of q, k, v enter the scores q·k, the only place the "
            "position is supposed to act?",
        ),
        Bug(
            "rope_layout",
            "RoPE pairs in the wrong layout",
            "Two layouts of RoPE are in use: pairs (2i, 2i+1), as in the RoFormer paper and Meta's original "
            "Llama code (and the GGUF files llama.cpp converts from Llama checkpoints), and pairs (i, i + d/2), "
            "the 'rotate half' of Hugging Face's Llama, whose "
            "conversion script permutes the q/k projection rows to match. Code written from the paper "
            "(`x[..., 0::2], x[..., 1::2]`) on weights in Hugging Face order runs without an error and computes "
            "garbage scores. huggingface/transformers issue #25199 asks why the two differ; "
            "Dao-AILab/flash-attention issue #288 answers which weights need which layout.",
            "rotary(x, positions, base=10000.0) -> x rotated, shape (..., L, d); positions (L,); "
            "rotate-half layout, as ac.apply_rope(x, positions, base=base)",
            rotary,
            rotary_fixed,
            _rotary_probe,
            "Which feature does feature 0 turn with? In the rotate-half layout it is feature d/2, not feature 1.",
        ),
        Bug(
            "mla_rope_absorbed",
            "MLA: RoPE pushed through the absorbed W_UK",
            "An absorbed MLA decode written as if RoPE commuted with the up-projection: after folding W_UK into the "
            "query, `q_lat = apply_rope(q_lat, positions)` and `latent = apply_rope(latent, positions)` rotate the "
            "LATENT-space query and the cached latent. But the rotation of key n sits between W_UK and c_n "
            "(q·R_n W_UK c_n) and depends on n, so no fixed matrix can be folded into the query: this is exactly "
            "why DeepSeek-V2 (arXiv 2405.04434, section 2.1.3) keeps RoPE out of the latent and adds a small "
            "decoupled rope key shared by all heads. The rotated latent is a different model; nothing crashes.",
            "MlaRopeAbsorbed(hidden_dim, num_heads, *, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, "
            "v_head_dim, rope_base=10000.0); forward(x, cache=None) -> (out, weights); causal; cache None or an "
            "ac.KVCache holding the latent (B, 1, T, kv_lora_rank) and the rotated shared key "
            "(B, 1, T, qk_rope_head_dim)",
            MlaRopeAbsorbed,
            MlaRopeAbsorbedFixed,
            _mla_layer_probe,
            "Where does position enter MLA's score? Only through q_rope · k_rope; the latent path q_nope W_UK · c "
            "must stay position-free for the absorption to be exact.",
        ),
        Bug(
            "mla_absorb_wuv_transpose",
            "MLA: W_UV folded with the wrong transpose",
            "Absorbing W_UV means applying it once to the weighted sum of latents: out_h = (Σ_t w_t c_t) W_UV_hᵀ. "
            "kv_b_proj's weight holds W_UV as (H, v, r), nn.Linear's (out, in) order, and the line "
            "`w_uv = w_uv.reshape(self.num_heads, self.rank, self.v_dim)` turns it into the (H, r, v) shape the "
            "matmul needs without transposing it: the shapes fit, the numbers are scrambled. The attention "
            "weights are still exactly right, so only a reference test of the output catches it.",
            "MlaAbsorbedValue(hidden_dim, num_heads, *, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, "
            "v_head_dim, rope_base=10000.0); forward(x, cache=None) -> (out, weights); causal; cache None or an "
            "ac.KVCache holding the latent (B, 1, T, kv_lora_rank) and the rotated shared key "
            "(B, 1, T, qk_rope_head_dim)",
            MlaAbsorbedValue,
            MlaAbsorbedValueFixed,
            _mla_layer_probe,
            "The weights match and the output does not, so look after the softmax. reshape keeps the memory order; "
            "which call swaps two axes?",
        ),
        Bug(
            "mla_cache_up_projected",
            "MLA: the up-projected keys cached instead of the latent",
            "`k, v = cache.update(k, v)` after kv_b_proj: the layer caches per-head keys (nope + rope) and values, "
            "H·(nope + rope + v) numbers per token, instead of the latent and the shared rope key, "
            "kv_lora_rank + rope numbers. Every output is right, which is why it survives review; only the memory "
            "is wrong: for DeepSeek-V3 (128 heads) that is 128·(128 + 64 + 128) = 40,960 numbers per token per "
            "layer instead of 576, 71 times the cache MLA was designed to avoid.",
            "MlaCacheUpProjected(hidden_dim, num_heads, *, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, "
            "v_head_dim, rope_base=10000.0); forward(x, cache=None) -> (out, weights); causal; cache None or an "
            "ac.KVCache holding the latent (B, 1, T, kv_lora_rank) and the rotated shared key "
            "(B, 1, T, qk_rope_head_dim)",
            MlaCacheUpProjected,
            MlaCacheUpProjectedFixed,
            _mla_layer_probe,
            "The numbers are right; look at the shapes in the cache. What does MLA promise to keep per token?",
        ),
    )
}


# =============================================================================== learner API


def _find(bug_id: str) -> tuple[Bug | None, str | None]:
    bug = BUGS.get(bug_id)
    if bug is None:
        return None, f"unknown bug id {bug_id!r}; the ids are: {', '.join(BUGS)}."
    return bug, None


def _problem(bug: Bug, impl) -> str | None:
    """The probe's verdict; never raises."""
    if is_stub(impl):
        return NOT_DONE
    if impl is bug.buggy:
        return "that is still the original buggy code: pass your fixed version."
    try:
        return bug.probe(impl)
    except Exception as err:  # a probe must never crash the notebook
        return f"could not run your code ({type(err).__name__}: {err})."


def check_bug(bug_id: str, impl) -> bool:
    """Run bug ``bug_id``'s test on ``impl`` (your fixed function or class): ✅ or what is still wrong."""
    bug, error = _find(bug_id)
    if error:
        return feedback("check_bug", error)
    return feedback(f"check_bug({bug_id!r})", _problem(bug, impl))


def show_bug(bug_id: str) -> bool:
    """Run bug ``bug_id``'s test on its buggy implementation and print what it finds (never raises)."""
    bug, error = _find(bug_id)
    if error:
        return feedback("show_bug", error)
    try:
        problem = bug.probe(bug.buggy)
    except Exception as err:
        problem = f"could not run the probe ({type(err).__name__}: {err})."
    return feedback(f"test {bug_id!r} on the buggy code", problem)


def bug_report(fixes: Mapping[str, object]) -> int:
    """Print the scoreboard for ``fixes`` (bug id -> your fixed implementation); return how many are fixed."""
    lines, fixed = [], 0
    for bug_id, bug in BUGS.items():
        problem = _problem(bug, fixes.get(bug_id))
        if problem is None:
            fixed += 1
            lines.append(f"  ✅ {bug_id}")
        elif problem == NOT_DONE:
            lines.append(localize(f"  ⬜ {bug_id}: not attempted"))
        else:
            lines.append(localize(f"  ❌ {bug_id}: still failing"))
    print(localize(f"fixed {fixed}/{len(BUGS)}"))  # localize: the Chinese edition prints the board in Chinese
    print("\n".join(lines))
    return fixed


def check_all(namespace: Mapping[str, object]) -> int:
    """Scoreboard from a namespace (pass ``globals()``): bug ``id``'s fix is the name ``fixed_<id>``."""
    return bug_report({bug_id: namespace.get(f"fixed_{bug_id}") for bug_id in BUGS})
