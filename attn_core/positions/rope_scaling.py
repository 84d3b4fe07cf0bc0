"""RoPE for long context: the scaled inverse frequencies and attention factor of :func:`rope_frequencies`.

Hugging Face's ``rope_parameters`` key names: ``"linear"`` (position interpolation), ``"llama3"`` (band-wise:
short wavelengths kept, long ones divided by ``factor``, smoothed between) and ``"yarn"`` (a ramp between the
bands plus an attention factor on cos/sin). ``partial_rotary_factor`` rotates only the first
``rotary_dim = int(head_dim · factor)`` features; the rest pass through unrotated. The rotation itself lives in
:mod:`attn_core.positions.rope`, which imports from here (never the other way round, so there is no import cycle).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

__all__ = ["rope_frequencies"]


def _check_base(base: float) -> float:
    if isinstance(base, bool) or not isinstance(base, int | float) or not math.isfinite(base) or base <= 0:
        raise ValueError(f"base must be a finite number > 0 (10000.0 in Llama 2, 500000.0 in Llama 3), got {base!r}.")
    return float(base)


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
