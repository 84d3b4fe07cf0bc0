"""Prompt-lookup speculative decoding: greedy text, fewer forward passes, the same tokens.

A decode step is memory-bound on a GPU at small batch (notebook 07): reading the weights for one token costs
about as much as reading them for five. Not on a CPU: there a pass over 5 tokens of Gemma 3 270M costs
about 1.9 one-token steps (``benchmarks/bench_speculative.py``), so the speed-up is smaller than the tokens
per pass. Speculative decoding guesses ``k`` next tokens cheaply (the *drafts*), feeds the
last token and the drafts through the model in **one** forward pass, and keeps the longest run of drafts
that equals the model's own greedy choice at each position, plus the model's choice right after it. Every
kept token is one the model chose, so the text is exactly plain greedy decoding; only the number of
forward passes changes (Leviathan et al. 2023; Chen et al. 2023).

*Prompt lookup* (Saxena 2023; transformers PR #27775) drafts without a second model: find the last
earlier occurrence of the current last ``ngram`` tokens and propose the tokens that followed it. It
helps where text repeats (code edits, lists, quoting the prompt) and costs nothing where it finds no
match.

Rejected drafts leave their keys in every layer's cache: each cache is rolled back with
``KVCache.truncate``. A local layer's ring buffer must still hold the keys the next query needs after
the rollback, which is why the caches come from ``lm.new_caches(max_rollback=num_draft)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["SpeculativeStats", "lookup_drafts", "prompt_lookup_generate"]


@dataclass(frozen=True)
class SpeculativeStats:
    """What one :func:`prompt_lookup_generate` call did.

    ``forwards`` counts model passes (the prefill included); ``drafted`` the draft tokens fed to the model;
    ``accepted`` those equal to the model's greedy choice; ``new_tokens`` the tokens generated;
    ``min_logit_gap`` the smallest gap between the largest and second-largest logit over every position
    whose argmax chose a token (``inf`` when none did): the margin rounding would have to overcome to
    change a choice; ``passes`` one ``(drafts, kept)`` pair per verify pass (the prefill excluded)."""

    forwards: int
    drafted: int
    accepted: int
    new_tokens: int
    min_logit_gap: float
    passes: tuple[tuple[int, int], ...] = ()

    @property
    def draft_acceptance(self) -> float:
        """Estimate of alpha, the chance that a draft the model checks is right given the ones before it were:
        accepted drafts / (accepted + rejections), one rejection per pass that stopped at a wrong draft (the
        drafts after it were never checked). NaN when no draft was checked."""
        rejections = sum(1 for drafts, kept in self.passes if kept < drafts)
        checked = self.accepted + rejections
        return self.accepted / checked if checked else float("nan")

    @property
    def tokens_per_forward(self) -> float:
        """New tokens per forward pass: 1.0 for plain greedy decoding, up to ``num_draft + 1``."""
        return self.new_tokens / self.forwards if self.forwards else 0.0

    @property
    def acceptance_rate(self) -> float:
        """Share of drafted tokens the model kept (0.0 when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else 0.0


def _check_count(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}.")


def lookup_drafts(tokens: list[int] | torch.Tensor, ngram: int, num_draft: int) -> list[int]:
    """Up to ``num_draft`` tokens that followed the last earlier occurrence of ``tokens[-ngram:]``.

    ``tokens``: a list of ids or a 1-D integer tensor. ``[]`` when that n-gram has not occurred before (or
    ``tokens`` is shorter than ``ngram + 1``). The occurrence may overlap the end: in ``a b a b a b`` the bigram
    ``a b`` last occurred at 2, followed by ``a b``."""
    _check_count("ngram", ngram, 1)
    _check_count("num_draft", num_draft, 0)
    if isinstance(tokens, torch.Tensor):  # compared as a list: slices of a tensor compare element-wise
        if tokens.ndim != 1 or tokens.is_floating_point():
            raise ValueError(
                f"tokens must be a list of ids or a 1-D integer tensor, got a tensor {tuple(tokens.shape)} of "
                f"{tokens.dtype}: pass one sequence, e.g. ids[0]."
            )
        tokens = tokens.tolist()
    if num_draft == 0 or len(tokens) <= ngram:
        return []
    tail = tokens[-ngram:]
    for start in range(len(tokens) - ngram - 1, -1, -1):  # latest occurrence first, the tail itself excluded
        if tokens[start : start + ngram] == tail:
            follow = start + ngram
            return list(tokens[follow : follow + num_draft])
    return []


def _top_gaps(logits: torch.Tensor) -> torch.Tensor:
    top2 = logits.topk(2, dim=-1).values  # (n, 2)
    return top2[:, 0] - top2[:, 1]  # (n,)


@torch.no_grad()
def prompt_lookup_generate(
    lm, input_ids: torch.Tensor, max_new_tokens: int, *, num_draft: int = 4, ngram: int = 2
) -> tuple[torch.Tensor, SpeculativeStats]:
    """Greedy decoding with prompt-lookup drafts: ``(ids (1, L + max_new_tokens), stats)``.

    The ids equal ``lm.generate(input_ids, max_new_tokens)`` (greedy, no early stop), up to float
    rounding: verifying ``k`` tokens in one pass multiplies matrices of another shape than one token at a
    time, so the logits can differ in the last bits, and a position whose top two logits are closer than
    that could pick the other token. ``stats.min_logit_gap`` reports how far from such a tie the run was.

    ``lm`` is a :class:`~attn_core.models.gemma3.Gemma3` (anything with ``new_caches(max_rollback=...)``
    and ``lm(ids, caches, last_only=...)`` returning logits). ``num_draft`` drafts at most per pass
    (``0``: plain greedy, one token per pass), ``ngram`` the length of the suffix looked up.
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or input_ids.dtype != torch.long:
        shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise ValueError(
            f"input_ids must be an int64 tensor of shape (1, seq_len), got {shape}. "
            "For one text: torch.tensor([lm.encode(text)])."
        )
    if input_ids.shape[0] != 1 or input_ids.shape[1] == 0:
        raise ValueError(
            f"prompt lookup drafts from one sequence's own tokens: input_ids must be (1, seq_len >= 1), got "
            f"{tuple(input_ids.shape)}. Call it once per sequence."
        )
    _check_count("max_new_tokens", max_new_tokens, 0)
    _check_count("num_draft", num_draft, 0)
    _check_count("ngram", ngram, 1)
    tokens = input_ids[0].tolist()
    if max_new_tokens == 0:
        return input_ids.clone(), SpeculativeStats(0, 0, 0, 0, float("inf"))

    caches = lm.new_caches(max_rollback=num_draft)  # rings keep num_draft extra keys: rollback after a wrap
    logits = lm(input_ids, caches, last_only=True)[0]  # (1, V): the prefill
    gaps = [_top_gaps(logits)]  # (1,)
    tokens.append(int(logits[-1].argmax()))  # the first new token; not yet fed to the model
    forwards, drafted, accepted = 1, 0, 0
    generated, passes = 1, []
    while generated < max_new_tokens:
        # A pass yields (accepted drafts) + 1 tokens, so draft no more than the tokens still wanted, minus one.
        drafts = lookup_drafts(tokens, ngram, min(num_draft, max_new_tokens - generated - 1))
        step = torch.tensor([[tokens[-1], *drafts]], device=input_ids.device)  # (1, 1 + k)
        logits = lm(step, caches)[0]  # (1 + k, V): row i predicts the token after step[i]
        forwards += 1
        choices = logits.argmax(dim=-1).tolist()  # the model's greedy token at each of the 1 + k positions
        kept = 0
        while kept < len(drafts) and drafts[kept] == choices[kept]:  # draft i must be the choice after step[i]
            kept += 1
        gaps.append(_top_gaps(logits[: kept + 1]))  # the positions whose argmax was used
        tokens.extend([*drafts[:kept], choices[kept]])  # kept drafts, then the model's own next token
        rejected = len(drafts) - kept
        if rejected:
            for cache in caches:  # forget the rejected drafts' keys and values in every layer
                cache.truncate(len(cache) - rejected)
        drafted, accepted, generated = drafted + len(drafts), accepted + kept, generated + kept + 1
        passes.append((len(drafts), kept))
    min_gap = float(torch.cat(gaps).min())
    stats = SpeculativeStats(forwards, drafted, accepted, generated, min_gap, tuple(passes))
    return torch.tensor([tokens], device=input_ids.device), stats
