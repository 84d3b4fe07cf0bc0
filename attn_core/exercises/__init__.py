"""Auto-checked exercises: ``check_…`` functions a learner calls on their answer.

Each notebook's checks live in the module named after its topic (``sdpa``,
``multi_head``, ``multi_query``, ``grouped_query``, ``masks_dropout``). A check never
raises on a wrong answer: it prints what is wrong (shape mismatch, numeric mismatch,
mask convention, ...) and returns ``False``, so a notebook with an unfinished exercise
still runs top to bottom. It prints a tick and returns ``True`` when the answer is right.

The checks share :func:`is_stub` and :func:`call_learner` to recognise an unfinished
answer and to run the learner's function without letting its crash escape.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["feedback", "NOT_DONE", "is_stub", "call_learner"]

NOT_DONE = "not attempted yet: replace the `...` / `raise NotImplementedError` with your answer and run the cell again."


def feedback(name: str, problem: str | None) -> bool:
    """Print the verdict of check ``name``: ``problem`` is None when the answer is right."""
    if problem is None:
        print(f"✅ {name}: correct.")
        return True
    print(f"❌ {name}: {problem}")
    return False


def is_stub(value) -> bool:
    """Is ``value`` an unfinished answer (``None`` or ``...``)?"""
    return value is None or value is Ellipsis


def call_learner(fn: Callable, /, *args, **kwargs) -> tuple[object, str | None]:
    """Call the learner's ``fn(*args, **kwargs)``: ``(result, None)``, or ``(None, problem)``.

    ``problem`` is :data:`NOT_DONE` for a stub (``fn`` is ``None``/``...``, raises
    ``NotImplementedError`` or returns ``None``/``...``), asks for the function itself when
    ``fn`` is not callable, and reports any other exception as
    "your function raised {Type}: {message}" instead of raising it.
    """
    if is_stub(fn):
        return None, NOT_DONE
    if not callable(fn):
        return None, f"pass the function itself (its name, no parentheses), got {type(fn).__name__}."
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError:
        return None, NOT_DONE
    except Exception as err:  # the learner's bug: report it, never crash the notebook
        return None, f"your function raised {type(err).__name__}: {err}"
    if is_stub(result):
        return None, NOT_DONE
    return result, None
