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
from pathlib import Path

import pytest

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
