"""Notebook 14's bugs in a multi-head layer (1, 2, 8-11): the planted code, its fix, the story and the hint.

Data, not code to reuse: each buggy layer is what people really write; its probe is in ``probes_layers``.

One piece: six buggy layers, each followed by its fix and catalogued with its story, read side by side.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attn_core.exercises.bug_hunt.common import Bug, catalogue
from attn_core.exercises.bug_hunt.probes_layers import (
    _eval_dropout_probe,
    _gqa_probe,
    _mask_probe,
    _scale_probe,
    _value_probe,
    _view_probe,
)

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


LAYER_BUGS = catalogue(
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
        "dropout_in_eval",
        "Dropout still active in eval mode",
        "`F.dropout(weights, p=self.dropout)` inside a module: F.dropout has training=True by default, "
        "unlike nn.Dropout, which follows module.train()/eval(). Result: dropout stays on at inference, "
        "outputs are random and evaluation scores are noisy.",
        "DropoutAttention(hidden_dim, num_heads, dropout=0.0); forward(x, mask=None) -> (out, weights)",
        DropoutAttention,
        DropoutAttentionFixed,
        _eval_dropout_probe,
        "Look at the signature of torch.nn.functional.dropout. What does the module know about whether it is training?",
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
)
