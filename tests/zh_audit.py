"""The Chinese edition's audit of exercise verdicts, as pytest hooks (imported by tests/conftest.py).

Every verdict ``attn_core.exercises.feedback`` prints during the test session (the graders' test tables
exercise every diagnosis) is looked up in attn_core's Chinese catalogs (``attn_core/locale``'s gettext catalog,
and the older ``attn_core/i18n/zh_*.py``). At the end of the session the names and messages without a complete
translation are written to
``build/zh_untranslated.txt`` (one per line, with how often each was printed), and summarised in the terminal.
While any is left the session reports one failed test, ``tests/zh_audit.py::untranslated_verdicts`` (counted
in "N failed", listed in the short summary and in junit XML, exit status 1), unless ``ATTN_ZH_STRICT=0`` (for
work in progress on a new grader; never in CI). An ordinary test cannot do this: it would have to run after
all the others (on every xdist worker), so the hook reports the failure as a test report of its own.
"""

from __future__ import annotations

import os

import pytest

from attn_core import i18n

REPORT = "build/zh_untranslated.txt"
AUDIT_NODEID = "tests/zh_audit.py::untranslated_verdicts"
STRICT = os.environ.get("ATTN_ZH_STRICT", "1") == "1"  # strict unless ATTN_ZH_STRICT=0

i18n.start_audit()  # from the moment tests/conftest.py is imported, before any test runs


def _strict_failure() -> bool:
    return STRICT and bool(_missing())


# Under pytest-xdist each worker records its own verdicts: a worker hands them to the controller through
# ``workeroutput`` when it finishes, and the controller (the process that reports) adds them to its own.
_from_workers: dict[str, int] = {}


def _missing() -> dict[str, int]:
    missing = i18n.untranslated()
    for message, count in _from_workers.items():
        missing[message] = missing.get(message, 0) + count
    return missing


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # an xdist hook: called in the controller as a worker ends
    for message, count in getattr(node, "workeroutput", {}).get("zh_untranslated", {}).items():
        _from_workers[message] = _from_workers.get(message, 0) + count


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    missing = _missing()
    if hasattr(session.config, "workeroutput"):  # an xdist worker: the controller reports and fails the session
        session.config.workeroutput["zh_untranslated"] = missing
        return
    if missing:
        path = session.config.rootpath / REPORT
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"{count}\t{message!r}" for message, count in sorted(missing.items())]
        header = f"# {len(missing)} verdict message(s) without Chinese (times printed, message); attn_core/i18n/\n"
        path.write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    if _strict_failure():
        _report_failure(session, missing)
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _report_failure(session: pytest.Session, missing: dict[str, int]) -> None:
    """One failed test report for the audit: counted, listed and exported like any failing test."""
    listed = "\n".join(f"  {message!r}" for message in sorted(missing)[:50])
    longrepr = (
        f"{len(missing)} verdict message(s) printed in this session have no Chinese translation "
        f"(all of them: {REPORT}). Write each with _() and translate it in attn_core/locale/zh_CN/LC_MESSAGES/"
        f"attn_core.po (CONTRIBUTING.md), or for a grader still on the old format in attn_core/i18n/zh_*.py:\n"
        f"{listed}"
    )
    report = pytest.TestReport(
        nodeid=AUDIT_NODEID,
        location=("tests/zh_audit.py", 0, "untranslated_verdicts"),
        keywords={"untranslated_verdicts": 1},
        outcome="failed",
        longrepr=longrepr,
        when="call",
    )
    session.testsfailed += 1
    session.testscollected += 1  # the progress counter then reads 100 %, not 150 %
    session.config.hook.pytest_runtest_logreport(report=report)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    missing = _missing()
    if not missing:
        return
    terminalreporter.section("Chinese edition: untranslated verdicts")
    terminalreporter.write_line(
        f"{len(missing)} verdict message(s) printed in this session have no Chinese translation "
        f"(list: {REPORT}; catalog: attn_core/locale/zh_CN/LC_MESSAGES/attn_core.po)."
    )
    if STRICT:
        for message in sorted(missing)[:50]:
            terminalreporter.write_line(f"  {message!r}")
        terminalreporter.write_line("The session fails while any is left (ATTN_ZH_STRICT=0 relaxes it).", red=True)
    else:
        terminalreporter.write_line("ATTN_ZH_STRICT=0: reported, not a failure.")
