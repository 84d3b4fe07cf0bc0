"""Re-execute notebooks and store their outputs, ready for strict nbval and for GitHub readers.

    python notebooks/store_outputs.py                      # every notebook of the series
    python notebooks/store_outputs.py notebooks/05_*.ipynb  # some of them

Same as ``jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.record_timing=False``,
plus three steps: consecutive stream outputs of a cell are merged (a ``print`` can reach the notebook as
several stream outputs, depending on when the kernel flushed; nbval merges them before comparing, but
GitHub and nbviewer show each piece as its own block), a cell tagged ``timing`` keeps no output
(its numbers belong to the machine that ran it, not to the notebook), and the stored widget state is
normalised (``normalize_widget_state``): every run gives each widget model a new random id, so without it a
one-line edit rewrote every widget line of a notebook's diff.
"""

from __future__ import annotations

import hashlib
import json
import re
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


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
REFERENCE = re.compile(r"IPY_MODEL_([0-9a-f]{32})")  # how one widget model names another in its state


def normalize_widget_state(notebook) -> None:
    """Give every stored widget model an id that depends on where it is shown, not on the run.

    A model shown by a cell's output gets ``sha256("<cell id>/<n>")``, ``n`` counting the models reached from that
    cell's outputs (depth first through ``IPY_MODEL_…`` references, in the order they appear in the sorted
    state); models no output reaches are numbered in the order of their sorted content. Outputs and references
    are rewritten with the same map and the state is stored in that order, so re-storing an unchanged notebook
    leaves its file unchanged and an edit changes only the cells it touches.
    """
    widgets = notebook.metadata.get("widgets", {}).get(WIDGET_STATE)
    if not widgets or not isinstance(widgets.get("state"), dict):
        return
    state = widgets["state"]
    new_ids: dict[str, str] = {}

    def name(model_id: str, scope: str, counter: list[int]) -> None:
        if model_id in new_ids or model_id not in state:
            return
        new_ids[model_id] = hashlib.sha256(f"{scope}/{counter[0]}".encode()).hexdigest()[:32]
        counter[0] += 1
        for reference in REFERENCE.findall(json.dumps(state[model_id], sort_keys=True)):
            name(reference, scope, counter)

    for cell in notebook.cells:
        counter = [0]
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            view = output.get("data", {}).get(WIDGET_VIEW)
            if isinstance(view, dict) and isinstance(view.get("model_id"), str):
                name(view["model_id"], cell.get("id", ""), counter)
    counter = [0]
    unshown = [m for m in state if m not in new_ids]
    for model_id in sorted(unshown, key=lambda m: REFERENCE.sub("", json.dumps(state[m], sort_keys=True))):
        name(model_id, "unshown", counter)

    def rename(text: str) -> str:
        return REFERENCE.sub(lambda match: f"IPY_MODEL_{new_ids.get(match[1], match[1])}", text)

    widgets["state"] = {
        new_ids[model_id]: json.loads(rename(json.dumps(state[model_id])))
        for model_id in sorted(state, key=lambda m: new_ids[m])
    }
    for cell in notebook.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            view = output.get("data", {}).get(WIDGET_VIEW)
            if isinstance(view, dict) and view.get("model_id") in new_ids:
                view["model_id"] = new_ids[view["model_id"]]


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
    normalize_widget_state(notebook)
    nbformat.write(notebook, path)
    return seconds


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    paths = [Path(p).resolve() for p in sys.argv[1:]] or sorted(here.glob("[0-9][0-9]*_*.ipynb"))
    for path in paths:
        print(f"{path.name}: {store_outputs(path):.1f} s")
