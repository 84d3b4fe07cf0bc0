"""What a learner hands a grader: the untouched stub, and junk a learner's function might return (every grader
must answer junk with one ❌ line, never an exception)."""

from __future__ import annotations

import torch


class Incomparable:
    def __eq__(self, other):
        raise RuntimeError("cannot compare me")

    __hash__ = None

    def __float__(self):
        raise RuntimeError("cannot convert me")


JUNK = [
    5,
    "text",
    [1, 2],
    (torch.zeros(1),),
    (None, None),
    torch.zeros(0),
    torch.full((2, 3), float("nan")),
    torch.zeros(2, 3, dtype=torch.complex64),
    torch.ones(3, 4, dtype=torch.int64),
    {"a": 1},
    Incomparable(),
]


def one_red_line(out: str) -> bool:
    return out.count("\n") == 1 and out.startswith("❌")


def stub(*args, **kwargs):
    raise NotImplementedError  # what the notebooks' stub cells do


def verdict(check, fn, capsys) -> tuple[bool, str]:
    """Run a grader on ``fn``: what it returned and the lines it printed."""
    ok = check(fn)
    return ok, capsys.readouterr().out


def has_chinese_entry(out: str) -> bool:
    """Whether the diagnosis in a ❌ line (after ``name: ``) has its entry in the Chinese catalogs."""
    from attn_core.i18n import get_language, set_language, translate

    message = out[out.index(": ") + 2 :].strip()
    before = get_language()
    set_language("zh")
    try:
        return translate(message) != message
    finally:
        set_language(before)
