"""Build the notebooks as reveal.js slide decks that open offline, from disk.

One command (from the repository root)::

    python slides/build.py                      # every notebooks/NN_*.ipynb
    python slides/build.py notebooks/01_scaled_dot_product_attention.ipynb [...]
    python slides/build.py --out /tmp/decks ...  # another output folder
    python slides/build.py --zh                 # every Chinese notebook, notebooks/zh/NN_*.ipynb -> NN_*.zh.slides.html

How a notebook is marked up as a lecture (slide types, ``slides-output-only``, speaker notes, the fit test):
CONTRIBUTING.md, section "Slides". A cell tagged ``slides-output-only`` shows its output under its leading
``# ...`` comment, its one-line summary, and not its code (``output_only``).

Why this is more than ``jupyter nbconvert --to slides``: the stock decks load reveal.js,
require.js, jQuery and MathJax from CDNs and never start without network. Here the four
libraries come from npm, pinned exactly in ``slides/package.json`` / ``package-lock.json``
(``npm ci`` runs by itself when ``slides/node_modules`` is missing), and only the files a deck
needs are copied to ``<out>/vendor/``. The decks point at that copy through relative URLs
(``SlidesExporter.reveal_url_prefix``, ``HTMLExporter.require_js_url``, ``.jquery_url``,
``.mathjax_url``), so ``<out>`` is self-contained: zip it, open ``<out>/NN_*.slides.html``
from disk, no network. The notebooks' ``../images/*.png`` are inlined as data: URLs.

reveal.js is 4.0.2 because nbconvert 7.x's reveal template is written against that layout
(``dist/reveal.js``, ``dist/reveal.css``, ``dist/theme/<theme>.css``, ``plugin/notes/notes.js``)
and defaults to it on unpkg; MathJax is 2.7.7 because the template calls ``MathJax.Hub``
(MathJax 3 has no Hub) and, without MathJax, every slide change throws "MathJax is not defined".

Two more remote loaders are in nbconvert's template and cannot be pointed at a local file, so a
small template (``slides/templates/offline_reveal``) extends the stock one and empties their
blocks instead of post-processing the HTML: the mermaid ES-module import (no notebook has a
mermaid diagram, and Chromium refuses module scripts from ``file://`` anyway) and the Jupyter
widgets renderer from unpkg (a static deck has no kernel to drive the explorers; they live in
JupyterLab; a widget output becomes a one-line note). After writing, every deck is checked: a
``<script src>``, ``<link href>``, or a quoted http(s) .js/.css URL in inline JavaScript is an error.
"""

from __future__ import annotations

import argparse
import base64
import mimetypes
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

SLIDES = Path(__file__).resolve().parent
REPO = SLIDES.parent
NODE_MODULES = SLIDES / "node_modules"
TEMPLATES = SLIDES / "templates"
TEMPLATE = "offline_reveal"
DEFAULT_OUT = SLIDES / "build"
THEME = "white"
OUTPUT_ONLY_TAG = "slides-output-only"  # cell tag: on a slide, the output under the code's leading comment, no code
SLIDE_SIZE = (1280, 720)  # px, the size reveal.js lays a slide out at before scaling it to the window

# What each deck loads, relative to <out>/vendor/<package>/ and to node_modules/<package>/.
# MathJax 2 loads its config, input/output jax, extensions and fonts on demand from next to
# MathJax.js; these are the ones TeX-AMS_CHTML-full,Safe asks for (the npm package is 71 MB; this copy is about 5 MB).
VENDOR: dict[str, list[str]] = {
    "reveal.js": [
        "dist/reveal.js",
        "dist/reveal.css",
        # white: the one theme whose fonts ship with reveal.js (simple, nbconvert's default, and most
        # others @import Google Fonts over the network)
        "dist/theme/white.css",
        "dist/theme/fonts/source-sans-pro",
        "plugin/notes",
        "LICENSE",
    ],
    "requirejs": ["require.js"],
    "jquery": ["dist/jquery.min.js", "LICENSE.txt"],
    "mathjax": [
        "MathJax.js",
        "config/TeX-AMS_CHTML-full.js",
        "config/Safe.js",
        "config/local",
        "extensions",
        "jax/element",
        "jax/input/TeX",
        "jax/output/CommonHTML",
        "fonts/HTML-CSS/TeX/woff",
        "fonts/HTML-CSS/TeX/otf",
        "localization/en",
        "LICENSE",
    ],
}

# Relative URLs, as seen from a deck in <out>/.
URLS = {
    "reveal_url_prefix": "vendor/reveal.js",
    "require_js_url": "vendor/requirejs/require.js",
    "jquery_url": "vendor/jquery/dist/jquery.min.js",
    "mathjax_url": "vendor/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
}

