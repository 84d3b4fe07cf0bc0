"""Notebook 14's learner API: ``BUGS`` in the notebook's order, ``check_bug``, ``show_bug`` and the scoreboard.

Nothing here raises on a wrong answer: a crash in the learner's code becomes a readable problem.
"""

from __future__ import annotations

from collections.abc import Mapping

from attn_core.exercises import NOT_DONE, feedback, is_stub
from attn_core.exercises.bug_hunt.common import Bug
from attn_core.exercises.bug_hunt.layer_bugs import LAYER_BUGS
from attn_core.exercises.bug_hunt.mla_bugs import MLA_BUGS
from attn_core.exercises.bug_hunt.rope_bugs import ROPE_BUGS
from attn_core.exercises.bug_hunt.sdpa_bugs import SDPA_BUGS
from attn_core.i18n import localize

# The notebook's order (bug 1 first): the scoreboard and the figure of notebook 14 number the bugs by it.
ORDER = (
    "scale_by_model_dim",
    "value_from_key_proj",
    "flipped_mask",
    "neg_inf_nan",
    "softmax_wrong_dim",
    "mask_after_softmax",
    "dropout_before_softmax",
    "dropout_in_eval",
    "view_without_contiguous",
    "gqa_repeat",
    "mask_not_per_head",
    "causal_top_left",
    "rope_positions_restart",
    "rope_on_values",
    "rope_layout",
    "mla_rope_absorbed",
    "mla_absorb_wuv_transpose",
    "mla_cache_up_projected",
)
_ALL = {**LAYER_BUGS, **SDPA_BUGS, **ROPE_BUGS, **MLA_BUGS}
BUGS: dict[str, Bug] = {bug_id: _ALL[bug_id] for bug_id in ORDER}


def _find(bug_id: str) -> tuple[Bug | None, str | None]:
    bug = BUGS.get(bug_id)
    if bug is None:
        return None, f"unknown bug id {bug_id!r}; the ids are: {', '.join(BUGS)}."
    return bug, None


def _problem(bug: Bug, impl) -> str | None:
    """The probe's verdict; never raises."""
    if is_stub(impl):
        return NOT_DONE
    if impl is bug.buggy:
        return "that is still the original buggy code: pass your fixed version."
    try:
        return bug.probe(impl)
    except Exception as err:  # a probe must never crash the notebook
        return f"could not run your code ({type(err).__name__}: {err})."


def check_bug(bug_id: str, impl) -> bool:
    """Run bug ``bug_id``'s test on ``impl`` (your fixed function or class): ✅ or what is still wrong."""
    bug, error = _find(bug_id)
    if error:
        return feedback("check_bug", error)
    return feedback(f"check_bug({bug_id!r})", _problem(bug, impl))


def show_bug(bug_id: str) -> bool:
    """Run bug ``bug_id``'s test on its buggy implementation and print what it finds (never raises)."""
    bug, error = _find(bug_id)
    if error:
        return feedback("show_bug", error)
    try:
        problem = bug.probe(bug.buggy)
    except Exception as err:
        problem = f"could not run the probe ({type(err).__name__}: {err})."
    return feedback(f"test {bug_id!r} on the buggy code", problem)


def bug_report(fixes: Mapping[str, object]) -> int:
    """Print the scoreboard for ``fixes`` (bug id -> your fixed implementation); return how many are fixed."""
    lines, fixed = [], 0
    for bug_id, bug in BUGS.items():
        problem = _problem(bug, fixes.get(bug_id))
        if problem is None:
            fixed += 1
            lines.append(f"  ✅ {bug_id}")
        elif problem == NOT_DONE:
            lines.append(localize(f"  ⬜ {bug_id}: not attempted"))
        else:
            lines.append(localize(f"  ❌ {bug_id}: still failing"))
    print(localize(f"fixed {fixed}/{len(BUGS)}"))  # localize: the Chinese edition prints the board in Chinese
    print("\n".join(lines))
    return fixed


def check_all(namespace: Mapping[str, object]) -> int:
    """Scoreboard from a namespace (pass ``globals()``): bug ``id``'s fix is the name ``fixed_<id>``."""
    return bug_report({bug_id: namespace.get(f"fixed_{bug_id}") for bug_id in BUGS})
