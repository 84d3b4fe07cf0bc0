"""Start-up stays small: a notebook run must not pay for imports it never uses (root conftest.py, attn_core).

Measured here (README, Performance): `pytest --co` of one notebook took 3.2–3.5 s before, 1.0–1.2 s after; the two
imports below were ~1.9 s and ~1 s of it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attn_core.masks import broadcasts_to

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


def test_a_notebooks_first_rope_and_masked_attention_do_not_import_sympy():
    # torch.broadcast_shapes' first call imports sympy (0.5-0.7 s): once per notebook kernel, so attn_core avoids it
    code = (
        "import sys, torch, attn_core as ac\n"
        "x = torch.randn(2, 3, 5, 8)\n"
        "ac.apply_rope(x, torch.arange(5)); ac.apply_rope(x, torch.arange(5).expand(2, 1, 5))\n"
        "ac.scaled_dot_product_attention(x, x, x, mask=ac.causal_mask(5))\n"
        "assert 'sympy' not in sys.modules, 'sympy was imported'\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]


@pytest.mark.parametrize("shape", [(), (5,), (1, 5), (3, 5), (2, 1, 5), (2, 3, 5), (4,), (2, 2, 5), (1, 2, 3, 5), (0,)])
def test_broadcasts_to_agrees_with_torch(shape):
    target = (2, 3, 5)
    try:
        expected = torch.broadcast_shapes(shape, target) == target
    except RuntimeError:
        expected = False
    assert broadcasts_to(shape, target) is expected
