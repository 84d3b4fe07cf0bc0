"""Re-execute notebooks and store their outputs, ready for strict nbval and for GitHub readers.

    python notebooks/store_outputs.py                      # every notebook of the series
    python notebooks/store_outputs.py notebooks/05_*.ipynb  # some of them

Same as ``jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.record_timing=False``,
plus two steps: consecutive stream outputs of a cell are merged (a ``print`` can reach the notebook as
several stream outputs, depending on when the kernel flushed; nbval merges them before comparing, but
GitHub and nbviewer show each piece as its own block), and a cell tagged ``timing`` keeps no output
(its numbers belong to the machine that ran it, not to the notebook).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbconvert.preprocessors import ExecutePreprocessor


def merge_streams(outputs: list) -> list:
    merged: list = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (
            output.get("output_type") == "stream"
            and previous is not None
            and previous.get("output_type") == "stream"
            and previous.get("name") == output.get("name")
        ):
            previous["text"] = "".join(previous["text"]) + "".join(output["text"])
        else:
            merged.append(output)
    return merged


def store_outputs(path: Path) -> float:
    """Execute ``path`` in place (cwd = its folder) and return the seconds it took."""
    notebook = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    ExecutePreprocessor(timeout=600, record_timing=False).preprocess(notebook, {"metadata": {"path": str(path.parent)}})
    seconds = time.perf_counter() - start
    for cell in notebook.cells:
        if cell.cell_type == "code":
            timing = "timing" in cell.metadata.get("tags", [])
            cell.outputs = [] if timing else merge_streams(cell.outputs)
    nbformat.write(notebook, path)
    return seconds


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    paths = [Path(p).resolve() for p in sys.argv[1:]] or sorted(here.glob("[0-9][0-9]*_*.ipynb"))
    for path in paths:
        print(f"{path.name}: {store_outputs(path):.1f} s")
