"""Notebook 14 (bug hunt): every planted bug is caught by its probe, and its fix passes."""

import math
import re

import pytest
import torch
import torch.nn.functional as F

from attn_core.exercises import NOT_DONE
from attn_core.exercises.bug_hunt import BUGS, Bug, HeadsBase, bug_report, check_all, check_bug, show_bug

# The kind of problem each probe must name for its buggy version (not just "something differs").
EXPECTED_DIAGNOSIS = {
    "scale_by_model_dim": "sqrt(hidden_dim)",
    "value_from_key_proj": "v_proj is never used",
    "flipped_mask": "convention is flipped",
    "neg_inf_nan": "NaN",
    "softmax_wrong_dim": "normalised over the queries",
    "mask_after_softmax": "no longer sum to 1",
    "dropout_before_softmax": "before the softmax",
    "dropout_in_eval": "still active in eval",
    "view_without_contiguous": "RuntimeError: view size is not compatible",
    "gqa_repeat": "wrong kv heads",
    "mask_not_per_head": "mask of sequence h",
    "causal_top_left": "aligned top-left",
    "rope_positions_restart": "positions restart at 0 in every call",
    "rope_on_values": "you rotated V as well",
    "rope_layout": "pairs features (2i, 2i+1)",
    "mla_rope_absorbed": "RoPE pushed through the absorbed W_UK",
    "mla_absorb_wuv_transpose": "the weights are right but out is not",
    "mla_cache_up_projected": "up-projected per-head keys",
}


def test_catalogue_has_at_least_ten_distinct_bugs_with_hints():
    assert len(BUGS) >= 10
    assert len({bug.id for bug in BUGS.values()}) == len(BUGS)
    for bug_id, bug in BUGS.items():
        assert isinstance(bug, Bug) and bug.id == bug_id
        assert bug.hint.strip() and bug.story.strip() and bug.title.strip() and bug.signature.strip()
        assert bug.buggy is not bug.fixed
    assert set(EXPECTED_DIAGNOSIS) == set(BUGS)


@pytest.mark.parametrize("bug_id", list(BUGS))
def test_probe_catches_the_bug_with_the_right_diagnosis(bug_id):
    bug = BUGS[bug_id]
    problem = bug.probe(bug.buggy)
    assert problem is not None, f"{bug_id}: the probe does not catch the planted bug"
    assert EXPECTED_DIAGNOSIS[bug_id] in problem, problem


@pytest.mark.parametrize("bug_id", list(BUGS))
def test_probe_passes_the_fix(bug_id):
    bug = BUGS[bug_id]
    assert bug.probe(bug.fixed) is None


@pytest.mark.parametrize("bug_id", list(BUGS))
def test_probe_is_deterministic_and_leaves_the_global_rng_alone(bug_id):
    bug = BUGS[bug_id]
    torch.manual_seed(123)
    before = torch.get_rng_state()
    first = bug.probe(bug.buggy)
    assert torch.equal(torch.get_rng_state(), before)
    assert bug.probe(bug.buggy) == first


@pytest.mark.parametrize("bug_id", list(BUGS))
def test_check_bug_prints_tick_for_fix_and_cross_for_bug(bug_id, capsys):
    bug = BUGS[bug_id]
    assert check_bug(bug_id, bug.fixed) is True
    assert capsys.readouterr().out.startswith(f"✅ check_bug({bug_id!r})")
    assert check_bug(bug_id, bug.buggy) is False
    assert capsys.readouterr().out.startswith(f"❌ check_bug({bug_id!r})")


def test_a_copy_of_the_buggy_code_is_still_caught(capsys):
    def my_attention(q, k, v, mask=None):  # the learner "fixed" nothing
        return BUGS["softmax_wrong_dim"].buggy(q, k, v, mask)

    assert check_bug("softmax_wrong_dim", my_attention) is False
    assert "normalised over the queries" in capsys.readouterr().out


