"""A padded batch through Gemma 3 (``attention_mask``, Hugging Face's convention: 1 = real token, 0 = padding):
each row's logits at its real tokens equal that row run alone and Hugging Face's on the same batch; generation
from a left-padded batch gives each row its own greedy tokens, and Hugging Face's; bad masks raise ValueError.

Tolerances as in test_gemma3.py: a float32 run is within LOGIT_TOL32 * max|logit| of the exact logits, so two
float32 runs (a row in a batch, the row alone; ours, Hugging Face's) are within twice that of each other. The
layer-level check is float64 against the row alone (a few dot products of 16 features: 1e-12 is ~1000 eps).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import attn_core as ac  # noqa: E402

LOGIT_TOL32 = 18 * 10 * math.sqrt(2048) * 2.0**-24  # relative to max |logit| (test_gemma3.py's derivation)
TEXTS = ["The capital of France is Paris, and the capital of Germany is", "Hello", "Attention is all you"]
PAD = 0


@pytest.fixture(scope="module")
def rows(lm):
    return [lm.encode(text) for text in TEXTS]  # lengths 14, 2, 5


def batch(rows, side):
    """Padded ids (B, L) and the mask (B, L), padding on the left or on the right."""
    length = max(map(len, rows))
    ids, mask = [], []
    for row in rows:
        pad = [PAD] * (length - len(row))
        ids.append(pad + row if side == "left" else row + pad)
        ones, zeros = [1] * len(row), [0] * len(pad)
        mask.append(zeros + ones if side == "left" else ones + zeros)
    return torch.tensor(ids), torch.tensor(mask)  # (B, L), (B, L)


def real_part(tensor, mask, b):
    return tensor[b][mask[b].bool()]  # (n_b, ...): row b at its real tokens


@pytest.mark.parametrize("side", ["left", "right"])
def test_each_row_equals_the_row_alone_and_hugging_face(lm, hf, rows, side):
    ids, mask = batch(rows, side)
    with torch.no_grad():
        ours = lm(ids, attention_mask=mask)  # (3, 14, vocab)
        theirs = hf(ids, attention_mask=mask).logits  # (3, 14, vocab)
        alone = [lm(torch.tensor([row]))[0] for row in rows]  # (n_b, vocab) each
    scale = max(a.abs().max() for a in alone)  # ~25
    for b, expected in enumerate(alone):
        assert (real_part(ours, mask, b) - expected).abs().max() <= 2 * LOGIT_TOL32 * scale, b
        assert (real_part(ours, mask, b) - real_part(theirs, mask, b)).abs().max() <= 2 * LOGIT_TOL32 * scale, b
        assert torch.equal(real_part(ours, mask, b).argmax(-1), expected.argmax(-1)), b
    assert ours.isfinite().all()  # padding positions too: no NaN anywhere


def test_mask_dtypes_and_hugging_faces_argument_order(lm, rows):
    ids, mask = batch(rows, "left")
    with torch.no_grad():
        expected = lm(ids, attention_mask=mask)  # (3, 14, vocab), int64 mask
        assert torch.equal(lm(ids, mask), expected)  # lm(input_ids, attention_mask) as in Hugging Face
        for dtype in (torch.bool, torch.int32, torch.uint8):
            assert torch.equal(lm(ids, attention_mask=mask.to(dtype)), expected), dtype
        ones = lm(ids[:1], attention_mask=torch.ones_like(ids[:1]))  # no padding: the unmasked pass
        assert (ones - lm(ids[:1])).abs().max() <= 2 * LOGIT_TOL32 * ones.abs().max()


def test_a_padded_batch_continues_through_caches(lm, rows):
    """Prefill 13 tokens, then the 14th through the caches, the mask covering cached + new tokens: the same logits
    as the full pass (a prefix where a row has no real token yet is refused: 13 is the shortest for "Hello")."""
    ids, mask = batch(rows, "left")
    with torch.no_grad():
        full = lm(ids, attention_mask=mask)  # (3, 14, vocab)
        caches = lm.new_caches()
        lm(ids[:, :13], caches, attention_mask=mask[:, :13])  # every row has a real token by index 12
        step = lm(ids[:, 13:], caches, attention_mask=mask)  # (3, 1, vocab)
    assert (step[:, 0] - full[:, 13]).abs().max() <= 2 * LOGIT_TOL32 * full.abs().max()


def test_left_padded_generation_matches_each_row_alone_and_hugging_face(lm, hf, rows):
    ids, mask = batch(rows, "left")
    ours = lm.generate(ids, 12, attention_mask=mask)  # (3, 14 + 12)
    for b, row in enumerate(rows):
        alone = lm.generate(torch.tensor([row]), 12)  # (1, n_b + 12)
        assert torch.equal(ours[b, ids.shape[1] - len(row) :], alone[0]), b
    expected = hf.generate(
        ids, attention_mask=mask, do_sample=False, max_new_tokens=12, min_new_tokens=12, pad_token_id=PAD
    )
    assert torch.equal(ours, expected)
    assert torch.equal(lm.generate(ids, 12, mask), ours)  # the mask as the third positional argument
    sampled = lm.generate(ids, 4, attention_mask=mask, temperature=0.8, top_k=20, generator=torch.Generator())
    assert sampled.shape == (3, 18) and torch.equal(sampled[:, :14], ids)


@pytest.mark.parametrize(
    ("make_mask", "message"),
    [
        (lambda ids: torch.ones(ids.shape[0], ids.shape[1] + 1, dtype=torch.long), r"shape \(batch, seq_len\)"),
        (lambda ids: torch.ones(ids.shape[1], dtype=torch.long), r"shape \(batch, seq_len\)"),
        (lambda ids: torch.full(ids.shape, 2), r"only 0 \(padding\) and 1 \(real token\), got \[2\]"),
        (lambda ids: torch.full(ids.shape, 0.5), "integers or booleans"),
        (lambda ids: torch.ones(ids.shape).index_fill(0, torch.tensor([1]), 0).long(), r"rows \[1\] have no real"),
        (lambda ids: [[1] * ids.shape[1]] * ids.shape[0], "must be a tensor"),
    ],
    ids=["too-long", "1-D", "value-2", "float", "empty-row", "list"],
)
def test_bad_masks_raise(lm, rows, make_mask, message):
    ids, _ = batch(rows, "left")
    with pytest.raises(ValueError, match=message):
        lm(ids, attention_mask=make_mask(ids))
    with pytest.raises(ValueError, match=message):
        lm.generate(ids, 2, attention_mask=make_mask(ids))


def test_generation_refuses_right_padding(lm, rows):
    ids, mask = batch(rows, "right")
    with pytest.raises(ValueError, match=r"LEFT padding .* rows \[1, 2\] end with padding"):
        lm.generate(ids, 2, attention_mask=mask)


def test_layer_key_mask_equals_the_row_alone_in_float64():
    """GroupedQueryAttention(key_mask=...) with a window and a window cache, fed in chunks: a left-padded row's
    outputs at its real tokens equal the row alone (float64; positions passed as the model passes them)."""
    torch.manual_seed(0)
    layer = ac.GroupedQueryAttention(16, 4, 2, rope_base=10_000.0, sliding_window=3).double().eval()
    x = torch.randn(2, 9, 16, dtype=torch.float64)  # (B, L, hidden); row 1 has 4 padding tokens first
    real = torch.ones(2, 9, dtype=torch.bool).index_fill(1, torch.arange(4), False) | torch.tensor([[True], [False]])
    positions = (real.long().cumsum(-1) - 1).clamp(min=0)  # (B, L)
    cache, outs = ac.KVCache(window=3), []
    for begin, end in ((0, 5), (5, 6), (6, 9)):  # a chunk across the padding, then one token, then three
        out, _ = layer(x[:, begin:end], is_causal=True, cache=cache, positions=positions[:, begin:end], key_mask=real)
        outs.append(out)  # (B, l, hidden)
    batched = torch.cat(outs, dim=1)  # (B, L, hidden)
    alone, _ = layer(x[1:, 4:], is_causal=True)  # (1, 5, hidden)
    assert (batched[1, 4:] - alone[0]).abs().max() <= 1e-12
    full, _ = layer(x[:1], is_causal=True)  # (1, 9, hidden): the unpadded row
    assert (batched[0] - full[0]).abs().max() <= 1e-12
    with pytest.raises(ValueError, match=r"key_mask must be a bool tensor \(B, N\) with B = 2 and N >= .* = 9"):
        layer(x, is_causal=True, key_mask=real[:, :5])
