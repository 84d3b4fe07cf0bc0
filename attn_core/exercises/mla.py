"""Checks for notebook 09, multi-head latent attention (MLA, DeepSeek-V2/V3).

Each ``check_…`` takes the learner's function, prints a verdict through
:func:`attn_core.exercises.feedback` and returns True/False. It never raises on a wrong answer, and it
names the usual MLA mistakes distinctly: the rotary part of the cache forgotten, per-head keys (and
values) cached as in MHA, the values counted as if the latent did not already stand for them, the
layers forgotten; ``W_UK`` transposed, summed over the heads or head 0's for all, a softmax scale folded into
the absorbed query; the shared rotary key not rotated, rotated in the wrong layout or returned in Hugging Face's
de-interleaved order, taken from the wrong end of ``kv_a_proj_with_mqa``'s output, copied per head or with its
head axis in the wrong place, rotated at positions 0..T-1 instead of the given ones or with the base ignored.

The references are written out here on purpose: a grader must not share a bug with the code it grades.

One piece: the checks of notebook 09's exercises, each next to the reference it grades against and the mistakes it
names.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attn_core.exercises import as_number, call_learner, feedback, never_raises
from attn_core.i18n import _
from attn_core.positions.rope import apply_rope

__all__ = [
    "check_mla_cache_bytes",
    "check_absorbed_query",
    "check_decoupled_key",
    "mla_cache_bytes",
    "absorbed_query",
    "decoupled_key",
]

# ----------------------------------------------------------------------------------------------
# Exercise 1: KV-cache bytes per token of an MLA model
# ----------------------------------------------------------------------------------------------


def mla_cache_bytes(config: dict, bytes_per_element: int) -> int:
    """Bytes MLA caches per token over all layers: the latent and ONE shared rotary key per layer."""
    per_layer = config["kv_lora_rank"] + config["qk_rope_head_dim"]  # numbers per token per layer
    return config["num_hidden_layers"] * per_layer * bytes_per_element


_CONFIGS = [
    # DeepSeek-V3's config.json (deepseek-ai/DeepSeek-V3): 61 * (512 + 64) * 2 = 70,272 bytes in bf16
    dict(
        num_hidden_layers=61,
        num_attention_heads=128,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
    ),
    # DeepSeek-V2-Lite's config.json (deepseek-ai/DeepSeek-V2-Lite)
    dict(
        num_hidden_layers=27,
        num_attention_heads=16,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
    ),
    # a made-up config whose numbers are all different, so that every mistake gives a different count
    dict(
        num_hidden_layers=3,
        num_attention_heads=5,
        kv_lora_rank=24,
        qk_rope_head_dim=8,
        qk_nope_head_dim=12,
        v_head_dim=10,
    ),
]


def _cache_mistakes(c: dict, b: int) -> list[tuple[int, str]]:
    n, h, r, rope = c["num_hidden_layers"], c["num_attention_heads"], c["kv_lora_rank"], c["qk_rope_head_dim"]
    nope, v = c["qk_nope_head_dim"], c["v_head_dim"]
    return [
        (
            n * r * b,
            _(
                "you forgot the rotary part: besides the latent (kv_lora_rank numbers) MLA caches the shared rotated "
                "key k_rope (qk_rope_head_dim numbers) per token per layer."
            ),
        ),
        (
            n * h * (nope + rope + v) * b,
            _(
                "you counted per-head keys and values (heads · (nope + rope + v)): that is what the naive, "
                "up-projected "
                "form builds for one step, not what MLA caches. The cache holds the latent and one shared k_rope."
            ),
        ),
        (
            n * h * (nope + rope) * b * 2,
            _(
                "you counted an MHA-style cache of per-head keys and values: MLA caches the latent and one "
                "shared k_rope."
            ),
        ),
        (
            n * (r + rope + v) * b,
            _(
                "you counted v_head_dim as well: the values are up-projected from the same latent (W_UV), nothing "
                "extra is cached for them."
            ),
        ),
        (
            n * 2 * (r + rope) * b,
            _(
                "you doubled the count as for K and V: the latent serves as both (W_UK and W_UV read it), "
                "count it once."
            ),
        ),
        (
            n * (r + h * rope) * b,
            _(
                "you cached a rotary key per head: DeepSeek's decoupled rotary key is ONE (qk_rope_head_dim,) "
                "vector per "
                "token, shared by all heads (like MQA)."
            ),
        ),
        ((r + rope) * b, _("that is one layer: multiply by num_hidden_layers.")),
        (n * (r + rope), _("that is the number of elements: multiply by bytes_per_element (2 for bf16).")),
        (n * (r + rope) * b * 8, _("that is bits, not bytes: drop the factor 8.")),
    ]


@never_raises(_("MLA cache bytes per token"))
def check_mla_cache_bytes(fn: Callable) -> bool:
    """``fn(config, bytes_per_element)``: ``config`` a dict with the Hugging Face ``config.json`` keys
    ``num_hidden_layers``, ``num_attention_heads``, ``kv_lora_rank``, ``qk_rope_head_dim``,
    ``qk_nope_head_dim``, ``v_head_dim``. Return the bytes MLA caches per token, all layers together (an int)."""
    name = _("MLA cache bytes per token")
    for config in _CONFIGS:
        for b in (2, 4):
            answer, problem = call_learner(fn, dict(config), b)
            if problem is not None:
                return feedback(name, problem)
            number = as_number(answer)
            if number is None:
                return feedback(
                    name, _("return a number (bytes, an int), got {type}.").format(type=type(answer).__name__)
                )
            answer = number
            expected = mla_cache_bytes(config, b)
            if answer == expected:
                continue
            where = _("for {config} at {b} bytes per element you returned {answer}").format(
                config=config, b=b, answer=repr(answer)
            )
            for candidate, diagnosis in _cache_mistakes(config, b):
                if answer == candidate:
                    return feedback(name, _("{where}: {problem}").format(where=where, problem=diagnosis))
            problem = _(
                "{where}, expected {expected}: num_hidden_layers · (kv_lora_rank + qk_rope_head_dim) · "
                "bytes_per_element."
            )
            return feedback(name, problem.format(where=where, expected=f"{expected:,}"))
    return feedback(name, None)


# ----------------------------------------------------------------------------------------------
# Exercise 2: the absorbed query
# ----------------------------------------------------------------------------------------------


def absorbed_query(q_nope: torch.Tensor, w_uk: torch.Tensor) -> torch.Tensor:
    """``q_nope (B, H, L, nope)`` through ``w_uk (H, nope, r)`` -> ``(B, H, L, r)``.

    ``k_nope = c @ w_uk.mT`` per head, so ``q_nope @ k_nope.mT = (q_nope @ w_uk) @ c.mT``."""
    return q_nope @ w_uk  # (B, H, L, nope) @ (H, nope, r) -> (B, H, L, r)


def _query_cases() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(9)
    return [
        # nope == r: a transposed W_UK has the right shape, so the mistake shows in the numbers
        (
            torch.randn(2, 3, 4, 6, dtype=torch.float64, generator=g),
            torch.randn(3, 6, 6, dtype=torch.float64, generator=g),
        ),
        (
            torch.randn(1, 4, 5, 8, dtype=torch.float64, generator=g),
            torch.randn(4, 8, 12, dtype=torch.float64, generator=g),
        ),
        (torch.randn(2, 2, 3, 16, generator=g), torch.randn(2, 16, 32, generator=g)),
    ]


def _shape_dtype_problem(answer, expected: torch.Tensor, what: str, hint: str) -> str | None:
    if not isinstance(answer, torch.Tensor):
        return _("expected a torch.Tensor ({what}, shape {shape}), got {type}.").format(
            what=what, shape=tuple(expected.shape), type=type(answer).__name__
        )
    if tuple(answer.shape) != tuple(expected.shape):
        return _("wrong shape {shape} for {what}, expected {expected}: {hint}").format(
            shape=tuple(answer.shape), what=what, expected=tuple(expected.shape), hint=hint
        )
    if answer.is_complex() or answer.dtype != expected.dtype:
        return _("{what} has dtype {dtype}, expected {expected} (keep the input's dtype).").format(
            what=what, dtype=answer.dtype, expected=expected.dtype
        )
    if not torch.isfinite(answer).all():
        return _("{what} contains NaN or inf.").format(what=what)
    return None


def _close(answer: torch.Tensor, expected: torch.Tensor) -> bool:
    # float64: products of O(1) numbers summed over ≤ 32 terms, exact to ~1e-14; float32: eps32 · depth · |sum|
    if expected.dtype == torch.float64:
        atol = 1e-10
    else:
        atol = 64 * torch.finfo(torch.float32).eps * max(1.0, float(expected.abs().max()))
    return answer.shape == expected.shape and bool(((answer - expected).abs() <= atol).all())


@never_raises(_("the absorbed query"))
def check_absorbed_query(fn: Callable) -> bool:
    """``fn(q_nope, w_uk)``: ``q_nope (B, H, L, qk_nope_head_dim)``, ``w_uk (H, qk_nope_head_dim, kv_lora_rank)``
    (head h's key up-projection: ``k_nope[h] = c @ w_uk[h].T``). Return the absorbed query ``(B, H, L, kv_lora_rank)``
    whose product with the latent ``c (B, 1, T, kv_lora_rank)`` gives the same scores as ``q_nope @ k_nope.mT``."""
    name = _("the absorbed query")
    ambiguous = None  # a scale folded in where nope == kv_lora_rank: which one shows in the next case
    for q_nope, w_uk in _query_cases():
        answer, problem = call_learner(fn, q_nope.clone(), w_uk.clone())
        if problem is not None:
            if "RuntimeError" in problem and w_uk.shape[-1] != w_uk.shape[-2]:
                hint = _(
                    "{problem} (w_uk is (H, nope, r): q_nope @ w_uk multiplies over nope; no transpose is needed.)"
                )
                problem = hint.format(problem=problem)
            return feedback(name, problem)
        expected = absorbed_query(q_nope, w_uk)  # (B, H, L, r)
        problem = _shape_dtype_problem(
            answer,
            expected,
            _("the absorbed query"),
            _("it lives in the latent space, (B, H, L, kv_lora_rank): q_nope @ w_uk with w_uk (H, nope, r)."),
        )
        if problem is not None:
            return feedback(name, problem)
        if _close(answer, expected):
            continue
        where = _("q_nope {q}, w_uk {w}").format(q=tuple(q_nope.shape), w=tuple(w_uk.shape))
        nope, rank = w_uk.shape[-2:]
        candidates = [
            (
                q_nope @ w_uk.mT if nope == rank else None,  # W_UK transposed multiplies only when nope == rank
                _(
                    "you used W_UK transposed: k_nope = c @ w_uk.T, so the scores are q_nope @ w_uk @ c.T; the query "
                    "is multiplied by w_uk itself (over its nope axis), not by w_uk.T."
                ),
            ),
            (
                q_nope @ w_uk.sum(0, keepdim=True),
                _("you summed W_UK over the heads: each head has its own W_UK, so each head's query gets its own."),
            ),
            (
                q_nope @ w_uk[:1],
                _("you used head 0's W_UK for every head: broadcast the (H, nope, r) weight over the heads."),
            ),
        ]
        scales = [
            (
                nope**-0.5,
                _(
                    "you folded a softmax scale of nope**-0.5 into the query: the scale belongs to the scores, "
                    "and MLA's "
                    "is (nope + rope)**-0.5; return the plain absorbed query."
                ),
            ),
            (
                rank**-0.5,
                _(
                    "you folded a softmax scale of kv_lora_rank**-0.5 into the query: the absorbed query lives in the "
                    "latent space, but the scores keep MLA's scale (nope + rope)**-0.5, applied to the scores; return "
                    "the plain absorbed query."
                ),
            ),
        ]
        for factor, diagnosis in scales:
            if _close(answer, expected * factor):
                if nope == rank:  # both scales give these numbers: the next case (nope != rank) tells them apart
                    ambiguous = ambiguous or _("{where}: {problem}").format(where=where, problem=diagnosis)
                    break
                return feedback(name, _("{where}: {problem}").format(where=where, problem=diagnosis))
        else:
            for candidate, diagnosis in candidates:
                if candidate is not None and candidate.shape == expected.shape and _close(answer, candidate):
                    return feedback(name, _("{where}: {problem}").format(where=where, problem=diagnosis))
            problem = _("wrong numbers; the absorbed query is q_nope @ w_uk (per head).")
            return feedback(name, _("{where}: {problem}").format(where=where, problem=problem))
    return feedback(name, ambiguous)


# ----------------------------------------------------------------------------------------------
# Exercise 3: the decoupled, shared rotary key
# ----------------------------------------------------------------------------------------------


def decoupled_key(compressed_kv: torch.Tensor, positions: torch.Tensor, kv_lora_rank: int, base: float) -> torch.Tensor:
    """The last ``rope`` features of ``kv_a_proj_with_mqa``'s output, rotated (interleaved pairs, as DeepSeek),
    as ONE shared head: ``(B, T, r + rope)`` -> ``(B, 1, T, rope)``."""
    k_rope = compressed_kv[..., kv_lora_rank:]  # (B, T, rope)
    return apply_rope(k_rope, positions, base=base, interleaved=True)[:, None]  # (B, 1, T, rope)


def _key_cases():
    g = torch.Generator().manual_seed(5)
    return [
        (torch.randn(2, 5, 12 + 8, dtype=torch.float64, generator=g), torch.tensor([3, 4, 5, 6, 7]), 12, 10000.0),
        (torch.randn(1, 4, 8 + 8, dtype=torch.float64, generator=g), torch.tensor([10, 11, 12, 13]), 8, 500.0),
        (torch.randn(2, 3, 16 + 4, generator=g), torch.tensor([0, 1, 2]), 16, 10000.0),
    ]


@never_raises(_("the decoupled rotary key"))
def check_decoupled_key(fn: Callable) -> bool:
    """``fn(compressed_kv, positions, kv_lora_rank, base)``: ``compressed_kv (B, T, kv_lora_rank + qk_rope_head_dim)``
    is ``kv_a_proj_with_mqa(x)``, ``positions (T,)``. Return the cached rotary key ``(B, 1, T, qk_rope_head_dim)``:
    the features after the latent, rotated by RoPE at ``positions`` in DeepSeek's interleaved layout
    (``ac.apply_rope(..., interleaved=True)``), one head shared by all query heads."""
    name = _("the decoupled rotary key")
    for ckv, positions, rank, base in _key_cases():
        answer, problem = call_learner(fn, ckv.clone(), positions.clone(), kv_lora_rank=rank, base=base)
        if problem is not None:
            return feedback(name, problem)
        expected = decoupled_key(ckv, positions, rank, base)  # (B, 1, T, rope)
        batch, length, rope = ckv.shape[0], ckv.shape[1], ckv.shape[-1] - rank
        if isinstance(answer, torch.Tensor) and tuple(answer.shape) == (batch, length, 1, rope):
            return feedback(
                name,
                _(
                    "you returned {shape}: the head axis is in the wrong place, (B, T, 1, rope) is the layout "
                    "of a projection's output before .transpose(1, 2). The cache is (B, 1, T, rope) = "
                    "{expected}: k_rope[:, None] (or .transpose(1, 2))."
                ).format(shape=tuple(answer.shape), expected=tuple(expected.shape)),
            )
        if (
            isinstance(answer, torch.Tensor)
            and answer.dim() == 4
            and answer.shape[1] > 1
            and answer.shape[0] == batch
            and answer.shape[2] == length
        ):
            return feedback(
                name,
                _(
                    "you returned {shape}: a rotary key per head. DeepSeek's rotary key is shared: cache ONE "
                    "head (B, 1, T, rope) = {expected} and let it broadcast over the query heads."
                ).format(shape=tuple(answer.shape), expected=tuple(expected.shape)),
            )
        if isinstance(answer, torch.Tensor) and tuple(answer.shape) == (batch, length, rope):
            return feedback(
                name,
                _("add the head axis: (B, 1, T, rope) = {expected}, e.g. k_rope[:, None].").format(
                    expected=tuple(expected.shape)
                ),
            )
        problem = _shape_dtype_problem(
            answer,
            expected,
            _("the rotary key"),
            _(
                "take the LAST qk_rope_head_dim = {rope} features (compressed_kv[..., kv_lora_rank:]), rotate, "
                "add a head axis."
            ).format(rope=rope),
        )
        if problem is not None:
            return feedback(name, problem)
        if _close(answer, expected):
            continue
        where = _("compressed_kv {shape}, kv_lora_rank {rank}, positions {positions}").format(
            shape=tuple(ckv.shape), rank=rank, positions=positions.tolist()
        )
        tail, head = ckv[..., rank:], ckv[..., :rope]  # (B, T, rope) each
        candidates = [
            (
                tail[:, None],
                _("the key is not rotated: apply RoPE to k_rope (that is the point of the decoupled key)."),
            ),
            (
                apply_rope(tail, positions, base=base)[:, None],
                _(
                    "wrong layout: you rotated (i, i + D/2) pairs (rotate-half); DeepSeek's checkpoints pair adjacent "
                    "features (2i, 2i+1): apply_rope(..., interleaved=True)."
                ),
            ),
            (
                apply_rope(head, positions, base=base, interleaved=True)[:, None],
                _(
                    "you took the FIRST rope features: kv_a_proj_with_mqa outputs [latent | k_rope], the "
                    "rotary key is the "
                    "last qk_rope_head_dim features."
                ),
            ),
            (
                apply_rope(tail, torch.arange(length), base=base, interleaved=True)[:, None],
                _(
                    "you ignored `positions` and rotated at 0..T-1: a decoding step's key sits at its absolute "
                    "position."
                ),
            ),
            (
                expected[..., torch.cat([torch.arange(0, rope, 2), torch.arange(1, rope, 2)])],
                _(
                    "the right rotated numbers in Hugging Face's de-interleaved order (features 0, 2, 4, ... "
                    "then 1, 3, "
                    "5, ...: what apply_rotary_pos_emb_interleave returns). Inside a model that order is harmless when "
                    "q_rope gets the same permutation (the scores do not change), but this cache keeps DeepSeek's "
                    "order, each pair (2i, 2i+1) in place: ac.apply_rope(..., interleaved=True)."
                ),
            ),
        ]
        if base != 10000.0:
            candidates.append(
                (
                    apply_rope(tail, positions, base=10000.0, interleaved=True)[:, None],
                    _("you ignored `base` and rotated with 10000: use the base you were given ({base}).").format(
                        base=f"{base:g}"
                    ),
                )
            )
        for candidate, diagnosis in candidates:
            if _close(answer, candidate):
                return feedback(name, _("{where}: {problem}").format(where=where, problem=diagnosis))
        problem = _("wrong numbers; rotate compressed_kv[..., kv_lora_rank:] at `positions`.")
        return feedback(name, _("{where}: {problem}").format(where=where, problem=problem))
    return feedback(name, None)
