"""Keras 3 (torch backend) counterpart of attn_core: weight porting and mask conventions (notebook 15).

``keras.layers.MultiHeadAttention`` keeps the head axis in its kernels: query/key/value ``(D, H, d_k)``
with biases ``(H, d_k)``, output ``(H, d_k, D)`` with bias ``(D,)``. Flattening the head axes and
transposing (Keras stores ``(in, out)``, ``nn.Linear`` stores ``(out, in)``) must give an
``ac.MultiHeadAttention(D, H, head_dim=d_k)`` with the same outputs and per-head weights, also when
``d_k != D / H``.

Precision. Both layers are float64. Keras's scores path (``return_attention_scores=True``) then runs in
float64 and must match to float64 rounding (TOL64). Its fused path does not: ``ops.dot_product_attention``
casts to ``keras.backend.result_type(...)``, which is float32 on this backend even for float64 inputs, so
that comparison uses :func:`float32_attention_bound`, a first-order rounding bound computed from the data.
"""

import os

os.environ["KERAS_BACKEND"] = "torch"  # before keras is imported: Keras reads it once, at import

import keras  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from keras import layers, ops  # noqa: E402

import attn_core as ac  # noqa: E402

F64 = torch.float64
# float64 roundings (u = 1.1e-16) along sums of at most ~40 terms of size <= 10 stay below 1e-13.
TOL64 = dict(atol=1e-12, rtol=0)
U32 = torch.finfo(torch.float32).eps / 2  # float32 unit roundoff, 6.0e-8


def float32_attention_bound(q, k, v, out_weight=None) -> float:
    """First-order bound on |float32 attention - exact| for q (..., Lq, d), k and v (..., Lk, d) in float64.

    Rounding analysis as in Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3, with u = eps / 2:
    - a score is a length-d dot product with sum of |terms| S; the casts of q and k to float32, the d products
      and sums, and softmax's subtraction of the row max move it by at most e = (d + 4) u S / sqrt(d);
    - softmax turns score errors <= e into weight errors <= 2 e w (first order), and adds its own exp, sum and
      divide (<= (Lk + 2) u w); the Lk-term weighted sum of values and the cast of v add (Lk + 2) u max|v|;
    - an output projection W (out, H*d) multiplies the attention error by at most max row sum of |W|.
    """
    d, keys = q.shape[-1], k.shape[-2]
    score_sums = (q.abs() @ k.abs().transpose(-2, -1)) / d**0.5  # (..., Lq, Lk): S of every score
    score_err = (d + 4) * U32 * score_sums.max().item()
    bound = (2 * score_err + (2 * keys + 4) * U32) * v.abs().max().item()
    if out_weight is not None:
        bound *= out_weight.abs().sum(dim=-1).max().item()
    return bound


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


def _pair(hidden_dim, num_heads, seed=0, key_dim=None):
    """A float64 keras.layers.MultiHeadAttention and its port; key_dim defaults to hidden_dim // num_heads."""
    key_dim = hidden_dim // num_heads if key_dim is None else key_dim
    keras.utils.set_random_seed(seed)
    keras_mha = layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim, dtype="float64")
    # Keras initialises biases to zero; randomise them so the bias mapping is really tested.
    keras_mha.build((1, 1, hidden_dim), (1, 1, hidden_dim))
    generator = torch.Generator().manual_seed(seed)
    for dense in (keras_mha.query_dense, keras_mha.key_dense, keras_mha.value_dense, keras_mha.output_dense):
        dense.bias.assign(torch.randn(tuple(dense.bias.shape), generator=generator, dtype=F64).numpy())
    ported = ac.MultiHeadAttention(hidden_dim, num_heads, head_dim=key_dim).double().eval()
    return keras_mha, copy_keras_mha(keras_mha, ported)


