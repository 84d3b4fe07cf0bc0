"""Notebook 09 (bug hunt): every planted bug is caught by its probe, and its fix passes."""

import pytest
import torch

from attn_core.exercises import NOT_DONE
from attn_core.exercises.bug_hunt import BUGS, Bug, bug_report, check_all, check_bug, show_bug

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
