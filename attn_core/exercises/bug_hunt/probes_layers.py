"""Probes for the bugs of an attention layer (notebook 14: multi-head bugs 1, 2, 8-11; RoPE 13-15; MLA 16-18).

The RoPE and MLA layers are graded as notebook 16's ``check_rope_mha`` and ``check_mla`` grade them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from attn_core.attention import scaled_dot_product_attention
from attn_core.exercises import NOT_DONE, call_learner
from attn_core.exercises.bug_hunt.common import DTYPE, _close, _randn, _unpack
from attn_core.exercises.handwrite_mla import _CONFIGS as _MLA_CONFIGS
from attn_core.exercises.handwrite_mla import _config_problem as _mla_config_problem
from attn_core.exercises.handwrite_rope import _CONFIGS as _ROPE_CONFIGS
from attn_core.exercises.handwrite_rope import _config_problem as _rope_config_problem
from attn_core.layers import GroupedQueryAttention
from attn_core.masks import causal_mask, padding_mask
from attn_core.positions.rope import apply_rope

# ---------------------------------------------------------------------------- layer probes


def _reference_layer(hidden_dim: int, num_heads: int, num_kv_heads: int, dropout: float, seed: int):
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        ref = GroupedQueryAttention(hidden_dim, num_heads, num_kv_heads, dropout=dropout).to(DTYPE).eval()
    with torch.no_grad():
        for param in ref.parameters():
            param.copy_(torch.randn(param.shape, generator=generator, dtype=DTYPE) * 0.5)
    return ref


def _build_learner_layer(impl, args: tuple, kwargs: dict, ref: nn.Module) -> tuple[nn.Module | None, str | None]:
    """Construct the learner's layer and copy the reference weights into it."""
    with torch.random.fork_rng(devices=[]):
        layer, error = call_learner(impl, *args, **kwargs)
    if error:
        return None, error
    if not isinstance(layer, nn.Module):
        return None, f"pass the layer class itself; calling it gave a {type(layer).__name__}, not an nn.Module."
    try:
        layer.to(DTYPE).load_state_dict(ref.state_dict())
    except Exception as err:  # wrong parameter names or shapes
        first = str(err).strip().splitlines()[0]
        return None, (
            "keep the q_proj/k_proj/v_proj/o_proj linear layers of the original (the probe copies reference "
            f"weights into them): load_state_dict raised {type(err).__name__}: {first}"
        )
    return layer, None


def _layer_problem(
    impl: Callable,
    *,
    num_heads: int = 2,
    num_kv_heads: int | None = None,
    dropout: float | None = None,
    mask: torch.Tensor | None = None,
    batch: int = 2,
    seq_len: int = 5,
    hidden_dim: int = 8,
    seed: int = 0,
) -> str | None:
    """Compare the learner's layer (eval mode) with ``ac.GroupedQueryAttention`` holding the same weights."""
    args = (hidden_dim, num_heads) if num_kv_heads is None else (hidden_dim, num_heads, num_kv_heads)
    kwargs = {} if dropout is None else {"dropout": dropout}
    ref = _reference_layer(hidden_dim, num_heads, num_kv_heads or num_heads, dropout or 0.0, seed)
    layer, error = _build_learner_layer(impl, args, kwargs, ref)
    if error:
        return error
    layer.eval()
    x = _randn(batch, seq_len, hidden_dim, generator=torch.Generator().manual_seed(seed + 1))  # (B, L, hidden)
    with torch.no_grad():
        want_out, want_weights = ref(x, mask=None if mask is None else mask.unsqueeze(-3))
        result, error = call_learner(layer, x, mask)
    if error:
        return error
    out, weights, problem = _unpack(result, tuple(want_out.shape), tuple(want_weights.shape))
    if problem:
        return problem
    if _close(out, want_out) and _close(weights, want_weights):
        return None
    if not _close(weights, want_weights):
        if mask is not None and mask.ndim == 3 and batch == num_heads:
            with torch.no_grad():
                _, crossed = ref(x, mask=mask.unsqueeze(0))  # (1, B, L, L) read as (B, H, L, L)
            if _close(weights, crossed):
                return (
                    "head h of every sequence got the mask of sequence h: broadcasting lined the batch axis "
                    "of the mask (B, L, L) up with the head axis of the scores (B, H, L, L)."
                )
        head_dim = hidden_dim // num_heads
        for label, divisor in (("sqrt(hidden_dim)", math.sqrt(hidden_dim)), ("head_dim", head_dim), ("1", 1.0)):
            if _close(weights, _reference_weights(ref, x, mask, 1 / divisor)):
                return (
                    f"the weights match softmax(q kᵀ / {label}) with {label} = {divisor:g}: the scores must be "
                    f"divided by sqrt(head_dim) = {math.sqrt(head_dim):g}, the size of one head's vectors."
                )
        return "the attention weights differ from the reference layer's."
    return "the attention weights match the reference but the outputs do not: check how you compute v and out."


