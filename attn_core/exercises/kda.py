"""Checks for notebook 12e (Kimi Delta Attention next to Gated DeltaNet).

Each ``check_…`` takes the learner's *function*, runs it on float64 cases, and prints one verdict through
:func:`attn_core.exercises.feedback`. A wrong answer is matched against the mistakes people make with KDA and named:
the decay on the value axis instead of the key axis, one decay per head (Gated DeltaNet's), the decay after the
write, the erase reading the undecayed state, the pair's own token counted in its decay, ``exp(G_i)·exp(−G_j)`` or a
multiplied mask overflowing to NaN, a cumulative sum over the channels, and the forget gate's sign, ``exp(A_log)``,
softplus and ``dt_bias`` slips. A check never raises.

One piece: one grader family, the notebook's three KDA exercises with the catalogues of mistakes each names.

Tolerance: every case is O(1) float64 arithmetic of a few dozen operations (rounding ~1e-15); rtol 1e-9 leaves a
millionfold margin and is far below the smallest difference between a mistake and the right answer here.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from attn_core.exercises import call_learner, feedback, never_raises

__all__ = ["check_kda_step", "check_kda_pair_decay", "check_kimi_forget_gate", "kda_step", "pair_decay", "forget_gate"]

F64 = torch.float64


def _tensor_problem(answer, shape: tuple[int, ...], what: str) -> str | None:
    if not isinstance(answer, torch.Tensor):
        return f"return {what} as a tensor of shape {shape}, got {type(answer).__name__}."
    if tuple(answer.shape) != shape:
        return f"{what} must have shape {shape}, got {tuple(answer.shape)}."
    return None


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal within rounding; NaN where the other has NaN counts as equal (a mistake's NaN is its signature)."""
    if a.shape != b.shape:
        return False
    return torch.allclose(a.detach().to(F64), b, rtol=1e-9, atol=1e-12, equal_nan=True)


def _changed(before, after) -> bool:
    return not all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


# --------------------------------------------------------------------------- exercise 1: one token of KDA


def kda_step(state, k, v, g, beta):
    """Reference: state (B, H, Dk, Dv), k and g (B, H, Dk), v (B, H, Dv), beta (B, H) -> the state after the token."""
    decayed = state * g.exp()[..., :, None]  # (B, H, Dk, Dv): row c (key channel c) times exp(g_c)
    recalled = torch.einsum("bhkv,bhk->bhv", decayed, k)  # (B, H, Dv) what k reads now
    return decayed + k[..., :, None] * (beta[..., None] * (v - recalled))[..., None, :]  # (B, H, Dk, Dv)


def _write(base, read_from, k, v, strength, erase_strength=None):
    """base + k (strength·v − erase_strength·read_fromᵀk)ᵀ (erase_strength defaults to strength)."""
    erase_strength = strength if erase_strength is None else erase_strength
    recalled = torch.einsum("bhkv,bhk->bhv", read_from, k)  # (B, H, Dv)
    correction = strength[..., None] * v - erase_strength[..., None] * recalled  # (B, H, Dv)
    return base + k[..., :, None] * correction[..., None, :]  # (B, H, Dk, Dv)