REMOTE = re.compile(
    r"""<script\b[^>]*\bsrc\s*=\s*["']?\s*(?:https?:)?//"""  # <script src="http(s)://..."> or "//cdn..."
    r"""|<link\b[^>]*\bhref\s*=\s*["']?\s*(?:https?:)?//""",  # <link href="http(s)://...">
    re.IGNORECASE,
)
# Inside inline JavaScript: a quoted remote .js/.mjs/.css URL (an ES-module import, a loader that
# builds <script src> at run time, like nbconvert's widgets renderer). JSON and MathJax-config
# <script type="..."> blocks are data, not code, and are not searched.
INLINE_SCRIPT = re.compile(
    r"""<script\b(?![^>]*\bsrc\s*=)(?![^>]*\btype\s*=\s*["']?(?!text/javascript|module)[^"'\s>])[^>]*>(.*?)</script>""",
    re.IGNORECASE | re.DOTALL,
)
REMOTE_IN_JS = re.compile(r"""["'`](?:https?:)?//[^"'`\s]+?\.(?:m?js|css)\b""", re.IGNORECASE)


def log(message: str) -> None:
    print(f"[slides] {message}", flush=True)


def default_notebooks(zh: bool = False) -> list[Path]:
    """Every numbered notebook of the series, in order (``zh``: the Chinese edition, notebooks/zh/)."""
    return sorted((REPO / "notebooks" / ("zh" if zh else "")).glob("[0-9][0-9]*_*.ipynb"))


def is_chinese(notebook: Path) -> bool:
    """A notebook of the Chinese edition (generated into notebooks/zh/ by notebooks/zh/build.py)."""
    return Path(notebook).resolve().parent == (REPO / "notebooks" / "zh").resolve()


