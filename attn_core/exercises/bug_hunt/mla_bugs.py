"""Notebook 14's multi-head latent attention bugs (16-18): the planted code, its fix, the story and the hint.

Data, not code to reuse: each buggy layer is what people really write; its probe is in ``probes_layers``.
"""

from __future__ import annotations

import torch
from torch import nn

from attn_core.exercises.bug_hunt.common import Bug, catalogue
from attn_core.exercises.bug_hunt.probes_layers import _mla_layer_probe
from attn_core.masks import causal_mask
from attn_core.positions.rope import apply_rope


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


MLA_BUGS = catalogue(
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
