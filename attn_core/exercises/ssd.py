"""Checks for notebook 12f (Mamba-2 as attention: state-space duality).

Each ``check_…`` takes the learner's *function*, runs it on a few cases, and prints one verdict through
:func:`attn_core.exercises.feedback`. A wrong answer is matched against the mistakes people make with SSD and named:
segment sums as a difference of cumulative sums (cancellation in float32), the segment off by one token, 0 instead of
−inf above the diagonal, the step size dt missing from the write or the decay, ``exp(−dt·A)`` with A already negative,
B and C swapped, the output read before the write, and, in a chunk, the entering state read without its decay or the
new state written without the decay to the chunk's end. A check never raises.

One piece: one grader family, notebook 12f's three checks, sharing their tolerance helper and reference variants.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from attn_core.exercises import call_learner, feedback, never_raises
from attn_core.linear.ssd import ssd

__all__ = ["check_segment_sums", "check_ssd_step", "check_ssd_chunk", "segment_sums", "ssd_step", "ssd_chunk"]

F64 = torch.float64


def _tensor_problem(answer, shape: tuple[int, ...], what: str) -> str | None:
    if not isinstance(answer, torch.Tensor) or not answer.is_floating_point():
        got = getattr(answer, "dtype", None) or type(answer).__name__
        return f"return {what} as a floating-point tensor of shape {shape}, got {got}."
    if tuple(answer.shape) != shape:
        return f"{what} must have shape {shape}, got {tuple(answer.shape)}."
    return None


def _close(a: torch.Tensor, b: torch.Tensor, rtol: float = 1e-9, atol: float = 1e-9) -> bool:
    """Equal within tolerance where ``b`` is finite; the same infinity exactly where ``b`` is infinite."""
    if a.shape != b.shape:
        return False
    a = a.to(F64)
    infinite = torch.isinf(b)
    if not torch.equal(a[infinite], b[infinite]) or not bool(torch.isfinite(a[~infinite]).all()):
        return False
    return torch.allclose(a[~infinite], b[~infinite], rtol=rtol, atol=atol)


# --------------------------------------------------------------------------- exercise 1: segment sums


def _masked(sums: torch.Tensor, fill: float = float("-inf"), diagonal: int = 0) -> torch.Tensor:
    size = sums.shape[-1]
    keep = torch.ones(size, size, dtype=torch.bool).tril(diagonal)  # (T, T)
    return sums.masked_fill(~keep, fill)


def segment_sums(a: torch.Tensor) -> torch.Tensor:
    """Reference: a (..., T) -> (..., T, T), [i, j] = a_{j+1} + … + a_i for j ≤ i (0 on the diagonal), −inf above.
    Each segment summed directly, in float64."""
    a = a.to(F64)
    size = a.shape[-1]
    below = torch.ones(size, size, dtype=torch.bool).tril(-1)  # (T, T) j < i
    sums = a[..., :, None].expand(*a.shape, size).masked_fill(~below, 0.0).cumsum(-2)  # (..., T, T)
    return _masked(sums)


def _segment_mistakes(a: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each usual mistake's answer on ``a`` (float64), keyed by what the learner is told."""
    right = segment_sums(a)  # (..., T, T)
    cum = a.cumsum(-1)  # (..., T)
    shifted = torch.cat([torch.zeros_like(a[..., :1]), a[..., :-1]], dim=-1)  # a_{t-1}
    return {
        "above the diagonal (j > i, the future) you put 0: exp(0) = 1, so the future would leak in with full "
        "weight. Fill −inf there (exp(−inf) = 0).": _masked(right.nan_to_num(neginf=0.0), 0.0),
        "your matrix is transposed: row i is the reading token (the query), column j the writing one, and "
        "[i, j] = a_{j+1} + … + a_i is filled for j ≤ i (lower triangle).": segment_sums(a).transpose(-1, -2),
        "off by one token: the segment starts at j + 1. Token j's write enters the state after its own decay, so "
        "a_j is not in [i, j] (the diagonal is 0: a token reads its own write undecayed).": _masked(
            right + a[..., None, :]
        ),
        "off by one token: the segment ends at i and includes a_i (token i decays the state before it reads it); "
        "you summed a_j … a_{i−1}.": _masked(segment_sums(shifted)),
        "the diagonal must be 0, not −inf: a token reads its own write, undecayed (exp(0) = 1).": _masked(
            right, diagonal=-1
        ),
        "the sign is flipped: the entries are sums of a = dt·A ≤ 0 (log decays), so they are ≤ 0.": -right,
        "you returned exp of the sums (the decay mask itself): this function stays in log space; the mask is "
        "exp(segment_sums(dt·A)).": _masked(right.exp(), 0.0),
        "each entry must start at token j: you put the decay since the sequence start (cumsum up to i) in every "
        "column.": _masked(cum[..., :, None].expand(*a.shape, a.shape[-1])),
    }


