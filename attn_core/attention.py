"""Scaled dot-product attention, the one kernel every layer in this package uses.

softmax(Q Kᵀ · scale) V, with grouped-query sharing of key/value heads, boolean
masks (True = may attend), inverted dropout on the weights, and rows whose keys
are all masked returning zeros instead of NaN.
"""

from __future__ import annotations

import math
import numbers

import torch

from attn_core.masks import causal_mask, check_mask

__all__ = ["scaled_dot_product_attention", "check_qkv", "check_dropout_p", "check_scale", "check_flag"]


def check_flag(name: str, value: object) -> None:
    """Raise TypeError unless ``value`` is a bool (``"yes"`` or ``0`` would otherwise be used by truthiness)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r} of type {type(value).__name__}.")


def check_scale(scale: object) -> None:
    """Raise unless ``scale`` is None (``1/sqrt(D)``) or a finite real number (a float, an int, ``np.float32``)."""
    if scale is None:
        return
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(
            f"scale must be a number that multiplies Q Kᵀ (or None for 1/sqrt(head_dim)), got {scale!r} of type "
            f"{type(scale).__name__}. For a tensor use float(scale)."
        )
    if not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale!r}: every score would be NaN or ±inf.")


def check_dropout_p(dropout_p: float) -> None:
    """Raise ValueError unless ``dropout_p`` is a real number with ``0 <= dropout_p < 1``.

    Any real number is accepted (``0.1``, ``np.float32(0.1)``); bools, tensors and NaN are not.
    """
    is_real = isinstance(dropout_p, numbers.Real) and not isinstance(dropout_p, bool)
    if not (is_real and 0.0 <= dropout_p < 1.0):  # NaN fails both comparisons
        raise ValueError(
            f"dropout_p must be a number in [0, 1), got {dropout_p!r}. "
            "It is the probability of zeroing each attention weight; p=1 would zero them all."
        )


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> int:
    """Validate q/k/v shapes, dtypes and devices; return the query heads per kv head (the group size).

    q ``(..., Hq, Lq, D)``, k ``(..., Hkv, Lk, D)``, v ``(..., Hkv, Lk, Dv)``.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}.")
        if t.ndim < 3:
            raise ValueError(
                f"{name} has shape {tuple(t.shape)}; attention needs at least 3 dims "
                f"(..., heads, length, dim). For a single sequence use {name}.unsqueeze(0)."
            )
    if not (q.ndim == k.ndim == v.ndim):
        raise ValueError(
            f"q, k, v must have the same number of dims, got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}, v {tuple(v.shape)}."
        )
    if q.shape[:-3] != k.shape[:-3] or k.shape[:-3] != v.shape[:-3]:
        raise ValueError(
            f"q, k, v must share their batch dims (all but the last three), got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}."
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature dim (last dim) to take dot products: "
            f"q {tuple(q.shape)} has {q.shape[-1]}, k {tuple(k.shape)} has {k.shape[-1]}."
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same length (dim -2): one value per key. "
            f"Got k {tuple(k.shape)} with {k.shape[-2]} keys, v {tuple(v.shape)} with {v.shape[-2]}."
        )
    if k.shape[-3] != v.shape[-3]:
        raise ValueError(
            f"k and v must have the same number of heads (dim -3), got k {tuple(k.shape)} and v {tuple(v.shape)}."
        )
    num_heads, num_kv_heads = q.shape[-3], k.shape[-3]
    if num_kv_heads == 0 or num_heads % num_kv_heads != 0:
        raise ValueError(
            f"query heads ({num_heads}, q dim -3) must be a multiple of key/value heads "
            f"({num_kv_heads}, k dim -3): each kv head serves a whole group of query heads. "
            f"Choose num_kv_heads among the divisors of {num_heads}."
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}; cast with .to(q.dtype).")
    if not q.dtype.is_floating_point:  # int, bool and complex: softmax and the scale need real floats
        raise TypeError(
            f"q, k, v must be floating point, got {q.dtype}; convert them with .float() "
            "(or .double(), .half(), .bfloat16())."
        )
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"q, k, v must be on one device, got q on {q.device}, k on {k.device}, v on {v.device}; "
            "move them with .to(q.device)."
        )
    return num_heads // num_kv_heads


