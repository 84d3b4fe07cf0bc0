"""Notebook 12b's checkers accept right answers and name the usual wrong ones.

For each checker: the stub fails, the reference passes, correct answers written differently pass, each usual
mistake gets its own diagnosis (a phrase only that diagnosis contains) on one ❌ line, junk gets one ❌ line.
The references are checked against attn_core: the causal key bound against ac.causal_mask, the kv head
against the pairing ac.tiled_attention uses, Δ against the autograd gradient it stands for.
"""

import math

import numpy as np
import pytest
import torch
from learner_answers import JUNK, one_red_line, stub, verdict

import attn_core as ac
from attn_core.exercises import triton_kernel as ex

CHECKS = [
    (ex.check_causal_key_end, ex.causal_key_end),
    (ex.check_kv_head, ex.kv_head_of),
    (ex.check_delta, ex.delta_rows),
]


@pytest.mark.parametrize("check, reference", CHECKS)
def test_stub_fails_reference_passes(check, reference, capsys):
    assert not check(stub)
    assert "not attempted" in capsys.readouterr().out
    assert check(reference)
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("check, reference", CHECKS)
@pytest.mark.parametrize("junk", JUNK, ids=range(len(JUNK)))
def test_junk_gets_one_red_line(check, reference, junk, capsys):
    ok, out = verdict(check, lambda *args: junk, capsys)
    assert not ok and one_red_line(out), out


# ----- exercise 1: the causal key bound ---------------------------------------------------------------


@pytest.mark.parametrize("q_len, k_len, block_size", [(64, 64, 16), (16, 80, 16), (80, 48, 16), (50, 50, 32)])
def test_causal_key_end_is_the_last_visible_key_of_the_tile(q_len, k_len, block_size):
    visible = ac.causal_mask(q_len, k_len)  # (Lq, Lk) True = may attend, bottom-right
    for tile in range(math.ceil(q_len / block_size)):
        rows = visible[tile * block_size : (tile + 1) * block_size]  # (<=B, Lk)
        seen = rows.any(0).nonzero()  # keys any query of the tile sees
        expected = int(seen.max()) + 1 if len(seen) else 0
        assert ex.causal_key_end(tile, block_size, q_len, k_len) == expected


END_VARIANTS = {
    "no max(0)": lambda t, b, lq, lk: min(lk, (t + 1) * b + lk - lq),  # a negative end: an empty loop too
    "numpy": lambda t, b, lq, lk: np.clip((t + 1) * b + lk - lq, 0, lk),
    "tensor": lambda t, b, lq, lk: torch.tensor((t + 1) * b + lk - lq).clamp(0, lk),
}
END_MISTAKES = {
    "one tile short": lambda t, b, lq, lk: max(0, min(lk, t * b + lk - lq)),
    "one key short": lambda t, b, lq, lk: max(0, min(lk, (t + 1) * b + lk - lq - 1)),
    "top-left causal": lambda t, b, lq, lk: min(lk, (t + 1) * b),
    "you visit every key tile": lambda t, b, lq, lk: lk,
    "past the last key": lambda t, b, lq, lk: max(0, (t + 1) * b + lk - lq),
}


@pytest.mark.parametrize("fn", END_VARIANTS.values(), ids=END_VARIANTS.keys())
def test_causal_key_end_variants(fn):
    assert ex.check_causal_key_end(fn)


@pytest.mark.parametrize("phrase", list(END_MISTAKES))
def test_causal_key_end_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_causal_key_end, END_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


def test_causal_key_end_unknown_mistake_gets_the_formula(capsys):
    ok, out = verdict(ex.check_causal_key_end, lambda t, b, lq, lk: 7, capsys)
    assert not ok and "expected" in out and "min(k_len" in out and one_red_line(out), out


# ----- exercise 2: the kv head of a query head -----------------------------------------------------------


