"""The notebook 11 checkers accept a hand-written answer and diagnose each usual wrong one."""

import math

import pytest
import torch
from torch import nn

from attn_core.exercises.handwrite import check_causal_mask, check_gqa, check_mha, check_sdpa


def verdict(capsys, check, answer) -> tuple[bool, str]:
    ok = check(answer)
    return ok, capsys.readouterr().out


# =============================================================================== SDPA


def make_sdpa(*, scale="sqrt_dk", softmax_dim=-1, mask_mode="ours", fill=float("-inf")):
    def sdpa(q, k, v, mask=None):
        d_k = q.size(-1)
        scores = q @ k.transpose(-2, -1)  # (..., Lq, Lk)
        if scale == "sqrt_dk":
            scores = scores / math.sqrt(d_k)
        elif scale == "dk":
            scores = scores / d_k
        elif scale == "d_model":
            scores = scores / math.sqrt(q.size(-3) * d_k if q.dim() >= 4 else d_k)
        if mask is not None and mask_mode == "ours":
            scores = scores.masked_fill(~mask, fill)
        elif mask is not None and mask_mode == "flipped":
            scores = scores.masked_fill(mask, fill)
        weights = torch.softmax(scores, dim=softmax_dim)  # (..., Lq, Lk)
        return weights @ v, weights

    return sdpa


def test_sdpa_accepts_right_answer(capsys):
    ok, out = verdict(capsys, check_sdpa, make_sdpa(fill=torch.finfo(torch.float64).min))
    assert ok and "✅" in out and "note" not in out


def test_sdpa_nan_on_fully_masked_rows_gets_a_note(capsys):
    ok, out = verdict(capsys, check_sdpa, make_sdpa())  # -inf fill: NaN on a fully masked row
    assert ok and "✅" in out and "NaN" in out and "ALL masked" in out


def test_sdpa_reference_passes(capsys):
    import attn_core as ac

    ok, out = verdict(capsys, check_sdpa, lambda q, k, v, mask=None: ac.scaled_dot_product_attention(q, k, v, mask))
    assert ok and "note" not in out


@pytest.mark.parametrize(
    "answer, expected",
    [
        (lambda q, k, v, mask=None: (make_sdpa()(q, k, v, mask)[0], make_sdpa()(q, k, v, mask)[1].mT), "transposed"),
        (make_sdpa(softmax_dim=-2), "softmax over the wrong dim"),
        (make_sdpa(scale="none"), "no scale"),
        (make_sdpa(scale="dk"), "divided by d_k"),
        (make_sdpa(scale="d_model"), "√d_model"),
        (make_sdpa(mask_mode="flipped"), "mask convention is flipped"),
        (make_sdpa(mask_mode="ignored"), "mask is ignored"),
    ],
)
def test_sdpa_diagnoses(capsys, answer, expected):
    ok, out = verdict(capsys, check_sdpa, answer)
    assert not ok and "❌" in out and expected in out, out


def test_sdpa_transposed_on_square_inputs(capsys):
    def square_transposed(q, k, v, mask=None):
        if q.size(-2) != k.size(-2):
            return make_sdpa()(q, k, v, mask)
        weights = torch.softmax(k @ q.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)  # (..., Lk, Lq)
        return weights @ v, weights

    ok, out = verdict(capsys, check_sdpa, square_transposed)
    assert not ok and "weights are transposed" in out


def test_sdpa_wrong_shapes_nan_and_numbers(capsys):
    ok, out = verdict(capsys, check_sdpa, lambda q, k, v, mask=None: make_sdpa()(q, k, v, mask)[0])
    assert not ok and "return the pair (out, weights)" in out
    ok, out = verdict(capsys, check_sdpa, lambda q, k, v, mask=None: (make_sdpa()(q, k, v)[1], make_sdpa()(q, k, v)[1]))
    assert not ok and "out should have shape" in out
    ok, out = verdict(capsys, check_sdpa, lambda q, k, v, mask=None: (make_sdpa()(q, k, v)[0], q))
    assert not ok and "weights should have shape" in out

    def nan_everywhere(q, k, v, mask=None):
        out, w = make_sdpa()(q, k, v, mask)
        if mask is not None:
            w = w.masked_fill(mask, float("nan"))
        return out, w

    ok, out = verdict(capsys, check_sdpa, nan_everywhere)
    assert not ok and "NaN on rows that do see some key" in out

    def off(q, k, v, mask=None):
        out, w = make_sdpa()(q, k, v, mask)
        return out, w * 0.9 + 0.1 / w.size(-1)

    ok, out = verdict(capsys, check_sdpa, off)
    assert not ok and "largest difference" in out and "at index" in out

    def wrong_out(q, k, v, mask=None):
        out, w = make_sdpa()(q, k, v, mask)
        return out + 1, w

    ok, out = verdict(capsys, check_sdpa, wrong_out)
    assert not ok and "out = weights @ v" in out


