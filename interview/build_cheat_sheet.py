"""Generate notebook 17 (English) and its Chinese translation file from the question bank (issue #38).

    python interview/build_cheat_sheet.py           # writes notebooks/17_interview_cheat_sheet.ipynb and
                                                    # notebooks/zh/translations/17_interview_cheat_sheet.json
    python interview/build_cheat_sheet.py --check   # exit 1 if either differs from what the bank gives

Then, as for any notebook: `python notebooks/zh/build.py 17_interview_cheat_sheet`, store the outputs of both and run
them under strict nbval. The Chinese edition keeps its usual pipeline: 17's translation file is written from the
bank's Chinese (never edit it by hand; tests/test_zh_glossary.py still checks it). Cards with `code` become a folded
question and its proof cell; every card of the bank appears in the index by topic.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks" / "zh"))
import bank as interview_bank  # noqa: E402
from build import code_sha, en_sha  # noqa: E402  (the zh pipeline's own hashes)

NAME = "17_interview_cheat_sheet"
NOTEBOOK = interview_bank.NOTEBOOKS / f"{NAME}.ipynb"
TRANSLATION = interview_bank.NOTEBOOKS / "zh" / "translations" / f"{NAME}.json"
ANSWER = {"en": "Answer", "zh": "答案"}
TAUGHT = {"en": "Taught in", "zh": "讲解位置"}
INDEX_TITLE = {"en": "## Index: every question of the series by topic", "zh": "## 索引：本系列的全部面试题（按主题）"}
INDEX_INTRO = {
    "en": "{n} questions: the folded interview questions of every notebook and the cards above (Q numbers). "
    "Each links to the notebook section that teaches it.",
    "zh": "共 {n} 道题：每个 notebook 中折叠的面试题，加上上面的题卡（带 Q 编号）。"
    "每道题都链接到讲解它的 notebook 小节。",
}


def zh_headings(notebook: str) -> dict[str, str]:
    """English heading -> the Chinese notebook's heading at the same place (for the index's link text)."""
    english = interview_bank.headings(notebook)
    cells = json.loads((interview_bank.NOTEBOOKS / "zh" / f"{notebook}.ipynb").read_text(encoding="utf-8"))["cells"]
    chinese = [
        line[3:].strip()
        for cell in cells
        if cell["cell_type"] == "markdown"
        for line in "".join(cell["source"]).splitlines()
        if line.startswith("## ")
    ]
    return dict(zip(english, chinese, strict=False)) if len(chinese) == len(english) else {}


def link(card: dict, language: str) -> str:
    teaches = card["teaches"]
    section = teaches.get("section", "")
    if language == "zh" and section:
        section = zh_headings(teaches["notebook"]).get(section, section)
    text = teaches["notebook"].split("_")[0] + (f" § {section}" if section else "")
    return f"[{text}]({teaches['notebook']}.ipynb)"


def question_cell(card: dict, number: int, language: str) -> str:
    term = card.get("term", {})
    other = "zh" if language == "en" else "en"
    title = f"### Q{number} · {card[language]['q']}" + (f" · {term[other]}" if term.get(other) else "")
    return (
        f"{title} · {interview_bank.stars(card)}\n\n<details><summary>{ANSWER[language]}</summary>\n\n"
        f"{card[language]['a']}\n\n{TAUGHT[language]}: {link(card, language)}\n</details>"
    )


def index_cell(bank: dict, numbers: dict[str, int], language: str) -> str:
    lines = [INDEX_TITLE[language], "", INDEX_INTRO[language].format(n=len(bank["cards"]))]
    for topic, names in bank["topics"].items():
        cards = [c for c in bank["cards"] if c["topic"] == topic]
        if not cards:
            continue
        lines += ["", f"### {names[language]} ({len(cards)})", ""]
        for card in sorted(cards, key=lambda c: -c["stars"]):
            number = f"Q{numbers[card['id']]} " if card["id"] in numbers else ""
            question = card[language]["q"].replace("\n", " ")
            lines.append(f"- {interview_bank.stars(card)} {number}{question} — {link(card, language)}")
    return "\n".join(lines)


def ruff_formatted(source: str) -> str:
    """The bank's code as `ruff format` writes it (CI checks the notebooks with `ruff format --check`); a cell with
    IPython syntax (``%matplotlib inline``), which ruff formats only inside a notebook, is kept as written."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(root / "cell.py"), "-"],
        input=source, capture_output=True, text=True, cwd=root,
    )  # fmt: skip
    return done.stdout if done.returncode == 0 else source


