"""A synthetic class for the course (issue #35): submissions that nbgrader must grade right.

``python classroom/mock_class.py OUT_DIR [--assignments A B ...]`` builds the course in OUT_DIR, generates the
assignments, writes ``submitted/<student>/<assignment>/`` for every student below, runs ``nbgrader autograde`` and
``nbgrader export`` and prints the time per submission and per class. tests/test_classroom_mock_class.py uses the
same pieces and asserts the grades.

A student is a function of the released notebook (what a student gets) and the source notebook (the model answers):
the perfect student fills every answer cell with its model answer, the blank one hands the release back, each
``wrong:`` student gets one exercise wrong the way learners do (the probe answers of tests/test_exercises_*.py), each
``variant:`` student answers one exercise correctly in another way (numpy integers, float32 arithmetic), and the
others tamper with the notebook (nbgrader #1941: edited or deleted read-only and test cells), rename a function,
loop forever, or hand in an empty notebook. ``expected`` says which exercises each one must lose.
"""

from __future__ import annotations

import copy
import csv
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
MOCK_ASSIGNMENTS = [
    "01_scaled_dot_product_attention",
    "02_multi_head_attention",
    "05_masks_and_dropout",
    "zh_01_scaled_dot_product_attention",
    "zh_05_masks_and_dropout",
]

