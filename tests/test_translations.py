"""The Chinese edition stays in step with the English notebooks (notebooks/zh/build.py, issue #16).

- every English notebook that has a translation file: every markdown cell translated, no entry stale (its
  ``en_sha`` is the English cell it translates), every comment key still in its cell, and the generated
  notebook identical to what the build makes now (sources, ids, metadata) with its outputs stored;
- planted drift, on a small notebook made here in a temporary folder: an English markdown cell edited, a
  code comment edited, a translation entry deleted, the generated notebook edited by hand, an entry for a
  cell that no longer exists: each one fails the check with its own message;
- the build itself: comments replaced as tokens (never inside strings), the code otherwise unchanged,
  ``ac.set_language("zh")`` after the imports, image links one folder deeper, outputs kept where the source
  did not change, ``--skeleton`` keeping good entries and marking new and stale ones.

Strict by default: a notebook without a Chinese edition, or an English prose comment left untranslated, fails.
``ATTN_ZH_STRICT=0`` relaxes both to warnings while an English notebook is being written (never in CI).
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]


def _load_build():
    spec = importlib.util.spec_from_file_location("zh_build", REPO / "notebooks" / "zh" / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["zh_build"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


build = _load_build()
STRICT = os.environ.get("ATTN_ZH_STRICT", "1") == "1"  # strict unless ATTN_ZH_STRICT=0


def sha(text: str) -> str:  # the format's definition, written out independently of build.en_sha
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


# ----------------------------------------------------------------------------- the real notebooks


def test_translated_notebooks_are_complete_fresh_and_built() -> None:
    paths = build.Paths()
    issues = build.check(None, paths, strict=STRICT)
    assert not [issue for issue in issues if issue.is_error], build.report(issues)


def test_every_notebook_has_a_chinese_edition() -> None:
    """Every English notebook has its Chinese edition (``ATTN_ZH_STRICT=0`` makes a gap a warning)."""
    paths = build.Paths()
    missing = [name for name in build.english_names(paths) if name not in build.translated_names(paths)]
    message = f"{len(missing)} notebook(s) without a Chinese edition: {', '.join(missing)}"
    if STRICT:
        assert not missing, message
    elif missing:
        warnings.warn(message + " (a failure unless ATTN_ZH_STRICT=0)", stacklevel=1)


# ----------------------------------------------------------------------------- a small notebook to drift

FIRST = """%matplotlib inline
import math

import torch

import attn_core as ac
from attn_core.viz import widgets

torch.manual_seed(0)
torch.set_num_threads(1)  # tiny tensors: one thread is faster and just as exact"""
WHY = "# why divide: keep the variance at 1"
SCORES = f"""note = "{WHY}"  {WHY}
scores = torch.ones(2, 2)  # (Lq, Lk)
print(note)  {WHY}"""
TITLE = '# 99 · A fixture\n\n![the data flow](../images/sdpa_dataflow.png) and <img src="../images/bug_map.png">'
TEXT = "## Scores\n\nWhy the scale matters."
ZH_TITLE = (
    '# 99 · 一个测试用的 notebook\n\n![数据流](../images/sdpa_dataflow.png) 以及 <img src="../images/bug_map.png">'
)
ZH_TEXT = "## 分数\n\n为什么缩放很重要。"
ZH_WHY = "# 为什么要除：让方差保持为 1"


def english_notebook():
    cells = [
        nbformat.v4.new_markdown_cell(TITLE, id="m1", metadata={"slideshow": {"slide_type": "slide"}}),
        nbformat.v4.new_code_cell(FIRST, id="c1", metadata={"slideshow": {"slide_type": "skip"}}),
        nbformat.v4.new_markdown_cell(TEXT, id="m2", metadata={"slideshow": {"slide_type": "subslide"}}),
        nbformat.v4.new_code_cell(
            SCORES,
            id="c2",
            metadata={"slideshow": {"slide_type": "fragment"}, "tags": ["nbval-ignore-output"]},
            outputs=[nbformat.v4.new_output("stream", name="stdout", text=WHY + "\n")],
            execution_count=2,
        ),
        nbformat.v4.new_code_cell(
            "x = 1\nx",
            id="c3",
            metadata={"jupyter": {"source_hidden": True}, "tags": ["solution"], "slideshow": {"slide_type": "skip"}},
            outputs=[nbformat.v4.new_output("execute_result", data={"text/plain": "1"}, execution_count=3)],
            execution_count=3,
        ),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python", "version": "3.11.7"},
        "widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}}},
    }
    return notebook


