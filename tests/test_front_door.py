"""The README's two commands are the front door, and CI runs exactly them, first.

``.ci/run`` does not copy the commands: it reads them from README.md's Quick start block
(``tools/readme_commands.py``) and evaluates them before installing or testing anything else, so editing the
README changes CI with it. These tests fail if that link breaks: the block loses its shape, the Chinese README
says something else, or ``.ci/run`` installs or tests something before the README's commands.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from readme_commands import quick_start_commands  # noqa: E402

CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_readme_quick_start_is_install_launch_and_test():
    commands = quick_start_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert commands == {"install": "pip install -r requirements.txt", "launch": "jupyter lab", "test": "pytest"}


def test_chinese_readme_gives_the_same_two_commands():
    english = quick_start_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    zh = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8").replace("## 快速开始", "## Quick start")
    assert quick_start_commands(zh) == english


def test_the_parser_refuses_a_block_of_another_shape():
    text = "# x\n\n## Quick start\n\n```bash\npip install -r requirements.txt\npytest\n```\n"
    with pytest.raises(ValueError, match="INSTALL && LAUNCH"):
        quick_start_commands(text)


def _commands(script: str) -> list[str]:
    """The script's command lines, comments and heredoc bodies dropped, continuations joined."""
    script = re.sub(r"<<'PY'.*?\nPY\n", "\n", script, flags=re.S).replace("\\\n", " ")
    return [
        line.split(" #", 1)[0].strip()
        for line in script.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def test_ci_runs_the_readme_commands_before_anything_else():
    lines = _commands(CI)
    install = lines.index('if ! eval "$(readme install)" >"$pip_log" 2>&1; then')
    test = lines.index('eval "$(readme test)"')
    assert install < test
    before = lines[:install]
    # nothing Python is installed or tested before the README's install (Chromium and npm come from apt)
    assert not [line for line in before if re.search(r"\bpip\b|\bpytest\b|\bnbval\b|\bruff\b", line)], before
    between = lines[install:test]
    assert not [line for line in between if re.search(r"pip install|\bpytest\b", line)], between
    # the launch half is started too, and the README's test runs before any extra is installed
    assert any(line.startswith("$(readme launch)") for line in between)
    after = lines[test:]
    first_extra = next(i for i, line in enumerate(after) if "pip install" in line)
    assert not [line for line in after[:first_extra] if re.search(r"\bpytest\b", line)]


def test_readme_commands_script_prints_each_command():
    out = [
        subprocess.run(
            [sys.executable, str(ROOT / "tools" / "readme_commands.py"), key],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for key in ("install", "launch", "test")
    ]
    assert out == ["pip install -r requirements.txt", "jupyter lab", "pytest"]
