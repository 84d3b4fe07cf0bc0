"""Build the series as a static bilingual site from the stored outputs: `python book/build.py`.

English at book/_build/html/ (index.html is notebook 00's map), Chinese at book/_build/html/zh/. Sphinx + MyST-NB +
sphinx-book-theme (the Jupyter Book 1 stack, pinned in requirements.txt); no notebook is executed and nothing is
fetched: the theme, the search index and MathJax (from the sphinx-mathjax-offline wheel) are all served locally.

Each notebook is staged (book/_build/src/<lang>/) with four changes, the notebooks themselves stay untouched:
00 becomes index (with the hidden table of contents in the series' order), a language-switch link on top,
solution cells collapsed behind "Show solution" (MyST-NB's hide-cell; cells Jupyter shows collapsed stay collapsed),
and links that leave the series' folder (the other language, ../images) rewritten to what exists in the site.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

BOOK = Path(__file__).resolve().parent
REPO = BOOK.parent
NOTEBOOKS = REPO / "notebooks"
BUILD = BOOK / "_build"
HTML = BUILD / "html"
LANDING = "00_start_here"
WIDGET = "application/vnd.jupyter.widget-view+json"

LANGUAGES = {
    # key: (notebook folder, Sphinx language, output folder under html/, switch label, show/hide solution prompts)
    "en": (NOTEBOOKS, "en", "", "中文", "Show solution", "Hide solution"),
    "zh": (NOTEBOOKS / "zh", "zh_CN", "zh", "English", "显示答案", "隐藏答案"),
}


def series(folder: Path) -> list[Path]:
    """The series' notebooks in reading order (their names sort in it: 00, 01, ..., 06, 06b, ...)."""
    return sorted(p for p in folder.glob("[0-9][0-9]*.ipynb"))


def is_live_widget(output: dict) -> bool:
    """A widget view of a real model (the fallback's own view has model_id "": no widget, only its figure)."""
    view = output.get("data", {}).get(WIDGET)
    return isinstance(view, dict) and view.get("model_id") != ""


def page_name(stem: str) -> str:
    return "index" if stem == LANDING else stem


def twin_href(lang: str, stem: str) -> str:
    """The relative URL of the same page in the other language."""
    return f"zh/{page_name(stem)}.html" if lang == "en" else f"../{page_name(stem)}.html"


def rewrite_links(text: str, lang: str) -> str:
    # the landing page is index in the site
    text = text.replace(f"]({LANDING}.ipynb", "](index.ipynb")
    # links to the other language: plain HTML anchors (they are pages of the other Sphinx build)
    other = r"zh/" if lang == "en" else r"\.\./(?:\.\./)?"

    def to_anchor(m: re.Match) -> str:
        return f'<a href="{twin_href(lang, m.group(2))}">{m.group(1)}</a>'

    text = re.sub(r"\[([^\]]+)\]\(" + other + r"([0-9][0-9][a-z]?_[A-Za-z0-9_]+)\.ipynb\)", to_anchor, text)
    # pictures live in the repository's images/ (images/zh/ for Chinese labels): staged next to the pages
    return re.sub(r"\]\((?:\.\./)+images/", "](images/", text)


def stage_notebook(src: Path, lang: str, order: list[str]) -> dict:
    _, _, _, switch_label, show, hide = LANGUAGES[lang]
    nb = json.loads(src.read_text(encoding="utf-8"))
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = rewrite_links("".join(cell["source"]), lang)
        tags = cell.setdefault("metadata", {}).get("tags", [])
        if any(WIDGET in out.get("data", {}) for out in cell.get("outputs", [])):
            # marks the cell in the page (class tag_explorer) for the browser test of the static fallback
            cell["metadata"]["tags"] = tags = [*tags, "explorer"]
            # the live widget cannot run in a static page: keep only its stored fallback (Explorer.fallback_bundle)
            cell["outputs"] = [out for out in cell["outputs"] if not is_live_widget(out)]
        if "solution" in tags:
            cell["metadata"]["tags"] = [*tags, "hide-cell"]
            cell["metadata"]["mystnb"] = {"code_prompt_show": show, "code_prompt_hide": hide}
        else:  # what JupyterLab shows collapsed (a checker's code, its long verdicts) is collapsed on the page too
            hidden = cell["metadata"].get("jupyter", {})
            extra = [
                tag
                for key, tag in (("source_hidden", "hide-input"), ("outputs_hidden", "hide-output"))
                if hidden.get(key)
            ]
            cell["metadata"]["tags"] = [*tags, *extra]
    switch = {
        "cell_type": "markdown",
        "id": "book-language-switch",
        "metadata": {},
        "source": f'<p class="lang-switch"><a href="{twin_href(lang, src.stem)}" '
        f'hreflang="{"zh-CN" if lang == "en" else "en"}">{switch_label}</a></p>',
    }
    nb["cells"].insert(0, switch)
    if src.stem == LANDING:
        toc = "\n".join(order)
        nb["cells"].append(
            {
                "cell_type": "markdown",
                "id": "book-toctree",
                "metadata": {},
                "source": f"```{{toctree}}\n:hidden:\n:maxdepth: 1\n\n{toc}\n```",
            }
        )
    return nb


