"""Stored notebook outputs that every front end can show offline: JupyterLab, VS Code, Colab, GitHub.

VS Code's notebook renderer cannot be driven offline, so what it needs is checked by construction here:
- no output carries ``application/javascript`` (VS Code and GitHub do not run it; Lab trusts it only in
  a trusted notebook), so nothing a learner sees may depend on one;
- no HTML output or markdown cell loads a script, stylesheet or image from the network (a learner may be
  offline, and the series promises that nothing is downloaded at run time);
- widget outputs always carry a ``text/plain`` fallback (what GitHub and a front end without the widget
  manager show, and what strict nbval compares).
The browser side (narrow and wide windows) is tests/e2e/test_lab_widgets.py::test_explorer_fits_narrow_and_wide_windows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").rglob("[0-9][0-9]*_*.ipynb"))
NOTEBOOKS = [path for path in NOTEBOOKS if ".ipynb_checkpoints" not in path.parts]
# <script src=...>, <link href=...>, <img src=...>, markdown ![](...) and CSS url(...) pointing off the machine.
REMOTE = re.compile(
    r"""<script\b[^>]*\bsrc\s*=\s*["']?(?:https?:)?//"""
    r"""|<link\b[^>]*\bhref\s*=\s*["']?(?:https?:)?//"""
    r"""|<img\b[^>]*\bsrc\s*=\s*["']?(?:https?:)?//"""
    r"""|!\[[^\]]*\]\(\s*(?:https?:)?//"""
    r"""|url\(\s*["']?(?:https?:)?//""",
    re.IGNORECASE,
)


def problems(notebook: dict) -> list[str]:
    """Every output or markdown cell of ``notebook`` that a front end without JavaScript or network cannot show."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "markdown":
            source = "".join(cell["source"])
            if match := REMOTE.search(source):
                found.append(f"cell {index} (markdown) loads from the network: {match.group(0)!r}")
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "application/javascript" in data:
                found.append(f"cell {index}: an application/javascript output (VS Code and GitHub do not run it)")
            html = "".join(data.get("text/html", ""))
            if match := REMOTE.search(html):
                found.append(f"cell {index}: an HTML output loads from the network: {match.group(0)!r}")
            if "application/vnd.jupyter.widget-view+json" in data and "text/plain" not in data:
                found.append(f"cell {index}: a widget output without a text/plain fallback")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: str(path.relative_to(path.parents[1])))
def test_stored_outputs_need_no_javascript_and_no_network(path: Path):
    found = problems(json.loads(path.read_text(encoding="utf-8")))
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "cell",
    [
        {"cell_type": "code", "outputs": [{"data": {"application/javascript": "alert(1)"}}]},
        {"cell_type": "code", "outputs": [{"data": {"text/html": '<script src="https://cdn.example/x.js"></script>'}}]},
        {"cell_type": "code", "outputs": [{"data": {"text/html": "<link rel=stylesheet href=//cdn.example/a.css>"}}]},
        {"cell_type": "markdown", "source": ["see ![map](https://example.org/map.png)"]},
        {"cell_type": "code", "outputs": [{"data": {"application/vnd.jupyter.widget-view+json": {"model_id": "0"}}}]},
    ],
    ids=["javascript", "remote-script", "remote-stylesheet", "remote-image", "widget-without-text"],
)
def test_the_check_finds_each_kind_of_problem(cell):
    assert len(problems({"cells": [cell]})) == 1


def test_the_check_passes_local_content():
    cells = [
        {"cell_type": "markdown", "source": ["![map](../images/bug_map.png) and a [link](https://example.org)"]},
        {"cell_type": "code", "outputs": [{"data": {"text/html": "<table><tr><td>1</td></tr></table>"}}]},
    ]
    assert problems({"cells": cells}) == []
