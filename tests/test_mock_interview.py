"""The timed mock interview's engine (interview/mock.py, notebook 18, issue #38 §3): wrong answers get their diagnoses
only after finish, right answers the full score, the progress file carries across sessions, reset gives stubs."""

import json
import math
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attn_core.exercises.drills_paged_allocator import ReferenceAllocator  # noqa: E402
from interview import mock  # noqa: E402


def causal_mask(q_len, k_len):
    return torch.ones(q_len, k_len, dtype=torch.bool).tril(k_len - q_len)  # (Lq, Lk), bottom-right


def safe_softmax(scores, dim=-1):
    e = (scores - scores.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)


def rms_norm(x, weight, eps=1e-6):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def sdpa(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., Lq, Lk)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(-1)  # (..., Lq, Lk)
    if mask is not None:
        weights = weights * mask.any(-1, keepdim=True)  # a fully masked row attends to nothing
    return weights @ v, weights


def select(index_scores, k):
    q_len, k_len = index_scores.shape
    visible = torch.ones(q_len, k_len, dtype=torch.bool).tril(k_len - q_len)  # (Lq, Lk)
    index = index_scores.masked_fill(~visible, float("-inf")).topk(min(k, k_len), -1).indices
    return torch.zeros_like(visible).scatter(-1, index, True) & visible


def sink_softmax(scores, sinks):
    column = sinks[:, None, None].expand(*scores.shape[:-1], 1)  # (H, Lq, 1)
    return torch.cat([scores, column], -1).softmax(-1)[..., :-1]


def merge(out_a, lse_a, out_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)  # (H, Lq)
    weight_a, weight_b = torch.exp(lse_a - lse).nan_to_num(), torch.exp(lse_b - lse).nan_to_num()
    return weight_a[..., None] * out_a + weight_b[..., None] * out_b, lse


def verify(p, q):
    excess = (p - q).clamp(min=0)
    return torch.clamp(p / q, max=1.0), excess / excess.sum()


def quantize_kv(k, v):
    k_scale, v_scale = k.abs().amax(0, keepdim=True) / 127, v.abs().amax(1, keepdim=True) / 127
    return torch.round(k / k_scale).to(torch.int8), k_scale, torch.round(v / v_scale).to(torch.int8), v_scale


def delta_chunk(state, q, k, v, alpha, beta):
    outs = []
    for t in range(k.shape[0]):
        state = alpha[t] * (state - beta[t] * torch.outer(k[t], k[t] @ state)) + beta[t] * torch.outer(k[t], v[t])
        outs.append(q[t] @ state)
    return torch.stack(outs), state


def absorbed_mla(q_nope, q_rope, latent, k_rope, w_uk, w_uv):
    q_latent = q_nope @ w_uk  # (H, Lq, rank)
    scores = (q_latent @ latent.T + q_rope @ k_rope.T) / math.sqrt(q_nope.shape[-1] + q_rope.shape[-1])
    q_len, total = scores.shape[-2:]
    visible = torch.ones(q_len, total, dtype=torch.bool).tril(total - q_len)  # (Lq, T)
    weights = scores.masked_fill(~visible, float("-inf")).softmax(-1)  # (H, Lq, T)
    return q_latent, (weights @ latent) @ w_uv.mT


class PagedAllocator(ReferenceAllocator):
    pass


RIGHT = {name: fn for name, fn in globals().items() if name in {p.name for p in mock.POOL}}


def test_every_problem_of_the_pool_has_a_right_answer_here():
    assert sorted(RIGHT) == sorted(p.name for p in mock.POOL)


def test_right_answers_get_the_full_score(tmp_path, capsys):
    session = mock.Mock(problems=[p.id for p in mock.POOL], questions=["q01"], progress_path=tmp_path / "p.json")
    session.submit(*RIGHT.values())
    report = session.finish()
    assert f"{len(mock.POOL)} / {len(mock.POOL)}" in report and "❌" not in report, report
    assert capsys.readouterr().out == ""  # the graders' verdicts went into the report, not to the screen


def _wrong_sinks(scores, sinks):
    return scores.softmax(-1)  # rows sum to 1: the sink never took its share


class _HeadFirst(ReferenceAllocator):
    def __init__(self, num_blocks, block_size):
        super().__init__(num_blocks, block_size, free="head_first")