_CANCELLATION = (
    "you subtracted cumulative sums (cumsum_i − cumsum_j). Right in exact arithmetic, but in float32 one strong "
    "decay (a = −100) makes the cumulative sums about −100, whose rounding (7.6e-6) swamps segments of 1e-3 that "
    "come after it. Sum each segment directly: mask a_t outside j < t ≤ i, then cumsum (or sum) it."
)


@never_raises("check_segment_sums")
def check_segment_sums(fn: Callable) -> bool:
    """``fn(a)``: a ``(..., T)`` log decays ``dt·A`` -> ``(..., T, T)`` with [i, j] = a_{j+1} + … + a_i for j ≤ i,
    −inf above the diagonal."""
    name = "check_segment_sums"
    generator = torch.Generator().manual_seed(37)
    mild = -torch.rand(2, 3, 6, generator=generator, dtype=F64) - 0.05  # (B, H, T)
    strong = torch.full((1, 1, 32), -1e-3, dtype=torch.float32)  # (1, 1, T) a long-memory head ...
    strong[..., 2] = -100.0  # ... and one token that resets it
    for label, a in (("a small float64 case", mild), ("float32, one strong decay then slow ones", strong)):
        answer, error = call_learner(fn, a.clone())
        if error:
            return feedback(name, error)
        where = f"with {label}"
        problem = _tensor_problem(answer, (*a.shape, a.shape[-1]), "the segment sums")
        if problem:
            return feedback(name, f"{where}: {problem}")
        expected = segment_sums(a)  # (..., T, T) float64
        # A float32 answer: each segment is a sum of at most T same-sign terms, whose rounding error is below
        # (T - 1) · 2^-24 of the sum's size (no cancellation); float64 answers get the float64 bound.
        rtol = a.shape[-1] * 2.0**-24 if a.dtype == torch.float32 else 1e-12
        if _close(answer, expected, rtol=rtol, atol=1e-12):
            continue
        if a.dtype == torch.float32 and _close(answer, expected, rtol=0.05, atol=1e-6):
            return feedback(name, f"{where}: {_CANCELLATION}")
        finite_part = torch.isfinite(expected)
        if isinstance(answer, torch.Tensor) and torch.isnan(answer[~finite_part]).any():
            return feedback(
                name,
                f"{where}: your matrix has NaN above the diagonal: −inf − (−inf) is NaN. Fill −inf after "
                "summing (masked_fill), not before a subtraction.",
            )
        for mistake, wrong in _segment_mistakes(a.to(F64)).items():
            if _close(answer, wrong, rtol=max(rtol, 1e-9), atol=1e-9):
                return feedback(name, f"{where}: {mistake}")
        return feedback(
            name, f"{where}: entry [i, j] must be a_{{j+1}} + … + a_i for j ≤ i (0 on the diagonal), −inf above."
        )
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 2: one step of the recurrence