def test_check_bug_stub_unknown_id_and_crash_never_raise(capsys):
    assert check_bug("flipped_mask", ...) is False
    assert NOT_DONE in capsys.readouterr().out
    assert check_bug("no_such_bug", BUGS["flipped_mask"].fixed) is False
    assert "unknown bug id 'no_such_bug'" in capsys.readouterr().out

    def crashes(q, k, v, mask=None):
        raise ValueError("boom")

    assert check_bug("flipped_mask", crashes) is False
    assert "ValueError: boom" in capsys.readouterr().out

    class NotALayer:
        def __init__(self, hidden_dim, num_heads):
            pass

    assert check_bug("scale_by_model_dim", NotALayer) is False
    assert "not an nn.Module" in capsys.readouterr().out


def test_layer_with_renamed_projections_is_explained(capsys):
    class Renamed(torch.nn.Module):
        def __init__(self, hidden_dim, num_heads):
            super().__init__()
            self.qkv = torch.nn.Linear(hidden_dim, 3 * hidden_dim)

    assert check_bug("scale_by_model_dim", Renamed) is False
    assert "keep the q_proj/k_proj/v_proj/o_proj" in capsys.readouterr().out


def test_show_bug_reports_the_buggy_version(capsys):
    assert show_bug("causal_top_left") is False
    out = capsys.readouterr().out
    assert out.startswith("❌ test 'causal_top_left' on the buggy code") and "aligned top-left" in out


def test_scoreboard_counts_fixed_failing_and_missing(capsys):
    ids = list(BUGS)
    fixes = {ids[0]: BUGS[ids[0]].fixed, ids[1]: BUGS[ids[1]].fixed, ids[2]: BUGS[ids[2]].buggy}
    assert bug_report(fixes) == 2
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"fixed 2/{len(BUGS)}"
    assert f"✅ {ids[0]}" in out and f"✅ {ids[1]}" in out
    assert f"❌ {ids[2]}: still failing" in out
    assert f"⬜ {ids[3]}: not attempted" in out
    assert out.count("✅") == 2 and out.count("❌") == 1 and out.count("⬜") == len(BUGS) - 3


def test_check_all_reads_fixed_names_from_a_namespace(capsys):
    namespace = {f"fixed_{bug_id}": bug.fixed for bug_id, bug in BUGS.items()}
    assert check_all(namespace) == len(BUGS)
    assert capsys.readouterr().out.splitlines()[0] == f"fixed {len(BUGS)}/{len(BUGS)}"
    namespace["fixed_gqa_repeat"] = BUGS["gqa_repeat"].buggy
    del namespace["fixed_neg_inf_nan"]
    assert check_all(namespace) == len(BUGS) - 2
    out = capsys.readouterr().out
    assert "❌ gqa_repeat: still failing" in out and "⬜ neg_inf_nan: not attempted" in out


# ------------------------------------------------------------------ fixes that are right, or only look right


def _masked_scores(q, k, mask, fill):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, Lq, Lk)
    return scores if mask is None else scores.masked_fill(~mask, fill)  # (B, H, Lq, Lk)


def nan_weights_clean_output(q, k, v, mask=None):
    """Keeps the -inf fill and cleans only the output: the returned weights still hold NaN rows."""
    weights = _masked_scores(q, k, mask, float("-inf")).softmax(dim=-1)  # (B, H, Lq, Lk), NaN on dead rows
    return (weights @ v).nan_to_num(), weights  # (B, H, Lq, D), (B, H, Lq, Lk)


def nan_weights_sdpa_output(q, k, v, mask=None):
    """Takes the output from torch's kernel (0 on dead rows) but returns NaN weights."""
    weights = _masked_scores(q, k, mask, float("-inf")).softmax(dim=-1)  # (B, H, Lq, Lk)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights  # (B, H, Lq, D), (B, H, Lq, Lk)


def neg_inf_fill(q, k, v, mask=None):
    """Correct everywhere except on rows with no visible key (bug 4's topic, not bugs 3, 5, 6's)."""
    weights = _masked_scores(q, k, mask, float("-inf")).softmax(dim=-1)  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


def renormalise_after_zeroing(q, k, v, mask=None):
    """Bug 6 fixed the other way: zero the blocked weights, then divide each row by its new sum."""
    weights = _masked_scores(q, k, None, 0.0).softmax(dim=-1)  # (B, H, Lq, Lk)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # (B, H, Lq, Lk)
        weights = weights / weights.sum(dim=-1, keepdim=True)  # (B, H, Lq, Lk) rows sum to 1 again
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


