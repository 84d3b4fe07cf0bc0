"""tools/attention_census.py: every attention feature of the pinned transformers is taught, excluded with a reason,
or pending (read, not built yet); a feature it has never seen is caught; its detections are right where we know.

The census reads transformers' config defaults and modeling sources as text (nothing is run); one census is taken
for the whole module (~10 s of CPU, most of it building 189 default configs).
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import attention_census as census  # noqa: E402


@pytest.fixture(scope="module")
def rows():
    return {row.model_type: row for row in census.census()}


def test_every_feature_is_covered_excluded_or_pending(rows):
    unaccounted = {(t, f) for t, row in rows.items() for f, s in row.status.items() if s == "not covered"}
    assert not unaccounted, (
        f"classify these (a piece in PIECES, a reason in EXCLUDED, or PENDING): {sorted(unaccounted)}"
    )


def test_the_walk_sees_the_pinned_text_decoders(rows):
    assert len(rows) >= 180
    for model_type in (
        "llama",
        "gemma3_text",
        "gemma4_text",
        "llama4_text",
        "qwen3_next",
        "qwen3_5_text",
        "gpt_oss",
        "diffllama",
        "deepseek_v3",
        "deepseek_v32",
        "deepseek_v4",
        "kimi_linear",
        "mamba2",
        "nemotron_h",
        "minimax",
    ):
        assert model_type in rows


@pytest.mark.parametrize(
    "model_type, features",
    [
        ("llama", {"rotary (RoPE)", "grouped/multi-query KV heads", "softmax attention"}),
        ("gemma3_text", {"sliding window", "QK-norm"}),
        ("gemma2", {"attention logit soft-capping", "sliding window"}),
        ("gpt_oss", {"learned attention sinks", "sliding window"}),
        ("diffllama", {"differential attention"}),
        ("qwen3_next", {"gated delta rule", "output gate", "partial rotary"}),
        ("deepseek_v3", {"latent KV (MLA)", "interleaved rotary pairs"}),
        ("deepseek_v32", {"top-k indexer (DSA)", "latent KV (MLA)"}),
        ("deepseek_v4", {"compressed KV (DeepSeek-V4)", "top-k indexer (DSA)"}),
        ("llama4_text", {"chunked local attention", "NoPE layers", "NoPE query temperature", "weightless L2 QK-norm"}),
        ("gemma4_text", {"K = V", "KV sharing across layers", "sliding window"}),
        ("kimi_linear", {"per-channel gated delta (KDA)", "latent KV (MLA)"}),
        ("mamba2", {"state-space duality (Mamba-2)"}),
        ("nemotron_h", {"state-space duality (Mamba-2)", "softmax attention"}),
        ("minimax", {"lightning attention", "softmax attention"}),
        ("mamba", {"Mamba-1 selective scan"}),
        ("bloom", {"ALiBi"}),
        ("bart", {"cross-attention"}),
    ],
)
def test_known_features_are_detected(rows, model_type, features):
    assert features <= set(rows[model_type].features), sorted(rows[model_type].features)


def test_known_absences(rows):
    assert "latent KV (MLA)" not in rows["llama"].features
    assert "state-space duality (Mamba-2)" not in rows["mamba"].features  # Mamba-1 is not SSD
    assert "softmax attention" not in rows["mamba2"].features


def test_an_unseen_attention_key_or_mixer_class_is_not_covered():
    cfg = {
        "num_attention_heads": 4,
        "rope_parameters": {"rope_type": "default"},
        "attn_wormhole_radius": 3,
        "layer_types": ["full_attention", "teleport_attention"],
    }
    src = "class FooAttention(nn.Module):\n    softmax(\nclass FooWormholeMixer2(nn.Module):\n"
    features = census.detect("foo", cfg=cfg, src=src)
    assert "config key 'attn_wormhole_radius'" in features
    assert "layer kind 'teleport_attention'" in features
    assert "mixer class FooWormholeMixer2" in features
    assert census.status_of("config key 'attn_wormhole_radius'") == "not covered"


def test_a_covered_feature_names_an_existing_piece_and_a_missing_one_is_not_covered(monkeypatch):
    assert census.status_of("latent KV (MLA)").startswith("covered: ac.MultiHeadLatentAttention")
    monkeypatch.setitem(census.PIECES, "latent KV (MLA)", ("NoSuchLayer", "09", "x"))
    assert census.status_of("latent KV (MLA)") == "not covered"
    monkeypatch.setitem(census.PIECES, "QK-norm", ("GroupedQueryAttention(no_such_option=)", "11", "x"))
    assert census.status_of("QK-norm") == "not covered"


def test_no_stale_exclusions_or_pending_entries(rows):
    seen = {f for row in rows.values() for f in row.features}
    assert not set(census.EXCLUDED) - seen, "an exclusion no model type needs any more: delete it"
    assert not set(census.PENDING) - seen, "a pending entry no model type needs any more: delete it"
    assert not {
        f
        for f in census.PENDING
        if f in census.PIECES and census.piece_exists(census.PIECES[f][0]) and f not in census.EXCLUDED
    } - set(census.PIECES), "built: it reads as covered now"
