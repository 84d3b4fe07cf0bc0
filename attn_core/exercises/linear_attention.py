"""Checks for notebook 12d (linear attention → DeltaNet → Gated DeltaNet).

Each ``check_…`` takes the learner's *function*, runs it on a few float64 cases, and prints one verdict through
:func:`attn_core.exercises.feedback`. A wrong answer is matched against the mistakes people make with this layer and
named: the decay applied after the write, the erase term missing, the erase reading the state before its decay,
``repeat`` instead of ``repeat_interleave`` for the value heads, ``exp(G_i)·exp(−G_j)`` overflowing in the chunked
form, a missing causal mask, and ``1 + weight`` in the gated norm. A check never raises.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from attn_core.exercises import call_learner, feedback, never_raises

__all__ = ["check_delta_step", "check_expand_heads", "check_chunk_decay", "check_gated_norm"]

F64 = torch.float64


def _tensor_problem(answer, shape: tuple[int, ...], what: str) -> str | None:
    if not isinstance(answer, torch.Tensor):
        return f"return {what} as a tensor of shape {shape}, got {type(answer).__name__}."
    if tuple(answer.shape) != shape:
        return f"{what} must have shape {shape}, got {tuple(answer.shape)}."
    return None


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(torch.isfinite(a).all()) and torch.allclose(a.to(F64), b, rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------------- exercise 1: one token of the rule


def delta_step(state, k, v, g, beta):
    """Reference: state (B, H, Dk, Dv), k (B, H, Dk), v (B, H, Dv), g and beta (B, H) -> the state after the token."""
    decayed = state * g.exp()[..., None, None]  # (B, H, Dk, Dv) decay first
    recalled = torch.einsum("bhkv,bhk->bhv", decayed, k)  # (B, H, Dv) what k reads now
    return decayed + k[..., :, None] * (beta[..., None] * (v - recalled))[..., None, :]  # (B, H, Dk, Dv)


def _delta_step_mistakes(state, k, v, g, beta) -> dict[str, torch.Tensor]:
    """Each usual mistake's answer, keyed by what the learner is told."""
    decay = g.exp()[..., None, None]  # (B, H, 1, 1)

    def write(base, read_from, strength):  # base + k (strength · (v − read_fromᵀk))ᵀ
        recalled = torch.einsum("bhkv,bhk->bhv", read_from, k)  # (B, H, Dv)
        return base + k[..., :, None] * (strength[..., None] * (v - recalled))[..., None, :]  # (B, H, Dk, Dv)

    return {
        "you decayed after the write: exp(g) multiplies the new token's write too. Decay first, "
        "S ← exp(g)·S, then read and write, so the token's own write is not shrunk.": decay * write(state, state, beta),
        "the erase term is missing: that is linear attention's write S ← exp(g)·S + β k vᵀ. The delta rule "
        "first subtracts what k already reads: S ← S + β k (v − Sᵀk)ᵀ.": write(decay * state, 0 * state, beta),
        "the erase reads the state before its decay: read Sᵀk from exp(g)·S (the state this token "
        "writes into), as Qwen3.5 and Hugging Face do.": write(decay * state, state, beta),
        "beta is missing: it is the write strength (the learning rate of the online least-squares "
        "step), multiplying the whole correction (v − Sᵀk).": write(
            decay * state, decay * state, torch.ones_like(beta)
        ),
        "g was used as the decay factor itself: g is a log decay (g ≤ 0); the state is multiplied by exp(g).": write(
            g[..., None, None] * state, g[..., None, None] * state, beta
        ),
    }


