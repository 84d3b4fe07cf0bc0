"""DeepSeek-V4's compressors: every ``m`` tokens become one key/value entry, a learned softmax-pooling of them.

A compressed entry is a per-feature softmax over its window: ``entry_w = norm(Σ_j softmax_j(Z_j + B_j) ⊙ C_j)``
with ``C = x W_kv`` the tokens' projected keys, ``Z = x W_gate`` their gates and ``B`` a learned bias per slot of the
window (``position_bias``). The entry is then rotated (interleaved RoPE on its last features) at the position of
the window's first token, ``w · m``, and becomes visible to a query at position ``t`` once its window is closed,
``(w + 1) · m <= t + 1``.

- HCA ("heavily compressed", m = 128 in V4): non-overlapping windows, projections ``head_dim`` wide.
- CSA ("compressed sparse", m = 4): projections ``2 · head_dim`` wide, two series ``Ca`` (first half) and ``Cb``
  (second half); entry ``w`` pools window ``w - 1``'s ``Ca`` together with window ``w``'s ``Cb`` over ``2m`` slots
  (overlapping windows, stride ``m``; window 0's missing half gets weight 0). A lightning indexer
  (:class:`CompressedIndexer`, a smaller compressor of its own plus scoring heads) then picks each query's top-k
  entries, as in DeepSeek-V3.2 (:mod:`attn_core.deepseek.lightning_indexer`), but over entries rather than tokens.

Parameter names follow Hugging Face's ``DeepseekV4HCACompressor`` / ``DeepseekV4CSACompressor`` /
``DeepseekV4Indexer``. HF leaves ``position_bias`` uninitialised (``torch.empty``); here it starts at 0 (plain
softmax of the gates). A :class:`PoolState` holds what decoding needs between calls: the entries so far, the
open window's pending tokens and (CSA) the last closed window, whose ``Ca`` half the next entry reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from attn_core.deepseek.latent_attention import RMSNorm
from attn_core.deepseek.lightning_indexer import top_k_picks
from attn_core.positions.rope import apply_rope

__all__ = ["Compressor", "CompressedIndexer", "PoolState", "rope_last"]


def rope_last(
    t: torch.Tensor, positions: torch.Tensor, rope_dim: int, base: float, scaling: dict | None = None
) -> torch.Tensor:
    """Interleaved RoPE on the LAST ``rope_dim`` features of ``t (..., L, D)`` (V4's partial RoPE); ``scaling``:
    Hugging Face's rope_parameters keys (V4's compressed layers: YaRN), as in :func:`attn_core.apply_rope`."""
    rotated = apply_rope(t[..., -rope_dim:], positions, base=base, interleaved=True, scaling=scaling)  # (.., L, rope)
    return torch.cat([t[..., :-rope_dim], rotated], dim=-1)  # (..., L, D)


@dataclass
class PoolState:
    """One compressor's decoding state (inside a :class:`attn_core.CompressedKVCache`)."""

    entries: torch.Tensor  # (B, T, D): every compressed entry so far, rotated
    pending_kv: torch.Tensor  # (B, p, width), p < m: tokens of the open window, projected
    pending_gate: torch.Tensor  # (B, p, width)
    previous_kv: torch.Tensor | None = None  # (B, m, width): the last closed window (CSA's overlap)
    previous_gate: torch.Tensor | None = None  # (B, m, width)

    @property
    def num_windows(self) -> int:
        return self.entries.shape[1]

    def nbytes(self) -> int:
        held = (self.entries, self.pending_kv, self.pending_gate, self.previous_kv, self.previous_gate)
        return sum(t.numel() * t.element_size() for t in held if t is not None)


