"""rope_frequencies and apply_rope(scaling=, partial_rotary_factor=): equal to Hugging Face in float64.

Reference: ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS[rope_type](config)`` (and a model's own
``compute_default_rope_parameters`` for plain RoPE). HF computes in float32 (``dtype=torch.float``; YaRN's ramp even
hard-codes ``torch.float32``), so ``hf_float64`` runs HF's very code with ``torch.float``/``torch.float32`` read
as float64 (the module's global ``torch`` swapped for a proxy). Then the comparison is exact: the same float64
operations in the same order, asserted to 1e-15 relative. HF as shipped is also checked, within float32 rounding.
apply_rope is compared with HF's ``apply_rotary_pos_emb`` fed HF's rotary formula (``cat(freqs, freqs)``, cos
and sin times ``attention_scaling``) in float64: Llama (rotate half), StableLm (partial), GLM (interleaved + partial).
"""

from __future__ import annotations

import contextlib
import copy
import math

import pytest
import torch
import transformers.modeling_rope_utils as rope_utils
from hypothesis import given
from hypothesis import strategies as st
from reference import F64, randn
from transformers import LlamaConfig
from transformers.models.glm.modeling_glm import apply_rotary_pos_emb as glm_apply
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb as llama_apply

import attn_core as ac

EPS32 = torch.finfo(torch.float32).eps  # 2^-23
LLAMA3 = {  # Llama 3.1's released rope_scaling (base 500000, head_dim 128)
    "rope_type": "llama3",
    "factor": 8.0,
    "original_max_position_embeddings": 8192,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
}
YARN_V3 = {  # DeepSeek-V3's released rope_scaling (qk_rope_head_dim 64, base 10000)
    "rope_type": "yarn",
    "factor": 40,
    "original_max_position_embeddings": 4096,
    "beta_fast": 32,
    "beta_slow": 1,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}
YARN_GPT_OSS = {  # gpt-oss: truncate False, base 150000, head_dim 64
    "rope_type": "yarn",
    "factor": 32.0,
    "original_max_position_embeddings": 4096,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "truncate": False,
}
YARN_PLAIN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}  # Qwen-style
LINEAR = {"rope_type": "linear", "factor": 4.0}
SCALINGS = {"llama3": LLAMA3, "yarn_v3": YARN_V3, "yarn_gpt_oss": YARN_GPT_OSS, "yarn": YARN_PLAIN, "linear": LINEAR}


class _Float64Torch:
    """``torch`` with ``torch.float`` and ``torch.float32`` meaning float64: HF's rope code, run in float64."""

    float = torch.float64
    float32 = torch.float64

    def __getattr__(self, name):
        return getattr(torch, name)


@contextlib.contextmanager
def hf_float64(*modules):
    """Within: HF's rope_utils (and the given modeling modules) compute their frequencies in float64."""
    saved = [(m, m.torch) for m in (rope_utils, *modules)]
    try:
        for module, _ in saved:
            module.torch = _Float64Torch()
        yield
    finally:
        for module, original in saved:
            module.torch = original


def llama_config(head_dim: int, base: float, scaling: dict | None, partial: float = 1.0) -> LlamaConfig:
    params = {**(scaling or {"rope_type": "default"}), "rope_theta": base}
    if partial != 1.0:
        params["partial_rotary_factor"] = partial
    return LlamaConfig(
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        head_dim=head_dim,
        rope_parameters=params,
        max_position_embeddings=131072,
    )


def hf_frequencies(head_dim: int, base: float, scaling: dict, partial: float = 1.0) -> tuple[torch.Tensor, float]:
    """HF's ROPE_INIT_FUNCTIONS[rope_type](config), in float64."""
    config = llama_config(head_dim, base, scaling, partial)
    with hf_float64():
        return rope_utils.ROPE_INIT_FUNCTIONS[scaling["rope_type"]](config)


