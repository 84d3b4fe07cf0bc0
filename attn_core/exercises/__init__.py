"""Auto-checked exercises: ``check_…`` functions a learner calls on their answer.

Each notebook's checks live in the module named after its topic (``sdpa``,
``multi_head``, ``multi_query``, ``grouped_query``, ``masks_dropout``). A check never
raises on a wrong answer: it prints what is wrong (shape mismatch, numeric mismatch,
mask convention, ...) and returns ``False``, so a notebook with an unfinished exercise
still runs top to bottom. It prints a tick and returns ``True`` when the answer is right.
"""

from __future__ import annotations

__all__ = ["feedback", "NOT_DONE"]

NOT_DONE = "not attempted yet: replace the `...` / `raise NotImplementedError` with your answer and run the cell again."


def feedback(name: str, problem: str | None) -> bool:
    """Print the verdict of check ``name``: ``problem`` is None when the answer is right."""
    if problem is None:
        print(f"✅ {name}: correct.")
        return True
    print(f"❌ {name}: {problem}")
    return False
