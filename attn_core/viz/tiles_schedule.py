"""The walk the tile explorer of notebook 08 draws, without drawing it: which tiles, in which order, and what one
query row's running max and sum are after each key block. Also the explorer's parameters and their checks.

``tile_schedule``, ``demo_scores``, ``online_softmax_trace`` and ``tile_codes`` are public through
:mod:`attn_core.viz.tiles`; ``tiles_render`` draws them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from attn_core.masks import causal_mask
from attn_core.viz.widgets import merge_params

TILE_DEFAULTS = dict(
    step=6,
    q_len=32,
    k_len=32,
    block_q=8,
    block_k=8,
    is_causal=True,
    row=15,
    seed=0,
    head_dim=16,
    panel_size=2.8,
    font_scale=1.0,
    values=False,
)

# Codes of the tile image (one cell per score entry).
PENDING, DONE, CURRENT, SKIPPED = 0, 1, 2, 3


@dataclass(frozen=True)
class TileStep:
    """One tile of the loop: query rows ``q_start:q_stop`` × key columns ``k_start:k_stop``.

    ``status`` is ``"computed"`` or ``"skipped"`` (every entry hidden by the causal mask).
    ``partial`` is True for a computed tile that straddles the causal diagonal: the mask must be
    applied inside it.
    """

    index: int
    q_block: int
    k_block: int
    q_start: int
    q_stop: int
    k_start: int
    k_stop: int
    status: str
    partial: bool


@dataclass(frozen=True)
class SoftmaxTrace:
    """Online-softmax state of one query row after each key block (float64, shape ``(num_blocks,)``).

    ``running_max[j]`` is ``m_j``, the max over the keys of blocks ``0..j``; ``running_sum[j]`` is
    ``l_j = sum exp(s - m_j)`` over those keys; ``rescale[j] = exp(m_{j-1} - m_j)`` is the factor
    that block ``j`` applied to the old sum and output accumulator (0 for the first block with a
    visible key, since there was nothing to keep; 1 while no key has been visible).
    ``block_max[j]`` is the max of block ``j`` alone (``-inf`` if all of it is masked).
    """

    block_max: torch.Tensor
    running_max: torch.Tensor
    running_sum: torch.Tensor
    rescale: torch.Tensor

    @property
    def final_max(self) -> float:
        return float(self.running_max[-1])

    @property
    def final_sum(self) -> float:
        return float(self.running_sum[-1])


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}.")
    return int(value)


def _params(step, overrides: dict) -> dict:
    params = merge_params(TILE_DEFAULTS, overrides, "tile explorer")
    if step is not None:
        params["step"] = step
    for name in ("q_len", "k_len", "block_q", "block_k", "head_dim"):
        _check_int(name, params[name], 1)
    total = len(
        tile_schedule(params["q_len"], params["k_len"], params["block_q"], params["block_k"], params["is_causal"])
    )
    if _check_int("step", params["step"], 0) > total:
        raise ValueError(f"step {params['step']} does not exist: this grid has {total} tiles (steps 0..{total}).")
    if not 0 <= _check_int("row", params["row"], 0) < params["q_len"]:
        raise ValueError(
            f"row {params['row']} is outside the sequence: there are {params['q_len']} queries "
            f"(rows 0..{params['q_len'] - 1}). Pick a smaller row or more queries."
        )
    return params


@lru_cache(maxsize=64)
def _schedule(q_len: int, k_len: int, block_q: int, block_k: int, is_causal: bool) -> tuple[TileStep, ...]:
    offset = k_len - q_len  # bottom-right causal alignment: query i sees keys 0 .. i + offset
    steps = []
    for q_block, q_start in enumerate(range(0, q_len, block_q)):
        q_stop = min(q_start + block_q, q_len)
        for k_block, k_start in enumerate(range(0, k_len, block_k)):
            k_stop = min(k_start + block_k, k_len)
            # The tile's last query sees the most keys; if even it cannot see the tile's first
            # key, every entry is masked. Its first query sees the fewest keys; if it sees the
            # tile's last key, no entry is masked.
            skipped = is_causal and k_start > q_stop - 1 + offset
            partial = is_causal and not skipped and k_stop - 1 > q_start + offset
            status = "skipped" if skipped else "computed"
            steps.append(TileStep(len(steps), q_block, k_block, q_start, q_stop, k_start, k_stop, status, partial))
    return tuple(steps)


def tile_schedule(q_len: int, k_len: int, block_q: int, block_k: int, is_causal: bool = False) -> list[TileStep]:
    """Every ``(query block, key block)`` tile in loop order: query blocks outer, key blocks inner.

    Under ``is_causal`` (bottom-right aligned, as ``ac.causal_mask``) a tile whose entries are
    all masked is ``"skipped"``; every other tile is ``"computed"``. The last block of each axis
    is shorter when the block size does not divide the length.
    """
    for name, value in (("q_len", q_len), ("k_len", k_len), ("block_q", block_q), ("block_k", block_k)):
        _check_int(name, value, 1)
    return list(_schedule(int(q_len), int(k_len), int(block_q), int(block_k), bool(is_causal)))


def demo_scores(q_len: int, k_len: int, *, is_causal: bool = False, seed: int = 0, head_dim: int = 16) -> torch.Tensor:
    """Seeded toy scores ``q kᵀ / √d`` as float64 ``(q_len, k_len)``, ``-inf`` where causal hides a key."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(q_len, head_dim, generator=generator, dtype=torch.float64)  # (Lq, d)
    k = torch.randn(k_len, head_dim, generator=generator, dtype=torch.float64)  # (Lk, d)
    scores = q @ k.T / math.sqrt(head_dim)  # (Lq, Lk)
    if is_causal:
        scores = scores.masked_fill(~causal_mask(q_len, k_len), -math.inf)  # (Lq, Lk)
    return scores


