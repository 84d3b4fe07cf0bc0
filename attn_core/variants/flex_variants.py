"""Attention variants as FlexAttention ``score_mod`` / ``mask_mod`` functions, and the same rules in plain torch.

``torch.nn.attention.flex_attention`` (PyTorch ≥ 2.5) takes two small callables instead of a new kernel per variant:
``score_mod(score, b, h, q_idx, kv_idx) -> score`` edits one logit, ``mask_mod(b, h, q_idx, kv_idx) -> bool`` says
whether query ``q_idx`` may see key ``kv_idx`` (True = may attend, this package's convention). Compiled, FlexAttention
fuses them into one FlashAttention-style kernel; called eagerly (what this module and notebook 12c do on CPU) it
materialises the scores, calls the callables on broadcast index tensors, and warns that it is unfused. Measured here:
the first eager call costs about 2 s of CPU (it imports ``torch._dynamo``), a compiled first call ~28 s, and the
compiled CPU kernel has no backward.

- ``softcap(cap)``: Gemma 2's logit soft-capping, ``cap · tanh(score / cap)`` (``attn_logit_softcapping`` 50.0);
- ``alibi(slopes)``: ALiBi (Press et al. 2022), ``score − slope[h] · (q_idx − kv_idx)``; ``alibi_slopes(H)``;
- ``causal``, ``sliding_window(W)``, ``document(doc_ids)``: mask_mods; ``and_masks`` / ``or_masks`` combine them;
- ``flex_attention_with_sinks(q, k, v, sinks, ...)``: gpt-oss's learned sinks added *after* the kernel from its
  log-sum-exp: ``out · sigmoid(lse − sink)``, the merge of notebook 08 with a key whose value is zero;
- ``reference(q, k, v, score_mod=None, mask_mod=None)``: the same callables applied in plain torch to the full
  score matrix, then ``ac.scaled_dot_product_attention``'s softmax rules (a fully masked row gives zeros).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

__all__ = [
    "softcap",
    "alibi",
    "alibi_slopes",
    "causal",
    "sliding_window",
    "document",
    "and_masks",
    "reference",
    "flex_attention_with_sinks",
]

ScoreMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def softcap(cap: float) -> ScoreMod:
    """Gemma 2's soft-capping: logits squashed smoothly into (−cap, cap)."""
    if isinstance(cap, bool) or not isinstance(cap, int | float) or not 0 < cap < math.inf:
        raise ValueError(f"cap must be a positive finite number (Gemma 2 uses 50.0), got {cap!r}.")

    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)

    return score_mod


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's head slopes for a power-of-two head count: ``2^(−8·(h+1)/H)`` for h = 0..H-1, ``(H,)`` float64."""
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1 or num_heads & (num_heads - 1):
        raise ValueError(f"num_heads must be a power of two (ALiBi's geometric slopes), got {num_heads!r}.")
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / num_heads) for h in range(num_heads)], dtype=torch.float64)


def alibi(slopes: torch.Tensor) -> ScoreMod:
    """ALiBi: a linear penalty on distance, per head: ``score − slopes[h] · (q_idx − kv_idx)``; ``slopes (H,)``."""
    if not isinstance(slopes, torch.Tensor) or slopes.ndim != 1 or not slopes.is_floating_point():
        shape = tuple(slopes.shape) if isinstance(slopes, torch.Tensor) else type(slopes).__name__
        raise ValueError(
            f"slopes must be a floating-point tensor (H,), one slope per head (alibi_slopes(H)); got {shape}."
        )

    def score_mod(score, b, h, q_idx, kv_idx):
        return score - slopes.to(score.dtype)[h] * (q_idx - kv_idx)

    score_mod.requires = [("num_heads", slopes.shape[0], "alibi(slopes) has one slope per head")]
    return score_mod


def causal(b, h, q_idx, kv_idx):
    """Query i sees keys j <= i (queries and keys of one sequence, aligned at 0)."""
    return q_idx >= kv_idx


