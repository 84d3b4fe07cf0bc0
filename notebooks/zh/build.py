"""Build the Chinese notebooks from the English ones plus translation files: one source of truth for code.

    python notebooks/zh/build.py                        # every notebook that has a translation file
    python notebooks/zh/build.py 01_scaled_dot_product_attention [02 ...]   # some (name, number or path)
    python notebooks/zh/build.py --check [names]        # exit 1 with a report when anything is missing or stale
    python notebooks/zh/build.py --skeleton 01_scaled_dot_product_attention  # start / refresh a translation file

then store the outputs of what changed: ``python notebooks/store_outputs.py notebooks/zh/NN_name.ipynb``.

Layout: ``notebooks/NN_name.ipynb`` (English, the source of truth) + ``notebooks/zh/translations/NN_name.json``
(edited by translators) -> ``notebooks/zh/NN_name.ipynb`` (generated, never edited by hand). A translation file::

    {"source": "NN_name.ipynb",
     "cells": {"<cell id>": {"en_sha": "<12 hex>", "zh": "<the whole markdown cell in Chinese>"},
               "<cell id>": {"en_sha": "<12 hex>", "comments": {"# English comment": "# 中文注释"}}}}

``en_sha`` = the first 12 hex digits of sha256 (UTF-8) of the English text the entry translates: a markdown
cell's source; for a code cell its *translatable text* (its comments and string literals, one token per line,
``translatable_text``), so renaming a variable or editing code leaves the translation fresh and only a changed
comment or string makes it stale (a hash of the whole code cell, the older form, is still accepted while it
matches). Every markdown cell needs an entry; a code cell only for comments or printed strings worth translating.
The code is never changed: comments are replaced as tokenize's COMMENT tokens (never inside strings), a string
literal (``"strings"``: {"<the literal as written, quotes and prefix included>": "<the Chinese literal>"}) as one
STRING token by one of the same kind (an f-string keeps exactly its ``{…}`` fields, in any order), and the
build verifies that the code without comments and strings is identical. Optional fields: ``translated_from`` (the
English text the translation was made from: ``--check`` shows a word diff when it goes stale; ``--skeleton``
writes it), ``en`` (the current English, written by ``--skeleton``) and ``en_sha_new`` (its hash, on a stale
entry), the last two help for translators and ignored by the build.

``--check`` fails (exit 1, a report per notebook) on: a markdown cell without translation, a stale ``en_sha``, a
comment key the English cell no longer has, an empty comment translation, a translated comment that pushes its
line past 120 columns (``ruff format`` would re-wrap the code) or drops a tool directive (``# noqa``), an entry
for a cell id that no longer exists, a generated notebook whose sources/metadata differ from a fresh build, and
code cells whose outputs are not stored. A comment that looks like English prose and has no translation is a
warning (a failure with ``--strict``, which also fails on English notebooks without a translation file).

The build copies cell ids, cell metadata (tags, slideshow, hidden solutions) and the kernelspec; rewrites
relative links (``../images/x.png`` -> ``../../images/x.png``: the notebooks sit one folder deeper); inserts
``ac.set_language("zh")`` after the first code cell's imports (attn_core's verdicts and explanation lines in
Chinese); keeps the stored outputs of every code cell whose generated source did not change and clears the rest.
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import difflib
import hashlib
import io
import json
import re
import sys
import tokenize
import unicodedata
from pathlib import Path

import nbformat

ZH_DIR = Path(__file__).resolve().parent
SET_LANGUAGE = 'ac.set_language("zh")  # attn_core 的练习反馈和讲解行用中文（改回英文：ac.set_language("en")）'
GENERATED_BY = "python notebooks/zh/build.py"
EXECUTION_METADATA = ("widgets", "language_info")  # written by executing the notebook, not by the build
HELP_FIELDS = ("en", "en_sha_new")

ERROR_KINDS = (
    "invalid",
    "missing",
    "stale",
    "comment key",
    "untranslated comment",
    "string key",
    "long line",
    "orphan",
    "out of date",
    "outputs",
)
WARNING_KINDS = ("prose comment", "leftover help", "old text")


class BuildError(Exception):
    """A translation the build cannot apply (a comment that is not one line, code changed by a replacement, ...)."""


@dataclasses.dataclass(frozen=True)
class Paths:
    """Where the English notebooks, the translation files and the generated notebooks are."""

    english: Path = ZH_DIR.parent
    zh: Path = ZH_DIR
    translations: Path = ZH_DIR / "translations"

    @classmethod
    def under(cls, notebooks: Path) -> Paths:
        """The same layout under another folder (tests build in a temporary copy)."""
        notebooks = Path(notebooks)
        return cls(notebooks, notebooks / "zh", notebooks / "zh" / "translations")

    def english_notebook(self, name: str) -> Path:
        return self.english / f"{name}.ipynb"

    def zh_notebook(self, name: str) -> Path:
        return self.zh / f"{name}.ipynb"

    def translation(self, name: str) -> Path:
        return self.translations / f"{name}.json"


@dataclasses.dataclass(frozen=True)
class Issue:
    kind: str  # one of ERROR_KINDS (a failure) or WARNING_KINDS (reported only)
    notebook: str
    message: str
    cell: str | None = None

    @property
    def is_error(self) -> bool:
        return self.kind in ERROR_KINDS

    def __str__(self) -> str:
        where = f"cell {self.cell}: " if self.cell else ""
        return f"{where}{self.message}"


# ----------------------------------------------------------------------------- small pieces


def en_sha(text: str) -> str:
    """The first 12 hex digits of sha256 of ``text`` (a cell's source) in UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def source_of(cell) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


MAGIC = re.compile(r"^\s*[%!]")  # IPython line magics and shell escapes: not Python, hidden from tokenize/ast


def _masked(code: str) -> str:
    """``code`` with magic lines blanked (same length), so tokenize/ast positions still match ``code``."""
    return "\n".join(" " * len(line) if MAGIC.match(line) else line for line in code.split("\n"))


def _offsets(code: str) -> list[int]:
    starts, total = [0], 0
    for line in code.split("\n"):
        total += len(line) + 1
        starts.append(total)
    return starts


def comment_spans(code: str) -> list[tuple[int, int, str]]:
    """``(start, end, text)`` of every comment token of ``code`` (character offsets), in order."""
    starts = _offsets(code)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(_masked(code)).readline))
    except (tokenize.TokenError, SyntaxError) as err:
        raise BuildError(f"the code cannot be tokenized ({err})") from err
    spans = []
    for token in tokens:
        if token.type == tokenize.COMMENT:
            (row, col), (end_row, end_col) = token.start, token.end
            spans.append((starts[row - 1] + col, starts[end_row - 1] + end_col, token.string))
    return spans


