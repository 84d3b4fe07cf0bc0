"""The notebook 04 checkers accept right answers and diagnose the usual wrong ones."""

import torch

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


def kv_bytes(config, seq_len, batch_size, *, heads=None, kv=2, layers=True, elem=True, batch=True):
    num_heads = config["num_attention_heads"]
    num_kv_heads = config.get("num_key_value_heads", num_heads) if heads is None else config[heads]
    head_dim = config["hidden_size"] // num_heads
    total = kv * num_kv_heads * head_dim * seq_len
    total *= config["num_hidden_layers"] if layers else 1
    total *= DTYPE_BYTES[config["torch_dtype"]] if elem else 1
    return total * (batch_size if batch else 1)


def test_kv_cache_bytes_accepts_right_answer(capsys):
    ok, out = verdict(capsys, check_kv_cache_bytes, kv_bytes)
    assert ok and "✅" in out
    # Llama-2-70B, fp16, 4096 tokens: 1.25 GiB per sequence
    assert kv_bytes(EXAMPLE_CONFIGS["Llama-2-70B"], 4096, 1) == 1_342_177_280


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