def translation() -> dict:
    return {
        "source": "99_fixture.ipynb",
        "cells": {
            "m1": {"en_sha": sha(TITLE), "zh": ZH_TITLE},
            "c1": {
                "en_sha": sha(FIRST),
                "comments": {FIRST.rsplit("  ", 1)[1]: "# 张量很小：单线程更快，结果同样精确"},
            },
            "m2": {"en_sha": sha(TEXT), "zh": ZH_TEXT},
            "c2": {"en_sha": sha(SCORES), "comments": {WHY: ZH_WHY}},
        },
    }


@pytest.fixture
def tree(tmp_path: Path):
    """notebooks/99_fixture.ipynb + zh/translations/99_fixture.json in a temporary folder, built once."""
    paths = build.Paths.under(tmp_path / "notebooks")
    paths.translations.mkdir(parents=True)
    nbformat.write(english_notebook(), paths.english_notebook("99_fixture"))
    write_translation(paths, translation())
    assert build.main(["99_fixture"], paths=paths) == 0
    zh = nbformat.read(paths.zh_notebook("99_fixture"), as_version=4)
    assert all(cell.outputs == [] for cell in zh.cells if cell.cell_type == "code")  # new: nothing to keep
    store_outputs(paths)
    return paths


def store_outputs(paths) -> None:
    """What notebooks/store_outputs.py does, minus the kernel: the English outputs (the code is the same)."""
    zh = nbformat.read(paths.zh_notebook("99_fixture"), as_version=4)
    english = {cell.id: cell for cell in nbformat.read(paths.english_notebook("99_fixture"), as_version=4).cells}
    for cell in zh.cells:
        if cell.cell_type == "code":
            cell.outputs = copy.deepcopy(english[cell.id].outputs)
            cell.execution_count = english[cell.id].execution_count
    nbformat.write(zh, paths.zh_notebook("99_fixture"))


def write_translation(paths, data: dict) -> None:
    paths.translation("99_fixture").write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")


def edit_english(paths, cell_id: str, edit) -> None:
    notebook = nbformat.read(paths.english_notebook("99_fixture"), as_version=4)
    cell = next(cell for cell in notebook.cells if cell.id == cell_id)
    cell.source = edit(cell.source)
    nbformat.write(notebook, paths.english_notebook("99_fixture"))


def errors(paths) -> list:
    return [issue for issue in build.check(None, paths) if issue.is_error]


def zh_cells(paths) -> dict:
    return {cell.id: cell for cell in nbformat.read(paths.zh_notebook("99_fixture"), as_version=4).cells}


def test_fixture_is_clean_and_the_cli_says_so(tree, capsys) -> None:
    assert errors(tree) == []
    assert build.main(["--check"], paths=tree) == 0
    assert "0 problem(s)" in capsys.readouterr().out


