"""``check_mla_absorbed`` (the interview gym's drills, issue #38): MLA's decode step with weight absorption.

The learner writes ``absorbed_mla(q_nope, q_rope, latent, k_rope, w_uk, w_uv) -> (q_latent, out)`` for one sequence:
``q_nope`` ``(H, Lq, nope)`` and ``q_rope`` ``(H, Lq, rope)`` (already rotated) are the queries of the last ``Lq`` of
``T`` tokens; the cache holds ``latent`` ``(T, rank)`` and the shared, already rotated ``k_rope`` ``(T, rope)``;
``w_uk`` ``(H, nope, rank)`` and ``w_uv`` ``(H, v, rank)`` are ``kv_b_proj.weight`` split per head, so the naive form
up-projects ``k_nope_h = latent @ w_uk[h].T`` and ``v_h = latent @ w_uv[h].T``. Absorbed (DeepSeek-V2 §2.1.2):
``q_latent = q_nope @ w_uk`` ``(H, Lq, rank)`` attends to the latent itself, the decoupled rope part is added as
``q_rope @ k_rope.T``, the scale stays ``1/√(nope + rope)`` (the scores are the naive ones), the mask is bottom-right
causal, and ``out = (weights @ latent) @ w_uv.mT`` ``(H, Lq, v)``. Graded against the naive form (as
:class:`attn_core.MultiHeadLatentAttention` with ``absorb=False``); the first case has ``nope = rank = v`` so that a
transposed or swapped weight keeps its shape and is recognised by its numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from attn_core.exercises import call_learner, feedback, never_raises

__all__ = ["check_mla_absorbed"]

# (heads, Lq, T, nope, rope, rank, v): the first square (nope = rank = v), the second with every size different
_CASES = ((2, 3, 5, 4, 2, 4, 4), (3, 2, 6, 3, 2, 5, 4))
_EPS32 = torch.finfo(torch.float32).eps


def _inputs(case: tuple[int, ...], seed: int) -> dict[str, torch.Tensor]:
    heads, q_len, total, nope, rope, rank, vdim = case
    g = torch.Generator().manual_seed(seed)

    def draw(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    return {
        "q_nope": draw(heads, q_len, nope),  # (H, Lq, nope)
        "q_rope": draw(heads, q_len, rope),  # (H, Lq, rope)
        "latent": draw(total, rank),  # (T, rank)
        "k_rope": draw(total, rope),  # (T, rope)
        "w_uk": draw(heads, nope, rank) / math.sqrt(rank),  # (H, nope, rank)
        "w_uv": draw(heads, vdim, rank) / math.sqrt(rank),  # (H, v, rank)
    }


def _attend(scores: torch.Tensor, mask: str = "bottom_right", dim: int = -1) -> torch.Tensor:
    q_len, total = scores.shape[-2:]
    allowed = {
        "bottom_right": torch.arange(total) <= torch.arange(q_len)[:, None] + (total - q_len),  # (Lq, T)
        "top_left": torch.ones(q_len, total, dtype=torch.bool).tril(),  # (Lq, T)
        "none": torch.ones(q_len, total, dtype=torch.bool),  # (Lq, T)
    }[mask]
    return scores.masked_fill(~allowed, float("-inf")).softmax(dim=dim).nan_to_num()  # (H, Lq, T)


def _naive(q_nope, q_rope, latent, k_rope, w_uk, w_uv) -> torch.Tensor:
    """The reference: up-project the whole cache into per-head keys and values."""
    k_nope = torch.einsum("tr,hnr->htn", latent, w_uk)  # (H, T, nope)
    v = torch.einsum("tr,hvr->htv", latent, w_uv)  # (H, T, v)
    scale = (q_nope.shape[-1] + q_rope.shape[-1]) ** -0.5
    scores = (q_nope @ k_nope.mT + q_rope @ k_rope.T) * scale  # (H, Lq, T)
    return _attend(scores) @ v  # (H, Lq, v)


def _absorbed(q_nope, q_rope, latent, k_rope, w_uk, w_uv, **mistake) -> tuple[torch.Tensor, torch.Tensor]:
    """The absorbed form with one mistake switched on: what a learner who made it returns."""
    nope, rope, rank = q_nope.shape[-1], q_rope.shape[-1], latent.shape[-1]
    w_query = {
        "w_uv": w_uv,
        "transposed": w_uk.mT,
        "head0": w_uk[:1].expand_as(w_uk),
    }.get(mistake.get("w_query"), w_uk)  # (H, nope, rank)
    q_latent = q_nope @ w_query  # (H, Lq, rank)
    scale = {"rank": (rank + rope) ** -0.5, "nope": nope**-0.5, "none": 1.0}.get(mistake.get("scale"))
    scale = (nope + rope) ** -0.5 if scale is None else scale
    scores = q_latent @ latent.T  # (H, Lq, T)
    if mistake.get("rope") != "missing":
        scores = scores + q_rope @ k_rope.T  # (H, Lq, T): the decoupled part, one shared key for all heads
    weights = _attend(scores * scale, mistake.get("mask", "bottom_right"), mistake.get("dim", -1))  # (H, Lq, T)
    out_latent = weights @ latent  # (H, Lq, rank)
    w_out = {"w_uk": w_uk, "transposed": w_uv.mT}.get(mistake.get("w_out"), w_uv)  # (H, v, rank)
    out = out_latent if mistake.get("w_out") == "skipped" else out_latent @ w_out.mT  # (H, Lq, v)
    if mistake.get("q_latent") == "scaled":
        q_latent = q_latent * scale
    if mistake.get("q_latent") == "q_nope":
        q_latent = q_nope
    return q_latent, out


_SUSPECTS = [
    (
        dict(w_query="w_uv"),
        "q_latent uses W_UV: the key's up-projection W_UK is the one absorbed into the query "
        "(q_nope · k_nope = (q_nope W_UK) · c); W_UV belongs on the output side.",
    ),
    (
        dict(w_query="w_uv", w_out="w_uk"),
        "W_UK and W_UV are swapped: W_UK (the key up-projection) goes into the query, W_UV (the value "
        "up-projection) is applied to the weighted sum of latents.",
    ),
    (
        dict(w_out="w_uk"),
        "the output uses W_UK: after the weighted sum of latents, up-project with W_UV (out = (w @ c) @ W_UVᵀ).",
    ),
    (
        dict(w_query="transposed"),
        "W_UK is transposed: w_uk is (H, nope, rank), so q_latent = q_nope @ w_uk (contract over nope).",
    ),
    (
        dict(w_out="transposed"),
        "W_UV is transposed: w_uv is (H, v, rank), so out = out_latent @ w_uv.mT (contract over rank).",
    ),
    (
        dict(w_query="head0"),
        "every head used head 0's W_UK: each head has its own slice w_uk[h] (einsum 'hln,hnr->hlr').",
    ),
    (
        dict(rope="missing"),
        "the decoupled RoPE part is missing: add q_rope @ k_rope.T to the scores. RoPE cannot be absorbed "
        "(its rotation depends on the key's position), which is why it is a separate shared key.",
    ),
    (
        dict(scale="rank"),
        "the scale is 1/√(rank + rope): absorption changes no score, so the scale stays 1/√(nope + rope), "
        "the head dimension of the naive form.",
    ),
    (dict(scale="nope"), "the scale is 1/√nope: the rope part counts too, scale by 1/√(nope + rope)."),
    (dict(scale="none"), "the scores are not scaled: multiply them by 1/√(nope + rope)."),
    (
        dict(mask="none"),
        "no causal mask: the queries are the last Lq tokens, query i sees keys 0..i + (T - Lq).",
    ),
    (
        dict(mask="top_left"),
        "top-left causal mask: the queries are the last Lq tokens, so query i sees keys 0..i + (T - Lq).",
    ),
    (dict(dim=-2), "the softmax ran over the queries (dim=-2): each query's weights sum to 1 over the keys."),
    (
        dict(w_out="skipped"),
        "out is still in latent space: apply W_UV after the weighted sum (out = (w @ c) @ W_UVᵀ).",
    ),
    (
        dict(q_latent="scaled"),
        "return q_latent = q_nope @ w_uk unscaled: the softmax scale goes on the scores, not into q_latent.",
    ),
    (
        dict(q_latent="q_nope"),
        "q_latent is q_nope itself: you up-projected the keys instead of absorbing W_UK into the query. "
        "Return q_latent = q_nope @ w_uk and attend to the latent directly.",
    ),
]


def _as_float64(value) -> torch.Tensor | None:
    try:
        array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value, dtype=float)
        return torch.as_tensor(np.asarray(array, dtype=float)).to(torch.float64)
    except (TypeError, ValueError):
        return None


def _tolerance(inputs: dict[str, torch.Tensor]) -> float:
    # A float32 answer: each output is a chain of about nope + rope + T + rank multiply-adds of O(1) terms (the
    # inputs are unit normals, the weights scaled by 1/√rank), each adding at most one eps32 of the running sum.
    heads, q_len, nope = inputs["q_nope"].shape
    terms = nope + inputs["q_rope"].shape[-1] + inputs["latent"].shape[0] + inputs["latent"].shape[-1]
    magnitude = 1.0 + float(inputs["latent"].abs().max()) * float(inputs["q_nope"].abs().max())
    return 4 * terms * magnitude * _EPS32


def _matches(got: tuple[torch.Tensor, torch.Tensor], expected: tuple[torch.Tensor, torch.Tensor], tol: float) -> bool:
    return all(g.shape == e.shape and bool(((g - e).abs() <= tol).all()) for g, e in zip(got, expected, strict=True))


@never_raises("check_mla_absorbed")
def check_mla_absorbed(fn: Callable) -> bool:
    """``fn(q_nope, q_rope, latent, k_rope, w_uk, w_uv) -> (q_latent (H, Lq, rank), out (H, Lq, v))``."""
    name = "check_mla_absorbed"
    for seed, case in enumerate(_CASES):
        inputs = _inputs(case, seed)
        result, problem = call_learner(fn, *(t.clone() for t in inputs.values()))
        if problem:
            if "RuntimeError" in problem and ("mat" in problem or "size" in problem or "shape" in problem):
                problem += (
                    " Check the transposes: w_uk is (H, nope, rank) and w_uv (H, v, rank), so q_latent = q_nope @ w_uk"
                    " and out = (weights @ latent) @ w_uv.mT."
                )
            return feedback(name, problem)
        if not isinstance(result, tuple | list) or len(result) != 2:
            return feedback(name, "return a pair (q_latent, out): the absorbed query and the output.")
        got = tuple(_as_float64(part) for part in result)
        if any(part is None for part in got):
            return feedback(name, f"return tensors, got {type(result[0]).__name__} and {type(result[1]).__name__}.")
        heads, q_len, _, _, _, rank, vdim = case
        if tuple(got[0].shape) != (heads, q_len, rank):
            return feedback(
                name, f"q_latent must have shape (H, Lq, rank) = {(heads, q_len, rank)}, got {tuple(got[0].shape)}."
            )
        if tuple(got[1].shape) != (heads, q_len, vdim):
            if tuple(got[1].shape) == (heads, q_len, rank):
                return feedback(name, _SUSPECTS[-3][1])  # still in latent space
            return feedback(
                name, f"out must have shape (H, Lq, v) = {(heads, q_len, vdim)}, got {tuple(got[1].shape)}."
            )
        tol = _tolerance(inputs)
        expected = (inputs["q_nope"] @ inputs["w_uk"], _naive(**inputs))
        if _matches(got, expected, tol):
            continue
        for mistake, diagnosis in _SUSPECTS:
            try:
                suspect = _absorbed(**inputs, **mistake)
            except RuntimeError:  # a swapped or transposed weight has no shape that fits this case
                continue
            if _matches(got, suspect, tol):
                return feedback(name, diagnosis)
        if _matches(got[:1], expected[:1], tol):
            return feedback(name, "q_latent is right but out differs from the naive form softmax(q·k) @ v.")
        return feedback(name, "q_latent differs from q_nope @ w_uk (each head's W_UK absorbed into its query).")
    return feedback(name, None)
