"""Notebook 09b's checkers accept right answers and name the usual wrong ones.

For each checker: the stub fails, the reference passes, correct answers written differently pass, each usual
mistake gets its own diagnosis (a phrase only that diagnosis contains), junk gets one ❌ line. The references
agree with attn_core's layers (LightningIndexer, CompressedAttention), so the exercises teach what ships.
"""

import math

import pytest
import torch
from learner_answers import JUNK, one_red_line, stub

import attn_core as ac
from attn_core.deepseek.lightning_indexer import top_k_picks as package_top_k
from attn_core.exercises import sparse_attention as ex


def verdict(check, fn, capsys):
    ok = check(fn)
    return ok, capsys.readouterr().out


# ----- exercise 1: scores ------------------------------------------------------------------------------------


def scores_einsum(q, k, head_weights):
    per_head = torch.einsum("bhqd,bkd->bhqk", q, k).clamp(min=0)  # (B, H, Lq, Lk)
    return torch.einsum("bqh,bhqk->bqk", head_weights, per_head) / math.sqrt(q.shape[1] * q.shape[-1])


def scores_softmax(q, k, w):
    return ex.index_scores(q, k, torch.softmax(w, dim=-1))


def scores_softmax_unscaled(q, k, w):
    s = torch.relu(q @ k.unsqueeze(1).mT)  # (B, H, Lq, Lk)
    return (torch.softmax(w, -1).transpose(1, 2).unsqueeze(-1) * s).sum(1) / math.sqrt(q.shape[-1])


def scores_softmax_of_scaled_weights(q, k, w):
    """Issue #33: a softmax over the heads of w / sqrt(H), then the usual sum (got the generic message)."""
    heads = q.shape[1]
    return ex.index_scores(q, k, torch.softmax(w / math.sqrt(heads), dim=-1) * math.sqrt(heads))


def scores_softmax_over_heads_of_terms(q, k, w):
    """A softmax over the head axis of the weighted per-head terms, then their sum."""
    per_head = torch.relu(q @ k.unsqueeze(1).mT) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    terms = (w / math.sqrt(q.shape[1])).transpose(1, 2).unsqueeze(-1) * per_head  # (B, H, Lq, Lk)
    return terms.softmax(dim=1).sum(1)


def scores_sigmoid_weights(q, k, w):
    return ex.index_scores(q, k, torch.sigmoid(w))


def scores_softmax_over_heads_of_relu(q, k, w):
    """The head weights kept, but the per-head ReLU scores normalised across the heads."""
    per_head = torch.relu(q @ k.unsqueeze(1).mT / math.sqrt(q.shape[-1])).softmax(dim=1)  # (B, H, Lq, Lk)
    return ((w / math.sqrt(q.shape[1])).transpose(1, 2).unsqueeze(-1) * per_head).sum(1)


def scores_no_relu(q, k, w):
    return (w.transpose(1, 2).unsqueeze(-1) * (q @ k.unsqueeze(1).mT)).sum(1) / math.sqrt(q.shape[1] * q.shape[-1])


def scores_relu_after_sum(q, k, w):
    return torch.relu(scores_no_relu(q, k, w))


def scores_no_head_scale(q, k, w):
    return ex.index_scores(q, k, w) * math.sqrt(q.shape[1])


def scores_no_dim_scale(q, k, w):
    return ex.index_scores(q, k, w) * math.sqrt(q.shape[-1])


def scores_no_scales(q, k, w):
    return ex.index_scores(q, k, w) * math.sqrt(q.shape[1] * q.shape[-1])


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        (scores_softmax, "softmax over the head weights"),
        (scores_softmax_unscaled, "softmax over the head weights"),
        (scores_softmax_of_scaled_weights, "head weights lost their signs"),
        (scores_softmax_over_heads_of_terms, "head weights lost their signs"),
        (scores_sigmoid_weights, "head weights lost their signs"),
        (scores_softmax_over_heads_of_relu, "softmax over the heads of the per-head scores"),
        (scores_no_relu, "forgot the ReLU"),
        (scores_relu_after_sum, "after summing the heads"),
        (scores_no_head_scale, "1/sqrt(num_heads)."),
        (scores_no_dim_scale, "1/sqrt(head_dim) scale"),
        (scores_no_scales, "both scales"),
    ],
)
def test_score_mistakes_are_named(fn, phrase, capsys):
    ok, out = verdict(ex.check_index_scores, fn, capsys)
    assert not ok and phrase in out and one_red_line(out)


