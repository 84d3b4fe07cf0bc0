"""Bad input raises the documented exception type with a message that names the offending numbers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import attn_core as ac


def qkv(
    q_shape: tuple[int, ...], k_shape: tuple[int, ...], v_shape: tuple[int, ...]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Zero tensors of the given shapes (values are irrelevant to shape checks)."""
    return torch.zeros(q_shape), torch.zeros(k_shape), torch.zeros(v_shape)


# --------------------------------------------------------------------------- layer construction


def test_hidden_dim_not_divisible_by_num_heads():
    """hidden_dim % num_heads != 0 raises ValueError naming both numbers."""
    with pytest.raises(ValueError, match=r"hidden_dim \(10\) must be divisible by num_heads \(3\)"):
        ac.MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match=r"hidden_dim \(30\) must be divisible by num_heads \(4\)"):
        ac.GroupedQueryAttention(30, 4, 2)


def test_num_heads_not_divisible_by_num_kv_heads():
    """num_heads % num_kv_heads != 0 raises ValueError naming both numbers and the valid choices."""
    with pytest.raises(ValueError, match=r"num_heads \(8\) must be divisible by num_kv_heads \(3\).*\[1, 2, 4, 8\]"):
        ac.GroupedQueryAttention(32, 8, 3)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((0, 2, 1), r"hidden_dim must be a positive int, got 0"),
        ((8, -2, 1), r"num_heads must be a positive int, got -2"),
        ((8, 2, 0), r"num_kv_heads must be a positive int, got 0"),
        ((8.0, 2, 1), r"hidden_dim must be a positive int, got 8.0"),
    ],
)
def test_non_positive_or_non_int_sizes(args, match):
    """Zero, negative or float layer sizes raise ValueError naming the argument and value."""
    with pytest.raises(ValueError, match=match):
        ac.GroupedQueryAttention(*args)


# --------------------------------------------------------------------------- attention inputs


def test_q_k_feature_dim_mismatch():
    """q and k with different last dims raise ValueError naming both dims."""
    q, k, v = qkv((1, 2, 3, 4), (1, 2, 5, 6), (1, 2, 5, 6))
    with pytest.raises(ValueError, match=r"same feature dim.*\(1, 2, 3, 4\) has 4, k \(1, 2, 5, 6\) has 6"):
        ac.scaled_dot_product_attention(q, k, v)


def test_k_v_length_mismatch():
    """k and v with different lengths raise ValueError naming both lengths."""
    q, k, v = qkv((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 6, 4))
    with pytest.raises(ValueError, match=r"with 5 keys, v \(1, 2, 6, 4\) with 6"):
        ac.scaled_dot_product_attention(q, k, v)


def test_query_heads_not_multiple_of_kv_heads():
    """Hq not a multiple of Hkv raises ValueError naming both head counts."""
    q, k, v = qkv((1, 6, 3, 4), (1, 4, 5, 4), (1, 4, 5, 4))
    with pytest.raises(ValueError, match=r"query heads \(6, q dim -3\) must be a multiple of key/value heads \(4"):
        ac.scaled_dot_product_attention(q, k, v)


def test_k_v_head_count_mismatch():
    """k and v with different head counts raise ValueError naming both shapes."""
    q, k, v = qkv((1, 4, 3, 4), (1, 2, 5, 4), (1, 4, 5, 4))
    with pytest.raises(ValueError, match=r"same number of heads.*k \(1, 2, 5, 4\) and v \(1, 4, 5, 4\)"):
        ac.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize(
    ("q_shape", "k_shape", "match"),
    [
        ((3, 4), (3, 4), r"q has shape \(3, 4\); attention needs at least 3 dims"),
        ((1, 2, 3, 4), (2, 5, 4), r"same number of dims"),
        ((1, 2, 3, 4), (2, 2, 5, 4), r"share their batch dims"),
    ],
)
def test_bad_ranks_and_batch_dims(q_shape, k_shape, match):
    """Too few dims, different ranks or different batch dims raise ValueError naming the shapes."""
    q, k, v = qkv(q_shape, k_shape, k_shape)
    with pytest.raises(ValueError, match=match):
        ac.scaled_dot_product_attention(q, k, v)


def test_mixed_dtypes_raise_type_error():
    """q, k, v of different dtypes raise TypeError naming the dtypes."""
    q, k, v = qkv((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4))
    with pytest.raises(TypeError, match=r"torch.float32, torch.float64, torch.float32"):
        ac.scaled_dot_product_attention(q, k.double(), v)


@pytest.mark.parametrize("mask_shape", [(3, 6), (3, 5, 6), (2, 1, 3, 1, 6), (7,), (2, 4, 6, 5)])
def test_mask_that_does_not_broadcast(mask_shape):
    """A mask that does not broadcast to (..., H, Lq, Lk) raises ValueError naming both shapes."""
    q, k, v = qkv((2, 4, 5, 3), (2, 4, 6, 3), (2, 4, 6, 3))
    mask = torch.ones(mask_shape, dtype=torch.bool)
    expected = rf"mask of shape \({', '.join(map(str, mask_shape))},?\) does not broadcast .*\(2, 4, 5, 6\)"
    with pytest.raises(ValueError, match=expected):
        ac.scaled_dot_product_attention(q, k, v, mask)