def strip_comments(code: str) -> str:
    """``code`` with every comment token removed (what must stay identical in the Chinese edition)."""
    for start, end, _ in reversed(comment_spans(code)):
        code = code[:start] + code[end:]
    return code


def text_spans(code: str) -> list[tuple[int, int, str, int]]:
    """``(start, end, text, token type)`` of every comment and string-literal token of ``code``, in order."""
    starts = _offsets(code)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(_masked(code)).readline))
    except (tokenize.TokenError, SyntaxError) as err:
        raise BuildError(f"the code cannot be tokenized ({err})") from err
    return [
        (starts[t.start[0] - 1] + t.start[1], starts[t.end[0] - 1] + t.end[1], t.string, t.type)
        for t in tokens
        if t.type in (tokenize.COMMENT, tokenize.STRING)
    ]


def translatable_text(code: str) -> str:
    """What a code cell's translation depends on: its comments and string literals, one token per line."""
    return "\n".join(span[2] for span in text_spans(code))


def code_sha(code: str) -> str:
    """A code cell's ``en_sha``: the hash of its translatable text (code edits keep the translation fresh)."""
    return en_sha(translatable_text(code))


def is_fresh(entry: dict, cell) -> bool:
    """``entry`` translates the English cell as it is now (for code also: the older whole-source hash)."""
    text = source_of(cell)
    if cell.cell_type == "code":
        return entry["en_sha"] in (code_sha(text), en_sha(text))
    return entry["en_sha"] == en_sha(text)


def current_sha(cell) -> str:
    return code_sha(source_of(cell)) if cell.cell_type == "code" else en_sha(source_of(cell))


def current_text(cell) -> str:
    """The English a translation of ``cell`` is made from (kept as ``translated_from``)."""
    return translatable_text(source_of(cell)) if cell.cell_type == "code" else source_of(cell)


def word_diff(old: str, new: str, context: int = 4, limit: int = 600) -> str:
    """The changed words of ``old`` -> ``new``: ``… context [-removed-]{+added+} context …``."""
    a, b = old.split(), new.split()
    parts = []
    opcodes = difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            words = a[i1:i2]
            head = words[:context] if parts else []  # after a change: its right context
            tail = words[-context:] if index + 1 < len(opcodes) else []  # before a change: its left context
            if len(words) > len(head) + len(tail):
                words = head + ["…"] + tail
            parts.append(" ".join(words))
        else:
            removed = f"[-{' '.join(a[i1:i2])}-]" if i2 > i1 else ""
            added = f"{{+{' '.join(b[j1:j2])}+}}" if j2 > j1 else ""
            parts.append(removed + added)
    text = " ".join(part for part in parts if part)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _literal(text: str) -> ast.expr | None:
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    return node if isinstance(node, ast.Constant | ast.JoinedStr) else None