def test_scores_reference_matches_the_indexer():
    indexer = ac.LightningIndexer(16, 8, num_heads=3, head_dim=6, qk_rope_head_dim=4, topk=2).double()
    x, q_latent = torch.randn(1, 5, 16, dtype=torch.float64), torch.randn(1, 5, 8, dtype=torch.float64)
    _, scores = indexer(x, q_latent)
    keys = indexer.index_keys(x, torch.arange(5))  # (B, L, D)
    q = indexer.wq_b(q_latent).view(1, 5, 3, 6).transpose(1, 2)  # (B, H, L, D)
    q = indexer._rotate_first(q, torch.arange(5))
    torch.testing.assert_close(ex.index_scores(q, keys, indexer.weights_proj(x)), scores, rtol=0, atol=1e-12)


# ----- exercise 2: rope ------------------------------------------------------------------------------------


def rope_with_ac(t, positions, rope_dim, base):
    return torch.cat([ac.apply_rope(t[..., :rope_dim], positions, base=base), t[..., rope_dim:]], dim=-1)


def rope_interleaved(t, positions, rope_dim, base):
    rotated = ac.apply_rope(t[..., :rope_dim], positions, base=base, interleaved=True)
    return torch.cat([rotated, t[..., rope_dim:]], dim=-1)


def rope_last(t, positions, rope_dim, base):
    return torch.cat([t[..., :-rope_dim], ac.apply_rope(t[..., -rope_dim:], positions, base=base)], dim=-1)


def rope_last_interleaved(t, positions, rope_dim, base):
    rotated = ac.apply_rope(t[..., -rope_dim:], positions, base=base, interleaved=True)
    return torch.cat([t[..., :-rope_dim], rotated], dim=-1)


def rope_all(t, positions, rope_dim, base):
    return ac.apply_rope(t, positions, base=base)


def rope_none(t, positions, rope_dim, base):
    return t.clone()


def rope_from_zero(t, positions, rope_dim, base):
    return rope_with_ac(t, torch.arange(t.shape[-2]), rope_dim, base)


def rope_default_base(t, positions, rope_dim, base):
    return rope_with_ac(t, positions, rope_dim, 10000.0)


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        (rope_interleaved, "MLA's layout"),
        (rope_last, "the V3.2 indexer rotates the FIRST"),
        (rope_last_interleaved, "as MLA does"),
        (rope_all, "every feature"),
        (rope_none, "nothing was rotated"),
        (rope_from_zero, "positions 0, 1, 2"),
        (rope_default_base, "ignored base"),
    ],
)
def test_rope_mistakes_are_named(fn, phrase, capsys):
    ok, out = verdict(ex.check_indexer_rope, fn, capsys)
    assert not ok and phrase in out and one_red_line(out)


# ----- exercise 3: causal top-k ------------------------------------------------------------------------------


def picks_with_package(scores, topk, start):
    q_len, k_len = scores.shape[-2:]
    visible = ac.causal_mask(q_len, k_len)  # bottom-right: query i at start + i when Lk = start + Lq
    return package_top_k(scores.masked_fill(~visible, -math.inf), topk)


def picks_int32(scores, topk, start):
    return ex.top_k_picks(scores, topk, start).int()


def picks_future(scores, topk, start):
    return scores.topk(min(topk, scores.shape[-1]), dim=-1).indices


def picks_not_offset(scores, topk, start):
    q_len, k_len = scores.shape[-2:]
    future = torch.ones(q_len, k_len, dtype=torch.bool).triu(1)  # top-left
    best, idx = scores.masked_fill(future, -math.inf).topk(min(topk, k_len), dim=-1)
    return idx.masked_fill(best == -math.inf, -1)


def picks_no_minus_one(scores, topk, start):
    q_len, k_len = scores.shape[-2:]
    future = torch.arange(k_len)[None, :] > torch.arange(start, start + q_len)[:, None]
    return scores.masked_fill(future, -math.inf).topk(min(topk, k_len), dim=-1).indices


def picks_worst_first(scores, topk, start):
    return ex.top_k_picks(scores, topk, start).flip(-1)