def _kda_step_mistakes(state, k, v, g, beta) -> dict[str, torch.Tensor]:
    """Each usual mistake's answer, keyed by what the learner is told."""
    rows = g.exp()[..., :, None]  # (B, H, Dk, 1) the right decay: one factor per key channel (row)
    per_head = g.mean(-1).exp()[..., None, None]  # (B, H, 1, 1)
    mistakes = {
        "one decay for the whole head (the mean over channels): that is Gated DeltaNet. KDA decays each key channel "
        "(row of the state) by its own exp(g_c).": _write(per_head * state, per_head * state, k, v, beta),
        "one decay for the whole head (the mean of exp(g) over channels): that is Gated DeltaNet. KDA decays each key "
        "channel (row of the state) by its own exp(g_c).": (lambda d: _write(d, d, k, v, beta))(
            g.exp().mean(-1)[..., None, None] * state
        ),
        "no decay at all: that is the ungated delta rule (DeltaNet). Multiply row c of the state by exp(g_c) first.": (
            _write(state, state, k, v, beta)
        ),
        "you decayed after the write: exp(g) multiplies the new token's write too. Decay first, then read and "
        "write.": rows * _write(state, state, k, v, beta),
        "the erase reads the state before its decay: read Sᵀk from the decayed state (the one this token writes "
        "into), as Hugging Face's recurrent_kimi_delta_attention does.": _write(rows * state, state, k, v, beta),
        "the erase term is missing: that is gated linear attention, S ← diag(exp(g))·S + β k vᵀ. The delta rule "
        "first subtracts what k already reads: S ← S + β k (v − Sᵀk)ᵀ.": _write(rows * state, 0 * state, k, v, beta),
        "beta is missing: it is the write strength, multiplying the whole correction (v − Sᵀk).": (
            lambda d: _write(d, d, k, v, torch.ones_like(beta))
        )(rows * state),
        "beta multiplies v only: the erase needs it too, S ← S + β k (v − Sᵀk)ᵀ, so beta is how much of the old "
        "value is overwritten.": _write(rows * state, rows * state, k, v, beta, torch.ones_like(beta)),
        "g was used as the decay factor itself: g is a log decay (g ≤ 0); the state's rows are multiplied by exp(g).": (
            lambda d: _write(d, d, k, v, beta)
        )(state * g[..., :, None]),
        "exp(−g) grows the state: g ≤ 0 is the log of the factor kept, so multiply by exp(g).": (
            lambda d: _write(d, d, k, v, beta)
        )(state * (-g).exp()[..., :, None]),
        "you returned only the write: add it to the decayed state, S ← diag(exp(g))·S + β k (v − Sᵀk)ᵀ.": _write(
            0 * state, rows * state, k, v, beta
        ),
    }
    if state.shape[-1] == state.shape[-2]:  # computes only when Dk = Dv: checked first, it is the KDA-specific slip
        decayed_columns = state * g.exp()[..., None, :]  # (B, H, Dk, Dv): column c times exp(g_c)
        wrong_axis = {
            "the decay multiplies the value columns: the state is (Dk, Dv) and g has one entry per KEY channel, so "
            "row c is multiplied by exp(g_c): state * g.exp()[..., :, None].": _write(
                decayed_columns, decayed_columns, k, v, beta
            )
        }
        mistakes = {**wrong_axis, **mistakes}
    return mistakes


@never_raises("check_kda_step")
def check_kda_step(fn: Callable) -> bool:
    """``fn(state, k, v, g, beta)`` -> the state after one token of KDA (per-channel decay, then delta write)."""
    name = "check_kda_step"
    generator = torch.Generator().manual_seed(37)
    for batch, heads, dk, dv in [(2, 2, 4, 4), (1, 3, 3, 5)]:  # square first: a wrong axis computes, and is named
        state = torch.randn(batch, heads, dk, dv, generator=generator, dtype=F64)  # (B, H, Dk, Dv)
        k = F.normalize(torch.randn(batch, heads, dk, generator=generator, dtype=F64), dim=-1)  # (B, H, Dk)
        v = torch.randn(batch, heads, dv, generator=generator, dtype=F64)  # (B, H, Dv)
        g = -2.0 * torch.rand(batch, heads, dk, generator=generator, dtype=F64) - 0.05  # (B, H, Dk) in (-2.05, -0.05)
        beta = torch.rand(batch, heads, generator=generator, dtype=F64) * 0.8 + 0.1  # (B, H) in (0.1, 0.9)
        originals = (state, k, v, g, beta)
        inputs = [t.clone() for t in originals]
        answer, error = call_learner(fn, *inputs)
        if error:
            return feedback(name, error)
        if _changed(inputs, originals):
            return feedback(name, "your function changed its inputs in place: return a new state instead.")
        shape = (batch, heads, dk, dv)
        problem = _tensor_problem(answer, shape, "the new state (B, H, Dk, Dv)")
        if problem and isinstance(answer, torch.Tensor) and tuple(answer.shape) == (batch, heads, dv, dk):
            problem = f"the state is (B, H, Dk, Dv) = {shape}: keys index its rows; you returned it transposed."
        if problem:
            return feedback(name, problem)
        expected = kda_step(*originals)
        if _close(answer, expected):
            continue
        if dk == dv and _close(answer, expected.transpose(-1, -2)):
            return feedback(name, "the state is (B, H, Dk, Dv): keys index its rows; you returned it transposed.")
        for mistake, wrong in _kda_step_mistakes(*originals).items():
            if _close(answer, wrong):
                return feedback(name, mistake)
        return feedback(
            name,
            "the new state differs from per-channel decay, then the delta write: S ← diag(exp(g))·S; "
            "S ← S + β k (v − Sᵀk)ᵀ.",
        )
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 2: a chunk's pair decays


