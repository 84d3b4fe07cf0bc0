"""Check for notebook 16 (hand-write it): multi-head latent attention (MLA, DeepSeek-V2/V3), naive form.

``check_mla(cls)`` grades ``cls(hidden_dim, num_heads, *, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
v_head_dim, rope_base=10000.0)`` with the DeepSeek parameter names ``q_proj, kv_a_proj_with_mqa,
kv_a_layernorm, kv_b_proj, o_proj`` (``q_lora_rank`` None, no biases) and ``forward(x, cache=None) ->
(out (B, L, hidden_dim), weights (B, num_heads, L, T))``, causal, RoPE in DeepSeek's interleaved layout
(pairs ``(2i, 2i + 1)``), positions ``len(cache)`` onwards. With a cache (an ``ac.KVCache``) it must hold what
MLA caches: the normalised latent ``(B, 1, T, kv_lora_rank)`` as keys and the rotated shared rope key
``(B, 1, T, qk_rope_head_dim)`` as values. Graded in float64 against ``ac.MultiHeadLatentAttention`` with
the same parameters: one full pass, then a prefill of 3 tokens and 3 decode steps.

Diagnosed: the rope part missing, RoPE applied to the latent or to the nope part, a per-head (not shared)
rope key, up-projected keys cached instead of the latent, the scale √qk_nope_head_dim (or none), the
``kv_a_layernorm`` skipped, the ``kv_a_proj_with_mqa`` output split in the wrong order (rope first), the
``kv_b_proj`` output split in the wrong order (v first), the "rotate half" layout, positions restarting at 0
in each decode step, and no (or top-left) causal mask. It never raises on a wrong answer.

One piece: one check, ``check_mla``, with its configurations, reference replay and the MLA mistakes it recognises.
"""

from __future__ import annotations

import torch
from torch import nn

from attn_core.caches.kv_cache import KVCache
from attn_core.deepseek.latent_attention import MultiHeadLatentAttention
from attn_core.exercises import NOT_DONE, call_learner, feedback, is_stub, never_raises
from attn_core.exercises import handwrite_common as _common
from attn_core.masks import causal_mask
from attn_core.positions.rope import apply_rope

__all__ = ["check_mla"]

_F64 = torch.float64
_PREFILL = 3  # tokens in the prefill; then one decode step per remaining token
_LENGTH = 6  # tokens per sequence (batch of 2)
# (hidden, heads, kv_lora_rank, nope, rope, v, rope_base): every size different, so a wrong split cannot
# keep its shapes by luck (rank ≠ rope, nope ≠ v); base 100 makes an ignored rope_base visible.
_CONFIGS = ((16, 2, 6, 4, 2, 3, 10000.0), (24, 3, 8, 6, 4, 5, 100.0))
_NAMES = ("q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")