def _fields(node: ast.expr) -> list[str]:
    """An f-string's ``{…}`` fields (expression, conversion, format spec), sorted: what a translation must keep.

    A field that is itself a string constant (a table header such as ``{'batch':>5}``) is text, not code: its
    words may be translated, its format spec may not.
    """
    if isinstance(node, ast.Constant):
        return []
    fields = []
    for value in node.values:
        if isinstance(value, ast.FormattedValue):
            if isinstance(value.value, ast.Constant) and isinstance(value.value.value, str):
                value = ast.FormattedValue(ast.Constant("<text>"), value.conversion, value.format_spec)
            fields.append(ast.dump(value))
    return sorted(fields)


def check_string(english: str, chinese: str) -> None:
    """A string translation is one literal of the same kind with the same f-string fields and line count."""
    if not isinstance(chinese, str):
        raise BuildError(f"the translation of {english!r} must be a string literal as written in code, got {chinese!r}")
    old, new = _literal(english), _literal(chinese)
    prefix = re.compile(r"^[A-Za-z]*")
    if (
        new is None
        or type(old) is not type(new)
        or prefix.match(english)[0].lower() != prefix.match(chinese)[0].lower()
        or english.count("\n") != chinese.count("\n")
        or (isinstance(new, ast.Constant) and type(new.value) is not type(old.value))
    ):
        raise BuildError(
            f"the translation of the string {english!r} must be one literal of the same kind (same prefix, "
            f"quotes and number of lines), got {chinese!r}"
        )
    if _fields(old) != _fields(new):
        raise BuildError(f"the translation of {english!r} must keep exactly its {{…}} fields, got {chinese!r}")


def translate_code(code: str, comments: dict[str, str], strings: dict[str, str]) -> str:
    """Replace comments and string literals found in the maps; the code between them never changes."""
    for english, chinese in strings.items():
        check_string(english, chinese)
    result = translate_comments(code, comments)
    for start, end, text, kind in reversed(text_spans(result)):
        if kind == tokenize.STRING and strings.get(text):
            result = result[:start] + strings[text] + result[end:]
    if _without_text(result) != _without_text(code):
        raise BuildError("replacing strings changed the code itself (a translation that is not one string literal?)")
    return result


def _without_text(code: str) -> str:
    for start, end, _, _ in reversed(text_spans(code)):
        code = code[:start] + code[end:]
    return code


KEEP = re.compile(r"noqa(?::[\sA-Z0-9,]+)?|fmt:\s*(?:skip|off|on)|type:\s*ignore(?:\[[^\]]*\])?|pragma:[^#]*")
LINE_LENGTH = 120  # pyproject.toml [tool.ruff] line-length: ruff measures display width (CJK = 2 columns)
DIRECTIVE = re.compile(r"#\s*(?:noqa|fmt:|type:|pragma|pyright:|mypy:|ruff:|isort:)", re.IGNORECASE)
PROSE_WORD = re.compile(r"(?<![\w.`])[A-Za-z]{3,}(?![\w`(])")


def looks_like_prose(comment: str) -> bool:
    """A heuristic for "English a learner reads": two or more words of 3+ letters that are not code.

    Words inside backticks, quotes, parentheses or brackets (shapes such as ``(B, L, hidden)``), identifiers
    with ``_``/digits, attribute chains (``x.shape``) and calls do not count; directives (``# noqa``) are not prose.
    """
    if DIRECTIVE.match(comment):
        return False
    text = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"", " ", comment)  # code spans and quoted strings
    previous = None
    while previous != text:  # shapes and lists, innermost first: (B, L, hidden), [3, 4]
        previous, text = text, re.sub(r"\([^()]*\)|\[[^\[\]]*\]", " ", text)
    return len(PROSE_WORD.findall(text)) >= 2


