"""Rotary position embeddings (RoPE; Su et al. 2021, "RoFormer", arXiv 2104.09864).

Each pair of features of a query or key at position ``m`` is rotated by the angle
``m · base^(-2i/D)`` (pair ``i`` of ``D/2``), so ``<R_m q, R_n k>`` depends only on ``m - n``.
Two layouts of the pairs are in use:

- ``interleaved=False``: pairs ``(i, i + D/2)``, the "rotate half" layout of Hugging Face / Llama;
- ``interleaved=True``: pairs ``(2i, 2i + 1)``, RoFormer, Meta's original Llama code, DeepSeek.

The layout belongs to the model's code, not to a file format. llama.cpp picks the rotary mode per architecture:
Llama-family GGUF files are interleaved (the converter permutes Hugging Face's q/k weights into that order),
while Gemma 3's GGUF, for one, is rotate-half with unpermuted weights. Read the architecture, never the extension.

The angles are computed in float64 and only cos/sin are cast to ``x``'s dtype: a float32 angle
``m · f`` is off by up to about ``m · 2^-24`` rad (``f`` and the product are each rounded; pair 0, ``f = 1``, is
exact). Measured with D = 128, base 10,000: 1.7e-3 rad at ``m = 60_000``. Positions may be negative (a
rotation backwards: ``R_{-m} = R_m^T``) but must lie within ``±MAX_POSITION`` (2^40): beyond it even a float64
angle is off by more than ``2^40 · 2^-53 ≈ 1e-4`` rad, and at 2^53 it is meaningless.

Long context (:func:`rope_frequencies`, Hugging Face's ``rope_parameters`` key names): ``"linear"`` (position
interpolation), ``"llama3"`` (band-wise: short wavelengths kept, long ones divided by ``factor``, smoothed
between) and ``"yarn"`` (a ramp between the bands plus an attention factor on cos/sin). ``partial_rotary_factor``
rotates only the first ``rotary_dim = int(head_dim · factor)`` features; the rest pass through unrotated.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import torch

__all__ = ["apply_rope", "rope_angles", "rope_frequencies"]

MAX_POSITION = 2**40  # |position| bound: a float64 angle m·θ is then within 2^40 · 2^-53 = 2^-13 rad


def _check_base(base: float) -> float:
    if isinstance(base, bool) or not isinstance(base, int | float) or not math.isfinite(base) or base <= 0:
        raise ValueError(f"base must be a finite number > 0 (10000.0 in Llama 2, 500000.0 in Llama 3), got {base!r}.")
    return float(base)


def _as_positions(
    positions: torch.Tensor | Sequence[int] | int, device: torch.device | None, *, check_range: bool = True
) -> torch.Tensor:
    if not isinstance(positions, torch.Tensor):
        try:
            positions = torch.as_tensor(positions)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"positions must be an integer tensor or a sequence of ints (e.g. range(L)), got "
                f"{type(positions).__name__}: {err}"
            ) from None
        if positions.numel() == 0:
            positions = positions.long()  # torch.as_tensor([]) is float32; an empty sequence has no dtype
    if positions.dtype == torch.bool or positions.is_floating_point() or positions.is_complex():
        raise TypeError(
            f"positions must hold integers (token indices), got dtype {positions.dtype}. "
            "Convert with positions.long() (e.g. torch.arange(L) instead of torch.linspace)."
        )
    positions = positions.to(device=device, dtype=torch.long)  # (..., L)
    # A data-dependent check: skipped while compiling (it would break the graph) and on meta tensors (no data).
    if check_range and positions.numel() and positions.device.type != "meta" and not torch.compiler.is_compiling():
        biggest = int(positions.abs().max())
        if biggest > MAX_POSITION:
            raise ValueError(
                f"positions must lie within ±2^40 = ±{MAX_POSITION} (beyond it a float64 angle m·θ loses its "
                f"precision: the rotation would be noise), got a position of magnitude {biggest}. Positions are "
                "token indices: pass torch.arange(start, start + L)."
            )
    return positions  # (..., L)


def _as_token_positions(positions: torch.Tensor | Sequence[int] | int, device: torch.device | None) -> torch.Tensor:
    """``_as_positions`` for a layer's ``positions=``: token indices, so negative ones are a caller's bug."""
    positions = _as_positions(positions, device)  # (..., L)
    if positions.numel() and positions.device.type != "meta" and not torch.compiler.is_compiling():
        if int(positions.min()) < 0:
            raise ValueError(
                f"positions must be >= 0 (token indices), got {positions.tolist()}. Positions count tokens "
                "from the start of the sequence: torch.arange(start, start + Lq)."
            )
    return positions  # (..., L)


def rope_angles(positions: torch.Tensor | Sequence[int] | int, head_dim: int, *, base: float = 10000.0) -> torch.Tensor:
    """The rotation angles ``positions[..., None] · base^(-2i/head_dim)``, ``i = 0 .. head_dim/2 - 1``.

    ``positions`` an integer tensor (or a sequence of ints, e.g. ``range(L)``) of any shape ``(..., L)``;
    returns ``(..., L, head_dim/2)`` in float64 (column ``i`` is the angle of pair ``i``; pair ``0``
    turns fastest, one radian per position). ``apply_rope`` rotates by exactly these angles.
    """
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 2 or head_dim % 2:
        raise ValueError(
            f"head_dim must be an even int >= 2 (RoPE rotates pairs of features), got {head_dim!r}. "
            "An odd head size cannot be split into pairs; use an even head_dim."
        )
    base = _check_base(base)
    device = positions.device if isinstance(positions, torch.Tensor) else None
    positions = _as_positions(positions, device)  # (..., L)
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64, device=positions.device) / head_dim  # (D/2,)
    inv_freq = 1.0 / base**exponents  # (D/2,): Hugging Face's formula, in float64
    return positions.to(torch.float64).unsqueeze(-1) * inv_freq  # (..., L, D/2)


# Hugging Face's rope_parameters keys per rope_type: (required, optional). "rope_type" itself is always allowed.
_SCALING_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "default": (frozenset(), frozenset()),
    "linear": (frozenset({"factor"}), frozenset()),
    "llama3": (
        frozenset({"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"}),
        frozenset(),
    ),
    "yarn": (
        frozenset({"factor", "original_max_position_embeddings"}),
        frozenset({"beta_fast", "beta_slow", "truncate", "attention_factor", "mscale", "mscale_all_dim"}),
    ),
}


def _number(scaling: Mapping, key: str, *, allow_none: bool = False) -> float | None:
    value = scaling.get(key)
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"scaling[{key!r}] must be a finite number, got {value!r}.")
    return float(value)


def _check_scaling(scaling: Mapping | None) -> str:
    """Validate ``scaling`` (never modified) and return its rope_type."""
    if scaling is None:
        return "default"
    if not isinstance(scaling, Mapping):
        raise TypeError(
            f"scaling must be None or a dict with Hugging Face's rope_parameters keys, e.g. "
            f"{{'rope_type': 'linear', 'factor': 4.0}}, got {type(scaling).__name__}."
        )
    rope_type = scaling.get("rope_type")
    if rope_type not in _SCALING_KEYS:
        raise ValueError(
            f"scaling['rope_type'] must be one of {sorted(_SCALING_KEYS)}, got {rope_type!r} "
            f"(scaling = {dict(scaling)!r})."
        )
    required, optional = _SCALING_KEYS[rope_type]
    missing = sorted(required - scaling.keys())
    if missing:
        raise ValueError(f"scaling with rope_type {rope_type!r} needs the key(s) {missing}, got {dict(scaling)!r}.")
    unknown = sorted(set(scaling.keys()) - required - optional - {"rope_type"})
    if unknown:
        hint = " (rope_theta goes in base=)" if "rope_theta" in unknown else ""
        allowed = sorted(required | optional)
        raise ValueError(f"scaling has key(s) {unknown} not used by rope_type {rope_type!r}{hint}; allowed: {allowed}.")
    for key in sorted(required | (optional & scaling.keys())):
        if key == "truncate":
            if not isinstance(scaling[key], bool):
                raise ValueError(f"scaling['truncate'] must be True or False, got {scaling[key]!r}.")
            continue
        value = _number(scaling, key, allow_none=key in optional)
        if key == "factor" and value < 1:
            raise ValueError(f"scaling['factor'] must be >= 1 (how many times longer the context gets), got {value}.")
        if key in ("original_max_position_embeddings", "low_freq_factor", "high_freq_factor", "attention_factor"):
            if value is not None and value <= 0:
                raise ValueError(f"scaling[{key!r}] must be > 0, got {value}.")
        if key in ("beta_fast", "beta_slow") and value is not None and value < 0:
            raise ValueError(f"scaling[{key!r}] must be >= 0 (rotations per context), got {value}.")
    if rope_type == "llama3" and scaling["low_freq_factor"] >= scaling["high_freq_factor"]:
        raise ValueError(
            f"scaling['high_freq_factor'] must be > scaling['low_freq_factor'] (the smoothing band divides by their "
            f"difference), got high_freq_factor={scaling['high_freq_factor']}, "
            f"low_freq_factor={scaling['low_freq_factor']}."
        )
    return rope_type


def _rotary_dim(head_dim: int, partial_rotary_factor: float) -> int:
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 1:
        raise ValueError(f"head_dim must be a positive int, got {head_dim!r}.")
    factor = partial_rotary_factor
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not 0 < factor <= 1:
        raise ValueError(
            f"partial_rotary_factor must be a number in (0, 1] (the fraction of head_dim rotated), got {factor!r}."
        )
    rotary_dim = int(head_dim * factor)  # Hugging Face's rule: Python int() truncates
    if rotary_dim == 0 or rotary_dim % 2:
        raise ValueError(
            f"partial_rotary_factor={factor} with head_dim={head_dim} gives rotary_dim = int({head_dim} * {factor}) = "
            f"{rotary_dim}; RoPE rotates pairs, so rotary_dim must be even and > 0. Pick a factor that gives one."
        )
    return rotary_dim


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature g(s, m) = 0.1·m·ln(s) + 1 (1 when s <= 1)."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_frequencies(
    head_dim: int, *, base: float = 10000.0, scaling: Mapping | None = None, partial_rotary_factor: float = 1.0
) -> tuple[torch.Tensor, float]:
    """RoPE's inverse frequencies ``(rotary_dim // 2,)`` float64 and its attention factor (a float).

    ``rotary_dim = int(head_dim · partial_rotary_factor)``; pair ``i`` turns ``base^(-2i / rotary_dim)`` rad per
    position before scaling. ``scaling`` uses Hugging Face's ``rope_parameters`` keys (never modified): None or
    ``{"rope_type": "default"}``; ``"linear"`` (``factor``); ``"llama3"`` (``factor``,
    ``original_max_position_embeddings``, ``low_freq_factor``, ``high_freq_factor``); ``"yarn"`` (``factor``,
    ``original_max_position_embeddings``, optional ``beta_fast`` 32, ``beta_slow`` 1, ``truncate`` True,
    ``attention_factor``, ``mscale``, ``mscale_all_dim``). Equal to
    ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS[rope_type]`` computed in float64. The attention factor
    multiplies cos and sin (so q·k gains its square); it is 1.0 except for YaRN.
    """
    rope_type = _check_scaling(scaling)
    base = _check_base(base)
    dim = _rotary_dim(head_dim, partial_rotary_factor)
    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim  # (dim/2,): 2i / rotary_dim, never head_dim
    pos_freqs = base**exponents  # (dim/2,) wavelength / 2π of each pair
    inv_freq = 1.0 / pos_freqs  # (dim/2,) plain RoPE
    if rope_type == "default":
        return inv_freq, 1.0
    factor = float(scaling["factor"])
    if rope_type == "linear":  # position interpolation: positions / factor == frequencies / factor
        return inv_freq / factor, 1.0  # (dim/2,)
    old_len = float(scaling["original_max_position_embeddings"])
    if rope_type == "llama3":
        low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
        wavelen = 2 * math.pi / inv_freq  # (dim/2,) tokens per turn
        scaled = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)  # (dim/2,) long ones interpolated
        smooth = (old_len / wavelen - low) / (high - low)  # (dim/2,) 0 at the long end of the band, 1 at the short
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled  # (dim/2,)
        medium = ~(wavelen < old_len / high) * ~(wavelen > old_len / low)  # (dim/2,) bool: inside the band
        return torch.where(medium, smoothed, scaled), 1.0  # (dim/2,)
    # YaRN: pairs turning more than beta_fast times over the old context keep their frequency (extrapolate), pairs
    # turning less than beta_slow times are divided by factor (interpolate), a linear ramp over pair index between.
    if scaling.get("attention_factor") is not None:
        attention_factor = float(scaling["attention_factor"])
    elif scaling.get("mscale") and scaling.get("mscale_all_dim"):
        attention_factor = _yarn_mscale(factor, scaling["mscale"]) / _yarn_mscale(factor, scaling["mscale_all_dim"])
    else:
        attention_factor = _yarn_mscale(factor)  # mscale alone is ignored, as in Hugging Face
    beta_fast = scaling.get("beta_fast") or 32  # Hugging Face's `or`: 0 means the default
    beta_slow = scaling.get("beta_slow") or 1

    def correction_dim(num_rotations: float) -> float:  # the pair index that turns num_rotations times in old_len
        return (dim * math.log(old_len / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # Hugging Face's guard against a zero-width ramp
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)  # (dim/2,) pair index
    extrapolation_weight = 1 - ramp  # (dim/2,) 1 for fast pairs, 0 for slow ones
    interpolated = 1.0 / (factor * pos_freqs)  # (dim/2,)
    inv_freq = interpolated * (1 - extrapolation_weight) + inv_freq * extrapolation_weight  # (dim/2,)
    return inv_freq, float(attention_factor)


# A decoding step rotates q and k in every layer at the same few positions: keep the last few (cos, sin)
# pairs (a real model's 18 layers x q and k need 2 computations per step instead of 36). Values are exactly
# what computing them afresh gives; only sets of at most _COS_SIN_CACHE_MAX_POSITIONS positions are kept, at
# most _COS_SIN_CACHE_SIZE of them (least recently used evicted first), and nothing while compiling (the
# lookup reads the positions' values, which would break the graph) or for meta tensors (no values).
# Tensors made under torch.inference_mode() cannot be saved for backward later, so the inference mode is
# part of the key: a training step never receives an inference tensor made by an earlier evaluation.
_COS_SIN_CACHE: OrderedDict[tuple, tuple[torch.Tensor, torch.Tensor]] = OrderedDict()
_COS_SIN_CACHE_SIZE = 8
_COS_SIN_CACHE_MAX_POSITIONS = 64


def _scaling_key(scaling: Mapping | None) -> tuple:
    return () if scaling is None else tuple(sorted(scaling.items()))  # hashable; values are numbers / bools


def _cos_sin(
    positions: torch.Tensor,
    rotary_dim: int,
    base: float,
    dtype: torch.dtype,
    device: torch.device,
    scaling: Mapping | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin ``(..., L, rotary_dim/2)`` in ``dtype``, already multiplied by the attention factor."""
    cacheable = (
        positions.numel() <= _COS_SIN_CACHE_MAX_POSITIONS
        and positions.device.type != "meta"
        and not torch.compiler.is_compiling()
    )
    if cacheable:
        key = (
            tuple(positions.shape),
            tuple(positions.flatten().tolist()),
            rotary_dim,
            base,
            _scaling_key(scaling),
            dtype,
            device,
            torch.is_inference_mode_enabled(),
        )
        if key in _COS_SIN_CACHE:
            _COS_SIN_CACHE.move_to_end(key)
            return _COS_SIN_CACHE[key]
    if scaling is None:
        angles = rope_angles(positions, rotary_dim, base=base)  # (..., L, R/2) float64
        attention_factor = 1.0
    else:
        inv_freq, attention_factor = rope_frequencies(rotary_dim, base=base, scaling=scaling)  # (R/2,) float64
        positions = _as_positions(positions, positions.device)  # (..., L): the range check
        angles = positions.to(torch.float64).unsqueeze(-1) * inv_freq.to(positions.device)  # (..., L, R/2) float64
    cos, sin = angles.cos(), angles.sin()  # (..., L, R/2) float64 each
    if attention_factor != 1.0:  # YaRN: Hugging Face multiplies cos and sin, so q·k gains the factor squared
        cos, sin = cos * attention_factor, sin * attention_factor  # (..., L, R/2) each
    cos = cos.to(device=device, dtype=dtype)  # (..., L, R/2), x's dtype
    sin = sin.to(device=device, dtype=dtype)  # (..., L, R/2), x's dtype
    if cacheable:
        _COS_SIN_CACHE[key] = (cos, sin)
        if len(_COS_SIN_CACHE) > _COS_SIN_CACHE_SIZE:
            _COS_SIN_CACHE.popitem(last=False)
    return cos, sin


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | Sequence[int] | int,
    *,
    base: float = 10000.0,
    interleaved: bool = False,
    scaling: Mapping | None = None,
    partial_rotary_factor: float = 1.0,
) -> torch.Tensor:
    """Rotate ``x (..., L, D)`` by RoPE at ``positions``; returns the same shape and dtype.

    ``positions``: integers broadcastable to ``x.shape[:-1]``: ``(L,)`` for one sequence of every
    batch/head, ``(B, 1, L)`` for per-sequence positions of a ``(B, H, L, D)`` tensor (left padding);
    negative ones rotate backwards; ``|position| <= 2^40``.
    ``interleaved=False`` rotates pairs ``(i, i + D/2)`` (Hugging Face / Llama "rotate half", Gemma);
    ``True`` rotates ``(2i, 2i + 1)`` (RoFormer, Meta's original code, DeepSeek, and llama.cpp for the
    Llama family only: the layout follows the architecture, not the GGUF format).
    ``scaling`` (Hugging Face's rope_parameters keys, see :func:`rope_frequencies`) and ``partial_rotary_factor``:
    only the first ``rotary_dim = int(D · partial_rotary_factor)`` features are rotated (pairs laid out within
    them), multiplied by the attention factor; features ``rotary_dim:`` are returned untouched.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.ndim < 1:
        got = f"a {x.dtype} tensor of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"x must be a floating-point tensor of shape (..., L, D), got {got}.")
    if not isinstance(interleaved, bool):
        raise TypeError(
            f"interleaved must be True (pairs (2i, 2i+1)) or False (pairs (i, i+D/2), rotate half), "
            f"got {interleaved!r} of type {type(interleaved).__name__}."
        )
    head_dim = x.shape[-1]
    if partial_rotary_factor == 1.0 and head_dim % 2:
        raise ValueError(
            f"x's last dimension must be even (RoPE rotates pairs of features), got x of shape {tuple(x.shape)} "
            f"with D = {head_dim}."
        )
    rotary_dim = _rotary_dim(head_dim, partial_rotary_factor)  # int(D · factor), even and > 0
    if scaling is not None and _check_scaling(scaling) == "default":
        scaling = None  # {"rope_type": "default"} is plain RoPE: share its cache entries
    angle_device = torch.device("cpu") if x.device.type == "mps" else x.device  # MPS has no float64
    # The range is checked by rope_angles, on a cos/sin cache miss only: a decode step's lookup stays cheap.
    positions = _as_positions(positions, angle_device, check_range=False)  # (..., L)
    try:
        fits = torch.broadcast_shapes(positions.shape, x.shape[:-1]) == x.shape[:-1]
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} do not broadcast to x.shape[:-1] = {tuple(x.shape[:-1])} "
            f"(x is {tuple(x.shape)}). Pass (L,) positions for one sequence, or (B, 1, L) for per-sequence "
            "positions of a (B, H, L, D) tensor."
        )
    cos, sin = _cos_sin(positions, rotary_dim, base, x.dtype, x.device, scaling)  # (..., L, R/2) each, x's dtype
    x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]  # (..., L, R), (..., L, D - R): the rest not rotated
    if interleaved:
        x1, x2 = x_rot[..., 0::2], x_rot[..., 1::2]  # (..., L, R/2) each: pair i is (2i, 2i + 1)
        rotated = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)  # (..., L, R)
    else:
        x1, x2 = x_rot[..., : rotary_dim // 2], x_rot[..., rotary_dim // 2 :]  # (..., L, R/2): pair i is (i, i + R/2)
        rotated = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)  # (..., L, R)
    return rotated if rotary_dim == head_dim else torch.cat((rotated, x_pass), dim=-1)  # (..., L, D)