def hf_cos_sin(inv_freq: torch.Tensor, factor: float, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's rotary forward (Llama, StableLm, GLM share it), written in float64: emb = cat(freqs, freqs)."""
    freqs = positions[..., None].to(F64) * inv_freq.to(F64)  # (..., L, R/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (..., L, R)
    return emb.cos() * factor, emb.sin() * factor


# ----------------------------------------------------------------------------- rope_frequencies == HF
@pytest.mark.parametrize("name", SCALINGS)
@pytest.mark.parametrize("head_dim", [64, 128, 80])
@pytest.mark.parametrize("partial", [1.0, 0.5, 0.25])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_frequencies_equal_hugging_face_float64(name, head_dim, partial, base):
    scaling = SCALINGS[name]
    expected, expected_factor = hf_frequencies(head_dim, base, scaling, partial)
    inv_freq, factor = ac.rope_frequencies(head_dim, base=base, scaling=scaling, partial_rotary_factor=partial)
    assert inv_freq.dtype == F64 and inv_freq.shape == (int(head_dim * partial) // 2,)
    assert isinstance(factor, float) and factor == expected_factor
    torch.testing.assert_close(inv_freq, expected, rtol=1e-15, atol=0)


@pytest.mark.parametrize("name", SCALINGS)
def test_frequencies_within_float32_rounding_of_hf_as_shipped(name):
    # HF as shipped computes in float32: each inv_freq is within a few float32 roundings (base**x, 1/x, ramp).
    expected, _ = rope_utils.ROPE_INIT_FUNCTIONS[SCALINGS[name]["rope_type"]](llama_config(64, 10000.0, SCALINGS[name]))
    inv_freq, _ = ac.rope_frequencies(64, scaling=SCALINGS[name])
    assert ((inv_freq - expected.to(F64)).abs() / inv_freq).max() < 16 * EPS32


def test_default_equals_the_models_own_default_init():
    from transformers.models.glm import modeling_glm

    config = llama_config(64, 10000.0, None, partial=0.5)  # GLM's default applies the partial factor
    with hf_float64(modeling_glm):
        expected, factor = modeling_glm.GlmRotaryEmbedding.compute_default_rope_parameters(config)
    for scaling in (None, {"rope_type": "default"}):
        inv_freq, got_factor = ac.rope_frequencies(64, scaling=scaling, partial_rotary_factor=0.5)
        torch.testing.assert_close(inv_freq, expected, rtol=1e-15, atol=0)
        assert got_factor == factor == 1.0
    # Plain RoPE is rope_angles' frequency: angle at position 1.
    torch.testing.assert_close(ac.rope_frequencies(16)[0], ac.rope_angles([1], 16)[0], rtol=0, atol=0)


@pytest.mark.parametrize(
    "extra, expected",
    [
        ({"attention_factor": 0.7}, 0.7),  # given: used as is
        ({"mscale": 1.0, "mscale_all_dim": 1.0}, 1.0),  # DeepSeek-V3: g/g = 1
        ({"mscale": 0.707, "mscale_all_dim": 1.0}, (0.0707 * math.log(40) + 1) / (0.1 * math.log(40) + 1)),
        ({"mscale": 2.0}, 0.1 * math.log(40) + 1),  # mscale alone is ignored
        ({"mscale_all_dim": 1.0}, 0.1 * math.log(40) + 1),  # mscale_all_dim alone too
        ({"mscale": 0.0, "mscale_all_dim": 1.0}, 0.1 * math.log(40) + 1),  # a zero counts as absent
        ({}, 0.1 * math.log(40) + 1),  # the YaRN paper's temperature
    ],
)
def test_yarn_attention_factor(extra, expected):
    scaling = {"rope_type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, **extra}
    _, factor = ac.rope_frequencies(64, scaling=scaling)
    assert factor == pytest.approx(expected, rel=1e-15)
    assert factor == hf_frequencies(64, 10000.0, scaling)[1]


@pytest.mark.parametrize(
    "extra",
    [
        {"beta_fast": 0},  # HF's `beta_fast or 32`: zero means the default
        {"beta_fast": 8, "beta_slow": 2},
        {"beta_fast": 4, "beta_slow": 4, "truncate": False},  # low == high: the +0.001 guard
        {"truncate": False},
        {"factor": 1.0},  # no stretch: g(1) = 1, every pair interpolated by 1
    ],
)
def test_yarn_corner_cases_equal_hugging_face(extra):
    scaling = {**YARN_PLAIN, **extra}
    inv_freq, factor = ac.rope_frequencies(32, scaling=scaling)
    expected, expected_factor = hf_frequencies(32, 10000.0, scaling)
    torch.testing.assert_close(inv_freq, expected, rtol=1e-15, atol=0)
    assert factor == expected_factor


@given(
    head_half=st.integers(1, 96),
    base=st.floats(100.0, 1e7),
    factor=st.floats(1.0, 64.0),
    old_len=st.integers(256, 65536),
    beta_fast=st.floats(1.5, 64.0),
    beta_slow=st.floats(0.1, 1.5),
    truncate=st.booleans(),
)
def test_yarn_property_equals_hugging_face(head_half, base, factor, old_len, beta_fast, beta_slow, truncate):
    scaling = {
        "rope_type": "yarn",
        "factor": factor,
        "original_max_position_embeddings": old_len,
        "beta_fast": beta_fast,
        "beta_slow": beta_slow,
        "truncate": truncate,
    }
    inv_freq, attention_factor = ac.rope_frequencies(2 * head_half, base=base, scaling=scaling)
    expected, expected_factor = hf_frequencies(2 * head_half, base, scaling)
    torch.testing.assert_close(inv_freq, expected, rtol=1e-15, atol=0)
    assert attention_factor == expected_factor


@given(
    head_half=st.integers(2, 96),
    base=st.floats(100.0, 1e7),
    factor=st.floats(1.0, 64.0),
    old_len=st.integers(256, 65536),
    low=st.floats(0.5, 4.0),
    gap=st.floats(0.1, 8.0),
)
def test_llama3_property_equals_hugging_face(head_half, base, factor, old_len, low, gap):
    scaling = {
        "rope_type": "llama3",
        "factor": factor,
        "original_max_position_embeddings": old_len,
        "low_freq_factor": low,
        "high_freq_factor": low + gap,
    }
    inv_freq, _ = ac.rope_frequencies(2 * head_half, base=base, scaling=scaling)
    torch.testing.assert_close(inv_freq, hf_frequencies(2 * head_half, base, scaling)[0], rtol=1e-15, atol=0)


def test_band_structure():
    """What the formulas mean: fast pairs keep their frequency, slow ones are divided by the factor."""
    plain, _ = ac.rope_frequencies(128, base=500000.0)
    llama3, _ = ac.rope_frequencies(128, base=500000.0, scaling=LLAMA3)
    wavelength = 2 * math.pi / plain  # (64,) tokens per turn
    short, long = wavelength < 8192 / 4, wavelength > 8192 / 1
    assert torch.equal(llama3[short], plain[short]) and torch.equal(llama3[long], plain[long] / 8)
    middle = ~short & ~long
    assert middle.any() and ((llama3[middle] < plain[middle]) & (llama3[middle] > plain[middle] / 8)).all()
    torch.testing.assert_close(ac.rope_frequencies(64, scaling=LINEAR)[0], ac.rope_frequencies(64)[0] / 4)
    yarn, _ = ac.rope_frequencies(64, scaling=YARN_V3)
    base64, _ = ac.rope_frequencies(64)
    assert torch.equal(yarn[:10], base64[:10])  # pairs 0..9 turn > 32 times in 4096 tokens: extrapolated
    torch.testing.assert_close(yarn[23:], base64[23:] / 40, rtol=1e-15, atol=0)  # < 1 turn: interpolated


def test_scaling_dict_is_never_modified():
    for scaling in SCALINGS.values():
        before = copy.deepcopy(scaling)
        ac.rope_frequencies(64, scaling=scaling)
        ac.apply_rope(randn(3, 64), [0, 1, 2], scaling=scaling)
        assert scaling == before


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"scaling": {"factor": 2.0}}, "rope_type"),
        ({"scaling": {"rope_type": "dynamic", "factor": 2.0}}, "rope_type"),
        ({"scaling": {"rope_type": "linear"}}, "factor"),
        ({"scaling": {"rope_type": "yarn", "factor": 4.0}}, "original_max_position_embeddings"),
        ({"scaling": {**LLAMA3, "low_freq_factor": None} | {"rope_type": "llama3"}}, "low_freq_factor"),
        ({"scaling": {k: v for k, v in LLAMA3.items() if k != "high_freq_factor"}}, "high_freq_factor"),
        ({"scaling": {**LINEAR, "rope_theta": 10000.0}}, "rope_theta"),
        ({"scaling": {**LINEAR, "factr": 2.0}}, "factr"),
        ({"scaling": {**LINEAR, "beta_fast": 32}}, "beta_fast"),  # a yarn key on linear
        ({"scaling": {**LINEAR, "factor": 0.5}}, "factor"),
        ({"scaling": {**YARN_PLAIN, "factor": 0.9}}, "factor"),
        ({"scaling": {**YARN_PLAIN, "truncate": "no"}}, "truncate"),
        ({"scaling": {**YARN_PLAIN, "beta_fast": -1.0}}, "beta_fast"),
        ({"scaling": {**LLAMA3, "high_freq_factor": 1.0}}, "high_freq_factor"),
        ({"scaling": {**LINEAR, "factor": "4"}}, "factor"),
        ({"partial_rotary_factor": 0.0}, "partial_rotary_factor"),
        ({"partial_rotary_factor": 1.5}, "partial_rotary_factor"),
        ({"partial_rotary_factor": 0.3}, "partial_rotary_factor"),  # int(64 * 0.3) = 19: odd
        ({"partial_rotary_factor": 0.01}, "partial_rotary_factor"),  # int(0.64) = 0
    ],
)
def test_bad_scaling_names_the_key(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        ac.rope_frequencies(64, **kwargs)
    with pytest.raises(ValueError, match=needle):
        ac.apply_rope(randn(2, 64), [0, 1], **kwargs)


def test_bad_types():
    with pytest.raises(TypeError, match="scaling must be None or a dict"):
        ac.rope_frequencies(64, scaling=[("rope_type", "linear")])
    with pytest.raises(ValueError, match="head_dim"):
        ac.rope_frequencies(0)
    with pytest.raises(ValueError, match="base"):
        ac.rope_frequencies(64, base=-1.0)


# ----------------------------------------------------------------------------- apply_rope == HF
POSITIONS = {"from 0": torch.arange(6), "from 131,000": torch.arange(131_000, 131_006)}


@pytest.mark.parametrize("name", SCALINGS)
@pytest.mark.parametrize("start", POSITIONS)
def test_apply_rope_equals_llama_rotate_half(name, start):
    scaling, positions = SCALINGS[name], POSITIONS[start]
    q, k = randn(2, 3, 6, 64, seed=1), randn(2, 3, 6, 64, seed=2)  # (B, H, L, D)
    inv_freq, factor = hf_frequencies(64, 10000.0, scaling)
    cos, sin = hf_cos_sin(inv_freq, factor, positions[None])  # (1, L, D)
    q_hf, k_hf = llama_apply(q, k, cos, sin)  # (B, H, L, D) each
    torch.testing.assert_close(ac.apply_rope(q, positions, scaling=scaling), q_hf, rtol=0, atol=1e-12)
    torch.testing.assert_close(ac.apply_rope(k, positions, scaling=scaling), k_hf, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", [None, "yarn", "llama3"])
@pytest.mark.parametrize("start", POSITIONS)
def test_apply_rope_partial_equals_stablelm(name, start):
    # StableLm: rotate the first rotary_ndims features with apply_rotary_pos_emb, concatenate the rest.
    scaling, positions = SCALINGS.get(name), POSITIONS[start]
    q, k = randn(1, 2, 6, 80, seed=3), randn(1, 2, 6, 80, seed=4)  # (B, H, L, D)
    inv_freq, factor = hf_frequencies(80, 10000.0, scaling or {"rope_type": "linear", "factor": 1.0}, 0.5)
    cos, sin = hf_cos_sin(inv_freq, factor, positions[None])  # (1, L, 40)
    q_rot, k_rot = llama_apply(q[..., :40], k[..., :40], cos, sin)  # (B, H, L, 40)
    expected_q = torch.cat((q_rot, q[..., 40:]), dim=-1)  # (B, H, L, 80)
    got_q = ac.apply_rope(q, positions, scaling=scaling, partial_rotary_factor=0.5)  # (B, H, L, 80)
    torch.testing.assert_close(got_q, expected_q, rtol=0, atol=1e-12)
    got_k = ac.apply_rope(k, positions, scaling=scaling, partial_rotary_factor=0.5)
    torch.testing.assert_close(got_k[..., :40], k_rot, rtol=0, atol=1e-12)
    assert torch.equal(got_q[..., 40:], q[..., 40:])  # the unrotated features pass through bit for bit


@pytest.mark.parametrize("name", [None, "yarn_v3"])
def test_apply_rope_interleaved_partial_equals_glm(name):
    # GLM: pairs (2i, 2i+1) within the first rotary_dim features, kept interleaved in its output.
    scaling, positions = SCALINGS.get(name), torch.arange(131_000, 131_005)
    q, k = randn(1, 2, 5, 64, seed=5), randn(1, 2, 5, 64, seed=6)  # (B, H, L, D)
    inv_freq, factor = hf_frequencies(64, 10000.0, scaling or {"rope_type": "linear", "factor": 1.0}, 0.5)
    cos, sin = hf_cos_sin(inv_freq, factor, positions[None])  # (1, L, 32)
    q_hf, k_hf = glm_apply(q, k, cos, sin)  # (B, H, L, 64) each
    kwargs = {"interleaved": True, "scaling": scaling, "partial_rotary_factor": 0.5}
    torch.testing.assert_close(ac.apply_rope(q, positions, **kwargs), q_hf, rtol=0, atol=1e-12)
    torch.testing.assert_close(ac.apply_rope(k, positions, **kwargs), k_hf, rtol=0, atol=1e-12)


def test_attention_factor_scales_rotated_norms_and_scores_by_its_square():
    x = randn(4, 64, seed=7)  # (L, D)
    _, factor = ac.rope_frequencies(64, scaling=YARN_PLAIN)
    rotated = ac.apply_rope(x, range(4), scaling=YARN_PLAIN, partial_rotary_factor=0.5)  # (L, D)
    torch.testing.assert_close(rotated[:, :32].norm(dim=-1), factor * x[:, :32].norm(dim=-1), rtol=1e-13, atol=0)
    # <R_m q, R_n k> depends on m - n only, times factor²: shift both by 131,000.
    q, k = randn(1, 64, seed=8), randn(1, 64, seed=9)  # (1, D)
    score = (ac.apply_rope(q, [5], scaling=YARN_PLAIN) * ac.apply_rope(k, [2], scaling=YARN_PLAIN)).sum()
    shifted = (ac.apply_rope(q, [131_005], scaling=YARN_PLAIN) * ac.apply_rope(k, [131_002], scaling=YARN_PLAIN)).sum()
    torch.testing.assert_close(score, shifted, rtol=0, atol=1e-9)
    plain = (ac.apply_rope(q, [5], scaling=LINEAR) * ac.apply_rope(k, [2], scaling=LINEAR)).sum()
    assert not torch.isclose(score, plain)  # the factor is really there


def test_angles_are_float64_far_past_the_trained_context():
    # Position 131,000 with factor 40: float32 angles would be off by up to ~131,000 · 2^-24 ≈ 8e-3 rad.
    positions = torch.arange(131_000, 131_004)
    inv_freq, factor = ac.rope_frequencies(64, scaling=YARN_V3)
    x = randn(4, 64, seed=10)  # (L, D)
    exact = hf_cos_sin(inv_freq, factor, positions)  # (L, D) float64
    x1, x2 = x[:, :32], x[:, 32:]
    expected = torch.cat(
        (x1 * exact[0][:, :32] - x2 * exact[1][:, :32], x2 * exact[0][:, :32] + x1 * exact[1][:, :32]), -1
    )
    torch.testing.assert_close(ac.apply_rope(x, positions, scaling=YARN_V3), expected, rtol=0, atol=1e-12)
    # float32 input: the rotation is float64 until cos/sin are rounded once, so only float32 rounding remains.
    got32 = ac.apply_rope(x.float(), positions, scaling=YARN_V3).double()  # (L, D)
    assert (got32 - expected).abs().max() < 8 * EPS32 * x.abs().max()
    angles32 = positions[:, None].float() * inv_freq.float()  # (L, D/2): what float32 angles would give
    assert (angles32.double() - positions[:, None] * inv_freq).abs().max() > 1e-3  # the bug this avoids


def test_cos_sin_cache_keys_on_scaling_and_rotary_dim():
    x = randn(3, 64, seed=11)  # (L, D)
    plain = ac.apply_rope(x, [1, 2, 3])  # (L, D) fills the cache for these positions
    for scaling in SCALINGS.values():
        scaled = ac.apply_rope(x, [1, 2, 3], scaling=scaling)
        assert not torch.equal(scaled, plain)
        inv_freq, factor = ac.rope_frequencies(64, scaling=scaling)
        cos, sin = hf_cos_sin(inv_freq, factor, torch.tensor([1, 2, 3]))  # (L, D)
        torch.testing.assert_close(scaled, x * cos + torch.cat((-x[:, 32:], x[:, :32]), -1) * sin, rtol=0, atol=1e-13)
    half = ac.apply_rope(x, [1, 2, 3], partial_rotary_factor=0.5)
    assert not torch.equal(half[:, :32], plain[:, :32])
    assert torch.equal(ac.apply_rope(x, [1, 2, 3]), plain)  # and plain RoPE comes back unchanged
    assert torch.equal(ac.apply_rope(x, [1, 2, 3], scaling={"rope_type": "default"}), plain)