@pytest.mark.parametrize(
    "mask",
    [
        torch.tensor([[1.0, 0.0, 1.0]]),  # a float 0/1 mask, 1 = attend (Hugging Face's attention_mask)
        torch.tensor([[1, 0, 1]]),  # an int mask
        ac.mask_to_additive(torch.tensor([[True, False, True]])),  # an additive float mask
    ],
    ids=["float01", "int", "additive"],
)
def test_non_boolean_mask_raises_type_error_with_convention_hint(mask):
    """A float or int mask raises TypeError that states the convention and points to the converters."""
    q, k, v = qkv((1, 2, 1, 4), (1, 2, 3, 4), (1, 2, 3, 4))
    with pytest.raises(TypeError, match=rf"mask has dtype {mask.dtype}.*True = may attend") as info:
        ac.scaled_dot_product_attention(q, k, v, mask)
    message = str(info.value)
    assert "mask_from_float" in message and "mask_from_blocked" in message and "mask_from_additive" in message


def test_non_tensor_mask_raises_type_error():
    """A list mask raises TypeError naming the convention."""
    q, k, v = qkv((1, 2, 1, 4), (1, 2, 3, 4), (1, 2, 3, 4))
    with pytest.raises(TypeError, match=r"True = may attend.*got list"):
        ac.scaled_dot_product_attention(q, k, v, [[True, False, True]])


def test_layer_rejects_non_boolean_mask():
    """The layers pass masks through the same check: a float mask raises TypeError."""
    layer = ac.MultiHeadAttention(8, 2)
    with pytest.raises(TypeError, match="True = may attend.*mask_from_float"):
        layer(torch.randn(1, 3, 8), mask=torch.ones(3, 3))


# --------------------------------------------------------------------------- layer forward


@pytest.mark.parametrize(
    ("x_shape", "shown"),
    [((2, 3, 8), r"\(2, 3, 8\)"), ((3, 16), r"\(3, 16\)"), ((1, 2, 3, 16), r"\(1, 2, 3, 16\)")],
)
def test_layer_input_with_wrong_hidden_dim(x_shape, shown):
    """x whose shape is not (B, L, hidden_dim) raises ValueError naming hidden_dim and the shape."""
    layer = ac.GroupedQueryAttention(16, 4, 2)
    with pytest.raises(ValueError, match=rf"x must have shape \(batch, seq_len, hidden_dim=16\), got {shown}"):
        layer(torch.randn(x_shape))


def test_layer_context_with_wrong_hidden_dim_or_batch():
    """A context with the wrong hidden_dim or batch size raises ValueError naming the numbers."""
    layer = ac.MultiHeadAttention(16, 4)
    x = torch.randn(2, 3, 16)
    with pytest.raises(ValueError, match=r"context must have shape \(batch, seq_len, hidden_dim=16\), got \(2, 5, 8\)"):
        layer(x, torch.randn(2, 5, 8))
    with pytest.raises(ValueError, match=r"same batch size, got 2 and 3"):
        layer(x, torch.randn(3, 5, 16))


# --------------------------------------------------------------------------- dropout_p


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_function_rejects_dropout_outside_unit_interval(p):
    """scaled_dot_product_attention(dropout_p=p) with p outside [0, 1) raises ValueError naming p."""
    q, k, v = qkv((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4))
    with pytest.raises(ValueError, match=rf"dropout_p must be a number in \[0, 1\), got {p}"):
        ac.scaled_dot_product_attention(q, k, v, dropout_p=p)


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
@pytest.mark.parametrize(
    "make_layer",
    [
        lambda p: ac.MultiHeadAttention(8, 2, dropout=p),
        lambda p: ac.GroupedQueryAttention(8, 2, 1, dropout=p),
        lambda p: ac.MultiQueryAttention(8, 2, dropout=p),
    ],
    ids=["mha", "gqa", "mqa"],
)
def test_layer_rejects_dropout_outside_unit_interval(make_layer, p):
    """Layer constructors reject dropout outside [0, 1) with ValueError naming the value."""
    with pytest.raises(ValueError, match=rf"dropout_p must be a number in \[0, 1\), got {p}"):
        make_layer(p)


@pytest.mark.parametrize("p", [0.0, 0.5, 0.999])
def test_dropout_inside_unit_interval_is_accepted(p):
    """Valid dropout values construct and run (the boundary 0 included)."""
    layer = ac.MultiHeadAttention(8, 2, dropout=p).train()
    out, weights = layer(torch.randn(1, 3, 8))
    assert out.shape == (1, 3, 8) and weights.shape == (1, 2, 3, 3)


# --------------------------------------------------------------------------- no asserts for validation


def test_no_assert_statements_in_attn_core():
    """attn_core validates user input with exceptions, never `assert` (stripped under python -O)."""
    sources = sorted(Path(ac.__file__).parent.rglob("*.py"))
    assert sources, "no attn_core sources found"
    offenders = [
        f"{path.name}:{node.lineno}"
        for path in sources
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        if isinstance(node, ast.Assert)
    ]
    assert offenders == []