@torch.no_grad()
def _reference_weights(ref: GroupedQueryAttention, x: torch.Tensor, mask, scale: float) -> torch.Tensor:
    """The reference layer's weights computed with another ``scale``."""
    q = ref._split_heads(ref.q_proj(x), ref.num_heads)  # (B, H, L, d)
    k = ref._split_heads(ref.k_proj(x), ref.num_kv_heads)  # (B, G, L, d)
    mask = None if mask is None else mask.unsqueeze(-3)  # (B, 1, L, L) or (1, L, L)
    return scaled_dot_product_attention(q, k, k, mask, scale=scale)[1]  # (B, H, L, L)


def _scale_probe(impl: Callable) -> str | None:
    return _layer_problem(impl) or _layer_problem(impl, mask=causal_mask(5), seed=3)


def _value_probe(impl: Callable) -> str | None:
    problem = _layer_problem(impl)
    if problem is None:
        return None
    if problem.startswith("the attention weights match"):
        ref = _reference_layer(8, 2, 2, 0.0, seed=0)
        layer, error = _build_learner_layer(impl, (8, 2), {}, ref)
        if error:
            return error
        x = _randn(2, 5, 8, generator=torch.Generator().manual_seed(1))  # (B, L, hidden)
        with torch.no_grad():
            before, _ = layer.eval()(x)  # (B, L, hidden)
            layer.v_proj.weight.mul_(2.0)
            after, _ = layer(x)  # (B, L, hidden)
        if torch.equal(before, after):
            return (
                "the weights match the reference but the outputs do not, and doubling v_proj's weights "
                "does not change your output at all: v_proj is never used."
            )
    return problem


def _eval_dropout_probe(impl: Callable) -> str | None:
    p = 0.5
    ref = _reference_layer(8, 2, 2, p, seed=0)
    layer, error = _build_learner_layer(impl, (8, 2), {"dropout": p}, ref)
    if error:
        return error
    x = _randn(2, 5, 8, generator=torch.Generator().manual_seed(1))  # (B, L, hidden)
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer.eval()
        first, error = call_learner(layer, x)
        second, error2 = call_learner(layer, x)
        if error or error2:
            return error or error2
        layer.train()
        train, error = call_learner(layer, x)
    if error:
        return f"in train mode: {error}"
    where = f"built with dropout={p} and switched to .eval()"
    if not (isinstance(first, tuple) and isinstance(second, tuple) and isinstance(train, tuple)):
        return "return a pair (out, weights)."
    if not torch.equal(first[0], second[0]):
        return (
            f"{where}, two calls on the same input gave different outputs: dropout is still active in eval "
            "mode. F.dropout(x, p) defaults to training=True."
        )
    problem = _layer_problem(impl, dropout=p)
    if problem:
        return f"{where}: {problem}"
    if not (train[1] == 0).any():
        return "in train mode with dropout=0.5 no attention weight was dropped: keep dropout for training."
    return None


def _view_probe(impl: Callable) -> str | None:
    return _layer_problem(impl)


def _gqa_probe(impl: Callable) -> str | None:
    for num_heads, num_kv_heads in ((4, 2), (4, 4), (4, 1), (8, 2)):
        problem = _layer_problem(impl, num_heads=num_heads, num_kv_heads=num_kv_heads)
        if problem:
            where = f"with {num_heads} query heads and {num_kv_heads} kv heads"
            if (num_heads, num_kv_heads) == (4, 2) and not any(
                _layer_problem(impl, num_heads=4, num_kv_heads=g) for g in (4, 1)
            ):
                problem += (
                    " It is right for 4 kv heads (MHA) and 1 kv head (MQA): the query heads are paired with the "
                    "wrong kv heads (query head h must read kv head h // (num_heads // num_kv_heads))."
                )
            return f"{where}: {problem}"
    return None