@never_raises("check_delta_step")
def check_delta_step(fn: Callable) -> bool:
    """``fn(state, k, v, g, beta)`` -> the state after one token of the gated delta rule (decay, then delta write)."""
    name = "check_delta_step"
    generator = torch.Generator().manual_seed(12)
    for batch, heads, dk, dv in [(1, 1, 3, 2), (2, 3, 4, 5)]:
        state = torch.randn(batch, heads, dk, dv, generator=generator, dtype=F64)  # (B, H, Dk, Dv)
        k = F.normalize(torch.randn(batch, heads, dk, generator=generator, dtype=F64), dim=-1)  # (B, H, Dk)
        v = torch.randn(batch, heads, dv, generator=generator, dtype=F64)  # (B, H, Dv)
        g = -torch.rand(batch, heads, generator=generator, dtype=F64) - 0.2  # (B, H) in (-1.2, -0.2)
        beta = torch.rand(batch, heads, generator=generator, dtype=F64) * 0.8 + 0.1  # (B, H) in (0.1, 0.9)
        inputs = [t.clone() for t in (state, k, v, g, beta)]
        answer, error = call_learner(fn, *inputs)
        if error:
            return feedback(name, error)
        if not all(torch.equal(a, b) for a, b in zip(inputs, (state, k, v, g, beta), strict=True)):
            return feedback(name, "your function changed its inputs in place: return a new state instead.")
        shape = (batch, heads, dk, dv)
        problem = _tensor_problem(answer, shape, "the new state (B, H, Dk, Dv)")
        if problem and isinstance(answer, torch.Tensor) and tuple(answer.shape) == (batch, heads, dv, dk):
            problem = f"the state is (B, H, Dk, Dv) = {shape}: keys index its rows; you returned it transposed."
        if problem:
            return feedback(name, problem)
        if _close(answer, delta_step(state, k, v, g, beta)):
            continue
        for mistake, wrong in _delta_step_mistakes(state, k, v, g, beta).items():
            if _close(answer, wrong):
                return feedback(name, mistake)
        return feedback(
            name, "the new state differs from decay-then-delta-write: S ← exp(g)·S; S ← S + β k (v − Sᵀk)ᵀ."
        )
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 2: value heads read q/k heads


@never_raises("check_expand_heads")
def check_expand_heads(fn: Callable) -> bool:
    """``fn(qk, num_v_heads)``: qk ``(B, Hk, L, D)`` -> ``(B, Hv, L, D)``, value head h reads head h // (Hv // Hk)."""
    name = "check_expand_heads"
    generator = torch.Generator().manual_seed(23)
    for shape, num_v_heads in [((1, 2, 3, 4), 4), ((2, 3, 2, 2), 6), ((1, 16, 1, 2), 32), ((1, 2, 2, 3), 2)]:
        qk = torch.randn(shape, generator=generator, dtype=F64)  # (B, Hk, L, D)
        answer, error = call_learner(fn, qk.clone(), num_v_heads)
        if error:
            return feedback(name, error)
        expected_shape = (shape[0], num_v_heads, shape[2], shape[3])
        where = f"for qk of shape {shape} and num_v_heads={num_v_heads}"
        problem = _tensor_problem(answer, expected_shape, "the expanded heads")
        if problem:
            return feedback(name, f"{where}: {problem}")
        group = num_v_heads // shape[1]
        if _close(answer, qk.repeat_interleave(group, dim=1)):
            continue
        if _close(answer, qk.repeat(1, group, 1, 1)):
            return feedback(
                name,
                f"{where}: you tiled the heads with `repeat` (head h reads h % Hk). Qwen3.5's value heads that share "
                f"a q/k head are consecutive: use repeat_interleave({group}, dim=1) (head h reads h // {group}).",
            )
        return feedback(name, f"{where}: value head h must equal q/k head h // (Hv // Hk) = h // {group}.")
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 3: the chunked form's decays


def chunk_decay(g: torch.Tensor) -> torch.Tensor:
    """Reference: g (..., C) -> (..., C, C), entry [i, j] = exp(G_i − G_j) for j ≤ i (G = cumsum(g)), else 0."""
    cum = g.cumsum(-1)  # (..., C)
    future = torch.ones(g.shape[-1], g.shape[-1], dtype=torch.bool, device=g.device).triu(1)  # (C, C) j > i
    return (cum[..., :, None] - cum[..., None, :]).masked_fill(future, float("-inf")).exp()  # (..., C, C)


