"""Auto-checked exercises: ``check_…`` functions a learner calls on their answer.

Each notebook's checks live in the module named after its topic (``sdpa``,
``multi_head``, ``multi_query``, ``grouped_query``, ``masks_dropout``, ``rope``, ``mla``, ...); the drills in
``bug_hunt/`` (notebook 14, one module per family of bugs) and ``handwrite`` (notebook 16, gathering
``handwrite_sdpa``, ``handwrite_causal_mask``, ``handwrite_layers``, ``handwrite_rope``, ``handwrite_mla``).
A check never raises on a wrong answer: it prints what is wrong (shape mismatch, numeric mismatch,
mask convention, ...) and returns ``False``, so a notebook with an unfinished exercise
still runs top to bottom. It prints a tick and returns ``True`` when the answer is right.

The checks share :func:`is_stub` and :func:`call_learner` to recognise an unfinished
answer and to run the learner's function without letting its crash escape, and :func:`as_number`,
:func:`as_int` and :func:`as_int_list` to read a number or a list of ints whatever its type (a Python int,
a numpy integer from ``np.prod``, a one-element tensor, an integer array, ...).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import numbers
import re
import warnings
from collections.abc import Callable

import numpy as np
import torch

from attn_core import i18n
from attn_core.i18n import _, foreign

__all__ = ["feedback", "NOT_DONE", "is_stub", "call_learner", "never_raises", "as_number", "as_int", "as_int_list"]

NOT_DONE = _(
    "not attempted yet: replace the `...` / `raise NotImplementedError` with your answer and run the cell again."
)


def feedback(name: str, problem: str | None) -> bool:
    """Print the verdict of check ``name``: ``problem`` is None when the answer is right.

    The one place a verdict is printed, so the one place it is translated (``ac.set_language("zh")``).
    """
    print(i18n.verdict_line(name, problem))
    return problem is None


def is_stub(value) -> bool:
    """Is ``value`` an unfinished answer (``None`` or ``...``)?"""
    return value is None or value is Ellipsis


# Where the learner's warnings were already shown: a check calls the answer several times, and a
# warning from one line of it should appear once, as it would without the check.
_SHOWN: set[tuple] = set()


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
        return None, _("pass the function itself (its name, no parentheses), got {type}.").format(
            type=type(fn).__name__
        )
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn(*args, **kwargs)
    except NotImplementedError:
        return None, NOT_DONE
    except RuntimeError as err:
        if "x.T" in str(err) or any("x.T" in str(w.message) for w in caught) or _uses_dot_t(fn):
            return None, _(
                "your function raised RuntimeError: {error} Hint: k.T reverses ALL axes of a batched tensor "
                "((B, L, d) -> (d, L, B)); use k.transpose(-2, -1) (or k.mT) to swap only the last two."
            ).format(error=foreign(err))
        return None, _("your function raised {type}: {error}").format(type="RuntimeError", error=foreign(err))
    except TypeError as err:
        if kwargs and "unexpected keyword argument" in str(err):  # a renamed parameter
            names = ", ".join(f"`{name}`" for name in kwargs)
            message = (
                _(
                    "keep the parameter names of the exercise: name the arguments {names}, "
                    "the check passes them by name (your function raised TypeError: {error})."
                )
                if len(kwargs) > 1
                else _(
                    "keep the parameter names of the exercise: name the argument {names}, "
                    "the check passes it by name (your function raised TypeError: {error})."
                )
            )
            return None, message.format(names=names, error=str(err))
        return None, _("your function raised {type}: {error}").format(type="TypeError", error=foreign(err))
    except Exception as err:  # the learner's bug: report it, never crash the notebook
        return None, _("your function raised {type}: {error}").format(type=type(err).__name__, error=foreign(err))
    finally:  # after the recording context: hand the learner's own warnings on to the notebook
        for warning in caught:
            key = (str(warning.message), warning.category, warning.filename, warning.lineno)
            if key in _SHOWN:
                continue
            _SHOWN.add(key)
            with contextlib.suppress(Warning):  # a filter that turns warnings into errors must not escape
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    if is_stub(result):
        return None, NOT_DONE
    return result, None


def as_number(value) -> int | float | None:
    """A learner's number as a Python ``int`` or ``float``, or None when it is not one real number.

    Accepted: ``int``, ``float``, numpy scalars (``np.int64`` from ``np.prod``, ``np.float32``, ... : they are
    ``numbers.Real``), and a one-element real tensor or numpy array. Refused: ``bool`` (``True`` is not a count),
    complex numbers, text, several numbers. Integers come back as ``int``, the rest as ``float``.
    """
    if isinstance(value, torch.Tensor | np.ndarray):
        if (value.size if isinstance(value, np.ndarray) else value.numel()) != 1:
            return None
        value = value.item()  # a Python bool, int, float or complex
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        return None
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def as_int(value) -> int | None:
    """:func:`as_number`, kept only when it is a whole number (``3.0`` counts as ``3``); None otherwise."""
    number = as_number(value)
    if isinstance(number, float):
        return int(number) if number.is_integer() else None
    return number


def as_int_list(value) -> list[int] | None:
    """A learner's list of ints: a list, tuple or range of whole numbers (each read by :func:`as_int`), or a 1-D
    tensor or numpy array of them; None otherwise (a set has no order, a 2-D tensor is not a list)."""
    if isinstance(value, torch.Tensor | np.ndarray):
        if value.ndim != 1:
            return None
        value = value.tolist()
    if not isinstance(value, list | tuple | range):
        return None
    values = [as_int(item) for item in value]
    return None if any(item is None for item in values) else values


def _uses_dot_t(fn: Callable) -> bool:
    """Does the source of ``fn`` use ``.T``? (torch warns about ``.T`` on a batch only once per process.)"""
    for obj in (fn, type(fn)):
        try:
            return re.search(r"\.T\b", inspect.getsource(obj)) is not None
        except (OSError, TypeError):  # a builtin, or code typed where no source is kept
            continue
    return False


def never_raises(name: str) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
    """Decorate a ``check_…``: an answer so unexpected that grading it fails still gets a verdict.

    The checks handle every answer they foresee; this is the net under them, so that a notebook
    never stops at a check whatever the learner returned (an exotic type, an object whose
    comparison raises, ...).
    """

    def decorate(check: Callable[..., bool]) -> Callable[..., bool]:
        @functools.wraps(check)
        def guarded(*args, **kwargs) -> bool:
            try:
                return check(*args, **kwargs)
            except Exception as err:  # the answer broke the grader itself: say so, do not raise
                problem = _(
                    "could not grade this answer ({type}: {error}). "
                    "Return what the exercise asks for (tensors of the stated shapes, or a number)."
                )
                return feedback(name, problem.format(type=type(err).__name__, error=foreign(err)))

        return guarded

    return decorate
