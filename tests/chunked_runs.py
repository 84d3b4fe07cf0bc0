"""One helper the layer tests share: run a layer over a sequence in pieces through one cache.

Decode == prefill and "every chunking equal" are the same check with different cuts: ``[1] * L`` is decoding one
token at a time, ``[L]`` is prefill, anything between is chunked prefill.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


def run_in_chunks(
    layer: Callable, x: torch.Tensor, sizes: Sequence[int], cache, *, first: bool = False
) -> torch.Tensor:
    """``layer`` over x (B, L, hidden) in consecutive pieces of ``sizes`` through ``cache``; the outputs joined
    along L. ``first``: the layer returns ``(out, weights)`` and only ``out`` is kept."""
    assert sum(sizes) == x.shape[1], (sizes, x.shape)
    outs, start = [], 0
    for size in sizes:
        out = layer(x[:, start : start + size], cache=cache)  # (B, size, hidden) or (out, weights)
        outs.append(out[0] if first else out)
        start += size
    return torch.cat(outs, dim=1)  # (B, L, hidden)
