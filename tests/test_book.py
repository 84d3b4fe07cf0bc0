"""The book (book/build.py) opens offline: pages of both languages in headless Chromium, every request that leaves
the local server aborted.

Every page, read as HTML (no browser: a second each): every script, style sheet, image and link it loads is a file
of the site (nothing from the network, nothing missing), a page with formulas loads the bundled MathJax, every
solution's code sits in a closed "Show solution" fold, every explorer cell carries its fallback image.

In Chromium, per page: 0 failed requests, MathJax typesets (no raw ``$$`` or ``\\frac`` left on screen), no
solution visible on load, every explorer cell shows its stored fallback figure. ``pytest`` opens SAMPLE (the
landing pages and a formula-, explorer- and solution-heavy page per language); every page is opened under the
``slow`` marker (the scheduled run: ``pytest -m slow tests/test_book.py``). Across pages: the language switch lands
on the twin, and the search finds "YaRN" (English) and "注意力汇聚点" (Chinese).

The site is built once per session by ``python book/build.py`` unless book/_build/html is newer than every
notebook and every file of book/ (about two minutes on two cores). Browser policy as in tests/e2e/conftest.py:
without Playwright or Chromium these tests skip, unless ``CI`` is set: then they fail.
"""

from __future__ import annotations

import functools
import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HTML = REPO / "book" / "_build" / "html"
WIDGET = "application/vnd.jupyter.widget-view+json"
TIMEOUT_MS = 120_000  # a long Chinese page typesets in ~3 s here, ten times that on a loaded shared machine
NOTEBOOKS = {"": REPO / "notebooks", "zh/": REPO / "notebooks" / "zh"}


def series(folder: Path) -> list[Path]:
    return sorted(folder.glob("[0-9][0-9]*.ipynb"))


def page_of(notebook: Path, prefix: str) -> str:
    stem = "index" if notebook.stem == "00_start_here" else notebook.stem
    return f"{prefix}{stem}.html"


