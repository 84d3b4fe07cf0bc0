"""The notebook 16 checkers accept a hand-written answer and diagnose each usual wrong one."""

import math

import pytest
import torch
import torch.nn.functional as F
from learner_answers import JUNK, one_red_line
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
        if self.bug.get("causal") == "always":  # bug: a causal mask whatever the caller passed
            causal = torch.ones(L, L, dtype=torch.bool).tril()  # (L, L)
            mask = causal if mask is None else mask & causal
        if mask is not None and self.bug.get("mask") == "rows" and mask.shape[-2] == 1:
            mask = mask.transpose(-2, -1)  # bug: (B, 1, L, 1) blocks padded query rows, not keys
        if self.bug.get("core") == "5d":  # correct: broadcast each kv head over its group, no repeat
            q5 = q.unflatten(1, (self.num_kv_heads, group))  # (B, G, n, L, hd)
            scores = q5 @ k.unsqueeze(2).transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, G, n, L, L)
            if mask is not None:
                scores = scores.masked_fill(~mask.unsqueeze(2) if mask.dim() == 4 else ~mask, float("-inf"))
            weights5 = scores.softmax(dim=-1)  # (B, G, n, L, L)
            out = (weights5 @ v.unsqueeze(2)).flatten(1, 2)  # (B, H, L, hd)
            return self.o_proj(out.transpose(1, 2).reshape(B, L, hidden)), weights5.flatten(1, 2)
        if self.bug.get("expand") == "repeat":
            k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)  # (B, H, L, hd)
        else:
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, H, L, hd)
        scale = math.sqrt(hidden if self.bug.get("scale") == "hidden" else self.head_dim)
        if self.bug.get("core") == "float32":  # correct: the core in float32, cast back
            q, k, v = q.float(), k.float(), v.float()
        if self.bug.get("core") == "einsum":
            scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / scale  # (B, H, L, L)
        else:
            scores = q @ k.transpose(-2, -1) / scale  # (B, H, L, L)
        if mask is not None and self.bug.get("mask") not in ("ignored", "after"):
            scores = scores.masked_fill(mask if self.bug.get("mask") == "flipped" else ~mask, float("-inf"))
        weights = scores.softmax(dim=self.bug.get("softmax_dim", -1))  # (B, H, L, L)
        if mask is not None and self.bug.get("mask") == "after":
            weights = weights.masked_fill(~mask, 0.0)  # bug: zeroed after the softmax, rows sum < 1
        if self.bug.get("dropout"):
            weights = F.dropout(weights, 0.1)  # bug: training=True by default, even in eval
        out = (weights @ v).to(x.dtype)  # (B, H, L, hd)
        if self.bug.get("merge") == "reshape":
            out = out.reshape(B, L, hidden)  # bug: no transpose back
        else:
            out = out.transpose(1, 2).reshape(B, L, hidden)  # (B, L, hidden)
        if self.bug.get("o_proj") != "missing":
            out = self.o_proj(out)
        return out, weights.to(x.dtype)


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


# =============================================================================== the ARENA-style tables
# Each checker: the stub fails, the reference passes, correct answers written differently pass,
# and each usual mistake gets its own diagnosis (a phrase only that diagnosis contains).


def sdpa_einsum(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5  # (..., Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)  # -1e9 is safe in float32/float64
    weights = scores.softmax(-1)  # (..., Lq, Lk)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def sdpa_float32_list(q, k, v, mask=None):
    q32, k32, v32 = q.float(), k.float(), v.float()  # float32 core: within the checker's rtol 1e-5
    scores = q32 @ k32.mT / math.sqrt(q.shape[-1])  # (..., Lq, Lk)
    if mask is not None:
        scores = scores + torch.zeros_like(scores).masked_fill(~mask, float("-inf"))  # additive -inf mask
    weights = scores.softmax(-1)  # (..., Lq, Lk)
    return [weights @ v32, weights]  # a list is fine


def sdpa_torch_out(q, k, v, mask=None):
    weights = make_sdpa(fill=torch.finfo(q.dtype).min)(q, k, v, mask)[1]  # (..., Lq, Lk)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights


def sdpa_renormalised(q, k, v, mask=None):
    weights = torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=-1)  # (..., Lq, Lk)
    if mask is not None:  # mask after the softmax, then renormalise: the same weights
        weights = weights * mask
        weights = weights / weights.sum(-1, keepdim=True).clamp_min(1e-30)
    return weights @ v, weights