@torch.no_grad()
def _simulate(ref: MultiHeadLatentAttention, steps: list[torch.Tensor], **mistake) -> list[tuple]:
    """Run ``steps`` through ``ref``'s weights, naive MLA written out, with one mistake switched on.

    Returns ``[(out (B, L, hidden), weights (B, H, L, T)), ...]``, one pair per step.
    """
    heads, nope, rope, rank, vdim = (
        ref.num_heads, ref.qk_nope_head_dim, ref.qk_rope_head_dim, ref.kv_lora_rank, ref.v_head_dim,
    )  # fmt: skip
    base = 10000.0 if mistake.get("base") == "ignored" else ref.rope_base
    interleaved = mistake.get("layout") != "half"

    def rotate(t, positions):  # (..., L, D) -> (..., L, D)
        return apply_rope(t, positions, base=base, interleaved=interleaved)

    latents = k_ropes = None  # (B, 1, T, rank), (B, 1, T, rope): what the cache holds
    results = []
    for x in steps:
        batch, length, hidden = x.shape
        q = ref.q_proj(x).view(batch, length, heads, nope + rope).transpose(1, 2)  # (B, H, L, nope + rope)
        q_nope, q_rope = q.split([nope, rope], dim=-1)  # (B, H, L, nope), (B, H, L, rope)
        kv_a = ref.kv_a_proj_with_mqa(x)  # (B, L, rank + rope)
        if mistake.get("split_a") == "rope_first":
            k_rope, latent = kv_a.split([rope, rank], dim=-1)  # (B, L, rope), (B, L, rank)
        else:
            latent, k_rope = kv_a.split([rank, rope], dim=-1)  # (B, L, rank), (B, L, rope)
        if mistake.get("norm") != "skipped":
            latent = ref.kv_a_layernorm(latent)  # (B, L, rank)
        latent, k_rope = latent.unsqueeze(1), k_rope.unsqueeze(1)  # (B, 1, L, rank), (B, 1, L, rope)
        offset = 0 if latents is None else latents.shape[-2]
        start = 0 if mistake.get("positions") == "restart" else offset
        positions = torch.arange(start, start + length)  # (L,)
        q_rope, k_rope = rotate(q_rope, positions), rotate(k_rope, positions)  # (B, H, L, rope), (B, 1, L, rope)
        if mistake.get("rope_on") in ("latent", "absorbed"):
            latent = rotate(latent, positions)  # (B, 1, L, rank)
        latents = latent if latents is None else torch.cat((latents, latent), dim=-2)  # (B, 1, T, rank)
        k_ropes = k_rope if k_ropes is None else torch.cat((k_ropes, k_rope), dim=-2)  # (B, 1, T, rope)
        total = latents.shape[-2]
        kv = ref.kv_b_proj(latents.squeeze(1)).view(batch, total, heads, -1).transpose(1, 2)  # (B, H, T, nope + v)
        if mistake.get("split_b") == "v_first":
            v, k_nope = kv.split([vdim, nope], dim=-1)  # (B, H, T, v), (B, H, T, nope)
        else:
            k_nope, v = kv.split([nope, vdim], dim=-1)  # (B, H, T, nope), (B, H, T, v)
        if mistake.get("rope_on") == "nope":
            k_nope = rotate(k_nope, torch.arange(total))  # (B, H, T, nope)
            q_nope = rotate(q_nope, positions)  # (B, H, L, nope)
        scale = {"nope": nope**-0.5, "none": 1.0}.get(mistake.get("scale"), (nope + rope) ** -0.5)
        scores = q_nope @ k_nope.transpose(-2, -1)  # (B, H, L, T)
        if mistake.get("rope_on") == "absorbed":  # W_UK folded into the query, then the query rotated too
            w_uk = ref.kv_b_proj.weight.view(heads, nope + vdim, rank)[:, :nope]  # (H, nope, rank)
            q_lat = rotate(torch.einsum("bhln,hnr->bhlr", q_nope, w_uk), positions)  # (B, H, L, rank)
            scores = q_lat @ latents.transpose(-2, -1)  # (B, H, L, T): latents were rotated before caching
        if mistake.get("rope") != "missing":
            scores = scores + q_rope @ k_ropes.transpose(-2, -1)  # (B, H, L, T): the shared key, every head
        scores = scores * scale  # (B, H, L, T)
        mask = {
            "none": None,
            "top_left": torch.ones(length, total, dtype=torch.bool).tril(),  # (L, T)
        }.get(mistake.get("mask"), causal_mask(length, total))  # (L, T), bottom-right
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))  # (B, H, L, T)
        weights = scores.softmax(dim=-1)  # (B, H, L, T)
        out = (weights @ v).transpose(1, 2).reshape(batch, length, heads * vdim)  # (B, L, H * v)
        results.append((ref.o_proj(out), weights))  # (B, L, hidden), (B, H, L, T)
    return results


