"""The catalog lookup compiles only the entries a message can match (``attn_core/i18n/literal_prefix.py``): the
literal prefix it uses is never longer than the one Python's regex parser finds, and a lookup returns exactly what
trying every entry in order returns."""

from __future__ import annotations

import re
import re._parser as sre_parse  # the parser behind re.compile: the reference for what a pattern starts with

import pytest

from attn_core import i18n
from attn_core.i18n.literal_prefix import literal_prefix
from attn_core.viz import rope, tiles, widgets


def parser_prefix(source: str, flags: int) -> str:
    """The leading run of literal characters as the regex parser sees it (case-insensitive: none)."""
    if flags & re.IGNORECASE:
        return ""
    out = []
    for op, argument in sre_parse.parse(source, flags):
        if op is not sre_parse.LITERAL:
            break
        out.append(chr(argument))
    return "".join(out)


def test_prefix_of_every_catalog_entry_is_safe() -> None:
    entries = i18n._entries()
    assert len(entries) > 500
    for prefix, pattern, _, module, index in entries:
        source, flags = (pattern.pattern, pattern.flags) if isinstance(pattern, re.Pattern) else (pattern, 0)
        reference = parser_prefix(source, flags | re.DOTALL)
        assert reference.startswith(prefix), f"{module}.CATALOG[{index}]: {prefix!r} is not a prefix of {reference!r}"
    assert sum(bool(prefix) for prefix, *_ in entries) > len(entries) / 2  # the filter does filter


@pytest.mark.parametrize(
    ("pattern", "flags", "prefix"),
    [
        ("abc", 0, "abc"),
        ("ab?c", 0, "a"),
        ("ab*", 0, "a"),
        ("ab{2}", 0, "a"),
        ("abc|abd", 0, ""),
        ("x(a|b)y", 0, "x"),
        ("[|]ab", 0, ""),
        ("a[]|]b|c", 0, ""),
        (r"a\.b\d", 0, "a.b"),
        (r"a\ b\n", 0, "a b"),
        (r"\(x\)", 0, "(x)"),
        ("(?i)abc", 0, ""),
        ("abc", re.IGNORECASE, ""),
        ("a b", re.VERBOSE, ""),
        (re.escape("KV cache: 1/4× of MHA\nquery head"), 0, "KV cache: 1/4× of MHA\nquery head"),
    ],
)
def test_literal_prefix_cases(pattern, flags, prefix) -> None:
    assert literal_prefix(pattern, flags) == prefix
    assert parser_prefix(pattern, flags).startswith(prefix)


def brute_force(message: str) -> tuple[str, bool]:
    """The lookup as it was: every compiled entry in order, the first full match wins."""
    for pattern, template, _ in i18n.catalog():
        match = pattern.fullmatch(message)
        if match is not None:
            translator = i18n._Translator()
            if isinstance(template, str):
                return translator.vformat(template, (), match.groupdict()), translator.complete
            return template(match, translator.tr), translator.complete
    return message, False


def messages() -> list[str]:
    """Messages of every kind: each literal entry's English, explanation lines, figure labels, and misses."""
    found = [re.sub(r"\\(.)", r"\1", source) for _, source, *_ in i18n._entries() if isinstance(source, str)]
    found = [m for m in found if re.escape(m) in {s for _, s, *_ in i18n._entries()}]  # the literal entries
    for kind in widgets.MASK_KINDS:
        found.append(widgets.explain_attention(mask_kind=kind, num_heads=8, num_kv_heads=2, dropout_p=0.3))
    found += [tiles.explain_tiles(step) for step in (0, 3, 9)] + [rope.explain_rope(pair=2)]
    found += ["head 3", "layer 2 (local, window 512) · head 1", "final −1.25", "'a': 7 tokens", "no entry has this"]
    return found


def test_lookup_equals_trying_every_entry() -> None:
    sample = messages()
    assert len(sample) > 300
    for message in sample:
        assert i18n._lookup(message) == brute_force(message), message