def generate(bank: dict) -> tuple[nbformat.NotebookNode, dict]:
    frame = bank["cheat_sheet"]
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python", "pygments_lexer": "ipython3"},
    }
    translation: dict = {}

    def markdown(cell_id: str, en: str, zh: str) -> None:
        notebook.cells.append(nbformat.v4.new_markdown_cell(en, id=cell_id))
        translation[cell_id] = {"en_sha": en_sha(en), "zh": zh}

    def code(cell_id: str, source: str, code_zh: dict) -> None:
        source = ruff_formatted(source).rstrip("\n")
        notebook.cells.append(nbformat.v4.new_code_cell(source, id=cell_id))
        translation[cell_id] = {"en_sha": code_sha(source), **code_zh}

    markdown("intro", frame["intro"]["en"], frame["intro"]["zh"])
    code("setup", frame["setup"]["code"], frame["setup"].get("code_zh", {}))
    markdown("glossary", frame["glossary"]["en"], frame["glossary"]["zh"])
    numbers = {}
    for card in bank["cards"]:
        if "code" not in card:
            continue
        numbers[card["id"]] = number = len(numbers) + 1
        markdown(f"{card['id']}-q", question_cell(card, number, "en"), question_cell(card, number, "zh"))
        code(f"{card['id']}-proof", card["code"], card.get("code_zh", {}))
    markdown("summary", frame["summary"]["en"], frame["summary"]["zh"])
    markdown("index", index_cell(bank, numbers, "en"), index_cell(bank, numbers, "zh"))
    return notebook, {"source": f"{NAME}.ipynb", "cells": translation}


def with_outputs(generated: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Keep the stored outputs of code cells whose source did not change (store_outputs.py refreshes the rest)."""
    if not NOTEBOOK.exists():
        return generated
    old = {c.get("id"): c for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code"}
    for cell in generated.cells:
        previous = old.get(cell.get("id"))
        if cell.cell_type == "code" and previous is not None and previous.source == cell.source:
            cell.outputs, cell.execution_count = previous.outputs, previous.execution_count
    return generated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if 17 or its translation is out of date")
    args = parser.parse_args(argv)
    notebook, translation = generate(interview_bank.load())
    notebook = with_outputs(notebook)
    notebook_text = nbformat.writes(notebook) + "\n"
    translation_text = json.dumps(translation, ensure_ascii=False, indent=1) + "\n"
    if args.check:
        stale = [
            p.name
            for p, text in ((NOTEBOOK, notebook_text), (TRANSLATION, translation_text))
            if _sources(p) != _sources_of_text(text)
        ]
        for name in stale:
            print(f"{name} is out of date: run python interview/build_cheat_sheet.py")
        return 1 if stale else 0
    NOTEBOOK.write_text(notebook_text, encoding="utf-8")
    TRANSLATION.write_text(translation_text, encoding="utf-8")
    print(f"wrote {NOTEBOOK.name} ({len(notebook.cells)} cells) and {TRANSLATION.name}")
    return 0


def _sources_of_text(text: str):
    data = json.loads(text)
    if "cells" in data and isinstance(data["cells"], list):
        return [(c.get("id"), c["cell_type"], "".join(c["source"])) for c in data["cells"]]
    return data


def _sources(path: Path):
    return _sources_of_text(path.read_text(encoding="utf-8")) if path.exists() else None


if __name__ == "__main__":
    sys.exit(main())