def test_wrong_answers_get_their_diagnoses_after_finish_only(tmp_path, capsys):
    session = mock.Mock(
        problems=["sinks", "paged_allocator", "lse_merge"], questions=["q02"], progress_path=tmp_path / "p.json"
    )
    session.submit(sinks=_wrong_sinks, paged_allocator=_HeadFirst)  # lse_merge left blank
    assert session.report() == mock._t("pending")
    assert capsys.readouterr().out == "" and not (tmp_path / "p.json").exists()  # nothing graded or written yet
    report = session.finish()
    assert "each row sums to 1" in report
    assert "release them tail first" in report
    assert "not attempted yet" in report
    assert "0 / 3" in report
    assert "For independent zero-mean" in report  # q02's answer is shown after finish
    assert session.finish() == report  # graded once


def test_progress_across_two_sessions(tmp_path):
    path = tmp_path / "progress.json"
    first = mock.Mock(problems=["sinks"], questions=["q01"], progress_path=path)
    first.submit(sinks=_wrong_sinks)
    first.finish("time")
    second = mock.Mock(problems=["sinks"], questions=["q01"], progress_path=path)
    second.submit(sink_softmax)
    second.rate("q01", True)
    assert "1 / 1" in second.finish()
    attempts = json.loads(path.read_text(encoding="utf-8"))["attempts"]
    assert [a["score"] for a in attempts] == [[0, 1], [1, 1]]
    assert [a["ended_by"] for a in attempts] == ["time", "finish"]
    assert attempts[1]["questions"] == {"q01": True}
    summary = mock.Progress(path).summary()
    assert "2 finished attempt(s)" in summary and "sinks: passed 1 of 2, last ✅" in summary


def test_reset_gives_blank_stubs_that_grade_as_not_attempted(tmp_path):
    session = mock.Mock(seed=3, progress_path=tmp_path / "p.json")
    session.submit(*(RIGHT[p.name] for p in session.problems))
    source = session.reset(insert_cell=False)
    assert session.answers == {}
    namespace = {"torch": torch, "mock": session}
    exec(source, namespace)  # the stubs define the functions and hand them in: every one a blank `...`
    assert sorted(session.answers) == sorted(p.id for p in session.problems)
    report = session.finish()
    assert report.count("not attempted yet") == len(session.problems) and "0 / " in report


def test_a_fixed_seed_draws_the_same_mock_and_the_brief_hides_the_answers(tmp_path):
    one, two = (mock.Mock(seed=7, progress_path=tmp_path / "p.json") for _ in range(2))
    assert [p.id for p in one.problems] == [p.id for p in two.problems]
    assert [c["id"] for c in one.questions] == [c["id"] for c in two.questions]
    brief = one.brief()
    assert all(card["en"]["a"].splitlines()[0] not in brief for card in one.questions)
    random_draw = mock.Mock(seed=None, progress_path=tmp_path / "p.json")
    assert isinstance(random_draw.seed, int)


def test_bad_input_gets_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="unknown problems"):
        mock.Mock(problems=["no_such_drill"], progress_path=tmp_path / "p.json")
    with pytest.raises(ValueError, match="unknown pool"):
        mock.Mock(pool=["sinks", "flash"], progress_path=tmp_path / "p.json")
    session = mock.Mock(problems=["sinks"], questions=["q01"], progress_path=tmp_path / "p.json")
    with pytest.raises(ValueError, match="none of this mock's answers"):
        session.submit(merge)
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="not a mock progress file"):
        mock.Progress(tmp_path / "broken.json").load()


def test_the_default_progress_path_is_configurable(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTN_MOCK_PROGRESS", str(tmp_path / "elsewhere.json"))
    assert mock.default_progress_path() == tmp_path / "elsewhere.json"
    monkeypatch.delenv("ATTN_MOCK_PROGRESS")
    assert mock.default_progress_path() == Path.home() / ".attn_notebooks" / "mock_progress.json"


def test_the_report_reads_in_chinese(tmp_path):
    import attn_core as ac

    ac.set_language("zh")
    try:
        session = mock.Mock(problems=["sinks"], questions=["q01"], progress_path=tmp_path / "p.json")
        session.submit(sinks=_wrong_sinks)
        report = session.finish()
    finally:
        ac.set_language("en")
    assert "每一行的和都是 1" in report and "得分" in report and "注意力计算的是什么" in report


def test_the_timer_counts_down_and_finishes_at_zero(tmp_path):
    session = mock.Mock(problems=["sinks"], questions=["q01"], minutes=1, progress_path=tmp_path / "p.json")
    timer = session.timer()
    play, label, _ = timer.widget.children[0].children
    play.value = 30
    assert label.value == "⏱ 00:30" and session.result is None
    play.value = 60
    assert label.value == "⏱ 00:00" and session.result["ended_by"] == "time"
    session.reset(insert_cell=False)
    assert play.value == 0 and label.value == "⏱ 01:00" and session.result is None