def finite_fill(q, k, v, mask=None):
    """Bug 4 fixed with the dtype's own minimum: dead rows get uniform, finite weights."""
    weights = _masked_scores(q, k, mask, torch.finfo(q.dtype).min).softmax(dim=-1)  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


def nan_to_num_on_weights(q, k, v, mask=None):
    """Bug 4 fixed by cleaning the weights (not only the output): dead rows become zeros."""
    weights = _masked_scores(q, k, mask, float("-inf")).softmax(dim=-1).nan_to_num()  # (B, H, Lq, Lk)
    return weights @ v, weights  # (B, H, Lq, D), (B, H, Lq, Lk)


@pytest.mark.parametrize("fake_fix", [nan_weights_clean_output, nan_weights_sdpa_output])
def test_a_finite_output_with_nan_weights_is_not_a_fix(fake_fix, capsys):
    assert check_bug("neg_inf_nan", fake_fix) is False
    out = capsys.readouterr().out
    assert "rows of the weights you return contain NaN" in out and "finite weights" in out, out


@pytest.mark.parametrize("fix", [finite_fill, nan_to_num_on_weights, BUGS["neg_inf_nan"].fixed])
def test_bug_4_accepts_any_finite_weights_on_rows_with_no_visible_key(fix):
    assert BUGS["neg_inf_nan"].probe(fix) is None


def test_bug_4_probe_still_contains_a_query_with_no_visible_key():
    assert "NaN" in BUGS["neg_inf_nan"].probe(neg_inf_fill)


@pytest.mark.parametrize("bug_id", ["flipped_mask", "softmax_wrong_dim", "mask_after_softmax"])
def test_a_correct_fix_written_with_neg_inf_passes_bugs_3_5_6(bug_id):
    assert BUGS[bug_id].probe(neg_inf_fill) is None
    assert "sees at least one key" in BUGS[bug_id].signature


def test_bug_6_fixed_by_renormalising_after_zeroing_passes():
    assert BUGS["mask_after_softmax"].probe(renormalise_after_zeroing) is None


def _mask_layer(add_head_axis):
    class MaskLayer(HeadsBase):
        def forward(self, x, mask=None):
            B, L, _ = x.shape  # x (B, L, hidden); mask (B, L, L) or (L, L)
            q = self.split_heads(self.q_proj(x))  # (B, H, L, d)
            k = self.split_heads(self.k_proj(x))  # (B, H, L, d)
            v = self.split_heads(self.v_proj(x))  # (B, H, L, d)
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, L)
            if mask is not None:
                scores = scores.masked_fill(~add_head_axis(mask), torch.finfo(scores.dtype).min)  # (B, H, L, L)
            weights = scores.softmax(dim=-1)  # (B, H, L, L)
            return self.o_proj((weights @ v).transpose(1, 2).reshape(B, L, self.hidden_dim)), weights

    return MaskLayer


def test_bug_11_unsqueeze_1_crash_on_an_l_by_l_mask_is_diagnosed():
    problem = BUGS["mask_not_per_head"].probe(_mask_layer(lambda mask: mask.unsqueeze(1)))
    assert problem.startswith("with a causal mask (L, L)"), problem
    assert "must match the size" in problem and "unsqueeze(-3)" in problem and "Annotated Transformer" in problem


@pytest.mark.parametrize(
    "add_head_axis",
    [lambda mask: mask.unsqueeze(-3), lambda mask: mask.unsqueeze(1) if mask.ndim == 3 else mask],
    ids=["unsqueeze(-3)", "ndim-aware unsqueeze(1)"],
)
def test_bug_11_fixes_that_handle_both_mask_shapes_pass(add_head_axis):
    assert BUGS["mask_not_per_head"].probe(_mask_layer(add_head_axis)) is None


@pytest.mark.parametrize("bug_id", list(BUGS))
def test_learner_facing_text_quotes_mistakes_not_notes_learners_lack(bug_id):
    """Stories cite the mistake and public issues; no course notes, markdown files or paths outside the repo."""
    bug = BUGS[bug_id]
    text = " ".join([bug.title, bug.story, bug.signature, bug.hint, bug.probe(bug.buggy)])
    assert not re.search(r"(?i)\bseed|\.md\b|\.\./", text), f"{bug_id}: {text}"


