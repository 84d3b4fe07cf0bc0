"""Check for notebook 16's archetypal question: multi-head attention + KV cache + RoPE from a blank cell.

``check_rope_mha(cls)`` grades ``cls(hidden_dim, num_heads, rope_base=10000.0)``: an ``nn.Module``
with ``q_proj/k_proj/v_proj/o_proj`` (``nn.Linear(hidden_dim, hidden_dim)``) and
``forward(x, cache=None) -> (out, weights)``, causal, with rotary position embeddings in the
rotate-half layout (pairs ``(i, i + head_dim/2)``, as Llama in Hugging Face and ``ac.apply_rope``).
``cache`` is ``None`` (one full pass, positions ``0..L-1``) or an :class:`attn_core.KVCache` whose
``len(cache)`` tokens are already cached: the new tokens sit at positions ``len(cache) ...``, and
the layer appends its rotated keys with ``cache.update(k, v)`` and attends over everything cached.

The check copies the parameters of an ``ac.MultiHeadAttention(..., rope_base=...)`` into the
learner's layer and compares, in float64, one full pass and then a prefill + three decode steps
with the reference driven the same way. A wrong answer is matched against the usual mistakes, each
replayed on the same inputs: V rotated too, positions restarting at 0 in every decode step, the
wrong pairing layout (interleaved vs rotate-half), keys cached unrotated and rotated at read time
with the new token's position, no RoPE / RoPE on q or k only, the rotation direction, the exponent
of the frequencies, ``rope_base`` ignored, and the usual layer mistakes (head split and merge,
V from ``k_proj``, scale, softmax dim, causal mask missing or aligned top-left, ``o_proj``).

One piece: one check, ``check_rope_mha``, with its configurations, reference replay and the RoPE mistakes it
recognises.
"""

from __future__ import annotations

import math

import torch

from attn_core import i18n
from attn_core.caches.kv_cache import KVCache
from attn_core.exercises import NOT_DONE, call_learner, feedback, is_stub, never_raises
from attn_core.exercises import handwrite_common as _common
from attn_core.layers import GroupedQueryAttention
from attn_core.masks import causal_mask

__all__ = ["check_rope_mha"]

_F64 = torch.float64
_PREFILL = 3  # tokens in the prefill; then one decode step per remaining token
_LENGTH = 6  # tokens per sequence (batch of 2)
# (hidden_dim, num_heads, rope_base): head_dim 8 both times; base 100 makes a rope_base that is ignored visible.
_CONFIGS = ((16, 2, 10000.0), (24, 3, 100.0))


def _rope(x: torch.Tensor, positions: torch.Tensor, base: float, *, layout="half", sign=1, exponent=2) -> torch.Tensor:
    """Rotate ``x (..., L, D)``: pair i turns by ``position · base^(-exponent·i/D)`` (float64 angles).

    The right rotation is ``layout="half", sign=1, exponent=2``; the other settings replay mistakes.
    """
    half = x.shape[-1] // 2
    inv_freq = base ** (-exponent * torch.arange(half, dtype=_F64) / x.shape[-1])  # (D/2,)
    angles = positions.to(_F64).unsqueeze(-1) * inv_freq  # (L, D/2)
    cos, sin = angles.cos().to(x.dtype), (sign * angles.sin()).to(x.dtype)  # (L, D/2) each
    if layout == "half":  # pairs (i, i + D/2)
        x1, x2 = x[..., :half], x[..., half:]  # (..., L, D/2) each
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)  # (..., L, D)
    x1, x2 = x[..., 0::2], x[..., 1::2]  # pairs (2i, 2i+1), (..., L, D/2) each
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)  # (..., L, D)