def pair_decay(g):
    """Reference: g (..., C, Dk) -> (..., C, C, Dk), [i, j, c] = exp(g_{j+1,c} + ... + g_{i,c}) for j <= i, else 0."""
    size = g.shape[-2]
    lower = torch.ones(size, size, dtype=torch.bool).tril(-1)  # (C, C): s > j
    per_token = g[..., :, None, :].expand(*g.shape[:-2], size, size, g.shape[-1])  # (..., C, C, Dk): [s, j, c] = g_s
    seg = per_token.masked_fill(~lower[..., None], 0.0).cumsum(-3)  # (..., C, C, Dk) summed directly, never G_i − G_j
    return seg.masked_fill(~torch.ones(size, size, dtype=torch.bool).tril()[..., None], float("-inf")).exp()


FACTORED_OVERFLOW = (
    "the factored form exp(G_i)·exp(−G_j) overflows: exp(−G_j) is inf (exp(G_j) is 0) once the decay passes "
    "−709 (float64; −88 in float32), and inf · 0 = NaN (0 / 0 too). Subtract first, exp(G_i − G_j), and "
    "mask j > i to −inf before the exp."
)
MASK_AFTER_EXP = (
    "the mask multiplies after the exp: above the diagonal G_i − G_j > 0 grows with the chunk and exp "
    "overflows to inf, and inf · 0 = NaN. Mask j > i to −inf before the exp (masked_fill), or pick with "
    "torch.where."
)


def _overflow_problem(answer: torch.Tensor, g: torch.Tensor) -> str | None:
    """Name an overflow by where the answer agrees: with the factored form on and below the diagonal (NaN and inf
    included), or with the right answer there and not finite above it (a mask multiplied after the exp)."""
    if bool(torch.isfinite(answer).all()):
        return None
    size = g.shape[-2]
    past = torch.ones(size, size, dtype=torch.bool).tril()[..., None].expand(answer.shape)  # j <= i
    cum = g.cumsum(-2)  # (..., C, Dk)
    with torch.no_grad():
        factored = cum.exp()[..., :, None, :] * (-cum).exp()[..., None, :, :]  # (..., C, C, Dk)
        if not bool(torch.isfinite(answer[past]).all()) and _close(answer[past], factored[past]):
            return FACTORED_OVERFLOW
        if _close(answer[past], pair_decay(g)[past]) and bool(answer[~past].isnan().any()):  # inf · 0 above
            return MASK_AFTER_EXP
    return None