def check_sinks(sinks: object, num_heads: int, q: torch.Tensor) -> None:
    """Raise unless ``sinks`` is a floating tensor ``(num_heads,)`` on q's device (one logit per query head)."""
    if not isinstance(sinks, torch.Tensor) or not sinks.dtype.is_floating_point:
        raise TypeError(
            f"sinks must be a floating-point tensor of sink logits (num_heads,) = ({num_heads},), got "
            f"{getattr(sinks, 'dtype', type(sinks).__name__)}."
        )
    if sinks.shape != (num_heads,):
        raise ValueError(
            f"sinks must have shape (num_heads,) = ({num_heads},): one logit per query head, got {tuple(sinks.shape)}."
        )
    if sinks.device != q.device:
        raise ValueError(f"sinks is on {sinks.device} and q on {q.device}; move it with .to(q.device).")


def default_scale(head_dim: int) -> float:
    """``1 / sqrt(head_dim)``; raise ValueError for ``head_dim == 0`` (no default exists)."""
    if head_dim == 0:
        raise ValueError(
            "q and k have head_dim 0 (last dim), so the default scale 1/sqrt(head_dim) is undefined; "
            "pass scale=... explicitly, or give q and k a feature dim >= 1."
        )
    return 1.0 / math.sqrt(head_dim)


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_p: float = 0.0,
    sinks: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention with the weights returned.

    Args:
        q: ``(..., Hq, Lq, D)`` queries.
        k: ``(..., Hkv, Lk, D)`` keys; ``Hq`` must be a multiple of ``Hkv``. Query head
            ``h`` uses kv head ``h // (Hq // Hkv)`` (the grouping of ``repeat_interleave``).
        v: ``(..., Hkv, Lk, Dv)`` values.
        mask: boolean, ``True`` = may attend, broadcastable to ``(..., Hq, Lq, Lk)``.
        is_causal: AND the mask with ``causal_mask(Lq, Lk)``. Note the alignment is
            bottom-right (the last query sees every key), which is what decoding with a KV
            cache needs; ``F.scaled_dot_product_attention(is_causal=True)`` aligns top-left,
            and the two differ only when ``Lq != Lk``.
        scale: multiplies ``Q Kᵀ``; defaults to ``1 / sqrt(D)``.
        dropout_p: inverted dropout on the weights whenever ``> 0`` (layers pass 0 in eval).
        sinks: learned sink logits ``(Hq,)`` (gpt-oss), or None. Each head's logit joins every softmax row as
            one more column with no value and no scale: ``w_ij = exp(s_ij) / (exp(sinks[h]) + Σ_j' exp(s_ij'))``,
            so the returned weights sum to ``1 − p_sink < 1``; the same as a key whose value is zero.

    Returns:
        ``(output (..., Hq, Lq, Dv), weights (..., Hq, Lq, Lk))``. ``weights`` are the ones
        multiplied with ``v`` (after dropout), so ``output == weights @ v`` with kv heads
        expanded (up to one rounding of the weights in half precision, see below). A query
        whose keys are all masked gets zero weights and a zero output.

    Half precision: fp16/bf16 inputs are upcast to float32 for the whole computation
    (``Q Kᵀ``, softmax and ``weights @ V``; a float32 copy of k and v), so a score above
    65504 does not overflow and the error matches torch's own half kernel. Output and
    weights come back in the input dtype (the weights rounded once, at the end).

    Garbage in masked positions: a masked key's score is replaced before the softmax,
    so masked keys may hold anything, NaN and inf included. A masked value is multiplied
    by a weight of exactly 0, so masked values may hold any *finite* garbage and the
    result is bitwise unchanged. NaN or inf in a masked value gives ``0 · NaN = NaN`` in
    every row that multiplies it, fully masked rows included; torch's
    ``F.scaled_dot_product_attention`` does the same (and can give NaN for NaN/inf masked keys too).
    """
    group = check_qkv(q, k, v)
    check_dropout_p(dropout_p)
    check_flag("is_causal", is_causal)
    check_scale(scale)
    *batch, num_heads, q_len, head_dim = q.shape
    if sinks is not None:
        check_sinks(sinks, num_heads, q)
    num_kv_heads, k_len, v_dim = k.shape[-3], k.shape[-2], v.shape[-1]
    weights_shape = (*batch, num_heads, q_len, k_len)

    if mask is not None:
        check_mask(mask, weights_shape, device=q.device)
    if is_causal and q_len > 1:  # one query (a decode step) sees every key: the mask would be all True
        causal = causal_mask(q_len, k_len, device=q.device)  # (Lq, Lk)
        mask = causal if mask is None else mask & causal
    if scale is None:
        scale = default_scale(head_dim)

    # float32 for fp16/bf16 from the first product on: Q Kᵀ formed in half precision
    # overflows past 65504 and rounds every score before the softmax. float64 stays float64.
    compute_dtype = torch.promote_types(q.dtype, torch.float32)
    # Grouped-query form: the `group` query heads that share a kv head are stacked along
    # the length axis, so each kv head meets its whole group in one ordinary batched matmul.
    # K and V are read once and never copied per query head (no repeat_interleave).
    # The scale goes on q (Lq·D numbers) rather than on the scores (Lq·Lk numbers).
    q_scaled = q.to(compute_dtype) * scale  # (..., Hq, Lq, D)
    q_grouped = q_scaled.reshape(*batch, num_kv_heads, group * q_len, head_dim)  # (..., Hkv, G·Lq, D)
    scores = q_grouped @ k.to(compute_dtype).transpose(-2, -1)  # (..., Hkv, G·Lq, Lk)
    scores = scores.view(weights_shape)  # (..., Hq, Lq, Lk): head h = kv_head·G + g

    if mask is not None:
        # The most negative finite number, not -inf: exp() of it is exactly 0 next to any real
        # score, and a fully masked row gives a uniform row instead of softmax(all -inf) = NaN.
        # In place: `scores` is a fresh tensor, and the matmul's backward needs its inputs, not its output.
        scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    if sinks is None:
        weights = torch.softmax(scores, dim=-1)  # (..., Hq, Lq, Lk)
    else:  # one more column per row holding the head's sink logit; dropped after the softmax (it has no value)
        sink_column = (
            sinks.to(compute_dtype).view(num_heads, 1, 1).expand(*batch, num_heads, q_len, 1)
        )  # (..., Hq, Lq, 1)
        weights = torch.softmax(torch.cat([scores, sink_column], dim=-1), dim=-1)[..., :-1]  # (..., Hq, Lq, Lk)
    if mask is not None:
        # A query with no visible key attends to nothing: zero weights, zero output.
        attends_somewhere = mask.any(dim=-1, keepdim=True)  # (..., Lq, 1), broadcast shape
        # The fill copies all (..., Hq, Lq, Lk) weights (in place would break softmax's backward,
        # which needs its output), so eager mode skips it when every row sees a key: +50% peak
        # memory and time for a causal mask otherwise. Traced code (torch.compile, torch.export)
        # always fills: a branch on tensor data would split the graph and make export fail.
        if torch.compiler.is_compiling() or not bool(attends_somewhere.all()):
            weights = weights.masked_fill(~attends_somewhere, 0.0)  # (..., Hq, Lq, Lk)
    if dropout_p > 0.0:
        weights = torch.nn.functional.dropout(weights, p=float(dropout_p), training=True)  # (..., Hq, Lq, Lk)

    weights_grouped = weights.reshape(*batch, num_kv_heads, group * q_len, k_len)  # (..., Hkv, G·Lq, Lk)
    output = weights_grouped @ v.to(compute_dtype)  # (..., Hkv, G·Lq, Dv)
    output = output.view(*batch, num_heads, q_len, v_dim)  # (..., Hq, Lq, Dv)
    return output.to(q.dtype), weights.to(q.dtype)
