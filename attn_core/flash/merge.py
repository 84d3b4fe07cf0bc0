"""merge_attention: attention over keys A ∪ B from the results over A and over B.

Attention over a set of keys is a weighted average of their values, ``out = Σ_j e^{s_j} v_j / Σ_j e^{s_j}``.
Split the keys into two disjoint sets A and B. Each partial result carries its output and the
log of its normaliser, ``lse_A = log Σ_{j∈A} e^{s_j}``, so ``Σ_A e^{s_j} v_j = e^{lse_A} · out_A``.
Adding the two sets back together:

    lse = log(e^{lse_A} + e^{lse_B})
    out = (e^{lse_A} · out_A + e^{lse_B} · out_B) / e^{lse}

exactly (no approximation). Computed with ``m = max(lse_A, lse_B)`` subtracted first so that no
exp overflows. This is how FlashAttention's split-KV decoding, ring attention and
cascade/prefix-cache attention combine partial results; ``tiled_attention(..., return_lse=True)``
produces the inputs. The merge is associative and commutative, so any number of chunks can be
merged pairwise in any order.
"""

from __future__ import annotations

import math

import torch

__all__ = ["merge_attention"]


def check_partials(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor) -> None:
    """Raise TypeError/ValueError unless the two partial results fit together."""
    for name, t in (("out_a", out_a), ("lse_a", lse_a), ("out_b", out_b), ("lse_b", lse_b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}.")
        if not t.dtype.is_floating_point:
            raise TypeError(f"{name} must be floating point, got {t.dtype}.")
    if out_a.ndim < 1 or out_a.shape != out_b.shape:
        raise ValueError(
            f"out_a and out_b must have one shape (..., H, Lq, Dv): the same queries attending to two sets "
            f"of keys. Got out_a {tuple(out_a.shape)}, out_b {tuple(out_b.shape)}."
        )
    for name, lse in (("lse_a", lse_a), ("lse_b", lse_b)):
        if lse.shape != out_a.shape[:-1]:
            raise ValueError(
                f"{name} must have shape {tuple(out_a.shape[:-1])} (the outputs' shape without the last dim, "
                f"one log-sum-exp per query), got {tuple(lse.shape)}. "
                "Get it from tiled_attention(..., return_lse=True)."
            )
    if not (out_a.device == lse_a.device == out_b.device == lse_b.device):
        raise ValueError(
            f"the four tensors must be on one device, got out_a {out_a.device}, lse_a {lse_a.device}, "
            f"out_b {out_b.device}, lse_b {lse_b.device}."
        )
    if torch.compiler.is_compiling() or lse_a.device.type == "meta":
        return  # the value check below reads data: skipped while compiling (a graph break) and on meta tensors
    for name, lse in (("lse_a", lse_a), ("lse_b", lse_b)):
        bad = torch.isnan(lse) | (lse == math.inf)  # (..., H, Lq)
        if bad.any():
            where = tuple(int(i) for i in bad.nonzero()[0])
            raise ValueError(
                f"{name} holds {float(lse[where])} at index {where}: a log-sum-exp is finite, or -inf for a query "
                "that saw no key; NaN or +inf would make the merged output NaN. Check the pass that produced it "
                "(a NaN in q or k, or an overflow in half precision)."
            )


def merge_attention(
    out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Combine attention over keys A and over keys B into attention over A ∪ B (A, B disjoint).

    Args:
        out_a: ``(..., H, Lq, Dv)`` attention output of the queries over keys A.
        lse_a: ``(..., H, Lq)`` log-sum-exp of their scores over A; ``-inf`` for a query that
            saw no key of A (its ``out_a`` row is ignored, so it may hold anything finite).
        out_b: ``(..., H, Lq, Dv)`` the same over keys B.
        lse_b: ``(..., H, Lq)``.

    Returns:
        ``(out, lse)``: ``out`` ``(..., H, Lq, Dv)`` in ``out_a``'s dtype and ``lse``
        ``(..., H, Lq)`` in ``lse_a``'s dtype, what a single pass over A ∪ B returns. A row
        that saw keys in only one of A, B takes that one's result; a row that saw none gets a
        zero output and ``lse = -inf`` (no NaN). Differentiable with plain autograd, with
        finite gradients in both of those cases.
    """
    check_partials(out_a, lse_a, out_b, lse_b)
    out_dtype, lse_dtype = out_a.dtype, lse_a.dtype
    # Weights and the combination in at least float32 (and in float64 when any input is).
    compute_dtype = torch.promote_types(torch.promote_types(lse_a.dtype, lse_b.dtype), out_a.dtype)
    compute_dtype = torch.promote_types(compute_dtype, torch.float32)
    lse_a, lse_b = lse_a.to(compute_dtype), lse_b.to(compute_dtype)  # (..., H, Lq)

    biggest = torch.maximum(lse_a, lse_b)  # (..., H, Lq)
    # Both -inf: (-inf) - (-inf) would be NaN. 0 as the reference gives weights exp(-inf) = 0.
    saw_keys = biggest > -math.inf  # (..., H, Lq)
    reference = torch.where(saw_keys, biggest, 0.0)  # (..., H, Lq)
    weight_a = torch.exp(lse_a - reference)  # (..., H, Lq), in [0, 1]; 1 for the larger lse
    weight_b = torch.exp(lse_b - reference)  # (..., H, Lq)
    total = weight_a + weight_b  # (..., H, Lq), in [1, 2] where saw_keys, else 0
    # log(0) and 1/0 only where no key was seen: feed those a harmless 1 and select -inf/0 after,
    # so that neither the values nor the gradients (through torch.where) become inf or NaN.
    safe_total = torch.where(saw_keys, total, 1.0)  # (..., H, Lq)
    lse = torch.where(saw_keys, reference + torch.log(safe_total), -math.inf)  # (..., H, Lq)
    share_a = (weight_a / safe_total).unsqueeze(-1)  # (..., H, Lq, 1), 0 where no key was seen
    share_b = (weight_b / safe_total).unsqueeze(-1)  # (..., H, Lq, 1)
    # A row with weight 0 on one side ignores that side's output, whatever finite number it holds.
    out = share_a * out_a.to(compute_dtype) + share_b * out_b.to(compute_dtype)  # (..., H, Lq, Dv)
    return out.to(out_dtype), lse.to(lse_dtype)
