"""The notebook-02 checkers accept correct answers and name the usual mistakes."""

from __future__ import annotations

import math

import pytest
import torch
from learner_answers import JUNK, one_red_line

from attn_core.exercises import NOT_DONE
from attn_core.exercises.multi_head import (
    check_merge_heads,
    check_mha_forward,
    check_param_count,
    check_split_heads,
)

# --------------------------------------------------------------------------- answers


def split_heads(x, num_heads):
    batch, length, hidden = x.shape
    return x.view(batch, length, num_heads, hidden // num_heads).transpose(1, 2)


def split_heads_no_transpose(x, num_heads):
    batch, length, hidden = x.shape
    return x.view(batch, length, num_heads, hidden // num_heads)


def split_heads_one_view(x, num_heads):
    batch, length, hidden = x.shape
    return x.view(batch, num_heads, length, hidden // num_heads)


def split_heads_strided(x, num_heads):
    batch, length, hidden = x.shape
    return x.view(batch, length, hidden // num_heads, num_heads).permute(0, 3, 1, 2)


def merge_heads(t):
    batch, heads, length, head_dim = t.shape
    return t.transpose(1, 2).reshape(batch, length, heads * head_dim)


def merge_heads_view(t):
    batch, heads, length, head_dim = t.shape
    return t.transpose(1, 2).view(batch, length, heads * head_dim)


def merge_heads_no_transpose(t):
    batch, heads, length, head_dim = t.shape
    return t.reshape(batch, length, heads * head_dim)


def merge_heads_no_flatten(t):
    return t.transpose(1, 2)


def param_count(hidden_dim, num_heads, bias=True):
    return 4 * hidden_dim * hidden_dim + (4 * hidden_dim if bias else 0)


def mha_forward_with(
    *, scale="head", value="v", flip_mask=False, use_context=True, out_proj=True, mask_mode="fill", merge="ok"
):
    """A from-scratch MHA forward with one mistake switched on."""

    def mha_forward(x, layer, context=None, mask=None):
        source = x if context is None or not use_context else context
        batch, q_len, hidden = x.shape
        heads, head_dim = layer.num_heads, hidden // layer.num_heads

        def to_heads(t):  # (B, L, hidden) -> (B, H, L, head_dim)
            return t.view(batch, t.shape[1], heads, head_dim).transpose(1, 2)

        q = to_heads(layer.q_proj(x))  # (B, H, Lq, head_dim)
        k = to_heads(layer.k_proj(source))  # (B, H, Lk, head_dim)
        v = to_heads((layer.k_proj if value == "k" else layer.v_proj)(source))  # (B, H, Lk, head_dim)
        divisor = {"head": math.sqrt(head_dim), "hidden": math.sqrt(hidden), "none": 1.0}[scale]
        scores = q @ k.transpose(-2, -1) / divisor  # (B, H, Lq, Lk)
        if mask is not None and mask_mode == "fill":
            scores = scores.masked_fill(mask if flip_mask else ~mask, float("-inf"))
        elif mask is not None and mask_mode == "multiply":
            scores = scores * mask  # bug: a blocked score becomes 0, not -inf
        weights = torch.softmax(scores, dim=-1)  # (B, H, Lq, Lk)
        if mask is not None and mask_mode == "zero_after":
            weights = weights * mask  # bug: zeroed after the softmax, rows no longer sum to 1
        out = weights @ v  # (B, H, Lq, head_dim)
        if merge == "reshape":
            out = out.reshape(batch, q_len, hidden)  # bug: no transpose back
        else:
            out = out.transpose(1, 2).reshape(batch, q_len, hidden)  # (B, Lq, hidden)
        return layer.o_proj(out) if out_proj else out

    return mha_forward


def not_implemented(*args, **kwargs):
    raise NotImplementedError


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize(
    "check", [check_split_heads, check_merge_heads, check_param_count, check_mha_forward], ids=lambda c: c.__name__
)
@pytest.mark.parametrize("stub", [None, ..., not_implemented], ids=["None", "Ellipsis", "raises"])
def test_stub_answers_are_not_attempted(check, stub, capsys):
    assert check(stub) is False
    out = capsys.readouterr().out
    assert out.startswith("❌") and NOT_DONE in out


def test_function_result_instead_of_function(capsys):
    assert check_split_heads(torch.zeros(2, 3)) is False
    assert "pass the function itself" in capsys.readouterr().out


def test_split_heads_accepts_correct(capsys):
    assert check_split_heads(split_heads) is True
    assert capsys.readouterr().out.startswith("✅ split_heads")


@pytest.mark.parametrize(
    ("answer", "diagnosis"),
    [
        (split_heads_no_transpose, "now `.transpose(1, 2)`"),
        (split_heads_one_view, "cuts the *sequence* into heads"),
        (split_heads_strided, "every H-th feature"),
        (lambda x, num_heads: x.tolist(), "should be a torch.Tensor"),
    ],
    ids=["no-transpose", "one-view", "strided", "not-a-tensor"],
)
def test_split_heads_diagnoses(answer, diagnosis, capsys):
    assert check_split_heads(answer) is False
    out = capsys.readouterr().out
    assert out.startswith("❌") and diagnosis in out


def test_merge_heads_accepts_correct(capsys):
    assert check_merge_heads(merge_heads) is True
    assert capsys.readouterr().out.startswith("✅ merge_heads")


@pytest.mark.parametrize(
    ("answer", "diagnosis"),
    [
        (merge_heads_view, "RuntimeError: view size is not compatible"),
        (merge_heads_no_transpose, "without transposing back"),
        (merge_heads_no_flatten, "flatten the last two dims"),
    ],
    ids=["view-after-transpose", "no-transpose", "no-flatten"],
)
def test_merge_heads_diagnoses(answer, diagnosis, capsys):
    assert check_merge_heads(answer) is False
    out = capsys.readouterr().out
    assert out.startswith("❌") and diagnosis in out
    if answer is merge_heads_view:
        assert ".contiguous().view" in out


def test_param_count_accepts_correct(capsys):
    assert check_param_count(param_count) is True
    assert capsys.readouterr().out.startswith("✅ mha_param_count")


@pytest.mark.parametrize(
    ("answer", "diagnosis"),
    [
        (lambda d, h, bias=True: 4 * d * d, "add the 4 bias vectors"),
        (lambda d, h, bias=True: 3 * d * d + 3 * d * bias, "Q, K, V only"),
        (lambda d, h, bias=True: h * (4 * d * d + 4 * d * bias), "does not depend on num_heads"),
        (lambda d, h, bias=True: 4 * d * d + 4 * d, "with bias=False there are none"),
        (lambda d, h, bias=True: 4 * d * d + 4 * d * bias + 1, "expected 1050624, got 1050625"),
        (lambda d, h, bias=True: "many", "whole number"),
    ],
    ids=["no-bias", "no-out-proj", "times-heads", "bias-ignored", "off-by-one", "not-a-number"],
)
def test_param_count_diagnoses(answer, diagnosis, capsys):
    assert check_param_count(answer) is False
    out = capsys.readouterr().out
    assert out.startswith("❌") and diagnosis in out


def test_param_count_accepts_float_and_tensor_results(capsys):
    assert check_param_count(lambda d, h, bias=True: float(param_count(d, h, bias))) is True
    assert check_param_count(lambda d, h, bias=True: torch.tensor(param_count(d, h, bias))) is True


def test_mha_forward_accepts_correct(capsys):
    assert check_mha_forward(mha_forward_with()) is True
    assert capsys.readouterr().out.startswith("✅ mha_forward")


def test_mha_forward_accepts_out_weights_tuple(capsys):
    correct = mha_forward_with()
    assert check_mha_forward(lambda x, layer, context=None, mask=None: (correct(x, layer, context, mask), None))


@pytest.mark.parametrize(
    ("answer", "diagnosis"),
    [
        (mha_forward_with(scale="hidden"), "scaled by 1/√hidden_dim"),
        (mha_forward_with(scale="none"), "scale is missing"),
        (mha_forward_with(value="k"), "values come from layer.k_proj"),
        (mha_forward_with(out_proj=False), "o_proj is missing"),
        (mha_forward_with(flip_mask=True), "mask convention is flipped"),
        (mha_forward_with(use_context=False), "keys and values from `context` (Lk=7)"),
    ],
    ids=["sqrt-hidden", "no-scale", "v-from-k", "no-o-proj", "flipped-mask", "ignores-context"],
)
def test_mha_forward_diagnoses(answer, diagnosis, capsys):
    assert check_mha_forward(answer) is False
    out = capsys.readouterr().out
    assert out.startswith("❌") and diagnosis in out


def test_mha_forward_ignored_mask(capsys):
    correct = mha_forward_with()
    assert check_mha_forward(lambda x, layer, context=None, mask=None: correct(x, layer, context)) is False
    assert "the mask is ignored" in capsys.readouterr().out


def test_mha_forward_wrong_shape(capsys):
    def heads_not_merged(x, layer, context=None, mask=None):
        batch, length, hidden = x.shape
        return torch.zeros(batch, layer.num_heads, length, hidden // layer.num_heads)

    assert check_mha_forward(heads_not_merged) is False
    assert "merge the heads and apply layer.o_proj" in capsys.readouterr().out


def test_checks_do_not_touch_the_global_rng():
    torch.manual_seed(0)
    before = torch.rand(3)
    torch.manual_seed(0)
    check_mha_forward(mha_forward_with())
    assert torch.equal(torch.rand(3), before)


# --------------------------------------------------------------------------- the ARENA-style tables
# For each checker: the stub fails, the reference passes, correct answers written differently pass,
# and each usual mistake gets its own diagnosis (a phrase that only that diagnosis contains).


def split_unflatten(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)  # (B, H, L, head_dim)


def split_chunks(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)  # (B, H, L, head_dim): head h = h-th block


def split_reshape_float32(x, num_heads):
    batch, length, hidden = x.shape
    return x.float().reshape(batch, length, num_heads, -1).transpose(1, 2)  # exact: the grid fits float32


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (not_implemented, False, NOT_DONE),
        (split_heads, True, "✅"),
        (split_unflatten, True, "✅"),
        (split_chunks, True, "✅"),
        (split_reshape_float32, True, "✅"),
        (split_heads_no_transpose, False, "now `.transpose(1, 2)`"),
        (split_heads_one_view, False, "cuts the *sequence* into heads"),
        (split_heads_strided, False, "every H-th feature"),
    ],
)
def test_split_heads_table(answer, passes, phrase, capsys):
    assert check_split_heads(answer) is passes
    assert phrase in capsys.readouterr().out


def merge_cat(t):
    return torch.cat(t.unbind(1), dim=-1)  # (B, L, H * head_dim): heads side by side


def merge_permute_flatten(t):
    return t.permute(0, 2, 1, 3).flatten(2)  # (B, L, H * head_dim)


def merge_contiguous_view(t):
    batch, heads, length, head_dim = t.shape
    return t.transpose(1, 2).contiguous().view(batch, length, heads * head_dim)


def merge_view_after_transpose(t):
    batch, heads, length, head_dim = t.shape
    return t.transpose(1, 2).view(batch, length, heads * head_dim)  # bug: not contiguous


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (not_implemented, False, NOT_DONE),
        (merge_heads, True, "✅"),
        (merge_cat, True, "✅"),
        (merge_permute_flatten, True, "✅"),
        (merge_contiguous_view, True, "✅"),
        (merge_heads_no_transpose, False, "without transposing back"),
        (merge_heads_no_flatten, False, "flatten the last two dims"),
        (merge_view_after_transpose, False, "`.contiguous().view(...)`"),
    ],
)
def test_merge_heads_table(answer, passes, phrase, capsys):
    assert check_merge_heads(answer) is passes
    assert phrase in capsys.readouterr().out


def count_by_building(hidden_dim, num_heads, bias=True):
    with torch.device("meta"):  # shapes only
        layers = [torch.nn.Linear(hidden_dim, hidden_dim, bias=bias) for _ in range(4)]
    return sum(p.numel() for layer in layers for p in layer.parameters())


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (not_implemented, False, NOT_DONE),
        (param_count, True, "✅"),
        (count_by_building, True, "✅"),
        (lambda d, h, bias=True: float(param_count(d, h, bias)), True, "✅"),
        (lambda d, h, bias=True: torch.tensor(param_count(d, h, bias)), True, "✅"),
        (lambda d, h, bias=True: 4 * d * d, False, "the weights only"),
        (lambda d, h, bias=True: 3 * d * d + 3 * d * bias, False, "Q, K, V only"),
        (lambda d, h, bias=True: 4 * d * (d // h) * h + 4 * d * bias + h, False, "does not depend on num_heads"),
    ],
)
def test_param_count_table(answer, passes, phrase, capsys):
    assert check_param_count(answer) is passes
    assert phrase in capsys.readouterr().out


def forward_einsum(x, layer, context=None, mask=None):
    source = x if context is None else context
    heads = layer.num_heads
    q = layer.q_proj(x).unflatten(-1, (heads, -1))  # (B, Lq, H, head_dim)
    k = layer.k_proj(source).unflatten(-1, (heads, -1))  # (B, Lk, H, head_dim)
    v = layer.v_proj(source).unflatten(-1, (heads, -1))  # (B, Lk, H, head_dim)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)  # -1e9 is safe in float64
    out = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v)  # (B, Lq, H, head_dim)
    return layer.o_proj(out.flatten(2))  # (B, Lq, hidden)


