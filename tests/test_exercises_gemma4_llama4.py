"""Notebook 11c's graders: each rejects plausible wrong answers with the right diagnosis and accepts correct variants.

One file for the three graders: each block is a wrong-answer table and a right-answer table of the same shape."""

import math

import numpy as np
import pytest
import torch

import attn_core as ac
from attn_core.exercises.gemma4_llama4 import check_chunked_mask, check_kv_cache_bytes, check_nope_temperature


def _verdict(check, fn, capsys) -> tuple[bool, str]:
    ok = check(fn)
    return ok, capsys.readouterr().out


# ------------------------------------------------------------------------------------------ chunked mask
def _idx(n):
    return torch.arange(n)[:, None], torch.arange(n)[None, :]


def _chunked(n, c):
    q, k = _idx(n)
    return (k <= q) & (k // c == q // c)


MASK_WRONG = {
    "inverted": (lambda n, c: ~_chunked(n, c), "inverted"),
    "transposed": (lambda n, c: _chunked(n, c).T, "transposed"),
    "bidirectional chunks": (lambda n, c: _idx(n)[1] // c == _idx(n)[0] // c, "bidirectional"),
    "plain causal": (lambda n, c: ac.causal_mask(n), "plain causal"),
    "no diagonal": (lambda n, c: _chunked(n, c) & ~torch.eye(n, dtype=torch.bool), "diagonal is missing"),
    "sliding window C": (lambda n, c: ac.sliding_window_mask(n, c), "sliding window of"),
    "sliding window C+1": (lambda n, c: ac.sliding_window_mask(n, c + 1), "sliding window of"),
    "boundaries shifted": (
        lambda n, c: (_idx(n)[1] <= _idx(n)[0]) & ((_idx(n)[1] + 1) // c == (_idx(n)[0] + 1) // c),
        "shifted by one",
    ),
    "chunk C+1": (lambda n, c: ac.chunked_mask(n, c + 1), "chunks of"),
    "additive": (
        lambda n, c: torch.zeros(n, n).masked_fill(~_chunked(n, c), float("-inf")),
        "additive mask",
    ),
    "future inside chunk (k >= q)": (lambda n, c: (_idx(n)[1] >= _idx(n)[0]) | _chunked(n, c), "future keys"),
    "wrong shape": (lambda n, c: _chunked(n, c)[None], "shape"),
    "scores": (lambda n, c: _chunked(n, c).double() * 0.5, "not scores"),
    "stub": (lambda n, c: None, None),
}


@pytest.mark.parametrize("name", list(MASK_WRONG))
def test_chunked_mask_rejects_with_the_diagnosis(name, capsys):
    fn, diagnosis = MASK_WRONG[name]
    ok, out = _verdict(check_chunked_mask, fn, capsys)
    assert ok is False and "❌" in out
    if diagnosis:
        assert diagnosis in out, out


def _loop(n, c):
    return [[k <= q and k // c == q // c for k in range(n)] for q in range(n)]


MASK_RIGHT = {
    "ac.chunked_mask": ac.chunked_mask,
    "torch": _chunked,
    "python lists": _loop,
    "numpy 0/1": lambda n, c: np.array(_loop(n, c), dtype=np.int64),
    "block-diagonal tril": lambda n, c: torch.block_diag(
        *[torch.ones(min(c, n - s), min(c, n - s)).tril() for s in range(0, n, c)]
    ).bool(),
}


@pytest.mark.parametrize("name", list(MASK_RIGHT))
def test_chunked_mask_accepts_correct_variants(name, capsys):
    ok, out = _verdict(check_chunked_mask, MASK_RIGHT[name], capsys)
    assert ok is True, out


# ------------------------------------------------------------------------------------------ NoPE temperature
def _right(p, fs, a):
    return torch.log1p(torch.floor((p.double() + 1) / fs)) * a + 1


TEMP_WRONG = {
    "log not log1p": (lambda p, fs, a: torch.log(torch.floor((p + 1) / fs)) * a + 1, "log(0)"),
    "reciprocal": (lambda p, fs, a: 1 / _right(p, fs, a), "you divided"),
    "no + 1": (lambda p, fs, a: torch.log1p(torch.floor((p + 1) / fs)) * a, "without the + 1"),
    "no floor": (lambda p, fs, a: torch.log1p((p + 1) / fs) * a + 1, "floor is missing"),
    "pos not pos + 1": (lambda p, fs, a: torch.log1p(torch.floor(p / fs)) * a + 1, "off by one"),
    "round": (lambda p, fs, a: torch.log1p(torch.round((p + 1) / fs)) * a + 1, "round down"),
    "ceil": (lambda p, fs, a: torch.log1p(torch.ceil((p + 1) / fs)) * a + 1, "round down"),
    "scale inside the log": (lambda p, fs, a: torch.log1p(torch.floor((p + 1) / fs) * a) + 1, "multiplies the log"),
    "log2": (lambda p, fs, a: torch.log2(1 + torch.floor((p + 1) / fs)) * a + 1, "natural log"),
    "swapped": (lambda p, fs, a: torch.log1p(torch.floor((p + 1) / a)) * fs + 1, "swapped"),
    "divided by attn_scale": (lambda p, fs, a: torch.log1p(torch.floor((p + 1) / fs)) / a + 1, "divided the log"),
    "one value": (lambda p, fs, a: _right(p, fs, a)[-1], "shape"),
    "stub": (lambda p, fs, a: None, None),
}


@pytest.mark.parametrize("name", list(TEMP_WRONG))
def test_nope_temperature_rejects_with_the_diagnosis(name, capsys):
    fn, diagnosis = TEMP_WRONG[name]
    ok, out = _verdict(check_nope_temperature, fn, capsys)
    assert ok is False and "❌" in out
    if diagnosis:
        assert diagnosis in out, out


TEMP_RIGHT = {
    "torch float64": _right,
    "float32 as HF": lambda p, fs, a: torch.log1p(torch.floor((p.float() + 1.0) / fs)) * a + 1.0,
    "log(floor + 1)": lambda p, fs, a: torch.log(torch.floor((p + 1) / fs) + 1) * a + 1,
    "math loop": lambda p, fs, a: [1 + a * math.log(1 + (int(i) + 1) // int(fs)) for i in p],
    "numpy": lambda p, fs, a: 1 + a * np.log1p(np.floor((p.numpy() + 1) / fs)),
}


@pytest.mark.parametrize("name", list(TEMP_RIGHT))
def test_nope_temperature_accepts_correct_variants(name, capsys):
    ok, out = _verdict(check_nope_temperature, TEMP_RIGHT[name], capsys)
    assert ok is True, out


# ------------------------------------------------------------------------------------------ cache bytes
def _bytes(layers, context, bpe, *, tensors_kv=2, skip_reuse=True, use_window=True, heads="num_kv_heads", bits=1):
    total = 0
    for layer in layers:
        if skip_reuse and layer["reuse"]:
            continue
        tokens = context if (layer["window"] is None or not use_window) else min(context, layer["window"])
        tensors = 1 if layer["k_eq_v"] else tensors_kv
        total += tokens * layer[heads] * layer["head_dim"] * tensors * bpe * bits
    return total


BYTES_WRONG = {
    "reusing layers counted": (lambda L, T, b: _bytes(L, T, b, skip_reuse=False), "stores nothing"),
    "K = V ignored": (
        lambda L, T, b: sum(
            (min(T, x["window"]) if x["window"] else T) * x["num_kv_heads"] * x["head_dim"] * 2 * b
            for x in L
            if not x["reuse"]
        ),
        "one tensor per token",
    ),
    "keys only": (lambda L, T, b: _bytes(L, T, b, tensors_kv=1), "two tensors per token"),
    "no window": (lambda L, T, b: _bytes(L, T, b, use_window=False), "at most `window` tokens"),
    "window, not min": (
        lambda L, T, b: sum(
            (x["window"] or T) * x["num_kv_heads"] * x["head_dim"] * (1 if x["k_eq_v"] else 2) * b
            for x in L
            if not x["reuse"]
        ),
        "min(context, window)",
    ),
    "window - 1": (
        lambda L, T, b: sum(
            (min(T, x["window"] - 1) if x["window"] else T) * x["num_kv_heads"] * x["head_dim"] * (2 - x["k_eq_v"]) * b
            for x in L
            if not x["reuse"]
        ),
        "off by one",
    ),
    "query heads": (lambda L, T, b: _bytes(L, T, b, heads="num_heads"), "num_kv_heads"),
    "bits": (lambda L, T, b: _bytes(L, T, b, bits=8), "bits"),
    "no bytes_per_element": (lambda L, T, b: _bytes(L, T, 1), "bytes_per_element"),
    "per token": (lambda L, T, b: _bytes(L, T, b) / T, "per token"),
    "fractional": (lambda L, T, b: _bytes(L, T, b) + 0.5, "whole number"),
    "a string": (lambda L, T, b: str(_bytes(L, T, b)), "as an int"),
    "stub": (lambda L, T, b: None, None),
}


@pytest.mark.parametrize("name", list(BYTES_WRONG))
def test_kv_cache_bytes_rejects_with_the_diagnosis(name, capsys):
    fn, diagnosis = BYTES_WRONG[name]
    ok, out = _verdict(check_kv_cache_bytes, fn, capsys)
    assert ok is False and "❌" in out
    if diagnosis:
        assert diagnosis in out, out


def _numpy(layers, context, bpe):
    kept = np.array([context if x["window"] is None else min(context, x["window"]) for x in layers])
    per_token = np.array([x["num_kv_heads"] * x["head_dim"] * (1 if x["k_eq_v"] else 2) for x in layers])
    stores = np.array([not x["reuse"] for x in layers])
    return np.int64((kept * per_token * stores).sum() * bpe)


BYTES_RIGHT = {
    "loop": lambda L, T, b: _bytes(L, T, b),
    "numpy int64": _numpy,
    "float of an integer": lambda L, T, b: float(_bytes(L, T, b)),
    "torch scalar": lambda L, T, b: torch.tensor(_bytes(L, T, b)),
}


@pytest.mark.parametrize("name", list(BYTES_RIGHT))
def test_kv_cache_bytes_accepts_correct_variants(name, capsys):
    ok, out = _verdict(check_kv_cache_bytes, BYTES_RIGHT[name], capsys)
    assert ok is True, out