def display_width(line: str) -> int:
    """Columns as ruff counts them for line-length: wide and full-width characters (CJK) take two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in line)


def long_lines(english: str, translated: str) -> list[tuple[int, int]]:
    """``(line number, width)`` of lines that a translated comment pushed past ``LINE_LENGTH`` columns
    (``ruff format`` would then re-wrap the code of the generated notebook)."""
    pairs = zip(english.split("\n"), translated.split("\n"), strict=True)
    return [
        (number, display_width(new))
        for number, (old, new) in enumerate(pairs, 1)
        if display_width(new) > LINE_LENGTH >= display_width(old)
    ]


def translate_comments(code: str, comments: dict[str, str]) -> str:
    """Replace each comment token found in ``comments`` by its translation; the code itself never changes."""
    for english, chinese in comments.items():
        if not isinstance(chinese, str) or not chinese.startswith("#") or "\n" in chinese or "\r" in chinese:
            raise BuildError(f"the translation of {english!r} must be one line starting with '#', got {chinese!r}")
        for directive in (found.strip() for found in KEEP.findall(english)):
            if directive not in chinese:
                raise BuildError(f"the translation of {english!r} must keep its tool directive {directive!r}")
    result = code
    for start, end, text in reversed(comment_spans(code)):
        if comments.get(text):
            result = result[:start] + normalize_comment(comments[text]) + result[end:]
    if strip_comments(result) != strip_comments(code):
        raise BuildError("replacing the comments changed the code itself (a translation that is not a comment?)")
    return result


def normalize_comment(comment: str) -> str:
    """``#中文`` -> ``# 中文``, as ``ruff format`` writes a comment (so the generated code stays formatted)."""
    if len(comment) > 1 and comment[1] not in " #!:":
        return "# " + comment[1:]
    return comment


def insert_set_language(code: str, notebook: str) -> str:
    """Add ``ac.set_language("zh")`` right after the import block that holds ``import attn_core as ac``."""
    try:
        tree = ast.parse(_masked(code))
    except SyntaxError as err:
        raise BuildError(f"{notebook}: the first code cell is not valid Python ({err})") from err
    body = tree.body
    start = next(
        (
            index
            for index, node in enumerate(body)
            if isinstance(node, ast.Import) and any(a.name == "attn_core" and a.asname == "ac" for a in node.names)
        ),
        None,
    )
    if start is None:
        raise BuildError(
            f"{notebook}: the first code cell has no `import attn_core as ac`, so the Chinese edition cannot call "
            'ac.set_language("zh") there (CONTRIBUTING.md: the first code cell is the same in every notebook).'
        )
    end = start
    while end + 1 < len(body) and isinstance(body[end + 1], ast.Import | ast.ImportFrom):
        end += 1
    lines = code.split("\n")
    after = body[end].end_lineno  # 1-based last line of the import block = index of the line after it
    if after < len(lines) and not lines[after].strip():  # a blank line follows: start the next paragraph with it
        lines.insert(after + 1, SET_LANGUAGE)
    else:
        lines[after:after] = ["", SET_LANGUAGE]
    return "\n".join(lines)


LINK = re.compile(r"""(\]\(\s*<?|\b(?:src|href)\s*=\s*["'])\.\./(?!\.\./)""")


ZH_IMAGES = ZH_DIR.parents[1] / "images" / "zh"  # Chinese copies of the diagrams (images/make_diagrams.py)
ZH_IMAGE_LINK = re.compile(r"(\.\./\.\./images/)(?P<name>[\w.-]+\.png)")


def rewrite_links(markdown: str) -> str:
    """Relative links one folder deeper: ``](../images/x.png)`` -> ``](../../images/x.png)`` (also src=/href=);
    a diagram with a Chinese copy in ``images/zh/`` links that copy instead."""
    markdown = LINK.sub(r"\1../../", markdown)
    return ZH_IMAGE_LINK.sub(lambda m: f"{m[1]}zh/{m['name']}" if (ZH_IMAGES / m["name"]).is_file() else m[0], markdown)


# ----------------------------------------------------------------------------- reading


def resolve(name: str, paths: Paths) -> str:
    """``01``, ``01_scaled_dot_product_attention``, or a path to either edition -> the notebook's stem."""
    stem = Path(name).name.removesuffix(".ipynb").removesuffix(".json")
    if paths.english_notebook(stem).is_file():
        return stem
    matches = sorted(p.stem for p in paths.english.glob(f"{stem}_*.ipynb"))
    if len(matches) == 1:
        return matches[0]
    known = ", ".join(p.stem for p in sorted(paths.english.glob("[0-9][0-9]*_*.ipynb")))
    raise SystemExit(f"no English notebook {name!r} in {paths.english} ({'ambiguous: ' if matches else ''}{known})")


def translated_names(paths: Paths) -> list[str]:
    return sorted(p.stem for p in paths.translations.glob("*.json"))


def english_names(paths: Paths) -> list[str]:
    return sorted(p.stem for p in paths.english.glob("[0-9][0-9]*_*.ipynb"))