def test_the_build(tree) -> None:
    english = english_notebook()
    cells = zh_cells(tree)
    assert list(cells) == [cell.id for cell in english.cells]
    for cell in english.cells:  # ids, types and metadata copied
        assert cells[cell.id].cell_type == cell.cell_type
        assert cells[cell.id].metadata == cell.metadata
    zh = nbformat.read(tree.zh_notebook("99_fixture"), as_version=4)
    assert zh.metadata["kernelspec"] == english.metadata["kernelspec"]
    assert zh.metadata["attn_zh"]["source"] == "../99_fixture.ipynb"
    # markdown: the translation, links one folder deeper (written relative to notebooks/ by translators); both
    # diagrams have Chinese copies in images/zh/, which the Chinese edition links instead
    assert cells["m1"].source == ZH_TITLE.replace("../images/", "../../images/zh/")
    assert cells["m2"].source == ZH_TEXT
    # the comment replaced as a token, twice; the identical text inside the string untouched
    assert cells["c2"].source == SCORES.replace(f"  {WHY}", f"  {ZH_WHY}")
    assert f'note = "{WHY}"' in cells["c2"].source
    assert build.strip_comments(cells["c2"].source) == build.strip_comments(SCORES)
    # set_language right after the import block, the rest of the first cell unchanged but its comment
    first = cells["c1"].source.split("\n")
    assert first[first.index("from attn_core.viz import widgets") + 2] == build.SET_LANGUAGE
    assert build.strip_comments("\n".join(line for line in first if line != build.SET_LANGUAGE)) == (
        build.strip_comments(FIRST)
    )


def test_links_go_one_folder_deeper_and_to_chinese_diagrams_where_they_exist() -> None:
    assert (build.ZH_IMAGES / "sdpa_dataflow.png").is_file()
    assert not (build.ZH_IMAGES / "streaming_sinks.png").exists()  # a benchmark's figure: no Chinese copy
    markdown = "![a](../images/sdpa_dataflow.png) ![b](../images/streaming_sinks.png) [c](../README.md)"
    assert build.rewrite_links(markdown) == (
        "![a](../../images/zh/sdpa_dataflow.png) ![b](../../images/streaming_sinks.png) [c](../../README.md)"
    )


def test_outputs_kept_where_the_source_did_not_change(tree) -> None:
    assert build.main(["99_fixture"], paths=tree) == 0  # a rebuild changes nothing
    assert zh_cells(tree)["c3"].outputs and errors(tree) == []
    edit_english(tree, "c3", lambda source: source.replace("x = 1", "x = 2"))
    assert build.main(["99_fixture"], paths=tree) == 0
    cells = zh_cells(tree)
    assert cells["c2"].outputs and cells["c2"].execution_count == 2  # unchanged source: kept
    assert cells["c3"].outputs == [] and cells["c3"].execution_count is None  # changed: cleared
    assert [issue.kind for issue in errors(tree)] == ["outputs"]
    assert "outputs not stored" in build.report(errors(tree))


# ----------------------------------------------------------------------------- planted drift


def test_drift_english_markdown_changed(tree, capsys) -> None:
    edit_english(tree, "m2", lambda source: source + " It keeps softmax soft.")
    found = errors(tree)
    assert [(issue.kind, issue.cell) for issue in found] == [("stale", "m2")]
    assert f'set "en_sha" to "{sha(TEXT + " It keeps softmax soft.")}"' in found[0].message
    assert build.main(["--check"], paths=tree) == 1
    assert "stale: the English cell changed" in capsys.readouterr().out


def test_drift_english_comment_changed(tree) -> None:
    edit_english(tree, "c2", lambda source: source.replace(WHY, "# why divide: keep the variance near 1"))
    found = errors(tree)
    assert {(issue.kind, issue.cell) for issue in found} == {
        ("stale", "c2"),
        ("comment key", "c2"),
        ("out of date", None),
    }
    assert any("comment key not found in the English cell" in issue.message for issue in found)


def test_drift_translation_entry_deleted(tree) -> None:
    data = translation()
    del data["cells"]["m2"]
    write_translation(tree, data)
    found = errors(tree)
    assert ("missing", "m2") in {(issue.kind, issue.cell) for issue in found}
    assert any("missing translation" in issue.message for issue in found)
    with pytest.raises(build.BuildError, match="missing translation"):  # and the build refuses
        build.build_notebook("99_fixture", tree)


def test_drift_generated_notebook_edited_by_hand(tree) -> None:
    zh = nbformat.read(tree.zh_notebook("99_fixture"), as_version=4)
    zh.cells[2].source += "\n\n（手动加的一句）"
    nbformat.write(zh, tree.zh_notebook("99_fixture"))
    found = errors(tree)
    assert [issue.kind for issue in found] == ["out of date"]
    assert "out of date (cell m2: its source differs)" in found[0].message
    assert "never edit the generated notebook by hand" in found[0].message


