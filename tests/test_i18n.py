"""ac.set_language("zh"): attn_core's learner-facing text in Chinese, English untouched by default (issue #16).

The switch, the verdict line of every grader (``feedback``) with the shared messages of
``attn_core.exercises`` (not attempted, your function raised ..., renamed parameters, ungradable answers),
the explorers' labels, explanation lines and "Not possible" messages over a sweep of settings, and the
audit that lists verdicts without a translation (tests/zh_audit.py).
"""

from __future__ import annotations

import pytest
import torch

import attn_core as ac
from attn_core import i18n
from attn_core.exercises import NOT_DONE, call_learner, feedback, never_raises
from attn_core.viz import mla, rope, tiles, widgets


@pytest.fixture
def zh(monkeypatch):
    """Chinese for one test; the session's audit is not touched (the test's own messages are made up)."""
    monkeypatch.setattr(i18n, "_audit", None)
    ac.set_language("zh")
    try:
        yield
    finally:
        ac.set_language("en")


def test_the_switch() -> None:
    assert ac.get_language() == "en"  # the default
    assert "set_language" in ac.__all__ and "get_language" in ac.__all__
    for bad in ["fr", "ZH", "", None, 1]:
        with pytest.raises(ValueError, match=r"language must be one of 'en', 'zh', got"):
            ac.set_language(bad)
    assert ac.get_language() == "en"


def test_english_verdicts_are_unchanged(capsys) -> None:
    assert feedback("attention from scratch", None) is True
    assert feedback("attention from scratch", NOT_DONE) is False
    assert capsys.readouterr().out == f"✅ attention from scratch: correct.\n❌ attention from scratch: {NOT_DONE}\n"


def test_chinese_verdicts(zh, capsys) -> None:
    assert feedback("x", None) is True
    assert feedback("x", NOT_DONE) is False
    assert feedback("x", "a message no catalog knows") is False  # stays English, never crashes
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "✅ x：正确。",
        "❌ x：还没有作答：把 `...` / `raise NotImplementedError` 换成你的答案，然后重新运行这个单元格。",
        "❌ x：a message no catalog knows",
    ]


@pytest.mark.filterwarnings("ignore:The use of `x.T`:UserWarning")  # the k.T mistake below, on purpose
def test_call_learner_messages_in_chinese(zh) -> None:
    def batch_transpose(q, k):
        return q @ k.T

    def crash(q, k):
        raise IndexError("index 3 is out of bounds")

    def keyword_only(*, query, key):
        return query

    q = torch.ones(2, 3, 4)  # (B, L, d)
    expected = {
        "你的函数抛出了 RuntimeError：": call_learner(batch_transpose, q, q)[1],
        "提示：对批量张量，k.T 会反转所有维度": call_learner(batch_transpose, q, q)[1],
        "你的函数抛出了 IndexError：index 3 is out of bounds": call_learner(crash, q, q)[1],
        "请保留练习给出的参数名：参数要叫 `q`, `k`": call_learner(keyword_only, q=q, k=q)[1],
        "请传入函数本身（只写函数名，不加括号），你传入的是 Tensor。": call_learner(q, q)[1],
    }
    for chinese, english in expected.items():
        assert chinese in i18n.translate(english), (english, i18n.translate(english))
        assert i18n.translation(english) is not None, english


def test_never_raises_message_in_chinese(zh, capsys) -> None:
    @never_raises("a fragile check")
    def check(answer):
        raise KeyError("boom")

    assert check(1) is False
    assert capsys.readouterr().out.startswith("❌ a fragile check：无法评判这个答案（KeyError：'boom'）。")


def test_catalogs_load_and_the_first_match_wins() -> None:
    entries = i18n.catalog()
    modules = [module for _, _, module in entries]
    assert "zh_common" in modules and "zh_viz" in modules
    assert modules[-1] == "zh_common"  # the most general patterns are searched last
    assert i18n.translate(NOT_DONE) == NOT_DONE  # English stays English
    assert i18n.translate(NOT_DONE, "zh").startswith("还没有作答")
    assert i18n.translation("no catalog has this") is None