def load_translation(path: Path, name: str) -> tuple[dict, list[Issue]]:
    """The translation file's ``cells`` (or {}) and the problems with its structure."""
    if not path.is_file():
        return {}, [Issue("missing", name, f"no translation file {path.name} (start one with --skeleton {name})")]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        return {}, [Issue("invalid", name, f"{path.name} is not valid JSON: {err}")]
    issues = []
    if not isinstance(data, dict) or not isinstance(data.get("cells"), dict):
        return {}, [Issue("invalid", name, f'{path.name} must be an object with "source" and "cells"')]
    if data.get("source") != f"{name}.ipynb":
        issues.append(Issue("invalid", name, f'"source" is {data.get("source")!r}, expected "{name}.ipynb"'))
    cells = {}
    for cell_id, entry in data["cells"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("en_sha"), str):
            issues.append(Issue("invalid", name, 'an entry is an object with "en_sha" and "zh" or "comments"', cell_id))
            continue
        if "comments" in entry and not (
            isinstance(entry["comments"], dict) and all(isinstance(v, str) for v in entry["comments"].values())
        ):
            issues.append(
                Issue("invalid", name, '"comments" maps English comment -> Chinese comment (strings)', cell_id)
            )
            continue
        if "strings" in entry and not (
            isinstance(entry["strings"], dict) and all(isinstance(v, str) for v in entry["strings"].values())
        ):
            issues.append(
                Issue("invalid", name, '"strings" maps an English string literal -> a Chinese one (strings)', cell_id)
            )
            continue
        if "zh" in entry and not isinstance(entry["zh"], str):
            issues.append(Issue("invalid", name, '"zh" must be a string', cell_id))
            continue
        if "translated_from" in entry and not isinstance(entry["translated_from"], str):
            issues.append(Issue("invalid", name, '"translated_from" must be a string (the English text)', cell_id))
            continue
        cells[cell_id] = entry
    return cells, issues


def read_notebook(path: Path):
    return nbformat.read(path, as_version=4)


# ----------------------------------------------------------------------------- building


def build_notebook(name: str, paths: Paths, *, force: bool = False) -> tuple[nbformat.NotebookNode, list[Issue]]:
    """The Chinese notebook ``name`` (in memory) and the translation's problems.

    Raises BuildError when a translation problem would make the notebook wrong (missing or stale
    translation, a comment key the cell does not have, ...) unless ``force``: then the English text
    stands in for a missing translation and a stale one is used as it is.
    """
    english = read_notebook(paths.english_notebook(name))
    entries, issues = load_translation(paths.translation(name), name)
    old_path = paths.zh_notebook(name)
    old = read_notebook(old_path) if old_path.is_file() else None
    old_cells = {cell.get("id"): cell for cell in old.cells} if old is not None else {}

    notebook = copy.deepcopy(english)
    for key in EXECUTION_METADATA:
        notebook.metadata.pop(key, None)
        if old is not None and key in old.metadata:
            notebook.metadata[key] = copy.deepcopy(old.metadata[key])
    notebook.metadata["attn_zh"] = {"source": f"../{name}.ipynb", "generated_by": GENERATED_BY}

    ids = set()
    first_code = True
    for cell in notebook.cells:
        cell_id = cell.get("id")
        ids.add(cell_id)
        text = source_of(cell)
        entry = entries.get(cell_id)
        if entry is not None:
            issues += _help_field_warnings(entry, name, cell_id)
            if cell.cell_type in ("markdown", "code") and entry.get("en_sha") and not is_fresh(entry, cell):
                issues.append(_stale(name, cell_id, entry, cell))
            elif entry.get("translated_from", current_text(cell)) != current_text(cell):
                issues.append(_old_text(name, cell_id))
        if cell.cell_type == "markdown":
            if entry is None or not entry.get("zh", "").strip():
                issues.append(Issue("missing", name, "missing translation (markdown cell)", cell_id))
                translated = text
            else:
                translated = entry["zh"]
            cell.source = rewrite_links(translated)
        elif cell.cell_type == "code":
            comments = dict(entry.get("comments", {})) if entry is not None else {}
            strings = dict(entry.get("strings", {})) if entry is not None else {}
            if entry is not None and "zh" in entry:
                issues.append(Issue("invalid", name, 'a code cell takes "comments" and "strings", not "zh"', cell_id))
            try:
                present = {span[2] for span in comment_spans(text)}
                literals = {span[2] for span in text_spans(text) if span[3] == tokenize.STRING}
            except BuildError as err:
                raise BuildError(f"{name}, cell {cell_id}: {err}") from err
            for key in strings:
                if key not in literals:
                    issues.append(
                        Issue("string key", name, f"string literal not found in the English cell: {key!r}", cell_id)
                    )
            for key in comments:
                if key not in present:
                    issues.append(
                        Issue("comment key", name, f"comment key not found in the English cell: {key!r}", cell_id)
                    )
            for key, value in comments.items():
                if key in present and not value.strip():
                    issues.append(Issue("untranslated comment", name, f"comment not translated yet: {key!r}", cell_id))
            for comment in sorted(present - set(comments)):
                if looks_like_prose(comment):
                    issues.append(
                        Issue("prose comment", name, f"comment looks like untranslated English: {comment!r}", cell_id)
                    )
            try:
                code = translate_code(
                    text,
                    {k: v for k, v in comments.items() if k in present and v.strip()},
                    {k: v for k, v in strings.items() if k in literals and v.strip()},
                )
                for number, width in long_lines(text, code):
                    issues.append(
                        Issue(
                            "long line",
                            name,
                            f"line {number} is {width} columns with its translated comment (> {LINE_LENGTH}; "
                            "ruff format would re-wrap the code): shorten the comment",
                            cell_id,
                        )
                    )
                if first_code:
                    code = insert_set_language(code, name)
            except BuildError as err:
                raise BuildError(f"{name}, cell {cell_id}: {err}") from err
            first_code = False
            cell.source = code
            previous = old_cells.get(cell_id)
            if previous is not None and previous.get("cell_type") == "code" and source_of(previous) == code:
                cell.outputs = copy.deepcopy(previous.outputs)
                cell.execution_count = previous.get("execution_count")
            else:
                cell.outputs = []
                cell.execution_count = None
    for cell_id in entries:
        if cell_id not in ids:
            issues.append(
                Issue("orphan", name, f"translation for a cell id that no longer exists in {name}.ipynb", cell_id)
            )
    errors = [issue for issue in issues if issue.is_error]
    if errors and not force:
        raise BuildError(f"{name}: the translation has {len(errors)} problem(s):\n" + _indent(errors))
    return notebook, issues