class Compressor(nn.Module):
    """Pools every ``compress_rate`` tokens into one entry of ``head_dim`` (see the module docstring)."""

    def __init__(
        self,
        hidden_dim: int,
        head_dim: int,
        compress_rate: int,
        *,
        overlap: bool,
        rope_dim: int,
        rope_base: float,
        eps,
        rope_scaling: dict | None = None,
    ):
        super().__init__()
        self.head_dim, self.compress_rate, self.overlap = head_dim, compress_rate, overlap
        self.rope_dim, self.rope_base, self.rope_scaling = rope_dim, rope_base, rope_scaling
        width = 2 * head_dim if overlap else head_dim  # CSA: two series, Ca then Cb
        self.kv_proj = nn.Linear(hidden_dim, width, bias=False)  # hidden -> width
        self.gate_proj = nn.Linear(hidden_dim, width, bias=False)  # hidden -> width
        self.position_bias = nn.Parameter(torch.zeros(compress_rate, width))  # (m, width): one bias per window slot
        self.kv_norm = RMSNorm(head_dim, eps)

    def pool(
        self, kv: torch.Tensor, gate: torch.Tensor, first_window: int, previous: tuple[torch.Tensor, ...] | None
    ) -> torch.Tensor:
        """Entries of the closed windows in ``kv, gate (B, n·m, width)``, the first one being window
        ``first_window``; ``previous`` the (kv, gate) ``(B, m, width)`` of the window before it (CSA), or None."""
        batch, m, head_dim = kv.shape[0], self.compress_rate, self.head_dim
        n = kv.shape[1] // m
        if n == 0:
            return kv.new_zeros(batch, 0, head_dim)  # (B, 0, D): no window closed
        kv = kv.view(batch, n, m, -1)  # (B, n, m, width)
        gate = gate.view(batch, n, m, -1) + self.position_bias  # (B, n, m, width)
        if self.overlap:  # entry w pools [window w-1's Ca, window w's Cb]: 2m slots, stride m
            if previous is None:  # before window 0: nothing, weight 0 (a gate of -inf)
                before_kv = kv.new_zeros(batch, 1, m, 2 * head_dim)  # (B, 1, m, width)
                before_gate = gate.new_full((batch, 1, m, 2 * head_dim), -math.inf)  # (B, 1, m, width)
            else:
                before_kv = previous[0].unsqueeze(1)  # (B, 1, m, width)
                before_gate = previous[1].unsqueeze(1) + self.position_bias  # (B, 1, m, width)
            earlier_kv = torch.cat([before_kv, kv[:, :-1]], dim=1)[..., :head_dim]  # (B, n, m, D): Ca of w - 1
            earlier_gate = torch.cat([before_gate, gate[:, :-1]], dim=1)[..., :head_dim]  # (B, n, m, D)
            kv = torch.cat([earlier_kv, kv[..., head_dim:]], dim=2)  # (B, n, 2m, D): then Cb of w
            gate = torch.cat([earlier_gate, gate[..., head_dim:]], dim=2)  # (B, n, 2m, D)
        weights = torch.softmax(gate, dim=2)  # (B, n, slots, D): a softmax per feature over the window's slots
        entries = self.kv_norm((weights * kv).sum(dim=2))  # (B, n, D)
        positions = (torch.arange(n, device=kv.device) + first_window) * m  # (n,): the window's first token
        return rope_last(entries, positions, self.rope_dim, self.rope_base, self.rope_scaling)  # (B, n, D)

    def update(self, x: torch.Tensor, state: PoolState | None) -> tuple[torch.Tensor, PoolState]:
        """Project the new tokens ``x (B, L, hidden)``, close the windows they complete; return every entry so
        far ``(B, T, D)`` and the new state (``state`` None: the sequence starts here)."""
        kv, gate = self.kv_proj(x), self.gate_proj(x)  # (B, L, width) each
        first, previous = 0, None
        if state is not None:
            kv = torch.cat([state.pending_kv, kv], dim=1)  # (B, p + L, width): the open window first
            gate = torch.cat([state.pending_gate, gate], dim=1)  # (B, p + L, width)
            first = state.num_windows
            if state.previous_kv is not None:
                previous = (state.previous_kv, state.previous_gate)
        usable = kv.shape[1] // self.compress_rate * self.compress_rate  # tokens in closed windows
        new_entries = self.pool(kv[:, :usable], gate[:, :usable], first, previous)  # (B, n, D)
        entries = new_entries if state is None else torch.cat([state.entries, new_entries], dim=1)  # (B, T, D)
        if usable:  # the last closed window is the next entry's Ca (CSA only needs it)
            previous = (kv[:, usable - self.compress_rate : usable], gate[:, usable - self.compress_rate : usable])
        keep = previous if self.overlap and previous is not None else (None, None)
        return entries, PoolState(entries, kv[:, usable:], gate[:, usable:], *keep)


class _Scorer(nn.Module):
    """The indexer's per-query head weights (HF's ``DeepseekV4IndexerScorer``)."""

    def __init__(self, hidden_dim: int, num_heads: int):
        super().__init__()
        self.weights_proj = nn.Linear(hidden_dim, num_heads, bias=False)  # hidden -> index heads


class CompressedIndexer(Compressor):
    """CSA's lightning indexer: its own overlapping compressor at ``head_dim`` (the index width), query heads
    from the layer's query latent, ``score = Σ_h w_h relu(q_h · entry) / sqrt(head_dim)``, top-k entries."""

    def __init__(
        self, hidden_dim, q_lora_rank, head_dim, num_heads, compress_rate, topk, *, rope_dim, rope_base, eps, **scaling
    ):
        super().__init__(
            hidden_dim,
            head_dim,
            compress_rate,
            overlap=True,
            rope_dim=rope_dim,
            rope_base=rope_base,
            eps=eps,
            **scaling,
        )
        self.num_heads, self.topk = num_heads, topk
        self.q_b_proj = nn.Linear(q_lora_rank, num_heads * head_dim, bias=False)  # q_lora_rank -> Hi * Di
        self.scorer = _Scorer(hidden_dim, num_heads)

    def pick(self, x: torch.Tensor, q_latent: torch.Tensor, entries: torch.Tensor, positions: torch.Tensor):
        """Top-k visible entries for queries at ``positions (Lq,)``: ``(B, Lq, min(topk, T))`` int64, -1 = none."""
        batch, q_len, _ = x.shape
        q = self.q_b_proj(q_latent).view(batch, q_len, self.num_heads, self.head_dim).transpose(1, 2)  # (B,Hi,Lq,Di)
        q = rope_last(q, positions, self.rope_dim, self.rope_base, self.rope_scaling)  # (B, Hi, Lq, Di)
        per_head = torch.relu(q @ entries.unsqueeze(1).transpose(-2, -1))  # (B, Hi, Lq, T)
        head_weights = self.scorer.weights_proj(x) / math.sqrt(self.num_heads)  # (B, Lq, Hi): no softmax
        scores = torch.einsum("bqh,bhqt->bqt", head_weights, per_head) / math.sqrt(self.head_dim)  # (B, Lq, T)
        ready = torch.arange(entries.shape[1], device=x.device) < ((positions + 1) // self.compress_rate)[:, None]
        scores = scores.masked_fill(~ready, -math.inf)  # (B, Lq, T): an open window's entry does not exist yet
        return top_k_picks(scores, self.topk)  # (B, Lq, k), -1 = nothing to pick; ties in entry order