@never_raises("check_chunk_decay")
def check_chunk_decay(fn: Callable) -> bool:
    """``fn(g)``: g ``(..., C)`` log decays -> ``(..., C, C)`` with [i, j] = exp(G_i − G_j) for j ≤ i, 0 above."""
    name = "check_chunk_decay"
    generator = torch.Generator().manual_seed(64)
    cases = [
        ("mild gates", -torch.rand(2, 3, 8, generator=generator, dtype=F64)),  # (B, H, C)
        ("gates of -50 per token (C = 64)", torch.full((1, 2, 64), -50.0, dtype=F64)),  # (B, H, C)
    ]
    for label, g in cases:
        answer, error = call_learner(fn, g.clone())
        if error:
            return feedback(name, error)
        size = g.shape[-1]
        where = f"with {label}"
        problem = _tensor_problem(answer, (*g.shape, size), "the decay matrix")
        if problem:
            return feedback(name, f"{where}: {problem}")
        expected = chunk_decay(g)  # (..., C, C)
        if _close(answer, expected):
            continue
        finite = torch.isfinite(answer.to(F64))  # (..., C, C)
        on_and_below = torch.ones(size, size, dtype=torch.bool).tril()  # (C, C) j <= i
        if not bool(finite.all()) and bool(finite[..., on_and_below].all()):
            # Subtracted first (the part on and below the diagonal is finite), but masked by multiplying after the
            # exp: above the diagonal G_i − G_j > 0, exp overflows to inf, and inf · 0 = NaN.
            return feedback(
                name,
                f"{where}: your matrix has inf or NaN above the diagonal only. Subtracting first was right, but "
                "the future was masked after the exp: there G_i − G_j > 0, exp(G_i − G_j) is inf, and inf · 0 = "
                "NaN. Mask j > i to −inf before the exp (masked_fill), or pick 0 with torch.where.",
            )
        if not bool(finite.all()):
            return feedback(
                name,
                f"{where}: your matrix has inf or NaN. exp(G_i)·exp(−G_j) overflows: exp(−G_j) = exp({size * 50}) is "
                "inf in any precision (and exp(G_i) underflows to 0, so inf · 0 = NaN). Subtract first, "
                "exp(G_i − G_j), and mask j > i to −inf before the exp.",
            )
        if _close(answer, chunk_decay(g).transpose(-1, -2)):
            return feedback(
                name, f"{where}: your matrix is transposed: row i is the query/reader, [i, j] = exp(G_i − G_j)."
            )
        cum = g.cumsum(-1)  # (..., C)
        if torch.allclose(answer.to(F64).tril(), expected, rtol=1e-9, atol=1e-9):
            return feedback(name, f"{where}: entries above the diagonal (j > i, the future) must be 0: mask them.")
        exclusive = cum - g  # (..., C): G without the token's own gate
        if _close(answer, chunk_decay(torch.cat([torch.zeros_like(g[..., :1]), g[..., :-1]], dim=-1))) or _close(
            answer, (exclusive[..., :, None] - exclusive[..., None, :]).exp().tril()
        ):
            return feedback(name, f"{where}: off by one token: G_i = g_1 + … + g_i includes token i's own gate.")
        return feedback(name, f"{where}: entry [i, j] must be exp(G_i − G_j) with G = cumsum(g) for j ≤ i, else 0.")
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 4: the gated RMSNorm


def gated_norm(o: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Reference: weight · o · rsqrt(mean(o²) + eps) · silu(z), per value head (the last dim)."""
    return weight * o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + eps) * F.silu(z)  # (..., Dv)


def _rms(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)  # (..., Dv)


@never_raises("check_gated_norm")
def check_gated_norm(fn: Callable) -> bool:
    """``fn(o, z, weight)``: o, z ``(..., Dv)``, weight ``(Dv,)`` -> Qwen3.5's gated RMSNorm output ``(..., Dv)``."""
    name = "check_gated_norm"
    generator = torch.Generator().manual_seed(35)
    for shape in [(2, 5, 4, 6), (1, 3, 2, 8)]:
        o = torch.randn(shape, generator=generator, dtype=F64)  # (B, L, Hv, Dv)
        z = torch.randn(shape, generator=generator, dtype=F64)  # (B, L, Hv, Dv)
        weight = torch.rand(shape[-1], generator=generator, dtype=F64) + 0.5  # (Dv,)
        answer, error = call_learner(fn, o.clone(), z.clone(), weight.clone())
        if error:
            return feedback(name, error)
        problem = _tensor_problem(answer, shape, "the output")
        if problem:
            return feedback(name, problem)
        if _close(answer, gated_norm(o, z, weight)):
            continue
        wrong = {
            "you multiplied by (1 + weight): that is Qwen3.5's plain RMSNorm (weights stored around 0). "
            "The gated norm stores the scale itself (init ones): multiply by weight.": gated_norm(o, z, 1 + weight),
            "the gate goes after the norm: normalise o first, then multiply by silu(z) (Qwen3.5's norm-before-gate).": (
                _rms(o * F.silu(z)) * weight
            ),
            "the gate is silu(z) = z · sigmoid(z), not sigmoid(z).": gated_norm(o, z, weight) / z,
            "the gate silu(z) is missing.": gated_norm(o, z, weight) / F.silu(z),
            "normalise over the last dim only (one value head, Dv numbers), not over all heads.": (
                weight * o * torch.rsqrt(o.pow(2).flatten(-2).mean(-1)[..., None, None] + 1e-6) * F.silu(z)
            ),
        }
        for mistake, candidate in wrong.items():
            if _close(answer, candidate):
                return feedback(name, mistake)
        return feedback(name, "expected weight · o · rsqrt(mean(o²) + 1e-6) · silu(z), the mean over the last dim.")
    return feedback(name, None)
