"""Fixtures for the browser tests: one real JupyterLab server and one headless Chromium per session.

Why a real Lab and a real browser: an explorer can pass every Python test and still show a
blank output in JupyterLab (the widget manager, the comm round trip and the PNG blob all live
in the browser). These fixtures start exactly what a learner runs, on a throwaway copy of the
notebooks so autosave never touches the real files.

The browser itself is the session fixture ``browser`` of tests/conftest.py (shared with the
slides test): Playwright for Python and a Chromium at ``/usr/bin/chromium`` (override with
``ATTN_E2E_CHROMIUM``). Without them every test here is skipped, unless the ``CI`` environment
variable is set: then a missing browser is a failure, so CI cannot go green by silently skipping.

Slider-to-settled-image latencies collected by the tests are printed at the end of the session
and, when ``ATTN_E2E_REPORT`` names a file, written there as JSON.
"""

from __future__ import annotations

import json
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVER_START_TIMEOUT_S = 120  # a cold `jupyter lab` takes ~7 s here; the machine is shared
SERVER_STOP_TIMEOUT_S = 30

RECORDS = pytest.StashKey[list]()
SESSION_START = pytest.StashKey[float]()

# Settings written into the isolated JUPYTERLAB_SETTINGS_DIR: no "news" toast over the notebook
# (it can cover the explorer in failure screenshots) and no update check (there is no network).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: drives a real JupyterLab in headless Chromium (deselect: -m 'not e2e')")
    config.stash[RECORDS] = []
    config.stash[SESSION_START] = time.monotonic()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.e2e)


# --------------------------------------------------------------------------------------- server


@dataclass
class Lab:
    """A running JupyterLab: its base URL, token, served folder and process."""

    url: str
    token: str
    root: Path
    process: subprocess.Popen
    log: Path
    notebooks: Path = field(init=False)

    def __post_init__(self) -> None:
        self.notebooks = self.root / "notebooks"

    def api(self, method: str, path: str, timeout: float = 10):
        """Call the Jupyter REST API (token auth); return the decoded JSON, or None for no body."""
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def page_url(self, notebook: str) -> str:
        """URL opening ``notebooks/<notebook>`` alone in Lab; the token in the query logs the browser in.

        Each notebook gets its own, reset workspace: with the default one Lab would reopen the
        previous test's notebook in a second tab and start (and fight over) another kernel.
        """
        workspace = re.sub(r"[^A-Za-z0-9_-]", "-", Path(notebook).stem)
        return f"{self.url}/lab/workspaces/e2e-{workspace}/tree/notebooks/{notebook}?reset&token={self.token}"

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def shutdown_kernels(self) -> None:
        """Delete every session (and so its kernel): a finished notebook must not keep a CPU busy."""
        try:
            for session in self.api("GET", "/api/sessions"):
                self.api("DELETE", f"/api/sessions/{session['id']}")
        except (urllib.error.URLError, OSError):
            pass  # best effort; stop_lab ends them all anyway


def free_port() -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def copy_notebooks(root: Path) -> None:
    """Copy notebooks/ and images/ side by side: the notebooks embed ``../images/*.png``."""
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "saved_figures", "__pycache__")
    shutil.copytree(REPO / "notebooks", root / "notebooks", ignore=ignore)
    if (REPO / "images").is_dir():
        shutil.copytree(REPO / "images", root / "images", ignore=ignore)