def _fused_bound(ported, x, context):
    """float32_attention_bound for the fused path of the Keras layer ported into ``ported``."""
    batch, heads, head_dim = x.shape[0], ported.num_heads, ported.head_dim
    q = ported.q_proj(x).view(batch, -1, heads, head_dim).transpose(1, 2)  # (B, H, Lq, d_k), float64
    k = ported.k_proj(context).view(batch, -1, heads, head_dim).transpose(1, 2)  # (B, H, Lk, d_k)
    v = ported.v_proj(context).view(batch, -1, heads, head_dim).transpose(1, 2)  # (B, H, Lk, d_k)
    return float32_attention_bound(q, k, v, ported.o_proj.weight)


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
    ("batch", "q_len", "k_len", "hidden_dim", "num_heads", "key_dim"),
    [
        (2, 5, 5, 8, 2, None),
        (1, 3, 7, 12, 3, None),
        (3, 4, 4, 16, 4, None),
        (2, 6, 6, 6, 1, None),
        (2, 5, 5, 8, 2, 3),  # key_dim != D / H: ported with head_dim=3
        (1, 3, 7, 12, 3, 8),
    ],
)
def test_keras_mha_weight_copy_matches_outputs_and_scores(batch, q_len, k_len, hidden_dim, num_heads, key_dim):
    keras_mha, ported = _pair(hidden_dim, num_heads, key_dim=key_dim)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(batch, q_len, hidden_dim, generator=generator, dtype=F64)  # (B, Lq, D)
    context = torch.randn(batch, k_len, hidden_dim, generator=generator, dtype=F64)  # (B, Lk, D)
    for name, mask in _masks(batch, q_len, k_len).items():
        with torch.no_grad():
            out_k, scores_k = keras_mha(x, context, attention_mask=mask, return_attention_scores=True)
            fused_k = keras_mha(x, context, attention_mask=mask)  # Keras's fused path (no scores), float32 inside
            out_ac, weights_ac = ported(x, context, mask=None if mask is None else mask[:, None])
            fused_tol = _fused_bound(ported, x, context)
        assert isinstance(out_k, torch.Tensor), "keras.ops on the torch backend return torch tensors"
        assert scores_k.shape == weights_ac.shape == (batch, num_heads, q_len, k_len), name
        torch.testing.assert_close(out_k, out_ac, **TOL64, msg=lambda m, n=name: f"{n}: {m}")
        torch.testing.assert_close(scores_k, weights_ac, **TOL64, msg=lambda m, n=name: f"{n}: {m}")
        # A worst-case bound (here 5e-5 to 4e-4; the measured error is 1e-7 to 5e-7), far below what a porting
        # or mask bug does to these outputs (> 1e-1: see the two bug tests below).
        assert fused_tol < 1e-3, f"{name}: the bound {fused_tol:.1e} would hide real bugs"
        torch.testing.assert_close(fused_k, out_ac, atol=fused_tol, rtol=0, msg=lambda m, n=name: f"{n}: {m}")


def test_keras_mha_kernel_layout():
    keras_mha, _ = _pair(8, 2)
    assert tuple(keras_mha.query_dense.kernel.shape) == (8, 2, 4)  # (D, H, d_k)
    assert tuple(keras_mha.query_dense.bias.shape) == (2, 4)  # (H, d_k)
    assert tuple(keras_mha.output_dense.kernel.shape) == (2, 4, 8)  # (H, d_k, D)
    assert tuple(keras_mha.output_dense.bias.shape) == (8,)
    keras_mha, ported = _pair(8, 2, key_dim=3)  # d_k independent of D / H, in Keras and in attn_core
    assert tuple(keras_mha.query_dense.kernel.shape) == (8, 2, 3)
    assert tuple(ported.q_proj.weight.shape) == (6, 8) and tuple(ported.o_proj.weight.shape) == (8, 6)


def test_reshape_without_transpose_is_caught():
    """The classic porting bug: right shape, wrong numbers."""
    keras_mha, ported = _pair(8, 2)
    kernel = _tensor(keras_mha.query_dense.kernel)  # (D, H, d_k)
    with torch.no_grad():
        ported.q_proj.weight.copy_(kernel.reshape(-1, 8))  # no .T
        x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(2), dtype=F64)
        out_k = keras_mha(x, x)
        out_bad, _ = ported(x)
    assert not torch.allclose(out_k, out_bad, atol=1e-3)