def _pair_decay_mistakes(g) -> dict[str, torch.Tensor]:
    size = g.shape[-2]
    cum = g.cumsum(-2)  # (..., C, Dk) G_i, decay since the chunk start including token i
    diff = cum[..., :, None, :] - cum[..., None, :, :]  # (..., C, C, Dk) G_i − G_j
    future = torch.ones(size, size, dtype=torch.bool).triu(1)[..., None]  # (C, C, 1) j > i
    shifted = torch.cat([torch.zeros_like(cum[..., :1, :]), cum[..., :-1, :]], dim=-2)  # (..., C, Dk) G_{j-1}
    with torch.no_grad():
        return {
            "no causal mask: entries with j > i must be 0 (a pair written later cannot be read), not exp(G_i − G_j) "
            "> 1.": diff.exp(),
            "masked with 0 before the exp: exp(0) = 1, so the future pairs j > i get weight 1. Mask to −inf before "
            "the exp (or to 0 after it).": diff.masked_fill(future, 0.0).exp(),
            "the pair's own token is counted: a pair written at token j decays at tokens j+1 … i only (each token "
            "decays, then writes), so the exponent is g_{j+1} + … + g_i = G_i − G_j, and the diagonal is 1.": (
                cum[..., :, None, :] - shifted[..., None, :, :]
            )
            .masked_fill(future, float("-inf"))
            .exp(),
            "the diagonal is 0: a pair read at the token that wrote it is kept whole, exp(0) = 1 (only j > i is "
            "masked).": diff.masked_fill(
                torch.ones(size, size, dtype=torch.bool).triu()[..., None], float("-inf")
            ).exp(),
            "i and j are swapped: entry [i, j] is what a query at token i reads of the pair written at token j ≤ i, "
            "so the nonzero entries are on and below the diagonal.": pair_decay(g).transpose(-2, -3),
            "the sign is flipped: exp(G_j − G_i) ≥ 1 grows with the distance; the decay kept from j to i is "
            "exp(G_i − G_j) ≤ 1.": (-diff).masked_fill(future, float("-inf")).exp(),
            "the cumulative sum runs over the channels (the last axis): it must run over the tokens (axis −2), one "
            "running sum per key channel.": (lambda c: c[..., :, None, :] - c[..., None, :, :])(g.cumsum(-1))
            .masked_fill(future, float("-inf"))
            .exp(),
            "one decay for all channels (the mean over the key channels): that is Gated DeltaNet's chunk. KDA keeps "
            "one decay per key channel, so the result is (..., C, C, Dk).": diff.mean(-1, keepdim=True)
            .expand_as(diff)
            .masked_fill(future, float("-inf"))
            .exp(),
            "this is exp(G_i), the decay since the chunk start: the pair decay is the difference, exp(G_i − G_j).": (
                cum[..., :, None, :].expand_as(diff).masked_fill(future, float("-inf")).exp()
            ),
        }


@never_raises("check_kda_pair_decay")
def check_kda_pair_decay(fn: Callable) -> bool:
    """``fn(g)``: g ``(..., C, Dk)`` log decays -> ``(..., C, C, Dk)``, [i, j, c] = exp(g_{j+1,c} + … + g_{i,c})
    for j ≤ i, 0 above the diagonal. The last case is a chunk of 64 tokens with g ≈ −50 in every channel."""
    name = "check_kda_pair_decay"
    generator = torch.Generator().manual_seed(41)
    small = -torch.rand(2, 5, 3, generator=generator, dtype=F64) * 1.5  # (H, C, Dk)
    strong = -50.0 - torch.rand(1, 64, 2, generator=generator, dtype=F64)  # (H, C, Dk): cumulative down to −3264
    for g in (small, strong):
        original = g.clone()
        answer, error = call_learner(fn, g)
        if error:
            return feedback(name, error)
        if not torch.equal(g, original):
            return feedback(name, "your function changed g in place: compute a new tensor instead.")
        size, channels = g.shape[-2], g.shape[-1]
        shape = (*g.shape[:-2], size, size, channels)
        problem = _tensor_problem(answer, shape, "the pair decays (..., C, C, Dk)")
        if problem:
            return feedback(name, problem)
        if _close(answer, pair_decay(g)):
            continue
        overflow = _overflow_problem(answer, g)
        if overflow:
            return feedback(name, overflow)
        for mistake, wrong in _pair_decay_mistakes(g).items():
            if _close(answer, wrong):
                return feedback(name, mistake)
        if not bool(torch.isfinite(answer).all()):
            return feedback(
                name,
                "your result holds inf or NaN: an exp overflowed (the last case is a chunk of 64 tokens with g ≈ −50). "
                "Subtract before the exp, exp(G_i − G_j), and mask j > i to −inf before it.",
            )
        return feedback(name, "the pair decays differ from exp(g_{j+1} + … + g_i) per channel for j ≤ i, 0 above.")
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 3: KDA's forget gate


def forget_gate(pre, dt_bias, A_log):
    """Reference: pre (B, L, H, Dk), dt_bias (H·Dk,), A_log (H,) -> g = −exp(A_log_h)·softplus(pre + dt_bias)."""
    heads, channels = pre.shape[-2:]
    return -A_log.exp()[:, None] * F.softplus(pre + dt_bias.view(heads, channels))  # (B, L, H, Dk)


