"""Build an nbgrader course root from the series (issue #35).

``python classroom/build_course.py OUT_DIR [--lang en|zh|both]`` (default both).

One piece because the cell conversion rules below are one contract: every notebook with graded exercises becomes
``OUT_DIR/source/<assignment>/<notebook>.ipynb`` (Chinese: ``zh_<notebook>``), where
- each exercise's stub cell + hidden ``solution`` cell become ONE autograded answer cell: the lines the stub and the
  solution share stay as they are, the solution's own lines sit between ``### BEGIN SOLUTION`` / ``### END SOLUTION``
  (nbgrader replaces them by ``raise NotImplementedError  # your code here`` on release), the stub's placeholder lines
  (``raise NotImplementedError``, ``... # your answer``) are dropped and its other lines (imports, prints) go to a
  read-only cell before it;
- the solution's ``assert check_…(answer)`` becomes a read-only autograder test cell worth its points, followed by
  hidden cases (``### BEGIN HIDDEN TESTS``) from ``classroom/hidden_tests.py``;
- every other cell is read-only, except the explorers (cells that build a ``widgets.`` explorer): students drive them;
- written-answer questions from the points file (``--points``; classroom/points.example.toml has two) become
  manually graded markdown cells whose rubric is the model answer (between the solution markers, so students never
  see it) and a row of ``OUT_DIR/rubric.csv``.
Never edit the output by hand: rebuild it.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLASSROOM = Path(__file__).resolve().parent
sys.path.insert(0, str(CLASSROOM))

from hidden_tests import hidden_cases  # noqa: E402

CODE_STUB = "raise NotImplementedError  # your code here"
TEXT_STUB = "YOUR ANSWER HERE"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
# A stub-only line the learner is meant to replace (dropped: the code stub stands for it).
PLACEHOLDER = re.compile(r"raise NotImplementedError|=\s*\.\.\.|return\s*\.\.\.|#\s*(your |在这里|你的)|^\s*\.\.\.\s*$")
CHECK_CALL = re.compile(r"^(\w+\s*=\s*)?check_\w+\(")
ASSERT_CHECK = re.compile(r"^assert (check_\w+)\((.*)\)\s*$")
EXPLORER = re.compile(r"\bwidgets\.\w+\(|\w*explorer\(")  # a cell that shows an explorer: students drive it
IMAGE_LINK = re.compile(r"((?:\.\./)+images/(?:zh/)?)([\w.-]+\.png)")


def nbgrader_meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    meta["task"] = False
    if grade:
        meta["points"] = points
    return meta


def code_cell(source: str, meta: dict) -> dict:
    return {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {"nbgrader": meta},
        "outputs": [],
        "source": source,
    }


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def answer_source(stub: list[str], solution: list[str]) -> tuple[str, str]:
    """Stub and solution lines (check calls removed) -> (setup, answer cell with the solution's own lines marked).

    The stub lines before the solution's first line (imports, a printed hint, a helper) are the setup: a read-only
    cell of their own, so a student who rewrites the answer cell cannot lose the imports later exercises need. From
    there the lines both share at the start and at the end stay, the stub's placeholders in between are dropped and
    the solution's lines in between become solution regions.
    """
    first = next((k for k, line in enumerate(stub) if line == solution[0]), len(stub))
    setup = [line for line in stub[:first] if not PLACEHOLDER.search(line)]
    rest = stub[first:]
    head = 0
    while head < min(len(rest), len(solution)) and rest[head] == solution[head]:
        head += 1
    tail = 0
    while tail < min(len(rest), len(solution)) - head and rest[-1 - tail] == solution[-1 - tail]:
        tail += 1
    middle = solution[head : len(solution) - tail]
    hints = [
        line for line in rest[head : len(rest) - tail] if line.strip().startswith("#") and not PLACEHOLDER.search(line)
    ]
    out = solution[:head] + hints + (marked(middle) if any(line.strip() for line in middle) else middle)
    out += solution[len(solution) - tail :]
    return "\n".join(setup).strip("\n"), "\n".join(out).strip("\n")


def marked(region: list[str]) -> list[str]:
    """Solution lines between markers, one marked chunk per indentation level the region falls back to (so a
    function body and the top-level lines after it each get a stub, and the release still compiles)."""
    chunks: list[list[str]] = []
    for line in region:
        if not chunks or (line.strip() and len(_indent(line)) < len(_indent(next(x for x in chunks[-1] if x.strip())))):
            if chunks and not line.strip():
                chunks[-1].append(line)
                continue
            chunks.append([line])
        else:
            chunks[-1].append(line)
    out = []
    for chunk in chunks:
        while chunk and not chunk[-1].strip():
            chunk.pop()
        indent = _indent(next(line for line in chunk if line.strip()))
        out += [indent + BEGIN, *chunk, indent + END]
    return out


def released(source: str) -> str:
    """What nbgrader's ClearSolutions makes of an answer cell (used to check the release still compiles)."""
    lines, keep = [], True
    for line in source.split("\n"):
        if BEGIN in line:
            keep = False
            lines.append(_indent(line) + CODE_STUB)
        elif END in line:
            keep = True
        elif keep:
            lines.append(line)
    return "\n".join(lines)


def strip_check(lines: list[str], pattern: re.Pattern) -> list[str]:
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and (pattern.match(lines[-1]) or not lines[-1].strip()):
        lines.pop()
    return lines


def convert(notebook: Path, assignment: str, points: dict, written: list[dict], out_dir: Path, rubric_rows: list):
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cells = nb["cells"]
    solutions = [i for i, c in enumerate(cells) if "solution" in c["metadata"].get("tags", [])]
    if not solutions:
        return None
    stubs = {}
    for i in solutions:
        j = i - 1
        while cells[j]["cell_type"] != "code":
            j -= 1
        stubs[j] = i
    new_cells, images, exercise = [], set(), 0
    for i, cell in enumerate(cells):
        source = "".join(cell["source"])
        if i in stubs:
            continue  # merged into the answer cell that follows it
        slide = cell["metadata"].get("slideshow")
        if i in solutions:
            exercise += 1
            stub_lines = strip_check("".join(cells[stubs_rev(stubs, i)]["source"]).split("\n"), CHECK_CALL)
            sol_lines = "".join(cell["source"]).rstrip().split("\n")
            asserts = [k for k, line in enumerate(sol_lines) if ASSERT_CHECK.match(line)]
            if not asserts:
                raise ValueError(f"{notebook.name} cell {i}: a solution must hold `assert check_…(answer)`")
            checker, argument = ASSERT_CHECK.match(sol_lines[asserts[-1]]).groups()
            del sol_lines[asserts[-1]]
            setup, body = answer_source(stub_lines, strip_check(sol_lines, ASSERT_CHECK))
            if setup:
                new_cells.append(code_cell(setup, nbgrader_meta(f"ex{exercise}_setup", locked=True)))
            try:
                compile(released(body), f"{assignment} exercise {exercise}", "exec")
            except SyntaxError as error:
                raise ValueError(f"{notebook.name} cell {i}: the released answer cell would not compile") from error
            new_cells.append(code_cell(body, nbgrader_meta(f"ex{exercise}_answer", solution=True)))
            worth = points.get(f"{assignment.removeprefix('zh_')}.{checker}", points.get(checker, 1))
            test = [f"assert {checker}({argument})", "### BEGIN HIDDEN TESTS", hidden_cases(checker, argument)]
            test.append("### END HIDDEN TESTS")
            meta = nbgrader_meta(f"ex{exercise}_{checker}", grade=True, locked=True, points=worth)
            new_cells.append(code_cell("\n".join(test), meta))
            if slide:
                new_cells[-2]["metadata"]["slideshow"] = slide  # the answer cell takes the stub's place in the slides
            continue
        if cell["cell_type"] == "markdown":
            for prefix, name in IMAGE_LINK.findall(source):
                images.add((prefix, name))
            source = IMAGE_LINK.sub(lambda m: "images/" + m.group(2), source)
            new = {"cell_type": "markdown", "metadata": {"nbgrader": nbgrader_meta(f"cell_{i}", locked=True)}}
            new["source"] = source
        elif cell["cell_type"] == "code" and EXPLORER.search(source) and "import" not in source:
            new = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}
        else:
            new = {"cell_type": "code", "execution_count": None, "outputs": [], "source": source}
            new["metadata"] = {"nbgrader": nbgrader_meta(f"cell_{i}", locked=True)}
        if slide:
            new["metadata"]["slideshow"] = slide
        if "nbval-ignore-output" in cell["metadata"].get("tags", []):
            new["metadata"]["tags"] = ["nbval-ignore-output"]
        new_cells.append(new)
    zh = assignment.startswith("zh_")
    for question in written:
        anchor = next(
            k for k, c in enumerate(new_cells) if c["metadata"].get("nbgrader", {}).get("grade_id") == question["after"]
        )
        worth = question["points"]
        title = (
            f"**书面回答（{worth} 分）**" if zh else f"**Written answer ({worth} point{'s' if worth != 1 else ''}).**"
        )
        prompt = {"cell_type": "markdown", "source": f"{title} {question['prompt_zh' if zh else 'prompt']}"}
        prompt["metadata"] = {"nbgrader": nbgrader_meta(f"written_{question['id']}_prompt", locked=True)}
        rubric = question["rubric_zh" if zh else "rubric"]
        answer = {"cell_type": "markdown", "source": f"{BEGIN}\n{rubric}\n{END}"}
        answer["metadata"] = {
            "nbgrader": nbgrader_meta(f"written_{question['id']}", solution=True, grade=True, points=worth)
        }
        new_cells[anchor + 1 : anchor + 1] = [prompt, answer]
        rubric_rows.append([assignment, f"written_{question['id']}", worth, rubric])
    for k, new_cell in enumerate(new_cells):
        new_cell["id"] = new_cell["metadata"].get("nbgrader", {}).get("grade_id", f"explorer_{k}").replace("_", "-")
        if new_cell["cell_type"] == "markdown":
            new_cell.pop("outputs", None)
            new_cell.pop("execution_count", None)
    nb["cells"] = new_cells
    nb["nbformat"], nb["nbformat_minor"] = 4, 5
    target = out_dir / "source" / assignment
    target.mkdir(parents=True, exist_ok=True)
    for prefix, name in images:
        (target / "images").mkdir(exist_ok=True)
        shutil.copyfile(REPO / "images" / (prefix.split("images/")[1]) / name, target / "images" / name)
    (target / notebook.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return assignment


def stubs_rev(stubs: dict, solution_index: int) -> int:
    return next(stub for stub, sol in stubs.items() if sol == solution_index)


CONFIG = '''"""nbgrader configuration of the attn-notebooks course (generated by classroom/build_course.py)."""

from pathlib import Path

c = get_config()  # noqa: F821 (nbgrader's config loader defines it)
c.CourseDirectory.root = str(Path(__file__).resolve().parent)
c.CourseDirectory.course_id = "attn-notebooks"
# What a student sees in place of each model answer (the series' own stub wording).
c.ClearSolutions.code_stub = {{"python": {code_stub!r}}}
c.ClearSolutions.text_stub = {text_stub!r}
# Each cell may run 30 s; a cell that loops forever is interrupted there, only that cell fails and grading goes on.
c.Execute.timeout = 30
c.Execute.interrupt_on_timeout = True
c.ExecutePreprocessor.timeout = 30
# A student who deletes a test cell gets it back at autograde (nbgrader's default only flags the grade for manual
# grading): the read-only cells' sources come from the gradebook, never from the submission.
c.OverwriteCells.add_missing_cells = True
'''


def build(out_dir: Path, lang: str, points_file: Path = CLASSROOM / "points.toml") -> list[str]:
    config = tomllib.loads(points_file.read_text(encoding="utf-8"))
    points, written = config.get("points", {}), config.get("written", [])
    sources = []
    if lang in ("en", "both"):
        sources += [(p, p.stem) for p in sorted((REPO / "notebooks").glob("[0-9]*.ipynb"))]
    if lang in ("zh", "both"):
        sources += [(p, "zh_" + p.stem) for p in sorted((REPO / "notebooks" / "zh").glob("[0-9]*.ipynb"))]
    if (out_dir / "source").exists():
        shutil.rmtree(out_dir / "source")
    out_dir.mkdir(parents=True, exist_ok=True)
    assignments, rubric_rows = [], []
    for notebook, assignment in sources:
        mine = [q for q in written if q["assignment"] == assignment.removeprefix("zh_")]
        if convert(notebook, assignment, points, mine, out_dir, rubric_rows):
            assignments.append(assignment)
    text = CONFIG.format(code_stub=CODE_STUB, text_stub=TEXT_STUB)
    (out_dir / "nbgrader_config.py").write_text(text, encoding="utf-8")
    with open(out_dir / "rubric.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([["assignment", "grade_id", "points", "rubric"], *rubric_rows])
    return assignments


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--lang", choices=("en", "zh", "both"), default="both")
    parser.add_argument("--points", type=Path, default=CLASSROOM / "points.toml", help="points and written questions")
    args = parser.parse_args(argv)
    assignments = build(args.out_dir.resolve(), args.lang, args.points)
    print(f"{len(assignments)} assignments in {args.out_dir / 'source'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