def test_drift_metadata_changed_in_english(tree) -> None:
    notebook = nbformat.read(tree.english_notebook("99_fixture"), as_version=4)
    notebook.cells[3].metadata["tags"] = ["nbval-ignore-output", "timing"]
    nbformat.write(notebook, tree.english_notebook("99_fixture"))
    assert [issue.message for issue in errors(tree)][0].endswith(
        "(cell c2: its metadata differs): run python notebooks/zh/build.py 99_fixture "
        "(never edit the generated notebook by hand; edit the English notebook or the translation)"
    )


def test_drift_entry_for_a_cell_that_no_longer_exists(tree) -> None:
    data = translation()
    data["cells"]["deadbeef"] = {"en_sha": "000000000000", "zh": "旧的"}
    write_translation(tree, data)
    found = errors(tree)
    assert [(issue.kind, issue.cell) for issue in found] == [("orphan", "deadbeef")]
    assert "no longer exists" in found[0].message


def test_a_translated_comment_must_stay_one_comment(tree) -> None:
    data = translation()
    data["cells"]["c2"]["comments"][WHY] = "# 第一行\nx = 2  # 偷偷加的代码"
    write_translation(tree, data)
    found = errors(tree)
    assert [issue.kind for issue in found] == ["invalid"]
    assert "must be one line starting with '#'" in found[0].message


def test_build_refuses_a_first_cell_without_attn_core(tree) -> None:
    edit_english(tree, "c1", lambda source: source.replace("import attn_core as ac\n", ""))
    data = translation()
    data["cells"]["c1"]["en_sha"] = sha(FIRST.replace("import attn_core as ac\n", ""))
    write_translation(tree, data)
    with pytest.raises(build.BuildError, match="no `import attn_core as ac`"):
        build.build_notebook("99_fixture", tree)


def test_untranslated_prose_comment_is_reported_and_fails_when_strict(tree) -> None:
    edit_english(tree, "c3", lambda source: "x = 1  # the answer the check expects\nx")
    issues = build.check(None, tree)
    prose = [issue for issue in issues if issue.kind == "prose comment"]
    assert [issue.cell for issue in prose] == ["c3"] and not prose[0].is_error
    strict = [issue for issue in build.check(None, tree, strict=True) if issue.cell == "c3"]
    assert [issue.kind for issue in strict] == ["untranslated comment"]


def test_skeleton_marks_new_and_stale_entries_and_keeps_good_ones(tree) -> None:
    edit_english(tree, "m2", lambda source: source + " More.")
    notebook = nbformat.read(tree.english_notebook("99_fixture"), as_version=4)
    notebook.cells.append(nbformat.v4.new_markdown_cell("## New", id="m3"))
    notebook.cells.append(nbformat.v4.new_code_cell("y = 2  # the new value to check\ny  # (1,)", id="c4"))
    nbformat.write(notebook, tree.english_notebook("99_fixture"))
    data = translation()
    data["cells"]["gone"] = {"en_sha": "000000000000", "zh": "旧的"}
    write_translation(tree, data)

    build.skeleton("99_fixture", tree)
    cells = json.loads(tree.translation("99_fixture").read_text(encoding="utf-8"))["cells"]
    # good: kept, with the English they translate recorded; a code cell's hash moves to its translatable text
    assert cells["m1"] == {**translation()["cells"]["m1"], "translated_from": TITLE}
    scores_text = "\n".join([f'"{WHY}"', WHY, "# (Lq, Lk)", WHY])  # the string literal and comments, in order
    assert cells["c2"] == {**translation()["cells"]["c2"], "en_sha": sha(scores_text), "translated_from": scores_text}
    assert cells["m2"]["zh"] == ZH_TEXT and cells["m2"]["en_sha"] == sha(TEXT)  # stale: still fails the check
    assert cells["m2"]["en"] == TEXT + " More." and cells["m2"]["en_sha_new"] == sha(TEXT + " More.")
    assert cells["m3"] == {"en_sha": sha("## New"), "en": "## New", "zh": ""}
    assert cells["c4"]["comments"] == {"# the new value to check": ""}  # the shape comment is left out
    assert "gone" not in cells and "c3" not in cells
    kinds = {(issue.kind, issue.cell) for issue in errors(tree)}
    assert {("stale", "m2"), ("missing", "m3"), ("untranslated comment", "c4")} <= kinds


