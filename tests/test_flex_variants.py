"""variants.flex_variants: FlexAttention's score_mod / mask_mod run eagerly on CPU == attn_core, in float64."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import attn_core as ac
from attn_core import flex_variants as fv
from tests.reference import randn

F64 = torch.float64
TOL64 = {"rtol": 1e-12, "atol": 1e-12}
B, H, L, D = 2, 4, 8, 8


@pytest.fixture(scope="module")
def qkv():
    return randn(B, H, L, D, seed=0), randn(B, H, L, D, seed=1), randn(B, H, L, D, seed=2)


def flex(q, k, v, *, score_mod=None, mask_mod=None):
    block_mask = None if mask_mod is None else create_block_mask(mask_mod, B, H, L, L, device="cpu")
    with warnings.catch_warnings():  # "flex_attention called without torch.compile()": eager on purpose
        warnings.simplefilter("ignore", UserWarning)
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


def test_causal_sliding_and_document_masks_equal_attn_core(qkv):
    q, k, v = qkv
    doc_ids = torch.tensor([[0, 0, 0, 1, 1, 2, 2, 2], [0, 1, 1, 1, 1, 1, 2, 2]])  # (B, L): packed documents
    expected_masks = {
        "causal": (fv.causal, ac.causal_mask(L, L)),
        "sliding": (fv.sliding_window(3), ac.sliding_window_mask(L, 3)),
        "document": (
            fv.and_masks(fv.causal, fv.document(doc_ids)),
            ac.causal_mask(L, L) & (doc_ids[:, None, :, None] == doc_ids[:, None, None, :]),
        ),
    }
    for name, (mask_mod, mask) in expected_masks.items():
        expected, _ = ac.scaled_dot_product_attention(q, k, v, mask)
        torch.testing.assert_close(flex(q, k, v, mask_mod=mask_mod), expected, **TOL64, msg=name)
        torch.testing.assert_close(fv.reference(q, k, v, mask_mod=mask_mod)[0], expected, **TOL64, msg=name)


def test_softcap_equals_the_textbook_and_squashes_large_logits(qkv):
    q, k, v = qkv
    mod = fv.softcap(2.0)
    scores = 2.0 * torch.tanh(q @ k.transpose(-2, -1) / math.sqrt(D) / 2.0)  # (B, H, L, L)
    scores = scores.masked_fill(~ac.causal_mask(L, L), -math.inf)
    expected = torch.softmax(scores, dim=-1) @ v
    torch.testing.assert_close(flex(q, k, v, score_mod=mod, mask_mod=fv.causal), expected, **TOL64)
    torch.testing.assert_close(fv.reference(q, k, v, score_mod=mod, mask_mod=fv.causal)[0], expected, **TOL64)
    assert mod(torch.tensor(1e6, dtype=F64), 0, 0, 0, 0) == pytest.approx(2.0)


def test_alibi_equals_the_textbook(qkv):
    q, k, v = qkv
    slopes = fv.alibi_slopes(H)  # (H,)
    torch.testing.assert_close(slopes, torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8], dtype=F64))
    distance = torch.arange(L)[:, None] - torch.arange(L)[None, :]  # (L, L): i - j
    scores = q @ k.transpose(-2, -1) / math.sqrt(D) - slopes[:, None, None] * distance  # (B, H, L, L)
    scores = scores.masked_fill(~ac.causal_mask(L, L), -math.inf)
    expected = torch.softmax(scores, dim=-1) @ v
    mod = fv.alibi(slopes)
    torch.testing.assert_close(flex(q, k, v, score_mod=mod, mask_mod=fv.causal), expected, **TOL64)
    torch.testing.assert_close(fv.reference(q, k, v, score_mod=mod, mask_mod=fv.causal)[0], expected, **TOL64)


def test_sinks_through_the_log_sum_exp_merge_equal_attn_core(qkv):
    q, k, v = qkv
    sinks = torch.tensor([0.5, -1.0, 2.0, 0.0], dtype=F64)  # (H,)
    expected, _ = ac.scaled_dot_product_attention(q, k, v, is_causal=True, sinks=sinks)
    block_mask = create_block_mask(fv.causal, B, H, L, L, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        got = fv.flex_attention_with_sinks(q, k, v, sinks, block_mask=block_mask)
    torch.testing.assert_close(got, expected, **TOL64)
    torch.testing.assert_close(fv.reference(q, k, v, mask_mod=fv.causal, sinks=sinks)[0], expected, **TOL64)
    with_mod = fv.reference(q, k, v, score_mod=lambda s, *_: s, mask_mod=fv.causal, sinks=sinks)[0]
    torch.testing.assert_close(with_mod, expected, **TOL64)  # the score_mod path applies sinks the same way


def test_reference_fully_masked_row_is_zero(qkv):
    q, k, v = qkv
    nothing = lambda b, h, q_idx, kv_idx: (q_idx > 100) & (kv_idx >= 0)  # noqa: E731
    out, weights = fv.reference(q, k, v, score_mod=fv.softcap(5.0), mask_mod=nothing)
    assert torch.equal(out, torch.zeros_like(out)) and torch.equal(weights, torch.zeros_like(weights))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: fv.softcap(0), "cap must be a positive finite number"),
        (lambda: fv.alibi_slopes(6), "power of two"),
        (lambda: fv.sliding_window(0), "window must be an int >= 1"),
        (lambda: fv.document(torch.zeros(3)), "integer tensor"),
    ],
)
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_flex_attention_has_no_backward_on_cpu():
    """What notebook 12c tells learners: FlexAttention runs forward on CPU, never backward."""
    q = randn(1, 1, 4, 4).requires_grad_()
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        flex(q, q, q)
