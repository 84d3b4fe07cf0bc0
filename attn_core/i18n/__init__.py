"""Learner-facing text in Chinese: ``ac.set_language("zh")`` (the Chinese notebooks' first cell sets it).

English stays the default and is never changed: every message is written in English where it is
produced, and translated only at the few points where a learner reads it (an exercise's ✅/❌ line,
an explorer's labels, explanation line and "Not possible" message).

A message is written with ``_()`` at its call site (``i18n/messages.py``): English text with named
placeholders whose Chinese is in the gettext catalog ``attn_core/locale/zh_CN/LC_MESSAGES/attn_core.po``
(compiled to the ``.mo`` beside it; CONTRIBUTING.md gives the translator's four commands). That is the
format for every new or changed message.

Messages not yet written with ``_()`` are translated by the older regex catalogs, which this package is
leaving (a plain string is looked up as a gettext msgid first, then in them). A regex catalog
entry is a regular expression that must match the WHOLE English message (``re.fullmatch``, DOTALL)
and a Chinese template that uses its named groups::

    (r"padding \\((?P<padding>\\d+)\\) must leave at least one real token of the (?P<length>\\d+)\\.",
     "填充长度（{padding}）必须至少留下 {length} 个词元中的一个真实词元。")

In a template, ``{name!t}`` translates the group itself through the catalogs (a message built from
parts, e.g. ``f"{where}: {problem}"``); if that part has no translation, the message counts as
untranslated. ``{name!o}`` translates the group where a translation exists and keeps it as it is
otherwise (e.g. a torch error inside "your function raised ..."). An optional group that did not
match is empty. A template may also be a function ``(match, tr) -> str`` (``tr`` = ``{…!t}``).

The catalogs are the modules ``attn_core/i18n/zh_*.py``, each with a list ``CATALOG`` of
``(pattern, template)`` pairs; the first entry that matches wins. They are searched in this
order: ``zh_exercises_*`` (the graders of each notebook, alphabetical), then the other modules
(``zh_viz``), then ``zh_common`` (the shared, most general messages of ``attn_core.exercises``).
A message no entry matches stays English.

Figures: ``set_language("zh")`` appends Chinese fonts to matplotlib's ``font.family``: the system's own
(Noto Sans CJK SC, PingFang SC, Microsoft YaHei, SimHei, WenQuanYi, ... whichever matplotlib finds), then the
subset shipped in ``attn_core/fonts`` (SIL OFL; GB2312 level 1 plus the edition's characters). Latin letters and
digits stay the learner's font; ``set_language("en")`` puts back the family of before. See ``i18n/fonts.py``.

``start_audit()`` makes every exercise verdict record the messages that have no complete Chinese
translation (tests/conftest.py turns it on for the test session; ``untranslated()`` reads them).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
import string
from collections.abc import Callable

from attn_core.i18n.fonts import SUBSET_FAMILY, SUBSET_FILE, restore_fonts, use_chinese_fonts
from attn_core.i18n.literal_prefix import literal_prefix
from attn_core.i18n.messages import Message, _, foreign, gettext_catalog

__all__ = [
    "_",
    "Message",
    "foreign",
    "LANGUAGES",
    "set_language",
    "get_language",
    "translate",
    "translation",
    "localize",
    "verdict_line",
    "exact",
    "catalog",
    "start_audit",
    "stop_audit",
    "untranslated",
]

LANGUAGES = ("en", "zh")
_language = "en"
CJK_FONT_FAMILY = SUBSET_FAMILY  # the shipped subset's own family name (never shadows a system font)
CJK_FONT_FILE = SUBSET_FILE

Template = str | Callable[..., str]


def set_language(lang: str) -> None:
    """Choose the language of attn_core's learner-facing messages: ``"en"`` (default) or ``"zh"``."""
    global _language
    if not isinstance(lang, str) or lang not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(map(repr, LANGUAGES))}, got {lang!r}.")
    _language = lang
    _set_figure_font(lang)


def _set_figure_font(lang: str) -> None:
    """Figures in ``lang``: Chinese fonts appended to the family for ``zh``; the family set before otherwise."""
    if lang == "zh":
        use_chinese_fonts()
    else:
        restore_fonts()


def get_language() -> str:
    """The language chosen with :func:`set_language` (``"en"`` unless changed)."""
    return _language


def exact(mapping: dict[str, str]) -> list[tuple[str, str]]:
    """Catalog entries for fixed strings (widget labels): each key matched literally."""
    return [(re.escape(english), chinese.replace("{", "{{").replace("}", "}}")) for english, chinese in mapping.items()]


def _module_order(name: str) -> tuple[int, str]:
    if name.startswith("zh_exercises_"):
        return 0, name
    return (2 if name == "zh_common" else 1), name


@functools.cache
def _entries() -> tuple[tuple[str, re.Pattern | str, Template, str, int], ...]:
    """Every ``(literal prefix, pattern as written, template, module name, index)`` in search order, uncompiled."""
    names = sorted(
        (info.name for info in pkgutil.iter_modules(__path__) if info.name.startswith("zh_")), key=_module_order
    )
    entries = []
    for name in names:
        module = importlib.import_module(f"{__name__}.{name}")
        for index, (pattern, template) in enumerate(module.CATALOG):
            source, flags = (pattern.pattern, pattern.flags) if isinstance(pattern, re.Pattern) else (pattern, 0)
            entries.append((literal_prefix(source, flags), pattern, template, name, index))
    return tuple(entries)


