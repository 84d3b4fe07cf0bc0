"""Checks for notebook 04 (grouped-query attention).

Each ``check_…`` takes the learner's *function*, calls it on a few configurations and
prints one verdict through :func:`attn_core.exercises.feedback`. Wrong answers are
diagnosed by matching them against the usual mistakes (tiling with ``repeat`` instead of
``repeat_interleave``, dividing by the wrong number, forgetting a factor of the KV-cache
size, repeating weight rows instead of head blocks, ...). A check never raises.

One piece: the checks of notebook 04's exercises, each next to the reference it grades against and the mistakes it
names.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attn_core.exercises import NOT_DONE, as_int_list, as_number, call_learner, feedback, never_raises
from attn_core.layers import GroupedQueryAttention, MultiHeadAttention

__all__ = [
    "check_kv_head_map",
    "check_expand_kv",
    "check_kv_cache_bytes",
    "check_gqa_to_mha",
    "DTYPE_BYTES",
    "EXAMPLE_CONFIGS",
]

# Bytes per element of the ``torch_dtype`` strings found in Hugging Face config.json files.
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1}

# Configurations in the style of Hugging Face config.json (the fields that size a KV cache).
EXAMPLE_CONFIGS = {
    # meta-llama/Llama-2-70b-hf
    "Llama-2-70B": dict(
        hidden_size=8192, num_attention_heads=64, num_key_value_heads=8, num_hidden_layers=80, torch_dtype="float16"
    ),
    # mistralai/Mistral-7B-v0.1
    "Mistral-7B-v0.1": dict(
        hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, num_hidden_layers=32, torch_dtype="bfloat16"
    ),
    # a small multi-query model in float32
    "tiny-MQA-fp32": dict(
        hidden_size=512, num_attention_heads=8, num_key_value_heads=1, num_hidden_layers=6, torch_dtype="float32"
    ),
    # an older config with no num_key_value_heads field: plain multi-head attention
    "tiny-MHA-no-kv-field": dict(hidden_size=256, num_attention_heads=4, num_hidden_layers=2, torch_dtype="float32"),
    # google/gemma-7b: an explicit head_dim, and 16 heads x 256 = 4096 is wider than hidden_size 3072
    "Gemma-7B": dict(
        hidden_size=3072,
        num_attention_heads=16,
        num_key_value_heads=16,
        head_dim=256,
        num_hidden_layers=28,
        torch_dtype="bfloat16",
    ),
    # mistralai/Mistral-Nemo-Base-2407 (12B): head_dim 128, narrower than hidden_size / heads = 160
    "Mistral-NeMo-12B": dict(
        hidden_size=5120,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        num_hidden_layers=40,
        torch_dtype="bfloat16",
    ),
}


# --------------------------------------------------------------------------- exercise 1


@never_raises("check_kv_head_map")
def check_kv_head_map(fn: Callable) -> bool:
    """``fn(num_heads, num_kv_heads)`` must return, for each query head ``h``, the kv head it reads."""
    name = "check_kv_head_map"
    cases = [(8, 2), (6, 3), (12, 4), (8, 8), (8, 1)]
    for num_heads, num_kv_heads in cases:
        answer, error = call_learner(fn, num_heads, num_kv_heads)
        if error:
            return feedback(name, error)
        values = as_int_list(answer)
        where = f"for num_heads={num_heads}, num_kv_heads={num_kv_heads}"
        if values is None:
            got = f"a {answer.dtype} tensor" if isinstance(answer, torch.Tensor) else type(answer).__name__
            return feedback(name, f"{where} return a list of ints (one per query head), got {got}.")
        if len(values) != num_heads:
            return feedback(
                name, f"{where} expected {num_heads} entries (one per query head), got {len(values)}: {values}."
            )
        group = num_heads // num_kv_heads
        expected = [h // group for h in range(num_heads)]
        if values == expected:
            continue
        if values == [h % num_kv_heads for h in range(num_heads)]:
            return feedback(
                name,
                f"{where} you returned {values}: that is the tiling order of `repeat` (h % num_kv_heads). "
                f"Query heads that share a kv head are consecutive: h // (num_heads // num_kv_heads) "
                f"gives {expected}.",
            )
        if values == [h // num_kv_heads for h in range(num_heads)]:
            return feedback(
                name,
                f"{where} you returned {values}: you divided by num_kv_heads. Divide by the group size "
                f"num_heads // num_kv_heads = {group} to get {expected}.",
            )
        return feedback(name, f"{where} expected {expected}, got {values}.")
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 2


@never_raises("check_expand_kv")
def check_expand_kv(fn: Callable) -> bool:
    """``fn(kv, num_heads)``: kv ``(B, Hkv, L, D)`` -> ``(B, num_heads, L, D)``, head h = kv head h // (H/Hkv)."""
    name = "check_expand_kv"
    generator = torch.Generator().manual_seed(4)
    cases = [((2, 2, 3, 4), 8), ((1, 3, 2, 2), 6), ((1, 1, 3, 2), 4), ((2, 4, 2, 3), 4)]
    for shape, num_heads in cases:
        kv = torch.randn(shape, generator=generator, dtype=torch.float64)  # (B, Hkv, L, D)
        original = kv.clone()
        answer, error = call_learner(fn, kv, num_heads)
        if error:
            return feedback(name, error)
        where = f"for kv of shape {shape} and num_heads={num_heads}"
        if not isinstance(answer, torch.Tensor):
            return feedback(name, f"{where} return a tensor, got {type(answer).__name__}.")
        batch, num_kv_heads, length, dim = shape
        expected_shape = (batch, num_heads, length, dim)
        if tuple(answer.shape) != expected_shape:
            group = num_heads // num_kv_heads
            if tuple(answer.shape) == (batch, num_kv_heads * num_heads, length, dim):
                return feedback(
                    name,
                    f"{where} expected shape {expected_shape}, got {tuple(answer.shape)}: you repeated each of the "
                    f"{num_kv_heads} kv heads num_heads = {num_heads} times. Repeat each by the group size "
                    f"num_heads // num_kv_heads = {group}, so that {num_kv_heads} x {group} = {num_heads} heads.",
                )
            return feedback(
                name,
                f"{where} expected shape {expected_shape} (B, num_heads, L, D), got {tuple(answer.shape)}. "
                "Repeat along dim 1, the head axis.",
            )
        if not torch.equal(kv, original):
            return feedback(name, f"{where} your function changed its input kv in place; return a new tensor.")
        group = num_heads // num_kv_heads
        expected = kv.repeat_interleave(group, dim=1)  # (B, H, L, D)
        if torch.allclose(answer.to(expected.dtype), expected):
            continue
        if torch.allclose(answer.to(expected.dtype), kv.repeat(1, group, 1, 1)):
            order = [h % num_kv_heads for h in range(num_heads)]
            right = [h // group for h in range(num_heads)]
            return feedback(
                name,
                f"{where} your heads come in the tiling order of `repeat` (kv heads {order}). "
                f"Same shape, no error, wrong numbers: query head h must read kv head h // {group}, "
                f"i.e. kv heads {right}. Use repeat_interleave(group, dim=1).",
            )
        return feedback(
            name,
            f"{where} the shape is right but the numbers are not: output head h must be an exact copy "
            f"of kv head h // {group}.",
        )
    return feedback(name, None)


# --------------------------------------------------------------------------- exercise 3


def _kv_bytes(
    config: dict,
    seq_len: int,
    batch_size: int,
    *,
    heads_field: str = "num_key_value_heads",
    kv_factor: int = 2,
    layers: bool = True,
    bytes_per_element: bool = True,
    batch: bool = True,
    explicit_head_dim: bool = True,
) -> int:
    """KV-cache bytes of ``config``; the keyword switches build the usual wrong variants."""
    num_heads = config["num_attention_heads"]
    num_kv_heads = config.get(heads_field, num_heads) if heads_field != "num_attention_heads" else num_heads
    derived = config["hidden_size"] // num_heads  # the usual head width, when the config gives none
    head_dim = config.get("head_dim", derived) if explicit_head_dim else derived
    total = kv_factor * num_kv_heads * head_dim * seq_len
    total *= config["num_hidden_layers"] if layers else 1
    total *= DTYPE_BYTES[config["torch_dtype"]] if bytes_per_element else 1
    total *= batch_size if batch else 1
    return total


_DERIVED = dict(explicit_head_dim=False)  # head_dim = hidden_size // num_attention_heads, even when given
_KV_BYTES_MISTAKES = (
    (
        dict(heads_field="num_attention_heads"),
        "you used num_attention_heads: that is the MHA cache. Only the num_key_value_heads kv heads are cached.",
    ),
    (dict(kv_factor=1), "too small by 2: the cache holds keys AND values, two tensors per layer."),
    (dict(layers=False), "you counted one layer: every one of the num_hidden_layers layers has its own cache."),
    (
        dict(bytes_per_element=False),
        "you counted elements, not bytes: multiply by the size of torch_dtype (float16/bfloat16 = 2, float32 = 4).",
    ),
    (dict(batch=False), "you forgot batch_size: every sequence in the batch has its own cache."),
    (
        dict(),  # right apart from head_dim: matches() tries the derived head_dim
        "you computed head_dim as hidden_size // num_attention_heads, but this config states its own head_dim "
        "(Gemma-7B: 16 heads x 256 = 4096, not 3072). Use config.get('head_dim', hidden_size // num_attention_heads).",
    ),
)


@never_raises("check_kv_cache_bytes")
def check_kv_cache_bytes(fn: Callable) -> bool:
    """``fn(config, seq_len, batch_size)`` -> KV-cache bytes of a Hugging Face style config dict."""
    name = "check_kv_cache_bytes"
    cases = [
        (config_name, seq_len, batch) for config_name in EXAMPLE_CONFIGS for seq_len, batch in ((4096, 1), (100, 3))
    ]
    answers = {}
    for config_name, seq_len, batch in cases:
        config = dict(EXAMPLE_CONFIGS[config_name])
        answer, error = call_learner(fn, config, seq_len, batch)
        if error == NOT_DONE:
            return feedback(name, error)
        if error:
            if "num_key_value_heads" in error:
                error += (
                    " Older configs omit num_key_value_heads: then every query head has its own K/V, "
                    "so use config.get('num_key_value_heads', config['num_attention_heads'])."
                )
            return feedback(name, f"on {config_name}: {error}")
        number = as_number(answer)
        if number is None:
            return feedback(name, f"return a number of bytes (an int), got {type(answer).__name__}.")
        answers[(config_name, seq_len, batch)] = number
    wrong = [case for case, answer in answers.items() if answer != _kv_bytes(EXAMPLE_CONFIGS[case[0]], *case[1:])]
    if not wrong:
        return feedback(name, None)

    def matches(case, **variant) -> bool:  # the mistake, with or without head_dim also derived from hidden_size
        config, rest = EXAMPLE_CONFIGS[case[0]], case[1:]
        return answers[case] in (_kv_bytes(config, *rest, **variant), _kv_bytes(config, *rest, **variant, **_DERIVED))

    for variant, message in _KV_BYTES_MISTAKES:
        explained = [case for case in wrong if matches(case, **variant)]
        if len(explained) == len(wrong):
            config_name, seq_len, batch = wrong[0]
            return feedback(name, f"on {config_name} ({seq_len} tokens, batch {batch}): {message}")
    config_name, seq_len, batch = wrong[0]
    expected = _kv_bytes(EXAMPLE_CONFIGS[config_name], seq_len, batch)
    return feedback(
        name,
        f"on {config_name} with seq_len={seq_len}, batch_size={batch} expected {expected:,} bytes, "
        f"got {answers[wrong[0]]:,}. Bytes = 2 (K and V) x layers x kv heads x head_dim x tokens x batch "
        "x bytes per element, with head_dim = config.get('head_dim', hidden_size // num_attention_heads).",
    )


# --------------------------------------------------------------------------- exercise 4


def _kv_weight_diagnosis(role: str, weight: torch.Tensor, source: torch.Tensor, num_kv_heads: int, group: int) -> str:
    """Explain a wrong expanded k/v weight (rows = heads x head_dim) built from ``source``."""
    head_dim = source.shape[0] // num_kv_heads
    blocks = source.unflatten(0, (num_kv_heads, head_dim))  # (Hkv, d, ...)
    tiled = blocks.repeat(group, *([1] * (blocks.ndim - 1))).flatten(0, 1)  # heads in order 0,1,0,1
    rows = source.repeat_interleave(group, dim=0)  # each single row repeated
    if torch.allclose(weight, tiled):
        return (
            f"{role}: your head blocks come in the tiling order of `repeat` (kv heads 0,1,..,0,1,..). "
            f"MHA head h must copy kv head h // {group}: repeat each head's block of rows, consecutively."
        )
    if torch.allclose(weight, rows):
        return (
            f"{role}: you repeated each single row {group} times. A head is a block of {head_dim} rows: "
            f"view the rows as (num_kv_heads, head_dim, ...), repeat_interleave the head axis, flatten back."
        )
    return f"{role}: the numbers are wrong; MHA head h must be an exact copy of kv head h // {group}."


def _gqa_to_mha_problem(answer, reference: dict, num_heads: int, num_kv_heads: int, x, want) -> str | None:
    """What is wrong with the learner's MultiHeadAttention ``answer``, or None."""
    hidden_dim = x.shape[-1]
    if not isinstance(answer, MultiHeadAttention):
        return f"return an ac.MultiHeadAttention (num_kv_heads == num_heads), got {type(answer).__name__}."
    if answer.num_heads != num_heads or answer.hidden_dim != hidden_dim:
        return (
            f"expected MultiHeadAttention({hidden_dim}, {num_heads}), got "
            f"MultiHeadAttention({answer.hidden_dim}, {answer.num_heads})."
        )
    if any(getattr(answer, role).bias is None for role in ("q_proj", "k_proj", "v_proj", "o_proj")):
        return "the GQA layer has biases: build the MultiHeadAttention with bias=True (the default) and copy them."
    group = num_heads // num_kv_heads
    for role in ("q_proj", "o_proj"):
        got = getattr(answer, role)
        if not (
            torch.allclose(got.weight.detach().float(), reference[f"{role}.weight"])
            and torch.allclose(got.bias.detach().float(), reference[f"{role}.bias"])
        ):
            return f"{role} must be copied unchanged from the GQA layer (weight and bias)."
    for role in ("k_proj", "v_proj"):
        got = getattr(answer, role)
        source_w, source_b = reference[f"{role}.weight"], reference[f"{role}.bias"]  # (Hkv*d, hidden), (Hkv*d,)
        head_dim = source_w.shape[0] // num_kv_heads
        want_w = source_w.unflatten(0, (num_kv_heads, head_dim)).repeat_interleave(group, 0).flatten(0, 1)
        want_b = source_b.unflatten(0, (num_kv_heads, head_dim)).repeat_interleave(group, 0).flatten(0, 1)
        weight, bias = got.weight.detach().float(), got.bias.detach().float()  # (H*d, hidden), (H*d,)
        if not torch.allclose(weight, want_w):
            return _kv_weight_diagnosis(f"{role}.weight", weight, source_w, num_kv_heads, group)
        if not torch.allclose(bias, want_b):
            return (
                f"{role}.weight is right but {role}.bias is not. The bias has one entry per weight row: "
                "expand it exactly like the rows (view it as (num_kv_heads, head_dim))."
            )
    with torch.no_grad():
        got_out, _ = answer(x.to(answer.q_proj.weight.dtype), is_causal=True)  # (B, L, hidden)
    if not torch.allclose(got_out.float(), want, atol=1e-5, rtol=1e-4):
        return "the weights look right but the outputs differ."
    return None


@never_raises("check_gqa_to_mha")
def check_gqa_to_mha(fn: Callable) -> bool:
    """``fn(gqa)`` -> an ``ac.MultiHeadAttention`` computing exactly what the GroupedQueryAttention ``gqa`` computes."""
    name = "check_gqa_to_mha"
    generator = torch.Generator().manual_seed(0)
    cases = [(16, 4, 2), (24, 6, 3), (16, 4, 1), (16, 4, 4)]
    # fork_rng: building layers draws from the global generator; leave the learner's stream alone.
    with torch.random.fork_rng(devices=[]):
        for hidden_dim, num_heads, num_kv_heads in cases:
            gqa = GroupedQueryAttention(hidden_dim, num_heads, num_kv_heads).eval()
            with torch.no_grad():
                for param in gqa.parameters():  # seeded without touching the global RNG
                    param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
            reference = {key: value.clone() for key, value in gqa.state_dict().items()}
            x = torch.randn(2, 5, hidden_dim, generator=generator)  # (B, L, hidden)
            with torch.no_grad():
                want, _ = gqa(x, is_causal=True)  # (B, L, hidden)
            where = f"for GroupedQueryAttention({hidden_dim}, {num_heads}, {num_kv_heads})"
            answer, error = call_learner(fn, gqa)
            if error:
                return feedback(name, error if error == NOT_DONE else f"{where}: {error}")
            try:
                problem = _gqa_to_mha_problem(answer, reference, num_heads, num_kv_heads, x, want)
            except Exception as err:  # a check never raises
                problem = f"could not run your layer ({type(err).__name__}: {err})."
            if problem:
                return feedback(name, f"{where}: {problem}")
    return feedback(name, None)