def test_attention_dropout_is_not_credited_to_the_2017_paper():
    story = BUGS["dropout_before_softmax"].story
    assert "Vaswani" not in story and "Annotated Transformer" in story and "BERT" in story


# ------------------------------------------------------------------ the RoPE bugs (13-15)


def test_rope_bugs_come_after_the_twelve_of_the_bug_map():
    assert list(BUGS)[12:15] == ["rope_positions_restart", "rope_on_values", "rope_layout"]


def test_bug_13_is_caught_in_a_decode_step_not_in_the_prefill():
    problem = BUGS["rope_positions_restart"].probe(BUGS["rope_positions_restart"].buggy)
    assert "decode step 1" in problem and "len(cache)" in problem, problem


def test_bug_14_keeps_the_weights_right_and_is_caught_by_the_output():
    import attn_core as ac

    bug = BUGS["rope_on_values"]
    layer = bug.buggy(16, 2).double().eval()
    ref = ac.MultiHeadAttention(16, 2, rope_base=10000.0).double().eval()
    ref.load_state_dict(layer.state_dict())
    x = torch.randn(2, 5, 16, dtype=torch.float64)  # (B, L, hidden)
    out, weights = layer(x)  # (B, L, hidden), (B, H, L, L)
    want_out, want_weights = ref(x, is_causal=True)
    torch.testing.assert_close(weights, want_weights)
    assert not torch.allclose(out, want_out)


class AttnCoreRopeLayer(torch.nn.Module):
    """A fix written with attn_core itself: the layer with rope_base, causal, through the cache."""

    def __init__(self, hidden_dim, num_heads, rope_base=10000.0):
        super().__init__()
        import attn_core as ac

        self.inner = ac.MultiHeadAttention(hidden_dim, num_heads, rope_base=rope_base)
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (
            self.inner.q_proj, self.inner.k_proj, self.inner.v_proj, self.inner.o_proj,
        )  # fmt: skip

    def forward(self, x, cache=None):
        return self.inner(x, is_causal=True, cache=cache)


@pytest.mark.parametrize("bug_id", ["rope_positions_restart", "rope_on_values"])
def test_rope_layer_bugs_accept_attn_core_itself(bug_id):
    assert BUGS[bug_id].probe(AttnCoreRopeLayer) is None


