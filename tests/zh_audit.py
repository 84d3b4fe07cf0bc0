"""The Chinese edition's audit of exercise verdicts, as pytest hooks (imported by tests/conftest.py).

Every verdict ``attn_core.exercises.feedback`` prints during the test session (the graders' test tables
exercise every diagnosis) is looked up in attn_core's Chinese catalogs (``attn_core/i18n/zh_*.py``). At the
end of the session the names and messages without a complete translation are written to
``build/zh_untranslated.txt`` (one per line, with how often each was printed), and summarised in the terminal.
The session fails (exit status 1) while any is left, unless ``ATTN_ZH_STRICT=0`` (for work in progress on
a new grader; never in CI). A test cannot do this: it would have to run after all the others.
"""

from __future__ import annotations

import os

import pytest

from attn_core import i18n

REPORT = "build/zh_untranslated.txt"
STRICT = os.environ.get("ATTN_ZH_STRICT", "1") == "1"  # strict unless ATTN_ZH_STRICT=0

i18n.start_audit()  # from the moment tests/conftest.py is imported, before any test runs


def _strict_failure() -> bool:
    return STRICT and bool(i18n.untranslated())


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    missing = i18n.untranslated()
    if missing:
        path = session.config.rootpath / REPORT
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"{count}\t{message!r}" for message, count in sorted(missing.items())]
        header = f"# {len(missing)} verdict message(s) without Chinese (times printed, message); attn_core/i18n/\n"
        path.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    if _strict_failure() and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    missing = i18n.untranslated()
    if not missing:
        return
    terminalreporter.section("Chinese edition: untranslated verdicts")
    terminalreporter.write_line(
        f"{len(missing)} verdict message(s) printed in this session have no Chinese translation "
        f"(list: {REPORT}; catalogs: attn_core/i18n/zh_exercises_<topic>.py)."
    )
    if STRICT:
        for message in sorted(missing)[:50]:
            terminalreporter.write_line(f"  {message!r}")
        terminalreporter.write_line("The session fails while any is left (ATTN_ZH_STRICT=0 relaxes it).", red=True)
    else:
        terminalreporter.write_line("ATTN_ZH_STRICT=0: reported, not a failure.")
