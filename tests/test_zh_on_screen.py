"""What a learner sees while running a Chinese notebook is Chinese (issue #21).

Counted over the stored outputs of every notebook in ``notebooks/zh/`` (strict nbval proves they are what the
code prints): each printed line that reads as English prose, that is with three or more English words outside
code (``prose_words``), is a *prose line*, as is every line with Chinese (a translated one); at least 90 % of a
notebook's prose lines contain Chinese, and every
✅/❌ line does. Short labels with numbers (``max |diff|: 1e-16``, ``same as ours? True``), reprs of tensors and
modules, and the text of a Python or torch exception a cell shows on purpose (``RuntimeError: …``, written by
torch, not by this series) are not prose lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
ZH = REPO / "notebooks" / "zh"
NOTEBOOKS = sorted(ZH.glob("[0-9][0-9]*_*.ipynb"))
RATIO = 0.9
NOT_WORDS = {"True", "False", "None", "KiB", "MiB", "GiB", "FLOP", "FLOPs", "GFLOP", "TFLOP", "nan", "inf"}

CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
WORD = re.compile(r"(?<![\w.\\/-])[A-Za-z]{3,}(?![\w(/-])")
EXCEPTION = re.compile(r"(?:^\s*|: )(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Warning|Interrupt)\b:?")  # their text
REPR = re.compile(r"^\s*(?:[(\[<{]|tensor\(|Parameter|[\w.]+\((?:\w+=|\[))")  # tensor, list, module, object reprs


def prose_words(line: str) -> list[str]:
    """The English words of ``line`` outside code: backtick spans, quotes, ``|norms|`` and bracketed groups do not
    count."""
    text = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"|\|[^|\s][^|]{0,20}\|", " ", line)  # code, quotes, |norms|
    previous = None
    while previous != text:  # shapes and lists, innermost first: (B, L, hidden), [3, 4]
        previous, text = text, re.sub(r"\([^()]*\)|\[[^\[\]]*\]", " ", text)
    return [word for word in WORD.findall(text) if word not in NOT_WORDS]


def is_prose(line: str) -> bool:
    return not EXCEPTION.search(line) and not REPR.match(line) and len(prose_words(line)) >= 3


def printed_lines(path: Path) -> list[tuple[str, str]]:
    """``(cell id, line)`` of every line the notebook's code cells printed (stdout and stderr)."""
    lines = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        for output in cell.outputs:
            if output.output_type == "stream":
                lines += [(cell.id, line) for line in output.text.splitlines()]
    return lines


def test_the_prose_rule() -> None:
    assert is_prose("at 8192 tokens the weights would take 4 GiB: why fused kernels never store them")
    assert is_prose("fixed: no mask, no crash")
    for label in [
        "max |diff| vs torch: 1.2e-16",
        "same as ours? True",
        "q (1, 2, 4, 3) | contiguous in memory: False",
        "  (q_proj): Linear(in_features=6, out_features=6, bias=True)",
        "RuntimeError: view size is not compatible with input tensor's size and stride",
        "tensor([[0.5000, 0.5000]])",
        "broadcast 5-D          8    64 MiB   256 MiB",
        "B=3: RuntimeError: The size of tensor a (3) must match the size of tensor b (2)",
    ]:
        assert not is_prose(label), label
    assert CJK.search("修复后：没有掩码，也不会崩溃") and not CJK.search("fixed: no mask")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_printed_prose_is_chinese(path: Path) -> None:
    prose = [(cell, line) for cell, line in printed_lines(path) if CJK.search(line) or is_prose(line)]
    english = [(cell, line) for cell, line in prose if not CJK.search(line)]
    ratio = 1 - len(english) / len(prose) if prose else 1.0
    listed = "\n".join(f"  cell {cell}: {line[:120]}" for cell, line in english[:40])
    assert ratio >= RATIO, (
        f"zh/{path.name}: {len(prose) - len(english)} of {len(prose)} printed prose lines contain Chinese "
        f'({ratio:.0%} < {RATIO:.0%}); translate the printed strings ("strings" in the translation file, '
        f"notebooks/zh/build.py) or move the sentences into markdown:\n{listed}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_every_verdict_line_is_chinese(path: Path) -> None:
    verdicts = [(cell, line) for cell, line in printed_lines(path) if re.match(r"\s*[✅❌]", line)]
    # a verdict with English words must have Chinese; "✅ scale_by_model_dim" (an identifier only) is a label
    english = [f"  cell {cell}: {line[:120]}" for cell, line in verdicts if not CJK.search(line) and prose_words(line)]
    assert not english, f"zh/{path.name}: {len(english)} ✅/❌ line(s) without Chinese:\n" + "\n".join(english)