def test_tf_tutorial_and_keras_masks_convert_to_the_same_mask():
    ours = ac.causal_mask(5) & ac.padding_mask([5, 3])[:, 0]  # (B, Lq, Lk) True = attend
    keras_mask = ops.cast(ours, "float32")  # Keras: 1 = attend
    tf_mask = 1.0 - keras_mask  # the classic TF tutorial: 1 = blocked
    assert torch.equal(ac.mask_from_float(keras_mask), ours)
    assert torch.equal(ac.mask_from_blocked(tf_mask), ours)
    assert torch.equal(ac.mask_from_blocked(tf_mask.bool()), ours)
    # additive form: 0 exactly where the tutorial's mask * -1e9 is 0
    assert torch.equal(ac.mask_to_additive(ours) == 0, tf_mask == 0)


def test_tf_tutorial_sdpa_with_converted_mask_matches_attn_core_and_keras():
    generator = torch.Generator().manual_seed(0)
    batch, heads, length, head_dim = 2, 2, 5, 4
    q, k, v = (torch.randn(batch, heads, length, head_dim, generator=generator) for _ in range(3))  # (B, H, L, d)
    ours = ac.causal_mask(length) & ac.padding_mask([5, 3])[:, 0]  # (B, Lq, Lk)
    tf_mask = 1.0 - ops.cast(ours, "float32")  # (B, Lq, Lk) 1 = blocked

    # the tutorial's code in keras.ops: float32 (ops.matmul computes float32 here even for float64 inputs)
    logits = ops.matmul(q, ops.swapaxes(k, -1, -2)) / head_dim**0.5 + tf_mask[:, None] * -1e9  # (B, H, Lq, Lk)
    weights_tf = ops.softmax(logits, axis=-1)  # (B, H, Lq, Lk)
    out_tf = ops.matmul(weights_tf, v)  # (B, H, Lq, d)
    q64, k64, v64 = q.double(), k.double(), v.double()  # exact copies: the float64 truth
    out_ac, weights_ac = ac.scaled_dot_product_attention(q64, k64, v64, ac.mask_from_blocked(tf_mask)[:, None])
    bound = float32_attention_bound(q64, k64, v64)  # weights: the same bound with max|v| = 1
    torch.testing.assert_close(out_tf.double(), out_ac, atol=bound, rtol=0)
    torch.testing.assert_close(weights_tf.double(), weights_ac, atol=bound / v64.abs().max().item(), rtol=0)

    # the same layer gives the same outputs from a Keras mask and from a converted TF-tutorial mask
    keras_mha, ported = _pair(8, 2)
    x = torch.randn(batch, length, 8, generator=generator, dtype=F64)
    with torch.no_grad():
        out_keras = keras_mha(x, x, attention_mask=ops.cast(ours, "float32"))  # fused path: float32 inside
        out_ported, _ = ported(x, mask=ac.mask_from_blocked(tf_mask)[:, None])
        out_flipped = keras_mha(x, x, attention_mask=tf_mask)  # the convention bug
        fused_tol = _fused_bound(ported, x, x)
    torch.testing.assert_close(out_keras, out_ported, atol=fused_tol, rtol=0)
    assert not torch.allclose(out_flipped, out_keras, atol=1e-3)


def test_dense_created_per_call_is_not_deterministic_and_layer_owned_dense_is():
    """The TensorFlow MHA bug of notebook 15: Dense(d_model) built inside the function draws fresh weights."""
    keras.utils.set_random_seed(0)
    x = torch.randn(2, 3, 8)
    with torch.no_grad():
        first = layers.Dense(8)(x)
        second = layers.Dense(8)(x)
        dense = layers.Dense(8)
        again = (dense(x), dense(x))
    assert not torch.allclose(first, second)
    assert torch.equal(*again)  # the same weights on the same input: identical, not merely close
    assert len(dense.trainable_weights) == 2
