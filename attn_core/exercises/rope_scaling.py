"""Checks for notebook 06b, long context: YaRN's frequencies, YaRN's attention temperature, partial RoPE.

Each ``check_…`` takes the learner's function, prints a verdict through :func:`attn_core.exercises.feedback` and
returns True/False; it never raises on a wrong answer and names the usual mistakes: the YaRN ramp evaluated at the
feature index 2i instead of the pair index i, the ramp's ends swapped, the ramp not clamped, the correction range
not truncated, every pair interpolated (position interpolation); the temperature applied to q only, to the logits
on top of cos/sin (twice), divided instead of multiplied, with log10 or without its "+ 1"; partial RoPE's exponent
over head_dim instead of rotary_dim, every feature rotated, rotate-half pairs taken across the whole head, and
angles computed in float32 at position 131,000.

The references are written out in float64 here, not taken from ``positions.rope``: a grader must not share a bug
with the code it grades (tests/test_exercises_rope_scaling.py checks them against ``ac.rope_frequencies``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from attn_core.exercises import call_learner, feedback, never_raises
from attn_core.i18n import _

__all__ = ["check_yarn_inv_freq", "check_yarn_weights", "check_partial_rope", "reference_yarn_inv_freq"]

F64 = torch.float64


def reference_yarn_inv_freq(
    head_dim: int,
    base: float,
    factor: float,
    old_len: int,
    *,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    ramp_step: int = 1,
    swapped: bool = False,
    clamp: bool = True,
    truncate: bool = True,
    dtype: torch.dtype = F64,
) -> torch.Tensor:
    """YaRN's inverse frequencies ``(head_dim/2,)``; the keywords build the usual mistakes (defaults: right)."""
    pos_freqs = base ** (torch.arange(0, head_dim, 2, dtype=dtype) / head_dim)  # (D/2,) base^(2i/D)

    def pair_index(rotations: float) -> float:  # the pair that turns `rotations` times in old_len tokens
        return head_dim * math.log(old_len / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_index(beta_fast), pair_index(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    high = high + 0.001 if low == high else high
    index = torch.arange(0, ramp_step * (head_dim // 2), ramp_step, dtype=dtype)  # (D/2,) i (or 2i: the mistake)
    ramp = (index - low) / (high - low)  # (D/2,) 0 at fast pairs, 1 at slow ones
    ramp = ramp.clamp(0, 1) if clamp else ramp
    if swapped:
        ramp = 1 - ramp
    return (1 - ramp) / pos_freqs + ramp / (factor * pos_freqs)  # (D/2,) extrapolated -> interpolated


def _tensor_problem(answer, shape: tuple[int, ...], what: str) -> str | None:
    if not isinstance(answer, torch.Tensor):
        return _("expected a torch.Tensor ({what}, shape {shape}), got {type}.").format(
            what=what, shape=shape, type=type(answer).__name__
        )
    if tuple(answer.shape) != shape:
        return _("wrong shape {shape} for {what}: expected {expected}.").format(
            shape=tuple(answer.shape), what=what, expected=shape
        )
    if not answer.is_floating_point() or not torch.isfinite(answer).all():
        return _("{what} must be a finite floating-point tensor.").format(what=what)
    return None


def _close(answer: torch.Tensor, expected: torch.Tensor, rtol: float = 1e-9, atol: float = 1e-12) -> bool:
    return answer.shape == expected.shape and bool(torch.allclose(answer.to(F64), expected, rtol=rtol, atol=atol))


# ----------------------------------------------------------------------------- exercise 1: YaRN's frequencies
RAMP_OVER_FEATURES = _(
    "the ramp was evaluated at the feature index 2i (torch.arange(0, D, 2)) instead of the pair index i: YaRN's "
    "correction range [low, high] counts pairs (it solves rotations(i) = beta for i), so the ramp runs over "
    "torch.arange(D // 2)."
)
RAMP_SWAPPED = _(
    "the ramp's ends are swapped: the fast pairs (many turns in the old context, small i) must keep their frequency "
    "and the slow pairs (less than beta_slow turns) must be divided by factor, not the other way round."
)
RAMP_NOT_CLAMPED = _(
    "the ramp is not clamped: (i - low) / (high - low) goes below 0 and above 1 outside the band; clamp it to "
    "[0, 1] (torch.clamp), or the fast pairs speed up and the slow ones are stretched more than factor."
)
NOT_TRUNCATED = _(
    "the correction range was not truncated: with truncate=True (the default, and DeepSeek's and Qwen's configs) "
    "low is rounded down (math.floor) and high up (math.ceil); only gpt-oss ships truncate=False."
)
ALL_INTERPOLATED = _(
    "every pair was divided by factor: that is position interpolation. YaRN keeps the fast pairs (more than "
    "beta_fast turns in the old context) unchanged and divides only the slow ones."
)
NOT_SCALED = _("your frequencies are plain RoPE's, base^(-2i/D): YaRN divides the slow pairs by factor.")
FLOAT32 = _(
    "computed in float32: the frequencies are off by {error:.0e} relative. Compute them in float64 "
    "(dtype=torch.float64), angles too: at position 131,000 float32 angles are off by up to ~8e-3 rad."
)
YARN_CASES = [(64, 10000.0, 40.0, 4096), (128, 500000.0, 8.0, 8192), (32, 10000.0, 4.0, 2048)]


@never_raises(_("YaRN's inverse frequencies"))
def check_yarn_inv_freq(fn: Callable) -> bool:
    """``fn(head_dim, base, factor, original_max_position_embeddings) -> inv_freq (head_dim/2,)`` (betas 32, 1)."""
    name = _("YaRN's inverse frequencies")
    for head_dim, base, factor, old_len in YARN_CASES:
        answer, problem = call_learner(fn, head_dim, base, factor, old_len)
        if problem is None:
            problem = _tensor_problem(answer, (head_dim // 2,), _("inv_freq"))
        if problem is not None:
            return feedback(name, problem)
        expected = reference_yarn_inv_freq(head_dim, base, factor, old_len)  # (D/2,)
        if _close(answer, expected):
            continue
        mistakes = [
            (RAMP_OVER_FEATURES, {"ramp_step": 2}),
            (RAMP_SWAPPED, {"swapped": True}),
            (RAMP_NOT_CLAMPED, {"clamp": False}),
            (NOT_TRUNCATED, {"truncate": False}),
        ]
        for message, knobs in mistakes:
            if _close(answer, reference_yarn_inv_freq(head_dim, base, factor, old_len, **knobs)):
                return feedback(name, message)
        plain = base ** -(torch.arange(0, head_dim, 2, dtype=F64) / head_dim)  # (D/2,)
        if _close(answer, plain / factor):
            return feedback(name, ALL_INTERPOLATED)
        if _close(answer, plain):
            return feedback(name, NOT_SCALED)
        relative = float(((answer.to(F64) - expected).abs() / expected).max())
        if answer.dtype == torch.float32 or relative < 1e-6:
            return feedback(name, FLOAT32.format(error=relative))
        return feedback(
            name,
            _(
                "head_dim {d}, base {base}, factor {factor}, original context {n}: inv_freq is off by up to "
                "{error} relative. Build it as (1 - ramp) / base^(2i/D) + ramp / (factor · base^(2i/D)), with "
                "the ramp clamp((i - low) / (high - low), 0, 1) over pairs."
            ).format(d=head_dim, base=f"{base:g}", factor=f"{factor:g}", n=old_len, error=f"{relative:.1e}"),
        )
    return feedback(name, None)


# ----------------------------------------------------------------------------- exercise 2: the temperature
TEMPERATURE_ONCE = _(
    "the temperature was applied once (to q only, or as g on the logits): YaRN multiplies cos AND sin by "
    "g = 0.1·ln(s) + 1, so q and k both grow by g and every score by g²."
)
TEMPERATURE_TWICE = _(
    "the temperature was applied twice: g on cos/sin (both q and k) already multiplies each score by g²; "
    "multiplying the logits by g² again gives g⁴."
)
TEMPERATURE_MISSING = _("no temperature: with YaRN every score is multiplied by g² = (0.1·ln(s) + 1)².")
TEMPERATURE_DIVIDED = _(
    "the temperature divides the scores: YaRN makes the softmax sharper over a longer context, so the scores are "
    "multiplied by g², not divided."
)
TEMPERATURE_LOG10 = _("g uses log10: YaRN's temperature is 0.1·ln(s) + 1 with the natural log (math.log).")
TEMPERATURE_NO_ONE = _("g lost its + 1: YaRN's temperature is 0.1·ln(s) + 1 (1 when s = 1, no stretch).")
NOT_CAUSAL = _("the weights are not causal: a query may not attend to a later key (mask with tril).")
WEIGHTS_GENERIC = _(
    "factor {factor:g}: your weights differ from softmax(q·kᵀ · g² / √D) (causal) by {error:.1e}, "
    "g = 0.1·ln(factor) + 1."
)


def _weights(q: torch.Tensor, k: torch.Tensor, multiplier: float, causal: bool = True) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) * multiplier / math.sqrt(q.shape[-1])  # (H, L, L)
    if causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()  # (L, L)
        scores = scores.masked_fill(~keep, float("-inf"))  # (H, L, L)
    return scores.softmax(-1)  # (H, L, L)


@never_raises(_("YaRN's attention temperature"))
def check_yarn_weights(fn: Callable) -> bool:
    """``fn(q, k, factor) -> weights (H, L, L)``: causal softmax with YaRN's temperature; q, k already rotated."""
    name = _("YaRN's attention temperature")
    generator = torch.Generator().manual_seed(22)
    for factor in (40.0, 4.0):
        q = torch.randn(2, 6, 8, dtype=F64, generator=generator)  # (H, L, D)
        k = torch.randn(2, 6, 8, dtype=F64, generator=generator)  # (H, L, D)
        answer, problem = call_learner(fn, q.clone(), k.clone(), factor)
        if problem is None:
            problem = _tensor_problem(answer, (2, 6, 6), _("the attention weights"))
        if problem is not None:
            return feedback(name, problem)
        g = 0.1 * math.log(factor) + 1
        expected = _weights(q, k, g**2)  # (H, L, L)
        if _close(answer, expected):
            continue
        mistakes = [
            (TEMPERATURE_ONCE, g),
            (TEMPERATURE_TWICE, g**4),
            (TEMPERATURE_MISSING, 1.0),
            (TEMPERATURE_DIVIDED, g**-2),
            (TEMPERATURE_LOG10, (0.1 * math.log10(factor) + 1) ** 2),
            (TEMPERATURE_NO_ONE, (0.1 * math.log(factor)) ** 2),
        ]
        for message, multiplier in mistakes:
            if _close(answer, _weights(q, k, multiplier)):
                return feedback(name, message)
        if _close(answer, _weights(q, k, g**2, causal=False)):
            return feedback(name, NOT_CAUSAL)
        error = float((answer.to(F64) - expected).abs().max())
        return feedback(name, WEIGHTS_GENERIC.format(factor=factor, error=error))
    return feedback(name, None)


# ----------------------------------------------------------------------------- exercise 3: partial RoPE
EXPONENT_OVER_HEAD_DIM = _(
    "the exponent runs over head_dim: with partial RoPE pair i turns by base^(-2i / rotary_dim), rotary_dim = "
    "int(head_dim · partial_rotary_factor), so the rotated features span the same frequencies as a full head."
)
ROTATED_EVERYTHING = _(
    "every feature was rotated: only the first rotary_dim = int(head_dim · partial_rotary_factor) features turn; "
    "the rest pass through unchanged."
)
PAIRS_ACROSS_HEAD = _(
    "rotate-half pairs were taken across the whole head, (i, i + head_dim/2): with partial RoPE the pairs live "
    "inside the rotated part, (i, i + rotary_dim/2), and features rotary_dim: are left alone."
)
ROTATED_THE_END = _(
    "the wrong features were rotated: Hugging Face (StableLM, Phi, Qwen3-Next) rotates the FIRST rotary_dim "
    "features, x[..., :rotary_dim], and passes x[..., rotary_dim:] through."
)
PARTIAL_FLOAT32 = _(
    "the angles were computed in float32: your answer is off by {error:.0e}, and at position 131,000 float32 angles "
    "are off by up to ~8e-3 rad. Compute positions·θ in float64 and cast only cos and sin to x.dtype."
)
PARTIAL_GENERIC = _(
    "head_dim {head_dim}, partial_rotary_factor {factor:g}, positions from {start}: your answer is off by {error:.1e}."
)
PARTIAL_CASES = [(80, 0.4, 0, 10000.0), (64, 0.25, 131_000, 10000.0), (16, 1.0, 5, 500.0), (24, 0.5, 131_000, 1e6)]


def _partial(x, positions, base, rotary_dim, *, exponent_dim=None, start_feature=0, half=None, dtype=F64):
    """Rotate-half RoPE on x[..., start : start + rotary_dim]; the keywords build the mistakes."""
    exponent_dim = exponent_dim or rotary_dim
    half = half or rotary_dim // 2
    inv_freq = base ** -(torch.arange(0, rotary_dim, 2, dtype=dtype) / exponent_dim)  # (R/2,)
    angles = (positions.to(dtype)[:, None] * inv_freq).to(F64)  # (L, R/2)
    cos, sin = angles.cos(), angles.sin()  # (L, R/2) each
    out = x.clone()  # (..., L, D)
    first = x[..., start_feature : start_feature + rotary_dim // 2]  # (..., L, R/2)
    second = x[..., start_feature + half : start_feature + half + rotary_dim // 2]  # (..., L, R/2)
    out[..., start_feature : start_feature + rotary_dim // 2] = first * cos - second * sin
    out[..., start_feature + half : start_feature + half + rotary_dim // 2] = second * cos + first * sin
    return out  # (..., L, D)


@never_raises(_("partial RoPE"))
def check_partial_rope(fn: Callable) -> bool:
    """``fn(x, positions, base, partial_rotary_factor) -> x rotated (..., L, D)``, rotate-half inside rotary_dim."""
    name = _("partial RoPE")
    generator = torch.Generator().manual_seed(23)
    for head_dim, factor, start, base in PARTIAL_CASES:
        x = torch.randn(2, 5, head_dim, dtype=F64, generator=generator)  # (H, L, D)
        positions = torch.arange(start, start + 5)  # (L,)
        answer, problem = call_learner(fn, x.clone(), positions.clone(), base, factor)
        if problem is None:
            problem = _tensor_problem(answer, tuple(x.shape), _("the rotated x"))
        if problem is not None:
            return feedback(name, problem)
        rotary_dim = int(head_dim * factor)
        expected = _partial(x, positions, base, rotary_dim)  # (H, L, D)
        if _close(answer, expected, rtol=0, atol=1e-10):
            continue
        mistakes = [
            (EXPONENT_OVER_HEAD_DIM, {"exponent_dim": head_dim}),
            (PAIRS_ACROSS_HEAD, {"half": head_dim // 2}),
            (ROTATED_THE_END, {"start_feature": head_dim - rotary_dim}),
        ]
        for message, knobs in mistakes:
            if rotary_dim < head_dim and _close(answer, _partial(x, positions, base, rotary_dim, **knobs), 0, 1e-10):
                return feedback(name, message)
        if rotary_dim < head_dim and _close(answer, _partial(x, positions, base, head_dim), 0, 1e-10):
            return feedback(name, ROTATED_EVERYTHING)
        error = float((answer.to(F64) - expected).abs().max())
        if _close(answer, _partial(x, positions, base, rotary_dim, dtype=torch.float32), 0, 1e-6):
            return feedback(name, PARTIAL_FLOAT32.format(error=error))
        return feedback(name, PARTIAL_GENERIC.format(head_dim=head_dim, factor=factor, start=start, error=error))
    return feedback(name, None)
