"""A padded batch for a decoder: Hugging Face's ``attention_mask`` checked, and the positions it implies.

``attention_mask (B, N)``: 1 = a real token, 0 = padding, over every token of the sequence so far (the cached
ones, then the new ones). Positions count real tokens only (``cumsum(mask) - 1``, as Hugging Face's
``generate`` does), so a row left-padded by ``p`` tokens gets the positions it would have alone; padding
tokens get position 1 (as in Hugging Face; their outputs are never used). Padding keys are hidden from every
query (``GroupedQueryAttention(key_mask=...)``). Windows are counted in token indices, as Hugging Face counts
them; for a row padded on one side only the real tokens sit at consecutive indices, so the window a real
token sees is the one it sees alone.
"""

from __future__ import annotations

import torch

__all__ = ["check_attention_mask", "positions_from_mask"]


def check_attention_mask(attention_mask, batch: int, length: int, *, cached: int = 0) -> torch.Tensor:
    """``attention_mask`` as a bool tensor ``(batch, cached + length)``; ValueError naming the problem otherwise.

    Accepts bool or integer dtypes (Hugging Face's tokenizers return int64) holding only 0 and 1; every row
    needs at least one real token."""
    expected = (batch, cached + length)
    where = f" ({cached} cached + {length} new tokens)" if cached else ""
    if not isinstance(attention_mask, torch.Tensor):
        raise ValueError(
            f"attention_mask must be a tensor of shape (batch, seq_len) = {expected}{where} with 1 = real token, "
            f"0 = padding, got {type(attention_mask).__name__}."
        )
    if tuple(attention_mask.shape) != expected:
        raise ValueError(
            f"attention_mask must have shape (batch, seq_len) = {expected}{where}, one entry per token "
            f"(1 = real, 0 = padding), got {tuple(attention_mask.shape)}."
        )
    if attention_mask.dtype != torch.bool:
        if attention_mask.dtype.is_floating_point or attention_mask.dtype.is_complex:
            raise ValueError(
                f"attention_mask must hold integers or booleans (1 = real token, 0 = padding), got "
                f"{attention_mask.dtype}. Convert it with .long() if it holds only 0.0 and 1.0."
            )
        bad = (attention_mask != 0) & (attention_mask != 1)  # (B, N)
        if bad.any():
            values = sorted(set(attention_mask[bad].tolist()))[:5]
            raise ValueError(
                f"attention_mask must hold only 0 (padding) and 1 (real token), got {values}. It is Hugging "
                "Face's per-token mask, not an additive mask or a (B, L, L) attention mask."
            )
        attention_mask = attention_mask == 1  # (B, N) bool
    empty = (~attention_mask.any(dim=-1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(
            f"attention_mask rows {empty} have no real token (all 0): each row needs at least one (e.g. <bos>)."
        )
    return attention_mask


def positions_from_mask(real: torch.Tensor) -> torch.Tensor:
    """RoPE positions ``(B, N)`` from a bool mask ``(B, N)``: real tokens count 0, 1, 2, ...; padding gets 1."""
    return (real.long().cumsum(dim=-1) - 1).masked_fill(~real, 1)  # (B, N)
