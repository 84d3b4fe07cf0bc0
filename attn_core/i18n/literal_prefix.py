"""The literal text every match of a catalog pattern starts with: what lets a lookup skip most entries uncompiled.

The catalogs hold ~1,000 regular expressions; compiling all of them took ~1.5 s, paid by the first Chinese message
(or figure label) of every notebook. A message can only fullmatch a pattern if it starts with the pattern's leading
literal text, so ``attn_core.i18n`` compiles an entry only when a message starts with that text. The prefix must
never be longer than the true one (a translation would be skipped): this scanner stops at the first character it is
not sure of, and ``tests/test_cjk_font.py`` checks it against Python's own regex parser on every catalog entry.
"""

from __future__ import annotations

import re

__all__ = ["literal_prefix"]

_META = frozenset(".^$*+?{}[]|()")
_QUANTIFIERS = frozenset("*+?{")


def _top_level_alternation(pattern: str) -> bool:
    """Whether ``pattern`` has a ``|`` outside every group and character class (then no prefix is shared)."""
    depth, in_class, i = 0, False, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            i += 1 + (pattern[i + 1 : i + 2] == "^")
            i += pattern[i : i + 1] == "]"  # "[]...]" and "[^]...]": the first "]" is a literal
            continue
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return True
        i += 1
    return False


def literal_prefix(pattern: str, flags: int = 0) -> str:
    """The leading literal text of ``pattern`` (possibly shorter than the longest true one; never longer)."""
    if flags & (re.IGNORECASE | re.VERBOSE) or _top_level_alternation(pattern):
        return ""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            escaped = pattern[i + 1 : i + 2]
            if not escaped or escaped.isalnum():  # \d, \s, \b, \n, \1, ...: a class, an anchor or a back-reference
                break
            literal, step = escaped, 2
        elif char in _META:
            break
        else:
            literal, step = char, 1
        if pattern[i + step : i + step + 1] in _QUANTIFIERS and i + step < len(pattern):
            break  # "ab?" or "ab{2}": the last character is optional or repeated
        out.append(literal)
        i += step
    return "".join(out)
