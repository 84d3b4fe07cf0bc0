"""Sphinx configuration for the book (built by book/build.py: English at the root, Chinese under zh/).

Sphinx + MyST-NB + sphinx-book-theme (the Jupyter Book 1 stack): everything it serves is inside the installed
wheels, so the build runs offline. build.py passes the language and the staged source folder.
"""

import os
import re

from sphinx.search import languages
from sphinx.search.zh import SearchChinese

project = "Attention, built and watched"
author = "attn-notebooks"
language = os.environ.get("ATTN_BOOK_LANGUAGE", "en")
if language == "zh_CN":
    project = "注意力：动手构建，亲眼观察"

extensions = ["myst_nb"]
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# Stored outputs only: the build never starts a kernel.
nb_execution_mode = "off"
# Explorers store their default-state figure (image/png) in the same bundle as the live widget view: without a
# kernel the page shows the figure, and no widget JavaScript is fetched (MyST-NB would take it from a CDN).
nb_ipywidgets_js = {}
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_output_stderr = "remove"
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

# Math: MathJax 3 from the sphinx-mathjax-offline wheel, copied into _static by build.py (no CDN).
mathjax_path = "mathjax/tex-chtml.js"

html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_static"]
html_css_files = ["book.css"]
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "navigation_with_keys": False,
}
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
suppress_warnings = ["myst.header", "misc.highlighting_failure", "mystnb.unknown_mime_type"]


class ChinesePhrases(SearchChinese):
    """Chinese search without jieba (a 19 MB dictionary): every run of Chinese characters is one index term.

    Sphinx's zh splitter indexes no Chinese at all without jieba. The search page matches a query of three or
    more characters inside any longer term (searchtools.js' partial matches), so a run holds every phrase in it:
    "注意力汇聚点" finds the run "注意力汇聚点让模型..." of notebook 12c.
    """

    # Sphinx 9.0.4's zh search page names a ChineseStemmer no script defines (a page error, search dead); its
    # stemmer script is English's, so the page must name EnglishStemmer (language_name only picks that name).
    language_name = "English"
    han = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")

    def split(self, input: str) -> list[str]:
        latin1 = [term.strip() for term in self.latin1_letters.findall(input)]
        self.latin_terms.update(latin1)
        return self.han.findall(input) + latin1


languages["zh"] = ChinesePhrases
