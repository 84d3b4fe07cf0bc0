"""A cache's sinks on a layer with its own sliding window: ``GroupedQueryAttention(sliding_window=W)`` over
``KVCache(window=W', num_sinks=S)`` shows every query its last ``min(W, W')`` keys AND the first ``S`` tokens,
however far back they are. The cache promises "the last W' and the first S"; the layer's window bounds only
the others (it used to hide the sinks too, once they were W tokens back).

float64 throughout: the cached and the full pass are the same sums in another order, so 1e-12 is far above
the rounding (~1e-16 relative on O(1) values) and far below a hidden or extra key (it moves outputs by ~1e-1).
The reference is a twin layer WITHOUT a window and WITHOUT a cache, given the mask explicitly.
"""

from __future__ import annotations

import pytest
import torch
from reference import F64

import attn_core as ac

HIDDEN, HEAD_DIM, LENGTH = 24, 6, 19


def make_pair(sliding_window: int, *, rope: bool, seed: int = 0):
    """(layer with its own window, twin with the same weights and no window)."""
    torch.manual_seed(seed)
    base = 100.0 if rope else None
    layer = ac.GroupedQueryAttention(HIDDEN, 4, 2, head_dim=HEAD_DIM, rope_base=base, sliding_window=sliding_window)
    twin = ac.GroupedQueryAttention(HIDDEN, 4, 2, head_dim=HEAD_DIM, rope_base=base)
    twin.load_state_dict(layer.state_dict())
    return layer.to(F64).eval(), twin.to(F64).eval()


def sinks_mask(length: int, window: int, num_sinks: int) -> torch.Tensor:
    """(L, L), True = may attend: causal, and distance < window or key < num_sinks."""
    query, key = torch.arange(length)[:, None], torch.arange(length)[None, :]  # (L, 1), (1, L)
    return (key <= query) & ((query - key < window) | (key < num_sinks))  # (L, L)


def chunking(size: int, length: int) -> list[int]:
    return [size] * (length // size) + ([length % size] if length % size else [])


@pytest.mark.parametrize("size", [1, 2, 3, 5, LENGTH])
@pytest.mark.parametrize(
    ("layer_window", "cache_window", "num_sinks"),
    [(4, 4, 2), (4, 6, 2), (6, 4, 1), (3, 8, 3)],
    ids=["W=W'", "W<W'", "W>W'", "W<<W'"],
)
@pytest.mark.parametrize("rope", [True, False], ids=["rope", "no-rope"])
def test_sinks_stay_visible_through_the_layer_window(size, layer_window, cache_window, num_sinks, rope):
    layer, twin = make_pair(layer_window, rope=rope)
    x = torch.randn(2, LENGTH, HIDDEN, dtype=F64, generator=torch.Generator().manual_seed(1))  # (B, L, hidden)
    mask = sinks_mask(LENGTH, min(layer_window, cache_window), num_sinks)  # (L, L)
    with torch.no_grad():
        expected, expected_weights = twin(x, mask=mask)  # (B, L, hidden), (B, H, L, L)
        cache, outs, start = ac.KVCache(window=cache_window, num_sinks=num_sinks), [], 0
        for n in chunking(size, LENGTH):
            out, weights = layer(x[:, start : start + n], cache=cache)  # (B, n, hidden), (B, H, n, T)
            positions = cache.key_positions  # (T,): the original position of each slot
            if positions is None:
                positions = torch.arange(weights.shape[-1])  # (T,)
            scattered = torch.zeros(2, 4, n, LENGTH, dtype=F64)  # (B, H, n, L)
            scattered[..., positions[positions < start + n]] = weights[..., positions < start + n]
            torch.testing.assert_close(scattered, expected_weights[:, :, start : start + n], rtol=0, atol=1e-12)
            outs.append(out)
            start += n
    torch.testing.assert_close(torch.cat(outs, dim=1), expected, rtol=0, atol=1e-12)
    last_query_weights = expected_weights[:, :, -1]  # (B, H, L): the sinks are far outside both windows here
    assert (last_query_weights[..., :num_sinks] > 0).all()


def test_layer_window_alone_still_hides_old_keys():
    """Without sinks the layer's window is the bound, whichever window is the smaller."""
    layer, twin = make_pair(3, rope=True)
    x = torch.randn(1, LENGTH, HIDDEN, dtype=F64, generator=torch.Generator().manual_seed(2))  # (1, L, hidden)
    with torch.no_grad():
        expected, _ = twin(x, mask=sinks_mask(LENGTH, 3, 0))  # (1, L, hidden)
        cache = ac.KVCache(window=8)
        steps = torch.cat([layer(x[:, t : t + 1], cache=cache)[0] for t in range(LENGTH)], dim=1)  # (1, L, hidden)
    torch.testing.assert_close(steps, expected, rtol=0, atol=1e-12)