def sdpa_with(edit):
    """The right answer with ``edit(q, k, v, mask, scores) -> (out, weights)`` as its last step."""

    def sdpa(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Lq, Lk)
        return edit(q, k, v, mask, scores)

    return sdpa


def _soft(scores, mask):
    return (scores if mask is None else scores.masked_fill(~mask, float("-inf"))).softmax(-1)


def sdpa_attn_mask(q, k, v, attn_mask=None):
    return make_sdpa()(q, k, v, attn_mask)


def sdpa_k_T(q, k, v, mask=None):
    weights = torch.softmax(q @ k.T / math.sqrt(q.shape[-1]), dim=-1)  # bug: .T reverses every axis
    return weights @ v, weights


SDPA_TABLE = [
    (stub, False, "not attempted"),
    (lambda q, k, v, mask=None: __import__("attn_core").scaled_dot_product_attention(q, k, v, mask), True, "✅"),
    (sdpa_einsum, True, "✅"),
    (sdpa_float32_list, True, "✅"),
    (sdpa_torch_out, True, "✅"),
    (sdpa_renormalised, True, "✅"),
    (sdpa_with(lambda q, k, v, m, s: (_soft(s, m), _soft(s, m) @ v)), False, "did you return (weights, out)?"),
    (sdpa_attn_mask, False, "name the argument `mask`"),
    (sdpa_k_T, False, "use k.transpose(-2, -1)"),
    (
        sdpa_with(lambda q, k, v, m, s: (lambda w: (w @ v, w))(s.softmax(-1) * (1 if m is None else m))),
        False,
        "after the softmax",
    ),
    (
        sdpa_with(lambda q, k, v, m, s: (lambda w: (w @ v, w))((s if m is None else s + m.float()).softmax(-1))),
        False,
        "added the mask to the scores as numbers",
    ),
    (
        sdpa_with(
            lambda q, k, v, m, s: (lambda w: (w @ v, w))(_soft(s * math.sqrt(q.shape[-1]) / math.sqrt(v.shape[-1]), m))
        ),
        False,
        "divided by √d_v",
    ),
    (
        sdpa_with(lambda q, k, v, m, s: (lambda w: (w @ v, w))(F.dropout(_soft(s, m), 0.1))),
        False,
        "dropout is still on",
    ),
    (make_sdpa(mask_mode="flipped"), False, "mask convention is flipped"),
    (make_sdpa(scale="none"), False, "no scale"),
]


@pytest.mark.filterwarnings("ignore:The use of `x.T`:UserWarning")  # sdpa_k_T's own warning, handed on
@pytest.mark.parametrize("answer, passes, phrase", SDPA_TABLE)
def test_sdpa_table(capsys, answer, passes, phrase):
    ok, out = verdict(capsys, check_sdpa, answer)
    assert ok is passes and phrase in out, out


def causal_loops(q_len, k_len):
    mask = torch.zeros(q_len, k_len, dtype=torch.bool)  # (Lq, Lk)
    for i in range(q_len):
        for j in range(k_len):
            mask[i, j] = j <= i + k_len - q_len
    return mask


CAUSAL_TABLE = [
    (stub, False, "not attempted"),
    (right_causal, True, "✅"),
    (lambda q, k: torch.arange(k) <= torch.arange(q)[:, None] + (k - q), True, "✅"),
    (lambda q, k: ~torch.ones(q, k, dtype=torch.bool).triu(diagonal=k - q + 1), True, "✅"),
    (lambda q, k: torch.from_numpy(__import__("numpy").tri(q, k, k - q, dtype=bool)), True, "✅"),
    (causal_loops, True, "✅"),
    (lambda q, k: torch.ones(q, k, dtype=torch.bool).tril(), False, "With a KV cache the 3 queries are the"),
    (lambda q, k: torch.ones(q, k, dtype=torch.bool).tril(max(k - q, 0)), False, "queries see no key at all"),
    (lambda q, k: right_causal(q, k).float(), False, "*added* to the scores"),
    (lambda q, k: right_causal(q, k).to(torch.uint8), False, "refuses an integer (torch.uint8)"),
    (lambda q, k: torch.ones(q, k, dtype=torch.bool).triu(diagonal=k - q + 1), False, "the mask is flipped"),
    (lambda q, k: torch.ones(q, k, dtype=torch.bool).tril(diagonal=k - q - 1), False, "diagonal is excluded"),
]


