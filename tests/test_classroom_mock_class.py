"""The series as an nbgrader course, graded for a synthetic class (issue #35; classroom/mock_class.py has the class).

Default run: the course builds (both languages) with exactly the notebooks that have graded exercises, the release
carries no solution line, and five students of notebook 01 (perfect, blank, one wrong answer, one correct variant, one
deleted test cell) are autograded and exported.
``pytest -m classroom_full tests/test_classroom_mock_class.py``: the whole class (>= 30 students) on five
assignments, English and Chinese (README: times), and ``nbgrader validate`` on every assignment (source passes,
release fails).
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "classroom"))

import mock_class  # noqa: E402

DEFAULT_ASSIGNMENT = "01_scaled_dot_product_attention"
# The default run's subset (each submission costs ~7 s of CPU: a fresh kernel runs the whole notebook). The rest of
# the class, the infinite loop (30 s until its cell times out), the edited test cell and the empty notebook among
# them, runs under the classroom_full marker.
DEFAULT_STUDENTS = {
    "perfect",
    "blank",
    "wrong-ex1-no_scale",
    "variant-ex1-float32_arithmetic",
    "tamper-deletes-test-cell",
}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    mock_class.build(root, "both")
    return root


def generate(course: Path, assignment: str) -> Path:
    """The released notebook (generated once per course: each nbgrader command costs seconds)."""
    release = course / "release" / assignment
    if release.is_dir():
        return next(release.glob("*.ipynb"))
    done = mock_class.nbgrader(course, "generate_assignment", assignment, "--force")
    assert done.returncode == 0, done.stderr[-3000:]
    return next((course / "release" / assignment).glob("*.ipynb"))


def test_course_layout(course, tmp_path):
    config = (course / "nbgrader_config.py").read_text()
    default = mock_class.read_notebook(course / "source" / DEFAULT_ASSIGNMENT / f"{DEFAULT_ASSIGNMENT}.ipynb")
    metas = [cell["metadata"].get("nbgrader", {}) for cell in default["cells"]]
    assert [meta["points"] for meta in metas if meta.get("grade")] == [1, 1, 1, 1]  # one point per exercise
    assert "CourseDirectory.root" in config
    sources = sorted(p.name for p in (course / "source").iterdir())
    assert "01_scaled_dot_product_attention" in sources and "zh_01_scaled_dot_product_attention" in sources
    assert "00_start_here" not in sources and "zh_17_interview_cheat_sheet" not in sources  # no graded exercises
    # Every notebook with a graded exercise becomes an assignment with no code change (a new notebook only needs a
    # rebuild), and each of its test cells has hidden cases (hidden_tests.py's default: the checker, reseeded).
    graded = {
        prefix + path.stem
        for prefix, folder in (("", REPO / "notebooks"), ("zh_", REPO / "notebooks" / "zh"))
        for path in folder.glob("[0-9]*.ipynb")
        if any("solution" in cell["metadata"].get("tags", []) for cell in mock_class.read_notebook(path)["cells"])
    }
    assert set(sources) == graded
    for name in sources:
        nb = mock_class.read_notebook(next((course / "source" / name).glob("*.ipynb")))
        tests = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "code"]
        assert tests and all("### BEGIN HIDDEN TESTS" in cell["source"] for cell in tests), name
    course = tmp_path / "example"  # the example points file: an override and written questions with a rubric
    mock_class.build(course, "en", REPO / "classroom" / "points.example.toml")
    nb = mock_class.read_notebook(course / "source" / DEFAULT_ASSIGNMENT / f"{DEFAULT_ASSIGNMENT}.ipynb")
    kinds = [cell["metadata"].get("nbgrader", {}) for cell in nb["cells"]]
    tests = [meta for meta in kinds if meta.get("grade") and not meta.get("solution")]
    assert [meta["points"] for meta in tests] == [2, 1, 1, 1]  # the example makes check_attention worth 2
    assert all(meta["locked"] for meta in tests)
    assert any(meta.get("solution") and meta.get("grade") for meta in kinds)  # the written answer, graded by hand
    rubric = list(csv.DictReader(open(course / "rubric.csv", encoding="utf-8")))
    assert {row["grade_id"] for row in rubric} >= {"written_why_sqrt_dk"}
    assert any("### BEGIN HIDDEN TESTS" in cell["source"] for cell in nb["cells"])


@pytest.mark.parametrize("assignment", [DEFAULT_ASSIGNMENT, "zh_05_masks_and_dropout"])
def test_release_has_no_solution_text(course, assignment):
    """Every line the model answers add to the stubs (and every hidden test line) is gone from the release."""
    released = generate(course, assignment).read_text(encoding="utf-8")
    source = mock_class.read_notebook(next((course / "source" / assignment).glob("*.ipynb")))
    secret, public = set(), set()
    for cell in source["cells"]:
        inside = False
        for line in cell["source"].split("\n"):
            if "### BEGIN SOLUTION" in line or "### BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "### END SOLUTION" in line or "### END HIDDEN TESTS" in line:
                inside = False
            elif line.strip():
                (secret if inside else public).add(line.strip())
    secret -= public  # a line the notebook also shows outside the answers (a demo, the visible assert) is no secret
    assert len(secret) > 10
    released_cells = json.loads(released)["cells"]
    released_lines = {line.strip() for cell in released_cells for line in "".join(cell["source"]).split("\n")}
    leaked = sorted(secret & released_lines)
    assert not leaked, leaked


@pytest.mark.classroom_full  # runs notebook 01 twice; test_every_assignment_generates_and_validates covers all
def test_validate_passes_source_and_fails_release(course):
    source = course / "source" / DEFAULT_ASSIGNMENT / f"{DEFAULT_ASSIGNMENT}.ipynb"
    release = generate(course, DEFAULT_ASSIGNMENT)
    good = mock_class.nbgrader(course, "validate", str(source))
    assert "Success! Your notebook passes all the tests." in good.stdout, good.stdout[-3000:] + good.stderr[-3000:]
    bad = mock_class.nbgrader(course, "validate", str(release))
    assert "Success!" not in bad.stdout and "failed" in (bad.stdout + bad.stderr).lower(), bad.stdout[-3000:]


def grades_by_student(course: Path, assignment: str) -> dict[str, dict[str, float]]:
    """student -> {test grade_id: score} from nbgrader's gradebook (autograded cells only)."""
    from nbgrader.api import Gradebook, MissingEntry

    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        notebook = next((course / "source" / assignment).glob("*.ipynb")).stem
        for student in gradebook.students:
            try:
                submission = gradebook.find_submission_notebook(notebook, assignment, student.id)
            except MissingEntry:
                continue
            out[student.id] = {g.name: g.score for g in submission.grades if g.name.startswith("ex")}
    return out


