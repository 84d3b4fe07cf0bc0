"""Without a kernel an explorer still says something: ``jupyter nbconvert --to html`` shows its stored fallback.

Every explorer cell stores two outputs: the widget view (drawn only by a live kernel) and a static fallback (the
figure of the default state plus one line on what the controls change; output metadata
``attn_core_explorer_fallback``). Exported to HTML as GitHub, VS Code's viewer and ``nbconvert --to html`` show a
notebook, each explorer cell must show its fallback figure (an inline PNG), not a blank widget.

A plain export also shows every model solution in full (nbconvert does not honour JupyterLab's ``source_hidden``;
the book collapses them behind a "Show solution" button). The solutions carry the tag ``solution``, so nbconvert's
own TagRemovePreprocessor leaves them out, as on the command line::

    jupyter nbconvert --to html --TagRemovePreprocessor.remove_cell_tags='{"solution"}' notebooks/12d_*.ipynb

and that export still shows every fallback.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = [
    "12c_attention_sinks_and_gates",
    "12d_linear_attention_gated_deltanet",
]  # an inline and a packaged explorer
WIDGET = "application/vnd.jupyter.widget-view+json"
FALLBACK = "attn_core_explorer_fallback"  # output metadata of the static fallback
FALLBACK_CLASS = 'class="attn-explorer-fallback"'


def explorer_cells(notebook) -> list:
    return [c for c in notebook.cells if c.cell_type == "code" and any(WIDGET in o.get("data", {}) for o in c.outputs)]


def fallbacks(cell) -> list:
    return [o for o in cell.outputs if o.get("metadata", {}).get(FALLBACK)]


def png_prefix(output) -> str:
    """The first 80 base64 characters of a fallback's PNG: enough to find that very image in the HTML."""
    return "".join(output["data"]["image/png"].split())[:80]


def export(notebook, remove_solutions: bool = False) -> str:
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    config = Config()
    if remove_solutions:
        config.TagRemovePreprocessor.enabled = True
        config.TagRemovePreprocessor.remove_cell_tags = {"solution"}
    html, _ = HTMLExporter(config=config).from_notebook_node(notebook)
    return html


@pytest.fixture(scope="module", params=NOTEBOOKS)
def notebook(request):
    return nbformat.read(REPO / "notebooks" / f"{request.param}.ipynb", as_version=4)


def test_every_explorer_cell_stores_one_fallback(notebook) -> None:
    cells = explorer_cells(notebook)
    assert cells, "no explorer cell: the test would prove nothing"
    for cell in cells:
        found = fallbacks(cell)
        assert len(found) == 1, f"explorer cell {cell.id}: {len(found)} fallback outputs, expected 1"
        assert "image/png" in found[0]["data"], f"explorer cell {cell.id}: the fallback has no PNG"


def test_plain_html_export_shows_every_fallback_figure(notebook) -> None:
    html = export(notebook)
    cells = explorer_cells(notebook)
    assert html.count(FALLBACK_CLASS) == len(cells)
    for cell in cells:
        assert f"data:image/png;base64,{png_prefix(fallbacks(cell)[0])}" in html, f"{cell.id}: fallback PNG not shown"


def test_export_without_solutions_keeps_the_fallbacks(notebook) -> None:
    solutions = [c for c in notebook.cells if "solution" in c.metadata.get("tags", [])]
    assert solutions, "no solution cell: the test would prove nothing"
    plain, html = export(notebook), export(notebook, remove_solutions=True)
    for cell in solutions:
        prompt = f"In\xa0[{cell.execution_count}]:"  # the cell's input prompt, as the lab template writes it
        assert prompt in plain, f"{cell.id}: the plain export should show the solution (the case this guards)"
        assert prompt not in html, f"{cell.id}: the solution is still in the export"
    assert html.count(FALLBACK_CLASS) == len(explorer_cells(notebook))
