"""``_()``: a learner-facing message written once, in English, where it is made; its Chinese is in a gettext catalog.

``_("padding ({padding}) must leave at least one real token of the {length}.").format(padding=3, length=5)`` is a
:class:`Message`: a ``str`` whose value is the English text (so English output, comparisons and tests see exactly
what they saw before), which also remembers its msgid and its fields. It is put into another language only where a
learner reads it (``verdict_line``, ``localize``, an explorer's labels): the msgid's translation is looked up in
``attn_core/locale/<locale>/LC_MESSAGES/attn_core.mo`` (stdlib :mod:`gettext`) and filled with the fields, each
field that is itself a :class:`Message` rendered the same way. Composition therefore works whatever the order of
construction: build the parts with ``_()`` and pass them as fields (never glue them with an f-string or ``+``:
the result is a plain ``str``, which only the old regex catalogs can translate, and the audit lists it).

A field that is text made elsewhere (an exception message of torch or of attn_core, shown as it is) goes in
verbatim; wrap it in :func:`foreign` to have it translated where a catalog happens to know it (``{x!o}`` of the
regex catalogs).

The catalog is compiled from ``attn_core.po`` by ``pybabel compile`` (the translator's workflow: CONTRIBUTING.md);
``tests/test_gettext_catalog.py`` fails when the shipped ``.mo`` differs from its ``.po`` or when a ``_()`` call
site is missing from them.
"""

from __future__ import annotations

import functools
import gettext
from collections.abc import Callable
from pathlib import Path

__all__ = ["Message", "foreign", "_", "LOCALE_DIR", "DOMAIN", "LOCALES", "gettext_catalog"]

LOCALE_DIR = Path(__file__).resolve().parents[1] / "locale"
DOMAIN = "attn_core"
LOCALES = {"zh": "zh_CN"}  # attn_core's language code -> the gettext locale of its catalog


@functools.cache
def gettext_catalog(lang: str) -> dict[str, str]:
    """``msgid -> translation`` of ``lang``'s compiled catalog (empty for English or a language without one)."""
    locale = LOCALES.get(lang)
    if locale is None:
        return {}
    try:
        with open(LOCALE_DIR / locale / "LC_MESSAGES" / f"{DOMAIN}.mo", "rb") as file:
            translations = gettext.GNUTranslations(file)
    except FileNotFoundError:
        return {}
    return {msgid: text for msgid, text in translations._catalog.items() if isinstance(msgid, str) and msgid}


class Message(str):
    """English text from ``_()`` (optionally ``.format``-ed) that knows how to say itself in another language."""

    msgid: str
    fields: dict[str, object]
    formatted: bool

    def __new__(cls, msgid: str, fields: dict[str, object] | None = None) -> Message:
        self = super().__new__(cls, msgid if fields is None else str.format(msgid, **fields))
        self.msgid, self.fields, self.formatted = msgid, dict(fields or {}), fields is not None
        return self

    def format(self, *args, **kwargs) -> Message:  # noqa: A003 (str.format with the fields remembered)
        if args:
            raise TypeError("_() messages take named placeholders only: _('... {name} ...').format(name=...).")
        if self.formatted:
            raise TypeError("this message is already formatted.")
        return Message(self.msgid, kwargs)

    def render(self, lang: str, foreign_text: Callable[[str, str], str] | None = None) -> str:
        """The message in ``lang``: its catalog's translation filled with the fields, English where there is none.

        ``foreign_text(text, lang)`` translates a :func:`foreign` field where it can (``i18n.translate`` passes the
        regex catalogs' lookup); without it such a field stays as it is.
        """
        template = gettext_catalog(lang).get(self.msgid, self.msgid)
        values = {name: _render(value, lang, foreign_text) for name, value in self.fields.items()}
        try:
            return template.format(**values) if self.formatted else template
        except (KeyError, IndexError, ValueError):  # a broken translation must not break a notebook (tests catch it)
            return str(self)

    def complete(self, lang: str) -> bool:
        """Has ``lang`` a translation of this message and of every part of it made with ``_()``?"""
        if self.msgid not in gettext_catalog(lang):
            return False
        return all(value.complete(lang) for value in self.fields.values() if isinstance(value, Message))

    def __reduce__(self):
        return Message, (self.msgid, self.fields if self.formatted else None)


class foreign(str):  # noqa: N801 (used like a conversion: foreign(str(err)))
    """Text made outside ``_()`` (a torch or attn_core error): shown as it is, translated where a catalog knows it."""


def _render(value: object, lang: str, foreign_text: Callable[[str, str], str] | None) -> object:
    if isinstance(value, Message):
        return value.render(lang, foreign_text)
    if isinstance(value, foreign) and foreign_text is not None:
        return foreign_text(str(value), lang)
    return value


def _(msgid: str) -> Message:
    """Mark ``msgid`` (a literal: ``pybabel extract`` reads it) as learner-facing text; see the module docstring."""
    return Message(msgid)