def stage(lang: str) -> Path:
    folder = LANGUAGES[lang][0]
    out = BUILD / "src" / lang
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    notebooks = series(folder)
    order = [nb.stem for nb in notebooks if nb.stem != LANDING]
    for nb in notebooks:
        staged = stage_notebook(nb, lang, order)
        (out / f"{page_name(nb.stem)}.ipynb").write_text(json.dumps(staged, ensure_ascii=False), encoding="utf-8")
    # the repository's pictures (images/zh/ holds the Chinese-labelled ones), at the same relative place
    shutil.copytree(REPO / "images", out / "images", ignore=shutil.ignore_patterns("*.py", "*.json"))
    return out


def mathjax_source() -> Path:
    spec = importlib.util.find_spec("sphinx-mathjax-offline")  # the wheel's folder name has dashes
    if spec is None or spec.origin is None:
        sys.exit("MathJax is missing: pip install -r requirements.txt (sphinx-mathjax-offline)")
    return Path(spec.origin).parent / "static" / "mathjax"


def copy_mathjax(static: Path) -> None:
    """tex-chtml.js, the TeX extensions it autoloads and the CHTML woff2 fonts: the part of MathJax pages use."""
    src, dst = mathjax_source(), static / "mathjax"
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    shutil.copy2(src / "tex-chtml.js", dst / "tex-chtml.js")
    shutil.copytree(src / "input" / "tex" / "extensions", dst / "input" / "tex" / "extensions")
    shutil.copytree(src / "output" / "chtml" / "fonts" / "woff-v2", dst / "output" / "chtml" / "fonts" / "woff-v2")


def build(lang: str, quiet: bool) -> None:
    _, sphinx_language, *_ = LANGUAGES[lang]
    src = stage(lang)
    out = BUILD / lang / "html"  # MyST-NB writes its extracted outputs next to it (../jupyter_execute)
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(BOOK), "-D", f"language={sphinx_language}"]
    cmd += ["-q"] if quiet else []
    cmd += ["-d", str(BUILD / lang / "doctrees"), str(src), str(out)]
    env = {**os.environ, "ATTN_BOOK_LANGUAGE": sphinx_language}
    subprocess.run(cmd, check=True, env=env)
    copy_mathjax(out / "_static")


def assemble() -> None:
    """The site: English at html/, Chinese at html/zh/ (each page's language switch links across)."""
    if HTML.exists():
        shutil.rmtree(HTML)
    for lang, (*_, folder, _label, _show, _hide) in LANGUAGES.items():
        built = BUILD / lang / "html"
        if not built.exists():
            sys.exit(f"{built} is missing: run python book/build.py (both languages)")
        shutil.copytree(built, HTML / folder, ignore=shutil.ignore_patterns(".buildinfo", "_sources"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", choices=[*LANGUAGES, "all"], default="all")
    parser.add_argument("--clean", action="store_true", help="start from an empty book/_build")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    if args.clean and BUILD.exists():
        shutil.rmtree(BUILD)
    start = time.perf_counter()
    for lang in LANGUAGES if args.lang == "all" else [args.lang]:
        build(lang, quiet=not args.verbose)
    assemble()
    size = sum(f.stat().st_size for f in HTML.rglob("*") if f.is_file())
    print(f"built {HTML / 'index.html'} in {time.perf_counter() - start:.0f} s ({size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
