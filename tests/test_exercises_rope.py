"""The RoPE notebook's checkers accept right answers and diagnose the usual wrong ones.

For each checker: the stub fails, the reference passes, correct answers written differently pass, and
each usual mistake gets its own diagnosis (a phrase that only that diagnosis contains); junk answers
get one ❌ line.
"""

import math

import pytest
import torch
from learner_answers import JUNK, one_red_line, stub

import attn_core as ac
from attn_core.exercises import rope as ex

# ----- exercise 1: rotate-half RoPE ---------------------------------------------------------------


def rope_half(x, positions, base):
    d = x.shape[-1]
    inv_freq = base ** -(torch.arange(0, d, 2, dtype=torch.float64) / d)  # (D/2,)
    angles = positions.to(torch.float64)[:, None] * inv_freq  # (L, D/2)
    angles = torch.cat([angles, angles], dim=-1)  # (L, D)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]  # (..., L, D/2) each
    rotated = torch.cat([-x2, x1], dim=-1)  # (..., L, D): rotate_half
    return x * angles.cos().to(x.dtype) + rotated * angles.sin().to(x.dtype)  # (..., L, D)


def rope_complex(x, positions, base):
    d = x.shape[-1]
    inv_freq = base ** -(torch.arange(0, d, 2, dtype=torch.float64) / d)  # (D/2,)
    turn = torch.polar(torch.ones(1, dtype=torch.float64), positions.double()[:, None] * inv_freq)  # (L, D/2)
    pairs = torch.complex(x[..., : d // 2].double(), x[..., d // 2 :].double())  # (..., L, D/2)
    out = pairs * turn  # (..., L, D/2)
    return torch.cat([out.real, out.imag], dim=-1).to(x.dtype)  # (..., L, D)


def rope_loop(x, positions, base):
    d = x.shape[-1]
    out = x.clone()
    for row, m in enumerate(positions.tolist()):
        for i in range(d // 2):
            angle = m * base ** (-2 * i / d)  # python float: float64
            a, b = x[..., row, i], x[..., row, i + d // 2]
            out[..., row, i] = a * math.cos(angle) - b * math.sin(angle)
            out[..., row, i + d // 2] = a * math.sin(angle) + b * math.cos(angle)
    return out


def rope_interleaved(x, positions, base):
    return ex.reference_rope(x, positions, base=base, interleaved=True)


def rope_float32_angles(x, positions, base):
    d = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2).float() / d))  # (D/2,) float32, as many tutorials
    angles = positions.float()[:, None] * inv_freq  # (L, D/2) float32
    angles = torch.cat([angles, angles], dim=-1)  # (L, D)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * angles.cos().to(x.dtype) + torch.cat([-x2, x1], dim=-1) * angles.sin().to(x.dtype)


def rope_wrong_freq(x, positions, base):
    return ex.reference_rope(x, positions, base=base, freq_exponent=1.0)


def rope_wrong_sign(x, positions, base):
    d = x.shape[-1]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    inv_freq = base ** -(torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.cat([positions.double()[:, None] * inv_freq] * 2, dim=-1)  # (L, D)
    return x * angles.cos().to(x.dtype) + torch.cat([x2, -x1], dim=-1) * angles.sin().to(x.dtype)


def rope_arange(x, positions, base):
    return rope_half(x, torch.arange(x.shape[-2]), base)


def rope_cos_repeat_interleaved(x, positions, base):
    """Meta's cos/sin layout (each angle twice in a row) with Hugging Face's rotate_half: a common porting bug."""
    d = x.shape[-1]
    inv_freq = base ** -(torch.arange(0, d, 2, dtype=torch.float64) / d)  # (D/2,)
    angles = (positions.to(torch.float64)[:, None] * inv_freq).repeat_interleave(2, dim=-1)  # (L, D)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]  # (..., L, D/2) each
    return x * angles.cos().to(x.dtype) + torch.cat([-x2, x1], dim=-1) * angles.sin().to(x.dtype)


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (None, False, "not attempted"),
        (stub, False, "not attempted"),
        (lambda x, p, b: ..., False, "not attempted"),
        (rope_half, True, "✅"),
        (rope_complex, True, "✅"),
        (rope_loop, True, "✅"),
        (lambda x, p, b: ex.reference_rope(x, p, base=b), True, "✅"),
        (rope_interleaved, False, "wrong layout"),
        (rope_float32_angles, False, "angles were computed in float32"),
        (rope_wrong_freq, False, "wrong frequency formula"),
        (rope_wrong_sign, False, "turns the wrong way"),
        (rope_arange, False, "you ignored `positions`"),
        (lambda x, p, b: rope_half(x, p + 1, b), False, "off by one: you rotated the token at position m by (m + 1)"),
        (lambda x, p, b: rope_half(x, p - 1, b), False, "off by one: you rotated the token at position m by (m − 1)"),
        (lambda x, p, b: rope_half(x, p, 10000.0), False, "you ignored `base` and used 10000: use the base you were"),
        (rope_cos_repeat_interleaved, False, "cos/sin are laid out for the interleaved layout"),
        (lambda x, p, b: x, False, "returned x unchanged"),
        (lambda x, p, b: rope_half(x, p, b).float(), False, "RoPE must keep the dtype"),
        (lambda x, p, b: rope_half(x, p, b)[..., :-1], False, "wrong shape"),
        (lambda x, p, b: (x, x), False, "not a tuple of two"),
        (lambda x, p, b: rope_half(x, p, b) * 1.01, False, "wrong values, largest error"),
    ],
)
def test_rotate_half_table(capsys, answer, passes, phrase):
    assert ex.check_rotate_half_rope(answer) is passes
    out = capsys.readouterr().out
    assert phrase in out, out


def test_float32_angle_figures_are_measured():
    """The numbers FLOAT32_ANGLES quotes, measured: the tutorial / Hugging Face float32 angles vs float64."""
    d, base = 64, 10000.0
    positions = torch.arange(65_536)  # (L,)
    inv32 = 1.0 / (base ** (torch.arange(0, d, 2).float() / d))  # (D/2,) float32, as LlamaRotaryEmbedding
    inv64 = base ** -(torch.arange(0, d, 2, dtype=torch.float64) / d)  # (D/2,)
    error = (positions.float()[:, None] * inv32).double() - positions.double()[:, None] * inv64  # (L, D/2)
    error = error.abs()
    assert float(error[:, 0].max()) == 0.0  # pair 0: position · 1.0, an integer below 2^24, is exact
    assert float(((inv32.double() - inv64).abs() / inv64).max()) <= 7e-8
    assert f"{float(error[65_535].max()):.0e}" == "7e-04"  # at position 65,535
    assert f"{float(error.max()):.1e}" == "2.4e-03"  # over positions 0 .. 65,535
    assert float(error[32_768:].max()) >= 2**-9  # the product's own rounding: half of 2^-8 between 32,768 and 65,536
    message = ex.FLOAT32_ANGLES
    for figure in ("7e-8", "2^-8", "7e-4 rad at position 65,535", "2.4e-3 rad at positions below 65,536"):
        assert figure in message, figure


@pytest.mark.skipif(not hasattr(ac, "apply_rope"), reason="ac.apply_rope not there yet")
def test_rotate_half_accepts_attn_core(capsys):
    assert ex.check_rotate_half_rope(lambda x, p, b: ac.apply_rope(x, p, base=b))
    assert ex.check_rotate_half_rope(lambda x, p, b: ex.reference_rope(x, p, base=b))
    out = capsys.readouterr().out
    assert out.count("✅") == 2, out


def test_reference_matches_hugging_face_in_float64():
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import apply_rotary_pos_emb_interleave
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    x = torch.randn(2, 3, 7, 16, dtype=torch.float64)  # (B, H, L, D)
    positions = torch.tensor([0, 1, 2, 9, 100, 4000, 60000])  # (L,)
    inv_freq = 10000.0 ** -(torch.arange(0, 16, 2, dtype=torch.float64) / 16)  # (D/2,)
    angles = torch.cat([positions.double()[:, None] * inv_freq] * 2, dim=-1)  # (L, D)
    cos, sin = angles.cos()[None], angles.sin()[None]  # (1, L, D)
    hf, _ = apply_rotary_pos_emb(x, x, cos, sin)  # (B, H, L, D)
    torch.testing.assert_close(ex.reference_rope(x, positions), hf, rtol=0, atol=1e-12)
    deepseek, _ = apply_rotary_pos_emb_interleave(x, x, cos, sin)  # (B, H, L, D), pairs de-interleaved
    ours = ex.reference_rope(x, positions, interleaved=True)  # (B, H, L, D), pairs in place
    half_order = torch.cat([torch.arange(0, 16, 2), torch.arange(1, 16, 2)])  # DeepSeek writes evens then odds
    torch.testing.assert_close(ours[..., half_order], deepseek, rtol=0, atol=1e-12)


# ----- exercise 2: one decoding step ---------------------------------------------------------------


def decode_right(q, k, v, cache_k, cache_v, base):
    position = torch.tensor([cache_k.shape[-2]])  # (1,): the new token comes after every cached one
    q = ex.reference_rope(q, position, base=base)  # (B, H, 1, D)
    k = ex.reference_rope(k, position, base=base)  # (B, H, 1, D)
    cache_k = torch.cat([cache_k, k], dim=-2)  # (B, H, T+1, D)
    cache_v = torch.cat([cache_v, v], dim=-2)  # (B, H, T+1, D)
    out, _ = ac.scaled_dot_product_attention(q, cache_k, cache_v)  # (B, H, 1, D)
    return out, cache_k, cache_v


def decode_by_hand(q, k, v, cache_k, cache_v, base):
    t = cache_k.shape[-2]
    rope = lambda z: rope_half(z, torch.tensor([t]), base)  # noqa: E731
    keys = torch.cat([cache_k, rope(k)], dim=-2)  # (B, H, T+1, D)
    values = torch.cat([cache_v, v], dim=-2)  # (B, H, T+1, D)
    weights = torch.softmax(rope(q) @ keys.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)  # (B, H, 1, T+1)
    return weights @ values, keys, values


def decode_with_causal(q, k, v, cache_k, cache_v, base):
    out, keys, values = decode_right(q, k, v, cache_k, cache_v, base)
    position = torch.tensor([cache_k.shape[-2]])
    q = rope_complex(q, position, base)  # (B, H, 1, D)
    out2, _ = ac.scaled_dot_product_attention(q, keys, values, is_causal=True)  # bottom-right: sees all keys
    return out2, keys, values


def decode_fsdpa(q, k, v, cache_k, cache_v, base):
    import torch.nn.functional as F

    position = torch.tensor([cache_k.shape[-2]])
    q, k = rope_loop(q, position, base), rope_loop(k, position, base)
    keys, values = torch.cat([cache_k, k], -2), torch.cat([cache_v, v], -2)
    return F.scaled_dot_product_attention(q, keys, values), keys, values


def decode_top_left(q, k, v, cache_k, cache_v, base):
    import torch.nn.functional as F

    _, keys, values = decode_right(q, k, v, cache_k, cache_v, base)
    q = ex.reference_rope(q, torch.tensor([cache_k.shape[-2]]), base=base)
    return F.scaled_dot_product_attention(q, keys, values, is_causal=True), keys, values  # sees key 0 only


def _decode_mistake(position_of=None, rotate_v=False, after_cache=False, rerotate=False, q_position_of=None):
    def step(q, k, v, cache_k, cache_v, base):
        t = cache_k.shape[-2]
        position = torch.tensor([position_of(t) if position_of else t])
        q = ex.reference_rope(q, torch.tensor([q_position_of(t)]) if q_position_of else position, base=base)
        if rerotate:
            cache_k = ex.reference_rope(cache_k, position.expand(t), base=base)
        if rotate_v:
            v = ex.reference_rope(v, position, base=base)
        if after_cache:
            cache_k = torch.cat([cache_k, k], -2)  # un-rotated key cached ...
            keys = ex.reference_rope(cache_k, torch.arange(t + 1), base=base)  # ... rotated afterwards
        else:
            cache_k = torch.cat([cache_k, ex.reference_rope(k, position, base=base)], -2)
            keys = cache_k
        cache_v = torch.cat([cache_v, v], -2)
        out, _ = ac.scaled_dot_product_attention(q, keys, cache_v)
        return out, cache_k, cache_v

    return step


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (None, False, "not attempted"),
        (stub, False, "not attempted"),
        (lambda *args: ..., False, "not attempted"),
        (decode_right, True, "✅"),
        (decode_by_hand, True, "✅"),
        (decode_with_causal, True, "✅"),
        (decode_fsdpa, True, "✅"),
        (_decode_mistake(position_of=lambda t: 0), False, "positions restarted at 0"),
        (_decode_mistake(rotate_v=True), False, "you rotated V"),
        (_decode_mistake(after_cache=True), False, "your cache holds the new key BEFORE rotation"),
        (_decode_mistake(rerotate=True), False, "you rotated the cached keys again"),
        (_decode_mistake(position_of=lambda t: t + 1), False, "off by one"),
        (_decode_mistake(q_position_of=lambda t: 0), False, "the cache is right, but the query is not rotated"),
        (_decode_mistake(q_position_of=lambda t: t + 1), False, "you rotated the query at position 4: q and k"),
        (decode_top_left, False, "aligns the mask top-left"),
        (lambda q, k, v, ck, cv, b: decode_right(q, k, v, ck, cv, b)[0], False, "return three things"),
        (lambda q, k, v, ck, cv, b: (*decode_right(q, k, v, ck, cv, b)[:2], cv), False, "cache_v should be"),
    ],
)
def test_decode_step_table(capsys, answer, passes, phrase):
    assert ex.check_rope_decode_step(answer) is passes
    out = capsys.readouterr().out
    assert phrase in out, out