def ssd_step(state, x, dt, A, B, C, *, decay=None, write_dt=True, read_before=False, decay_last=False, read_dt=False):
    """Reference (defaults) and its variants: state (b, H, P, N), x (b, H, P), dt (b, H), A (H,), B and C (b, H, N)
    -> (y (b, H, P), new state (b, H, P, N)): h ← exp(dt·A) h + dt x Bᵀ; y = h C."""
    factor = (dt * A).exp() if decay is None else decay  # (b, H)
    written = (dt[..., None] * x if write_dt else x)[..., :, None] * B[..., None, :]  # (b, H, P, N)
    new = factor[..., None, None] * state + written if not decay_last else factor[..., None, None] * (state + written)
    read_from = state if read_before else new  # (b, H, P, N)
    y = torch.einsum("bhpn,bhn->bhp", read_from, C)  # (b, H, P)
    return (dt[..., None] * y if read_dt else y), new


def _step_mistakes(state, x, dt, A, B, C) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    return {
        "the write is missing dt: Mamba-2 writes dt·x·Bᵀ (dt is the step size: a large dt forgets more and writes "
        "more).": ssd_step(state, x, dt, A, B, C, write_dt=False),
        "the decay is missing dt: exp(dt·A), not exp(A). The step size dt sets how much this token forgets.": ssd_step(
            state, x, dt, A, B, C, decay=A.exp().expand_as(dt)
        ),
        "the decay must be exp(dt·A): you multiplied the state by dt·A itself (a log decay, ≤ 0).": ssd_step(
            state, x, dt, A, B, C, decay=dt * A
        ),
        "the decay is exp(dt·A) with A already negative (A = −exp(A_log)): exp(−dt·A) > 1 makes the state "
        "grow.": ssd_step(state, x, dt, A, B, C, decay=(-dt * A).exp()),
        "y was read from the state before this token's write: update h first, then y = h C (a token sees "
        "itself, as causal attention's diagonal).": ssd_step(state, x, dt, A, B, C, read_before=True),
        "B and C are swapped: B is the key (what the token writes under), C the query (what it reads with).": ssd_step(
            state, x, dt, A, C, B
        ),
        "you decayed after the write: exp(dt·A) shrinks the new token's own write too. Decay the old state, "
        "then add dt·x·Bᵀ.": ssd_step(state, x, dt, A, B, C, decay_last=True),
        "dt multiplies the write, not the read: y = h C, where h already holds dt·x·Bᵀ.": ssd_step(
            state, x, dt, A, B, C, write_dt=False, read_dt=True
        ),
        "dt is already positive (softplus and bias were applied before this step): applying softplus again "
        "changes every step size.": ssd_step(state, x, F.softplus(dt), A, B, C),
        "y ignores the carried state: y_t = h_t C_t reads everything written so far (decayed), not only this "
        "token's write.": ssd_step(torch.zeros_like(state), x, dt, A, B, C),
    }


