"""pytest at the repository root: how many processes run the suite (every run loads this file).

``pytest`` (pyproject's addopts: ``-n auto --dist loadfile``) spreads the test files over two worker processes with
pytest-xdist, each file whole on one worker: a notebook's cells must run in order in one kernel, and the browser
tests share one JupyterLab. Measured on a 2-core machine (README, Performance): the whole suite in 399 s, not 665 s.
Only a run over a folder (``pytest``, ``pytest notebooks``) does this. A run that names files
(``pytest notebooks/05_masks_and_dropout.ipynb``, ``pytest tests/test_rope.py tests/test_masks.py``) stays in one
process: two small test files took 10.6 s on two workers and 3.3 s in one process.
``pytest -n 0`` turns workers off; ``PYTEST_XDIST_AUTO_NUM_WORKERS=N`` picks N.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Start-up, measured (README, Performance): two pieces of other packages' start-up cost every pytest run ~3 s, more
# than a small notebook's cells.
# 1. jsonschema (imported by nbformat, which nbval reads notebooks with) imports the optional `rfc3987-syntax` when it
#    is installed (jupyter-events asks for it), and that module compiles a Lark grammar at import: ~1.9 s. It only
#    validates the "iri" string format, which the notebook schema never uses. pyproject's addopts hold nbval back
#    (`-p no:nbval`) so this file can mark the module absent first; nbval is then loaded below, unchanged.
sys.modules.setdefault("rfc3987_syntax", None)  # None in sys.modules: `import rfc3987_syntax` raises ImportError
pytest_plugins = ["nbval.plugin"]

# Not one per core: each worker holds its own torch (and, for the Gemma 3 tests, ~2 GB of weights), and the
# notebooks start a kernel each; two keep a laptop responsive and match CI's two cores.
MAX_WORKERS = 2


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook, called for -n auto
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    paths = [Path(config.invocation_params.dir, arg.split("::")[0]) for arg in config.args]
    if not any(path.is_dir() for path in paths):
        return 0  # named files only: starting a worker (~4 s of imports each) costs more than it saves
    return min(MAX_WORKERS, usable_cpus()) if usable_cpus() >= 2 else 0


# 2. Hypothesis's pytest plugin imports `hypothesis.internal.observability` in its terminal summary even when no
#    test imported Hypothesis (6.170: ~1 s, all of Hypothesis). A run without Hypothesis tests (a notebook) drops
#    the plugin before the summary: it would have nothing to report.
@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    if "hypothesis" not in sys.modules:
        plugin = session.config.pluginmanager.get_plugin("hypothesispytest")
        if plugin is not None:
            session.config.pluginmanager.unregister(plugin)


# The longest files first (largest-first scheduling): with `--dist loadfile` a worker takes whole files in collection
# order, so files that take a minute or more, several of them waiting on a server (JupyterLab, the hub, Chromium),
# used to land last on both workers and leave one idle while the other finished (measured: README, Performance).
LONGEST_FIRST = (
    "tests/e2e/test_lab_widgets.py",
    "tests/test_gemma3.py",
    "tests/test_book.py",
    "tests/test_classroom_hub.py",
    "tests/test_slides_fit.py",
    "tests/test_classroom_mock_class.py",
    "tests/test_gemma3_context.py",
    "tests/e2e/",
)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)), len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: the order inside each file, and of all other files, is unchanged
