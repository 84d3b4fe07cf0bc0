"""Shared test configuration: hypothesis profiles, a headless matplotlib backend, one torch thread.

Profiles: ``ci`` (200 examples per property) is selected when the ``CI`` environment variable is
set, otherwise ``dev`` (50 examples). ``HYPOTHESIS_PROFILE`` overrides both. Deadlines are off:
the first call of a torch op can be slow, and a timing limit would only add flakiness.
"""

import os
from pathlib import Path

# Before anything imports triton (torch._dynamo and transformers' model modules do): ac.triton_attention's CPU tests
# run on Triton's interpreter, which must be chosen before triton's first import in each test process.
os.environ.setdefault("TRITON_INTERPRET", "1")

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# The tensors in these tests are tiny; intra-op threads only add overhead. Measured with CI=1 on a
# 2-core machine: about 5-8 s of test time with one thread against 22-34 s with the default two.
torch.set_num_threads(1)

settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "dev",
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


# ----------------------------------------------------------------------------- browser tests
# tests/e2e (JupyterLab) and tests/test_slides.py (offline decks) drive Debian's Chromium
# through Playwright. They share ONE session-scoped browser: a second sync Playwright cannot
# start while another runs in the same thread.
CHROMIUM = Path(os.environ.get("ATTN_E2E_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def _skip_or_fail(reason: str) -> None:
    """Skip on a learner's machine; under CI (``CI`` set) a missing tool fails, so CI cannot go
    green by silently skipping."""
    if os.environ.get("CI"):
        pytest.fail(f"CI is set, so this must run, but: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def skip_or_fail():
    return _skip_or_fail


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the session (never `playwright install`: Debian's package)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as err:
        _skip_or_fail(f"Playwright for Python is not importable ({err}); pip install playwright")
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        _skip_or_fail(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set ATTN_E2E_CHROMIUM)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


# ----------------------------------------------------------------------------- the real decoder
# The Gemma 3 test modules (tests/test_gemma3*.py) share these; module scope, as before, so no test module sees
# what another did to the model.
@pytest.fixture(scope="module")
def lm():
    """Gemma 3 270M in our layers (the packaged GGUF, converted once into the cache)."""
    import attn_core as ac

    return ac.load_gemma3()


@pytest.fixture(scope="module")
def hf(lm):
    """Hugging Face's ``Gemma3ForCausalLM`` (eager) built on the same tensors."""
    from attn_core.models.gemma3_reference import hugging_face_gemma3

    return hugging_face_gemma3(lm)


# ----------------------------------------------------------------------------- Chinese edition audit
# Every exercise verdict printed in this session is also looked up in attn_core's Chinese catalogs; the
# untranslated ones go to build/zh_untranslated.txt and fail the session (unless ATTN_ZH_STRICT=0; tests/zh_audit.py).
from zh_audit import pytest_sessionfinish, pytest_terminal_summary, pytest_testnodedown  # noqa: E402, F401
