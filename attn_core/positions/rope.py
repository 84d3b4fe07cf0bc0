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

Long context (``scaling=``, ``partial_rotary_factor=``) is computed by :func:`rope_scaling.rope_frequencies`,
re-exported here so ``from attn_core.positions.rope import rope_frequencies`` keeps working.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

import torch

from attn_core.masks import broadcasts_to
from attn_core.positions.rope_scaling import (  # re-exported: other modules import these from here
    _check_base,
    _check_scaling,
    _rotary_dim,
    _yarn_mscale,  # noqa: F401 (re-exported for attn_core.deepseek.latent_attention)
    rope_frequencies,
)

__all__ = ["apply_rope", "rope_angles", "rope_frequencies"]

MAX_POSITION = 2**40  # |position| bound: a float64 angle m·θ is then within 2^40 · 2^-53 = 2^-13 rad


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
    if not broadcasts_to(positions.shape, x.shape[:-1]):
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