@pytest.mark.parametrize("answer, passes, phrase", CAUSAL_TABLE)
def test_causal_mask_table(capsys, answer, passes, phrase):
    ok, out = verdict(capsys, check_causal_mask, answer)
    assert ok is passes and phrase in out, out
    assert "last 5 of 3" not in out  # q_len > k_len is not a KV-cache step


class SdpaCoreMHA(mha_class()):
    """Correct: F.scaled_dot_product_attention for the output, the weights computed alongside."""

    def forward(self, x, mask=None):
        B, L, hidden = x.shape
        q, k, v = (self.split(p(x), self.num_heads) for p in (self.q_proj, self.k_proj, self.v_proj))  # (B, H, L, hd)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, L, hd)
        weights = make_sdpa()(q, k, v, mask)[1]  # (B, H, L, L)
        return self.o_proj(out.transpose(1, 2).reshape(B, L, hidden)), weights


class LoopMHA(mha_class()):
    """Correct: one head at a time, concatenated."""

    def forward(self, x, mask=None):
        B, L, hidden = x.shape
        q, k, v = (self.split(p(x), self.num_heads) for p in (self.q_proj, self.k_proj, self.v_proj))  # (B, H, L, hd)
        outs, weights = [], []
        for h in range(self.num_heads):
            head_mask = None if mask is None else mask[..., 0, :, :] if mask.dim() == 4 else mask  # (B|1, L, L)
            o, w = make_sdpa()(q[:, h], k[:, h], v[:, h], head_mask)  # (B, L, hd), (B, L, L)
            outs.append(o)
            weights.append(w)
        return self.o_proj(torch.cat(outs, dim=-1)), torch.stack(weights, dim=1)  # (B, L, hidden), (B, H, L, L)


LAYER_MISTAKES = [
    (dict(merge="reshape"), "heads merged without the transpose"),
    (dict(split="reshape", merge="reshape"), "split AND merged with a bare reshape"),
    (dict(softmax_dim=-2), "softmax over the wrong dim (-2, the queries)"),
    (dict(mask="after"), "the mask is applied after the softmax"),
    (dict(dropout=True), "dropout is still on"),
    (dict(causal="always"), "you applied a causal mask although the check passed no mask"),
    (dict(mask="rows"), "blocked the padded query ROWS instead of the padded KEYS"),
]


@pytest.mark.parametrize(
    "answer, passes, phrase",
    [
        (None, False, "not attempted"),
        (mha_class(), True, "✅"),
        (mha_class(core="einsum"), True, "✅"),
        (mha_class(core="float32"), True, "✅"),
        (SdpaCoreMHA, True, "✅"),
        (LoopMHA, True, "✅"),
        *((mha_class(**bug), False, phrase) for bug, phrase in LAYER_MISTAKES),
    ],
)
def test_mha_table(capsys, answer, passes, phrase):
    ok, out = verdict(capsys, check_mha, answer)
    assert ok is passes and phrase in out, out


@pytest.mark.parametrize(
    "answer, passes, phrase",
    [
        (None, False, "not attempted"),
        (gqa_class(), True, "✅"),
        (gqa_class(core="einsum"), True, "✅"),
        (gqa_class(core="5d"), True, "✅"),
        (gqa_class(core="float32"), True, "✅"),
        *((gqa_class(**bug), False, phrase) for bug, phrase in LAYER_MISTAKES),
        (gqa_class(expand="repeat"), False, "repeat_interleave"),
    ],
)
def test_gqa_table(capsys, answer, passes, phrase):
    ok, out = verdict(capsys, check_gqa, answer)
    assert ok is passes and phrase in out, out