def online_softmax_trace(scores_row, block_k: int) -> SoftmaxTrace:
    """Run the online softmax over one row of scores, ``block_k`` keys at a time.

    After the last block, ``final_max == max(scores_row)`` and
    ``final_sum == exp(scores_row - final_max).sum()``: the softmax denominator, found without
    ever holding the whole row. Masked keys are ``-inf`` and add nothing.
    """
    _check_int("block_k", block_k, 1)
    row = torch.as_tensor(scores_row, dtype=torch.float64).flatten()  # (Lk,)
    if row.numel() == 0:
        raise ValueError("scores_row is empty: the online softmax needs at least one key.")
    running_max, running_sum = -math.inf, 0.0
    block_maxes, maxes, sums, rescales = [], [], [], []
    for start in range(0, row.numel(), block_k):
        block = row[start : start + block_k]  # (≤ block_k,)
        block_max = float(block.max())
        new_max = max(running_max, block_max)
        if new_max == -math.inf:  # nothing visible yet: keep m = -inf, l = 0
            rescale, block_sum = 1.0, 0.0
        else:
            rescale = math.exp(running_max - new_max)  # exp(-inf) = 0 for the first visible block
            block_sum = float(torch.exp(block - new_max).sum())
        running_max, running_sum = new_max, running_sum * rescale + block_sum
        block_maxes.append(block_max)
        maxes.append(running_max)
        sums.append(running_sum)
        rescales.append(rescale)
    as_tensor = lambda values: torch.tensor(values, dtype=torch.float64)  # noqa: E731
    return SoftmaxTrace(as_tensor(block_maxes), as_tensor(maxes), as_tensor(sums), as_tensor(rescales))


def tile_codes(step: int, q_len: int, k_len: int, block_q: int, block_k: int, is_causal: bool) -> np.ndarray:
    """The tile image after ``step`` tiles: ``(q_len, k_len)`` of PENDING / DONE / CURRENT / SKIPPED.

    Skipped tiles are SKIPPED from the start (the schedule knows them in advance); the tile of
    step ``step`` (1-based) is CURRENT if computed; earlier computed tiles are DONE.
    """
    schedule = _schedule(q_len, k_len, block_q, block_k, is_causal)
    status = np.full(len(schedule), PENDING, dtype=np.uint8)  # (tiles,)
    computed = np.array([tile.status == "computed" for tile in schedule])  # (tiles,)
    status[:step] = DONE
    if step:
        status[step - 1] = CURRENT
    status[~computed] = SKIPPED
    num_k_blocks = -(-k_len // block_k)
    tile_of = (np.arange(q_len) // block_q)[:, None] * num_k_blocks + np.arange(k_len) // block_k  # (Lq, Lk)
    return status[tile_of]  # (Lq, Lk)


def _row_progress(params: dict, schedule) -> tuple[int, int]:
    """(query block of the row, how many of its key blocks the loop has visited after ``step``)."""
    row_block = params["row"] // params["block_q"]
    num_k_blocks = -(-params["k_len"] // params["block_k"])
    return row_block, min(max(params["step"] - row_block * num_k_blocks, 0), num_k_blocks)


def _fmt(value: float) -> str:
    return "−∞" if value == -math.inf else f"{value:.2f}".replace("-", "−")