def sliding_window(window: int) -> MaskMod:
    """Causal, and only the ``window`` most recent keys, itself included (``ac.sliding_window_mask``'s rule)."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an int >= 1, got {window!r}.")

    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window)

    return mask_mod


def document(doc_ids: torch.Tensor) -> MaskMod:
    """Packed sequences: a token sees only tokens of its own document. ``doc_ids (L,)`` or ``(B, L)`` integers."""
    if not isinstance(doc_ids, torch.Tensor) or doc_ids.ndim not in (1, 2) or doc_ids.is_floating_point():
        raise ValueError("doc_ids must be an integer tensor (L,) or (B, L): the document of each token.")
    ids = doc_ids if doc_ids.ndim == 2 else doc_ids[None]  # (B or 1, L)

    last = ids.shape[1] - 1

    def mask_mod(b, h, q_idx, kv_idx):
        seq = b if ids.shape[0] > 1 else torch.zeros_like(b)  # one row of doc_ids serves every sequence
        # create_block_mask also asks about the padding of its 128-token blocks: clamp, those never reach a row.
        # A doc_ids of another length than the sequence would be clamped too: reference() checks the lengths.
        return ids[seq, q_idx.clamp(max=last)] == ids[seq, kv_idx.clamp(max=last)]

    mask_mod.requires = [("length", ids.shape[1], "document(doc_ids) has one document id per token")]
    if ids.shape[0] > 1:
        mask_mod.requires.append(("batch", ids.shape[0], "document(doc_ids) has one row of doc_ids per sequence"))
    return mask_mod


def and_masks(*mask_mods: MaskMod) -> MaskMod:
    """A key is visible when every mask_mod allows it (FlexAttention's ``and_masks``, without importing it)."""

    def mask_mod(b, h, q_idx, kv_idx):
        allowed = mask_mods[0](b, h, q_idx, kv_idx)
        for other in mask_mods[1:]:
            allowed = allowed & other(b, h, q_idx, kv_idx)
        return allowed

    mask_mod.requires = [need for part in mask_mods for need in getattr(part, "requires", [])]
    return mask_mod


def _check_reference_inputs(q, k, v, score_mod, mask_mod, sinks) -> None:
    """q, k, v 4-D of one (B, H); sinks (H,); what ALiBi's slopes and document's doc_ids were built for."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.ndim != 4:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a 4-D tensor (B, H, L, D), got {shape}.")
    if k.shape[:2] != q.shape[:2] or v.shape[:3] != k.shape[:3] or k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"q (B, H, Lq, D), k (B, H, Lk, D) and v (B, H, Lk, Dv) must share B and H (k and v also Lk, q and k "
            f"also D); got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}."
        )
    batch, heads, q_len, _ = q.shape
    if sinks is not None and (not isinstance(sinks, torch.Tensor) or tuple(sinks.shape) != (heads,)):
        shape = tuple(sinks.shape) if isinstance(sinks, torch.Tensor) else type(sinks).__name__
        raise ValueError(f"sinks must be a tensor (H,) = ({heads},), one learned logit per head; got {shape}.")
    sizes = {"num_heads": heads, "length": (q_len, k.shape[2]), "batch": batch}
    for mod in (score_mod, mask_mod):
        for what, built_for, meaning in getattr(mod, "requires", []):
            have = sizes[what]
            if what == "length" and have != (built_for, built_for):
                raise ValueError(
                    f"{meaning}: it was built for {built_for} tokens, but q has Lq={q_len} and k has Lk={k.shape[2]} "
                    "(positions past the end would be clamped onto the last token's document)."
                )
            if what == "num_heads" and have != built_for:
                raise ValueError(f"{meaning}: it was built for {built_for} heads, but q has H={heads}.")
            if what == "batch" and have != built_for:
                raise ValueError(f"{meaning}: it has {built_for} rows, but q has B={batch} (or pass one row for all).")


def _indices(batch: int, heads: int, q_len: int, k_len: int, device) -> tuple[torch.Tensor, ...]:
    b = torch.arange(batch, device=device).view(batch, 1, 1, 1)  # (B, 1, 1, 1)
    h = torch.arange(heads, device=device).view(1, heads, 1, 1)  # (1, H, 1, 1)
    q_idx = torch.arange(q_len, device=device).view(1, 1, q_len, 1)  # (1, 1, Lq, 1)
    kv_idx = torch.arange(k_len, device=device).view(1, 1, 1, k_len)  # (1, 1, 1, Lk)
    return b, h, q_idx, kv_idx


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    score_mod: ScoreMod | None = None,
    mask_mod: MaskMod | None = None,
    scale: float | None = None,
    sinks: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The variant in plain torch: q ``(B, H, Lq, D)``, k/v ``(B, H, Lk, D)`` -> ``(out, weights (B, H, Lq, Lk))``.

    The mask goes to ``ac.scaled_dot_product_attention`` (boolean, True = may attend); a score_mod is applied to the
    scaled scores, which that function cannot take, so the softmax here follows its rules: masked keys get weight 0,
    a row with no visible key is all zeros, ``sinks`` join every row as extra logits with no value.
    """
    _check_reference_inputs(q, k, v, score_mod, mask_mod, sinks)
    batch, heads, q_len, dim = q.shape
    k_len = k.shape[-2]
    b, h, q_idx, kv_idx = _indices(batch, heads, q_len, k_len, q.device)
    mask = None if mask_mod is None else mask_mod(b, h, q_idx, kv_idx).expand(batch, heads, q_len, k_len)
    if score_mod is None:
        from attn_core.attention import scaled_dot_product_attention

        return scaled_dot_product_attention(q, k, v, mask, scale=scale, sinks=sinks)
    scale = 1.0 / math.sqrt(dim) if scale is None else scale
    scores = score_mod(q @ k.transpose(-2, -1) * scale, b, h, q_idx, kv_idx)  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    columns = [scores] if sinks is None else [scores, sinks.view(1, heads, 1, 1).expand(batch, heads, q_len, 1)]
    logits = torch.cat(columns, dim=-1)  # (B, H, Lq, Lk [+ 1])
    blind = (logits == -math.inf).all(dim=-1, keepdim=True)  # (B, H, Lq, 1): every key masked, no sink
    # Only those rows are zeroed (softmax of all -inf is NaN); a NaN from NaN inputs stays NaN, as in sdpa.
    weights = torch.softmax(logits, dim=-1).masked_fill(blind, 0.0)[..., :k_len]  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, Dv), (B, H, Lq, Lk)


