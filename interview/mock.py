"""The timed mock interview of notebook 18 (issue #38 §3): draw, time, grade with hidden tests, record, reset.

``Mock(seed=0)`` draws hand-write problems from ``mock_problems.POOL`` and concept questions from the bank
(``questions.yaml``); a fixed seed gives the same draw every time (the notebook's default, so nbval is deterministic),
``seed=None`` a random one (its seed is recorded, so the draw can be replayed). The candidate writes the functions
from ``reset()``'s blank stubs and hands them in with ``submit``; nothing is graded until ``finish()`` (the timer's
Finish button, or time up): then each answer runs through its ``attn_core.exercises`` grader, whose cases the
candidate never sees, and the report shows each diagnosis and every question's answer. Each finished attempt is
appended to a JSON progress file (``progress_path``, else ``$ATTN_MOCK_PROGRESS``, else
``~/.attn_notebooks/mock_progress.json``), so the score carries across evenings; nothing is written before
``finish()``. The timer is ipywidgets only: a ``Play`` widget ticks once a second in the front end, a ``Label`` shows
the time left (no thread, no custom JavaScript).

One piece: one mock's life (draw, answers, grading, record, timer) and the progress file it writes, over 300 lines
only because each step's text comes in two languages.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import random
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bank.py and mock_problems.py sit next to this file

import bank as interview_bank  # noqa: E402
from mock_problems import POOL, PROBLEMS  # noqa: E402

from attn_core import i18n  # noqa: E402

__all__ = ["Mock", "Progress", "default_progress_path", "POOL", "PROBLEMS"]

_TEXT = {
    "title": ("Mock interview · seed {seed} · {minutes} minutes", "模拟面试 · 种子 {seed} · {minutes} 分钟"),
    "handwrite": ("Hand-write ({n}): write each from its blank stub.", "手撕代码（{n} 题）：从空白模板写起。"),
    "questions": ("Concept questions ({n}): answer aloud first.", "概念题（{n} 题）：先大声说出你的答案。"),
    "graded": ("Hand-write, graded by hidden tests:", "手撕代码，由隐藏测试评分："),
    "answers": ("Concept questions and their answers:", "概念题及其答案："),
    "score": ("Score: {passed} / {total} hand-write problems.", "得分：手撕代码 {passed} / {total} 题。"),
    "time_up": ("Time is up.", "时间到。"),
    "teaches": ("taught in {notebook}, {section}", "讲解见 {notebook}，{section}"),
    "history": (
        "Progress: {attempts} finished attempt(s) in this file.",
        "进度：此文件中共有 {attempts} 次完成的模拟。",
    ),
    "per_problem": (
        "  {id}: passed {passed} of {tried}, last {last}",
        "  {id}：{tried} 次中通过 {passed} 次，最近一次 {last}",
    ),
    "pending": (
        "Not graded yet: press Finish (or run mock.finish()).",
        "尚未评分：点击 Finish（或运行 mock.finish()）。",
    ),
    "fallback": (
        "⏱ {clock} left. The timer counts down in a running kernel (JupyterLab or VS Code): press ▶ to start, "
        "Finish to grade. Without widgets, time yourself and run mock.finish().",
        "⏱ 剩余 {clock}。计时器在运行中的内核里倒计时（JupyterLab 或 VS Code）：按 ▶ 开始，按 Finish 评分。"
        "没有小部件时请自己计时，然后运行 mock.finish()。",
    ),
}


@functools.cache
def _cards() -> dict[str, dict]:
    """The bank's cards by id, loaded once, with libyaml where it is built in (pure-Python parsing takes seconds;
    the bank's rules are tests/test_interview_bank.py's job, not the notebook's)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    bank = yaml.load(interview_bank.BANK.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 (a safe loader)
    return {card["id"]: card for card in bank["cards"]}


def _plain(text: str) -> str:
    """A bank question without its inline HTML (a few questions are bold or hold <code>)."""
    return re.sub(r"</?(?:b|i|em|strong|code)>", "", text)


def _t(key: str, **fields) -> str:
    english, chinese = _TEXT[key]
    return (chinese if i18n.get_language() == "zh" else english).format(**fields)


def default_progress_path() -> Path:
    """``$ATTN_MOCK_PROGRESS`` when set, else ``~/.attn_notebooks/mock_progress.json``."""
    return Path(os.environ.get("ATTN_MOCK_PROGRESS") or Path.home() / ".attn_notebooks" / "mock_progress.json")


