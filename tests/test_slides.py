"""The reveal.js decks open offline: one deck is built with slides/build.py and opened from disk with the network off.

``nbconvert --to slides`` alone loads reveal.js, require.js, jQuery and MathJax from CDNs; slides/build.py
vendors them from npm (pinned in slides/package-lock.json). These tests build notebook 01's deck into a
temporary folder and check that (1) no ``<script src>``/``<link href>`` names http(s), (2) the vendored files
sit next to the deck, (3) headless Chromium, with every non-file request aborted, starts the deck, moves to
the next slide without a page error and typesets the LaTeX with MathJax.

The first build runs ``npm ci`` when slides/node_modules is missing (a few seconds; needs the npm registry).
Browser policy as in tests/e2e/conftest.py: without Playwright or /usr/bin/chromium the browser test is
skipped, unless ``CI`` is set: then it fails, so CI cannot go green by skipping.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "01_scaled_dot_product_attention.ipynb"
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


def _load_build():
    spec = importlib.util.spec_from_file_location("slides_build", REPO / "slides" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load_build()


class _Refs(HTMLParser):
    """Collects every ``<script src>`` and ``<link href>`` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = {"script": "src", "link": "href"}.get(tag)
        self.refs += [value or "" for name, value in attrs if name == wanted]


def script_and_link_refs(html: str) -> list[str]:
    parser = _Refs()
    parser.feed(html)
    return parser.refs


@pytest.fixture(scope="module")
def deck(tmp_path_factory: pytest.TempPathFactory, skip_or_fail) -> Path:
    """Notebook 01's deck, built by slides/build.py into a fresh folder (``npm ci`` first if needed)."""
    if not build.NODE_MODULES.is_dir() and shutil.which("npm") is None:
        skip_or_fail(f"{build.NODE_MODULES} is missing and there is no npm to run `npm ci`")
    out = tmp_path_factory.mktemp("slides")
    npm_s = build.ensure_node_modules()
    start = time.perf_counter()
    (path,) = build.build([NOTEBOOK], out)
    print(f"npm ci {npm_s:.1f} s (0 = already installed); deck built in {time.perf_counter() - start:.1f} s")
    return path


def test_deck_references_nothing_remote(deck: Path) -> None:
    html = deck.read_text(encoding="utf-8")
    refs = script_and_link_refs(html)
    remote = [ref for ref in refs if re.match(r"\s*(https?:)?//", ref, re.IGNORECASE)]
    assert not remote, f"the deck loads from the network: {remote}"
    # the four libraries are there, relative
    for url in build.URLS.values():
        assert any(ref.startswith(url) for ref in refs) or f'"{url}/dist/reveal.js"' in html, url
    assert not build.remote_references(html)
    assert 'class="reveal"' in html and html.count("<section") > 5


def test_vendored_files_exist(deck: Path) -> None:
    vendor = deck.parent / "vendor"
    for package, items in build.VENDOR.items():
        for item in items:
            assert (vendor / package / item).exists(), f"missing vendor/{package}/{item}"
    for url in ["vendor/reveal.js/dist/reveal.js", "vendor/reveal.js/plugin/notes/notes.js", *build.URLS.values()]:
        target = deck.parent / url.split("?")[0]
        assert target.is_file() or (target / "dist" / "reveal.css").is_file(), url
    for css in vendor.rglob("*.css"):  # a stylesheet may not pull fonts from the network either
        assert not re.search(r"@import\s+url\(\s*['\"]?https?:", css.read_text(errors="replace")), css


def test_remote_references_detects_cdn_loaders() -> None:
    assert build.remote_references('<script src="https://cdn.example/x.js"></script>')
    assert build.remote_references("<link rel='stylesheet' href='//cdn.example/x.css'>")
    assert build.remote_references("<script type='module'>import m from 'https://cdn.example/m.mjs';</script>")
    assert build.remote_references(
        "<script>var src = 'https://unpkg.com/@jupyter-widgets/x@*/dist/embed-amd.js';</script>"
    )
    assert not build.remote_references('<script type="application/json">{"u": "https://x/y.js"}</script>')
    assert not build.remote_references('<script src="vendor/requirejs/require.js"></script><a href="https://x">x</a>')


