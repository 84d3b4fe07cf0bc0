"""Notebook runs under nbval: the Triton cells of 12b (and its Chinese twin) skip, visibly, when triton is absent.

triton is an optional extra (``pip install -e ".[triton]"``), and the README's ``pip install -r requirements.txt``
does not install it. The stored outputs of 12b are those of a run with triton; without it those cells would print
something else and strict nbval would fail them. So every cell that runs a Triton kernel carries the cell tag
``needs-triton``; when ``importlib.util.find_spec("triton")`` is None each such cell's nbval item is marked
skipped with the reason below (``-ra`` in pyproject's addopts lists it in the summary, and a line at the end of the
run counts them). With triton installed the tag does nothing: the cells run and their outputs are compared.
``tests/test_triton_notebook_tags.py`` fails when a cell that needs triton lacks the tag.

Kernels talk over Unix sockets (``ipc``), not TCP ports, where the OS has them. A TCP kernel is given ports that
jupyter_client found free and released; when another process (the other xdist worker, a JupyterHub or Chromium in
the browser tests) takes one before the kernel binds it, the kernel exits at start ("Kernel died before replying to
kernel_info"; jupyter/jupyter_client#154, treebeardtech/nbmake#129). It happened once in a full run here. Unix
sockets in a private temporary directory cannot collide.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile

import nbval.kernel
import pytest
from traitlets import CaselessStrEnum

NEEDS_TRITON_TAG = "needs-triton"
SKIP_REASON = "triton not installed (pip install -e '.[triton]')"


class IpcKernelManager(nbval.kernel.KernelManager):
    """nbval's kernel manager with the kernel's five channels on Unix sockets in a fresh temporary directory."""

    transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

    def _ip_default(self) -> str:
        # a short path: a Unix socket's path is limited to ~107 bytes, and the runtime dir under $HOME may be long
        return os.path.join(tempfile.mkdtemp(prefix="nbval-"), "kernel")

    async def _async_cleanup_resources(self, restart: bool = False) -> None:  # what shutdown_kernel awaits
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            try:
                os.rmdir(os.path.dirname(self.ip))
            except OSError:
                pass  # not empty (a socket jupyter_client did not write) or already gone: leave it to the OS


if os.name == "posix":  # Windows has no ipc transport: it keeps TCP
    nbval.kernel.KernelManager = IpcKernelManager


def triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def cell_tags(item: pytest.Item) -> list[str]:
    """The notebook cell's tags for an nbval item; [] for any other item."""
    cell = getattr(item, "cell", None)
    if cell is None:
        return []
    return list(cell.get("metadata", {}).get("tags", []))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if triton_installed():
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if NEEDS_TRITON_TAG in cell_tags(item):
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    skipped = [report for report in terminalreporter.stats.get("skipped", []) if SKIP_REASON in str(report.longrepr)]
    if skipped:
        terminalreporter.write_line(
            f"{len(skipped)} notebook cells tagged {NEEDS_TRITON_TAG!r} skipped: {SKIP_REASON}", yellow=True
        )