# Wrong answers, by notebook and answer cell: every one must score 0 on its exercise.
WRONG = {
    "01_scaled_dot_product_attention": {
        "ex1_answer": {
            "no_scale": "def my_attention(q, k, v):\n    w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)\n"
            "    return w @ v, w",
            "divides_by_d_k": "def my_attention(q, k, v):\n"
            "    w = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1], -1)\n"
            "    return w @ v, w",
            "softmax_over_queries": "def my_attention(q, k, v):\n"
            "    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)\n    return w @ v, w",
            "returns_weights_only": "def my_attention(q, k, v):\n"
            "    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)",
        },
        "ex2_answer": {
            "std_not_variance": "def score_variance(d_k, std, scaled):\n"
            "    return (std**4 if scaled else d_k * std**4) ** 0.5",
            "std_squared": "def score_variance(d_k, std, scaled):\n    return std**2 if scaled else d_k * std**2",
            "ignores_scaled": "def score_variance(d_k, std, scaled):\n    return d_k * std**4",
            "divides_by_sqrt": "def score_variance(d_k, std, scaled):\n"
            "    return d_k * std**4 / math.sqrt(d_k) if scaled else d_k * std**4",
        },
        "ex3_answer": {
            "k_q_v_order": "def split_qkv(fused):\n    d = fused.in_features\n    out = []\n"
            "    for w, b in zip(fused.weight.chunk(3)[::-1], fused.bias.chunk(3)[::-1]):\n"
            "        layer = nn.Linear(d, d).to(fused.weight.dtype)\n"
            "        layer.weight.data.copy_(w)\n        layer.bias.data.copy_(b)\n        out.append(layer)\n"
            "    return tuple(out)",
            "interleaved_rows": "def split_qkv(fused):\n    d = fused.in_features\n    out = []\n"
            "    for i in range(3):\n"
            "        layer = nn.Linear(d, d).to(fused.weight.dtype)\n"
            "        layer.weight.data.copy_(fused.weight[i::3])\n        layer.bias.data.copy_(fused.bias[i::3])\n"
            "        out.append(layer)\n    return tuple(out)",
            "bias_not_copied": "def split_qkv(fused):\n    d = fused.in_features\n    out = []\n"
            "    for w in fused.weight.chunk(3):\n        layer = nn.Linear(d, d).to(fused.weight.dtype)\n"
            "        layer.weight.data.copy_(w)\n        out.append(layer)\n    return tuple(out)",
        },
        "ex4_answer": {
            "temperature_one": "my_temperature = 1.0",
            "target_0_8": "low, high = 0.01, 10.0\nfor _ in range(50):\n    mid = (low + high) / 2\n"
            "    top = torch.softmax(TEMPERATURE_SCORES / mid, dim=-1).max().item()\n"
            "    low, high = (mid, high) if top > 0.8 else (low, mid)\nmy_temperature = (low + high) / 2",
        },
    },
    "02_multi_head_attention": {
        "ex1_answer": {
            "view_without_transpose": "def split_heads(x, num_heads):\n    b, n, h = x.shape\n"
            "    return x.view(b, num_heads, n, h // num_heads)",
            "heads_last": "def split_heads(x, num_heads):\n    b, n, h = x.shape\n"
            "    return x.view(b, n, h // num_heads, num_heads).permute(0, 3, 1, 2)",
        },
        "ex2_answer": {
            "reshape_without_transpose": "def merge_heads(t):\n    b, h, n, d = t.shape\n"
            "    return t.reshape(b, n, h * d)",
        },
        "ex3_answer": {
            "no_bias": "def mha_param_count(hidden_dim, num_heads, bias=True):\n    return 4 * hidden_dim * hidden_dim",
            "three_projections": "def mha_param_count(hidden_dim, num_heads, bias=True):\n"
            "    return 3 * hidden_dim * hidden_dim + (3 * hidden_dim if bias else 0)",
            "times_heads": "def mha_param_count(hidden_dim, num_heads, bias=True):\n"
            "    return num_heads * (4 * hidden_dim * hidden_dim + (4 * hidden_dim if bias else 0))",
        },
        "ex4_answer": {
            "scale_by_hidden": "def mha_forward(x, layer, context=None, mask=None):\n"
            "    src = x if context is None else context\n    h = layer.num_heads\n"
            "    q, k, v = split_heads(layer.q_proj(x), h), split_heads(layer.k_proj(src), h), "
            "split_heads(layer.v_proj(src), h)\n    s = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])\n"
            "    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n"
            "    return layer.o_proj(merge_heads(torch.softmax(s, -1) @ v))",
            "inverted_mask": "def mha_forward(x, layer, context=None, mask=None):\n"
            "    src = x if context is None else context\n    h = layer.num_heads\n"
            "    q, k, v = split_heads(layer.q_proj(x), h), split_heads(layer.k_proj(src), h), "
            "split_heads(layer.v_proj(src), h)\n    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
            "    if mask is not None:\n        s = s.masked_fill(mask, float('-inf'))\n"
            "    return layer.o_proj(merge_heads(torch.softmax(s, -1) @ v))",
            "no_output_projection": "def mha_forward(x, layer, context=None, mask=None):\n"
            "    src = x if context is None else context\n    h = layer.num_heads\n"
            "    q, k, v = split_heads(layer.q_proj(x), h), split_heads(layer.k_proj(src), h), "
            "split_heads(layer.v_proj(src), h)\n    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
            "    if mask is not None:\n        s = s.masked_fill(~mask, float('-inf'))\n"
            "    return merge_heads(torch.softmax(s, -1) @ v)",
        },
    },
    "05_masks_and_dropout": {
        "ex1_answer": {
            "window_off_by_one": "def my_sliding_window_mask(seq_len, window):\n    i = torch.arange(seq_len)\n"
            "    return (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] <= window)",
            "not_causal": "def my_sliding_window_mask(seq_len, window):\n    i = torch.arange(seq_len)\n"
            "    return (i[:, None] - i[None, :]).abs() < window",
        },
        "ex2_answer": {
            "pads_queries": "def my_causal_padding_mask(lengths, seq_len):\n    i = torch.arange(seq_len)\n"
            "    real = i < torch.as_tensor(lengths).unsqueeze(-1)\n"
            "    return real[:, None, :, None] & (i[None, :] <= i[:, None])",
            "forgets_causal": "def my_causal_padding_mask(lengths, seq_len):\n    i = torch.arange(seq_len)\n"
            "    real = i < torch.as_tensor(lengths).unsqueeze(-1)\n"
            "    return real[:, None, None, :].expand(-1, 1, seq_len, -1)",
        },
        "ex3_answer": {
            "not_inverted": "def my_mask_from_mha(attn_mask, key_padding_mask):\n"
            "    return attn_mask & key_padding_mask[:, None, None, :]",
            "ignores_padding": "def my_mask_from_mha(attn_mask, key_padding_mask):\n"
            "    return (~attn_mask).expand(key_padding_mask.shape[0], 1, *attn_mask.shape)",
        },
        "ex4_answer": {
            "all_ones": "expected_row_sums = torch.ones(2, 4)",
            "one_minus_p": "expected_row_sums = 0.75 * ac.padding_mask([2, 4], 4)[:, 0, 0, :].float()",
        },
    },
}

