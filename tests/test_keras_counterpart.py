"""Keras 3 (torch backend) counterpart of attn_core: weight porting and mask conventions (notebook 10).

``keras.layers.MultiHeadAttention`` keeps the head axis in its kernels: query/key/value ``(D, H, d_k)``
with biases ``(H, d_k)``, output ``(H, d_k, D)`` with bias ``(D,)``. Flattening the head axes and
transposing (Keras stores ``(in, out)``, ``nn.Linear`` stores ``(out, in)``) must give an
``ac.MultiHeadAttention`` with the same outputs and per-head weights.
"""

import os

os.environ["KERAS_BACKEND"] = "torch"  # before keras is imported: Keras reads it once, at import

import keras  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from keras import layers, ops  # noqa: E402

import attn_core as ac  # noqa: E402

TOL = dict(atol=1e-5, rtol=1e-5)


def _tensor(variable) -> torch.Tensor:
    return variable.value.detach().clone()  # torch backend: a Variable wraps a torch Parameter


def copy_keras_mha(keras_mha, ac_mha):
    """The notebook's mapping: a built keras.layers.MultiHeadAttention -> ac.MultiHeadAttention."""
    pairs = [
        (keras_mha.query_dense, ac_mha.q_proj),
        (keras_mha.key_dense, ac_mha.k_proj),
        (keras_mha.value_dense, ac_mha.v_proj),
    ]
    with torch.no_grad():
        for dense, linear in pairs:
            kernel = _tensor(dense.kernel)  # (D, H, d_k)
            linear.weight.copy_(kernel.reshape(kernel.shape[0], -1).T)  # (H*d_k, D)
            linear.bias.copy_(_tensor(dense.bias).reshape(-1))  # (H*d_k,)
        kernel = _tensor(keras_mha.output_dense.kernel)  # (H, d_k, D)
        ac_mha.o_proj.weight.copy_(kernel.reshape(-1, kernel.shape[-1]).T)  # (D, H*d_k)
        ac_mha.o_proj.bias.copy_(_tensor(keras_mha.output_dense.bias))  # (D,)
    return ac_mha


