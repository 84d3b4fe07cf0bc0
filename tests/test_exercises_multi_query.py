"""The checks of notebook 03 accept a right answer and diagnose realistic wrong ones (never raising)."""

from __future__ import annotations

import math

import pytest
import torch
from learner_answers import JUNK, one_red_line
from torch import nn

from attn_core.exercises import NOT_DONE
from attn_core.exercises.multi_query import check_max_cached_tokens, check_mqa_module, check_mqa_num_params

# --------------------------------------------------------------------------- exercise 1: max_cached_tokens


def tokens_right(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element):
    return free_bytes // (2 * num_layers * num_kv_heads * head_dim * bytes_per_element)


def tokens_uses_num_heads(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element):
    return free_bytes // (2 * num_layers * num_heads * head_dim * bytes_per_element)


def tokens_no_factor_two(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element):
    return free_bytes // (num_layers * num_kv_heads * head_dim * bytes_per_element)


def tokens_no_layers(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element):
    return free_bytes // (2 * num_kv_heads * head_dim * bytes_per_element)


def tokens_true_division(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element):
    return free_bytes / (2 * num_layers * num_kv_heads * head_dim * bytes_per_element)


def tokens_stub(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element):
    return ...


def tokens_raises(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element):
    raise NotImplementedError


def test_max_cached_tokens_accepts_right_answer(capsys):
    assert check_max_cached_tokens(tokens_right) is True
    assert "✅ max_cached_tokens: correct." in capsys.readouterr().out


@pytest.mark.parametrize(
    ("answer", "diagnosis"),
    [
        (tokens_uses_num_heads, "changes with num_heads"),
        (tokens_no_factor_two, "key AND a value"),
        (tokens_no_layers, "doubling num_layers"),
        (tokens_true_division, "round down with //"),
    ],
)
def test_max_cached_tokens_diagnoses(answer, diagnosis, capsys):
    assert check_max_cached_tokens(answer) is False
    out = capsys.readouterr().out
    assert out.startswith("❌ max_cached_tokens:")
    assert diagnosis in out


@pytest.mark.parametrize("answer", [None, ..., tokens_stub, tokens_raises])
def test_max_cached_tokens_not_done(answer, capsys):
    assert check_max_cached_tokens(answer) is False
    assert NOT_DONE in capsys.readouterr().out


def test_max_cached_tokens_result_instead_of_function(capsys):
    assert check_max_cached_tokens(1234) is False
    assert "pass the function itself" in capsys.readouterr().out


# --------------------------------------------------------------------------- exercise 2: mqa_num_params


def params_right(hidden_dim, num_heads):
    head_dim = hidden_dim // num_heads
    return 2 * (hidden_dim * hidden_dim + hidden_dim) + 2 * (hidden_dim * head_dim + head_dim)


def params_mha(hidden_dim, num_heads):
    return 4 * (hidden_dim * hidden_dim + hidden_dim)


def params_no_bias(hidden_dim, num_heads):
    return 2 * hidden_dim * hidden_dim + 2 * hidden_dim * (hidden_dim // num_heads)


def params_no_o_proj(hidden_dim, num_heads):
    head_dim = hidden_dim // num_heads
    return hidden_dim * hidden_dim + hidden_dim + 2 * (hidden_dim * head_dim + head_dim)


def params_wrong_only_sometimes(hidden_dim, num_heads):
    return params_right(hidden_dim, num_heads) + (num_heads == 3)


def test_mqa_num_params_accepts_right_answer(capsys):
    assert check_mqa_num_params(params_right) is True
    assert "✅ mqa_num_params: correct." in capsys.readouterr().out


@pytest.mark.parametrize(
    ("answer", "diagnosis"),
    [
        (params_mha, "that is the multi-head count"),
        (params_no_bias, "left out the biases"),
        (params_no_o_proj, "left out o_proj"),
        (params_wrong_only_sometimes, "hidden_dim=96, num_heads=3"),
    ],
)
def test_mqa_num_params_diagnoses(answer, diagnosis, capsys):
    assert check_mqa_num_params(answer) is False
    assert diagnosis in capsys.readouterr().out


def test_mqa_num_params_not_done(capsys):
    assert check_mqa_num_params(lambda hidden_dim, num_heads: ...) is False
    assert NOT_DONE in capsys.readouterr().out


# --------------------------------------------------------------------------- exercise 3: the module


class RightMQA(nn.Module):
    def __init__(
        self,
        hidden_dim,
        num_heads,
        *,
        kv_dim=None,
        flip=False,
        scale=True,
        value_from_k=False,
        noisy=False,
        fill=float("-inf"),
    ):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, hidden_dim // num_heads
        kv_dim = self.head_dim if kv_dim is None else kv_dim
        self.flip, self.scale, self.value_from_k, self.noisy, self.fill = flip, scale, value_from_k, noisy, fill
        self.q_proj = nn.Linear(hidden_dim, hidden_dim)
        self.k_proj = nn.Linear(hidden_dim, kv_dim)
        self.v_proj = nn.Linear(hidden_dim, kv_dim)
        self.o_proj = nn.Linear(hidden_dim, hidden_dim)

    def forward(self, x, mask=None):
        batch, length, hidden = x.shape
        q = self.q_proj(x).view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, d)
        k = self.k_proj(x).unsqueeze(1)  # (B, 1, L, d)
        v = (self.k_proj if self.value_from_k else self.v_proj)(x).unsqueeze(1)  # (B, 1, L, d)
        scores = q @ k.transpose(-2, -1)  # (B, H, L, L)
        if self.scale:
            scores = scores / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(mask if self.flip else ~mask, self.fill)  # (B, H, L, L)
        weights = scores.softmax(dim=-1)  # (B, H, L, L)
        if self.noisy:
            print("attention weights:", weights)
        out = (weights @ v).transpose(1, 2).reshape(batch, length, hidden)  # (B, L, hidden)
        return self.o_proj(out)