def _pair_problem(answer, shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> str | None:
    if not isinstance(answer, tuple | list) or len(answer) != 2:
        return f"return a pair (y, new_state), got {type(answer).__name__}."
    y, new = answer
    if isinstance(y, torch.Tensor) and isinstance(new, torch.Tensor):
        if tuple(y.shape) == shapes[1] and tuple(new.shape) == shapes[0]:
            return "you returned (new_state, y): the order is (y, new_state)."
        if tuple(new.shape) == (*shapes[1][:2], shapes[1][3], shapes[1][2]):
            return (
                f"the state is (b, H, P, N) = {shapes[1]}: the value dimension P indexes its rows, the state "
                "dimension N its columns; you returned it transposed."
            )
    return _tensor_problem(y, shapes[0], "y") or _tensor_problem(new, shapes[1], "the new state")


def _pair_close(answer, expected) -> bool:
    return all(_close(a, b) for a, b in zip(answer, expected, strict=True))


@never_raises("check_ssd_step")
def check_ssd_step(fn: Callable) -> bool:
    """``fn(state, x, dt, A, B, C)`` -> ``(y, new_state)``: one token of the Mamba-2 recurrence."""
    name = "check_ssd_step"
    generator = torch.Generator().manual_seed(38)
    for batch, heads, head_dim, state_size in [(1, 1, 2, 3), (2, 3, 4, 5)]:
        state = torch.randn(batch, heads, head_dim, state_size, generator=generator, dtype=F64)  # (b, H, P, N)
        x = torch.randn(batch, heads, head_dim, generator=generator, dtype=F64)  # (b, H, P)
        dt = torch.rand(batch, heads, generator=generator, dtype=F64) + 0.3  # (b, H) in (0.3, 1.3)
        A = -torch.rand(heads, generator=generator, dtype=F64) - 0.5  # (H,) in (-1.5, -0.5)
        B = torch.randn(batch, heads, state_size, generator=generator, dtype=F64)  # (b, H, N)
        C = torch.randn(batch, heads, state_size, generator=generator, dtype=F64)  # (b, H, N)
        inputs = (state, x, dt, A, B, C)
        copies = [t.clone() for t in inputs]
        answer, error = call_learner(fn, *copies)
        if error:
            return feedback(name, error)
        if not all(torch.equal(a, b) for a, b in zip(copies, inputs, strict=True)):
            return feedback(name, "your function changed its inputs in place: return a new state instead.")
        problem = _pair_problem(answer, ((batch, heads, head_dim), (batch, heads, head_dim, state_size)))
        if problem:
            return feedback(name, problem)
        if _pair_close(answer, ssd_step(*inputs)):
            continue
        for mistake, wrong in _step_mistakes(*inputs).items():
            if _pair_close(answer, wrong):
                return feedback(name, mistake)
        if _close(answer[1], ssd_step(*inputs)[1]):
            return feedback(name, "the new state is right but y is not: y = h C, read from the updated state.")
        return feedback(name, "expected h ← exp(dt·A)·h + dt·x·Bᵀ, then y = h C.")
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 3: one chunk of SSD


def ssd_chunk(x, dt, A, B, C, state, **wrong):
    """One chunk of the SSD algorithm (reference with no flags; each flag one mistake): x (b, H, c, P), dt (b, H, c),
    A (H,), B and C (b, H, c, N), state (b, H, P, N) -> (y (b, H, c, P), state after the chunk (b, H, P, N))."""
    log_decay = dt * A[:, None]  # (b, H, c)
    seg = segment_sums(log_decay)  # (b, H, c, c)
    mask_log = _masked(seg + log_decay[..., None, :]) if wrong.get("inclusive") else seg  # key's own step counted
    values = x * dt[..., None] if not wrong.get("no_dt") else x  # (b, H, c, P)
    scores = B @ C.transpose(-1, -2) if wrong.get("scores_swapped") else C @ B.transpose(-1, -2)  # (b, H, c, c)
    mask = torch.ones_like(seg).tril() if wrong.get("no_mask_decay") else mask_log.exp()  # (b, H, c, c)
    within = (scores * mask) @ values  # (b, H, c, P)
    from_start = log_decay.cumsum(-1)  # (b, H, c) decay from the chunk's entry through token r
    read_decay = from_start - log_decay if wrong.get("entry_off_by_one") else from_start  # (b, H, c)
    if wrong.get("entry_undecayed"):
        read_decay = torch.zeros_like(from_start)
    entering = (C @ state.transpose(-1, -2)) * read_decay.exp()[..., None]  # (b, H, c, P)
    y = within if wrong.get("no_entering") else within + entering
    to_end = seg[..., -1, :].exp() if not wrong.get("no_decay_to_end") else torch.ones_like(dt)  # (b, H, c)
    keys = C if wrong.get("write_with_C") else B  # (b, H, c, N)
    written = (values * to_end[..., None]).transpose(-1, -2) @ keys  # (b, H, P, N)
    carried = from_start[..., -1].exp() if not wrong.get("state_undecayed") else torch.ones_like(dt[..., 0])
    new = carried[..., None, None] * state + written  # (b, H, P, N)
    return y, (state if wrong.get("state_unchanged") else new)


_CHUNK_MISTAKES = {
    "no_entering": "y misses the entering state: each token also reads the state carried in from earlier chunks, "
    "C_r · h_entry, decayed from the chunk's start through token r.",
    "entry_undecayed": "the entering state is read without its decay: token r sees it through "
    "exp(a_0 + … + a_r), the decay from the chunk's entry to r.",
    "entry_off_by_one": "off by one token in the entering state's decay: exp(a_0 + … + a_r) includes token r's own "
    "step (the state decays before token r reads it).",
    "no_decay_to_end": "the new state adds each token's write without its decay to the chunk's end: token j's "
    "write is multiplied by exp(a_{j+1} + … + a_{c−1}).",
    "state_undecayed": "the carried state is not decayed across the chunk: multiply it by exp(a_0 + … + a_{c−1}) "
    "before adding the chunk's writes.",
    "no_dt": "the values are missing dt: the attention form's value is dt_j · x_j (the step size scales the write).",
    "no_mask_decay": "the quadratic part is missing the decay mask: that is plain causal linear attention. "
    "Multiply C Bᵀ by L = exp(segment sums of dt·A).",
    "scores_swapped": "the scores are B Cᵀ: C is the query and B the key, so score [i, j] = C_i · B_j = (C Bᵀ)[i, j].",
    "write_with_C": "the new state is written with C: the state stores under the key B, h += dt·x·Bᵀ.",
    "state_unchanged": "you returned the entering state unchanged: return the state after the chunk, the input to "
    "the next chunk.",
    "inclusive": "off by one token in the decay mask: [i, j] = exp(a_{j+1} + … + a_i), without token j's own step.",
}


@never_raises("check_ssd_chunk")
def check_ssd_chunk(fn: Callable) -> bool:
    """``fn(x, dt, A, B, C, state)`` -> ``(y, new_state)`` for one chunk: quadratic inside, the entering state read
    through C, and the state after the chunk."""
    name = "check_ssd_chunk"
    generator = torch.Generator().manual_seed(39)
    for batch, heads, chunk, head_dim, state_size in [(1, 1, 4, 2, 3), (2, 3, 6, 4, 5)]:
        x = torch.randn(batch, heads, chunk, head_dim, generator=generator, dtype=F64)  # (b, H, c, P)
        dt = torch.rand(batch, heads, chunk, generator=generator, dtype=F64) + 0.2  # (b, H, c)
        A = -torch.rand(heads, generator=generator, dtype=F64) - 0.3  # (H,)
        B = torch.randn(batch, heads, chunk, state_size, generator=generator, dtype=F64)  # (b, H, c, N)
        C = torch.randn(batch, heads, chunk, state_size, generator=generator, dtype=F64)  # (b, H, c, N)
        state = torch.randn(batch, heads, head_dim, state_size, generator=generator, dtype=F64)  # (b, H, P, N)
        inputs = (x, dt, A, B, C, state)
        copies = [t.clone() for t in inputs]
        answer, error = call_learner(fn, *copies)
        if error:
            return feedback(name, error)
        if not all(torch.equal(a, b) for a, b in zip(copies, inputs, strict=True)):
            return feedback(name, "your function changed its inputs in place: return a new state instead.")
        problem = _pair_problem(answer, ((batch, heads, chunk, head_dim), (batch, heads, head_dim, state_size)))
        if problem:
            return feedback(name, problem)
        expected = ssd(x, dt, A, B, C, initial_state=state)  # the recurrence, float64
        if _pair_close(answer, expected):
            continue
        for flag, mistake in _CHUNK_MISTAKES.items():
            if _pair_close(answer, ssd_chunk(*inputs, **{flag: True})):
                return feedback(name, mistake)
        y_right, state_right = (_close(a, b) for a, b in zip(answer, expected, strict=True))
        if y_right or state_right:
            which = "y is right but the new state is not" if y_right else "the new state is right but y is not"
            return feedback(name, f"{which}: compare with the recurrence one token at a time.")
        return feedback(
            name, "y and the new state differ from the recurrence: y = (L ∘ C Bᵀ)(dt·x) + decayed C·h_entry."
        )
    return feedback(name, None)