def _forget_gate_mistakes(pre, dt_bias, A_log) -> dict[str, torch.Tensor]:
    heads, channels = pre.shape[-2:]
    bias = dt_bias.view(heads, channels)  # (H, Dk)
    rate = A_log.exp()[:, None]  # (H, 1)
    square = heads == channels
    mistakes = {
        "the sign is missing: g is a log decay, g ≤ 0 (the state keeps exp(g) ≤ 1), so g = −exp(A_log)·softplus(…).": (
            rate * F.softplus(pre + bias)
        ),
        "A_log is the log of the rate: multiply by exp(A_log), not by A_log.": -A_log[:, None] * F.softplus(pre + bias),
        "exp(−A_log) inverts the rate: the rate is exp(A_log), g = −exp(A_log)·softplus(…).": -(-A_log).exp()[:, None]
        * F.softplus(pre + bias),
        "softplus is missing: without it pre + dt_bias can be positive, and g > 0 would grow the state. "
        "g = −exp(A_log)·softplus(pre + dt_bias).": -rate * (pre + bias),
        "sigmoid caps the rate at exp(A_log): KDA uses softplus(pre + dt_bias), unbounded above.": -rate
        * torch.sigmoid(pre + bias),
        "relu is not softplus: KDA's rate is softplus(pre + dt_bias), smooth and > 0 everywhere.": -rate
        * torch.relu(pre + bias),
        "exp is not softplus: softplus(x) = log(1 + exp(x)).": -rate * (pre + bias).exp(),
        "dt_bias goes inside the softplus: softplus(pre + dt_bias), so it sets the rate a token starts from.": -rate
        * (F.softplus(pre) + bias),
        "dt_bias is missing: g = −exp(A_log)·softplus(pre + dt_bias).": -rate * F.softplus(pre),
        "you returned the factor exp(g): return the log decay g itself (≤ 0); the rule takes exp(g).": (
            -rate * F.softplus(pre + bias)
        ).exp(),
    }
    if square:  # the axis mistakes compute only when H = Dk
        mistakes[
            "A_log is one rate per head: broadcast it over the channels, A_log.exp()[:, None] (shape (H, 1)), not "
            "over the heads."
        ] = -A_log.exp()[None, :] * F.softplus(pre + bias)
        mistakes[
            "dt_bias is laid out head by head, (H·Dk,) = H blocks of Dk: dt_bias.view(H, Dk), not view(Dk, H).T."
        ] = -rate * F.softplus(pre + dt_bias.view(channels, heads).T)
    return mistakes


@never_raises("check_kimi_forget_gate")
def check_kimi_forget_gate(fn: Callable) -> bool:
    """``fn(pre, dt_bias, A_log)``: pre ``(B, L, H, Dk)`` (the gate's low-rank projection of x), dt_bias ``(H·Dk,)``,
    A_log ``(H,)`` -> g ``(B, L, H, Dk)`` = −exp(A_log_h)·softplus(pre + dt_bias)."""
    name = "check_kimi_forget_gate"
    generator = torch.Generator().manual_seed(43)
    for batch, length, heads, channels in [(1, 4, 3, 3), (2, 3, 2, 4)]:  # square first: axis mistakes are named
        pre = 3 * torch.randn(batch, length, heads, channels, generator=generator, dtype=F64)  # (B, L, H, Dk)
        pre[0, 0, 0, 0] = 25.0  # past HF's softplus bound of 20: every exact softplus still agrees
        dt_bias = torch.randn(heads * channels, generator=generator, dtype=F64)  # (H·Dk,)
        A_log = torch.rand(heads, generator=generator, dtype=F64) * 2.7  # (H,) rates exp(A_log) in [1, 15]
        originals = (pre, dt_bias, A_log)
        inputs = [t.clone() for t in originals]
        answer, error = call_learner(fn, *inputs)
        if error:
            return feedback(name, error)
        if _changed(inputs, originals):
            return feedback(name, "your function changed its inputs in place: compute a new tensor instead.")
        problem = _tensor_problem(answer, tuple(pre.shape), "g (B, L, H, Dk)")
        if problem:
            return feedback(name, problem)
        if _close(answer, forget_gate(*originals)):
            continue
        for mistake, wrong in _forget_gate_mistakes(*originals).items():
            if _close(answer, wrong):
                return feedback(name, mistake)
        return feedback(name, "g differs from −exp(A_log_h)·softplus(pre + dt_bias) with dt_bias viewed as (H, Dk).")
    return feedback(name, None)
