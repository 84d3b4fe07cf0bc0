"""DeepSeek-V4's attention layer: one shared K=V head, partial RoPE, sinks, a sliding window, compressed entries.

V4 (April 2026) replaces MLA with a layer whose every part keeps long-context cost down:

- **one head that is both key and value** (``kv = RMSNorm(x W_kv)``, ``head_dim`` 512): multi-query attention
  with K = V, so a token costs ``head_dim`` numbers in the cache;
- **partial RoPE**, interleaved, on the last ``qk_rope_head_dim`` features of queries and keys. Because the
  value is the rotated key, the output's rope slice is rotated back by the query's position, so what a key
  contributes depends only on the distance between them;
- queries from a low-rank latent (``q_a_proj`` → ``q_a_norm`` → ``q_b_proj``) then a weightless per-head RMSNorm
  (``q_b_norm``);
- a **sliding window** of the last ``sliding_window`` tokens in every layer, plus, by layer type:
  none (``compress_rate=None``), **HCA** (every ``m`` tokens pooled into one entry, all visible), or **CSA**
  (overlapping entries every ``m`` tokens, of which a lightning indexer lets each query read its top ``k``);
  see :mod:`attn_core.deepseek.compressor`;
- one softmax over the union of both streams (window keys and compressed entries), plus a learned per-head
  **sink** logit that takes weight and gives nothing (rows sum below 1);
- two rotary settings in the released model: window-only layers rotate with ``rope_theta`` (10,000) and no
  scaling; CSA and HCA layers rotate everything (queries, window keys, compressed entries, the indexer) with
  ``compress_rope_theta`` (160,000) and YaRN (factor 16, ``attention_factor`` 1). Pass a layer its own base as
  ``rope_base=`` and its scaling as ``rope_scaling=`` (Hugging Face's key names, as
  :class:`attn_core.MultiHeadLatentAttention`); a YaRN dict without ``attention_factor`` gets 1.0, as
  Hugging Face's ``DeepseekV4Config`` sets it (the reference code does not scale cos/sin);
- a **grouped output projection**: heads in ``o_groups`` groups, each group projected to ``o_lora_rank`` by its own
  block (``o_a_proj``, block-diagonal), then ``o_b_proj`` mixes them.

Parameter names follow Hugging Face's ``DeepseekV4Attention`` (``state_dict`` loads as is). HF leaves ``sinks``
and ``position_bias`` uninitialised (``torch.empty``); here they start at 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn

from attn_core.deepseek.compressed_cache import CompressedKVCache
from attn_core.deepseek.compressor import CompressedIndexer, Compressor, rope_last
from attn_core.deepseek.latent_attention import RMSNorm
from attn_core.positions.rope import _check_base, rope_frequencies

__all__ = ["CompressedAttention", "CompressedKVCache"]


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


class CompressedAttention(nn.Module):
    """DeepSeek-V4 attention for its three layer types (see the module docstring).

    ``out, weights = layer(x, *, cache=None)``: x ``(B, L, hidden_dim)``, causal, positions from ``len(cache)``
    (0 without a cache). Returns out ``(B, L, hidden_dim)`` and weights ``(B, H, L, K + T)``: the ``K`` window
    keys (all ``L`` tokens without a cache; the held window, then the new tokens, with one), then one column per
    compressed entry (``T = L // m`` without a cache). Rows sum below 1: the sink takes the rest.
    """

    def __init__(
        self,
        hidden_dim: int,
        num_heads: int,
        *,
        head_dim: int,
        q_lora_rank: int,
        qk_rope_head_dim: int,
        sliding_window: int,
        o_groups: int,
        o_lora_rank: int,
        compress_rate: int | None = None,
        index_topk: int | None = None,
        index_n_heads: int = 64,
        index_head_dim: int = 128,
        rope_base: float = 10000.0,
        rope_scaling: dict | None = None,
        eps: float = 1e-6,
    ):
        super().__init__()
        for name, value in (
            ("hidden_dim", hidden_dim),
            ("num_heads", num_heads),
            ("head_dim", head_dim),
            ("q_lora_rank", q_lora_rank),
            ("qk_rope_head_dim", qk_rope_head_dim),
            ("sliding_window", sliding_window),
            ("o_groups", o_groups),
            ("o_lora_rank", o_lora_rank),
        ):
            _positive_int(name, value)
        if qk_rope_head_dim % 2 or qk_rope_head_dim > head_dim:
            raise ValueError(
                f"qk_rope_head_dim must be even (RoPE rotates pairs) and at most head_dim={head_dim} (it rotates the "
                f"last qk_rope_head_dim features), got {qk_rope_head_dim}. DeepSeek-V4 uses 64 of 512."
            )
        if num_heads % o_groups:
            raise ValueError(
                f"o_groups ({o_groups}) must divide num_heads ({num_heads}): the grouped output projection splits "
                "the heads into equal groups (V4-Flash: 64 heads, 8 groups)."
            )
        if compress_rate is not None:
            _positive_int("compress_rate (or None for a sliding-window layer)", compress_rate)
        if index_topk is not None:
            if compress_rate is None:
                raise ValueError(
                    "index_topk needs compress_rate: the indexer picks compressed entries (CSA), so a layer with "
                    "index_topk must compress (compress_rate=4 in V4). Drop index_topk for a sliding-window layer."
                )
            _positive_int("index_topk", index_topk)
            _positive_int("index_n_heads", index_n_heads)
            _positive_int("index_head_dim", index_head_dim)
            if index_head_dim < qk_rope_head_dim:
                raise ValueError(f"index_head_dim ({index_head_dim}) must be >= qk_rope_head_dim ({qk_rope_head_dim}).")
        if isinstance(eps, bool) or not isinstance(eps, int | float) or not eps > 0:
            raise ValueError(f"eps must be a number > 0, got {eps!r}.")
        self.hidden_dim, self.num_heads, self.head_dim = hidden_dim, num_heads, head_dim
        self.q_lora_rank, self.qk_rope_head_dim, self.sliding_window = q_lora_rank, qk_rope_head_dim, sliding_window
        self.o_groups, self.o_lora_rank, self.compress_rate, self.index_topk = (
            o_groups,
            o_lora_rank,
            compress_rate,
            index_topk,
        )
        self.rope_base, self.eps = _check_base(rope_base), float(eps)
        if rope_scaling is not None:
            if not isinstance(rope_scaling, Mapping):
                raise TypeError(
                    "rope_scaling must be a dict with Hugging Face's rope_parameters keys (e.g. {'rope_type': 'yarn', "
                    f"'factor': 16, 'original_max_position_embeddings': 65536}}) or None, "
                    f"got {type(rope_scaling).__name__}."
                )
            rope_scaling = dict(rope_scaling)  # a copy: never modified
            if rope_scaling.get("rope_type", rope_scaling.get("type")) == "yarn":
                rope_scaling.setdefault("attention_factor", 1.0)  # V4 does not scale cos/sin (HF's DeepseekV4Config)
            rope_frequencies(qk_rope_head_dim, base=self.rope_base, scaling=rope_scaling)  # validates rope_scaling
        self.rope_scaling = rope_scaling
        self.scale = head_dim**-0.5

        self.q_a_proj = nn.Linear(hidden_dim, q_lora_rank, bias=False)  # hidden -> q_lora_rank
        self.q_a_norm = RMSNorm(q_lora_rank, eps)
        self.q_b_proj = nn.Linear(q_lora_rank, num_heads * head_dim, bias=False)  # q_lora_rank -> H * D
        self.kv_proj = nn.Linear(hidden_dim, head_dim, bias=False)  # hidden -> D: the one K = V head
        self.kv_norm = RMSNorm(head_dim, eps)
        group_in = num_heads * head_dim // o_groups
        self.o_a_proj = nn.Linear(group_in, o_groups * o_lora_rank, bias=False)  # block-diagonal, one block a group
        self.o_b_proj = nn.Linear(o_groups * o_lora_rank, hidden_dim, bias=False)  # G * o_lora -> hidden
        self.sinks = nn.Parameter(torch.zeros(num_heads))  # (H,): one sink logit per head
        self.compressor = None
        if compress_rate is not None:
            rope = dict(rope_dim=qk_rope_head_dim, rope_base=self.rope_base, eps=eps, rope_scaling=self.rope_scaling)
            overlap = index_topk is not None  # CSA's overlapping windows; HCA's are disjoint
            self.compressor = Compressor(hidden_dim, head_dim, compress_rate, overlap=overlap, **rope)
            if overlap:
                self.compressor.indexer = CompressedIndexer(
                    hidden_dim, q_lora_rank, index_head_dim, index_n_heads, compress_rate, index_topk, **rope
                )

    @property
    def layer_type(self) -> str:
        if self.compress_rate is None:
            return "sliding_attention"
        return "compressed_sparse_attention" if self.index_topk else "heavily_compressed_attention"

    def extra_repr(self) -> str:
        return (
            f"{self.layer_type}: hidden_dim={self.hidden_dim}, num_heads={self.num_heads}, head_dim={self.head_dim}, "
            f"qk_rope_head_dim={self.qk_rope_head_dim}, sliding_window={self.sliding_window}, "
            f"compress_rate={self.compress_rate}, index_topk={self.index_topk}, o_groups={self.o_groups}, "
            f"rope_base={self.rope_base}, rope_scaling={self.rope_scaling}"
        )

    def _rms(self, t: torch.Tensor) -> torch.Tensor:
        """q_b_norm: a weightless RMSNorm over each head's features."""
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., D)

    def _compressed(self, x, q_latent, positions, cache) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Every compressed entry so far ``(B, T, D)`` and which ones each query reads ``(B or 1, Lq, T)``."""
        if self.compressor is None:
            return None, None
        pools = cache.pools if cache is not None else {}
        entries, state = self.compressor.update(x, pools.get("compressor"))  # (B, T, D)
        closed = (positions + 1) // self.compress_rate  # (Lq,): entries whose window has closed by each query
        visible = torch.arange(entries.shape[1], device=x.device) < closed[:, None]  # (Lq, T)
        if self.index_topk is not None:  # CSA: only the indexer's picks among them
            indexer = self.compressor.indexer
            index_entries, index_state = indexer.update(x, pools.get("indexer"))  # (B, T, index_head_dim)
            picks = indexer.pick(x, q_latent, index_entries, positions)  # (B, Lq, k), -1 = none
            slots = torch.where(picks < 0, entries.shape[1], picks)  # (B, Lq, k): -1 -> a spare last column
            chosen = torch.zeros(*picks.shape[:2], entries.shape[1] + 1, dtype=torch.bool, device=x.device)
            visible = visible & chosen.scatter_(-1, slots, True)[..., :-1]  # (B, Lq, T)
            if cache is not None:
                cache.pools["indexer"] = index_state
        if cache is not None:
            cache.pools["compressor"] = state
        return entries, visible

    def forward(self, x: torch.Tensor, *, cache: CompressedKVCache | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != self.hidden_dim:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must have shape (B, L, hidden_dim={self.hidden_dim}), got {shape}.")
        if cache is not None:
            if not isinstance(cache, CompressedKVCache):
                raise TypeError(f"cache must be an attn_core.CompressedKVCache, got {type(cache).__name__}.")
            cache.check_batch(x.shape[0], self.head_dim)
            cache.bind(self)
        batch, q_len, _ = x.shape
        heads, head_dim, rope = self.num_heads, self.head_dim, self.qk_rope_head_dim
        start = len(cache) if cache is not None else 0
        positions = torch.arange(start, start + q_len, device=x.device)  # (Lq,)

        q_latent = self.q_a_norm(self.q_a_proj(x))  # (B, Lq, q_lora_rank): also the indexer's query input
        q = self.q_b_proj(q_latent).view(batch, q_len, heads, head_dim).transpose(1, 2)  # (B, H, Lq, D)
        rotary = (rope, self.rope_base, self.rope_scaling)
        q = rope_last(self._rms(q), positions, *rotary)  # (B, H, Lq, D)
        kv = rope_last(self.kv_norm(self.kv_proj(x)), positions, *rotary)  # (B, Lq, D): K = V

        if cache is not None and cache.window_keys is not None:
            kv = torch.cat([cache.window_keys, kv], dim=1)  # (B, K, D): the held window, then the new tokens
        key_positions = torch.arange(start + q_len - kv.shape[1], start + q_len, device=x.device)  # (K,)
        distance = positions[:, None] - key_positions[None, :]  # (Lq, K)
        visible = (distance >= 0) & (distance < self.sliding_window)  # (Lq, K): causal, last W tokens
        entries, entries_visible = self._compressed(x, q_latent, positions, cache)  # (B, T, D), (B?, Lq, T)
        if cache is not None:
            cache.window_keys = kv[:, -self.sliding_window :]  # (B, <= W, D)
            cache._length += q_len
        keys = kv if entries is None else torch.cat([kv, entries], dim=1)  # (B, K + T, D)
        if entries is not None:
            visible = torch.cat([visible.expand(*entries_visible.shape[:-1], -1), entries_visible], dim=-1)

        # One softmax over the union of both streams and a per-head sink logit (its weight is dropped).
        scores = (q @ keys.unsqueeze(1).transpose(-2, -1)) * self.scale  # (B, H, Lq, K + T)
        scores = scores.masked_fill(~visible.unsqueeze(-3), -math.inf)  # (B, H, Lq, K + T)
        sink = self.sinks.to(scores.dtype).view(1, heads, 1, 1).expand(batch, -1, q_len, 1)  # (B, H, Lq, 1)
        weights = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]  # (B, H, Lq, K + T)
        out = weights @ keys.unsqueeze(1)  # (B, H, Lq, D): the keys are the values
        # The value carried its key's rotation: rotate the rope slice back by the query's position.
        out = rope_last(out, -positions, *rotary)  # (B, H, Lq, D)

        group_in = heads * head_dim // self.o_groups  # spelled out: reshape cannot infer -1 when L = 0
        grouped = out.transpose(1, 2).reshape(batch, q_len, self.o_groups, group_in)  # (B, Lq, G, H * D / G)
        blocks = self.o_a_proj.weight.view(self.o_groups, self.o_lora_rank, -1)  # (G, o_lora, H * D / G)
        mixed = torch.einsum("blgi,goi->blgo", grouped, blocks).flatten(2)  # (B, Lq, G * o_lora)
        return self.o_b_proj(mixed), weights  # (B, Lq, hidden), (B, H, Lq, K + T)
