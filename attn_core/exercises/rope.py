"""Checks for notebook 06, rotary position embeddings (RoPE).

Each ``check_…`` takes the learner's function, prints a verdict through
:func:`attn_core.exercises.feedback` and returns True/False. It never raises on a wrong answer,
and it names the usual RoPE mistakes distinctly: the interleaved layout where rotate-half was
asked (or the reverse), cos/sin laid out for the interleaved layout (``repeat_interleave(2)``) but
applied with rotate-half, the rotation turned the wrong way, the frequency formula ``base^(-i/D)``
instead of ``base^(-2i/D)``, ``base`` ignored, angles computed in float32, ``positions`` ignored or off by
one, positions that restart at 0 in every decoding step, the query left unrotated, V rotated, keys cached
before they were rotated, and the Meta / Llama-GGUF → Hugging Face row permutation inverted or applied across heads.

The reference rotation here is written out in float64 on purpose: a grader must not share a bug
with the code it grades.

One piece: the checks of notebook 06's exercises, each next to the reference it grades against and the mistakes it
names.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attn_core.attention import scaled_dot_product_attention
from attn_core.exercises import call_learner, feedback, never_raises

__all__ = [
    "check_rotate_half_rope",
    "check_rope_decode_step",
    "check_interleaved_to_half_rows",
    "reference_rope",
    "interleaved_to_half_rows",
]


def reference_rope(
    x: torch.Tensor,
    positions,
    *,
    base: float = 10000.0,
    interleaved: bool = False,
    freq_exponent: float = 2.0,
    angle_dtype=torch.float64,
    sign: float = 1.0,
) -> torch.Tensor:
    """RoPE of ``x (..., L, D)`` at ``positions (L,)``; the keywords build the usual mistakes.

    Angle of pair ``i`` at position ``m``: ``m · base^(-freq_exponent · i / D)`` (2 is right),
    computed in ``angle_dtype`` and turned by ``sign`` (+1 is counter-clockwise, the convention
    of RoFormer and every library). ``interleaved`` pairs ``(2i, 2i+1)``, otherwise ``(i, i + D/2)``.
    """
    half = x.shape[-1] // 2
    exponent = torch.arange(half, dtype=torch.float64) * freq_exponent / x.shape[-1]  # (D/2,)
    inv_freq = (base**-exponent).to(angle_dtype)  # (D/2,)
    pos = torch.as_tensor(positions).to(angle_dtype)  # (L,)
    angles = (pos[:, None] * inv_freq).to(torch.float64) * sign  # (L, D/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (L, D/2) each
    if interleaved:
        first, second = x[..., 0::2], x[..., 1::2]  # (..., L, D/2) each
    else:
        first, second = x[..., :half], x[..., half:]  # (..., L, D/2) each
    new_first = first * cos - second * sin  # (..., L, D/2)
    new_second = first * sin + second * cos  # (..., L, D/2)
    if interleaved:
        return torch.stack((new_first, new_second), dim=-1).flatten(-2)  # (..., L, D): pairs back in place
    return torch.cat((new_first, new_second), dim=-1)  # (..., L, D)


def _tensor_problem(answer, expected: torch.Tensor, what: str) -> str | None:
    """Type, shape, dtype and finiteness of an answer that should look like ``expected``."""
    if isinstance(answer, tuple) and len(answer) == 2 and all(isinstance(t, torch.Tensor) for t in answer):
        return f"return one tensor, {what} of shape {tuple(expected.shape)}, not a tuple of two."
    if not isinstance(answer, torch.Tensor):
        return f"expected a torch.Tensor ({what}, shape {tuple(expected.shape)}), got {type(answer).__name__}."
    if tuple(answer.shape) != tuple(expected.shape):
        return (
            f"wrong shape {tuple(answer.shape)}, expected {tuple(expected.shape)}: RoPE keeps the shape of its "
            "input (..., L, D); build cos/sin of shape (L, D/2) or (L, D) and let them broadcast."
        )
    if answer.is_complex():
        return (
            f"your answer is complex ({answer.dtype}): after multiplying by e^(i·angle), turn the pairs back into "
            "real features with torch.view_as_real(...).flatten(-2) (and keep the input's layout)."
        )
    if answer.dtype != expected.dtype:
        return (
            f"your answer has dtype {answer.dtype}, the input was {expected.dtype}: RoPE must keep the dtype "
            "(compute the angles in float64 if you like, then cast cos/sin with .to(x.dtype))."
        )
    if not torch.isfinite(answer).all():
        return "your answer contains NaN or inf."
    return None


def _close(answer: torch.Tensor, expected: torch.Tensor, atol: float) -> bool:
    return answer.shape == expected.shape and bool(((answer - expected).abs() <= atol).all())


# ----------------------------------------------------------------------------------------------
# Exercise 1: rotate-half RoPE from scratch
# ----------------------------------------------------------------------------------------------

WRONG_LAYOUT = (
    "wrong layout: you rotated the adjacent pairs (2i, 2i+1), the interleaved layout of RoFormer / Meta's Llama / "
    "Llama-family GGUF. "
    "This exercise asks for the rotate-half (Llama / Hugging Face) layout: pair i is (x[i], x[i + D/2])."
)
WRONG_DIRECTION = (
    "your rotation turns the wrong way (by −angle): rotate_half(x) is cat(−x2, x1), not cat(x2, −x1); "
    "the rotated pair is (x1·cos − x2·sin, x1·sin + x2·cos)."
)
WRONG_FREQUENCY = (
    "wrong frequency formula: pair i must turn by base^(-2i/D) per position (torch.arange(0, D, 2) / D); "
    "you used base^(-i/D), so the low-frequency pairs turn too fast."
)
# The figures below are measured with the tutorial / Hugging Face code (inv_freq = 1 / base ** (arange(0, D, 2).float()
# / D), angles = positions.float()[:, None] * inv_freq) against float64 angles, D = 64, base 10,000: pair 0 exact
# everywhere; 7.1e-4 rad at position 65,535 (pair 5); 2.4e-3 rad at most over positions 0..65,535 (pair 1,
# position 65,333); inv_freq's relative error 7.0e-8 at most (tests/test_exercises_rope.py measures them again).
FLOAT32_ANGLES = (
    "the angles were computed in float32: your answer is off by {error:.0e}. float32 keeps 24 bits, so "
    "θ_i = base^(-2i/D) is rounded (relative error up to 7e-8) and so is position·θ_i (to a multiple of "
    "2^-8 ≈ 0.004 rad between 32,768 and 65,536 rad); only pair 0's angle, position · 1, is exact. Measured for "
    "D = 64, base 10,000: angles off by up to 7e-4 rad at position 65,535, and up to 2.4e-3 rad at positions below "
    "65,536. Compute positions·θ in float64 (positions.to(torch.float64) times a float64 θ), then cast cos and sin "
    "to x.dtype."
)
IGNORED_POSITIONS = (
    "you ignored `positions` and used 0, 1, ..., L-1: use the positions you were given (a decoding step or "
    "a shifted chunk does not start at 0)."
)
UNCHANGED = "your function returned x unchanged: rotate each pair by position · θ_i."
REPEAT_INTERLEAVED_COS = (
    "cos/sin are laid out for the interleaved layout (angles.repeat_interleave(2, dim=-1): θ0, θ0, θ1, θ1, ...) but "
    "applied with rotate-half, which pairs x[i] with x[i + D/2]: feature i and feature i + D/2 must turn by the "
    "same θ_i, so repeat the angles as two halves, torch.cat([angles, angles], dim=-1)."
)
IGNORED_BASE = "you ignored `base` and used 10000: use the base you were given ({base:g})."
OFF_BY_ONE = (
    "off by one: you rotated the token at position m by ({shift}) · θ. Use the positions as given: the token at "
    "position m turns by m · θ_i (position 0 is not turned)."
)


def _rotate_half_with_cos_repeat_interleaved(x: torch.Tensor, positions, base: float) -> torch.Tensor:
    """The mix-up of Meta's cos/sin layout with Hugging Face's rotate_half, a common bug when porting code."""
    half = x.shape[-1] // 2
    inv_freq = base ** -(torch.arange(half, dtype=torch.float64) * 2 / x.shape[-1])  # (D/2,)
    angles = (torch.as_tensor(positions).to(torch.float64)[:, None] * inv_freq).repeat_interleave(2, -1)  # (L, D)
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)  # (..., L, D): rotate_half(x)
    return x * angles.cos().to(x.dtype) + rotated * angles.sin().to(x.dtype)  # (..., L, D)


def _rope_cases() -> list[tuple[torch.Tensor, torch.Tensor, float, str]]:
    generator = torch.Generator().manual_seed(11)
    return [
        (torch.randn(5, 8, dtype=torch.float64, generator=generator), torch.arange(5), 10000.0, "arange"),
        (
            torch.randn(2, 3, 4, 16, dtype=torch.float64, generator=generator),
            torch.tensor([7, 2, 30, 31]),
            500.0,
            "shuffled",
        ),
        (
            torch.randn(4, 64, dtype=torch.float64, generator=generator),
            torch.tensor([0, 1, 40_000, 65_535]),
            10000.0,
            "long",
        ),
        (torch.randn(3, 6, 8, generator=generator), torch.tensor([3, 4, 5, 6, 7, 8]), 10000.0, "float32"),
    ]


@never_raises("RoPE, rotate-half layout")
def check_rotate_half_rope(fn: Callable) -> bool:
    """``fn(x, positions, base)``: ``x (..., L, D)``, ``positions (L,)`` ints, ``base`` a float. Return ``x``
    with every pair ``(x[..., i], x[..., i + D/2])`` turned counter-clockwise by ``positions · base^(-2i/D)``:
    same shape and dtype (the Llama / Hugging Face rotate-half layout)."""
    name = "RoPE, rotate-half layout"
    for x, positions, base, kind in _rope_cases():
        answer, problem = call_learner(fn, x.clone(), positions.clone(), base)
        if problem is not None:
            return feedback(name, problem)
        expected = reference_rope(x, positions, base=base)  # (..., L, D)
        problem = _tensor_problem(answer, expected, "the rotated x")
        if problem is not None:
            return feedback(name, f"x {tuple(x.shape)}: {problem}")
        # float64: a rotation by angles computed in float64 is exact to a few ulps of |x| (|x| < 10 here);
        # float32: cos/sin carry eps32/2 each and the products and sum add ~2 eps32 more.
        atol = 1e-10 if x.dtype == torch.float64 else 8 * torch.finfo(torch.float32).eps * float(x.abs().max())
        if _close(answer, expected, atol):
            continue
        where = f"x {tuple(x.shape)}, positions {positions.tolist()}, base {base:g}"
        candidates = [
            (reference_rope(x, positions, base=base, interleaved=True), WRONG_LAYOUT),
            (reference_rope(x, positions, base=base, sign=-1.0), WRONG_DIRECTION),
            (reference_rope(x, positions, base=base, freq_exponent=1.0), WRONG_FREQUENCY),
            (x, UNCHANGED),
            (_rotate_half_with_cos_repeat_interleaved(x, positions, base), REPEAT_INTERLEAVED_COS),
            (reference_rope(x, positions + 1, base=base), OFF_BY_ONE.format(shift="m + 1")),
            (reference_rope(x, positions - 1, base=base), OFF_BY_ONE.format(shift="m − 1")),
        ]
        if base != 10000.0:
            candidates.append((reference_rope(x, positions, base=10000.0), IGNORED_BASE.format(base=base)))
        if kind != "arange":
            candidates.append((reference_rope(x, torch.arange(x.shape[-2]), base=base), IGNORED_POSITIONS))
        for candidate, diagnosis in candidates:
            if _close(answer, candidate, max(atol, 1e-6 * float(x.abs().max()))):
                return feedback(name, f"{where}: {diagnosis}")
        if x.dtype == torch.float64:
            # float32 angles: |Δangle| <= m·eps32 (inv_freq and the product rounded), so each output moves by at
            # most ~2·|x|·(m + 1)·eps32; allow twice that.
            reach = float(positions.max()) + 1
            error = float((answer - expected).abs().max())
            if error <= 4 * torch.finfo(torch.float32).eps * reach * float(x.abs().max()):
                return feedback(name, f"{where}: " + FLOAT32_ANGLES.format(error=error))
        worst = (answer - expected).abs().amax(dim=tuple(range(answer.ndim - 2)) + (answer.ndim - 1,))  # (L,)
        row = int(worst.argmax())
        return feedback(
            name,
            f"{where}: wrong values, largest error {float(worst[row]):.3g} at position {int(positions[row])}. "
            "Check cos/sin: angles positions[:, None] · θ with θ_i = base^(-2i/D), repeated for both halves.",
        )
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 2: one decoding step with a KV cache and RoPE
# ----------------------------------------------------------------------------------------------

PROMPT_LEN, DECODE_STEPS, DECODE_BASE = 3, 3, 100.0


def _decode_setting() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(12)
    shape = (1, 2, PROMPT_LEN + DECODE_STEPS, 8)  # (B, H, L, D)
    return tuple(torch.randn(shape, dtype=torch.float64, generator=generator) for _ in range(3))


def _position_of(row: torch.Tensor, unrotated: torch.Tensor, tried: int) -> int | None:
    """The position p in 0..tried-1 at which ``unrotated (B, H, 1, D)`` rotates to ``row``, or None."""
    for p in range(tried):
        if _close(row, reference_rope(unrotated, torch.tensor([p]), base=DECODE_BASE), 1e-9):
            return p
    return None


def _step_problem(result, q, k, v, cache_k, cache_v, expected_out) -> str | None:
    """What is wrong with the learner's ``(out, cache_k, cache_v)`` for one step, or None."""
    t = cache_k.shape[-2]
    if not (isinstance(result, (tuple, list)) and len(result) == 3):
        got = f"a {type(result).__name__} of {len(result)}" if isinstance(result, (tuple, list)) else None
        return f"return three things, (out, cache_k, cache_v); got {got or type(result).__name__}."
    shapes = {"out": (*q.shape,), "cache_k": (*cache_k.shape[:2], t + 1, 8), "cache_v": (*cache_v.shape[:2], t + 1, 8)}
    for what, answer in zip(shapes, result, strict=True):
        if not isinstance(answer, torch.Tensor) or answer.is_complex() or tuple(answer.shape) != shapes[what]:
            if not isinstance(answer, torch.Tensor):
                got = type(answer).__name__
            else:
                got = answer.dtype if answer.is_complex() else tuple(answer.shape)
            hint = " Append the new key/value along the sequence axis (dim=-2)." if what != "out" else ""
            return f"{what} should be a real tensor of shape {shapes[what]}, got {got}.{hint}"
    out, new_k, new_v = (tensor.to(torch.float64) for tensor in result)
    if not torch.isfinite(out).all():
        return "out contains NaN or inf."
    position = torch.tensor([t])  # (1,)
    if not _close(new_v[:, :, :t], cache_v, 1e-12):
        return "you changed the cached values: keep cache_v as it is and append the new v."
    if not _close(new_v[:, :, t:], v, 1e-12):
        if _position_of(new_v[:, :, t:], v, t + 2) is not None:
            return (
                "you rotated V: RoPE turns only q and k, so that the score q·k depends on their distance; the "
                "values carry content and must be cached as they are."
            )
        return "the value you appended to cache_v is wrong: append the new v itself."
    if not _close(new_k[:, :, :t], cache_k, 1e-9):
        if _close(new_k[:, :, :t], reference_rope(cache_k, position.expand(t), base=DECODE_BASE), 1e-9):
            return (
                "you rotated the cached keys again: they were rotated once, at their own positions, when they were "
                "cached. Rotate only the new q and k."
            )
        return "you changed the cached keys: keep cache_k as it is and append the new rotated key."
    appended = new_k[:, :, t:]  # (B, H, 1, D)
    restarted = (
        "positions restarted at 0: the new token was rotated as position 0 (RoPE at position 0 is the identity), "
        f"as if it were the first token. Its position is the number of tokens already cached: cache_k.shape[-2] "
        f"(here {t})."
    )
    if _close(appended, k, 1e-12):
        if _close(out, scaled_dot_product_attention(q, new_k, new_v)[0], 1e-9):
            return restarted
        return (
            "your cache holds the new key BEFORE rotation: rotate k first, then append it. Keys are rotated once, "
            "before caching; a cache of raw keys must be rotated again, all T of them, at every step."
        )
    found = _position_of(appended, k, 2 * t + 2)
    if found is not None and found != t:
        if abs(found - t) == 1:
            return (
                f"off by one: you rotated the new key at position {found}; tokens 0..{t - 1} are cached, so the new "
                f"one is at position cache_k.shape[-2] = {t}."
            )
        return f"you rotated the new key at position {found}; it is at position cache_k.shape[-2] = {t}."
    if found is None:
        return (
            f"the key you appended is not k rotated at position {t}: rotate k (rotate-half layout) at position "
            "cache_k.shape[-2], then append it."
        )
    if _close(out, expected_out, 1e-9):
        return None
    if _close(out, scaled_dot_product_attention(q, new_k, new_v)[0], 1e-9):  # q as given = q rotated at 0
        return (
            "the cache is right, but the query is not rotated (or rotated at position 0, where RoPE is the "
            f"identity): rotate q AND k at the new token's position, cache_k.shape[-2] = {t}."
        )
    for p in range(1, 2 * t + 2):
        q_p = reference_rope(q, torch.tensor([p]), base=DECODE_BASE)  # (B, H, 1, D)
        if _close(out, scaled_dot_product_attention(q_p, new_k, new_v)[0], 1e-9):
            return (
                f"the cache is right, but you rotated the query at position {p}: q and k of the new token share "
                f"its position, cache_k.shape[-2] = {t}."
            )
    q_t = reference_rope(q, position, base=DECODE_BASE)  # (B, H, 1, D)
    if _close(out, scaled_dot_product_attention(q_t, new_k[:, :, :1], new_v[:, :, :1])[0], 1e-9):
        return (
            "your one new query saw only key 0: F.scaled_dot_product_attention(is_causal=True) aligns the mask "
            "top-left, so with 1 query and T+1 keys it hides all but the first. One new query may see every "
            "cached key: pass no mask (or a bottom-right one, ac.causal_mask(1, T + 1))."
        )
    return (
        "the cache is right but the output is not: attend with the rotated q over the whole updated cache "
        "(scale 1/√D; no mask is needed for one query)."
    )