_SUSPECTS = [
    (
        dict(rope="missing"),
        "the rope part is missing: the score of head h is q_nope·k_nope + q_rope·k_rope, where q_rope is the "
        "last qk_rope_head_dim features of each head's query and k_rope the rotated shared key from "
        "kv_a_proj_with_mqa. Without it MLA has no position information at all.",
    ),
    (
        dict(rope="missing", scale="nope"),
        "the rope part is missing (and the scale is 1/√qk_nope_head_dim): add q_rope·k_rope to every head's "
        "scores and scale by 1/√(qk_nope_head_dim + qk_rope_head_dim).",
    ),
    (
        dict(rope_on="latent"),
        "RoPE applied to the latent: only the decoupled part is rotated (q_rope and the shared k_rope). A "
        "rotated latent puts a position-dependent rotation between the cache and W_UK, which is exactly what "
        "the decoupled key exists to avoid (notebook 09: it breaks absorption).",
    ),
    (
        dict(rope_on="absorbed"),
        "RoPE pushed through the absorbed W_UK: you rotate the latent-space query q_nope·W_UK and the cached "
        "latent. The rotation of key n sits BETWEEN W_UK and c_n and depends on n, so it cannot be folded; leave "
        "the latent path unrotated and put all position information in q_rope · k_rope (the decoupled key).",
    ),
    (
        dict(rope_on="nope"),
        "RoPE applied to the nope part too: q_nope and k_nope stay unrotated ('no position embedding'); only "
        "q_rope and the shared k_rope are rotated.",
    ),
    (
        dict(scale="nope"),
        "wrong scale: 1/√qk_nope_head_dim. The dot product runs over nope + rope features, so the scale is "
        "(qk_nope_head_dim + qk_rope_head_dim) ** -0.5 (DeepSeek's softmax_scale).",
    ),
    (dict(scale="none"), "the scale is missing: multiply the scores by (qk_nope_head_dim + qk_rope_head_dim) ** -0.5."),
    (
        dict(norm="skipped"),
        "kv_a_layernorm is skipped: the latent is c = kv_a_layernorm(first kv_lora_rank features of "
        "kv_a_proj_with_mqa(x)); cache and up-project the NORMALISED latent (the rope key is not normalised).",
    ),
    (
        dict(split_a="rope_first"),
        "kv_a_proj_with_mqa's output split in the wrong order: it is [latent (kv_lora_rank), k_rope "
        "(qk_rope_head_dim)], latent first: latent, k_rope = kv_a.split([kv_lora_rank, qk_rope_head_dim], dim=-1).",
    ),
    (
        dict(split_b="v_first"),
        "kv_b_proj's output split in the wrong order: per head it is [k_nope (qk_nope_head_dim), v (v_head_dim)], "
        "k_nope first: view(B, T, H, nope + v) then split([nope, v], dim=-1).",
    ),
    (
        dict(layout="half"),
        "wrong RoPE layout: you rotate the pairs (i, i + D/2) ('rotate half', Llama in Hugging Face); DeepSeek's "
        "checkpoints rotate the interleaved pairs (2i, 2i + 1): ac.apply_rope(t, positions, base=rope_base, "
        "interleaved=True).",
    ),
    (dict(base="ignored"), "the angles use base 10000 whatever rope_base says: use self.rope_base."),
    (
        dict(positions="restart"),
        "the positions restart at 0 in every call: a decode step's token sits at position len(cache). Take "
        "offset = len(cache) BEFORE cache.update and rotate q_rope and k_rope with offset .. offset + L - 1.",
    ),
    (
        dict(mask="none"),
        "no causal mask: each token may see itself and the EARLIER ones only. Mask the scores with a causal "
        "mask (L, T), aligned bottom-right.",
    ),
    (
        dict(mask="top_left"),
        "the causal mask is aligned top-left: with a cache the L new queries are the LAST L of T tokens: "
        "torch.ones(L, T, dtype=torch.bool).tril(diagonal=T - L).",
    ),
]


def _diagnose(ref, steps, step: int, out: torch.Tensor) -> str | None:
    """The first suspect whose replay gives ``out`` at ``steps[step]``."""
    out = out.detach().to(_F64)
    for mistake, diagnosis in _SUSPECTS:
        if mistake.get("base") == "ignored" and ref.rope_base == 10000.0:
            continue
        try:
            replay = _simulate(ref, steps[: step + 1], **mistake)[step][0]  # (B, L, hidden)
        except (RuntimeError, ValueError):  # a mistake that cannot run on these shapes is not the learner's
            continue
        if _common._close(out, replay):
            return diagnosis
    return None


def _cache_problem(cache: KVCache, ref: MultiHeadLatentAttention, batch: int, where: str) -> str | None:
    """Does the learner's cache hold the MLA layout (latent as keys, shared rotated key as values)?"""
    keys, values = cache.keys, cache.values
    rank, rope, heads = ref.kv_lora_rank, ref.qk_rope_head_dim, ref.num_heads
    nope, vdim = ref.qk_nope_head_dim, ref.v_head_dim
    if keys.ndim == 4 and keys.shape[1] == heads and keys.shape[-1] in (nope, nope + rope):
        return (
            f"{where} your cache holds up-projected per-head keys {tuple(keys.shape)} = (B, H, T, ...), not the "
            f"latent: that is an MHA-sized cache, the very thing MLA avoids. Cache the normalised latent "
            f"(B, 1, T, kv_lora_rank = {rank}) and the rotated shared key (B, 1, T, {rope}): "
            "cache.update(latent, k_rope), then up-project what it returns."
        )
    if values.ndim == 4 and values.shape[1] == heads and values.shape[-1] in (vdim, rope):
        what = "values" if values.shape[-1] == vdim and vdim != rope else "rope keys"
        return (
            f"{where} your cache's values are per-head {what} {tuple(values.shape)} = (B, H, T, ...): the rope key "
            f"is SHARED by all heads, one (B, 1, T, {rope}) tensor, broadcast (expand) to the heads when scoring. "
            "Cache (latent, k_rope), nothing per head."
        )
    want_k, want_v = (batch, 1, len(cache), rank), (batch, 1, len(cache), rope)
    if tuple(keys.shape) != want_k or tuple(values.shape) != want_v:
        return (
            f"{where} the cache should hold the latent {want_k} as keys and the rotated shared key {want_v} as "
            f"values (cache.update(latent, k_rope)); yours holds {tuple(keys.shape)} and {tuple(values.shape)}."
        )
    return None


