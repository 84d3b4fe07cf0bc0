"""The README's two commands, read from its Quick start block, so CI runs exactly what a new reader runs.

    python tools/readme_commands.py install   ->  pip install -r requirements.txt
    python tools/readme_commands.py launch    ->  jupyter lab
    python tools/readme_commands.py test      ->  pytest

The Quick start block holds two lines: ``INSTALL && LAUNCH`` and ``TEST`` (a ``#`` comment may follow each).
``.ci/run`` evaluates ``install`` and ``test`` as printed and starts ``launch`` to check that it serves, so a change
to the README changes CI with it; tests/test_front_door.py fails if the block stops having that shape.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def quick_start_commands(text: str) -> dict[str, str]:
    """``{"install", "launch", "test"}`` from the first ```bash block under ``## Quick start``."""
    section = text.split("\n## Quick start", 1)
    if len(section) != 2:
        raise ValueError("README.md has no '## Quick start' section")
    block = re.search(r"```bash\n(.*?)```", section[1], flags=re.S)
    if block is None:
        raise ValueError("README.md's Quick start has no ```bash block")
    lines = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    lines = [line for line in lines if line]
    if len(lines) != 2 or lines[0].count("&&") != 1:
        raise ValueError(f"README.md's Quick start must hold 'INSTALL && LAUNCH' and 'TEST', got {lines}")
    install, launch = (part.strip() for part in lines[0].split("&&"))
    return {"install": install, "launch": launch, "test": lines[1]}


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in {"install", "launch", "test"}:
        sys.exit("usage: python tools/readme_commands.py install|launch|test")
    print(quick_start_commands(README.read_text(encoding="utf-8"))[sys.argv[1]])