# Correct answers written another way: every one must keep its point.
VARIANTS = {
    "01_scaled_dot_product_attention": {
        "ex1_answer": {
            "float32_arithmetic": "def my_attention(q, k, v):\n    q, k, v = q.float(), k.float(), v.float()\n"
            "    w = torch.softmax(q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5, dim=-1)\n    return w @ v, w",
            "torch_sdpa_output": "def my_attention(q, k, v):\n"
            "    w = F.softmax(q @ k.mT / math.sqrt(k.size(-1)), dim=-1)\n"
            "    return F.scaled_dot_product_attention(q, k, v), w",
        },
        "ex2_answer": {
            "numpy_int": "import numpy as np\n\n\ndef score_variance(d_k, std, scaled):\n"
            "    return np.int64(d_k) * std**4 / (np.int64(d_k) if scaled else np.int64(1))",
        },
        "ex4_answer": {"float32_temperature": "my_temperature = float(torch.tensor(0.3978, dtype=torch.float32))"},
    },
    "02_multi_head_attention": {
        "ex1_answer": {
            "unflatten": "def split_heads(x, num_heads):\n    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)"
        },
        "ex2_answer": {
            "contiguous_view": "def merge_heads(t):\n    b, h, n, d = t.shape\n"
            "    return t.transpose(1, 2).contiguous().view(b, n, h * d)"
        },
        "ex3_answer": {
            "numpy_int": "import numpy as np\n\n\ndef mha_param_count(hidden_dim, num_heads, bias=True):\n"
            "    return np.int64(4) * hidden_dim * (hidden_dim + (1 if bias else 0))"
        },
    },
    "05_masks_and_dropout": {
        "ex3_answer": {
            "two_inversions": "def my_mask_from_mha(attn_mask, key_padding_mask):\n"
            "    return ~(attn_mask | key_padding_mask[:, None, None, :])"
        },
        "ex4_answer": {
            "float64_literal": "expected_row_sums = torch.tensor([[1.0, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.float64)"
        },
    },
}


# Exercises whose model answer calls an earlier answer: 02's mha_forward uses the student's own split_heads and
# merge_heads, so a wrong helper costs that exercise too (nbgrader grades the notebook as the student wrote it).
DEPENDENTS = {"02_multi_head_attention": {"ex1_answer": ["ex4_answer"], "ex2_answer": ["ex4_answer"]}}


@dataclass
class Student:
    name: str
    answers: dict = field(default_factory=dict)  # answer grade_id -> source (others: the model answer)
    blank: bool = False
    edit: object = None  # a function(nb) that tampers with the notebook after the answers are in
    loses: set = field(default_factory=set)  # test grade_ids that must score 0
    note: str = ""


def model_answers(source_nb: dict) -> dict:
    """grade_id -> the answer cell with the solution markers removed (what the perfect student writes)."""
    out = {}
    for cell in source_nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution") and cell["cell_type"] == "code":
            lines = [line for line in cell["source"].split("\n") if BEGIN not in line and END not in line]
            out[meta["grade_id"]] = "\n".join(lines)
    return out


def tests_of(source_nb: dict) -> dict:
    """answer grade_id -> the grade_id of the test cell right after it."""
    cells, out = source_nb["cells"], {}
    for k, cell in enumerate(cells[:-1]):
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution") and cell["cell_type"] == "code":
            out[meta["grade_id"]] = cells[k + 1]["metadata"]["nbgrader"]["grade_id"]
    return out


def _cell(nb, grade_id):
    return next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)


def students_for(assignment: str, source_nb: dict) -> list[Student]:
    notebook = assignment.removeprefix("zh_")
    tests = tests_of(source_nb)
    first = next(iter(tests))
    dependents = DEPENDENTS.get(notebook, {})

    def lost(*answers: str) -> set:
        return {tests[a] for answer in answers for a in (answer, *dependents.get(answer, []))}

    everyone = [Student("perfect"), Student("blank", blank=True, loses=set(tests.values()))]
    for answer, wrongs in WRONG.get(notebook, {}).items():
        for label, code in wrongs.items():
            everyone.append(Student(f"wrong-{answer[:3]}-{label}", {answer: code}, loses=lost(answer)))
    for answer, variants in VARIANTS.get(notebook, {}).items():
        for label, code in variants.items():
            everyone.append(Student(f"variant-{answer[:3]}-{label}", {answer: code}))
    wrong_first = next(iter(WRONG[notebook][first].values()))
    test_first = tests[first]

    def edit_test(nb):
        _cell(nb, test_first)["source"] = "pass  # nothing to check here"

    def delete_test(nb):
        nb["cells"].remove(_cell(nb, test_first))

    def cheat_readonly(nb):
        checker = _cell(nb, test_first)["source"].split("(")[0].removeprefix("assert ")
        cell = next(c for c in nb["cells"] if checker in c["source"] and "import" in c["source"])
        cell["source"] += f"\n{checker} = lambda *args: True  # overridden by the student"

    def raise_points(nb):
        _cell(nb, test_first)["metadata"]["nbgrader"]["points"] = 100

    def cheat_in_answer(nb):
        checker = _cell(nb, test_first)["source"].split("(")[0].removeprefix("assert ")
        _cell(nb, first)["source"] += f"\n\n{checker} = lambda *args: True  # overridden in an answer cell"

    def delete_answer(nb):
        nb["cells"].remove(_cell(nb, first))

    def rename(nb):
        cell = _cell(nb, first)
        name = cell["source"].split("def ", 1)[1].split("(")[0] if "def " in cell["source"] else None
        if name:
            cell["source"] = cell["source"].replace(f"def {name}(", f"def {name}_v2(")

    def loop_forever(nb):
        cell = _cell(nb, first)
        cell["source"] = "while True:  # forgot to update the loop variable\n    pass\n\n" + cell["source"]

    def empty(nb):
        nb["cells"] = []

    everyone += [
        Student("tamper-edits-test-cell", {first: wrong_first}, edit=edit_test, loses=lost(first)),
        Student("tamper-deletes-test-cell", {first: wrong_first}, edit=delete_test, loses=lost(first)),
        Student("tamper-overrides-checker-readonly", {first: wrong_first}, edit=cheat_readonly, loses=lost(first)),
        Student("tamper-raises-points", edit=raise_points),
        Student("tamper-deletes-answer-cell", edit=delete_answer, loses=lost(first)),
        Student("renames-function", edit=rename, loses=lost(first)),
        Student("infinite-loop", edit=loop_forever, loses=lost(first)),
        Student("empty-notebook", edit=empty, loses=set(tests.values())),
    ]
    # Students with two exercises wrong (grading must add up per exercise), until the class has 32.
    singles = [(answer, label, code) for answer, wrongs in WRONG[notebook].items() for label, code in wrongs.items()]
    pairs = [(a, b) for a in singles for b in singles if a[0] < b[0]]
    for (answer_a, label_a, code_a), (answer_b, label_b, code_b) in pairs[: max(0, 31 - len(everyone))]:
        name = f"two-wrong-{answer_a[:3]}-{label_a}-{answer_b[:3]}-{label_b}"
        everyone.append(Student(name, {answer_a: code_a, answer_b: code_b}, loses=lost(answer_a, answer_b)))
    if notebook == "01_scaled_dot_product_attention":  # its hidden cases compare with torch, not the checker
        cheat = Student("cheat-overrides-checker-in-answer", {first: wrong_first}, edit=cheat_in_answer)
        cheat.loses = {test_first}
        everyone.append(cheat)
    return everyone