def test_decode_step_prompt_restart_diagnosis(capsys):
    restart = _decode_mistake(position_of=lambda t: t - ex.PROMPT_LEN)
    assert ex.check_rope_decode_step(restart) is False
    assert "positions restarted at 0" in capsys.readouterr().out


# ----- exercise 3: GGUF/Meta rows -> Hugging Face rows ---------------------------------------------


def rows_view(weight, num_heads):
    out, hidden = weight.shape
    return weight.view(num_heads, out // num_heads // 2, 2, hidden).transpose(1, 2).reshape(out, hidden)


def rows_index(weight, num_heads):
    head_dim = weight.shape[0] // num_heads
    one_head = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])  # (D,)
    order = (torch.arange(num_heads)[:, None] * head_dim + one_head).flatten()  # (H·D,)
    return weight[order]


def rows_loop(weight, num_heads):
    head_dim = weight.shape[0] // num_heads
    out = torch.empty_like(weight)
    for h in range(num_heads):
        for i in range(head_dim // 2):
            for j in range(2):
                out[h * head_dim + j * head_dim // 2 + i] = weight[h * head_dim + 2 * i + j]
    return out


def rows_inverse(weight, num_heads):
    out, hidden = weight.shape
    return weight.view(num_heads, 2, out // num_heads // 2, hidden).transpose(1, 2).reshape(out, hidden)


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (None, False, "not attempted"),
        (stub, False, "not attempted"),
        (lambda w, h: ..., False, "not attempted"),
        (rows_view, True, "✅"),
        (rows_index, True, "✅"),
        (rows_loop, True, "✅"),
        (ex.interleaved_to_half_rows, True, "✅"),
        (rows_inverse, False, "inverse permutation"),
        (lambda w, h: rows_view(w, 1), False, "as one head"),
        (lambda w, h: w, False, "rows are unchanged"),
        (lambda w, h: rows_view(w, h).T, False, "transposed weight"),
        (lambda w, h: rows_view(w.T.contiguous(), 1).T, False, "reordered the columns"),
        (lambda w, h: rows_view(w, h).flip(0), False, "not the right one"),
        (lambda w, h: rows_view(w, h) * 2, False, "do not change them"),
    ],
)
def test_rows_table(capsys, answer, passes, phrase):
    assert ex.check_interleaved_to_half_rows(answer) is passes
    out = capsys.readouterr().out
    assert phrase in out, out


def test_row_permutation_turns_an_interleaved_model_into_a_rotate_half_one():
    """The point of exercise 3: q/k rows permuted -> the rotate-half model gives the interleaved scores."""
    hidden, num_heads, head_dim = 12, 2, 8
    x = torch.randn(5, hidden, dtype=torch.float64)  # (L, hidden)
    w_q = torch.randn(num_heads * head_dim, hidden, dtype=torch.float64)  # interleaved (GGUF) rows
    w_k = torch.randn(num_heads * head_dim, hidden, dtype=torch.float64)
    positions = torch.arange(5)

    def scores(wq, wk, interleaved):
        q = (x @ wq.T).view(5, num_heads, head_dim).transpose(0, 1)  # (H, L, D)
        k = (x @ wk.T).view(5, num_heads, head_dim).transpose(0, 1)  # (H, L, D)
        q = ex.reference_rope(q, positions, interleaved=interleaved)
        k = ex.reference_rope(k, positions, interleaved=interleaved)
        return q @ k.transpose(-2, -1)  # (H, L, L)

    truth = scores(w_q, w_k, interleaved=True)
    converted = scores(rows_view(w_q, num_heads), rows_view(w_k, num_heads), interleaved=False)
    torch.testing.assert_close(converted, truth, rtol=0, atol=1e-12)
    wrong = scores(w_q, w_k, interleaved=False)  # loaded without the permutation: runs, and is wrong
    assert (wrong - truth).abs().max() > 0.1


# ----- never raises: whatever the learner returns, a check prints one ❌ line and returns False -----


@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
@pytest.mark.parametrize(
    "check", [ex.check_rotate_half_rope, ex.check_rope_decode_step, ex.check_interleaved_to_half_rows]
)
def test_checks_never_raise(check, junk, capsys):
    assert check(lambda *args, **kwargs: junk) is False
    assert one_red_line(capsys.readouterr().out)
    assert check(junk) is False  # the value itself instead of a function
    assert one_red_line(capsys.readouterr().out)
