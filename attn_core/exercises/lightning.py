"""Checks for notebook 12g (MiniMax's lightning attention).

Each ``check_…`` takes the learner's *function*, runs it on a few float64 cases, and prints one verdict through
:func:`attn_core.exercises.feedback`. A wrong answer is matched against the mistakes people make with this layer and
named: the slopes' exponent starting at 0, ``2 ** 8 / n`` for ``2 ** (8 / n)``, the layer factor missing, inverted or
without its 1e-5 guards; in a block, the mask missing, the decay's sign, a softmax or a 1/√d that lightning attention
does not have, the diagonal decayed, the heads paired with the wrong slopes; in the state update, the carried state
not decayed by the whole block, the keys' decay counted from the wrong end or off by one. A check never raises.

One piece: the three graders of one notebook, each with the catalogue of mistakes it names.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attn_core.exercises import call_learner, feedback, never_raises

__all__ = ["check_slopes", "check_intra_block", "check_state_update"]

F64 = torch.float64
FLOAT32_RTOL = 1e-6  # a few float32 roundings (2^-24 each) of a slope: accepted, it changes nothing downstream
FLOAT32 = (
    "close, but only to float32 precision: your decays were built in float32 (e.g. torch.arange(b).float()). "
    "Build them in the inputs' dtype (float64 here): torch.arange(b, dtype=q.dtype)."
)


def _tensor_problem(answer, shape: tuple[int, ...], what: str) -> str | None:
    if not isinstance(answer, torch.Tensor):
        return f"return {what} as a tensor of shape {shape}, got {type(answer).__name__}."
    if tuple(answer.shape) != shape:
        return f"{what} must have shape {shape}, got {tuple(answer.shape)}."
    if answer.is_complex() or not answer.is_floating_point():
        return f"{what} must be a real floating-point tensor, got {answer.dtype}."
    return None


def _close(answer: torch.Tensor, want: torch.Tensor, rtol: float = 1e-9) -> bool:
    return (
        answer.shape == want.shape
        and bool(torch.isfinite(answer).all())
        and torch.allclose(answer.to(F64), want, rtol=rtol, atol=rtol)
    )


def _diagnose(answer: torch.Tensor, mistakes: dict[str, torch.Tensor], rtol: float = 1e-9) -> str | None:
    for mistake, wrong in mistakes.items():
        if wrong.shape == answer.shape and _close(answer, wrong, rtol):
            return mistake
    return None


# --------------------------------------------------------------------------- exercise 1: the per-head slopes


def slopes(num_heads: int, layer_idx: int, num_layers: int) -> torch.Tensor:
    """Reference (HF's formula): 2^(−8 (h+1) / H) · (1 − layer_idx / (num_layers − 1 + 1e-5) + 1e-5), float64."""
    heads = torch.arange(num_heads, dtype=F64)  # (H,)
    return 2 ** (-8 * (heads + 1) / num_heads) * (1 - layer_idx / (num_layers - 1 + 1e-5) + 1e-5)  # (H,)


def _slope_mistakes(num_heads: int, layer_idx: int, num_layers: int) -> dict[str, torch.Tensor]:
    heads = torch.arange(num_heads, dtype=F64)  # (H,)
    base = 2 ** (-8 * (heads + 1) / num_heads)  # (H,)
    factor = 1 - layer_idx / (num_layers - 1 + 1e-5) + 1e-5
    return {
        "the exponent starts at 0: head 0 got slope 1 · factor. MiniMax's (and ALiBi's) heads run h = 1..H, "
        "slope 2^(−8h/H), so head 0 gets 2^(−8/H).": 2 ** (-8 * heads / num_heads) * factor,
        "the exponent's sign is flipped: slopes must be below 1, 2^(−8 (h+1)/H), so every head decays.": (
            2 ** (8 * (heads + 1) / num_heads) * factor
        ),
        "operator precedence: 1 / (2 ** 8 / n) is n / 256. The base is 1 / 2 ** (8 / n) (HF writes "
        "1 / (2 ** (8 / n))).": (num_heads / 256) ** (heads + 1) * factor,
        "the base is 2, not e: 2^(−8 (h+1)/H), ALiBi's geometric series.": torch.exp(-8 * (heads + 1) / num_heads)
        * factor,
        "the heads are in reverse order: head 0 decays fastest, 2^(−8/H), the last head slowest, 2^(−8).": (
            base.flip(0) * factor
        ),
        "the layer factor is inverted: deeper layers must decay slower (look further back), so the factor is "
        "1 − layer_idx / (num_layers − 1 + 1e-5) + 1e-5, largest at layer 0.": base
        * (layer_idx / (num_layers - 1 + 1e-5) + 1e-5),
        "the 1e-5 guards are missing: without them the last layer's slopes are exactly 0 (no decay at all) and "
        "a one-layer model divides by 0. Use 1 − layer_idx / (num_layers − 1 + 1e-5) + 1e-5.": base
        * (1 - layer_idx / max(num_layers - 1, 1)),
        "off by one in depth: divide layer_idx by num_layers − 1 (+ 1e-5), so the last layer's factor is "
        "about 1e-5, not 1 / num_layers.": base * (1 - layer_idx / (num_layers + 1e-5) + 1e-5),
        "you returned the decay factor exp(−s) per token: return the slope s itself.": torch.exp(-base * factor),
        "you returned log2 of the slope: the slope is 2 raised to that exponent.": -8 * (heads + 1) / num_heads
        + torch.log2(torch.tensor(factor, dtype=F64)),
    } | (
        {}
        if layer_idx == 0
        else {
            "the layer factor is missing: slopes shrink with depth, times 1 − layer_idx / (num_layers − 1 + 1e-5) "
            "+ 1e-5 (deeper layers look further back).": base
        }  # fmt: skip
    )


@never_raises("check_slopes")
def check_slopes(fn: Callable) -> bool:
    """``fn(num_heads, layer_idx, num_layers)`` -> MiniMax's decay slopes ``(num_heads,)``."""
    name = "check_slopes"
    for num_heads, layer_idx, num_layers in [(6, 2, 4), (8, 0, 4), (4, 3, 4), (64, 40, 80)]:
        answer, error = call_learner(fn, num_heads, layer_idx, num_layers)
        if error:
            return feedback(name, error)
        where = f"for num_heads={num_heads}, layer_idx={layer_idx}, num_layers={num_layers}"
        if isinstance(answer, torch.Tensor) and tuple(answer.shape) == (num_heads, 1, 1):
            return feedback(name, f"{where}: return shape ({num_heads},); HF's slope_rate buffer is (H, 1, 1).")
        problem = _tensor_problem(answer, (num_heads,), "the slopes")
        if problem:
            return feedback(name, f"{where}: {problem}")
        if _close(answer, slopes(num_heads, layer_idx, num_layers), rtol=FLOAT32_RTOL):
            continue
        mistake = _diagnose(answer, _slope_mistakes(num_heads, layer_idx, num_layers), FLOAT32_RTOL)
        return feedback(
            name, f"{where}: {mistake or 'expected 2^(−8 (h+1)/H) · (1 − layer_idx / (num_layers − 1 + 1e-5) + 1e-5).'}"
        )
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 2: one block, inside


def _gap(size: int) -> torch.Tensor:
    steps = torch.arange(size, dtype=F64)  # (b,)
    return steps[:, None] - steps[None, :]  # (b, b): i − j


def intra_block(q, k, v, slopes) -> torch.Tensor:
    """Reference: q, k (B, H, b, Dk), v (B, H, b, Dv), slopes (H,) -> ((q kᵀ) ∘ exp(−s (i − j)) [j ≤ i]) v."""
    gap = _gap(q.shape[2])  # (b, b)
    decay = torch.where(gap >= 0, (-slopes[:, None, None] * gap.clamp(min=0)).exp(), 0.0)  # (H, b, b)
    return ((q @ k.transpose(-1, -2)) * decay) @ v  # (B, H, b, Dv)


def _intra_mistakes(q, k, v, s) -> dict[str, torch.Tensor]:
    size, head_dim = q.shape[2], q.shape[-1]
    gap = _gap(size)  # (b, b)
    causal = gap >= 0  # (b, b)
    scores = q @ k.transpose(-1, -2)  # (B, H, b, b)

    def with_decay(decay):  # decay (H, b, b) or (b, b)
        return (scores * decay) @ v  # (B, H, b, Dv)

    def decay_of(slope, distance, mask=causal):
        return torch.where(mask, (-slope[:, None, None] * distance).exp(), 0.0)  # (H, b, b)

    right = decay_of(s, gap.clamp(min=0))  # (H, b, b)
    weights = scores.masked_fill(~causal, float("-inf")) + (-s[:, None, None] * gap.clamp(min=0))  # (B, H, b, b)
    return {
        "the future leaks: keys j > i must get weight 0 (the causal mask), not exp(−s |i − j|).": with_decay(
            (-s[:, None, None] * gap.abs()).exp()
        ),
        "the causal mask is missing: above the diagonal exp(−s (i − j)) grows past 1. Keep only j ≤ i.": with_decay(
            (-s[:, None, None] * gap).exp()
        ),
        "the decay's sign is flipped: older keys must weigh less, exp(−s (i − j)) ≤ 1.": with_decay(
            decay_of(-s, gap.clamp(min=0))
        ),
        "the decay is missing: that is plain causal linear attention. Multiply q kᵀ by exp(−s (i − j)).": with_decay(
            causal.to(F64)
        ),
        "lightning attention has no softmax: the weights are q kᵀ times the decay, used as they are.": (
            torch.softmax(weights, dim=-1) @ v
        ),
        "no 1/√d here: MiniMax's lightning attention does not scale q kᵀ (the output RMSNorm sets the size).": (
            with_decay(right) / head_dim**0.5
        ),
        "the diagonal is decayed: a token's own key weighs exp(0) = 1, so the exponent is −s (i − j), "
        "not −s (i − j + 1).": with_decay(decay_of(s, gap.clamp(min=0) + 1)),
        "the decay is transposed: row i is the query, and it reads keys j ≤ i.": with_decay(right.transpose(-1, -2)),
        "the diagonal is masked: token i must see its own key (j ≤ i, the diagonal included).": with_decay(
            decay_of(s, gap.clamp(min=0), gap > 0)
        ),
        "the heads are paired with the slopes in reverse: head h must use slopes[h].": with_decay(
            decay_of(s.flip(0), gap.clamp(min=0))
        ),
        "every head used slopes[0]: each head has its own slope, slopes[h] (broadcast as slopes[:, None, None]).": (
            with_decay(decay_of(s[:1].expand_as(s), gap.clamp(min=0)))
        ),
        "that decay, exp(−s (i + 1)), is the inter-block one (how the state is read): inside a block a key "
        "decays by its distance to the query, exp(−s (i − j)).": with_decay(
            decay_of(s, (gap[:, :1] + 1).expand(size, size))
        ),
        "that decay, exp(−s (b − 1 − j)), is the one that carries keys to the block's end (the state update): "
        "inside a block a key decays by its distance to the query, exp(−s (i − j)).": with_decay(
            decay_of(s, (size - 1 - torch.arange(size, dtype=F64)).expand(size, size))
        ),
        "the rows are normalised: linear attention here has no denominator, use the decayed scores as they are.": (
            with_decay(right) / (scores * right).sum(-1, keepdim=True)
        ),
    }


@never_raises("check_intra_block")
def check_intra_block(fn: Callable) -> bool:
    """``fn(q, k, v, slopes)``: one block, no earlier state -> ``((q kᵀ) ∘ D) v`` with D[i, j] = exp(−s (i − j))
    for j ≤ i, else 0, per head."""
    name = "check_intra_block"
    generator = torch.Generator().manual_seed(71)
    for batch, heads, size, dk, dv in [(1, 2, 5, 3, 4), (2, 3, 8, 4, 2)]:
        q, k = (torch.randn(batch, heads, size, dk, generator=generator, dtype=F64) for _ in range(2))  # (B,H,b,Dk)
        v = torch.randn(batch, heads, size, dv, generator=generator, dtype=F64)  # (B, H, b, Dv)
        s = torch.rand(heads, generator=generator, dtype=F64) * 0.8 + 0.1  # (H,) distinct, in (0.1, 0.9)
        answer, error = call_learner(fn, q.clone(), k.clone(), v.clone(), s.clone())
        if error:
            return feedback(name, error)
        where = f"for q of shape {tuple(q.shape)}"
        problem = _tensor_problem(answer, (batch, heads, size, dv), "the block's output")
        if problem:
            return feedback(name, f"{where}: {problem}")
        want = intra_block(q, k, v, s)  # (B, H, b, Dv)
        if _close(answer, want):
            continue
        mistake = _diagnose(answer, _intra_mistakes(q, k, v, s))
        if mistake is None and _close(answer, want, rtol=1e-5):
            mistake = FLOAT32
        return feedback(name, f"{where}: {mistake or 'expected ((q kᵀ) ∘ D) v with D[i, j] = exp(−s (i − j)), j ≤ i.'}")
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 3: the state, block to block


def state_update(state, k, v, slopes) -> torch.Tensor:
    """Reference: state (B, H, Dk, Dv), k (B, H, b, Dk), v (B, H, b, Dv), slopes (H,) -> the state after the block,
    exp(−s b) S + Σ_j exp(−s (b − 1 − j)) k_j v_jᵀ."""
    size = k.shape[2]
    to_end = (-slopes[:, None, None] * (size - 1 - torch.arange(size, dtype=F64))[:, None]).exp()  # (H, b, 1)
    return (-slopes[:, None, None] * size).exp() * state + (k * to_end).transpose(-1, -2) @ v  # (B, H, Dk, Dv)


def _state_mistakes(state, k, v, s) -> dict[str, torch.Tensor]:
    size = k.shape[2]
    steps = torch.arange(size, dtype=F64)  # (b,)
    per_head = s[:, None, None]  # (H, 1, 1)

    def update(state_decay, key_distance, slope=per_head):  # key_distance (b,)
        writes = (k * (-slope * key_distance[:, None]).exp()).transpose(-1, -2) @ v  # (B, H, Dk, Dv)
        return (-slope * state_decay).exp() * state + writes  # (B, H, Dk, Dv)

    to_end = size - 1 - steps  # (b,)
    return {
        "the carried state is not decayed: all b tokens of the block pass over it, so it is multiplied by "
        "exp(−s b).": update(0.0, to_end),
        "the carried state decayed one token only: the block has b tokens, so exp(−s b), not exp(−s).": update(
            1.0, to_end
        ),
        "the carried state decayed b − 1 tokens: it is older than every key of the block, so exp(−s b).": update(
            size - 1.0, to_end
        ),
        "the keys' decay is off by one: the block's last key is written last and not decayed, "
        "exp(−s (b − 1 − j)), not exp(−s (b − j)).": update(float(size), to_end + 1),
        "the keys' decay runs from the wrong end: the oldest key (j = 0) decays most, exp(−s (b − 1 − j)), "
        "not exp(−s j).": update(float(size), steps),
        "the keys are not decayed: key j is b − 1 − j tokens old at the block's end, so it carries "
        "exp(−s (b − 1 − j)).": update(float(size), torch.zeros_like(steps)),
        "you decayed after the write: exp(−s b) multiplies the carried state only; the new keys carry their "
        "own exp(−s (b − 1 − j)).": (-per_head * size).exp() * update(0.0, to_end),
        "the decay's sign is flipped: exp(−s …) ≤ 1, the state must shrink, not grow.": update(
            float(size), to_end, -per_head
        ),
        "the heads are paired with the slopes in reverse: head h must use slopes[h].": update(
            float(size), to_end, s.flip(0)[:, None, None]
        ),
        "every head used slopes[0]: each head has its own slope, slopes[h].": update(
            float(size), to_end, s[:1, None, None]
        ),
    }


@never_raises("check_state_update")
def check_state_update(fn: Callable) -> bool:
    """``fn(state, k, v, slopes)`` -> the state after one block: exp(−s b) S + Σ_j exp(−s (b − 1 − j)) k_j v_jᵀ."""
    name = "check_state_update"
    generator = torch.Generator().manual_seed(83)
    for batch, heads, size, dk, dv in [(1, 2, 4, 3, 5), (2, 3, 6, 4, 4)]:
        state = torch.randn(batch, heads, dk, dv, generator=generator, dtype=F64)  # (B, H, Dk, Dv)
        k = torch.randn(batch, heads, size, dk, generator=generator, dtype=F64)  # (B, H, b, Dk)
        v = torch.randn(batch, heads, size, dv, generator=generator, dtype=F64)  # (B, H, b, Dv)
        s = torch.rand(heads, generator=generator, dtype=F64) * 0.8 + 0.1  # (H,) distinct, in (0.1, 0.9)
        inputs = [t.clone() for t in (state, k, v, s)]
        answer, error = call_learner(fn, *inputs)
        if error:
            return feedback(name, error)
        if not all(torch.equal(a, b) for a, b in zip(inputs, (state, k, v, s), strict=True)):
            return feedback(name, "your function changed its inputs in place: return a new state instead.")
        shape = (batch, heads, dk, dv)
        where = f"for a block of {size} tokens"
        want = state_update(state, k, v, s)  # (B, H, Dk, Dv)
        if isinstance(answer, torch.Tensor) and tuple(answer.shape) == (batch, heads, dv, dk) and dk != dv:
            return feedback(name, f"{where}: the state is (B, H, Dk, Dv) = {shape}: write k vᵀ, not v kᵀ.")
        problem = _tensor_problem(answer, shape, "the new state")
        if problem:
            return feedback(name, f"{where}: {problem}")
        if _close(answer, want):
            continue
        mistakes = _state_mistakes(state, k, v, s)
        mistakes["the state is (B, H, Dk, Dv): write k vᵀ, not v kᵀ."] = want.transpose(-1, -2)
        mistake = _diagnose(answer, mistakes)
        if mistake is None and _close(answer, want, rtol=1e-5):
            mistake = FLOAT32
        return feedback(name, f"{where}: {mistake or 'expected exp(−s b) S + Σ_j exp(−s (b − 1 − j)) k_j v_jᵀ.'}")
    return feedback(name, None)