def forward_torch_sdpa(x, layer, context=None, mask=None):
    source = x if context is None else context
    batch, q_len, hidden = x.shape
    heads = layer.num_heads
    q = layer.q_proj(x).view(batch, q_len, heads, -1).transpose(1, 2)  # (B, H, Lq, head_dim)
    k = layer.k_proj(source).view(batch, source.shape[1], heads, -1).transpose(1, 2)  # (B, H, Lk, head_dim)
    v = layer.v_proj(source).view(batch, source.shape[1], heads, -1).transpose(1, 2)  # (B, H, Lk, head_dim)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, Lq, head_dim)
    return layer.o_proj(out.transpose(1, 2).reshape(batch, q_len, hidden))  # (B, Lq, hidden)


def forward_head_loop(x, layer, context=None, mask=None):
    source = x if context is None else context
    heads, head_dim = layer.num_heads, x.shape[-1] // layer.num_heads
    q, k, v = layer.q_proj(x), layer.k_proj(source), layer.v_proj(source)  # (B, L, hidden) each
    outs = []
    for h in range(heads):
        cols = slice(h * head_dim, (h + 1) * head_dim)  # head h owns this block of features
        scores = q[..., cols] @ k[..., cols].mT / math.sqrt(head_dim)  # (B, Lq, Lk)
        if mask is not None:
            scores = scores.masked_fill(~mask.squeeze(1) if mask.dim() == 4 else ~mask, float("-inf"))
        outs.append(scores.softmax(-1) @ v[..., cols])  # (B, Lq, head_dim)
    return layer.o_proj(torch.cat(outs, dim=-1))  # (B, Lq, hidden)


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (not_implemented, False, NOT_DONE),
        (mha_forward_with(), True, "✅"),
        (forward_einsum, True, "✅"),
        (forward_torch_sdpa, True, "✅"),
        (forward_head_loop, True, "✅"),
        (mha_forward_with(mask_mode="multiply"), False, "you multiplied the scores by the mask"),
        (mha_forward_with(mask_mode="zero_after"), False, "you zeroed the blocked weights after the softmax"),
        (mha_forward_with(merge="reshape"), False, "merged with one reshape"),
        (mha_forward_with(scale="hidden"), False, "1/√hidden_dim"),
    ],
)
def test_mha_forward_table(answer, passes, phrase, capsys):
    assert check_mha_forward(answer) is passes
    assert phrase in capsys.readouterr().out


# ----- never raises: whatever the learner returns, a check prints one ❌ line and returns False -----


@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
@pytest.mark.parametrize("check", [check_split_heads, check_merge_heads, check_param_count, check_mha_forward])
def test_checks_never_raise(check, junk, capsys):
    assert check(lambda *args, **kwargs: junk) is False
    assert one_red_line(capsys.readouterr().out)
    assert check(junk) is False  # the value itself instead of a function
    assert one_red_line(capsys.readouterr().out)