def picks_without_min(scores, topk, start):
    """Issue #33 (passed before): .topk(topk) without min(topk, Lk) crashes on a row shorter than topk."""
    q_len, k_len = scores.shape[-2:]
    future = torch.arange(k_len)[None, :] > torch.arange(start, start + q_len)[:, None]
    best, idx = scores.masked_fill(future, -math.inf).topk(topk, dim=-1)
    return idx.masked_fill(best == -math.inf, -1)


def picks_padded_to_topk(scores, topk, start):
    """Issue #33 (passed before): topk columns, the missing ones padded with -1 (the stated shape is min(topk, Lk))."""
    picks = ex.top_k_picks(scores, topk, start)  # (B, Lq, min(topk, Lk))
    return torch.cat([picks, picks.new_full((*picks.shape[:2], topk - picks.shape[-1]), -1)], dim=-1)


def picks_own_key_hidden(scores, topk, start):
    q_len, k_len = scores.shape[-2:]
    hidden = torch.arange(k_len)[None, :] >= torch.arange(start, start + q_len)[:, None]  # >=: itself hidden
    best, idx = scores.masked_fill(hidden, -math.inf).topk(min(topk, k_len), dim=-1)
    return idx.masked_fill(best == -math.inf, -1)


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        (picks_future, "include future keys"),
        (picks_not_offset, "not offset"),
        (picks_no_minus_one, "mark those picks -1"),
        (picks_worst_first, "best (highest score) first"),
        (picks_without_min, "take min(topk, Lk) picks"),
        (picks_padded_to_topk, "-1 marks a hidden key, not a missing one"),
        (picks_own_key_hidden, "hid its own key"),
    ],
)
def test_picks_mistakes_are_named(fn, phrase, capsys):
    ok, out = verdict(ex.check_top_k_picks, fn, capsys)
    assert not ok and phrase in out and one_red_line(out)


# ----- exercise 4: visible entries ---------------------------------------------------------------------------


def visible_loop(positions, num_entries, compress_rate):
    out = torch.zeros(len(positions), num_entries, dtype=torch.bool)
    for i, t in enumerate(positions.tolist()):
        out[i, : (t + 1) // compress_rate] = True  # the windows closed by token t
    return out


def visible_too_early(positions, num_entries, compress_rate):
    return torch.arange(num_entries)[None] * compress_rate <= positions[:, None]


def visible_late(positions, num_entries, compress_rate):
    return (torch.arange(num_entries)[None] + 1) * compress_rate <= positions[:, None]


@pytest.mark.parametrize(("fn", "phrase"), [(visible_too_early, "visible too early"), (visible_late, "one token late")])
def test_visibility_mistakes_are_named(fn, phrase, capsys):
    ok, out = verdict(ex.check_visible_entries, fn, capsys)
    assert not ok and phrase in out and one_red_line(out)


def test_visibility_reference_matches_compressed_attention():
    layer = ac.CompressedAttention(
        16,
        2,
        head_dim=8,
        q_lora_rank=8,
        qk_rope_head_dim=4,
        sliding_window=2,
        o_groups=1,
        o_lora_rank=4,
        compress_rate=3,
    ).double()
    _, weights = layer(torch.randn(1, 10, 16, dtype=torch.float64))  # (B, H, L, L + 3)
    assert torch.equal(weights[0, 0, :, 10:] > 0, ex.visible_entries(torch.arange(10), 3, 3))


# ----- every checker ----------------------------------------------------------------------------------------

CHECKS = [
    (ex.check_index_scores, ex.index_scores, [scores_einsum]),
    (ex.check_indexer_rope, ex.indexer_rope, [rope_with_ac]),
    (ex.check_top_k_picks, ex.top_k_picks, [picks_with_package, picks_int32]),
    (ex.check_visible_entries, ex.visible_entries, [visible_loop]),
]


@pytest.mark.parametrize(("check", "reference", "alternatives"), CHECKS)
def test_reference_and_other_right_answers_pass_stub_fails(check, reference, alternatives, capsys):
    for fn in (reference, *alternatives):
        ok, out = verdict(check, fn, capsys)
        assert ok and out.startswith("✅"), out
    ok, out = verdict(check, stub, capsys)
    assert not ok and "not attempted yet" in out


@pytest.mark.parametrize(("check", "reference", "alternatives"), CHECKS)
@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_junk_gets_one_red_line(check, reference, alternatives, junk, capsys):
    ok, out = verdict(check, lambda *args: junk, capsys)
    assert not ok and one_red_line(out), out