def variant(**knobs):
    class Variant(RightMQA):
        def __init__(self, hidden_dim, num_heads):
            super().__init__(hidden_dim, num_heads, **knobs)

    return Variant


class NoMaskArgument(RightMQA):
    def forward(self, x):
        return super().forward(x)


class Stub(nn.Module):
    def __init__(self, hidden_dim, num_heads):
        super().__init__()
        raise NotImplementedError


def test_mqa_module_accepts_right_answer(capsys):
    torch.manual_seed(123)
    before = torch.randn(3)
    torch.manual_seed(123)
    assert check_mqa_module(RightMQA) is True
    assert "✅ mqa_module: correct." in capsys.readouterr().out
    assert torch.equal(torch.randn(3), before), "the check must not consume the learner's random stream"


@pytest.mark.parametrize(
    ("answer", "diagnosis"),
    [
        (variant(kv_dim=16), "k_proj maps hidden -> hidden (16 -> 16)"),
        (variant(scale=False), "you did not scale the scores"),
        (variant(value_from_k=True), "the values use k_proj"),
        (variant(flip=True), "the mask convention is flipped"),
        (variant(flip=True, fill=-1e9), "the mask convention is flipped"),
        (variant(noisy=True), "forward printed"),
        (NoMaskArgument, "Give forward a `mask=None` argument"),
    ],
)
def test_mqa_module_diagnoses(answer, diagnosis, capsys):
    assert check_mqa_module(answer) is False
    out = capsys.readouterr().out
    assert out.startswith("❌ mqa_module:")
    assert diagnosis in out


@pytest.mark.parametrize("answer", [None, ..., Stub])
def test_mqa_module_not_done(answer, capsys):
    assert check_mqa_module(answer) is False
    assert NOT_DONE in capsys.readouterr().out


# --------------------------------------------------------------------------- the ARENA-style tables
# For each checker: the stub fails, the reference passes, correct answers written differently pass,
# and each usual mistake gets its own diagnosis (a phrase that only that diagnosis contains).


def tokens_floor_float(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element):
    return math.floor(free_bytes / (2 * num_layers * num_kv_heads * head_dim * bytes_per_element))


def tokens_numpy(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element):
    import numpy as np

    per_token = np.prod([2, num_layers, num_kv_heads, head_dim, bytes_per_element], dtype=np.int64)
    return np.int64(free_bytes) // per_token  # a numpy integer


def tokens_tensor(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element):
    per_layer = 2 * num_kv_heads * head_dim * bytes_per_element  # bytes per token per layer
    return torch.tensor(free_bytes // per_layer // num_layers)  # floor twice == floor once for positive ints


def tokens_no_bytes(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element):
    return free_bytes // (2 * num_layers * num_kv_heads * head_dim)


def tokens_rounded(free_bytes, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element):
    return round(free_bytes / (2 * num_layers * num_kv_heads * head_dim * bytes_per_element))


def tokens_renamed(budget, num_layers, num_heads, num_kv_heads, head_dim, bytes_per_element):
    return budget // (2 * num_layers * num_kv_heads * head_dim * bytes_per_element)


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (tokens_raises, False, NOT_DONE),
        (tokens_right, True, "✅"),
        (tokens_floor_float, True, "✅"),
        (tokens_numpy, True, "✅"),
        (tokens_tensor, True, "✅"),
        (tokens_no_bytes, False, "doubling bytes_per_element should halve"),
        (tokens_no_factor_two, False, "twice the right number"),
        (tokens_rounded, False, "one token too many"),
        (tokens_renamed, False, "keep the parameter names of the exercise: name the arguments `free_bytes`"),
        (tokens_uses_num_heads, False, "Use num_kv_heads"),
    ],
)
def test_max_cached_tokens_table(answer, passes, phrase, capsys):
    assert check_max_cached_tokens(answer) is passes
    out = capsys.readouterr().out
    assert phrase in out, out
    assert "factor 2" not in out or answer is tokens_no_factor_two  # only the K/V mistake is called that