def stub(*args, **kwargs): ...


def raises(*args, **kwargs):
    raise NotImplementedError


@pytest.mark.parametrize("check", [check_sdpa, check_causal_mask])
def test_function_stubs_are_not_attempted(capsys, check):
    for answer in (stub, raises, None, ...):
        ok, out = verdict(capsys, check, answer)
        assert not ok and "not attempted" in out


def test_sdpa_learner_crash_is_reported(capsys):
    ok, out = verdict(capsys, check_sdpa, lambda q, k, v, mask=None: 1 / 0)
    assert not ok and "ZeroDivisionError" in out


# =============================================================================== causal mask


def right_causal(q_len, k_len):
    return torch.ones(q_len, k_len, dtype=torch.bool).tril(diagonal=k_len - q_len)  # (Lq, Lk)


@pytest.mark.parametrize(
    "answer, expected",
    [
        (lambda q, k: right_causal(q, k).float(), "wrong dtype"),
        (lambda q, k: torch.ones(q, k).triu(diagonal=k - q + 1), "flipped: your 1s mark the *blocked*"),
        (lambda q, k: torch.zeros(q, k).masked_fill(~right_causal(q, k), float("-inf")), "additive"),
        (lambda q, k: torch.ones(q, k, dtype=torch.bool).triu(diagonal=1), "flipped"),
        (lambda q, k: torch.ones(q, k, dtype=torch.bool).tril(), "top-left alignment"),
        (lambda q, k: torch.ones(q, k, dtype=torch.bool).tril(diagonal=k - q - 1), "diagonal is excluded"),
        (lambda q, k: torch.ones(q, k, dtype=torch.bool).tril(diagonal=k - q + 1), "next (future) key"),
        (lambda q, k: right_causal(k, q), "(k_len, q_len)"),
    ],
)
def test_causal_mask_diagnoses(capsys, answer, expected):
    ok, out = verdict(capsys, check_causal_mask, answer)
    assert not ok and expected in out, out


def test_causal_mask_accepts_right_answers(capsys):
    import attn_core as ac

    for answer in (right_causal, ac.causal_mask, lambda q, k: torch.arange(k) <= torch.arange(q)[:, None] + (k - q)):
        ok, out = verdict(capsys, check_causal_mask, answer)
        assert ok and "✅" in out


# =============================================================================== MHA / GQA


class GQA(nn.Module):
    """A correct hand-written GQA, with switches for the usual mistakes."""

    def __init__(self, hidden_dim, num_heads, num_kv_heads, **bug):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = hidden_dim // num_heads
        kv_dim = hidden_dim if bug.get("kv_size") == "hidden" else num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(hidden_dim, hidden_dim)
        self.k_proj = nn.Linear(hidden_dim, kv_dim)
        self.v_proj = nn.Linear(hidden_dim, kv_dim)
        if bug.get("name") == "output_proj":
            self.output_proj = nn.Linear(hidden_dim, hidden_dim)
        else:
            self.o_proj = nn.Linear(hidden_dim, hidden_dim)
        self.bug = bug

    def split(self, t, n):
        B, L, _ = t.shape
        if self.bug.get("split") == "reshape":
            return t.reshape(B, n, L, self.head_dim)
        return t.view(B, L, n, self.head_dim).transpose(1, 2)  # (B, n, L, head_dim)

    def forward(self, x, mask=None):
        B, L, hidden = x.shape
        group = self.num_heads // self.num_kv_heads
        q = self.split(self.q_proj(x), self.num_heads)  # (B, H, L, hd)
        k = self.split(self.k_proj(x), self.num_kv_heads)  # (B, G, L, hd)
        v = self.split((self.k_proj if self.bug.get("value") == "k" else self.v_proj)(x), self.num_kv_heads)
        if self.bug.get("expand") == "repeat":
            k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)  # (B, H, L, hd)
        else:
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, H, L, hd)
        scale = math.sqrt(hidden if self.bug.get("scale") == "hidden" else self.head_dim)
        scores = q @ k.transpose(-2, -1) / scale  # (B, H, L, L)
        if mask is not None and self.bug.get("mask") != "ignored":
            scores = scores.masked_fill(mask if self.bug.get("mask") == "flipped" else ~mask, float("-inf"))
        weights = scores.softmax(dim=-1)  # (B, H, L, L)
        out = (weights @ v).transpose(1, 2).reshape(B, L, hidden)  # (B, L, hidden)
        if self.bug.get("o_proj") != "missing":
            out = self.o_proj(out)
        return out, weights


