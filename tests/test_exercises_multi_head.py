"""The notebook-02 checkers accept correct answers and name the usual mistakes."""

from __future__ import annotations

import math

import pytest
import torch

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


def mha_forward_with(*, scale="head", value="v", flip_mask=False, use_context=True, out_proj=True):
    """A from-scratch MHA forward with one mistake switched on."""

    def mha_forward(x, layer, context=None, mask=None):
        source = x if context is None or not use_context else context
        batch, q_len, hidden = x.shape
        heads, head_dim = layer.num_heads, hidden // layer.num_heads

        def to_heads(t):
            return t.view(batch, t.shape[1], heads, head_dim).transpose(1, 2)

        q = to_heads(layer.q_proj(x))
        k = to_heads(layer.k_proj(source))
        v = to_heads((layer.k_proj if value == "k" else layer.v_proj)(source))
        divisor = {"head": math.sqrt(head_dim), "hidden": math.sqrt(hidden), "none": 1.0}[scale]
        scores = q @ k.transpose(-2, -1) / divisor
        if mask is not None:
            scores = scores.masked_fill(mask if flip_mask else ~mask, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        out = out.transpose(1, 2).reshape(batch, q_len, hidden)
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