def start_lab(workdir: Path) -> Lab:
    """Start ``jupyter lab`` on 127.0.0.1 serving a copy of the notebooks; return once /api/status answers.

    Every JUPYTER_* directory is a fresh one under ``workdir``, so the user's config, settings,
    workspaces and runtime files neither influence the test nor get written to.
    """
    root = workdir / "root"
    root.mkdir()
    copy_notebooks(root)
    dirs = {name: workdir / name.lower() for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR")}
    dirs |= {name: workdir / name.lower() for name in ("JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR")}
    for path in dirs.values():
        path.mkdir()
    for name, settings in LAB_SETTINGS.items():
        target = dirs["JUPYTERLAB_SETTINGS_DIR"] / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(settings))
    env = {**os.environ, **{name: str(path) for name, path in dirs.items()}}
    env.pop("JUPYTER_TOKEN", None)
    token, port = secrets.token_hex(24), free_port()
    command = [
        sys.executable,  # the interpreter running pytest: its jupyterlab, its kernel, its attn_core
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # jupyter refuses to start as root without it
    log = workdir / "jupyter-lab.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=root)
    lab = Lab(url=f"http://127.0.0.1:{port}", token=token, root=root, process=process, log=log)
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {process.returncode}:\n{lab.log_tail()}")
        try:
            lab.api("GET", "/api/status", timeout=2)
            return lab
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            stop_lab(lab)
            raise RuntimeError(f"jupyter lab did not answer within {SERVER_START_TIMEOUT_S} s:\n{lab.log_tail()}")
        time.sleep(0.25)


def stop_lab(lab: Lab) -> None:
    """SIGTERM the server (it shuts its kernels down itself) and wait; kill only if it hangs."""
    if lab.process.poll() is not None:
        return
    lab.process.send_signal(signal.SIGTERM)
    try:
        lab.process.wait(timeout=SERVER_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        lab.process.kill()
        lab.process.wait(timeout=10)


@pytest.fixture(scope="session")
def lab(browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One JupyterLab for the whole session (starting one costs seconds; kernels are per notebook)."""
    server = start_lab(tmp_path_factory.mktemp("lab"))
    try:
        yield server
    finally:
        stop_lab(server)


# -------------------------------------------------------------------------------------- browser


# A laptop-sized window by default; tests/e2e/test_lab_widgets.py also runs explorers in a narrow (phone-wide,
# or a VS Code notebook beside the Explorer and a terminal) and a wide window, through ``indirect`` parametrization.
VIEWPORTS = {"laptop": (1400, 1000), "narrow": (420, 900), "wide": (1920, 1080)}


@pytest.fixture
def page(browser, lab: Lab, request: pytest.FixtureRequest):
    """A fresh page (own cookies, no shared state); afterwards its kernels are shut down.

    Its window is ``VIEWPORTS["laptop"]`` unless the test parametrizes ``page`` indirectly with a VIEWPORTS key.
    """
    width, height = VIEWPORTS[getattr(request, "param", "laptop")]
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(30_000)  # bounded: no Playwright call may wait forever
    try:
        yield context.new_page()
    finally:
        context.close()
        lab.shutdown_kernels()


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where failure screenshots go (pytest's temp tree; the path is printed in the failure)."""
    return tmp_path_factory.mktemp("e2e-screenshots")


@pytest.fixture
def latency_log(request: pytest.FixtureRequest) -> list:
    """Session-wide list the tests append one dict per measured control change to."""
    return request.config.stash[RECORDS]


# -------------------------------------------------------------------------------------- report


def summarize(records: list[dict]) -> dict:
    """Medians of change-to-settled-image latency, per notebook and over the session, per control kind."""
    summary: dict = {"median_ms": {}, "per_notebook": {}}
    for kind in sorted({record["kind"] for record in records}):
        values = [record["settled_ms"] for record in records if record["kind"] == kind]
        summary["median_ms"][kind] = round(statistics.median(values), 1)
        summary["median_ms"][f"{kind}_n"] = len(values)
    for notebook in dict.fromkeys(record["notebook"] for record in records):
        mine = [record for record in records if record["notebook"] == notebook]
        summary["per_notebook"][notebook] = {
            kind: round(statistics.median(r["settled_ms"] for r in mine if r["kind"] == kind), 1)
            for kind in sorted({r["kind"] for r in mine})
        }
    return summary


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the latency report where ``ATTN_E2E_REPORT`` says; here, not in the terminal summary, because under
    pytest-xdist the worker that ran these tests is not the process that prints the summary."""
    records = session.config.stash.get(RECORDS, [])
    target = os.environ.get("ATTN_E2E_REPORT")
    if not (records and target):
        return
    report = {
        "what": "ms from a control change (keydown / change event, browser clock) to the last image src "
        "update, confirmed by 0.5 s without change while the kernel is idle",
        "session_wall_s": round(time.monotonic() - session.config.stash[SESSION_START], 1),
        "exit_status": int(exitstatus),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        **summarize(records),
        "records": records,
    }
    Path(target).write_text(json.dumps(report, indent=2) + "\n")


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    records = config.stash.get(RECORDS, [])
    if not records:
        return
    summary = summarize(records)
    wall_s = time.monotonic() - config.stash[SESSION_START]
    write = terminalreporter.write_line
    terminalreporter.section("explorer latency in JupyterLab (control change -> settled image)")
    for notebook, medians in summary["per_notebook"].items():
        write(f"{notebook:48s} " + "  ".join(f"{kind} {ms:7.0f} ms" for kind, ms in medians.items()))
    overall = summary["median_ms"]
    write(
        "median over the suite: "
        + ", ".join(
            f"{kind} {overall[kind]:.0f} ms (n={overall[f'{kind}_n']})"
            for kind in ("slider", "dropdown")
            if kind in overall
        )
        + f"; session wall time {wall_s:.1f} s"
    )
    if os.environ.get("ATTN_E2E_REPORT"):
        write(f"latency report written to {os.environ['ATTN_E2E_REPORT']}")