@never_raises("decoding step with RoPE and a KV cache")
def check_rope_decode_step(fn: Callable) -> bool:
    """``fn(q, k, v, cache_k, cache_v, base)`` decodes ONE new token: ``q, k, v (B, H, 1, D)`` are its
    projections before RoPE; ``cache_k (B, H, T, D)`` holds the ROTATED keys of tokens 0..T-1 and
    ``cache_v (B, H, T, D)`` their values. Return ``(out (B, H, 1, D), cache_k (B, H, T+1, D),
    cache_v (B, H, T+1, D))``. After a prompt of 3 tokens the check runs 3 steps, handing each one the
    right cache, and compares every output with one causal pass over all 6 tokens (float64)."""
    name = "decoding step with RoPE and a KV cache"
    q, k, v = _decode_setting()  # (B, H, L, D) each, float64
    positions = torch.arange(q.shape[-2])  # (L,)
    q_rot = reference_rope(q, positions, base=DECODE_BASE)  # (B, H, L, D)
    k_rot = reference_rope(k, positions, base=DECODE_BASE)  # (B, H, L, D)
    full, _ = scaled_dot_product_attention(q_rot, k_rot, v, is_causal=True)  # (B, H, L, D)
    for t in range(PROMPT_LEN, PROMPT_LEN + DECODE_STEPS):
        new = slice(t, t + 1)
        cache_k, cache_v = k_rot[:, :, :t], v[:, :, :t]  # (B, H, T, D): the right cache of tokens 0..t-1
        args = (q[:, :, new], k[:, :, new], v[:, :, new], cache_k, cache_v)
        result, problem = call_learner(fn, *(tensor.clone() for tensor in args), DECODE_BASE)
        if problem is not None:
            return feedback(name, problem)
        problem = _step_problem(result, *args, full[:, :, new])
        if problem is not None:
            return feedback(name, f"step {t - PROMPT_LEN + 1} (cache of {t} tokens): {problem}")
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 3: Meta / Llama-GGUF (interleaved) rows -> Hugging Face (rotate-half) rows
# ----------------------------------------------------------------------------------------------