@functools.cache
def _compiled(position: int) -> tuple[re.Pattern, Template]:
    """Entry ``position`` of ``_entries()`` compiled and checked: a template may only name groups its pattern has."""
    _prefix, pattern, template, name, index = _entries()[position]
    compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, re.DOTALL)
    if isinstance(template, str):
        parsed = string.Formatter().parse(template)
        fields = {field.split(".")[0].split("[")[0] for _text, field, _spec, _conversion in parsed if field is not None}
        unknown = fields - set(compiled.groupindex)
        if unknown:
            raise ValueError(
                f"attn_core.i18n.{name}.CATALOG[{index}]: the template names {sorted(unknown)}, "
                f"which the pattern {compiled.pattern!r} does not define as named groups."
            )
    elif not callable(template):
        raise TypeError(f"attn_core.i18n.{name}.CATALOG[{index}]: a template is a str or a function.")
    return compiled, template


@functools.cache
def catalog() -> tuple[tuple[re.Pattern, Template, str], ...]:
    """Every ``(compiled pattern, template, module name)`` of the ``zh_*`` modules, in search order.

    Checked on load: a template may only name groups its pattern has (a ValueError names the module
    and the entry otherwise), so a catalog mistake shows in the first test that translates. (A lookup
    compiles only the entries whose literal prefix the message starts with: ``literal_prefix``.)
    """
    return tuple((*_compiled(position), entry[3]) for position, entry in enumerate(_entries()))


class _Translator(string.Formatter):
    """One translation: fills templates, follows ``!t`` / ``!o`` parts, remembers whether all were found."""

    def __init__(self) -> None:
        super().__init__()
        self.complete = True

    def tr(self, part: str | None) -> str:
        if not part:
            return ""
        text, found = _lookup(part)
        self.complete &= found
        return text

    def optional(self, part: str | None) -> str:
        return _lookup(part)[0] if part else ""

    def convert_field(self, value, conversion):
        if conversion == "t":
            return self.tr(value)
        if conversion == "o":
            return self.optional(value)
        return "" if value is None else super().convert_field(value, conversion)

    def format_field(self, value, format_spec):
        return "" if value is None else super().format_field(value, format_spec)


@functools.lru_cache(maxsize=8192)
def _lookup(message: str) -> tuple[str, bool]:
    """``(Chinese text, True)`` when every part of ``message`` has a translation, else ``(best effort, False)``."""
    exact_text = gettext_catalog("zh").get(message)  # a plain string that is a whole msgid of the gettext catalog
    if exact_text is not None:
        return exact_text, True
    for position, (prefix, *_entry) in enumerate(_entries()):
        if not message.startswith(prefix):  # cannot match: skip without compiling
            continue
        pattern, template = _compiled(position)
        match = pattern.fullmatch(message)
        if match is None:
            continue
        translator = _Translator()
        groups = match.groupdict()
        if isinstance(template, str):
            text = translator.vformat(template, (), groups)
        else:
            text = template(match, translator.tr)
        return text, translator.complete
    return message, False


def translation(message: str) -> str | None:
    """The Chinese translation of ``message``, or None when it (or a part of it) has none."""
    message = _recent.get(message, message) if type(message) is str else message
    if isinstance(message, Message) and message.complete("zh"):
        return message.render("zh", translate)
    text, found = _lookup(str(message))  # a plain string, or a Message the gettext catalog lacks: the regex catalogs
    return text if found else None


def translate(message: str, lang: str | None = None) -> str:
    """``message`` in ``lang`` (default: the current language); unchanged in English or without a translation."""
    if (lang or _language) == "en" or not isinstance(message, str):
        return message
    message = _recent.get(message, message) if type(message) is str else message
    try:
        if isinstance(message, Message):
            lang = lang or _language
            if message.complete(lang):
                return message.render(lang, translate)
            text, found = _lookup(str(message))  # the regex catalogs, while they last
            return text if found else message.render(lang, translate)
        return _lookup(str(message))[0]
    except Exception:  # a broken catalog entry must not break a learner's notebook (the tests' audit shows it)
        return message


def localize(message: str) -> str:
    """``message`` in the current language, recorded by the audit: for any other place that prints to learners."""
    _record(message)
    return translate(message)


def verdict_line(name: str, problem: str | None) -> str:
    """The line ``attn_core.exercises.feedback`` prints: ``✅ name: correct.`` / ``❌ name: problem``."""
    _record(name)
    if problem is not None:
        _record(problem)
    if _language == "en":
        return f"✅ {name}: correct." if problem is None else f"❌ {name}: {problem}"
    if problem is None:
        return f"✅ {translate(name)}：正确。"
    return f"❌ {translate(name)}：{translate(problem)}"


# ----------------------------------------------------------------------------- the audit
_audit: dict[str, int] | None = None


def start_audit() -> None:
    """From now on, remember every verdict message without a complete Chinese translation."""
    global _audit
    _audit = {} if _audit is None else _audit


def stop_audit() -> dict[str, int]:
    """Stop recording; return what was recorded (message -> how often it was printed)."""
    global _audit
    recorded, _audit = _audit or {}, None
    return recorded


def untranslated() -> dict[str, int]:
    """The messages recorded so far that have no complete translation (message -> times printed)."""
    return dict(_audit or {})


# The Message objects of the latest verdicts, by their English text: a test that read a printed ❌ line can ask
# translation() / translate() for the Chinese of that text (a plain string, no longer the Message).
_recent: dict[str, Message] = {}


def _record(message: str) -> None:
    if isinstance(message, Message):
        _recent.pop(message, None)
        _recent[str(message)] = message
        if len(_recent) > 1024:
            del _recent[next(iter(_recent))]
    if _audit is not None and isinstance(message, str) and translation(message) is None:
        _audit[message] = _audit.get(message, 0) + 1
