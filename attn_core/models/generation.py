"""Choosing the next token: greedy, temperature, top-k and top-p (nucleus) sampling, and the decode loop."""

from __future__ import annotations

import numbers
from collections.abc import Callable

import torch

__all__ = ["check_sampling", "next_token_distribution", "sample_next", "generate_tokens"]


def check_sampling(temperature, top_k, top_p) -> tuple[float, int | None, float | None]:
    """The sampling settings, checked the same way whether they lead to a draw or to argmax, returned as
    Python numbers (numpy scalars are accepted wherever Python ones are)."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or not temperature >= 0:
        raise ValueError(f"temperature must be a number >= 0 (0 = greedy), got {temperature!r}.")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or top_k < 1):
        raise ValueError(f"top_k must be None or an int >= 1, got {top_k!r}.")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, numbers.Real) or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be None or in (0, 1], got {top_p!r}.")
    return float(temperature), None if top_k is None else int(top_k), None if top_p is None else float(top_p)


def next_token_distribution(
    logits: torch.Tensor, *, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """Probabilities ``(B, vocab)`` that sampling draws from, after temperature, top-k and top-p.

    temperature divides the logits (< 1 sharpens, > 1 flattens); top_k keeps the k most likely tokens;
    top_p keeps the smallest set of most likely tokens whose probability reaches p (the first token
    always stays). Ties at the cut are kept, so the result does not depend on sort order.
    """
    temperature, top_k, top_p = check_sampling(temperature, top_k, top_p)
    if temperature == 0:
        raise ValueError("temperature must be > 0 here (0 means greedy: use argmax), got 0.")
    logits = logits.double() / temperature  # (B, vocab), float64: sums over 262k tokens stay exact enough
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (B, 1): the k-th largest logit
        logits = logits.masked_fill(logits < kth, float("-inf"))  # (B, vocab)
    probs = logits.softmax(dim=-1)  # (B, vocab)
    if top_p is not None and top_p < 1:
        sorted_probs, _ = probs.sort(dim=-1, descending=True)  # (B, vocab)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (B, vocab): mass of the strictly more likely tokens
        # the smallest probability still needed to reach top_p; everything at least that likely stays
        needed = sorted_probs.masked_fill(before >= top_p, float("inf")).amin(dim=-1, keepdim=True)  # (B, 1)
        probs = probs.masked_fill(probs < needed, 0.0)  # (B, vocab)
        probs = probs / probs.sum(dim=-1, keepdim=True)  # (B, vocab), renormalised
    return probs


def sample_next(
    logits: torch.Tensor,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Next token ids ``(B,)`` from logits ``(B, vocab)``: argmax when ``temperature == 0``, else a draw."""
    temperature, top_k, top_p = check_sampling(temperature, top_k, top_p)
    if temperature == 0:
        return logits.argmax(dim=-1)  # (B,)
    probs = next_token_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)  # (B, vocab)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)


def generate_tokens(
    next_logits: Callable[[torch.Tensor], torch.Tensor],
    input_ids: torch.Tensor,
    max_new_tokens: int,
    **sampling,
) -> torch.Tensor:
    """The decode loop: ``next_logits(ids)`` gets the prompt once (prefill), then one token per step,
    and returns ``(B, vocab)`` logits for the newest position (the model keeps its own KV caches)."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}.")
    max_new_tokens = int(max_new_tokens)
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or input_ids.is_floating_point():
        shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise ValueError(
            f"input_ids must be an integer tensor (B, L), got {shape}: e.g. torch.tensor([[2, 651, 6037]])."
        )
    if input_ids.shape[-1] == 0:
        raise ValueError("the prompt is empty: give at least one token (e.g. just <bos>).")
    out, step_input = [input_ids], input_ids  # (B, L)
    for _ in range(max_new_tokens):
        token = sample_next(next_logits(step_input), **sampling)  # (B,)
        step_input = token.unsqueeze(-1)  # (B, 1): only the new token goes through the model next
        out.append(step_input)
    return torch.cat(out, dim=-1)  # (B, L + n)
