"""The MLA notebook's checkers accept right answers and diagnose the usual wrong ones.

For each checker: the stub fails, the reference passes, correct answers written differently pass, each
usual mistake gets its own diagnosis (a phrase only that diagnosis contains), junk gets one ❌ line.
"""

import numpy as np
import pytest
import torch
from learner_answers import JUNK, one_red_line, stub, verdict

import attn_core as ac
from attn_core.exercises import mla as ex

# ----- exercise 1: cache bytes ---------------------------------------------------------------------


def bytes_sum(config, bytes_per_element):
    return (
        sum(config[k] for k in ("kv_lora_rank", "qk_rope_head_dim")) * config["num_hidden_layers"] * bytes_per_element
    )


def bytes_tensor(config, bytes_per_element):
    return torch.tensor(
        config["num_hidden_layers"] * (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * bytes_per_element
    )


def bytes_float(config, bytes_per_element):
    return (
        float(config["num_hidden_layers"]) * (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * bytes_per_element
    )


def bytes_numpy(config, bytes_per_element):
    """np.prod of the factors: a numpy.int64, as right as a Python int."""
    per_token = config["kv_lora_rank"] + config["qk_rope_head_dim"]
    return np.prod([config["num_hidden_layers"], per_token, bytes_per_element])


CACHE_MISTAKES = {
    "forgot the rotary part": lambda c, b: c["num_hidden_layers"] * c["kv_lora_rank"] * b,
    "per-head keys and values": lambda c, b: (
        c["num_hidden_layers"]
        * c["num_attention_heads"]
        * (c["qk_nope_head_dim"] + c["qk_rope_head_dim"] + c["v_head_dim"])
        * b
    ),
    "counted v_head_dim": lambda c, b: (
        c["num_hidden_layers"] * (c["kv_lora_rank"] + c["qk_rope_head_dim"] + c["v_head_dim"]) * b
    ),
    "rotary key per head": lambda c, b: (
        c["num_hidden_layers"] * (c["kv_lora_rank"] + c["num_attention_heads"] * c["qk_rope_head_dim"]) * b
    ),
    "that is one layer": lambda c, b: (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * b,
    "number of elements": lambda c, b: c["num_hidden_layers"] * (c["kv_lora_rank"] + c["qk_rope_head_dim"]),
    "bits, not bytes": lambda c, b: 8 * ex.mla_cache_bytes(c, b),
}


def test_deepseek_v3_number():
    config = dict(num_hidden_layers=61, kv_lora_rank=512, qk_rope_head_dim=64)
    assert ex.mla_cache_bytes(config, 2) == 70_272


@pytest.mark.parametrize(
    "check, reference",
    [
        (ex.check_mla_cache_bytes, ex.mla_cache_bytes),
        (ex.check_absorbed_query, ex.absorbed_query),
        (ex.check_decoupled_key, ex.decoupled_key),
    ],
)
def test_stub_fails_reference_passes(check, reference, capsys):
    assert not check(stub)
    assert "not attempted" in capsys.readouterr().out
    assert check(reference)
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("fn", [bytes_sum, bytes_tensor, bytes_float, bytes_numpy])
def test_cache_bytes_variants(fn, capsys):
    assert ex.check_mla_cache_bytes(fn)


@pytest.mark.parametrize("phrase", list(CACHE_MISTAKES))
def test_cache_bytes_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_mla_cache_bytes, CACHE_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


# ----- exercise 2: absorbed query ------------------------------------------------------------------


def absorbed_einsum(q_nope, w_uk):
    return torch.einsum("bhln,hnr->bhlr", q_nope, w_uk)  # (B, H, L, r)


def absorbed_loop(q_nope, w_uk):
    return torch.stack([q_nope[:, h] @ w_uk[h] for h in range(w_uk.shape[0])], dim=1)  # (B, H, L, r)


def absorbed_transposes(q_nope, w_uk):
    return (w_uk.mT @ q_nope.mT).mT  # (B, H, L, r)


QUERY_MISTAKES = {
    "W_UK transposed": lambda q, w: q @ w.mT,
    "summed W_UK over the heads": lambda q, w: q @ w.sum(0, keepdim=True),
    "head 0's W_UK": lambda q, w: q @ w[:1],
    "a softmax scale of nope**-0.5": lambda q, w: (q @ w) * q.shape[-1] ** -0.5,
    "a softmax scale of kv_lora_rank**-0.5": lambda q, w: (q @ w) * w.shape[-1] ** -0.5,  # nope = rank in case 1
    "wrong numbers; the absorbed query is": lambda q, w: (q @ w) * (1.0 if q.shape[-1] == w.shape[-1] else 1.5),
}


@pytest.mark.parametrize("fn", [absorbed_einsum, absorbed_loop, absorbed_transposes])
def test_absorbed_variants(fn, capsys):
    assert ex.check_absorbed_query(fn)


@pytest.mark.parametrize("phrase", list(QUERY_MISTAKES))
def test_absorbed_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_absorbed_query, QUERY_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


def test_absorbed_query_gives_the_scores():
    g = torch.Generator().manual_seed(0)
    q_nope = torch.randn(1, 3, 4, 6, dtype=torch.float64, generator=g)  # (B, H, L, nope)
    w_uk = torch.randn(3, 6, 10, dtype=torch.float64, generator=g)  # (H, nope, r)
    c = torch.randn(1, 1, 7, 10, dtype=torch.float64, generator=g)  # (B, 1, T, r)
    k_nope = c @ w_uk.mT  # (B, H, T, nope)
    torch.testing.assert_close(ex.absorbed_query(q_nope, w_uk) @ c.mT, q_nope @ k_nope.mT, rtol=0, atol=1e-12)


# ----- exercise 3: decoupled key -------------------------------------------------------------------


def key_split(compressed_kv, positions, kv_lora_rank, base):
    _, k_rope = torch.split(
        compressed_kv, [kv_lora_rank, compressed_kv.shape[-1] - kv_lora_rank], dim=-1
    )  # (B, T, rope)
    return ac.apply_rope(k_rope[:, None], positions, base=base, interleaved=True)  # (B, 1, T, rope)


def key_by_hand(compressed_kv, positions, kv_lora_rank, base):
    k = compressed_kv[..., kv_lora_rank:].unsqueeze(1)  # (B, 1, T, rope)
    d = k.shape[-1]
    inv = base ** -(torch.arange(0, d, 2, dtype=torch.float64) / d)  # (rope/2,)
    ang = positions.double()[:, None] * inv  # (T, rope/2)
    cos, sin = ang.cos().to(k.dtype), ang.sin().to(k.dtype)  # (T, rope/2)
    a, b = k[..., 0::2], k[..., 1::2]  # (B, 1, T, rope/2)
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)  # (B, 1, T, rope)


def key_narrow(compressed_kv, positions, kv_lora_rank, base):
    k = compressed_kv.narrow(-1, kv_lora_rank, compressed_kv.shape[-1] - kv_lora_rank)  # (B, T, rope)
    return ac.apply_rope(k, positions, base=base, interleaved=True).unsqueeze(1)  # (B, 1, T, rope)


def hf_deinterleaved_key(compressed_kv, positions, kv_lora_rank, base):
    """Hugging Face's DeepSeek-V3 helper: rotate-half on the de-interleaved features, returned de-interleaved."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import apply_rotary_pos_emb_interleave

    k = compressed_kv[..., kv_lora_rank:].unsqueeze(1)  # (B, 1, T, rope)
    d = k.shape[-1]
    inv_freq = base ** -(torch.arange(0, d, 2, dtype=torch.float64) / d)  # (rope/2,)
    angles = torch.cat([positions.double()[:, None] * inv_freq] * 2, dim=-1)  # (T, rope): HF's cos/sin layout
    cos, sin = angles.cos().to(k.dtype)[None], angles.sin().to(k.dtype)[None]  # (1, T, rope)
    _, k_rot = apply_rotary_pos_emb_interleave(k, k, cos, sin)  # (B, 1, T, rope): evens first, then odds
    return k_rot


KEY_MISTAKES = {
    "not rotated": lambda c, p, kv_lora_rank, base: c[..., kv_lora_rank:][:, None],
    "wrong layout": lambda c, p, kv_lora_rank, base: ac.apply_rope(c[..., kv_lora_rank:], p, base=base)[:, None],
    "FIRST rope features": lambda c, p, kv_lora_rank, base: ac.apply_rope(
        c[..., : c.shape[-1] - kv_lora_rank], p, base=base, interleaved=True
    )[:, None],
    "ignored `positions`": lambda c, p, kv_lora_rank, base: ac.apply_rope(
        c[..., kv_lora_rank:], torch.arange(c.shape[1]), base=base, interleaved=True
    )[:, None],
    "a rotary key per head": lambda c, p, kv_lora_rank, base: ex.decoupled_key(c, p, kv_lora_rank, base).expand(
        -1, 4, -1, -1
    ),
    "add the head axis": lambda c, p, kv_lora_rank, base: ex.decoupled_key(c, p, kv_lora_rank, base)[:, 0],
    "the head axis is in the wrong place": lambda c, p, kv_lora_rank, base: ex.decoupled_key(
        c, p, kv_lora_rank, base
    ).transpose(1, 2),  # (B, T, 1, rope)
    "Hugging Face's de-interleaved order": lambda c, p, kv_lora_rank, base: hf_deinterleaved_key(
        c, p, kv_lora_rank, base
    ),
    "you ignored `base`": lambda c, p, kv_lora_rank, base: ex.decoupled_key(c, p, kv_lora_rank, 10000.0),
}


@pytest.mark.parametrize("fn", [key_split, key_by_hand, key_narrow])
def test_key_variants(fn, capsys):
    assert ex.check_decoupled_key(fn)


@pytest.mark.parametrize("phrase", list(KEY_MISTAKES))
def test_key_mistakes(phrase, capsys):
    ok, out = verdict(ex.check_decoupled_key, KEY_MISTAKES[phrase], capsys)
    assert not ok and phrase in out and one_red_line(out), out


# ----- junk ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("check", [ex.check_mla_cache_bytes, ex.check_absorbed_query, ex.check_decoupled_key])
@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_junk_gets_one_red_line(check, junk, capsys):
    assert not check(lambda *args, **kwargs: junk)
    out = capsys.readouterr().out
    assert one_red_line(out), out