def ensure_node_modules() -> float:
    """Run ``npm ci`` (exact versions from package-lock.json) when a vendored file is missing.

    Returns the seconds it took (0 when nothing had to be installed).
    """
    missing = [f"{package}/{item}" for package, items in VENDOR.items() for item in items]
    missing = [item for item in missing if not (NODE_MODULES / item).exists()]
    if not missing:
        return 0.0
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(f"npm is needed once, to fetch the slide libraries into {NODE_MODULES}")
    log(f"npm ci --prefix {SLIDES.relative_to(REPO)} (missing: {missing[0]}) ...")
    start = time.perf_counter()
    command = [npm, "ci", "--prefix", str(SLIDES), "--no-audit", "--no-fund", "--loglevel=error"]
    result = subprocess.run(command, cwd=SLIDES, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"npm ci failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    seconds = time.perf_counter() - start
    log(f"npm ci took {seconds:.1f} s")
    return seconds


def vendor(out: Path) -> Path:
    """Copy the needed library files into ``<out>/vendor/`` (idempotent); return that folder."""
    target = out / "vendor"
    for package, items in VENDOR.items():
        for item in items:
            source, dest = NODE_MODULES / package / item, target / package / item
            if source.is_dir():
                shutil.copytree(source, dest, dirs_exist_ok=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest)
    return target


def remote_references(html: str) -> list[str]:
    """The places in ``html`` that would load a script or stylesheet over the network."""
    found = [html[m.start() : m.start() + 160].splitlines()[0] for m in REMOTE.finditer(html)]
    for script in INLINE_SCRIPT.finditer(html):
        found += [m.group(0) for m in REMOTE_IN_JS.finditer(script.group(1))]
    return found


IMG_SRC = re.compile(r"""(<img\b[^>]*?\bsrc=)(["'])(?![a-z][a-z0-9+.-]*:|//|#)([^"']+)\2""", re.IGNORECASE)


def embed_local_images(html: str, base: Path) -> str:
    """Inline ``<img src="../images/x.png">`` (relative to the notebook) as data: URLs.

    nbconvert's own ``embed_images`` refuses files outside the notebook's folder, and the series keeps
    its figures in ``images/`` next to ``notebooks/``; inlined, a deck does not depend on where it lies.
    """

    def inline(match: re.Match) -> str:
        path = (base / match.group(3)).resolve()
        if not (path.is_file() and path.is_relative_to(REPO)):
            return match.group(0)
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"{match.group(1)}{match.group(2)}data:{mime};base64,{data}{match.group(2)}"

    return IMG_SRC.sub(inline, html)


def leading_comment(source: str) -> str:
    """The comment lines a code cell starts with (its one-line summary), without tool directives; '' if none."""
    lines = []
    for line in source.splitlines():
        if not line.startswith("#"):
            break
        if not re.match(r"#\s*(fmt|noqa|type|ruff|pragma)\b", line):
            lines.append(line)
    return "\n".join(lines)


def output_only(cell) -> None:
    """A cell tagged ``slides-output-only`` shows its output on a slide, under its one-line summary.

    The summary is the cell's leading ``# ...`` comment (the Chinese edition translates it with the other comments):
    the slide says what the hidden code does instead of showing it. Without one the code is left out entirely.
    """
    if cell.cell_type != "code" or OUTPUT_ONLY_TAG not in cell.get("metadata", {}).get("tags", []):
        return
    summary = leading_comment(cell.source)
    if summary:
        cell.source = summary
    else:
        cell.metadata["transient"] = {"remove_source": True}  # as nbconvert's TagRemovePreprocessor hides an input


def output_only_cells(nb, resources):
    """nbconvert preprocessor (a plain callable): ``output_only`` on every cell."""
    for cell in nb.cells:
        output_only(cell)
    return nb, resources


def exporter(language: str = "en"):
    """A SlidesExporter configured for offline decks (same options as the nbconvert CLI flags)."""
    from nbconvert.exporters import SlidesExporter
    from traitlets.config import Config

    config = Config()
    config.SlidesExporter.reveal_url_prefix = URLS["reveal_url_prefix"]
    config.SlidesExporter.reveal_theme = THEME
    config.SlidesExporter.reveal_scroll = True  # a subslide taller than the screen scrolls
    # a 16:9 projector (reveal.js's 960×700 default cut code lines at about 80 characters); the template's CSS
    # (templates/offline_reveal) wraps code and bounds figures to it: tests/test_slides_fit.py measures every slide
    config.SlidesExporter.reveal_width = str(SLIDE_SIZE[0])
    config.SlidesExporter.reveal_height = str(SLIDE_SIZE[1])
    config.HTMLExporter.require_js_url = URLS["require_js_url"]
    config.HTMLExporter.jquery_url = URLS["jquery_url"]
    config.HTMLExporter.mathjax_url = URLS["mathjax_url"]
    config.TemplateExporter.extra_template_basedirs = [str(TEMPLATES)]
    config.TemplateExporter.template_name = TEMPLATE
    config.HTMLExporter.language_code = language  # <html lang>; the template's explorer note follows it
    slides_exporter = SlidesExporter(config=config)
    # a long code cell whose output is the point (a figure, a printed table) shows its output under a one-line summary:
    # the notebook tags it (cell metadata only; JupyterLab, nbval and the book ignore the tag)
    slides_exporter.register_preprocessor(output_only_cells, enabled=True)
    return slides_exporter


def build_deck(notebook: Path, out: Path, slides_exporter=None) -> Path:
    """Write ``<out>/<stem>.slides.html`` for one notebook and check it loads nothing remote."""
    if is_chinese(notebook):  # its own exporter (lang="zh"), title and file name: NN_name.zh.slides.html
        import nbformat

        node = nbformat.read(notebook, as_version=4)
        node.metadata["title"] = f"{notebook.stem}（中文版）"
        resources = {"metadata": {"name": notebook.stem, "path": str(notebook.parent)}}
        html, _ = exporter("zh").from_notebook_node(node, resources=resources)
        suffix = ".zh"
    else:
        slides_exporter = slides_exporter or exporter()
        html, _ = slides_exporter.from_filename(str(notebook))
        suffix = ""
    html = embed_local_images(html, notebook.parent)
    remote = remote_references(html)
    if remote:
        raise RuntimeError(f"{notebook.name}: the deck still loads from the network: {remote}")
    deck = out / f"{notebook.stem}{suffix}.slides.html"
    deck.write_text(html, encoding="utf-8")
    return deck


def build(notebooks: list[Path] | None = None, out: Path = DEFAULT_OUT, zh: bool = False) -> list[Path]:
    """Build offline decks for ``notebooks`` (default: every numbered notebook; ``zh``: notebooks/zh/) into ``out``."""
    notebooks = [Path(nb).resolve() for nb in notebooks] if notebooks else default_notebooks(zh)
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    ensure_node_modules()
    vendor(out)
    slides_exporter = exporter()
    return [build_deck(notebook, out, slides_exporter) for notebook in notebooks]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to convert (default: notebooks/NN_*.ipynb)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default: {DEFAULT_OUT})")
    parser.add_argument("--zh", action="store_true", help="every Chinese notebook (notebooks/zh/NN_*.ipynb)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    decks = build(args.notebooks, args.out, zh=args.zh)
    for deck in decks:
        log(f"wrote {deck}")
    log(f"{len(decks)} deck(s) in {time.perf_counter() - start:.1f} s; open one from disk, e.g. {decks[0].as_uri()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