def flex_attention_with_sinks(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    sinks: torch.Tensor,
    *,
    score_mod: ScoreMod | None = None,
    block_mask=None,
    scale: float | None = None,
) -> torch.Tensor:
    """FlexAttention, then gpt-oss's sinks merged in from its log-sum-exp: ``(B, H, Lq, Dv)``.

    The kernel returns ``out`` normalised over the keys and ``lse = log Σ_j exp(s_ij)``. A sink is a key with logit
    ``sinks[h]`` and value 0, so over keys + sink the output is ``out · exp(lse) / (exp(lse) + exp(sinks[h]))``
    ``= out · sigmoid(lse − sinks[h])``: the two-block merge of notebook 08, one block being the sink alone.
    """
    heads = q.shape[1] if isinstance(q, torch.Tensor) and q.ndim == 4 else None
    if not isinstance(sinks, torch.Tensor) or heads is None or tuple(sinks.shape) != (heads,):
        shape = tuple(sinks.shape) if isinstance(sinks, torch.Tensor) else type(sinks).__name__
        raise ValueError(f"sinks must be a tensor (H,), one learned logit per head of q (B, H, Lq, D); got {shape}.")
    from torch.nn.attention.flex_attention import AuxRequest, flex_attention  # the first call imports torch._dynamo

    out, aux = flex_attention(
        q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale, return_aux=AuxRequest(lse=True)
    )
    lse = aux.lse  # (B, H, Lq): log Σ_j exp(s_ij) over the visible keys
    # out (B, H, Lq, Dv), lse (B, H, Lq); a fully masked row has lse = -inf and out = 0, so the factor is 0 too
    keep = torch.sigmoid(lse - sinks.to(lse.dtype).view(1, -1, 1))  # (B, H, Lq): the keys' share of the row
    return out * keep[..., None].to(out.dtype)  # (B, H, Lq, Dv)