def test_layer_weights_right_out_wrong_points_at_the_merge(capsys):
    class WrongAfterSoftmax(mha_class()):
        def forward(self, x, mask=None):
            out, weights = super().forward(x, mask)
            return out * 1.5, weights  # the weights are right; something after them is not

    ok, out = verdict(capsys, check_mha, WrongAfterSoftmax)
    assert not ok and "the weights are right but out is not" in out and "self.o_proj" in out


# ----- never raises: whatever the learner returns, a check prints one ❌ line and returns False -----


def layer_returning(junk):
    class Returns(mha_class()):
        def forward(self, x, mask=None):
            return junk

    return Returns


@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_checks_never_raise(junk, capsys):
    for check in (check_sdpa, check_causal_mask, check_mha, check_gqa):
        assert check(lambda *args, **kwargs: junk) is False
        assert one_red_line(capsys.readouterr().out)
        assert check(junk) is False  # the value itself instead of a function or class
        assert one_red_line(capsys.readouterr().out)
    assert check_mha(layer_returning(junk)) is False
    assert one_red_line(capsys.readouterr().out)
    assert check_mha(layer_returning((junk, junk))) is False
    assert one_red_line(capsys.readouterr().out)


# =============================================================================== MHA + KV cache + RoPE

from attn_core.exercises.handwrite import check_rope_mha  # noqa: E402  (re-exported from handwrite_rope)
from attn_core.exercises.handwrite_rope import _CONFIGS, _reference_steps, _simulate  # noqa: E402


