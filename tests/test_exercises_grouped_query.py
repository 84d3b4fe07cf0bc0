"""The notebook 04 checkers accept right answers and diagnose the usual wrong ones."""

import numpy as np
import pytest
import torch
from learner_answers import JUNK, one_red_line

import attn_core as ac
from attn_core.exercises.grouped_query import (
    EXAMPLE_CONFIGS,
    check_expand_kv,
    check_gqa_to_mha,
    check_kv_cache_bytes,
    check_kv_head_map,
)

# ----------------------------------------------------------------------------- helpers


def stub(*args):
    """What a learner's untouched stub returns."""
    ...


def raises_not_implemented(*args):
    raise NotImplementedError


def verdict(capsys, check, answer) -> tuple[bool, str]:
    ok = check(answer)
    return ok, capsys.readouterr().out


# ----------------------------------------------------------------------------- check_kv_head_map


def test_kv_head_map_accepts_right_answer_as_list_or_tensor(capsys):
    ok, out = verdict(capsys, check_kv_head_map, lambda h, g: [i // (h // g) for i in range(h)])
    assert ok and "✅" in out
    ok, _ = verdict(capsys, check_kv_head_map, lambda h, g: torch.arange(h) // (h // g))
    assert ok


def test_kv_head_map_stub_is_not_attempted(capsys):
    for answer in (stub, raises_not_implemented, None):
        ok, out = verdict(capsys, check_kv_head_map, answer)
        assert not ok and "not attempted" in out


def test_kv_head_map_diagnoses_tiling_order(capsys):
    ok, out = verdict(capsys, check_kv_head_map, lambda h, g: [i % g for i in range(h)])
    assert not ok and "tiling order of `repeat`" in out and "[0, 0, 0, 0, 1, 1, 1, 1]" in out


def test_kv_head_map_diagnoses_dividing_by_num_kv_heads(capsys):
    ok, out = verdict(capsys, check_kv_head_map, lambda h, g: [i // g for i in range(h)])
    assert not ok and "divided by num_kv_heads" in out


def test_kv_head_map_diagnoses_wrong_length_and_errors(capsys):
    ok, out = verdict(capsys, check_kv_head_map, lambda h, g: list(range(g)))
    assert not ok and "expected 8 entries" in out
    ok, out = verdict(capsys, check_kv_head_map, lambda h, g: 1 / 0)
    assert not ok and "ZeroDivisionError" in out


# ----------------------------------------------------------------------------- check_expand_kv


def test_expand_kv_accepts_repeat_interleave_and_expand(capsys):
    ok, out = verdict(capsys, check_expand_kv, lambda kv, h: kv.repeat_interleave(h // kv.shape[1], dim=1))
    assert ok and "✅" in out

    def hf_style(kv, num_heads):  # Hugging Face's repeat_kv: expand a new axis, then flatten
        b, g, length, d = kv.shape
        return kv[:, :, None].expand(b, g, num_heads // g, length, d).reshape(b, num_heads, length, d)

    ok, _ = verdict(capsys, check_expand_kv, hf_style)
    assert ok


def test_expand_kv_catches_the_silent_repeat_bug(capsys):
    ok, out = verdict(capsys, check_expand_kv, lambda kv, h: kv.repeat(1, h // kv.shape[1], 1, 1))
    assert not ok
    assert "tiling order of `repeat`" in out and "kv heads [0, 1, 0, 1, 0, 1, 0, 1]" in out
    assert "repeat_interleave" in out


def test_expand_kv_diagnoses_wrong_axis_shape(capsys):
    ok, out = verdict(capsys, check_expand_kv, lambda kv, h: kv.repeat_interleave(h // kv.shape[1], dim=2))
    assert not ok and "expected shape (2, 8, 3, 4)" in out


def test_expand_kv_diagnoses_wrong_numbers_and_stub(capsys):
    ok, out = verdict(capsys, check_expand_kv, lambda kv, h: torch.zeros(kv.shape[0], h, *kv.shape[2:]))
    assert not ok and "shape is right but the numbers are not" in out
    ok, out = verdict(capsys, check_expand_kv, stub)
    assert not ok and "not attempted" in out


# ----------------------------------------------------------------------------- check_kv_cache_bytes

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def kv_bytes(config, seq_len, batch_size, *, heads=None, kv=2, layers=True, elem=True, batch=True, own_head_dim=True):
    num_heads = config["num_attention_heads"]
    num_kv_heads = config.get("num_key_value_heads", num_heads) if heads is None else config[heads]
    derived = config["hidden_size"] // num_heads  # the head width when the config gives none
    head_dim = config.get("head_dim", derived) if own_head_dim else derived
    total = kv * num_kv_heads * head_dim * seq_len
    total *= config["num_hidden_layers"] if layers else 1
    total *= DTYPE_BYTES[config["torch_dtype"]] if elem else 1
    return total * (batch_size if batch else 1)


def test_kv_cache_bytes_accepts_right_answer(capsys):
    ok, out = verdict(capsys, check_kv_cache_bytes, kv_bytes)
    assert ok and "✅" in out
    # Llama-2-70B, fp16, 4096 tokens: 1.25 GiB per sequence
    assert kv_bytes(EXAMPLE_CONFIGS["Llama-2-70B"], 4096, 1) == 1_342_177_280
    # Gemma-7B states head_dim = 256: 2 x 28 layers x 16 kv heads x 256 x 2 bytes = 458,752 bytes per token
    assert kv_bytes(EXAMPLE_CONFIGS["Gemma-7B"], 1, 1) == 458_752
    # Mistral-NeMo-12B: head_dim 128 (not 5120 / 32 = 160): 2 x 40 x 8 x 128 x 2 = 163,840 bytes per token
    assert kv_bytes(EXAMPLE_CONFIGS["Mistral-NeMo-12B"], 1, 1) == 163_840


def test_kv_cache_bytes_diagnoses_each_usual_mistake(capsys):
    mistakes = {
        "num_attention_heads": lambda c, s, b: kv_bytes(c, s, b, heads="num_attention_heads"),
        "keys AND values": lambda c, s, b: kv_bytes(c, s, b, kv=1),
        "you counted one layer": lambda c, s, b: kv_bytes(c, s, b, layers=False),
        "counted elements, not bytes": lambda c, s, b: kv_bytes(c, s, b, elem=False),
        "forgot batch_size": lambda c, s, b: kv_bytes(c, s, b, batch=False),
    }
    for expected_text, answer in mistakes.items():
        ok, out = verdict(capsys, check_kv_cache_bytes, answer)
        assert not ok and expected_text in out, (expected_text, out)


def test_kv_cache_bytes_missing_field_and_stub(capsys):
    def strict(config, seq_len, batch_size):
        return kv_bytes(config, seq_len, batch_size, heads="num_key_value_heads")

    ok, out = verdict(capsys, check_kv_cache_bytes, strict)
    assert not ok and "KeyError" in out and "Older configs omit num_key_value_heads" in out
    ok, out = verdict(capsys, check_kv_cache_bytes, stub)
    assert not ok and "not attempted" in out


def test_kv_cache_bytes_unrecognised_mistake_gets_the_formula(capsys):
    ok, out = verdict(capsys, check_kv_cache_bytes, lambda c, s, b: kv_bytes(c, s, b) + 1)
    assert not ok and "expected" in out and "2 (K and V)" in out


# ----------------------------------------------------------------------------- check_gqa_to_mha


def expand_rows(weight, num_kv_heads, group, order="interleave"):
    blocks = weight.unflatten(0, (num_kv_heads, -1))  # (Hkv, d, ...)
    if order == "interleave":
        blocks = blocks.repeat_interleave(group, dim=0)
    else:
        blocks = blocks.repeat(group, *([1] * (blocks.ndim - 1)))
    return blocks.flatten(0, 1)


def convert(gqa, order="interleave", rows=False, bias=True):
    group = gqa.num_heads // gqa.num_kv_heads
    mha = ac.MultiHeadAttention(gqa.hidden_dim, gqa.num_heads)
    with torch.no_grad():
        mha.q_proj.load_state_dict(gqa.q_proj.state_dict())
        mha.o_proj.load_state_dict(gqa.o_proj.state_dict())
        for role in ("k_proj", "v_proj"):
            src, dst = getattr(gqa, role), getattr(mha, role)
            if rows:
                dst.weight.copy_(src.weight.repeat_interleave(group, dim=0))
            else:
                dst.weight.copy_(expand_rows(src.weight, gqa.num_kv_heads, group, order))
            if bias:
                dst.bias.copy_(expand_rows(src.bias, gqa.num_kv_heads, group, order))
    return mha


def test_gqa_to_mha_accepts_right_answer(capsys):
    ok, out = verdict(capsys, check_gqa_to_mha, convert)
    assert ok and "✅" in out


def test_gqa_to_mha_diagnoses_tiled_heads(capsys):
    ok, out = verdict(capsys, check_gqa_to_mha, lambda g: convert(g, order="tile"))
    assert not ok and "k_proj.weight" in out and "tiling order of `repeat`" in out


def test_gqa_to_mha_diagnoses_rows_repeated_one_by_one(capsys):
    ok, out = verdict(capsys, check_gqa_to_mha, lambda g: convert(g, rows=True))
    assert not ok and "repeated each single row" in out


def test_gqa_to_mha_diagnoses_forgotten_bias(capsys):
    ok, out = verdict(capsys, check_gqa_to_mha, lambda g: convert(g, bias=False))
    assert not ok and "k_proj.bias is not" in out


def test_gqa_to_mha_diagnoses_wrong_type_and_uncopied_q(capsys):
    ok, out = verdict(capsys, check_gqa_to_mha, lambda g: g)
    assert not ok and "return an ac.MultiHeadAttention" in out
    ok, out = verdict(capsys, check_gqa_to_mha, lambda g: ac.MultiHeadAttention(g.hidden_dim, g.num_heads))
    assert not ok and "q_proj must be copied unchanged" in out
    ok, out = verdict(capsys, check_gqa_to_mha, stub)
    assert not ok and "not attempted" in out


def test_checks_leave_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_gqa_to_mha(convert)
    check_expand_kv(lambda kv, h: kv.repeat_interleave(h // kv.shape[1], dim=1))
    assert torch.equal(torch.rand(3), expected)


# ----------------------------------------------------------------------------- the ARENA-style tables
# For each checker: the stub fails, the reference passes, correct answers written differently pass,
# and each usual mistake gets its own diagnosis (a phrase that only that diagnosis contains).


def kv_map_loops(num_heads, num_kv_heads):
    group = num_heads // num_kv_heads
    return [g for g in range(num_kv_heads) for _ in range(group)]  # kv head g, group times


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (raises_not_implemented, False, "not attempted"),
        (lambda h, g: [i // (h // g) for i in range(h)], True, "✅"),
        (lambda h, g: torch.arange(h) // (h // g), True, "✅"),
        (lambda h, g: torch.arange(g).repeat_interleave(h // g), True, "✅"),
        (kv_map_loops, True, "✅"),
        (lambda h, g: tuple(i * g // h for i in range(h)), True, "✅"),
        (lambda h, g: np.arange(h) // (h // g), True, "✅"),  # a numpy array of int64
        (lambda h, g: [i % g for i in range(h)], False, "tiling order of `repeat`"),
        (lambda h, g: [i // g for i in range(h)], False, "divided by num_kv_heads"),
        (lambda h, g: list(range(g)), False, "one per query head"),
    ],
)
def test_kv_head_map_table(capsys, answer, passes, phrase):
    ok, out = verdict(capsys, check_kv_head_map, answer)
    assert ok is passes and phrase in out, out


def expand_index_select(kv, num_heads):
    index = torch.arange(num_heads) // (num_heads // kv.shape[1])  # kv head of each query head
    return kv.index_select(1, index)  # (B, H, L, D)


def expand_cat(kv, num_heads):
    group = num_heads // kv.shape[1]
    return torch.cat([head.unsqueeze(1) for head in kv.unbind(1) for _ in range(group)], dim=1)  # (B, H, L, D)


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (stub, False, "not attempted"),
        (lambda kv, h: kv.repeat_interleave(h // kv.shape[1], dim=1), True, "✅"),
        (lambda kv, h: kv[:, :, None].expand(-1, -1, h // kv.shape[1], -1, -1).flatten(1, 2), True, "✅"),
        (expand_index_select, True, "✅"),
        (expand_cat, True, "✅"),
        (lambda kv, h: kv.repeat(1, h // kv.shape[1], 1, 1), False, "tiling order of `repeat`"),
        (lambda kv, h: kv.repeat_interleave(h, dim=1), False, "repeated each of the 2 kv heads num_heads = 8 times"),
        (lambda kv, h: kv.repeat_interleave(h // kv.shape[1], dim=2), False, "Repeat along dim 1"),
    ],
)
def test_expand_kv_table(capsys, answer, passes, phrase):
    ok, out = verdict(capsys, check_expand_kv, answer)
    assert ok is passes and phrase in out, out


def kv_bytes_per_layer_loop(config, seq_len, batch_size):
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    per_layer = 2 * config.get("num_key_value_heads", heads) * head_dim * DTYPE_BYTES[config["torch_dtype"]]
    return sum(per_layer * seq_len * batch_size for _ in range(config["num_hidden_layers"]))


def kv_bytes_with_torch(config, seq_len, batch_size):
    heads = config["num_attention_heads"]
    dtype = getattr(torch, config["torch_dtype"])
    head_dim = config["head_dim"] if "head_dim" in config else config["hidden_size"] // heads
    shape = (2, config["num_hidden_layers"], batch_size, config.get("num_key_value_heads", heads), seq_len, head_dim)
    return torch.empty(shape, dtype=dtype, device="meta").nbytes  # the cache's size without allocating it


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (stub, False, "not attempted"),
        (kv_bytes, True, "✅"),
        (kv_bytes_per_layer_loop, True, "✅"),
        (kv_bytes_with_torch, True, "✅"),
        (lambda c, s, b: float(kv_bytes(c, s, b)), True, "✅"),
        (lambda c, s, b: np.prod([kv_bytes(c, 1, 1), s, b]), True, "✅"),  # a numpy.int64
        (lambda c, s, b: kv_bytes(c, s, b, own_head_dim=False), False, "this config states its own head_dim"),
        (lambda c, s, b: kv_bytes(c, s, b, kv=1, own_head_dim=False), False, "keys AND values"),
        (lambda c, s, b: kv_bytes(c, s, b, heads="num_attention_heads"), False, "that is the MHA cache"),
        (lambda c, s, b: kv_bytes(c, s, b, elem=False), False, "counted elements, not bytes"),
    ],
)
def test_kv_cache_bytes_table(capsys, answer, passes, phrase):
    ok, out = verdict(capsys, check_kv_cache_bytes, answer)
    assert ok is passes and phrase in out, out


def convert_state_dict(gqa):
    group = gqa.num_heads // gqa.num_kv_heads
    state = gqa.state_dict()
    for role in ("k_proj", "v_proj"):
        for part in ("weight", "bias"):
            key = f"{role}.{part}"
            state[key] = state[key].unflatten(0, (gqa.num_kv_heads, -1)).repeat_interleave(group, 0).flatten(0, 1)
    mha = ac.MultiHeadAttention(gqa.hidden_dim, gqa.num_heads)
    mha.load_state_dict(state)
    return mha


def convert_float64(gqa):
    return convert(gqa).double()  # the checker casts x to the layer's dtype


def convert_index(gqa):
    mha = ac.MultiHeadAttention(gqa.hidden_dim, gqa.num_heads)
    head_dim, group = gqa.head_dim, gqa.num_heads // gqa.num_kv_heads
    rows = torch.arange(gqa.num_heads * head_dim)  # MHA rows (head h, feature i) = h * head_dim + i
    source_rows = rows // head_dim // group * head_dim + rows % head_dim  # kv head h // group, same feature
    with torch.no_grad():
        mha.q_proj.load_state_dict(gqa.q_proj.state_dict())
        mha.o_proj.load_state_dict(gqa.o_proj.state_dict())
        for role in ("k_proj", "v_proj"):
            getattr(mha, role).weight.copy_(getattr(gqa, role).weight[source_rows])
            getattr(mha, role).bias.copy_(getattr(gqa, role).bias[source_rows])
    return mha


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (stub, False, "not attempted"),
        (convert, True, "✅"),
        (convert_state_dict, True, "✅"),
        (convert_float64, True, "✅"),
        (convert_index, True, "✅"),
        (lambda g: convert(g, order="tile"), False, "tiling order of `repeat`"),
        (lambda g: convert(g, rows=True), False, "repeated each single row"),
        (lambda g: convert(g, bias=False), False, "k_proj.bias is not"),
    ],
)
def test_gqa_to_mha_table(capsys, answer, passes, phrase):
    ok, out = verdict(capsys, check_gqa_to_mha, answer)
    assert ok is passes and phrase in out, out


# ----- never raises: whatever the learner returns, a check prints one ❌ line and returns False -----


@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
@pytest.mark.parametrize("check", [check_kv_head_map, check_expand_kv, check_kv_cache_bytes, check_gqa_to_mha])
def test_checks_never_raise(check, junk, capsys):
    assert check(lambda *args, **kwargs: junk) is False
    assert one_red_line(capsys.readouterr().out)
    assert check(junk) is False  # the value itself instead of a function
    assert one_red_line(capsys.readouterr().out)
