"""``check_kv_quantize`` (the interview gym's drills, issue #38): an int8 KV-cache quantiser with its error bound.

The learner writes ``quantize_kv(k, v) -> (k_codes, k_scale, v_codes, v_scale)`` for one head's cache, ``k`` and ``v``
``(T, d)``: symmetric int8 with ``scale = max|x| / 127``, **per channel** for K (one scale per feature, shape
``(1, d)`` or ``(d,)``: keys have outlier channels) and **per token** for V (shape ``(T, 1)`` or ``(T,)``), codes
``round(x / scale)`` in [-127, 127] (KIVI, Liu et al. 2024). Each dequantised entry is then within ``scale / 2``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attn_core.exercises import call_learner, feedback, never_raises
from attn_core.i18n import _

__all__ = ["check_kv_quantize"]


def _case() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    k = torch.randn(16, 8, generator=g, dtype=torch.float64)  # (T, d)
    k[:, 5] *= 30  # an outlier channel, as in real keys
    v = torch.randn(16, 8, generator=g, dtype=torch.float64) * torch.linspace(0.1, 3, 16, dtype=torch.float64)[:, None]
    return k, v


def _array(value) -> torch.Tensor | None:
    try:
        array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    except (TypeError, ValueError):
        return None
    return torch.as_tensor(array)


def _scale_problem(x: torch.Tensor, scale: torch.Tensor, which: str, per: str) -> str | None:
    """Compare ``scale`` with the right one (amax / 127 along the right axis) and name the usual slips."""
    t, d = x.shape
    right_dim, wrong_dim = (0, 1) if per == "channel" else (1, 0)
    expected = x.abs().amax(right_dim, keepdim=True) / 127  # (1, d) per channel, (T, 1) per token
    scale = scale.to(torch.float64)
    if scale.numel() == expected.numel() and scale.numel() != t * d:
        scale = scale.reshape(expected.shape)
    elif scale.numel() == 1:
        message = (
            _("{which}: one scale for the whole tensor; quantise {which} per channel (amax over dim {dim}).")
            if per == "channel"
            else _("{which}: one scale for the whole tensor; quantise {which} per token (amax over dim {dim}).")
        )
        return message.format(which=which, dim=right_dim)
    else:
        other = x.abs().amax(wrong_dim, keepdim=True) / 127
        if scale.numel() == other.numel():
            message = (
                _(
                    "{which} is quantised per token; quantise it per channel: one scale per feature (amax over "
                    "tokens, dim 0)."
                )
                if per == "channel"
                else _(
                    "{which} is quantised per channel; quantise it per token: one scale per token (amax over "
                    "features, dim 1)."
                )
            )
            return message.format(which=which)
        message = (
            _("{which}'s scale has {got} entries; per channel it has {want}.")
            if per == "channel"
            else _("{which}'s scale has {got} entries; per token it has {want}.")
        )
        return message.format(which=which, got=scale.numel(), want=expected.numel())
    ratio = scale / expected
    if torch.allclose(ratio, torch.full_like(ratio, 127 / 255)) or torch.allclose(
        ratio, torch.full_like(ratio, 127 / 128)
    ):
        return _(
            "{which}: symmetric int8 uses ±127: scale = max|x| / 127 (yours wastes or overflows the range)."
        ).format(which=which)
    if torch.allclose(scale, 1 / expected):
        return _(
            "{which}: the scale is the step, x ≈ code · scale with scale = max|x| / 127, not 127 / max|x|."
        ).format(which=which)
    if not torch.allclose(scale, expected, rtol=1e-6, atol=0):
        message = (
            _("{which}: the scale should be max|x| / 127 per channel.")
            if per == "channel"
            else _("{which}: the scale should be max|x| / 127 per token.")
        )
        return message.format(which=which)
    return None


def _codes_problem(x: torch.Tensor, codes: torch.Tensor, scale: torch.Tensor, which: str) -> str | None:
    if codes.is_floating_point() or codes.is_complex() or codes.dtype == torch.bool:
        return _("{which}: return integer codes (torch.int8), not {dtype}.").format(which=which, dtype=codes.dtype)
    if tuple(codes.shape) != tuple(x.shape):
        return _("{which}: the codes must have the shape of the input {shape}.").format(
            which=which, shape=tuple(x.shape)
        )
    codes = codes.to(torch.int64)
    if codes.min() < -127 or codes.max() > 127:
        return _("{which}: codes outside [-127, 127] ({low}..{high}): clamp after rounding.").format(
            which=which, low=int(codes.min()), high=int(codes.max())
        )
    scale = (
        scale.to(torch.float64).reshape(-1, 1)
        if scale.numel() == x.shape[0]
        else scale.to(torch.float64).reshape(1, -1)
    )
    error = (codes * scale - x).abs()
    if bool((error <= scale / 2 * (1 + 1e-9)).all()):
        return None
    if torch.equal(codes, torch.trunc(x / scale).to(torch.int64)):
        return _(
            "{which}: round, don't truncate: .to(torch.int8) truncates toward 0, an error up to a full step."
        ).format(which=which)
    return _("{which}: the error exceeds half a step (scale / 2): codes = round(x / scale).").format(which=which)


@never_raises(_("check_kv_quantize"))
def check_kv_quantize(fn: Callable) -> bool:
    """``fn(k, v) -> (k_codes, k_scale, v_codes, v_scale)``: int8, K per channel, V per token, error <= scale / 2."""
    name = _("check_kv_quantize")
    k, v = _case()
    result, problem = call_learner(fn, k.clone(), v.clone())
    if problem:
        return feedback(name, problem)
    if not isinstance(result, tuple | list) or len(result) != 4:
        return feedback(
            name,
            _("return four things (k_codes, k_scale, v_codes, v_scale), got {type}.").format(
                type=type(result).__name__
            ),
        )
    parts = [_array(part) for part in result]
    if any(part is None for part in parts):
        return feedback(name, _("return tensors or arrays (k_codes, k_scale, v_codes, v_scale)."))
    k_codes, k_scale, v_codes, v_scale = parts
    for x, codes, scale, which, per in ((k, k_codes, k_scale, "K", "channel"), (v, v_codes, v_scale, "V", "token")):
        problem = _scale_problem(x, scale, which, per) or _codes_problem(x, codes, scale, which)
        if problem:
            return feedback(name, problem)
    return feedback(name, None)