def test_bug_15_accepts_other_correct_forms():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    import attn_core as ac

    def hugging_face(x, positions, base=10000.0):
        d = x.shape[-1]
        angles = positions[:, None].double() * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (L, d/2)
        emb = torch.cat((angles, angles), dim=-1)  # (L, d)
        return apply_rotary_pos_emb(x, x, emb.cos()[None], emb.sin()[None])[0]  # (..., L, d)

    def complex_form(x, positions, base=10000.0):
        d = x.shape[-1]
        angles = positions[:, None].double() * base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (L, d/2)
        z = torch.complex(x[..., : d // 2], x[..., d // 2 :]) * torch.polar(torch.ones_like(angles), angles)
        return torch.cat((z.real, z.imag), dim=-1)  # (..., L, d)

    for fix in (hugging_face, complex_form, lambda x, positions, base=10000.0: ac.apply_rope(x, positions, base=base)):
        assert BUGS["rope_layout"].probe(fix) is None


def test_bug_15_layouts_differ_by_a_feature_permutation():
    """The story's claim: the interleaved code is right on features stored in interleaved order."""
    bug = BUGS["rope_layout"]
    x = torch.randn(3, 6, 8, dtype=torch.float64)  # (B, L, d)
    positions = torch.arange(6)
    order = torch.stack((torch.arange(4), torch.arange(4) + 4), dim=-1).flatten()  # 0, 4, 1, 5, ...: half -> pairs
    torch.testing.assert_close(bug.buggy(x[..., order], positions), bug.fixed(x, positions)[..., order])


def test_bug_15_diagnoses_sign_and_no_rotation():
    probe = BUGS["rope_layout"].probe
    assert "unrotated" in probe(lambda x, positions, base=10000.0: x.clone())
    assert "wrong sign" in probe(lambda x, positions, base=10000.0: BUGS["rope_layout"].fixed(x, -positions, base))


# ------------------------------------------------------------------ the MLA bugs (16-18)

MLA_BUGS = ["mla_rope_absorbed", "mla_absorb_wuv_transpose", "mla_cache_up_projected"]


def test_mla_bugs_are_16_to_18():
    assert list(BUGS)[15:18] == MLA_BUGS


def _mla_pair(bug_id, seed=0):
    import attn_core as ac

    dims = dict(kv_lora_rank=8, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5)
    torch.manual_seed(seed)
    layer = BUGS[bug_id].buggy(24, 3, **dims, rope_base=100.0).double().eval()
    ref = ac.MultiHeadLatentAttention(24, 3, **dims, rope_base=100.0).double().eval()
    ref.load_state_dict(layer.state_dict())  # DeepSeek's names: no renaming
    return layer, ref


def test_bug_16_changes_the_weights_already_in_a_full_pass():
    layer, ref = _mla_pair("mla_rope_absorbed")
    x = torch.randn(2, 5, 24, dtype=torch.float64)  # (B, L, hidden)
    assert not torch.allclose(layer(x)[1], ref(x, is_causal=True)[1])


def test_bug_17_keeps_the_weights_right_and_is_caught_by_the_output():
    layer, ref = _mla_pair("mla_absorb_wuv_transpose")
    x = torch.randn(2, 5, 24, dtype=torch.float64)  # (B, L, hidden)
    out, weights = layer(x)  # (B, L, hidden), (B, H, L, L)
    want_out, want_weights = ref(x, is_causal=True, absorb=True)
    torch.testing.assert_close(weights, want_weights)
    assert not torch.allclose(out, want_out)


def test_bug_18_is_numerically_right_and_caught_by_the_cache_layout():
    import attn_core as ac

    layer, ref = _mla_pair("mla_cache_up_projected")
    x = torch.randn(2, 5, 24, dtype=torch.float64)  # (B, L, hidden)
    cache = ac.KVCache()
    outs = [layer(x[:, :3], cache=cache)[0], layer(x[:, 3:4], cache=cache)[0], layer(x[:, 4:], cache=cache)[0]]
    torch.testing.assert_close(torch.cat(outs, dim=1), ref(x, is_causal=True)[0])  # right numbers
    ref_cache = ac.KVCache()
    ref(x, is_causal=True, cache=ref_cache)
    assert cache.nbytes == 2 * 5 * 3 * ((6 + 4) + 5) * 8  # B·T·H·(nope + rope + v)·8 bytes
    assert ref_cache.nbytes == 2 * 5 * (8 + 4) * 8  # B·T·(rank + rope)·8 bytes
    problem = BUGS["mla_cache_up_projected"].probe(BUGS["mla_cache_up_projected"].buggy)
    assert "prefill" in problem and "MHA-sized" in problem, problem


class AttnCoreMla(torch.nn.Module):
    """A fix written with attn_core itself, naive or absorbed."""

    def __init__(self, hidden_dim, num_heads, *, absorb=False, **dims):
        super().__init__()
        import attn_core as ac

        self.inner = ac.MultiHeadLatentAttention(hidden_dim, num_heads, **dims)
        self.absorb = absorb
        for name in ("q_proj", "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "o_proj"):
            setattr(self, name, getattr(self.inner, name))

    def forward(self, x, cache=None):
        return self.inner(x, is_causal=True, cache=cache, absorb=self.absorb)


@pytest.mark.parametrize("bug_id", MLA_BUGS)
@pytest.mark.parametrize("absorb", [False, True])
def test_mla_probes_accept_attn_core_and_every_fix(bug_id, absorb):
    def make(*args, **kwargs):
        return AttnCoreMla(*args, absorb=absorb, **kwargs)

    assert BUGS[bug_id].probe(make) is None
    for other in MLA_BUGS:  # each fix is a correct MLA layer: every MLA probe passes it
        assert BUGS[bug_id].probe(BUGS[other].fixed) is None


@pytest.mark.parametrize("bug_id", MLA_BUGS)
def test_mla_probes_catch_every_mla_bug(bug_id):
    for other in MLA_BUGS:
        assert BUGS[bug_id].probe(BUGS[other].buggy) is not None