def _explanations():
    for kind in widgets.MASK_KINDS:
        for heads, kv_heads in [(1, 1), (8, 2), (6, 3)]:
            for dropout_p in [0.0, 0.3]:
                yield widgets.explain_attention(
                    mask_kind=kind, num_heads=heads, num_kv_heads=kv_heads, dropout_p=dropout_p, scaled=heads != 6
                )
    for q_len, k_len, block_q, block_k, is_causal in [(16, 16, 4, 4, True), (8, 16, 4, 4, True), (16, 8, 4, 4, True)]:
        total = len(tiles.tile_schedule(q_len, k_len, block_q, block_k, is_causal))
        for step in range(total + 1):
            for row in [0, 5, q_len - 1]:
                params = dict(q_len=q_len, k_len=k_len, block_q=block_q, block_k=block_k, is_causal=is_causal)
                yield tiles.explain_tiles(step, row=row, **params)
    yield tiles.explain_tiles(3, q_len=37, k_len=37, block_q=8, block_k=8, is_causal=False, row=20)
    for q_position, k_position, pair, max_distance in [(6, 2, 0, 64), (100, 2, 3, 16), (0, 0, 7, 64)]:
        yield rope.explain_rope(q_position=q_position, k_position=k_position, pair=pair, max_distance=max_distance)
    for overrides in [{}, dict(num_heads=16, num_kv_heads=4, qk_rope_head_dim=0), dict(bytes_per_element=4)]:
        yield mla.explain_mla_cache(**overrides)
    yield (
        "12 tokens. Layer 0, head with the largest share on each pattern: previous → head 3 (41%); "
        "self → head 0 (22%); [CLS] → head 1 (50%); [SEP] → head 2 (10%); next → head 5 (30%)."
    )
    yield "12 tokens. Layer 2 head 3: average share of a token's attention on previous 41%, self 2%, [CLS] 30%."


def test_every_explanation_line_has_chinese() -> None:
    lines = list(_explanations())
    missing = [line for line in lines if i18n.translation(line) is None]
    assert not missing, missing[:5]
    assert len(lines) >= 150
    # numbers carried over as printed
    line = widgets.explain_attention(num_heads=8, num_kv_heads=2, seq_len=6)
    assert i18n.translation(line) == (
        "无掩码：每个查询都关注全部 6 个键。"
        "缩放系数 = 1/√16 ÷ 温度 1 = 0.25；每行最大权重的平均值为 0.43（1.00 = one-hot）。"
        "8 个查询头共享 2 个 KV 头：每组 4 个，头 h 读取 KV 头 h // 4；颜色相同 = 键和值相同。"
    )


def test_explorer_in_chinese(zh) -> None:
    explorer = widgets.gqa_explorer()
    labels = {name: control.description for name, control in explorer.controls.items()}
    assert labels["num_kv_heads"] == "KV 头数" and labels["seq_len"] == "词元数" and labels["panel_size"] == "尺寸"
    assert explorer.explanation.value.startswith("无掩码：每个查询都关注全部")
    explorer.controls["num_kv_heads"].value = 3
    assert explorer.explanation.value.startswith('<b style="color:#b00020">无法显示：查询头数（8，q 的第 -3 维）')
    for factory in (tiles.tiles_explorer, rope.rope_explorer, mla.mla_cache_explorer, widgets.mask_explorer):
        other = factory()
        assert other.error is None and not other.explanation.value.isascii(), factory.__name__


def test_explorer_in_english_by_default() -> None:
    explorer = widgets.gqa_explorer()
    assert explorer.controls["num_kv_heads"].description == "kv heads"
    assert explorer.explanation.value.startswith("no mask: every query attends to all")
    explorer.controls["num_kv_heads"].value = 3
    assert explorer.explanation.value.startswith('<b style="color:#b00020">Not possible: query heads (8')


def test_the_audit_records_untranslated_verdicts(monkeypatch, capsys) -> None:
    monkeypatch.setattr(i18n, "_audit", None)
    i18n.start_audit()
    feedback("a name no catalog has", "a problem no catalog has")
    feedback("a name no catalog has", NOT_DONE)
    capsys.readouterr()
    assert i18n.untranslated() == {"a name no catalog has": 2, "a problem no catalog has": 1}
    assert i18n.stop_audit() == {"a name no catalog has": 2, "a problem no catalog has": 1}
    assert i18n.untranslated() == {}
