"""The gettext catalog of attn_core's learner-facing messages (``attn_core/locale``; issue #34).

The shipped ``.mo`` must say what its ``.po`` says: it is compiled here from the ``.po`` and compared entry by
entry (file times are no evidence: a git checkout sets them arbitrarily). ``pybabel extract`` run over the package
must find exactly the ``.pot``'s messages, each translated in the ``.po`` with the same placeholders; every ``_()``
call site passes a literal (what extraction can read). And a message made with ``_()`` renders in Chinese where a
learner reads it, parts included, while its English value stays what it was.
"""

from __future__ import annotations

import ast
import gettext
import io
import string
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

import attn_core as ac
from attn_core import i18n
from attn_core.exercises import NOT_DONE, call_learner, feedback
from attn_core.i18n import Message, _, foreign
from attn_core.i18n.messages import DOMAIN, LOCALE_DIR, LOCALES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "attn_core"
POT = LOCALE_DIR / f"{DOMAIN}.pot"


def po_path(lang: str = "zh") -> Path:
    return LOCALE_DIR / LOCALES[lang] / "LC_MESSAGES" / f"{DOMAIN}.po"


def read_catalog(path: Path):
    with open(path, "rb") as file:
        return read_po(file)


def mo_entries(data: bytes) -> dict:
    return dict(gettext.GNUTranslations(io.BytesIO(data))._catalog)


def extracted() -> set[str]:
    """The msgids ``pybabel extract -k _ --no-default-keywords`` finds in attn_core (the translator's first command)."""
    found = extract_from_dir(str(PACKAGE), method_map=[("**.py", "python")], keywords={"_": None})
    return {message for _, _, message, _, _ in found}


def call_sites() -> dict[str, set[str]]:
    """``file -> msgids`` of every ``_(...)`` call in attn_core, read with ``ast`` (fails on a non-literal argument)."""
    sites: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_":
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                assert len(node.args) == 1 and not node.keywords, f"{where}: _() takes one literal string"
                argument = node.args[0]
                assert isinstance(argument, ast.Constant) and isinstance(argument.value, str), (
                    f"{where}: _() needs a literal string (no f-string, no variable): pybabel extract reads literals"
                )
                sites.setdefault(str(path.relative_to(ROOT)), set()).add(argument.value)
    return sites


def fields(text: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}


def test_shipped_mo_is_the_compiled_po() -> None:
    for lang, locale in LOCALES.items():
        catalog = read_catalog(po_path(lang))
        compiled = io.BytesIO()
        write_mo(compiled, catalog)
        shipped = (LOCALE_DIR / locale / "LC_MESSAGES" / f"{DOMAIN}.mo").read_bytes()
        expected, got = mo_entries(compiled.getvalue()), mo_entries(shipped)
        stale = sorted(str(key) for key in expected.keys() ^ got.keys()) + sorted(
            str(key) for key in expected.keys() & got.keys() if expected[key] != got[key]
        )
        assert not stale, (
            f"{locale}'s .mo differs from its .po in {len(stale)} entries (run `pybabel compile -d attn_core/locale "
            f"-D attn_core`): {stale[:5]}"
        )
        assert len(expected) > 1  # the header and at least one message


def test_po_covers_every_call_site_with_the_same_placeholders() -> None:
    sites = call_sites()
    in_code = set().union(*sites.values())
    assert in_code == extracted(), "pybabel extract and the ast disagree on the _() call sites"
    pot = {message.id for message in read_catalog(POT) if message.id}
    assert pot == in_code, (
        f"the .pot is out of date (`pybabel extract ...`, CONTRIBUTING.md): new {sorted(in_code - pot)[:3]}, "
        f"gone {sorted(pot - in_code)[:3]}"
    )
    for lang in LOCALES:
        translated = {m.id: m for m in read_catalog(po_path(lang)) if m.id}
        missing = sorted(msgid for msgid in in_code if msgid not in translated or not translated[msgid].string)
        assert not missing, f"{len(missing)} message(s) without a translation in {po_path(lang)}: {missing[:3]}"
        fuzzy = sorted(msgid for msgid in in_code if translated[msgid].fuzzy)
        assert not fuzzy, f"fuzzy (unchecked) translations: {fuzzy[:3]}"
        for msgid in in_code:
            text = translated[msgid].string
            assert fields(text) == fields(msgid), (msgid, text)


def test_modules_that_use_underscore_never_rebind_it() -> None:
    # `for _, x in pairs` in a module (or function) that calls _() would replace the translation function
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imports = any(
            isinstance(node, ast.ImportFrom) and any(alias.name == "_" and alias.asname is None for alias in node.names)
            for node in ast.walk(tree)
        )
        if not imports:
            continue
        stores = [
            n.lineno for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "_" and isinstance(n.ctx, ast.Store)
        ]
        assert not stores, f"{path.relative_to(ROOT)} lines {stores}: name the throwaway something else than _"


def test_the_catalog_ships_in_the_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["attn_core"]
    for locale in LOCALES.values():
        shipped = f"locale/{locale}/LC_MESSAGES/{DOMAIN}.mo"
        assert any(fnmatch(shipped, pattern) for pattern in patterns), (shipped, patterns)


@pytest.fixture
def zh(monkeypatch):
    monkeypatch.setattr(i18n, "_audit", None)
    ac.set_language("zh")
    try:
        yield
    finally:
        ac.set_language("en")


def test_a_message_is_english_text_that_renders_in_chinese(zh, capsys) -> None:
    problem = _("pass the function itself (its name, no parentheses), got {type}.").format(type="Tensor")
    assert isinstance(problem, str) and problem == "pass the function itself (its name, no parentheses), got Tensor."
    assert i18n.translate(problem) == "请传入函数本身（只写函数名，不加括号），你传入的是 Tensor。"
    assert i18n.translate(problem, "en") == problem
    # a part made with _() is rendered too; an error shown as it is stays as it is
    wrapped = _(
        "could not grade this answer ({type}: {error}). Return what the exercise asks for (tensors of the "
        "stated shapes, or a number)."
    ).format(type="KeyError", error=NOT_DONE)
    assert "还没有作答" in i18n.translate(wrapped)
    verbatim = _("your function raised {type}: {error}").format(type="IndexError", error=foreign("index 3 is out"))
    assert i18n.translate(verbatim) == "你的函数抛出了 IndexError：index 3 is out"
    assert feedback("x", call_learner(42)[1]) is False
    assert capsys.readouterr().out == "❌ x：请传入函数本身（只写函数名，不加括号），你传入的是 int。\n"


def test_the_audit_sees_a_message_or_a_part_without_translation(monkeypatch) -> None:
    monkeypatch.setattr(i18n, "_audit", None)
    monkeypatch.setattr(i18n, "_lookup", lambda message: (message, False))  # without the old regex catalogs
    i18n.start_audit()
    known = _("your function raised {type}: {error}")
    unknown = Message("a message the catalog does not have")  # made like _() but never extracted
    i18n.verdict_line(NOT_DONE, known.format(type="ValueError", error="the learner's own text"))
    i18n.verdict_line(NOT_DONE, known.format(type="ValueError", error=unknown))
    assert i18n.stop_audit() == {"your function raised ValueError: a message the catalog does not have": 1}
    with pytest.raises(TypeError, match="named placeholders"):
        known.format("ValueError", "text")