def grade_class(course: Path, assignment: str, only: set | None):
    generate(course, assignment)
    students = mock_class.submit_class(course, assignment, only)
    if only is not None:
        assert {s.name for s in students} == only
    start = time.perf_counter()
    done = mock_class.nbgrader(course, "autograde", assignment, "--force")
    seconds = time.perf_counter() - start
    print(
        f"\n{assignment}: {len(students)} submissions autograded in {seconds:.0f} s "
        f"({seconds / len(students):.1f} s each)"
    )
    grades = grades_by_student(course, assignment)
    source = mock_class.read_notebook(next((course / "source" / assignment).glob("*.ipynb")))
    points = {
        cell["metadata"]["nbgrader"]["grade_id"]: cell["metadata"]["nbgrader"]["points"]
        for cell in source["cells"]
        if cell["metadata"].get("nbgrader", {}).get("grade") and cell["cell_type"] == "code"
    }
    problems = []
    for student in students:
        got = grades.get(student.name)
        if got is None:
            problems.append(f"{student.name}: no grades (autograde log: {done.stderr[-1500:]})")
            continue
        for grade_id, worth in points.items():
            want = 0 if grade_id in student.loses else worth
            if got.get(grade_id) != want:
                problems.append(f"{student.name}: {grade_id} scored {got.get(grade_id)}, expected {want}")
    assert not problems, "\n".join(problems)
    # Tampering: nbgrader takes every read-only and test cell from its gradebook, so an edited test cell runs as
    # written by the instructor, and (add_missing_cells, in the generated config) a deleted one is put back.
    names = {student.name for student in students}
    autograded = course / "autograded"
    notebook = next((course / "source" / assignment).glob("*.ipynb")).name
    test_cells = [cell for cell in source["cells"] if cell["metadata"].get("nbgrader", {}).get("grade")]
    first_test = next(cell for cell in test_cells if cell["cell_type"] == "code")
    for name in {"tamper-edits-test-cell", "tamper-deletes-test-cell"} & names:
        graded = mock_class.read_notebook(autograded / name / assignment / notebook)
        grade_id = first_test["metadata"]["nbgrader"]["grade_id"]
        cell = next(c for c in graded["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)
        assert first_test["source"].split("\n")[0] in cell["source"], (name, cell["source"][:300])
        if name == "tamper-deletes-test-cell":
            assert "was missing from the submission" in cell["source"]
    rows = mock_class.export_grades(course)
    by_student = {row["student_id"]: row for row in rows if row["assignment"] == assignment}
    full = sum(points.values())
    assert float(by_student["perfect"]["raw_score"]) == full == float(by_student["perfect"]["max_score"])
    assert float(by_student["blank"]["raw_score"]) == 0
    return seconds, len(students)


def test_default_class_subset(course):
    """One student of each kind on notebook 01: right marks, 0 wrong answers pass, 0 correct variants fail."""
    grade_class(course, DEFAULT_ASSIGNMENT, DEFAULT_STUDENTS)


@pytest.mark.classroom_full
def test_full_class(course):
    """>= 30 students on each of five assignments (English and Chinese); times per submission and per class."""
    total, count = 0.0, 0
    for assignment in mock_class.MOCK_ASSIGNMENTS:
        source = mock_class.read_notebook(next((course / "source" / assignment).glob("*.ipynb")))
        assert len(mock_class.students_for(assignment, source)) >= 30, assignment
        seconds, students = grade_class(course, assignment, None)
        total, count = total + seconds, count + students
    print(f"\nfull class: {count} submissions in {total:.0f} s, {total / count:.1f} s per submission")


@pytest.mark.classroom_full
def test_every_assignment_generates_and_validates(course):
    """Every assignment, both editions: generate_assignment works, validate passes the source and fails the release."""
    failures = []
    for folder in sorted((course / "source").iterdir()):
        release = generate(course, folder.name)
        source = next(folder.glob("*.ipynb"))
        good = mock_class.nbgrader(course, "validate", str(source))
        if "Success! Your notebook passes all the tests." not in good.stdout:
            failures.append(f"{folder.name}: the source does not validate: {good.stdout[-800:]}")
        bad = mock_class.nbgrader(course, "validate", str(release))
        if "Success!" in bad.stdout:
            failures.append(f"{folder.name}: the release validates")
    assert not failures, "\n".join(failures)
