"""The model runner (vLLM's ``GPUModelRunner``, nano-vllm's ``ModelRunner``): run one step's scheduled tokens
through the model on the paged caches and return the logits of the requests that reached their last token.

Every decode (one token per request) runs in ONE call: the requests form a left-padded batch whose keys are
gathered from their blocks, with Hugging Face's ``attention_mask`` hiding the padding (positions count real
tokens, so each row is computed as it would be alone). Decoding is memory-bound (every weight is read for one
token), so reading the weights once for the whole batch is where continuous batching gains. Each prefill chunk
runs as its own call here; vLLM instead flattens every chunk and decode into one sequence of tokens with
per-sequence attention (FlashAttention's varlen kernel), which this teaching version leaves out.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attn_core.caches.paged_cache import PagedKVCache

__all__ = ["PaddedDecodeView", "run_step"]


class PaddedDecodeView:
    """One layer's cache for a batch of decoding sequences: ``update`` appends row ``b``'s new key/value to
    sequence ``seq_ids[b]`` and returns every row's keys left-padded to one length ``(B, Hkv, T + 1, D)``.
    ``window`` (a sliding-window layer): only the last ``min(T + 1, window)`` columns, the ones the new queries
    can see, ``(B, Hkv, min(T + 1, window), D)``."""

    key_positions = None  # keys sit at indices 0 .. T in order (padding first); the mask hides the padding

    def __init__(
        self, cache: PagedKVCache, seq_ids: list[int | str], lengths: list[int], window: int | None = None
    ) -> None:
        self.cache, self.seq_ids, self.lengths = cache, seq_ids, lengths
        self.width = max(lengths)  # the longest row's cached tokens: every row is padded to it
        self.keep = self.width + 1 if window is None else min(self.width + 1, window)

    def __len__(self) -> int:
        return self.width

    def bind(self, owner: object) -> None:
        self.cache.bind(owner)

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows_k, rows_v = [], []
        for row, seq_id in enumerate(self.seq_ids):
            k, v = self.cache.sequence(seq_id).update(keys[row : row + 1], values[row : row + 1])  # (1, Hkv, T_b+1, D)
            k, v = k[:, :, -self.keep :], v[:, :, -self.keep :]  # a window's older keys are masked anyway
            pad = self.keep - k.shape[-2]  # left padding: the real tokens end at the new one
            rows_k.append(F.pad(k, (0, 0, pad, 0)))  # (1, Hkv, keep, D)
            rows_v.append(F.pad(v, (0, 0, pad, 0)))  # (1, Hkv, keep, Dv)
        return torch.cat(rows_k), torch.cat(rows_v)  # (B, Hkv, keep, D), (B, Hkv, keep, Dv)


def _embed(lm, ids: torch.Tensor) -> torch.Tensor:
    # Gemma scales the embeddings by sqrt(hidden), rounded to the weights' dtype (as Gemma3.forward does).
    scale = torch.tensor(math.sqrt(lm.config.hidden_dim), dtype=lm.embed.weight.dtype)
    return lm.embed(ids) * scale  # (B, L, hidden)


@torch.no_grad()
def run_step(lm, caches: list[PagedKVCache], work: list[tuple[int | str, list[int], int, bool]]) -> dict:
    """``work``: ``(seq_id, new token ids, tokens already cached, wants a token)`` per request; ``caches``: one
    per layer of ``lm``. Runs every layer, then ONE output-layer product for the requests that want a token (the
    tied 262k-row output layer is most of Gemma 3 270M's weights: reading it once per step, not once per
    request, is most of the saving). Returns ``{seq_id: logits (vocab,)}`` for those requests (the engine
    samples each with its own parameters)."""
    device = lm.embed.weight.device
    last_hidden = {}  # seq_id -> (hidden,) final hidden state of its last token
    for seq_id, ids, _, wants in work:
        if len(ids) > 1:  # a prefill chunk: its own pass through the layers
            x = _embed(lm, torch.tensor([ids], device=device))  # (1, n, hidden)
            for block, cache in zip(lm.layers, caches, strict=True):
                x, _ = block(x, cache.sequence(seq_id))  # (1, n, hidden); positions follow the cached tokens
            if wants:
                last_hidden[seq_id] = x[0, -1]  # (hidden,)
    decodes = [(seq_id, ids[0], cached, wants) for seq_id, ids, cached, wants in work if len(ids) == 1]
    if decodes:
        seq_ids = [seq_id for seq_id, _, _, _ in decodes]
        lengths = torch.tensor([cached for _, _, cached, _ in decodes], device=device)  # (B,)
        width = int(lengths.max())
        real = torch.arange(width + 1, device=device) >= width - lengths[:, None]  # (B, width + 1): padding first
        views = [
            PaddedDecodeView(cache, seq_ids, lengths.tolist(), getattr(block.attention, "sliding_window", None))
            for block, cache in zip(lm.layers, caches, strict=True)
        ]
        x = _embed(lm, torch.tensor([[token] for _, token, _, _ in decodes], device=device))  # (B, 1, hidden)
        positions = lengths[:, None]  # (B, 1): each row's own position, whatever its padding
        for block, view in zip(lm.layers, views, strict=True):
            x, _ = block(x, view, positions=positions, key_mask=real)  # (B, 1, hidden)
        for row, (seq_id, _, _, wants) in enumerate(decodes):
            if wants:
                last_hidden[seq_id] = x[row, -1]  # (hidden,)
    if not last_hidden:
        return {}
    hidden = torch.stack(list(last_hidden.values()))  # (R, hidden)
    logits = lm.final_norm(hidden) @ lm.embed.weight.T  # (R, vocab): the output layer is the embedding
    return dict(zip(last_hidden, logits, strict=True))
