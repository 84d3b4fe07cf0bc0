"""Notebook 12b passes strict nbval without the triton extra: every cell that runs Triton carries `needs-triton`.

``notebooks/conftest.py`` skips the nbval items of cells tagged ``needs-triton`` when triton is not installed (their
stored outputs are those of a run with triton). A cell that runs a kernel but lost its tag would fail strict nbval
on a machine with only ``requirements.txt`` installed, the README's path; these tests catch that without running
the notebook, in English and Chinese, with or without triton. A cell "runs Triton" when, outside a function body, it
branches on ``HAS_TRITON`` or calls ``ac.triton_attention``, a ``kernel[grid](...)`` launch or one of the notebook's
own helpers that launch one.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAME = "12b_flash_attention_in_triton.ipynb"
NOTEBOOKS = [ROOT / "notebooks" / NAME, ROOT / "notebooks" / "zh" / NAME]
TAG = "needs-triton"
KERNEL_HELPERS = {"row_sums", "my_flash_forward"}  # the notebook's functions that launch a kernel


def load_conftest():
    spec = importlib.util.spec_from_file_location("notebooks_conftest_under_test", ROOT / "notebooks" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def code_cells(path: Path) -> list[dict]:
    return [cell for cell in json.loads(path.read_text(encoding="utf-8"))["cells"] if cell["cell_type"] == "code"]


def top_level_nodes(tree: ast.AST):
    """Every node outside function bodies (a def only defines; its body runs when called)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(
            child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.FunctionDef | ast.Lambda)
        )


def runs_triton(source: str) -> bool:
    """True for a cell that runs Triton; the setup cell, which defines HAS_TRITON (and imports triton), runs always."""
    if "HAS_TRITON = " in source:
        return False
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]  # IPython magics
    for node in top_level_nodes(ast.parse("\n".join(lines))):
        if isinstance(node, ast.If) and "HAS_TRITON" in ast.unparse(node.test):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Subscript):  # kernel[grid](...)
                return True
            if isinstance(func, ast.Attribute) and func.attr == "triton_attention":
                return True
            if isinstance(func, ast.Name) and func.id in KERNEL_HELPERS:
                return True
    return False


@pytest.mark.parametrize("path", NOTEBOOKS, ids=["en", "zh"])
def test_every_cell_that_runs_triton_is_tagged(path):
    cells = code_cells(path)
    needs = [cell["id"] for cell in cells if runs_triton("".join(cell["source"]))]
    tagged = [cell["id"] for cell in cells if TAG in cell["metadata"].get("tags", [])]
    assert len(needs) >= 10  # the version line, the row-sum kernel, forward, checks, backward, four mistakes
    assert needs == tagged, f"untagged: {sorted(set(needs) - set(tagged))}, tagged needlessly: " + str(
        sorted(set(tagged) - set(needs))
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=["en", "zh"])
def test_untagged_cells_do_not_depend_on_tagged_ones(path):
    """The cells that still run without triton must not need a name only a skipped cell defines."""
    cells = code_cells(path)
    defined_by_tagged = set()
    for cell in cells:
        if TAG in cell["metadata"].get("tags", []):
            tree = ast.parse("".join(cell["source"]))
            defined_by_tagged |= {
                target.id
                for node in tree.body
                if isinstance(node, ast.Assign)
                for target in node.targets
                if isinstance(target, ast.Name)
            }
            defined_by_tagged |= {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    for cell in cells:
        if TAG in cell["metadata"].get("tags", []):
            continue
        source = "\n".join(line for line in "".join(cell["source"]).splitlines() if not line.startswith("%"))
        used = {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}
        assert not used & defined_by_tagged, (cell["id"], sorted(used & defined_by_tagged))


def test_the_setup_cell_is_not_tagged_and_prints_nothing():
    """The cell that defines HAS_TRITON runs either way, so its stored output must be the same either way: none."""
    for path in NOTEBOOKS:
        setup = next(cell for cell in code_cells(path) if "HAS_TRITON = " in "".join(cell["source"]))
        assert TAG not in setup["metadata"].get("tags", []) and setup["outputs"] == []


def fake_item(tags):
    return SimpleNamespace(cell={"metadata": {"tags": tags}}, markers=[], add_marker=lambda m: None)


@pytest.mark.parametrize("installed", [False, True])
def test_conftest_skips_exactly_the_tagged_cells_when_triton_is_absent(monkeypatch, installed):
    conftest = load_conftest()
    monkeypatch.setattr(conftest, "triton_installed", lambda: installed)
    items = []
    for tags in ([TAG], [], ["nbval-ignore-output"], [TAG, "solution"]):
        item = fake_item(tags)
        item.add_marker = item.markers.append
        items.append(item)
    items.append(SimpleNamespace(markers=[], add_marker=lambda m: pytest.fail("a non-notebook item was marked")))
    conftest.pytest_collection_modifyitems(config=None, items=items)
    skipped = [bool(item.markers) for item in items]
    assert skipped == ([False] * 5 if installed else [True, False, False, True, False])
    if not installed:
        marker = items[0].markers[0]
        assert marker.name == "skip" and marker.kwargs["reason"] == "triton not installed (pip install -e '.[triton]')"