def params_by_building(hidden_dim, num_heads):
    head_dim = hidden_dim // num_heads
    with torch.device("meta"):  # shapes only
        layers = [nn.Linear(hidden_dim, out) for out in (hidden_dim, head_dim, head_dim, hidden_dim)]
    return sum(p.numel() for layer in layers for p in layer.parameters())


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (lambda hidden_dim, num_heads: ..., False, NOT_DONE),
        (params_right, True, "✅"),
        (params_by_building, True, "✅"),
        (lambda d, h: float(params_right(d, h)), True, "✅"),
        (lambda d, h: torch.tensor(params_right(d, h)), True, "✅"),
        (params_mha, False, "that is the multi-head count"),
        (params_no_bias, False, "left out the biases"),
        (params_no_o_proj, False, "left out o_proj"),
    ],
)
def test_mqa_num_params_table(answer, passes, phrase, capsys):
    assert check_mqa_num_params(answer) is passes
    assert phrase in capsys.readouterr().out


class ExpandMQA(RightMQA):
    """Correct: K/V expanded to every head (a view), then ordinary attention."""

    def forward(self, x, mask=None):
        batch, length, hidden = x.shape
        q = self.q_proj(x).view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, d)
        k = self.k_proj(x).unsqueeze(1).expand(-1, self.num_heads, -1, -1)  # (B, H, L, d)
        v = self.v_proj(x).unsqueeze(1).expand(-1, self.num_heads, -1, -1)  # (B, H, L, d)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, L, d)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, hidden))


class FoldedMQA(RightMQA):
    """Correct: the query heads folded into the length axis, one matmul against the single K."""

    def forward(self, x, mask=None):
        batch, length, hidden = x.shape
        q = self.q_proj(x).view(batch, length * self.num_heads, self.head_dim)  # (B, L·H, d), rows (l, h)
        k, v = self.k_proj(x), self.v_proj(x)  # (B, L, d) each
        scores = q @ k.mT / math.sqrt(self.head_dim)  # (B, L·H, L)
        if mask is not None:
            scores = scores.masked_fill(~mask.repeat_interleave(self.num_heads, dim=0), -1e9)  # (L·H, L)
        out = scores.softmax(-1) @ v  # (B, L·H, d)
        return self.o_proj(out.reshape(batch, length, hidden)), None  # (out, weights) is accepted


class EinsumMQA(RightMQA):
    """Correct: einsum with the shared head broadcast."""

    def forward(self, x, mask=None):
        batch, length, hidden = x.shape
        q = self.q_proj(x).unflatten(-1, (self.num_heads, self.head_dim))  # (B, L, H, d)
        scores = torch.einsum("bqhd,bkd->bhqk", q, self.k_proj(x)) / math.sqrt(self.head_dim)  # (B, H, L, L)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        out = torch.einsum("bhqk,bkd->bqhd", scores.softmax(-1), self.v_proj(x))  # (B, L, H, d)
        return self.o_proj(out.flatten(2))


class MergeWithoutTranspose(RightMQA):
    def forward(self, x, mask=None):
        batch, length, hidden = x.shape
        q = self.q_proj(x).view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, d)
        scores = q @ self.k_proj(x).unsqueeze(1).mT / math.sqrt(self.head_dim)  # (B, H, L, L)
        out = scores.softmax(-1) @ self.v_proj(x).unsqueeze(1)  # (B, H, L, d)
        return self.o_proj(out.reshape(batch, length, hidden))  # bug: no transpose back


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (Stub, False, NOT_DONE),
        (RightMQA, True, "✅"),
        (ExpandMQA, True, "✅"),
        (FoldedMQA, True, "✅"),
        (EinsumMQA, True, "✅"),
        (variant(kv_dim=16), False, "MQA has ONE shared head"),
        (variant(scale=False), False, "you did not scale the scores"),
        (variant(value_from_k=True), False, "the values use k_proj"),
        (MergeWithoutTranspose, False, "the heads are merged in the wrong order"),
    ],
)
def test_mqa_module_table(answer, passes, phrase, capsys):
    assert check_mqa_module(answer) is passes
    assert phrase in capsys.readouterr().out


# ----- never raises: whatever the learner returns, a check prints one ❌ line and returns False -----


def module_returning(junk):
    class Returns(RightMQA):
        def forward(self, x, mask=None):
            return junk

    return Returns


@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_checks_never_raise(junk, capsys):
    for check in (check_max_cached_tokens, check_mqa_num_params, check_mqa_module):
        assert check(lambda *args, **kwargs: junk) is False
        assert one_red_line(capsys.readouterr().out)
        assert check(junk) is False  # the value itself instead of a function or class
        assert one_red_line(capsys.readouterr().out)
    assert check_mqa_module(module_returning(junk)) is False
    assert one_red_line(capsys.readouterr().out)
