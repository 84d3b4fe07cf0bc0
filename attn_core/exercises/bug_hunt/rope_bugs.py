"""Notebook 14's RoPE bugs (13-15): the planted code, its fix, the story and the hint.

Data, not code to reuse: each buggy layer or function is what people really write; its probe is in
``probes_layers``.
"""

from __future__ import annotations

import math

import torch

from attn_core.exercises.bug_hunt.common import Bug, catalogue
from attn_core.exercises.bug_hunt.layer_bugs import HeadsBase
from attn_core.exercises.bug_hunt.probes_layers import _rope_layer_probe, _rotary_probe
from attn_core.masks import causal_mask
from attn_core.positions.rope import apply_rope


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


ROPE_BUGS = catalogue(
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
)
