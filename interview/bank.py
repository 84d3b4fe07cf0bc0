"""Load and check the interview question bank (interview/questions.yaml), shared by the exporters and the tests."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BANK = ROOT / "interview" / "questions.yaml"
NOTEBOOKS = ROOT / "notebooks"
STAR = "★"


class BankError(ValueError):
    """The bank breaks one of its rules (a missing field, an unknown topic, a dangling link)."""


def load(path: Path = BANK) -> dict:
    bank = yaml.safe_load(path.read_text(encoding="utf-8"))
    check(bank)
    return bank


def stars(card: dict) -> str:
    return STAR * card["stars"]


@cache
def headings(notebook: str) -> tuple[str, ...]:
    cells = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text(encoding="utf-8"))["cells"]
    return tuple(
        line[3:].strip()
        for cell in cells
        if cell["cell_type"] == "markdown"
        for line in "".join(cell["source"]).splitlines()
        if line.startswith("## ")
    )


def check(bank: dict) -> None:
    """Structural rules: every card has both languages, a known topic, ★ 1–3 with its sources, a teaching link, and
    either code to run or a proof cell in a notebook."""
    topics, sources = bank["topics"], bank["sources"]
    seen = set()
    for card in bank["cards"]:
        where = card.get("id", "?")
        if where in seen:
            raise BankError(f"{where}: duplicate id")
        seen.add(where)
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", where):
            raise BankError(f"{where}: ids are lowercase letters, digits and '-'")
        for language in ("en", "zh"):
            if not card.get(language, {}).get("q") or not card[language].get("a"):
                raise BankError(f"{where}: needs a question and an answer in {language!r}")
        if card["topic"] not in topics:
            raise BankError(f"{where}: unknown topic {card['topic']!r}")
        if card.get("stars") not in (1, 2, 3):
            raise BankError(f"{where}: stars must be 1, 2 or 3")
        if not card.get("stars_from") or any(s not in sources for s in card["stars_from"]):
            raise BankError(f"{where}: stars_from must name entries of 'sources'")
        if not card.get("teaches", {}).get("notebook"):
            raise BankError(f"{where}: needs teaches.notebook")
        if ("code" in card) == ("proof" in card):
            raise BankError(f"{where}: needs exactly one of 'code' (run by the test) or 'proof' (a notebook cell)")