def test_force_builds_with_english_standing_in(tree) -> None:
    data = translation()
    del data["cells"]["m2"]
    write_translation(tree, data)
    assert build.main(["99_fixture"], paths=tree) == 1  # refuses, says why
    assert build.main(["--force", "99_fixture"], paths=tree) == 0
    assert zh_cells(tree)["m2"].source == TEXT


def test_en_sha_and_helpers() -> None:
    assert build.en_sha("# 01 · x") == sha("# 01 · x")
    assert build.rewrite_links("![a](../images/x.png) ![b](../../images/y.png) [c](01_x.ipynb)") == (
        "![a](../../images/x.png) ![b](../../images/y.png) [c](01_x.ipynb)"
    )
    assert build.normalize_comment("#中文") == "# 中文" and build.normalize_comment("# 中文") == "# 中文"
    for prose in ["# the answer the check expects", "# (Lq, Lk): row = query, column = key"]:
        assert build.looks_like_prose(prose), prose
    for code in ["# (B, L, hidden)", "# (hidden, hidden)", "# noqa: E501 long line here", "# ['the', 'cat', 'sat']"]:
        assert not build.looks_like_prose(code), code
    assert build.resolve("00", build.Paths()) == "00_start_here"
    assert build.resolve("notebooks/zh/00_start_here.ipynb", build.Paths()) == "00_start_here"


def test_a_comment_that_pushes_a_line_past_120_columns_fails(tree) -> None:
    # ruff measures display width: a CJK character is two columns, so a translation can overflow a line that
    # fit in English, and `ruff format` would then re-wrap the generated code.
    data = translation()
    data["cells"]["c2"]["comments"][WHY] = "# " + "很长的注释" * 12
    write_translation(tree, data)
    found = [issue for issue in build.check(None, tree) if issue.kind == "long line"]
    assert [issue.cell for issue in found] == ["c2", "c2"] and found[0].is_error
    assert "ruff format would re-wrap the code" in found[0].message
    assert build.display_width("注意 ab") == 7


def test_a_tool_directive_survives_translation(tree) -> None:
    edit_english(tree, "c3", lambda source: "x = 1  # noqa: F841 the answer the check expects\nx")
    data = translation()
    data["cells"]["c3"] = {"en_sha": sha("x = 1  # noqa: F841 the answer the check expects\nx"), "comments": {}}
    data["cells"]["c3"]["comments"]["# noqa: F841 the answer the check expects"] = "# 检查期望的答案"
    write_translation(tree, data)
    assert "must keep its tool directive 'noqa: F841'" in build.report(errors(tree))
    data["cells"]["c3"]["comments"]["# noqa: F841 the answer the check expects"] = "# noqa: F841 检查期望的答案"
    write_translation(tree, data)
    assert build.main(["99_fixture"], paths=tree) == 0
    assert "x = 1  # noqa: F841 检查期望的答案" in zh_cells(tree)["c3"].source


# ----------------------------------------------------------------------------- the verdict audit (tests/zh_audit.py)

AUDITED_SESSION = """
from attn_core import i18n


def test_prints_a_verdict_no_catalog_has():
    i18n.verdict_line("a grader name no catalog has", None)


def test_fine():
    pass
"""