def explorer_cells(notebook: Path) -> list[bool]:
    """One entry per cell with a widget, in order: True where its stored fallback is a figure (an explorer), False
    where it is a line of text (a widget that draws nothing, such as 18's timer)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    outputs = [[out.get("data", {}) for out in cell.get("outputs", [])] for cell in cells]
    return [any("image/png" in data for data in outs) for outs in outputs if any(WIDGET in data for data in outs)]


def has_math(notebook: Path) -> bool:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return any(cell["cell_type"] == "markdown" and "$" in "".join(cell["source"]) for cell in cells)


PAGES = [(prefix, nb) for prefix, folder in NOTEBOOKS.items() for nb in series(folder)]
# opened in the browser by every `pytest`: the landing pages, and per language a page with formulas, an explorer and
# hidden solutions (the rest: the static checks below, and the browser under `-m slow`)
SAMPLE = {
    ("", "00_start_here"),
    ("zh/", "00_start_here"),
    ("", "06b_long_context_rope_scaling"),
    ("zh/", "12d_linear_attention_gated_deltanet"),
}
BROWSER_PAGES = [
    pytest.param(prefix, nb, id=page_of(nb, prefix), marks=() if (prefix, nb.stem) in SAMPLE else pytest.mark.slow)
    for prefix, nb in PAGES
]


def _stale() -> bool:
    index = HTML / "index.html"
    if not index.exists():
        return True
    built = index.stat().st_mtime
    sources = [nb for _, nb in PAGES] + [p for p in (REPO / "book").rglob("*") if "_build" not in p.parts]
    return any(p.is_file() and p.stat().st_mtime > built for p in sources)


@pytest.fixture(scope="module")
def site() -> str:
    """The built site served on a local port (search and highlighting fetch pages: file:// would refuse)."""
    if _stale():
        subprocess.run([sys.executable, str(REPO / "book" / "build.py")], check=True, cwd=REPO)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:  # one line per request would bury the test report
            pass

    handler = functools.partial(Quiet, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def page_factory(browser, site):
    """New pages that abort every request outside the local server and record what failed."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)

    def new_page():
        page = context.new_page()
        page.failed = []  # type: ignore[attr-defined]
        page.errors = []  # type: ignore[attr-defined]

        def route(r):
            if r.request.url.startswith(site) or r.request.url.startswith(("data:", "blob:")):
                r.continue_()
            else:
                r.abort()

        page.route("**/*", route)
        page.on("requestfailed", lambda req: page.failed.append(req.url))
        page.on("response", lambda resp: resp.status >= 400 and page.failed.append(f"{resp.status} {resp.url}"))
        page.on("pageerror", lambda err: page.errors.append(str(err)))
        return page

    yield new_page
    context.close()


def open_page(new_page, url: str):
    page = new_page()
    page.goto(url, wait_until="load")
    page.wait_for_function("() => !window.MathJax || (MathJax.startup && MathJax.startup.promise)")
    page.evaluate("() => window.MathJax && MathJax.startup.promise")  # typesetting done
    page.evaluate("() => document.fonts.ready.then(() => true)")  # MathJax's and the theme's fonts fetched
    page.wait_for_function("() => [...document.images].every(img => img.complete)")  # every figure fetched
    return page


def test_the_sample_is_in_the_series():
    assert {(prefix, nb.stem) for prefix, nb in PAGES} >= SAMPLE


@pytest.mark.parametrize(("prefix", "notebook"), PAGES, ids=[page_of(nb, p) for p, nb in PAGES])
def test_page_html_is_offline_with_folded_solutions_and_explorer_figures(site, prefix, notebook):
    from urllib.parse import urlsplit

    from bs4 import BeautifulSoup

    page = HTML / page_of(notebook, prefix)
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    loaded = [tag.get("src") for tag in soup.find_all(["script", "img"])] + [
        tag.get("href") for tag in soup.find_all("link") if "stylesheet" in (tag.get("rel") or []) or tag.get("as")
    ]
    for url in filter(None, loaded):
        if url.startswith("data:"):
            continue
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc, f"{page.name} loads {url} from the network"
        assert (page.parent / parts.path).resolve().is_file(), f"{page.name} loads {url}: no such file in the site"
    for anchor in soup.find_all("a", href=True):  # links inside the site lead to pages that exist
        parts = urlsplit(anchor["href"])
        if not parts.scheme and parts.path:
            assert (page.parent / parts.path).resolve().exists(), f"{page.name} links to {anchor['href']}"
    if has_math(notebook):
        assert any("mathjax" in (tag.get("src") or "") for tag in soup.find_all("script")), "no bundled MathJax"
    for i, cell in enumerate(soup.select(".cell.tag_solution")):
        fold = cell.select_one("details.hide")
        assert fold is not None and fold.get("open") is None, f"solution {i} not in a closed fold"
        assert cell.select_one(".cell_input").find_parent("details") is fold, f"solution {i}'s code outside its fold"
    explorers = soup.select(".cell.tag_explorer")
    expected = explorer_cells(notebook)
    assert len(explorers) == len(expected)
    for i, (cell, figure) in enumerate(zip(explorers, expected, strict=True)):
        if figure:
            assert cell.select(".cell_output img"), f"explorer {i} has no fallback image"
        else:
            assert cell.select_one(".cell_output").get_text(strip=True), f"widget {i} has no fallback text"


@pytest.mark.parametrize(("prefix", "notebook"), BROWSER_PAGES)
def test_page_loads_offline_typeset_without_solutions_with_explorer_figures(page_factory, site, prefix, notebook):
    page = open_page(page_factory, site + page_of(notebook, prefix))
    try:
        assert page.failed == [], f"failed requests: {page.failed}"
        assert page.errors == [], f"page errors: {page.errors}"
        text = page.inner_text("article")
        assert "$$" not in text and "\\frac" not in text, "raw TeX on screen: MathJax did not typeset the page"
        if has_math(notebook):
            assert page.locator("mjx-container").count() > 0, "no formula typeset"
        solutions = page.locator(".cell.tag_solution")
        for i in range(solutions.count()):
            assert not solutions.nth(i).locator(".cell_input").is_visible(), f"solution {i} visible on load"
        for hidden in page.locator("details.hide").all():
            assert hidden.get_attribute("open") is None
        explorers = page.locator(".cell.tag_explorer")
        expected = explorer_cells(notebook)
        assert explorers.count() == len(expected)
        for i in range(explorers.count()):
            if not expected[i]:  # a widget that draws nothing: its fallback is a line of text
                assert explorers.nth(i).locator(".cell_output").inner_text().strip()
                continue
            figure = explorers.nth(i).locator(".cell_output img")
            assert figure.count() >= 1, f"explorer {i} shows no fallback figure"
            assert figure.first.is_visible()
            assert figure.first.evaluate("img => img.complete && img.naturalWidth > 0")
    finally:
        page.close()


@pytest.mark.parametrize(("prefix", "twin"), [("", "zh/"), ("zh/", "")])
def test_language_switch_lands_on_the_twin(page_factory, site, prefix, twin):
    for notebook in (series(NOTEBOOKS[prefix])[0], series(NOTEBOOKS[prefix])[6]):
        page = open_page(page_factory, site + page_of(notebook, prefix))
        try:
            page.click("p.lang-switch a")
            page.wait_for_url(site + page_of(notebook, twin), wait_until="commit")  # raises if it lands elsewhere
            assert page.failed == []
        finally:
            page.close()


@pytest.mark.parametrize(("prefix", "query", "expected"), [("", "YaRN", "06b"), ("zh/", "注意力汇聚点", "12c")])
def test_search_finds(page_factory, site, prefix, query, expected):
    page = open_page(page_factory, f"{site}{prefix}search.html?q={query}")
    try:
        results = page.locator("#search-results ul.search li a")
        results.first.wait_for()
        hrefs = [a.get_attribute("href") for a in results.all()]
        assert any(expected in href for href in hrefs), hrefs
        assert page.failed == []
    finally:
        page.close()