def rope_half(x, positions, base, *, sign=1, exponent=2):
    """Rotate-half RoPE written the Hugging Face way (cos/sin of cat(freqs, freqs))."""
    dim = x.shape[-1]
    inv_freq = 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64)[: dim // 2] * exponent / 2 / dim)  # (D/2,)
    angles = positions[:, None].double() * inv_freq  # (L, D/2)
    emb = torch.cat((angles, angles), dim=-1)  # (L, D)
    x1, x2 = x[..., : dim // 2], x[..., dim // 2 :]  # (..., L, D/2) each
    rotated_half = torch.cat((-x2, x1), dim=-1)  # (..., L, D)
    return x * emb.cos().to(x.dtype) + rotated_half * (sign * emb.sin()).to(x.dtype)  # (..., L, D)


def rope_interleaved(x, positions, base):
    """Pairs (2i, 2i+1): the RoFormer / Meta layout."""
    dim = x.shape[-1]
    angles = positions[:, None].double() * base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (L, D/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (L, D/2)
    x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., L, D/2)
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)  # (..., L, D)


def rope_complex(x, positions, base):
    """Rotate-half as a complex multiplication: z_i = x_i + i·x_{i+D/2}, times e^{iθ}."""
    dim = x.shape[-1]
    angles = positions[:, None].double() * base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (L, D/2)
    z = torch.complex(x[..., : dim // 2].double(), x[..., dim // 2 :].double()) * torch.polar(
        torch.ones_like(angles), angles
    )  # (..., L, D/2)
    return torch.cat((z.real, z.imag), dim=-1).to(x.dtype)  # (..., L, D)


class RopeMHA(nn.Module):
    """A hand-written MHA + KV cache + RoPE, with switches for the usual mistakes and other correct forms."""

    def __init__(self, hidden_dim, num_heads, rope_base=10000.0, **bug):
        super().__init__()
        self.num_heads, self.head_dim, self.rope_base = num_heads, hidden_dim // num_heads, rope_base
        self.q_proj = nn.Linear(hidden_dim, hidden_dim)
        self.k_proj = nn.Linear(hidden_dim, hidden_dim)
        self.v_proj = nn.Linear(hidden_dim, hidden_dim)
        self.o_proj = nn.Linear(hidden_dim, hidden_dim)
        self.bug = bug

    def rope(self, t, positions):
        base = 10000.0 if self.bug.get("base") == "ignored" else self.rope_base
        form = self.bug.get("form")
        if form == "interleaved":  # bug: pairs (2i, 2i+1) where the layer expects (i, i + D/2)
            return rope_interleaved(t, positions, base)
        if form == "complex":
            return rope_complex(t, positions, base)
        if form == "permuted":  # correct: move pair (i, i + D/2) next to each other, rotate interleaved, move back
            half = self.head_dim // 2
            order = torch.stack((torch.arange(half), torch.arange(half) + half), dim=-1).flatten()  # 0, D/2, 1, ...
            return rope_interleaved(t[..., order], positions, base)[..., order.argsort()]  # (..., L, D)
        return rope_half(t, positions, base, sign=self.bug.get("sign", 1), exponent=self.bug.get("exponent", 2))

    def forward(self, x, cache=None):
        B, L, hidden = x.shape
        value_proj = self.k_proj if self.bug.get("value") == "k" else self.v_proj
        q, k, v = (
            p(x).view(B, L, self.num_heads, self.head_dim).transpose(1, 2)
            for p in (self.q_proj, self.k_proj, value_proj)
        )  # (B, H, L, hd) each
        start = 0 if cache is None or self.bug.get("positions") == "restart" else len(cache)
        positions = torch.arange(start, start + L)  # (L,)
        q = self.rope(q, positions)  # (B, H, L, hd)
        after = self.bug.get("after_cache")  # rotate the keys when they are read back, not before caching
        if not after:
            k = self.rope(k, positions)  # (B, H, L, hd)
        if self.bug.get("rotate_v"):
            v = self.rope(v, positions)  # bug: V carries no position
        if self.bug.get("core") == "float32":  # correct: rotated in float64, attention (and cache) in float32
            q, k, v = q.float(), k.float(), v.float()
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H, T, hd)
        T = k.shape[-2]
        if after == "wrong":  # bug: every cached key gets the NEW token's positions
            k = self.rope(k, positions)  # (B, H, T, hd)
        elif after == "right":  # correct but wasteful: all T keys rotated by their own positions every step
            k = self.rope(k, torch.arange(T))  # (B, H, T, hd)
        if self.bug.get("core") == "einsum":
            scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.head_dim)  # (B, H, L, T)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(hidden if self.bug.get("scale") == "hidden" else self.head_dim)
        if self.bug.get("mask") == "top_left":
            mask = torch.ones(L, T, dtype=torch.bool).tril()  # bug: ignores T - L
        else:
            mask = torch.ones(L, T, dtype=torch.bool).tril(diagonal=T - L)  # (L, T) bottom-right
        if self.bug.get("mask") != "none":
            scores = scores.masked_fill(~mask, float("-inf"))  # (B, H, L, T)
        weights = scores.softmax(dim=-1)  # (B, H, L, T)
        out = (weights @ v).transpose(1, 2).reshape(B, L, hidden).to(x.dtype)  # (B, L, hidden)
        return self.o_proj(out), weights


def rope_class(**bug):
    class MyRopeMHA(RopeMHA):
        def __init__(self, hidden_dim, num_heads, rope_base=10000.0):
            super().__init__(hidden_dim, num_heads, rope_base, **bug)

    return MyRopeMHA