def _mask_probe(impl: Callable) -> str | None:
    per_sequence = padding_mask([5, 3])[:, 0] & causal_mask(5)  # (B, L, L): one mask per sequence
    for where, mask, num_heads in (
        ("with a causal mask (L, L)", causal_mask(5), 2),
        ("with a per-sequence mask (B=2, L, L) and 2 heads", per_sequence, 2),
        ("with a per-sequence mask (B=2, L, L) and 4 heads", per_sequence, 4),
    ):
        problem = _layer_problem(impl, num_heads=num_heads, mask=mask)
        if problem and mask.ndim == 2 and "must match the size of tensor" in problem:
            return (
                f"{where}: {problem.rstrip('.')}. An (L, L) mask has no batch axis: mask.unsqueeze(1) turns it into "
                "(L, 1, L), which does not line up with the scores (B, H, L, L). unsqueeze(1), as in the "
                "Annotated Transformer, assumes a mask with a batch axis in front. Count the new head axis from "
                "the right instead: mask.unsqueeze(-3) makes (L, L) into (1, L, L) and (B, L, L) into (B, 1, L, L)."
            )
        if problem:
            return f"{where}: {problem}"
    return None


# ---------------------------------------------------------------------------- RoPE probes


def _rope_layer_probe(impl: Callable) -> str | None:
    """A RoPE layer ``(hidden_dim, num_heads, rope_base=...)`` against ``ac.MultiHeadAttention(rope_base=...)``:
    one full pass, then a prefill and one-token decode steps through a KV cache (notebook 16's check)."""
    generator = torch.Generator().manual_seed(11)
    for seed, (hidden_dim, num_heads, base) in enumerate(_ROPE_CONFIGS):
        problem, _ = _rope_config_problem(impl, hidden_dim, num_heads, base, seed, generator)
        if problem:
            return problem
    return None


def _rotary_probe(impl: Callable) -> str | None:
    """``rotary(x, positions, base=10000.0)`` against ``ac.apply_rope`` (rotate-half layout)."""
    generator = torch.Generator().manual_seed(5)
    x = _randn(2, 2, 5, 8, generator=generator)  # (B, H, L, D)
    for where, positions, base in (
        ("positions 0..4", torch.arange(5), 10000.0),
        ("positions 3..7, base 100", torch.arange(3, 8), 100.0),
    ):
        want = apply_rope(x, positions, base=base)  # (B, H, L, D)
        result, error = call_learner(impl, x.clone(), positions.clone(), base=base)
        if error:
            return error if error == NOT_DONE else f"with {where}: {error}"
        if not isinstance(result, torch.Tensor) or tuple(result.shape) != tuple(x.shape):
            got = tuple(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__
            return f"with {where}: return one tensor of x's shape {tuple(x.shape)}, got {got}."
        if _close(result, want):
            continue
        result = result.detach().to(DTYPE)
        if _close(result, apply_rope(x, positions, base=base, interleaved=True)):
            return (
                f"with {where}: your rotation pairs features (2i, 2i+1), the interleaved layout of the RoFormer "
                "paper and of Meta's original Llama code; the weights here (as in Hugging Face's Llama) expect "
                "pairs (i, i + d/2). Each layout works with weights in its own order, so the model runs, "
                "and every score is silently wrong."
            )
        if _close(result, x):
            return f"with {where}: your function returns x unrotated."
        if _close(result, apply_rope(x, -positions, base=base)):
            return f"with {where}: you rotate by -angle: sin has the wrong sign."
        return f"with {where}: the rotation differs from ac.apply_rope(x, positions, base=base)."
    return None


def _mla_layer_probe(impl: Callable) -> str | None:
    """An MLA layer against ``ac.MultiHeadLatentAttention`` (notebook 16's ``check_mla``): a full pass, then a
    prefill and one-token decode steps through a KV cache that must hold the latent and the shared rope key."""
    generator = torch.Generator().manual_seed(13)
    for seed, config in enumerate(_MLA_CONFIGS):
        problem = _mla_config_problem(impl, config, seed, generator)
        if problem:
            return problem
    return None