def interleaved_to_half_rows(weight: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Reorder the output rows of a q/k projection ``(num_heads · D, hidden)`` head by head, from the
    interleaved pair order of Meta's checkpoints and Llama-family GGUF files to Hugging Face's rotate-half order
    (as ``permute`` in transformers' ``convert_llama_weights_to_hf.py``)."""
    out_features, in_features = weight.shape
    head_dim = out_features // num_heads
    return (
        weight.view(num_heads, head_dim // 2, 2, in_features)  # (H, D/2, 2, hidden): row 2i+j of a head
        .transpose(1, 2)  # (H, 2, D/2, hidden): first the even rows of each head, then the odd ones
        .reshape(out_features, in_features)  # (H·D, hidden)
    )


def _half_to_interleaved_rows(weight: torch.Tensor, num_heads: int) -> torch.Tensor:
    out_features, in_features = weight.shape
    head_dim = out_features // num_heads
    return weight.view(num_heads, 2, head_dim // 2, in_features).transpose(1, 2).reshape(out_features, in_features)


@never_raises("Meta / Llama-GGUF rows -> Hugging Face rows")
def check_interleaved_to_half_rows(fn: Callable) -> bool:
    """``fn(weight, num_heads)``: ``weight (num_heads · head_dim, hidden)`` is a q or k projection whose rows,
    head by head, are in the interleaved order (pairs ``(2i, 2i+1)``: Meta's checkpoints, Llama-family GGUF
    files). Return the same weight with the rows of each head reordered so that pair ``i`` is ``(i, i + head_dim/2)``
    (Hugging Face's rotate-half order)."""
    name = "Meta / Llama-GGUF rows -> Hugging Face rows"
    generator = torch.Generator().manual_seed(13)
    for num_heads, head_dim, hidden in ((2, 8, 6), (4, 8, 16), (1, 16, 4)):
        weight = torch.randn(num_heads * head_dim, hidden, dtype=torch.float64, generator=generator)  # (H·D, hidden)
        answer, problem = call_learner(fn, weight.clone(), num_heads)
        if problem is not None:
            return feedback(name, problem)
        expected = interleaved_to_half_rows(weight, num_heads)  # (H·D, hidden)
        where = f"num_heads={num_heads}, head_dim={head_dim}"
        if isinstance(answer, torch.Tensor) and tuple(answer.shape) == (hidden, num_heads * head_dim):
            return feedback(
                name,
                f"{where}: you returned the transposed weight {tuple(answer.shape)}: keep "
                f"(out_features, in_features) = {tuple(weight.shape)} and reorder its rows.",
            )
        problem = _tensor_problem(answer, expected, "the reordered weight")
        if problem is not None:
            return feedback(name, f"{where}: {problem}")
        if torch.equal(answer, expected):
            continue
        column_perm = interleaved_to_half_rows(weight.T.contiguous(), 1).T  # hidden is even in every case
        candidates = [
            (
                _half_to_interleaved_rows(weight, num_heads),
                "you applied the inverse permutation (Hugging Face -> "
                "GGUF, as in llama.cpp's convert_hf_to_gguf.py). From interleaved to half, each head's rows become "
                "[0, 2, 4, ..., D-2, 1, 3, ..., D-1]: view(H, D/2, 2, hidden).transpose(1, 2).",
            ),
            (
                interleaved_to_half_rows(weight, 1),
                "you permuted the whole matrix as one head: reorder the rows "
                "within each head (view(num_heads, head_dim // 2, 2, hidden) first).",
            ),
            (weight, "the rows are unchanged: the interleaved pairs (2i, 2i+1) must move to (i, i + D/2)."),
        ]
        candidates.append(
            (
                column_perm,
                "you reordered the columns (input features): RoPE pairs the OUTPUT "
                "features of q_proj/k_proj, which are the rows of weight (out, in).",
            )
        )
        for candidate, diagnosis in candidates:
            if candidate.shape == answer.shape and torch.equal(answer, candidate):
                return feedback(name, f"{where}: {diagnosis}")
        if torch.equal(answer.sort(dim=0).values, weight.sort(dim=0).values):
            return feedback(
                name,
                f"{where}: the rows are a permutation of the input but not the right one: head h's "
                "row h·D + 2i + j must go to row h·D + j·D/2 + i.",
            )
        return feedback(name, f"{where}: wrong values: reorder rows only, do not change them.")
    return feedback(name, None)
