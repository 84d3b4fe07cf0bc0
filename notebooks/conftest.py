"""Notebook runs under nbval: the Triton cells of 12b (and its Chinese twin) skip, visibly, when triton is absent.

triton is an optional extra (``pip install -e ".[triton]"``), and the README's ``pip install -r requirements.txt``
does not install it. The stored outputs of 12b are those of a run with triton; without it those cells would print
something else and strict nbval would fail them. So every cell that runs a Triton kernel carries the cell tag
``needs-triton``; when ``importlib.util.find_spec("triton")`` is None each such cell's nbval item is marked
skipped with the reason below (``-ra`` in pyproject's addopts lists it in the summary, and a line at the end of the
run counts them). With triton installed the tag does nothing: the cells run and their outputs are compared.
``tests/test_triton_notebook_tags.py`` fails when a cell that needs triton lacks the tag.
"""

from __future__ import annotations

import importlib.util

import pytest

NEEDS_TRITON_TAG = "needs-triton"
SKIP_REASON = "triton not installed (pip install -e '.[triton]')"


def triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def cell_tags(item: pytest.Item) -> list[str]:
    """The notebook cell's tags for an nbval item; [] for any other item."""
    cell = getattr(item, "cell", None)
    if cell is None:
        return []
    return list(cell.get("metadata", {}).get("tags", []))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if triton_installed():
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if NEEDS_TRITON_TAG in cell_tags(item):
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    skipped = [report for report in terminalreporter.stats.get("skipped", []) if SKIP_REASON in str(report.longrepr)]
    if skipped:
        terminalreporter.write_line(
            f"{len(skipped)} notebook cells tagged {NEEDS_TRITON_TAG!r} skipped: {SKIP_REASON}", yellow=True
        )
