"""pytest's own start-up stays small: a notebook run must not pay for imports it never uses (root conftest.py).

Measured here (README, Performance): `pytest --co` of one notebook took 3.2–3.5 s before, 1.0–1.2 s after; the two
imports below were ~1.9 s and ~1 s of it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAST = ("-n", "0", "-p", "no:cacheprovider")  # one process, no cache files written


def test_collecting_a_notebook_skips_the_slow_optional_imports():
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pytest", *FAST, "--co", "-q", "notebooks/00_start_here.ipynb"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "00_start_here.ipynb::Cell 0" in run.stdout  # nbval, loaded by conftest.py, still collects the cells
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "rfc3987_syntax.syntax_helpers" not in imported, "jsonschema compiled the rfc3987 grammar (~1.9 s)"
    assert "hypothesis" not in imported, "Hypothesis was imported by a run without Hypothesis tests (~1 s)"


def test_nbval_options_still_apply():
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *FAST, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "--nbval-sanitize-with" in run.stdout and "--hypothesis-seed" in run.stdout