def test_kv_head_of_is_the_pairing_of_tiled_attention():
    """Query head h with its own keys = kv head kv_head_of(h) of the GQA call: same output row."""
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, 6, 4, 8, dtype=torch.float64, generator=generator)  # (B, Hq, L, D)
    k, v = torch.randn(2, 1, 3, 4, 8, dtype=torch.float64, generator=generator)  # (B, Hkv, L, D) each
    grouped = ac.tiled_attention(q, k, v)  # (1, 6, 4, 8)
    for head in range(6):
        kv = ex.kv_head_of(head, 6, 3)
        alone = ac.tiled_attention(q[:, head : head + 1], k[:, kv : kv + 1], v[:, kv : kv + 1])  # (1, 1, 4, 8)
        torch.testing.assert_close(alone, grouped[:, head : head + 1], rtol=0, atol=1e-14)


HEAD_VARIANTS = {
    "multiply first": lambda h, hq, hkv: h * hkv // hq,
    "float division": lambda h, hq, hkv: math.floor(h / (hq / hkv)),
    "numpy": lambda h, hq, hkv: np.int64(h) // (hq // hkv),
}
HEAD_MISTAKES = {
    "interleaved": lambda h, hq, hkv: h % hkv,
    "divided by Hkv": lambda h, hq, hkv: h // hkv,
    "index inside its group": lambda h, hq, hkv: h % (hq // hkv),
    "you read kv head h": lambda h, hq, hkv: h,
}


@pytest.mark.parametrize("fn", HEAD_VARIANTS.values(), ids=HEAD_VARIANTS.keys())
def test_kv_head_variants(fn):
    assert ex.check_kv_head(fn)


@pytest.mark.parametrize("phrase", list(HEAD_MISTAKES))
def test_kv_head_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_kv_head, HEAD_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


# ----- exercise 3: Δ -----------------------------------------------------------------------------------


def test_delta_is_what_autograd_subtracts():
    """dS from autograd (through softmax and lse) equals P ∘ (dP − Δ) with Δ = delta_rows(O, dO, dlse)."""
    generator = torch.Generator().manual_seed(1)
    scores = torch.randn(1, 2, 5, 7, dtype=torch.float64, generator=generator, requires_grad=True)  # (B, H, L, Lk)
    values = torch.randn(1, 2, 7, 4, dtype=torch.float64, generator=generator)  # (B, H, Lk, D)
    grad_out = torch.randn(1, 2, 5, 4, dtype=torch.float64, generator=generator)  # (B, H, L, D)
    grad_lse = torch.randn(1, 2, 5, dtype=torch.float64, generator=generator)  # (B, H, L)
    probs = scores.softmax(-1)  # (B, H, L, Lk)
    out = probs @ values  # (B, H, L, D)
    ((out * grad_out).sum() + (scores.logsumexp(-1) * grad_lse).sum()).backward()
    delta = ex.delta_rows(out.detach(), grad_out, grad_lse)  # (B, H, L)
    by_formula = probs.detach() * (grad_out @ values.mT - delta[..., None])  # (B, H, L, Lk)
    torch.testing.assert_close(scores.grad, by_formula, rtol=0, atol=1e-13)


DELTA_VARIANTS = {
    "einsum": lambda o, do, dl: torch.einsum("bhld,bhld->bhl", o, do) - dl,
    "vecdot": lambda o, do, dl: torch.linalg.vecdot(do, o) - dl,
}
DELTA_MISTAKES = {
    "delta is missing": lambda o, do, dl: torch.zeros_like(dl),
    "lse's gradient is dropped": lambda o, do, dl: (o * do).sum(-1),
    "the sign of dlse": lambda o, do, dl: (o * do).sum(-1) + dl,
    "rowsum(dO) is not enough": lambda o, do, dl: do.sum(-1) - dl,
    "the sign is flipped": lambda o, do, dl: dl - (o * do).sum(-1),
    "without keepdim": lambda o, do, dl: (o * do).sum(-1, keepdim=True) - dl[..., None],
    "keep their dtype": lambda o, do, dl: ((o * do).sum(-1) - dl).float(),
    "wrong values": lambda o, do, dl: (o * do).mean(-1) - dl,
}


@pytest.mark.parametrize("fn", DELTA_VARIANTS.values(), ids=DELTA_VARIANTS.keys())
def test_delta_variants(fn):
    assert ex.check_delta(fn)


@pytest.mark.parametrize("phrase", list(DELTA_MISTAKES))
def test_delta_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_delta, DELTA_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out