def submission(student: Student, released_nb: dict, source_nb: dict) -> dict:
    nb = copy.deepcopy(released_nb)
    if not student.blank:
        answers = {**model_answers(source_nb), **student.answers}
        for cell in nb["cells"]:
            grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
            if grade_id in answers:
                cell["source"] = answers[grade_id]
    if student.edit:
        student.edit(nb)
    return nb


def nbgrader(course: Path, *args: str, timeout: float = 3600) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "nbgrader", *args]
    return subprocess.run(command, cwd=course, capture_output=True, text=True, timeout=timeout, check=False)


def build(course: Path, lang: str = "both", points: Path | None = None) -> None:
    extra = ["--points", str(points)] if points else []
    subprocess.run(
        [sys.executable, str(Path(__file__).with_name("build_course.py")), str(course), "--lang", lang, *extra],
        check=True,
        capture_output=True,
    )


def submit_class(course: Path, assignment: str, only: set | None = None) -> list[Student]:
    """Write submitted/<student>/<assignment>/ for the class (or the named students); return them."""
    source_path = next((course / "source" / assignment).glob("*.ipynb"))
    release_path = course / "release" / assignment / source_path.name
    source_nb = read_notebook(source_path)
    released_nb = read_notebook(release_path)
    chosen = [s for s in students_for(assignment, source_nb) if only is None or s.name in only]
    for student in chosen:
        folder = course / "submitted" / student.name / assignment
        folder.mkdir(parents=True, exist_ok=True)
        nb = submission(student, released_nb, source_nb)
        (folder / source_path.name).write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
        (folder / "timestamp.txt").write_text("2026-12-07 10:00:00.000000 UTC\n")
    return chosen


def read_notebook(path: Path) -> dict:
    """A notebook with every cell source as one string (nbformat stores lists of lines)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
    return nb


def export_grades(course: Path) -> list[dict]:
    result = nbgrader(course, "export", "--to", "grades.csv")
    if result.returncode:
        raise RuntimeError(result.stderr[-2000:])
    with open(course / "grades.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("course", type=Path)
    parser.add_argument("--assignments", nargs="+", default=MOCK_ASSIGNMENTS)
    args = parser.parse_args(argv)
    build(args.course)
    total, count = 0.0, 0
    for assignment in args.assignments:
        nbgrader(args.course, "generate_assignment", assignment, "--force")
        students = submit_class(args.course, assignment)
        start = time.perf_counter()
        result = nbgrader(args.course, "autograde", assignment, "--force")
        seconds = time.perf_counter() - start
        total, count = total + seconds, count + len(students)
        print(
            f"{assignment}: {len(students)} submissions, autograde {seconds:.0f} s "
            f"({seconds / len(students):.1f} s each), rc {result.returncode}",
            flush=True,
        )
    print(f"class: {count} submissions, {total:.0f} s, {total / count:.1f} s per submission")
    rows = export_grades(args.course)
    print(f"exported {len(rows)} grade rows to {args.course / 'grades.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
