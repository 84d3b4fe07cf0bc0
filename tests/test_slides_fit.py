"""The lecture decks fit a projector: at 1280×720 no slide is cut off at the right and only a listed few scroll.

Each deck of the curated lectures (01–05, 06b, 09b, 12c, 12d, English and Chinese) is built with slides/build.py
and opened in headless Chromium at 1280×720 with every non-file request aborted. Every slide
(``Reveal.getSlides()``) is shown in turn, all its fragments revealed, and measured in layout pixels (reveal.js
scales the whole slide with one transform, so layout sizes compare directly with the configured slide size):

- **too wide**: the slide's content is wider than the slide, or an element that clips or scrolls horizontally (a
  code block, an output ``<pre>``, a table) holds more than it shows: code cut off at the right;
- **scrolls**: the slide's content is taller than the slide (the template then gives it a vertical scroll bar).

``ALLOWED_TO_SCROLL`` names the slides that may scroll, each with its reason; every other slide must fit.
Run as a script to print the numbers of any decks: ``python tests/test_slides_fit.py notebooks/12d_*.ipynb``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VIEWPORT = {"width": 1280, "height": 720}
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
REVEAL = "require('vendor/reveal.js/dist/reveal.js')"

# The decks curated as lectures (issue #36 §2).
LECTURES = [
    "01_scaled_dot_product_attention",
    "02_multi_head_attention",
    "03_multi_query_attention",
    "04_grouped_query_attention",
    "05_masks_and_dropout",
    "06b_long_context_rope_scaling",
    "09b_sparse_attention_deepseek",
    "12c_attention_sinks_and_gates",
    "12d_linear_attention_gated_deltanet",
]

# notebook -> {"h/v" (reveal.js slide indices, the same in both languages): why that slide may scroll}. Every other
# slide must fit. A section's opening cell is one markdown cell (heading, prose and its diagram) and is kept whole.
OPENER = "the section's opening cell (prose + diagram) is one markdown cell, kept whole"
ALLOWED_TO_SCROLL: dict[str, dict[str, str]] = {
    "01_scaled_dot_product_attention": {"1/0": OPENER},
    "02_multi_head_attention": {
        "1/0": OPENER,
        "2/1": "the tiny tensors printed in full: the point is to read every number",
        "2/4": "scores of two heads printed side by side, read as one table",
    },
    "04_grouped_query_attention": {
        "1/0": OPENER,
        "9/2": "an exercise: the statement and its stub stay together",
    },
    "05_masks_and_dropout": {"1/0": OPENER, "1/1": "the formula and its three cases in one cell"},
    "06b_long_context_rope_scaling": {
        "2/2": "a four-line printout of the pair bands under its code, 6 px over",
        "8/0": "the band explorer's stored fallback figure and its one-line caption under the section text, 28 px over",
    },
}

# A code cell longer than this shown on a slide is a wall of code: make it `skip`, or tag it slides-output-only
# (the slide then shows its output under its leading one-line comment).
LONG_CODE_LINES = 15
# Every curated deck's slides-output-only cells start with that one-line summary.
SUMMARISED = LECTURES

# One pass over every slide; returns a list of {index, title, width, height, scroll_height, cut: [...]}.
MEASURE_JS = """([width, height]) => {
    const reveal = REVEAL_EXPR;
    const results = [];
    reveal.getSlides().forEach((slide) => {
        const idx = reveal.getIndices(slide);
        reveal.slide(idx.h, idx.v, 1e6);  // the slide, every fragment shown
        slide.querySelectorAll('.fragment').forEach((f) => f.classList.add('visible'));
        const cut = [];
        const boxes = 'pre, code, table, img, .jp-OutputArea-output, .jp-RenderedHTMLCommon, .mjx-chtml';
        slide.querySelectorAll(boxes).forEach((el) => {
            const style = getComputedStyle(el);
            const clips = style.overflowX !== 'visible';
            const over = el.scrollWidth - el.clientWidth;
            if (clips && el.clientWidth > 0 && over > 1) {
                const text = (el.textContent || '').trim().slice(0, 50);
                cut.push(el.tagName.toLowerCase() + ' ' + el.scrollWidth + '>' + el.clientWidth + ': ' + text);
            }
        });
        // content wider than the slide itself (anything that pokes out at the right)
        const left = slide.getBoundingClientRect().left;
        const scale = slide.getBoundingClientRect().width / slide.offsetWidth || 1;
        let widest = 0;
        slide.querySelectorAll('*').forEach((el) => {
            const r = el.getBoundingClientRect();
            const shown = r.width > 0 && getComputedStyle(el).visibility !== 'hidden';
            if (shown) widest = Math.max(widest, (r.right - left) / scale);
        });
        if (widest > width + 1) cut.push('content ' + Math.round(widest) + ' px wide > slide ' + width);
        const heading = slide.querySelector('h1, h2, h3, h4');
        results.push({
            h: idx.h, v: idx.v,
            title: (heading ? heading.textContent : (slide.textContent || '')).trim().replace(/\\s+/g, ' ')
                .replace(/¶$/, '').replace(/^In \\[\\d+\\]: /, '').slice(0, 60),
            scroll_height: slide.scrollHeight,
            cut,
        });
    });
    return results;
}""".replace("REVEAL_EXPR", REVEAL)


def _load_build():
    spec = importlib.util.spec_from_file_location("slides_build", REPO / "slides" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load_build()


def measure(browser, deck: Path) -> tuple[list[dict], list[str]]:
    """Every slide of ``deck`` at 1280×720 offline; returns (slides, network requests that had to be blocked)."""
    blocked: list[str] = []
    context = browser.new_context(viewport=VIEWPORT, offline=True)
    try:
        context.set_default_timeout(30_000)
        page = context.new_page()

        def route(r) -> None:
            if r.request.url.startswith(LOCAL_SCHEMES):
                r.continue_()
            else:
                blocked.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.goto(deck.as_uri())
        page.wait_for_function(f"() => {{ try {{ return {REVEAL}.isReady(); }} catch (e) {{ return false; }} }}")
        page.wait_for_function("() => !window.MathJax || !MathJax.Hub || MathJax.Hub.queue.pending === 0")
        config = page.evaluate(f"[{REVEAL}.getConfig().width, {REVEAL}.getConfig().height]")
        slides = page.evaluate(MEASURE_JS, config)
        for slide in slides:
            slide["scrolls"] = slide["scroll_height"] > config[1] + 1
        return slides, blocked
    finally:
        context.close()


def summary(name: str, slides: list[dict]) -> str:
    wide = [s for s in slides if s["cut"]]
    tall = [s for s in slides if s["scrolls"]]
    return f"{name}: {len(slides)} slides, {len(tall)} scroll, {len(wide)} too wide (code cut at the right)"


@pytest.fixture(scope="module")
def decks(tmp_path_factory: pytest.TempPathFactory, skip_or_fail) -> Path:
    if not build.NODE_MODULES.is_dir() and shutil.which("npm") is None:
        skip_or_fail(f"{build.NODE_MODULES} is missing and there is no npm to run `npm ci`")
    out = tmp_path_factory.mktemp("slides_fit")
    english = [REPO / "notebooks" / f"{stem}.ipynb" for stem in LECTURES]
    chinese = [REPO / "notebooks" / "zh" / f"{stem}.ipynb" for stem in LECTURES]
    build.build(english + chinese, out)
    return out


@pytest.mark.parametrize("stem", [s + suffix for s in LECTURES for suffix in ("", ".zh")])
def test_deck_fits_1280x720(decks: Path, browser, stem: str) -> None:
    slides, blocked = measure(browser, decks / f"{stem}.slides.html")
    print(summary(stem, slides))
    assert not blocked, f"the deck tried the network: {blocked}"
    wide = [f"slide {s['h']}/{s['v']} {s['title']!r}: {s['cut'][:3]}" for s in slides if s["cut"]]
    assert not wide, f"{stem}: content wider than the slide:\n" + "\n".join(wide)
    allowed = ALLOWED_TO_SCROLL.get(stem.removesuffix(".zh"), {})
    tall = [s for s in slides if s["scrolls"] and f"{s['h']}/{s['v']}" not in allowed]
    assert not tall, f"{stem}: slides taller than 720 px:\n" + "\n".join(
        f"slide {s['h']}/{s['v']} {s['title']!r}: {s['scroll_height']} px" for s in tall
    )


def code_cells_on_slides(stem: str) -> list[tuple[int, list[str], str]]:
    """(index, tags, source) of every code cell of ``stem`` that a deck shows (not ``skip``)."""
    notebook = json.loads((REPO / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    return [
        (index, cell["metadata"].get("tags", []), "".join(cell["source"]))
        for index, cell in enumerate(notebook["cells"])
        if cell["cell_type"] == "code" and cell["metadata"].get("slideshow", {}).get("slide_type") != "skip"
    ]


@pytest.mark.parametrize("stem", LECTURES)
def test_no_long_code_on_a_slide(stem: str) -> None:
    long = [
        f"cell {index}: {len(source.splitlines())} lines"
        for index, tags, source in code_cells_on_slides(stem)
        if build.OUTPUT_ONLY_TAG not in tags and len(source.splitlines()) > LONG_CODE_LINES
    ]
    assert not long, f"{stem}: code longer than {LONG_CODE_LINES} lines on a slide (skip it or tag it): {long}"


@pytest.mark.parametrize("stem", SUMMARISED)
def test_output_only_cells_say_what_their_code_does(stem: str) -> None:
    bare = [
        f"cell {index}"
        for index, tags, source in code_cells_on_slides(stem)
        if build.OUTPUT_ONLY_TAG in tags and not build.leading_comment(source)
    ]
    assert not bare, f"{stem}: slides-output-only cells without a leading one-line comment: {bare}"


def main(argv: list[str]) -> int:
    """Print the numbers for the given notebooks (default: the lectures), built into /tmp/slides_fit."""
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(REPO / "tests"))
    from conftest import CHROMIUM, CHROMIUM_ARGS

    notebooks = [Path(a).resolve() for a in argv] or [REPO / "notebooks" / f"{s}.ipynb" for s in LECTURES]
    out = Path(os.environ.get("SLIDES_FIT_OUT", "/tmp/slides_fit"))
    paths = build.build(notebooks, out)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        for deck in paths:
            slides, _ = measure(browser, deck)
            print(summary(deck.name, slides))
            for s in slides:
                if s["cut"] or s["scrolls"]:
                    tall = f"scroll {s['scroll_height']} px " if s["scrolls"] else ""
                    flags = tall + ("CUT " if s["cut"] else "")
                    print(f"   {s['h']}/{s['v']} {flags}{s['title']!r} {s['cut'][:1]}")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