@torch.no_grad()
def _simulate(ref: GroupedQueryAttention, steps: list[torch.Tensor], base: float, **mistake) -> list[tuple]:
    """Run ``steps`` (a full pass is one step) through the reference weights, with one mistake switched on.

    Returns ``[(out (B, L, hidden), weights (B, H, L, T)), ...]``, one pair per step.
    """
    heads, head_dim = ref.num_heads, ref.head_dim
    rope = mistake.get("rope", "qk")  # which of q, k, v get rotated
    angle_base = 10000.0 if mistake.get("rope_base") == "ignored" else base

    def rotate(t, positions):
        return _rope(
            t, positions, angle_base, layout=mistake.get("layout", "half"), sign=mistake.get("sign", 1),
            exponent=mistake.get("exponent", 2),
        )  # fmt: skip

    keys = values = None  # (B, H, T, head_dim): what the cache holds
    results = []
    for x in steps:
        batch, length, hidden = x.shape

        def to_heads(t, batch=batch, length=length):  # (B, L, hidden) -> (B, H, L, head_dim)
            if mistake.get("split") == "reshape":
                return t.reshape(batch, heads, length, head_dim)
            return t.view(batch, length, heads, head_dim).transpose(1, 2)

        q = to_heads(ref.q_proj(x))  # (B, H, L, hd)
        k = to_heads(ref.k_proj(x))  # (B, H, L, hd)
        v = to_heads((ref.k_proj if mistake.get("value") == "k" else ref.v_proj)(x))  # (B, H, L, hd)
        offset = 0 if keys is None else keys.shape[-2]
        start = 0 if mistake.get("positions") == "restart" else offset
        positions = torch.arange(start, start + length)  # (L,)
        if "q" in rope:
            q = rotate(q, positions)  # (B, H, L, hd)
        if "k" in rope and not mistake.get("after_cache"):
            k = rotate(k, positions)  # (B, H, L, hd)
        if "v" in rope:
            v = rotate(v, positions)  # (B, H, L, hd)
        keys = k if keys is None else torch.cat((keys, k), dim=-2)  # (B, H, T, hd)
        values = v if values is None else torch.cat((values, v), dim=-2)  # (B, H, T, hd)
        seen = rotate(keys, positions) if mistake.get("after_cache") else keys  # (B, H, T, hd)
        total = seen.shape[-2]
        scale = {"hidden": 1 / math.sqrt(hidden), "none": 1.0}.get(mistake.get("scale"), 1 / math.sqrt(head_dim))
        scores = q @ seen.transpose(-2, -1) * scale  # (B, H, L, T)
        mask = {
            "none": None,
            "top_left": torch.ones(length, total, dtype=torch.bool).tril(),  # (L, T)
        }.get(mistake.get("mask"), causal_mask(length, total))  # (L, T), bottom-right
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))  # (B, H, L, T)
        weights = scores.softmax(dim=mistake.get("softmax_dim", -1))  # (B, H, L, T)
        out = weights @ values  # (B, H, L, hd)
        if mistake.get("merge") == "reshape":
            out = out.reshape(batch, length, hidden)  # (B, L, hidden)
        else:
            out = out.transpose(1, 2).reshape(batch, length, hidden)  # (B, L, hidden)
        if mistake.get("o_proj") != "missing":
            out = ref.o_proj(out)  # (B, L, hidden)
        results.append((out, weights))
    return results