def _step_problem(layer, ref, steps, step, cache, ref_cache, where) -> str | None:
    x = steps[step]
    cached_before = None if cache is None else len(cache)
    kwargs = {} if cache is None else {"cache": cache}
    result, problem = call_learner(layer, x.clone(), **kwargs)
    if problem:
        if problem == NOT_DONE:
            return problem
        batch, heads = x.shape[0], ref.num_heads
        if "KVCache.update" in problem and f"values ({batch}, {heads}," in problem:
            return (
                f"{where} you cache a rope key per head (values ({batch}, {heads}, ...)): the rope key is SHARED by "
                f"all heads, one (B, 1, T, {ref.qk_rope_head_dim}) tensor cached once and broadcast (expand) to the "
                "heads only when scoring: cache.update(latent, k_rope) with both of shape (B, 1, ...)."
            )
        return f"{where} forward {problem.removeprefix('your function ')}"
    pair, problem = _common._pair(result, "forward")
    if problem:
        return f"{where} {problem}"
    out, weights = pair
    with torch.no_grad():
        expected_out, expected_w = ref(x, is_causal=True, cache=ref_cache)
    if cache is not None:
        problem = _common._cache_growth_problem(
            cache, cached_before, x.shape[1], where, "latent_all, k_rope_all = cache.update(latent, k_rope)"
        )
        if problem:
            return problem
        problem = _cache_problem(cache, ref, x.shape[0], where)
        if problem:
            return problem
    if out.shape != expected_out.shape:
        want = tuple(expected_out.shape)
        return f"{where} out should have shape (B, L, hidden_dim) = {want}, got {_common._shape(out)}."
    if weights.shape != expected_w.shape:
        message = (
            f"{where} weights should have shape (B, num_heads, L, T) = {tuple(expected_w.shape)}, "
            f"got {_common._shape(weights)}"
        )
        if cache is not None and weights.shape[-1] == x.shape[1]:
            message += ": you attended over this step's tokens only; attend over everything cache.update returns"
        return message + "."
    if _common._close(out, expected_out) and _common._close(weights, expected_w):
        return None
    diagnosis = _diagnose(ref, steps, step, out)
    if diagnosis:
        return f"{where} {diagnosis}"
    if torch.isnan(out).any():
        return f"{where} out contains NaN: is a query row fully masked?"
    if _common._close(weights, expected_w):
        return (
            f"{where} the weights are right but out is not ({_common._worst(out, expected_out)}): check weights @ v "
            "(v from kv_b_proj, after k_nope), the head merge (transpose, then reshape) and self.o_proj."
        )
    return f"{where} right shapes, wrong numbers: {_common._worst(out, expected_out)} in out."