def _stale(name: str, cell_id: str, entry: dict, cell) -> Issue:
    old, new = entry["en_sha"], current_sha(cell)
    what = "its comments or strings" if cell.cell_type == "code" else "the English cell"
    changed = (
        f"; what changed: {word_diff(entry['translated_from'], current_text(cell))}"
        if isinstance(entry.get("translated_from"), str)
        else ""
    )
    return Issue(
        "stale",
        name,
        f"stale: {what} changed since it was translated (en_sha {old}, now {new}){changed}; "
        f'update the translation, then set "en_sha" to "{new}" (--skeleton then records the new English)',
        cell_id,
    )


def _old_text(name: str, cell_id: str) -> Issue:
    return Issue(
        "old text",
        name,
        '"translated_from" is not the English this fresh entry translates: run --skeleton to record it',
        cell_id,
    )


def _help_field_warnings(entry: dict, name: str, cell_id: str) -> list[Issue]:
    left = [field for field in HELP_FIELDS if field in entry]
    if not left:
        return []
    return [Issue("leftover help", name, f"help field(s) {left} still present (--skeleton removes them)", cell_id)]


def _indent(issues: list[Issue]) -> str:
    return "\n".join(f"    {issue}" for issue in issues)


def build(names: list[str], paths: Paths, *, force: bool = False) -> int:
    """Write the Chinese notebooks ``names``; return the exit status (1 if any could not be built)."""
    status = 0
    paths.zh.mkdir(parents=True, exist_ok=True)
    for name in names:
        try:
            notebook, issues = build_notebook(name, paths, force=force)
        except BuildError as err:
            print(f"[zh] NOT built: {err}", file=sys.stderr)
            status = 1
            continue
        nbformat.write(notebook, paths.zh_notebook(name))
        cleared = [c.get("id") for c in notebook.cells if c.cell_type == "code" and not c.outputs]
        english = read_notebook(paths.english_notebook(name))
        had = {c.get("id") for c in english.cells if c.cell_type == "code" and c.outputs}
        stale_outputs = [cell_id for cell_id in cleared if cell_id in had]
        print(f"[zh] wrote {paths.zh_notebook(name)}")
        for issue in issues:
            print(f"[zh]   {'warning' if not issue.is_error else 'problem'}: {issue}")
        if stale_outputs:
            print(
                f"[zh]   {len(stale_outputs)} code cell(s) need their outputs stored: "
                f"python notebooks/store_outputs.py {paths.zh_notebook(name)}"
            )
    return status