_ROTATE_HALF = "rotate_half(x) = torch.cat((-x2, x1), dim=-1) with x1, x2 = x[..., :D/2], x[..., D/2:]"
_SUSPECTS = [
    (
        dict(rope="qkv"),
        "you rotated V as well: RoPE goes on q and k only. The rotation exists to make the scores q·k depend on "
        "the distance m - n; rotating the values just scrambles what each token contributes. Leave v as v_proj(x).",
    ),
    (
        dict(positions="restart"),
        "the positions restart at 0 in every call: in a decode step the new token must sit at position "
        "len(cache) (the tokens already cached), not 0. Take offset = len(cache) BEFORE cache.update and rotate "
        "with positions offset .. offset + L - 1.",
    ),
    (
        dict(after_cache=True),
        "rotated after caching: your cache holds unrotated keys and you rotate ALL cached keys at read time "
        "with the new token's position, so every key gets the same angle and the relative positions vanish. "
        "Rotate k with its own positions before cache.update(k, v); cached keys are final.",
    ),
    (
        dict(layout="interleaved"),
        "wrong pairing layout: you rotate the pairs (2i, 2i+1) (interleaved, the RoFormer / Meta-original / "
        "Llama-GGUF "
        "layout); this layer, like Llama in Hugging Face, rotates the pairs (i, i + head_dim/2): "
        f"{_ROTATE_HALF}. The two layouts differ by a permutation of q/k features, and a checkpoint fixes which one.",
    ),
    (dict(rope=""), "no rotary embedding at all: rotate q and k by their positions before the scores."),
    (dict(rope="q"), "only q is rotated: rotate k as well (with the keys' own positions)."),
    (dict(rope="k"), "only k is rotated: rotate q as well (with the queries' positions)."),
    (
        dict(sign=-1),
        f"the rotation turns the wrong way (sin with the wrong sign): {_ROTATE_HALF}, and "
        "x_rotated = x * cos + rotate_half(x) * sin.",
    ),
    (
        dict(exponent=1),
        "the frequencies use base^(-i/head_dim); pair i turns at base^(-2i/head_dim), i = 0 .. head_dim/2 - 1 "
        "(in code: 1 / base ** (torch.arange(0, head_dim, 2) / head_dim)).",
    ),
    (dict(rope_base="ignored"), "the angles use base 10000 whatever rope_base says: use self.rope_base."),
    (
        dict(split="reshape"),
        "wrong head split: reshape(B, H, L, head_dim) cuts the *sequence* into heads. "
        "view(B, L, H, head_dim).transpose(1, 2).",
    ),
    (dict(merge="reshape"), f"heads merged without the transpose: {_common._MERGE_FIX}."),
    (dict(value="k"), "V comes from k_proj: use self.v_proj(x) for the values."),
    (dict(o_proj="missing"), "the output projection is missing: return self.o_proj(merged heads)."),
    (dict(scale="hidden"), "scores scaled by √hidden_dim; the scale is per head: 1/√head_dim."),
    (dict(scale="none"), "the 1/√head_dim scale is missing."),
    (dict(softmax_dim=-2), "softmax over the wrong dim (-2, the queries): normalise over the keys, dim=-1."),
    (
        dict(mask="none"),
        "no causal mask: in a pass over several tokens each token may see itself and the EARLIER ones only. "
        "Mask the scores with a causal mask (L, T), aligned bottom-right.",
    ),
    (
        dict(mask="top_left"),
        "the causal mask is aligned top-left: with a cache the L new queries are the LAST L of T tokens, so "
        "query i sees keys 0 .. i + (T - L): torch.ones(L, T, dtype=torch.bool).tril(diagonal=T - L).",
    ),
]


def _reference_steps(ref: GroupedQueryAttention, steps: list[torch.Tensor], cache: KVCache | None) -> list[tuple]:
    """``ac``'s layer driven like the learner's: causal, through ``cache`` when one is given."""
    with torch.no_grad():
        return [ref(x, is_causal=True, cache=cache) for x in steps]


def _diagnose(ref, steps, step: int, out: torch.Tensor, base: float) -> str | None:
    """The first suspect whose replay gives ``out`` at ``steps[step]`` (earlier steps matched the reference)."""
    out = out.detach().to(_F64)
    for mistake, diagnosis in _SUSPECTS:
        if mistake.get("rope_base") == "ignored" and base == 10000.0:
            continue
        try:
            replay = _simulate(ref, steps[: step + 1], base, **mistake)[step][0]  # (B, L, hidden)
        except RuntimeError:  # a mistake that cannot even run on these shapes is not the learner's
            continue
        if _common._close(out, replay):
            return diagnosis
    return None


def _step_problem(layer, ref, steps, step, cache, ref_cache, base, where) -> str | None:
    """Run the learner's ``layer`` on ``steps[step]`` and compare with the reference's next step."""
    x = steps[step]
    cached_before = None if cache is None else len(cache)
    kwargs = {} if cache is None else {"cache": cache}
    result, problem = call_learner(layer, x.clone(), **kwargs)
    if problem:
        if problem == NOT_DONE:
            return problem
        return f"{where} forward {problem.removeprefix('your function ')}"
    pair, problem = _common._pair(result, "forward")
    if problem:
        return f"{where} {problem}"
    out, weights = pair
    expected_out, expected_w = _reference_steps(ref, [x], ref_cache)[0]
    if cache is not None:
        problem = _common._cache_growth_problem(
            cache, cached_before, x.shape[1], where, "k_all, v_all = cache.update(k, v), then attend over k_all, v_all"
        )
        if problem:
            return problem
    if out.shape != expected_out.shape:
        want = tuple(expected_out.shape)
        return f"{where} out should have shape (B, L, hidden_dim) = {want}, got {_common._shape(out)}."
    if weights.shape != expected_w.shape:
        want = tuple(expected_w.shape)
        message = f"{where} weights should have shape (B, num_heads, L, T) = {want}, got {_common._shape(weights)}"
        if cache is not None and weights.shape[-1] == x.shape[1]:
            message += (
                ": you attended over this step's keys only. Attend over everything cached: "
                "k_all, v_all = cache.update(k, v)"
            )
        return message + "."
    if _common._close(out, expected_out) and _common._close(weights, expected_w):
        return None
    if cache is None and _common._is_random(layer, (x,), {}):
        return f"{where} {_common._DROPOUT_ON}"
    diagnosis = _diagnose(ref, steps, step, out, base)
    if diagnosis:
        return f"{where} {diagnosis}"
    if torch.isnan(out).any():
        return f"{where} out contains NaN: is a query row fully masked?"
    if _common._close(weights, expected_w):
        return (
            f"{where} the weights are right but out is not ({_common._worst(out, expected_out)}): the mistake comes "
            f"after the softmax. Check weights @ v (v never rotated), the merge and self.o_proj."
        )
    return f"{where} right shapes, wrong numbers: {_common._worst(out, expected_out)} in out."