def _layer_problem(layer, ref: MultiHeadLatentAttention) -> str | None:
    """Check the DeepSeek parameter names and shapes, then copy ``ref``'s parameters in."""
    if not isinstance(layer, nn.Module):
        return f"your class should be an nn.Module (class ...(nn.Module)), got an instance of {type(layer).__name__}."
    missing = [n for n in _NAMES if not isinstance(getattr(layer, n, None), nn.Linear)]
    if missing:
        found = [n for n, m in layer.named_children() if isinstance(m, nn.Linear)]
        return (
            f"no nn.Linear attribute {', '.join(missing)}. Use DeepSeek's names: self.q_proj, "
            f"self.kv_a_proj_with_mqa, self.kv_b_proj, self.o_proj (found nn.Linear attributes {found})."
        )
    norm = getattr(layer, "kv_a_layernorm", None)
    if not isinstance(norm, nn.Module) or not isinstance(getattr(norm, "weight", None), torch.Tensor):
        return (
            "no self.kv_a_layernorm with a weight: the latent is normalised by an RMSNorm(kv_lora_rank) "
            "(ac.deepseek.latent_attention.RMSNorm, or nn.RMSNorm(kv_lora_rank, eps=1e-6))."
        )
    for n in (*_NAMES, "kv_a_layernorm"):
        mine, theirs = getattr(layer, n), getattr(ref, n)
        if mine.weight.shape != theirs.weight.shape:
            return (
                f"self.{n}.weight has shape {tuple(mine.weight.shape)}, expected {tuple(theirs.weight.shape)} "
                "(nn.Linear(in, out).weight is (out, in)). q_proj: hidden -> H·(nope + rope); kv_a_proj_with_mqa: "
                "hidden -> kv_lora_rank + rope; kv_b_proj: kv_lora_rank -> H·(nope + v); o_proj: H·v -> hidden."
            )
        if getattr(mine, "bias", None) is not None:
            return f"self.{n} has a bias; DeepSeek's projections have none: bias=False."
    eps = getattr(norm, "eps", None)
    if hasattr(norm, "eps") and eps is None:  # nn.RMSNorm(dim): the eps of the input's dtype, 2.2e-16 in float64
        return (
            "kv_a_layernorm has eps=None (nn.RMSNorm's default), so it uses torch.finfo(x.dtype).eps; DeepSeek's "
            "RMSNorm uses eps=1e-6: nn.RMSNorm(kv_lora_rank, eps=1e-6)."
        )
    if isinstance(eps, float) and abs(eps - 1e-6) > 1e-12:
        return f"kv_a_layernorm uses eps={eps:g}; DeepSeek's RMSNorm uses eps=1e-6."
    with torch.no_grad():
        for n in (*_NAMES, "kv_a_layernorm"):
            getattr(layer, n).weight.copy_(getattr(ref, n).weight.to(getattr(layer, n).weight.dtype))
    layer.to(_F64).eval()
    return None


def _config_problem(cls, config, seed: int, gen: torch.Generator) -> str | None:
    hidden, heads, rank, nope, rope, vdim, base = config
    dims = dict(kv_lora_rank=rank, qk_nope_head_dim=nope, qk_rope_head_dim=rope, v_head_dim=vdim)
    label = (
        f"{getattr(cls, '__name__', type(cls).__name__)}({hidden}, {heads}, "
        + ", ".join(f"{k}={v}" for k, v in dims.items())
        + f", rope_base={base:g})"
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        ref = MultiHeadLatentAttention(hidden, heads, **dims, rope_base=base, rope_interleave=True).to(_F64).eval()
        with torch.no_grad():  # RMSNorm weights of 1 would hide a skipped norm's weight
            ref.kv_a_layernorm.weight.uniform_(0.5, 1.5)
        layer, problem = call_learner(cls, hidden, heads, **dims, rope_base=base)
    if problem:
        return problem
    problem = _layer_problem(layer, ref)
    if problem:
        return f"[{label}] {problem}"
    x = torch.randn(2, _LENGTH, hidden, generator=gen, dtype=_F64)  # (B, T, hidden)
    problem = _step_problem(layer, ref, [x], 0, None, None, f"[{label}, full pass of {_LENGTH} tokens, no cache]")
    if problem:
        return problem
    steps = [x[:, :_PREFILL], *(x[:, t : t + 1] for t in range(_PREFILL, _LENGTH))]  # prefill, then 1 token each
    cache, ref_cache = KVCache(), KVCache()
    for step in range(len(steps)):
        if step == 0:
            where = f"[{label}, prefill of {_PREFILL} tokens into an empty cache]"
        else:
            position = _PREFILL + step - 1
            where = f"[{label}, decode step {step}: 1 new token at position {position}, {position} already cached]"
        problem = _step_problem(layer, ref, steps, step, cache, ref_cache, where)
        if problem:
            return problem
    return None


@never_raises("check_mla")
def check_mla(cls) -> bool:
    """``cls(hidden_dim, num_heads, *, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
    rope_base=10000.0)``: naive MLA with a latent KV cache (see the module docstring for the spec).

    Graded in float64 against ``ac.MultiHeadLatentAttention`` with the same parameters on two configurations:
    one full causal pass, then a prefill of 3 tokens and 3 one-token decode steps through an ``ac.KVCache``.
    """
    name = "check_mla"
    if is_stub(cls):
        return feedback(name, NOT_DONE)
    gen = torch.Generator().manual_seed(13)
    for seed, config in enumerate(_CONFIGS):
        problem = _config_problem(cls, config, seed, gen)
        if problem:
            return feedback(name, problem)
    return feedback(name, None)