def test_deck_opens_offline_in_chromium(deck: Path, browser) -> None:
    blocked: list[str] = []
    failed: list[str] = []
    errors: list[str] = []

    def route(r) -> None:
        if r.request.url.startswith(LOCAL_SCHEMES):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context = browser.new_context(viewport={"width": 1280, "height": 800}, offline=True)
    try:
        context.set_default_timeout(20_000)
        page = context.new_page()
        page.route("**/*", route)
        page.on("pageerror", lambda err: errors.append(f"pageerror: {err}"))
        page.on("console", lambda msg: msg.type == "error" and errors.append(f"console: {msg.text}"))
        page.on("requestfailed", lambda req: req.url.startswith("file:") and failed.append(req.url))
        page.goto(deck.as_uri())
        # Reveal is an AMD module here (require.js is on the page), so ask require.js for it.
        reveal = "require('vendor/reveal.js/dist/reveal.js')"
        page.wait_for_function(f"() => {{ try {{ return {reveal}.isReady(); }} catch (e) {{ return false; }} }}")
        assert page.evaluate(f"{reveal}.getTotalSlides()") > 1
        assert page.locator(".reveal .slides section").count() > 1
        before = page.evaluate(f"{reveal}.getCurrentSlide().id || {reveal}.getIndices().h")
        page.keyboard.press("ArrowRight")  # reveal.js 4: the next horizontal slide
        page.wait_for_function(
            f"before => ({reveal}.getCurrentSlide().id || {reveal}.getIndices().h) !== before", arg=before
        )
        # MathJax 2 typesets the whole deck on load; the template calls MathJax.Hub on every slide change.
        page.wait_for_function(
            "() => window.MathJax && MathJax.Hub && document.querySelectorAll('.reveal .mjx-chtml').length > 0"
        )
        math_slide = page.evaluate(
            f"""() => {{
                    const math = document.querySelector('.reveal .slides .mjx-chtml');
                    const slide = math.closest('section section') || math.closest('section');
                    const indices = {reveal}.getIndices(slide);
                    {reveal}.slide(indices.h, indices.v);
                    return indices;
                }}"""
        )
        page.wait_for_timeout(500)  # the slide transition and MathJax's re-render on slidechanged
        box = page.locator("section.present .mjx-chtml").first.bounding_box()
        assert box and box["width"] > 0 and box["height"] > 0, f"LaTeX on slide {math_slide} is not rendered"
    finally:
        context.close()

    assert not errors, f"errors while presenting offline: {errors}"
    assert not failed, f"vendored files the deck asked for but vendor/ lacks: {failed}"
    assert not blocked, f"the deck tried the network (blocked): {blocked}"


# ----------------------------------------------------------------------------- the Chinese edition's decks
ZH_NOTEBOOK = REPO / "notebooks" / "zh" / "00_start_here.ipynb"


@pytest.fixture(scope="module")
def zh_deck(tmp_path_factory: pytest.TempPathFactory, skip_or_fail) -> Path:
    """The Chinese 00 deck (notebooks/zh/, generated by notebooks/zh/build.py), built like the English ones."""
    if not build.NODE_MODULES.is_dir() and shutil.which("npm") is None:
        skip_or_fail(f"{build.NODE_MODULES} is missing and there is no npm to run `npm ci`")
    (path,) = build.build([ZH_NOTEBOOK], tmp_path_factory.mktemp("slides_zh"))
    return path


def test_zh_deck_is_chinese_offline_and_has_its_images(zh_deck: Path) -> None:
    assert zh_deck.name == "00_start_here.zh.slides.html"  # next to the English deck, sharing vendor/
    html = zh_deck.read_text(encoding="utf-8")
    assert '<html lang="zh">' in html and "<title>00_start_here（中文版） slides</title>" in html
    assert "如何使用探索器" in html and "交互探索器：请在 JupyterLab 中运行" in html
    assert "../../images/" not in html and html.count("data:image/png;base64,") >= 2  # notebooks/zh -> images/
    assert not build.remote_references(html)
    assert not [ref for ref in script_and_link_refs(html) if re.match(r"\s*(https?:)?//", ref, re.IGNORECASE)]
    assert build.default_notebooks(zh=True)[0] == ZH_NOTEBOOK


def test_zh_deck_opens_offline_in_chromium(zh_deck: Path, browser) -> None:
    blocked: list[str] = []
    errors: list[str] = []
    context = browser.new_context(viewport={"width": 1280, "height": 800}, offline=True)
    try:
        context.set_default_timeout(20_000)
        page = context.new_page()
        page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(LOCAL_SCHEMES) else r.abort())
        page.on("request", lambda req: req.url.startswith(LOCAL_SCHEMES) or blocked.append(req.url))
        page.on("pageerror", lambda err: errors.append(f"pageerror: {err}"))
        page.goto(zh_deck.as_uri())
        reveal = "require('vendor/reveal.js/dist/reveal.js')"
        page.wait_for_function(f"() => {{ try {{ return {reveal}.isReady(); }} catch (e) {{ return false; }} }}")
        assert page.evaluate(f"{reveal}.getTotalSlides()") > 5
        assert "注意力" in page.locator(".reveal .slides section").first.inner_text()
    finally:
        context.close()
    assert not errors and not blocked, (errors, blocked)


def test_output_only_cell_shows_its_one_line_summary_not_its_code() -> None:
    """A cell tagged ``slides-output-only`` shows its leading comment and its output; its code stays in the notebook."""
    import nbformat

    tags = {"tags": [build.OUTPUT_ONLY_TAG]}
    summarised = nbformat.v4.new_code_cell(
        "# what the hidden code computes\n# fmt: skip\nhidden_total = 40 + 2\n", metadata=tags
    )
    bare = nbformat.v4.new_code_cell("bare_total = 6 * 7\n", metadata=tags)
    shown = nbformat.v4.new_code_cell("# a plain cell\nshown_total = 1 + 1\n")
    for cell in (summarised, bare, shown):
        cell.outputs = [nbformat.v4.new_output("stream", text="the output 42\n")]
    notebook = nbformat.v4.new_notebook(cells=[summarised, bare, shown])
    html, _ = build.exporter().from_notebook_node(notebook)
    assert "what the hidden code computes" in html
    assert "hidden_total" not in html and "fmt: skip" not in html
    assert "bare_total" not in html
    assert "shown_total" in html and "a plain cell" in html
    assert html.count("the output 42") == 3