def _config_problem(
    cls, hidden: int, heads: int, base: float, seed: int, gen: torch.Generator
) -> tuple[str | None, str]:
    label = f"{getattr(cls, '__name__', type(cls).__name__)}({hidden}, {heads}, rope_base={base:g})"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        ref = GroupedQueryAttention(hidden, heads, heads, rope_base=base).to(_F64).eval()
        layer, problem = call_learner(cls, hidden, heads, rope_base=base)
    if problem:
        return problem, ""
    problem = _common._layer_problem(layer, ref)
    if problem:
        return f"[{label}] {problem}", ""
    x = torch.randn(2, _LENGTH, hidden, generator=gen, dtype=_F64)  # (B, T, hidden)
    # 1 · one full causal pass, no cache: positions 0 .. T-1
    where = f"[{label}, full pass of {_LENGTH} tokens, no cache]"
    problem = _step_problem(layer, ref, [x], 0, None, None, base, where)
    if problem:
        return problem, ""
    # 2 · prefill, then one token at a time through a cache
    decode = [x[:, t : t + 1] for t in range(_PREFILL, _LENGTH)]  # 3 × (B, 1, hidden)
    steps = [x[:, :_PREFILL], *decode]  # (B, 3, hidden), then one token per step
    cache, ref_cache = KVCache(), KVCache()
    for step in range(len(steps)):
        if step == 0:
            where = f"[{label}, prefill of {_PREFILL} tokens into an empty cache]"
        else:
            position = _PREFILL + step - 1
            where = f"[{label}, decode step {step}: 1 new token at position {position}, {position} already cached]"
        problem = _step_problem(layer, ref, steps, step, cache, ref_cache, base, where)
        if problem:
            return problem, ""
    note = ""
    if not torch.allclose(cache.keys.to(_F64), ref_cache.keys, rtol=_common._RTOL, atol=1e-7):
        note = (
            "note: your cache holds UNROTATED keys and you rotate all of them again at every step. Right "
            "numbers, but O(T) extra work per token, and a cache other code cannot share: rotate k before "
            "cache.update, as Llama does."
        )
    return None, note


@never_raises("check_rope_mha")
def check_rope_mha(cls) -> bool:
    """``cls(hidden_dim, num_heads, rope_base=10000.0)``: multi-head attention with RoPE and a KV cache.

    ``q_proj/k_proj/v_proj/o_proj`` are ``nn.Linear(hidden_dim, hidden_dim)``;
    ``forward(x, cache=None) -> (out (B, L, hidden_dim), weights (B, num_heads, L, T))``, causal, q and k
    rotated in the rotate-half layout by their positions (``len(cache)`` onwards when a cache is given).
    Graded in float64 against ``ac.MultiHeadAttention(..., rope_base=...)`` with the same parameters: one
    full pass, then a prefill of 3 tokens and 3 decode steps through an ``ac.KVCache``.
    """
    name = "check_rope_mha"
    if is_stub(cls):
        return feedback(name, NOT_DONE)
    gen = torch.Generator().manual_seed(11)
    notes = []
    for seed, (hidden, heads, base) in enumerate(_CONFIGS):
        problem, note = _config_problem(cls, hidden, heads, base, seed, gen)
        if problem:
            return feedback(name, problem)
        if note and note not in notes:
            notes.append(note)
    ok = feedback(name, None)
    for note in notes:
        print("   " + i18n.localize(note))  # not a verdict: translated here (ac.set_language("zh"))
    return ok