def mha_class(**bug):
    class MHA(GQA):
        def __init__(self, hidden_dim, num_heads):
            super().__init__(hidden_dim, num_heads, num_heads, **bug)

    return MHA


def gqa_class(**bug):
    class MyGQA(GQA):
        def __init__(self, hidden_dim, num_heads, num_kv_heads):
            super().__init__(hidden_dim, num_heads, num_kv_heads, **bug)

    return MyGQA


def test_mha_and_gqa_accept_right_answers(capsys):
    ok, out = verdict(capsys, check_mha, mha_class())
    assert ok and "✅ check_mha" in out
    ok, out = verdict(capsys, check_gqa, gqa_class())
    assert ok and "✅ check_gqa" in out


def test_mha_accepts_bias_free_layers(capsys):
    class NoBias(mha_class()):
        def __init__(self, hidden_dim, num_heads):
            super().__init__(hidden_dim, num_heads)
            for p in ("q_proj", "k_proj", "v_proj", "o_proj"):
                setattr(self, p, nn.Linear(hidden_dim, hidden_dim, bias=False))

    ok, _ = verdict(capsys, check_mha, NoBias)
    assert ok


MHA_BUGS = [
    (dict(name="output_proj"), "Name the projections"),
    (dict(split="reshape"), "wrong head split"),
    (dict(value="k"), "V comes from k_proj"),
    (dict(o_proj="missing"), "output projection is missing"),
    (dict(scale="hidden"), "scaled by √hidden_dim"),
    (dict(mask="flipped"), "mask convention is flipped"),
    (dict(mask="ignored"), "mask is ignored"),
]


@pytest.mark.parametrize("bug, expected", MHA_BUGS)
def test_mha_diagnoses(capsys, bug, expected):
    ok, out = verdict(capsys, check_mha, mha_class(**bug))
    assert not ok and "❌ check_mha" in out and expected in out, out
    assert "[MHA(12, 3)" in out  # the verdict names the class and the configuration


@pytest.mark.parametrize(
    "bug, expected",
    [*MHA_BUGS, (dict(expand="repeat"), "repeat_interleave"), (dict(kv_size="hidden"), "MHA-sized")],
)
def test_gqa_diagnoses(capsys, bug, expected):
    ok, out = verdict(capsys, check_gqa, gqa_class(**bug))
    assert not ok and "❌ check_gqa" in out and expected in out, out


def test_layer_stubs_are_not_attempted(capsys):
    class InitStub(nn.Module):
        def __init__(self, hidden_dim, num_heads, num_kv_heads=None):
            super().__init__()
            raise NotImplementedError

    class ForwardStub(GQA):
        def __init__(self, hidden_dim, num_heads, num_kv_heads=None):
            super().__init__(hidden_dim, num_heads, num_kv_heads or num_heads)

        def forward(self, x, mask=None): ...

    for check in (check_mha, check_gqa):
        for answer in (None, ..., InitStub, ForwardStub):
            ok, out = verdict(capsys, check, answer)
            assert not ok and "not attempted" in out, out


def test_layer_misc_failures(capsys):
    class ReturnsOut(mha_class()):
        def forward(self, x, mask=None):
            return super().forward(x, mask)[0]

    ok, out = verdict(capsys, check_mha, ReturnsOut)
    assert not ok and "return the pair (out, weights)" in out

    class NoMaskArg(mha_class()):
        def forward(self, x):
            return super().forward(x)

    ok, out = verdict(capsys, check_mha, NoMaskArg)
    assert not ok and "causal mask" in out and "TypeError" in out