def test_rope_simulation_without_a_mistake_is_attn_core():
    """The grader's replay machinery, mistake-free, equals ac.MultiHeadAttention(rope_base=...) with a KVCache."""
    import attn_core as ac

    for hidden, heads, base in _CONFIGS:
        ref = ac.MultiHeadAttention(hidden, heads, rope_base=base).double().eval()
        x = torch.randn(2, 6, hidden, dtype=torch.float64)  # (B, T, hidden)
        steps = [x[:, :3], x[:, 3:4], x[:, 4:5], x[:, 5:6]]
        for (out, w), (want_out, want_w) in zip(
            _simulate(ref, steps, base), _reference_steps(ref, steps, ac.KVCache()), strict=True
        ):
            torch.testing.assert_close(out, want_out, rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(w, want_w, rtol=1e-12, atol=1e-12)


ROPE_MISTAKES = [
    (dict(rotate_v=True), "you rotated V as well"),
    (dict(positions="restart"), "the positions restart at 0 in every call"),
    (dict(form="interleaved"), "wrong pairing layout"),
    (dict(after_cache="wrong"), "rotated after caching"),
    (dict(sign=-1), "turns the wrong way"),
    (dict(exponent=1), "base^(-i/head_dim)"),
    (dict(base="ignored"), "whatever rope_base says"),
    (dict(mask="none"), "no causal mask"),
    (dict(mask="top_left"), "aligned top-left"),
]
USUAL_MISTAKES = [(dict(value="k"), "V comes from k_proj"), (dict(scale="hidden"), "scaled by √hidden_dim")]


@pytest.mark.parametrize(
    "answer, passes, phrase",
    [
        (None, False, "not attempted"),
        (rope_class(), True, "✅"),
        (rope_class(form="complex"), True, "✅"),
        (rope_class(form="permuted"), True, "✅"),
        (rope_class(core="einsum"), True, "✅"),
        (rope_class(core="float32"), True, "✅"),
        (rope_class(after_cache="right"), True, "UNROTATED keys"),
        *((rope_class(**bug), False, phrase) for bug, phrase in ROPE_MISTAKES + USUAL_MISTAKES),
    ],
)
def test_rope_mha_table(capsys, answer, passes, phrase):
    ok, out = verdict(capsys, check_rope_mha, answer)
    assert ok is passes and phrase in out, out
    if not passes:
        assert one_red_line(out), out


def test_rope_mistakes_are_told_apart(capsys):
    """Each RoPE mistake gets its own diagnosis and no other's; the decode-only ones are caught in a decode step."""
    phrases = [phrase for _, phrase in ROPE_MISTAKES]
    for bug, phrase in ROPE_MISTAKES:
        _, out = verdict(capsys, check_rope_mha, rope_class(**bug))
        assert [p for p in phrases if p in out] == [phrase], out
    for bug in (dict(positions="restart"), dict(after_cache="wrong"), dict(mask="top_left")):
        _, out = verdict(capsys, check_rope_mha, rope_class(**bug))
        assert "decode step 1" in out, out  # the full pass and the prefill were right


def test_rope_stubs_and_interface_errors(capsys):
    class InitStub(nn.Module):
        def __init__(self, hidden_dim, num_heads, rope_base=10000.0):
            super().__init__()
            raise NotImplementedError

    class ForwardStub(RopeMHA):
        def forward(self, x, cache=None): ...

    for answer in (None, ..., InitStub, ForwardStub):
        ok, out = verdict(capsys, check_rope_mha, answer)
        assert not ok and "not attempted" in out, out

    class NoBaseArg(RopeMHA):
        def __init__(self, hidden_dim, num_heads, base=10000.0):
            super().__init__(hidden_dim, num_heads, base)

    ok, out = verdict(capsys, check_rope_mha, NoBaseArg)
    assert not ok and "`rope_base`" in out

    class IgnoresCache(RopeMHA):
        def forward(self, x, cache=None):
            return super().forward(x)

    ok, out = verdict(capsys, check_rope_mha, IgnoresCache)
    assert not ok and "did not add this step's tokens to the cache" in out

    class OwnCacheOnly(RopeMHA):  # updates the cache but attends over the new keys only
        def forward(self, x, cache=None):
            if cache is not None:
                out, weights = super().forward(x)
                B, L, _ = x.shape
                k = self.k_proj(x).view(B, L, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, hd)
                cache.update(k, k)
                return out, weights
            return super().forward(x)

    ok, out = verdict(capsys, check_rope_mha, OwnCacheOnly)
    assert not ok and "attended over this step's keys only" in out, out

    class HeadsNotMerged(RopeMHA):
        def forward(self, x, cache=None):
            out, weights = super().forward(x, cache)
            return out.view(*out.shape[:2], self.num_heads, self.head_dim).transpose(1, 2), weights  # (B, H, L, hd)

    ok, out = verdict(capsys, check_rope_mha, HeadsNotMerged)
    assert not ok and one_red_line(out) and "out should have shape (B, L, hidden_dim) = (2, 6, 16)" in out, out


@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_rope_check_never_raises(junk, capsys):
    class Returns(RopeMHA):
        def forward(self, x, cache=None):
            return junk

    for answer in (Returns, junk, lambda *a, **k: junk):
        assert check_rope_mha(answer) is False
        assert one_red_line(capsys.readouterr().out)