def _run_audited_session(tmp_path: Path, strict: str) -> subprocess.CompletedProcess:
    """A pytest session in a temporary folder whose conftest imports the audit hooks, as tests/conftest.py does."""
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(REPO / 'tests')!r})\n"
        "from zh_audit import pytest_sessionfinish, pytest_terminal_summary, pytest_testnodedown  # noqa: F401\n"
    )
    (tmp_path / "test_session.py").write_text(AUDITED_SESSION)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull, "test_session.py"]
    environment = {**os.environ, "ATTN_ZH_STRICT": strict}
    return subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)


def test_an_untranslated_verdict_is_a_failed_test_not_only_an_exit_status(tmp_path: Path) -> None:
    strict = _run_audited_session(tmp_path, "1")
    assert strict.returncode == 1, strict.stdout
    assert "1 failed, 2 passed" in strict.stdout  # counted as a test, not "2 passed" with exit status 1
    assert "FAILED tests/zh_audit.py::untranslated_verdicts" in strict.stdout
    assert "'a grader name no catalog has'" in strict.stdout
    assert "a grader name no catalog has" in (tmp_path / "build" / "zh_untranslated.txt").read_text(encoding="utf-8")
    relaxed = _run_audited_session(tmp_path, "0")
    assert relaxed.returncode == 0 and "2 passed" in relaxed.stdout and "failed" not in relaxed.stdout


# ----------------------------------------------------------------------------- code cells: comments and strings

PRINT = 'for n in [8, 16]:\n    print(f"at {n} tokens the weights take {n * n} numbers")  # (n, n) each'
ZH_PRINT = 'f"{n} 个词元时，权重共有 {n * n} 个数"'


def _with_print_cell(paths, strings: dict | None = None) -> dict:
    notebook = nbformat.read(paths.english_notebook("99_fixture"), as_version=4)
    if "c5" not in [cell.id for cell in notebook.cells]:
        notebook.cells.append(nbformat.v4.new_code_cell(PRINT, id="c5"))
        nbformat.write(notebook, paths.english_notebook("99_fixture"))
    data = translation()
    text = build.translatable_text(PRINT)
    data["cells"]["c5"] = {"en_sha": sha(text), "strings": strings or {}, "translated_from": text}
    write_translation(paths, data)
    return data


def test_a_code_edit_that_keeps_comments_and_strings_keeps_the_translation_fresh(tree) -> None:
    data = translation()
    data["cells"]["c2"]["en_sha"] = sha("\n".join([f'"{WHY}"', WHY, "# (Lq, Lk)", WHY]))  # translatable text
    write_translation(tree, data)
    edit_english(tree, "c2", lambda source: source.replace("scores", "attention_scores"))  # a rename
    assert [issue.kind for issue in errors(tree)] == ["out of date"]  # only the rebuild is due, no translation
    assert build.main(["99_fixture"], paths=tree) == 0
    assert "attention_scores = torch.ones(2, 2)" in zh_cells(tree)["c2"].source
    # the older whole-source hash of c1 (translation() still uses it) is accepted while the cell is unchanged
    assert not [issue for issue in errors(tree) if issue.cell == "c1"]


def test_a_changed_string_makes_the_translation_stale_with_a_word_diff(tree) -> None:
    _with_print_cell(tree, {'f"at {n} tokens the weights take {n * n} numbers"': ZH_PRINT})
    assert build.main(["99_fixture"], paths=tree) == 0
    edit_english(tree, "c5", lambda source: source.replace("weights take", "attention weights would take"))
    found = [issue for issue in errors(tree) if issue.kind in ("stale", "string key")]
    assert {(issue.kind, issue.cell) for issue in found} == {("stale", "c5"), ("string key", "c5")}
    stale = next(issue for issue in found if issue.kind == "stale")
    assert "its comments or strings changed" in stale.message
    assert "the {+attention+} weights {+would+} take" in stale.message  # the word diff