# ----------------------------------------------------------------------------- checking


def _comparable(notebook) -> dict:
    metadata = {k: v for k, v in notebook.metadata.items() if k not in EXECUTION_METADATA}
    cells = [
        {"id": c.get("id"), "cell_type": c.cell_type, "source": source_of(c), "metadata": c.get("metadata", {})}
        for c in notebook.cells
    ]
    return {"metadata": metadata, "cells": cells, "nbformat": (notebook.nbformat, notebook.nbformat_minor)}


def _first_difference(built: dict, stored: dict) -> str:
    if built["metadata"] != stored["metadata"]:
        return "the notebook metadata differs"
    if built["nbformat"] != stored["nbformat"]:
        return "the nbformat version differs"
    for new, old in zip(built["cells"], stored["cells"], strict=False):
        for key in ("id", "cell_type", "source", "metadata"):
            if new[key] != old[key]:
                return f"cell {new['id']}: its {key} differs"
    return f"it has {len(stored['cells'])} cells, the build makes {len(built['cells'])}"


def check_notebook(name: str, paths: Paths) -> list[Issue]:
    """Every problem of notebook ``name``'s Chinese edition; builds in memory, executes nothing."""
    try:
        notebook, issues = build_notebook(name, paths, force=True)
    except BuildError as err:
        return [Issue("invalid", name, str(err))]
    stored_path = paths.zh_notebook(name)
    rebuild = f"run {GENERATED_BY} {name}"
    if not stored_path.is_file():
        issues.append(Issue("out of date", name, f"{stored_path.name} is not built yet: {rebuild}"))
        return issues
    stored = read_notebook(stored_path)
    built, kept = _comparable(notebook), _comparable(stored)
    if built != kept:
        difference = _first_difference(built, kept)
        issues.append(
            Issue(
                "out of date",
                name,
                f"notebooks/zh/{name}.ipynb is out of date ({difference}): {rebuild} "
                "(never edit the generated notebook by hand; edit the English notebook or the translation)",
            )
        )
        return issues
    english = read_notebook(paths.english_notebook(name))
    had = {c.get("id") for c in english.cells if c.cell_type == "code" and c.outputs}
    missing = [c.get("id") for c in stored.cells if c.cell_type == "code" and not c.outputs and c.get("id") in had]
    if missing:
        issues.append(
            Issue(
                "outputs",
                name,
                f"outputs not stored for {len(missing)} code cell(s) ({', '.join(missing[:5])}): "
                f"python notebooks/store_outputs.py notebooks/zh/{name}.ipynb",
            )
        )
    return issues


def check(names: list[str] | None, paths: Paths, *, strict: bool = False) -> list[Issue]:
    """Problems of every translated notebook (or ``names``), plus leftovers; ``strict``: also untranslated notebooks."""
    english = english_names(paths)
    translated = translated_names(paths)
    names = names if names is not None else [name for name in english if name in translated]
    issues: list[Issue] = []
    for name in names:
        issues += check_notebook(name, paths)
    for name in translated:
        if name not in english:
            issues.append(Issue("orphan", name, f"translation file {name}.json has no English notebook {name}.ipynb"))
    for path in sorted(paths.zh.glob("*.ipynb")):
        if path.stem not in translated:
            issues.append(Issue("orphan", path.stem, f"notebooks/zh/{path.name} has no translation file"))
    if strict:  # the lead's switch (ATTN_ZH_STRICT=1): English prose left in a comment fails too
        issues = [
            dataclasses.replace(i, kind="untranslated comment") if i.kind == "prose comment" else i for i in issues
        ]
        for name in english:
            if name not in translated:
                issues.append(Issue("missing", name, f"no Chinese edition yet (no translations/{name}.json)"))
    return issues


def report(issues: list[Issue]) -> str:
    errors = [issue for issue in issues if issue.is_error]
    warnings = [issue for issue in issues if not issue.is_error]
    lines = [f"Chinese edition check: {len(errors)} problem(s), {len(warnings)} warning(s)"]
    for title, group in (("problems", errors), ("warnings (not failures)", warnings)):
        if not group:
            continue
        lines.append(f"{title}:")
        for notebook in dict.fromkeys(issue.notebook for issue in group):
            lines.append(f"  {notebook}:")
            lines += [f"    {issue}" for issue in group if issue.notebook == notebook]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- skeleton