def _pair(hidden_dim, num_heads, seed=0):
    keras.utils.set_random_seed(seed)
    keras_mha = layers.MultiHeadAttention(num_heads=num_heads, key_dim=hidden_dim // num_heads)
    # Keras initialises biases to zero; randomise them so the bias mapping is really tested.
    keras_mha.build((1, 1, hidden_dim), (1, 1, hidden_dim))
    generator = torch.Generator().manual_seed(seed)
    for dense in (keras_mha.query_dense, keras_mha.key_dense, keras_mha.value_dense, keras_mha.output_dense):
        dense.bias.assign(torch.randn(tuple(dense.bias.shape), generator=generator).numpy())
    return keras_mha, copy_keras_mha(keras_mha, ac.MultiHeadAttention(hidden_dim, num_heads).eval())


def _masks(batch, q_len, k_len):
    """Named masks in our convention, (B, Lq, Lk) bool, True = may attend; no fully blocked rows."""
    lengths = [k_len - i % 2 for i in range(batch)]  # some rows padded by one key
    padding = ac.padding_mask(lengths, k_len)[:, 0]  # (B, 1, Lk)
    causal = ac.causal_mask(q_len, k_len)  # (Lq, Lk), bottom-right aligned
    generator = torch.Generator().manual_seed(1)
    random = torch.rand(batch, q_len, k_len, generator=generator) < 0.6  # (B, Lq, Lk)
    random[..., 0] = True  # keep every row attending to something
    return {
        "none": None,
        "padding": padding.expand(batch, q_len, k_len),
        "causal+padding": (causal & padding) | (torch.arange(k_len) == 0),
        "random": random,
    }


@pytest.mark.parametrize(
    ("batch", "q_len", "k_len", "hidden_dim", "num_heads"),
    [(2, 5, 5, 8, 2), (1, 3, 7, 12, 3), (3, 4, 4, 16, 4), (2, 6, 6, 6, 1)],
)
def test_keras_mha_weight_copy_matches_outputs_and_scores(batch, q_len, k_len, hidden_dim, num_heads):
    keras_mha, ported = _pair(hidden_dim, num_heads)
    torch.manual_seed(0)
    x = torch.randn(batch, q_len, hidden_dim)  # (B, Lq, D)
    context = torch.randn(batch, k_len, hidden_dim)  # (B, Lk, D)
    for name, mask in _masks(batch, q_len, k_len).items():
        with torch.no_grad():
            out_k, scores_k = keras_mha(x, context, attention_mask=mask, return_attention_scores=True)
            fused_k = keras_mha(x, context, attention_mask=mask)  # Keras's fused path (no scores)
            out_ac, weights_ac = ported(x, context, mask=None if mask is None else mask[:, None])
        assert isinstance(out_k, torch.Tensor), "keras.ops on the torch backend return torch tensors"
        assert scores_k.shape == weights_ac.shape == (batch, num_heads, q_len, k_len), name
        torch.testing.assert_close(out_k, out_ac, **TOL, msg=lambda m, n=name: f"{n}: {m}")
        torch.testing.assert_close(scores_k, weights_ac, **TOL, msg=lambda m, n=name: f"{n}: {m}")
        torch.testing.assert_close(fused_k, out_ac, **TOL, msg=lambda m, n=name: f"{n}: {m}")


def test_keras_mha_kernel_layout():
    keras_mha, _ = _pair(8, 2)
    assert tuple(keras_mha.query_dense.kernel.shape) == (8, 2, 4)  # (D, H, d_k)
    assert tuple(keras_mha.query_dense.bias.shape) == (2, 4)  # (H, d_k)
    assert tuple(keras_mha.output_dense.kernel.shape) == (2, 4, 8)  # (H, d_k, D)
    assert tuple(keras_mha.output_dense.bias.shape) == (8,)


def test_reshape_without_transpose_is_caught():
    """The classic porting bug: right shape, wrong numbers."""
    keras_mha, ported = _pair(8, 2)
    kernel = _tensor(keras_mha.query_dense.kernel)  # (D, H, d_k)
    with torch.no_grad():
        ported.q_proj.weight.copy_(kernel.reshape(-1, 8))  # no .T
        x = torch.randn(2, 5, 8)
        out_k = keras_mha(x, x)
        out_bad, _ = ported(x)
    assert not torch.allclose(out_k, out_bad, atol=1e-3)


def test_tf_tutorial_and_keras_masks_convert_to_the_same_mask():
    ours = ac.causal_mask(5) & ac.padding_mask([5, 3])[:, 0]  # (B, Lq, Lk) True = attend
    keras_mask = ops.cast(ours, "float32")  # Keras: 1 = attend
    tf_mask = 1.0 - keras_mask  # TF tutorial: 1 = blocked
    assert torch.equal(ac.mask_from_float(keras_mask), ours)
    assert torch.equal(ac.mask_from_blocked(tf_mask), ours)
    assert torch.equal(ac.mask_from_blocked(tf_mask.bool()), ours)
    # additive form: 0 exactly where the tutorial's mask * -1e9 is 0
    assert torch.equal(ac.mask_to_additive(ours) == 0, tf_mask == 0)


def test_tf_tutorial_sdpa_with_converted_mask_matches_attn_core_and_keras():
    torch.manual_seed(0)
    batch, heads, length, head_dim = 2, 2, 5, 4
    q, k, v = (torch.randn(batch, heads, length, head_dim) for _ in range(3))  # (B, H, L, d)
    ours = ac.causal_mask(length) & ac.padding_mask([5, 3])[:, 0]  # (B, Lq, Lk)
    tf_mask = 1.0 - ops.cast(ours, "float32")  # (B, Lq, Lk) 1 = blocked

    logits = ops.matmul(q, ops.swapaxes(k, -1, -2)) / head_dim**0.5 + tf_mask[:, None] * -1e9  # (B, H, Lq, Lk)
    weights_tf = ops.softmax(logits, axis=-1)  # (B, H, Lq, Lk)
    out_tf = ops.matmul(weights_tf, v)  # (B, H, Lq, d)
    out_ac, weights_ac = ac.scaled_dot_product_attention(q, k, v, ac.mask_from_blocked(tf_mask)[:, None])
    torch.testing.assert_close(out_tf, out_ac, **TOL)
    torch.testing.assert_close(weights_tf, weights_ac, **TOL)

    # the same layer gives the same outputs from a Keras mask and from a converted TF-tutorial mask
    keras_mha, ported = _pair(8, 2)
    x = torch.randn(batch, length, 8)
    with torch.no_grad():
        out_keras = keras_mha(x, x, attention_mask=ops.cast(ours, "float32"))
        out_ported, _ = ported(x, mask=ac.mask_from_blocked(tf_mask)[:, None])
        out_flipped = keras_mha(x, x, attention_mask=tf_mask)  # the convention bug
    torch.testing.assert_close(out_keras, out_ported, **TOL)
    assert not torch.allclose(out_flipped, out_keras, atol=1e-3)


def test_dense_created_per_call_is_not_deterministic_and_layer_owned_dense_is():
    """Seed note 002's TF MHA bug: Dense(d_model) built inside the function draws fresh weights."""
    keras.utils.set_random_seed(0)
    x = torch.randn(2, 3, 8)
    with torch.no_grad():
        first = layers.Dense(8)(x)
        second = layers.Dense(8)(x)
        dense = layers.Dense(8)
        again = (dense(x), dense(x))
    assert not torch.allclose(first, second)
    torch.testing.assert_close(*again)
    assert len(dense.trainable_weights) == 2
