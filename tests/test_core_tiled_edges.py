"""tiled_attention at its edges (-inf scores in a whole key tile, grad mode on or off) and its memory/work promises."""

from __future__ import annotations

import warnings
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import attn_core as ac
from attn_core.flash.tiled import tiled_attention

F64 = torch.float64


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


class Recorder(TorchDispatchMode):
    """Counts aten ops, the largest output any op returns, and the storages bmm writes into."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.largest_output = 0
        self.bmm_storages: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        self.ops[name] += 1
        if isinstance(result, torch.Tensor):
            self.largest_output = max(self.largest_output, result.numel())
            if name == "bmm":
                self.bmm_storages.add(result.untyped_storage().data_ptr())
        return result


# --------------------------------------------------------------------------- -inf scores


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_first_key_tile_of_minus_inf_scores_gives_no_nan(is_causal):
    """Keys 0..7 (the whole first tile of 8) are -inf, so with q > 0 their scores are -inf.

    The running max stayed -inf and exp(-inf - -inf) was NaN. Softmax gives those keys weight 0:
    the result equals attention over the finite keys alone (and scaled_dot_product_attention).
    """
    q = randn(1, 2, 12, 4).abs() + 0.1  # (B, H, Lq, D), every entry > 0
    k, v = randn(1, 2, 20, 4, seed=1), randn(1, 2, 20, 3, seed=2)  # (B, H, Lk, D), (B, H, Lk, Dv)
    k[..., :8, :] = float("-inf")
    out = tiled_attention(q, k, v, is_causal=is_causal, block_size=8)  # (1, 2, 12, 3)
    expected, _ = ac.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    assert not out.isnan().any()
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    visible = torch.arange(20) >= 8  # (Lk,): the finite keys
    by_hand, _ = ac.scaled_dot_product_attention(
        q, k.masked_fill(~visible[:, None], 0.0), v, visible, is_causal=is_causal
    )
    torch.testing.assert_close(out, by_hand, rtol=1e-12, atol=1e-12)


def test_a_row_of_only_minus_inf_scores_is_nan_like_sdpa():
    """Every key -inf: softmax of all -inf is NaN in scaled_dot_product_attention; tiled agrees (no mask was given)."""
    q = torch.ones(1, 1, 3, 4, dtype=F64)
    k = torch.full((1, 1, 5, 4), float("-inf"), dtype=F64)
    v = randn(1, 1, 5, 2)
    expected, _ = ac.scaled_dot_product_attention(q, k, v)
    assert expected.isnan().all()
    assert tiled_attention(q, k, v, block_size=2).isnan().all()


# --------------------------------------------------------------------------- autograd


@pytest.mark.parametrize("needs_grad", ["q", "k", "v"])
def test_requires_grad_input_gets_the_gradients_of_sdpa(needs_grad):
    """Grad mode on and one input requiring grad: its gradient equals autograd through the naive kernel.

    (Until the backward was written this raised NotImplementedError; tests/test_tiled_backward.py
    covers the gradients in depth.)
    """
    q, k, v = randn(1, 2, 4, 8), randn(1, 2, 4, 8, seed=1), randn(1, 2, 4, 8, seed=2)
    inputs = {"q": q, "k": k, "v": v}
    inputs[needs_grad].requires_grad_(True)
    grad_out = randn(1, 2, 4, 8, seed=3)  # (B, H, Lq, Dv)
    (grad,) = torch.autograd.grad(tiled_attention(q, k, v, block_size=3), inputs[needs_grad], grad_out)
    (expected,) = torch.autograd.grad(ac.scaled_dot_product_attention(q, k, v)[0], inputs[needs_grad], grad_out)
    torch.testing.assert_close(grad, expected, rtol=0, atol=1e-12)


def test_requires_grad_input_works_without_grad_mode():
    """Under torch.no_grad() the same inputs run, and match scaled_dot_product_attention."""
    q = randn(1, 2, 4, 8).requires_grad_(True)
    k, v = randn(1, 2, 4, 8, seed=1), randn(1, 2, 4, 8, seed=2)
    with torch.no_grad():
        out = tiled_attention(q, k, v)
        expected, _ = ac.scaled_dot_product_attention(q, k, v)
    assert not out.requires_grad
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- memory and work


def test_never_materialises_the_score_matrix():
    """No op ever returns a tensor near (Lq, Lk) in size; the weights-returning kernel does."""
    length, block = 512, 64
    q, k, v = randn(1, 2, length, 16), randn(1, 1, length, 16, seed=1), randn(1, 1, length, 16, seed=2)
    for is_causal in (False, True):
        with Recorder() as recorder:
            tiled_attention(q, k, v, is_causal=is_causal, block_size=block)
        # The largest tensor any op returned is one score tile per kv head (2 query heads ·
        # 64 queries · 64 keys = 8192 elements) or the output (2·512·16); the matrix is 2·512².
        assert recorder.largest_output < length * length / 4, recorder.largest_output
        assert recorder.largest_output <= 2 * length * 16

    # The recorder does see a materialised matrix: the weights-returning kernel trips it.
    with Recorder() as recorder:
        ac.scaled_dot_product_attention(q, k, v)
    assert recorder.largest_output >= 2 * length * length


def test_causal_skips_future_key_tiles_and_masks_only_the_diagonal():
    """Causal computes 36 of the 64 tiles and builds a mask for the 8 diagonal ones only."""
    length, block = 512, 64
    tiles_per_side = length // block  # 8 query tiles, 8 key tiles
    q, k, v = randn(1, 2, length, 8), randn(1, 2, length, 8, seed=1), randn(1, 2, length, 8, seed=2)
    with Recorder() as full:
        tiled_attention(q, k, v, block_size=block)
    with Recorder() as causal:
        tiled_attention(q, k, v, is_causal=True, block_size=block)
    # One q·kᵀ (bmm) and one p·v (baddbmm) per computed tile.
    assert full.ops["bmm"] == full.ops["baddbmm_"] == tiles_per_side**2  # 64
    assert causal.ops["bmm"] == causal.ops["baddbmm_"] == tiles_per_side * (tiles_per_side + 1) // 2  # 36
    assert causal.ops["bmm"] / full.ops["bmm"] < 0.6
    assert full.ops["masked_fill_"] == 0
    assert causal.ops["masked_fill_"] == tiles_per_side  # the diagonal tiles only


def test_every_score_tile_reuses_one_buffer_without_resizing():
    """All q·kᵀ tiles are written into one storage, as (N, G·Tq, Tk) views: bmm never has to
    resize its out= tensor (torch warns when it does), including the short last tile."""
    q = randn(1, 2, 128, 8, dtype=torch.float32)  # (B, Hq, Lq, D)
    k, v = randn(1, 1, 100, 8, seed=1, dtype=torch.float32), randn(1, 1, 100, 8, seed=2, dtype=torch.float32)
    with warnings.catch_warnings(record=True) as caught, Recorder() as recorder:
        warnings.simplefilter("always")
        tiled_attention(q, k, v, block_size=32)
    assert recorder.ops["bmm"] == 4 * 4  # 4 query tiles x 4 key tiles (the last one 4 keys wide)
    assert len(recorder.bmm_storages) == 1
    assert [str(w.message) for w in caught] == []


def test_scratch_buffers_are_sized_by_the_queries_that_see_keys():
    """Causal with Lq = 100 > Lk = 4: only the last 4 queries see a key, so the score scratch
    holds 4 x 4 numbers, not block x 4. Nothing allocated is larger than the (1, 1, 100, 2) output."""
    q, k, v = randn(1, 1, 100, 2), randn(1, 1, 4, 2, seed=1), randn(1, 1, 4, 2, seed=2)
    with Recorder() as recorder:
        out = tiled_attention(q, k, v, is_causal=True, block_size=64)
    assert recorder.largest_output == out.numel() == 200  # a 64-row scratch would hold 64 x 4 = 256


@pytest.mark.parametrize(
    ("q_len", "k_len", "block", "masked_tiles"),
    [(4, 7, 4, 1), (8, 11, 4, 2), (8, 8, 4, 2), (5, 5, 2, 2)],
)
def test_causal_builds_a_mask_only_for_tiles_the_diagonal_crosses(q_len, k_len, block, masked_tiles):
    """A key tile that ends exactly where the tile's first query stops seeing keys needs no mask.

    Lq 4, Lk 7, block 4: query 0 sees keys 0..3, so key tile [0, 4) is fully visible and only
    [4, 7) is masked. Counted with masked_fill_ calls, one per masked tile.
    """
    q, k, v = randn(1, 1, q_len, 2), randn(1, 1, k_len, 2, seed=1), randn(1, 1, k_len, 2, seed=2)
    with Recorder() as recorder:
        out = tiled_attention(q, k, v, is_causal=True, block_size=block)
    assert recorder.ops["masked_fill_"] == masked_tiles
    expected, _ = ac.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