def skeleton(name: str, paths: Paths) -> Path:
    """Write/refresh ``translations/name.json``: an entry for every markdown cell and every code cell with
    English prose in its comments (or translated strings). A fresh entry keeps its translation and gets the
    current hash form and ``translated_from`` (the English it translates, for a word diff when it goes stale);
    a new entry gets the English text under ``"en"`` and an empty translation; a stale one keeps its
    translation, ``en_sha`` and ``translated_from`` and gets ``"en"`` (the current English) and ``"en_sha_new"``
    (the hash to set once the translation is updated). Entries of cells that no longer exist, and comment or
    string keys no longer in their cell, are dropped (and listed).
    """
    english = read_notebook(paths.english_notebook(name))
    path = paths.translation(name)
    old = json.loads(path.read_text(encoding="utf-8")).get("cells", {}) if path.is_file() else {}
    cells: dict[str, dict] = {}
    todo, stale, dropped = 0, 0, []
    for cell in english.cells:
        cell_id, text = cell.get("id"), source_of(cell)
        sha, recorded = current_sha(cell), {"translated_from": current_text(cell)}
        entry = {k: v for k, v in old.get(cell_id, {}).items() if k not in HELP_FIELDS}
        if cell.cell_type == "markdown":
            if not entry.get("zh", "").strip():
                cells[cell_id] = {"en_sha": sha, "en": text, "zh": ""}
                todo += 1
            elif is_fresh(entry, cell):
                cells[cell_id] = {**entry, "en_sha": sha, **recorded}
            else:
                cells[cell_id] = {**entry, "en": text, "en_sha_new": sha}
                stale += 1
        elif cell.cell_type == "code":
            spans = [span[2] for span in comment_spans(text)]
            literals = [span[2] for span in text_spans(text) if span[3] == tokenize.STRING]
            comments, strings = {}, {}
            for kind, found, kept in (("comment", spans, comments), ("string", literals, strings)):
                for key, value in entry.get(f"{kind}s", {}).items():
                    if key in found:
                        kept[key] = value
                    else:
                        dropped.append(f"cell {cell_id}: {kind} {key!r}")
            for comment in spans:
                if looks_like_prose(comment):
                    comments.setdefault(comment, "")
            if not comments and not strings:
                if entry:
                    dropped.append(f"cell {cell_id}: the whole entry (no comment or string left to translate)")
                continue
            maps = {"comments": comments} if comments or "strings" not in entry else {}
            maps |= {"strings": strings} if strings else {}
            entry = {k: v for k, v in entry.items() if k not in ("comments", "strings")}
            if not entry:
                cells[cell_id] = {"en_sha": sha, "en": text, **maps}
                todo += 1
            elif not is_fresh(entry, cell):
                cells[cell_id] = {**entry, **maps, "en": text, "en_sha_new": sha}
                stale += 1
            else:
                cells[cell_id] = {**entry, "en_sha": sha, **maps, **recorded}
                if not all(value.strip() for value in [*comments.values(), *strings.values()]):
                    cells[cell_id]["en"] = text
                    todo += 1
    ids = {cell.get("id") for cell in english.cells}
    dropped += [f"cell {cell_id}: the whole entry (the cell no longer exists)" for cell_id in old if cell_id not in ids]
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"source": f"{name}.ipynb", "cells": cells}
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f'[zh] wrote {path}: {len(cells)} entries, {todo} to translate, {stale} stale (see their "en")')
    for item in dropped:
        print(f"[zh]   dropped {item}")
    return path


# ----------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None, paths: Paths | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebooks (NN_name, NN or a path); default: every translated one")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="report missing/stale translations and stale notebooks")
    mode.add_argument("--skeleton", action="store_true", help="write/refresh the translation file of each name")
    parser.add_argument(
        "--strict", action="store_true", help="with --check: an English notebook without a translation fails"
    )
    parser.add_argument(
        "--force", action="store_true", help="build even with missing/stale translations (English stands in)"
    )
    parser.add_argument("--notebooks", type=Path, help="another notebooks folder (its zh/ and zh/translations/)")
    args = parser.parse_args(argv)
    paths = paths or (Paths.under(args.notebooks) if args.notebooks else Paths())
    names = [resolve(name, paths) for name in args.names] or None
    if args.skeleton:
        if not names:
            parser.error("--skeleton needs the notebook(s) to write, e.g. --skeleton 01_scaled_dot_product_attention")
        for name in names:
            skeleton(name, paths)
        return 0
    if args.check:
        issues = check(names, paths, strict=args.strict)
        print(report(issues))
        return 1 if any(issue.is_error for issue in issues) else 0
    return build(names or translated_names(paths), paths, force=args.force)


if __name__ == "__main__":
    sys.exit(main())
