"""The interview bank (interview/questions.yaml, issue #38): every card's code runs, every proof cell exists and
was executed, every link points at a real notebook section, and the bank still matches the notebooks it came from."""

import functools
import json
import math
import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "interview"))

import bank as interview_bank  # noqa: E402
import collect_from_notebooks as collect  # noqa: E402

BANK = interview_bank.load()
CARDS = BANK["cards"]
GENERATED = {"17_interview_cheat_sheet", "18_mock_interview"}  # built from the bank: not a source of questions
DETAILS = re.compile(r"<details><summary>(.*?)</summary>\s*(.*?)\s*</details>", re.S)


@functools.cache
def notebook_cells(name: str, zh: bool = False) -> list[dict]:
    folder = ROOT / "notebooks" / ("zh" if zh else "")
    return json.loads((folder / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]


def test_every_card_with_code_runs_in_order():
    import torch.nn.functional as F

    import attn_core as ac

    torch.manual_seed(0)
    namespace = {"math": math, "torch": torch, "F": F, "ac": ac}
    ran = []
    for card in CARDS:
        if "code" not in card:
            continue
        try:
            exec(compile(card["code"], f"<card {card['id']}>", "exec"), namespace)  # noqa: S102
        except Exception as error:  # noqa: BLE001
            pytest.fail(f"card {card['id']}: its code raised {type(error).__name__}: {error}")
        ran.append(card["id"])
    assert len(ran) == sum("code" in c for c in CARDS) >= 37 + 15


def test_every_proof_cell_exists_was_executed_and_holds_its_lines():
    for card in CARDS:
        if "proof" not in card:
            continue
        proof = card["proof"]
        cells = {c.get("id"): c for c in notebook_cells(proof["notebook"])}
        cell = cells.get(proof["cell"])
        assert cell is not None and cell["cell_type"] == "code", f"{card['id']}: no code cell {proof['cell']}"
        assert cell["execution_count"] is not None and cell["outputs"], f"{card['id']}: proof cell never executed"
        assert not any(o.get("output_type") == "error" for o in cell["outputs"]), f"{card['id']}: proof cell errors"
        source = "".join(cell["source"])
        assert proof["lines"] and all(line in source for line in proof["lines"]), f"{card['id']}: lines not in cell"


def test_every_card_links_to_a_real_notebook_and_section():
    for card in CARDS:
        teaches = card["teaches"]
        path = ROOT / "notebooks" / f"{teaches['notebook']}.ipynb"
        assert path.exists(), f"{card['id']}: no notebook {teaches['notebook']}"
        assert (ROOT / "notebooks" / "zh" / path.name).exists(), f"{card['id']}: no Chinese twin"
        if teaches.get("section"):
            assert teaches["section"] in interview_bank.headings(teaches["notebook"]), f"{card['id']}: no such section"


@pytest.mark.parametrize("zh", [False, True], ids=["en", "zh"])
def test_every_folded_notebook_question_is_in_the_bank_verbatim(zh):
    language = "zh" if zh else "en"
    by_origin = {c["origin"]: c for c in CARDS}
    count = 0
    for path in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")):
        if path.stem in GENERATED:
            continue
        found = [m for _, m in collect.folded_questions(notebook_cells(path.stem, zh), notebook_cells(path.stem))]
        for n, match in enumerate(found, 1):
            card = by_origin.get(f"{path.stem} interview question {n}")
            assert card is not None, f"{path.stem} question {n} is missing from the bank"
            assert card[language]["q"] == re.sub(r"^\s*\d+\.\s*", "", match.group(1)).strip(), (
                f"{card['id']} drifted: python interview/collect_from_notebooks.py --sync"
            )
            assert card[language]["a"] == match.group(2).strip(), (
                f"{card['id']}: answer drifted: python interview/collect_from_notebooks.py --sync"
            )
            count += 1
    assert count == sum("proof" in c for c in CARDS) >= 166


def test_cheat_sheet_and_new_topics_are_all_there():
    ids = {c["id"] for c in CARDS}
    assert {f"q{n:02d}" for n in range(1, 38)} <= ids
    topics = {c["topic"] for c in CARDS if c["id"].startswith("y")}
    assert {"flash", "serving", "sparse", "linear", "sinks-gates", "positions", "kv-cache", "masks"} <= topics


def test_chinese_fixes_of_17_are_carried():
    """The Chinese-edition fixes to 17 (terms interviewers expect) live in the bank now that 17 is generated."""
    zh = {c["id"]: c["zh"]["a"] + c["zh"]["q"] for c in CARDS}
    assert "无论每个头的维度 $d_k$ 多大" in zh["q02"]
    assert "若在第 −2 维上做 softmax，就变成在查询之间归一化（每列和为 1）" in zh["q05"]
    assert "片上 SRAM（共享内存）" in zh["q23"] and "对 HBM 的读写（访存量）少得多" in zh["q23"]
    assert "维护当前（累计）最大值 $m$ 和指数和 $\\ell$" in zh["q24"]
    assert "若也旋转 V，一个词元*贡献*的内容就会随它所在的位置而变" in zh["q26"]
    assert "交错布局还是 rotate-half 布局？" in zh["q28"]
    assert "低频维度对（转得慢）的角度" in zh["q30"] and "高频维度对（转得快）的分辨率降为原来的 $1/s$" in zh["q30"]
    assert "而“动词找主语”是单向的" in zh["q35"]


def test_code_translations_match_the_code():
    for card in CARDS:
        for english in card.get("code_zh", {}).get("comments", {}):
            assert english in card["code"], f"{card['id']}: comment {english!r} not in its code"
        for english in card.get("code_zh", {}).get("strings", {}):
            assert english in card["code"], f"{card['id']}: string {english!r} not in its code"


def test_a_broken_card_is_refused():
    broken = {**BANK, "cards": [{**CARDS[0], "stars": 4}]}
    with pytest.raises(interview_bank.BankError, match="stars"):
        interview_bank.check(broken)
    with pytest.raises(interview_bank.BankError, match="exactly one"):
        interview_bank.check({**BANK, "cards": [{**CARDS[0], "proof": {}}]})


def test_readme_counts_match_the_bank():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for topic, names in BANK["topics"].items():
        cards = [c for c in CARDS if c["topic"] == topic]
        with_code = sum("code" in c for c in cards)
        assert f"| {names['en']} | {len(cards)} | {with_code} |" in readme, f"README's count for {topic} is stale"
    assert f"| **All** | **{len(CARDS)}** | **{sum('code' in c for c in CARDS)}** |" in readme