class Progress:
    """The JSON progress file: ``{"version": 1, "attempts": [...]}``, one entry per finished mock."""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else default_progress_path()

    def load(self) -> dict:
        if not self.path.exists():
            return {"version": 1, "attempts": []}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{self.path} is not a mock progress file (invalid JSON: {err}); move it away.") from err
        if not isinstance(data, dict) or not isinstance(data.get("attempts"), list):
            raise ValueError(f"{self.path} is not a mock progress file (no 'attempts' list); move it away.")
        return data

    def record(self, attempt: dict) -> None:
        data = self.load()
        data["attempts"].append(attempt)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".tmp")
        partial.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(partial, self.path)  # a crash mid-write leaves the old file whole

    def summary(self) -> str:
        attempts = self.load()["attempts"]
        lines = [_t("history", attempts=len(attempts))]
        seen: dict[str, list[bool]] = {}
        for attempt in attempts:
            for problem_id, result in attempt["problems"].items():
                seen.setdefault(problem_id, []).append(bool(result["passed"]))
        for problem_id, results in sorted(seen.items()):
            last = "✅" if results[-1] else "❌"
            lines.append(_t("per_problem", id=problem_id, passed=sum(results), tried=len(results), last=last))
        return "\n".join(lines)


class Mock:
    """One mock interview: a draw, the submitted answers, a timer, and ``finish()`` grading them.

    ``problems`` / ``questions`` (ids) replace the draw; ``pool`` limits it to some problem ids.
    """

    def __init__(
        self,
        seed: int | None = 0,
        *,
        num_problems: int = 2,
        num_questions: int = 3,
        minutes: int | None = None,
        progress_path: str | os.PathLike | None = None,
        problems: list[str] | None = None,
        questions: list[str] | None = None,
        pool: list[str] | None = None,
    ) -> None:
        if seed is None:
            seed = random.SystemRandom().randrange(2**31)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int (or None for a random draw), got {seed!r}.")
        self.seed = seed
        rng = random.Random(seed)
        cards = _cards()
        for name, ids, known in (
            ("problems", problems, PROBLEMS),
            ("questions", questions, cards),
            ("pool", pool, PROBLEMS),
        ):
            unknown = [i for i in ids or [] if i not in known]
            if unknown:
                raise ValueError(f"unknown {name} {unknown}; known: {sorted(known)}.")
        candidates = sorted(pool or PROBLEMS)
        if problems is None:
            problems = rng.sample(candidates, min(num_problems, len(candidates)))
        if questions is None:
            frequent = sorted(i for i, card in cards.items() if card["stars"] >= 2 and card["topic"] != "hand-write")
            questions = rng.sample(frequent, min(num_questions, len(frequent)))
        self.problems = [PROBLEMS[i] for i in problems]
        self.questions = [cards[i] for i in questions]
        self.minutes = minutes if minutes is not None else sum(p.minutes for p in self.problems) + 3 * len(questions)
        self.progress = Progress(progress_path)
        self.answers: dict[str, object] = {}
        self.ratings: dict[str, bool] = {}
        self.result: dict | None = None
        self._started = time.monotonic()
        self._clocks: list = []  # the Play widgets of this mock's timers (reset rewinds them)

    # ------------------------------------------------------------------ the candidate's side
    def brief(self) -> str:
        """What the candidate sees: the problems' statements and the questions (no answer, no test case)."""
        zh = i18n.get_language() == "zh"
        lines = [_t("title", seed=self.seed, minutes=self.minutes), "", _t("handwrite", n=len(self.problems))]
        for number, problem in enumerate(self.problems, 1):
            minutes = f"{problem.minutes} 分钟" if zh else f"{problem.minutes} min"
            lines.append(f"  {number}. {problem.name} [{minutes}] {problem.zh if zh else problem.en}")
        lines += ["", _t("questions", n=len(self.questions))]
        for number, card in enumerate(self.questions, 1):
            lines.append(f"  {number}. {interview_bank.stars(card)} {_plain(card['zh' if zh else 'en']['q'])}")
        return "\n".join(lines)

    def reset(self, *, insert_cell: bool = True) -> str:
        """Forget every submitted answer and return the blank stubs (one cell's source). In a live front end that
        supports it (JupyterLab, classic Notebook) the stubs also appear as a new cell below the current one."""
        self.answers.clear()
        self.ratings.clear()
        self.result = None
        self._started = time.monotonic()
        for play in self._clocks:  # a timer already on screen starts again from the full time
            play.playing, play.value = False, 0
        source = "\n\n".join(p.stub() for p in self.problems)
        submit = ", ".join(p.name for p in self.problems)
        source += f"\n\nmock.submit({submit})\n"
        if insert_cell:
            with contextlib.suppress(Exception):  # no IPython, or a front end without the payload: print only
                get_ipython().set_next_input(source)  # type: ignore[name-defined]  # noqa: F821
        return source

    def submit(self, *answers, **by_id) -> None:
        """Hand in answers, by name (``submit(sink_softmax)``) or by problem id (``submit(sinks=fn)``); no verdict."""
        names = {p.name: p.id for p in self.problems}
        for answer in answers:
            name = getattr(answer, "__name__", None)
            if name not in names:
                raise ValueError(f"{name!r} is none of this mock's answers {sorted(names)}; submit(problem_id=fn).")
            by_id[names[name]] = answer
        drawn = {p.id for p in self.problems}
        for problem_id, answer in by_id.items():
            if problem_id not in drawn:
                raise ValueError(f"{problem_id!r} is not in this mock; its problems are {sorted(drawn)}.")
            self.answers[problem_id] = answer

    def rate(self, card_id: str, knew: bool) -> None:
        """Self-grade a concept question (recorded with the attempt)."""
        if card_id not in {card["id"] for card in self.questions}:
            raise ValueError(f"{card_id!r} is not one of this mock's questions.")
        self.ratings[card_id] = bool(knew)

    # ------------------------------------------------------------------ grading
    def finish(self, ended_by: str = "finish") -> str:
        """Grade every answer with its hidden tests, record the attempt, return the report (once: later calls
        return the same report)."""
        if self.result is None:
            graded = {}
            for problem in self.problems:
                printed = io.StringIO()
                with contextlib.redirect_stdout(printed):  # the verdict is shown in the report, not before
                    passed = problem.grader()(self.answers.get(problem.id))
                graded[problem.id] = {"passed": bool(passed), "verdict": printed.getvalue().strip()}
            self.result = {
                "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "seed": self.seed,
                "ended_by": ended_by,
                "minutes": self.minutes,
                "elapsed_s": round(time.monotonic() - self._started, 1),
                "problems": graded,
                "questions": {card["id"]: self.ratings.get(card["id"]) for card in self.questions},
                "score": [sum(r["passed"] for r in graded.values()), len(graded)],
            }
            self.progress.record(self.result)
        return self.report()

    def report(self) -> str:
        if self.result is None:
            return _t("pending")
        zh = i18n.get_language() == "zh"
        lines = [_t("time_up")] if self.result["ended_by"] == "time" else []
        lines.append(_t("graded"))
        lines += [f"  {self.result['problems'][p.id]['verdict']}" for p in self.problems]
        lines += ["", _t("answers")]
        for number, card in enumerate(self.questions, 1):
            side = card["zh" if zh else "en"]
            where = _t("teaches", notebook=card["teaches"]["notebook"], section=card["teaches"]["section"])
            lines += [
                f"  {number}. {_plain(side['q'])}",
                *(f"     {line}" for line in side["a"].splitlines()),
                f"     ({where})",
            ]
        passed, total = self.result["score"]
        lines += ["", _t("score", passed=passed, total=total)]
        return "\n".join(lines)

    # ------------------------------------------------------------------ the timer
    @staticmethod
    def clock(seconds: int) -> str:
        return f"{max(seconds, 0) // 60:02d}:{max(seconds, 0) % 60:02d}"

    def timer(self):
        """The visible timer: ▶ starts it, the label counts down, Finish (or time up) grades and shows the report."""
        import ipywidgets as widgets

        total = self.minutes * 60
        play = widgets.Play(value=0, min=0, max=total, step=1, interval=1000, show_repeat=False)
        label = widgets.Label(f"⏱ {self.clock(total)}")
        finish = widgets.Button(description="Finish", button_style="warning")
        report = widgets.Output()

        def done(ended_by: str) -> None:
            if self.result is not None:
                return
            play.playing = False
            text = self.finish(ended_by)
            with report:
                print(text)

        def tick(change) -> None:
            label.value = f"⏱ {self.clock(total - change['new'])}"
            if change["new"] >= total:
                done("time")

        play.observe(tick, "value")
        self._clocks.append(play)
        finish.on_click(lambda _: done("finish"))
        return _Timer(
            widgets.VBox([widgets.HBox([play, label, finish]), report]), _t("fallback", clock=self.clock(total))
        )


class _Timer:
    """The timer's widget, stored with a static line for front ends without a kernel (as the explorers do)."""

    def __init__(self, widget, line: str) -> None:
        self.widget, self.line = widget, line

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
        view = {"version_major": 2, "version_minor": 0, "model_id": ""}  # no live model: Lab hides it
        display({"application/vnd.jupyter.widget-view+json": view, "text/plain": self.line}, raw=True)