def test_string_literals_are_translated_as_tokens_keeping_their_fields(tree) -> None:
    _with_print_cell(tree, {'f"at {n} tokens the weights take {n * n} numbers"': ZH_PRINT})
    assert build.main(["99_fixture"], paths=tree) == 0
    assert zh_cells(tree)["c5"].source == PRINT.replace('f"at {n} tokens the weights take {n * n} numbers"', ZH_PRINT)
    for bad, why in [
        ('f"{n} 个词元时，权重共有 {n} 个数"', "must keep exactly its {…} fields"),  # a field changed
        ('"{n} 个词元时，权重共有 {n * n} 个数"', "one literal of the same kind"),  # lost the f prefix
        ('f"{n} 个词元" + str(n)', "one literal of the same kind"),  # code, not a literal
    ]:
        data = _with_print_cell(tree, {'f"at {n} tokens the weights take {n * n} numbers"': bad})
        assert why in build.report(errors(tree)), (bad, data)
    data = translation()
    data["cells"]["c2"]["strings"] = {'"not in the cell"': '"不在单元格里"'}
    write_translation(tree, data)
    assert ("string key", "c2") in {(issue.kind, issue.cell) for issue in errors(tree)}


def test_a_table_header_field_is_text() -> None:
    build.check_string("f\"{'batch':>5} | {n}\"", "f\"{'批量':>5} | {n}\"")  # a constant field: words may change
    with pytest.raises(build.BuildError, match="must keep exactly its"):
        build.check_string("f\"{'batch':>5} | {n}\"", "f\"{'批量':>6} | {n}\"")  # its format spec may not


def test_word_diff() -> None:
    old = "one two three four five six seven eight nine ten eleven twelve"
    new = "one two three four five six SEVEN eight nine ten eleven twelve"
    assert build.word_diff(old, new) == "… three four five six [-seven-]{+SEVEN+} eight nine ten eleven …"
    assert build.word_diff("a b", "a b c") == "a b {+c+}"


# ----------------------------------------------------------------------------- stored widget state


def _load_store_outputs():
    spec = importlib.util.spec_from_file_location("store_outputs", REPO / "notebooks" / "store_outputs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rerun_ids(notebook, seed: int):
    """The notebook as another run stores it: the same widgets under new random model ids, in another order."""
    import random

    notebook = copy.deepcopy(notebook)
    key = "application/vnd.jupyter.widget-state+json"
    state = notebook.metadata["widgets"][key]["state"]
    generator = random.Random(seed)
    new = {old: f"{generator.getrandbits(128):032x}" for old in state}
    text = json.dumps(notebook)
    for old, fresh in new.items():
        text = text.replace(old, fresh)
    notebook = nbformat.from_dict(json.loads(text))
    items = list(notebook.metadata["widgets"][key]["state"].items())
    generator.shuffle(items)
    notebook.metadata["widgets"][key]["state"] = dict(items)
    return notebook


def test_widget_state_is_normalised_so_a_rerun_stores_the_same_file() -> None:
    store = _load_store_outputs()
    stored = nbformat.read(REPO / "notebooks" / "zh" / "04_grouped_query_attention.ipynb", as_version=4)
    state_of = lambda nb: nb.metadata["widgets"][store.WIDGET_STATE]["state"]  # noqa: E731
    assert len(state_of(stored)) > 10  # the explorers' models are stored
    first, second = _rerun_ids(stored, 1), _rerun_ids(stored, 2)
    assert set(state_of(first)) != set(state_of(second))  # what two runs store without the step
    for notebook in (first, second):
        store.normalize_widget_state(notebook)
    assert nbformat.writes(first) == nbformat.writes(second)
    store.normalize_widget_state(first)  # idempotent
    assert nbformat.writes(first) == nbformat.writes(second)
    # every view an output shows, and every reference inside the state, names a stored model
    state = state_of(first)
    shown = [
        output["data"][store.WIDGET_VIEW]["model_id"]
        for cell in first.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if store.WIDGET_VIEW in output.get("data", {})
        and output["data"][store.WIDGET_VIEW]["model_id"]  # "": an explorer's static fallback (no live model)
    ]
    assert shown and all(model_id in state for model_id in shown)
    assert all(reference in state for reference in store.REFERENCE.findall(json.dumps(state)))
