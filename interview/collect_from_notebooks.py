"""One-time import that seeded interview/questions.yaml (issue #38); kept so the import can be audited or redone.

The bank is the source of truth afterwards: notebook 17 is generated from it (interview/build_cheat_sheet.py), and the
folded questions stay in their notebooks, where tests/test_interview_bank.py checks the bank still matches them.
Run: python interview/collect_from_notebooks.py > /tmp/imported.yaml (it never overwrites the bank), or, after a
notebook's folded questions changed, `python interview/collect_from_notebooks.py --sync` (refreshes those cards in
the bank; tests/test_interview_bank.py says when) and `python interview/build_cheat_sheet.py`.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ZH = NOTEBOOKS / "zh"
CHEAT = "17_interview_cheat_sheet"
HAND_WRITTEN_17 = "9d410b5"  # the last commit with the hand-written notebook 17
DETAILS = re.compile(r"<details><summary>(.*?)</summary>\s*(.*?)\s*</details>", re.S)
QUESTION = re.compile(r"^### Q(\d+) · (.*?) · (.*?) · (★+)\s*\n+(.*)", re.S)
NUMBER = re.compile(r"^\s*\d+\.\s*")  # "3. Why …" in the notebooks: the bank numbers nothing
QUESTION_SECTION = re.compile(r"Interview|Warm-up questions")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")

# Which notebook and section teaches each of 17's questions (by question number): the editor's mapping.
TEACHES = {
    **{n: ("01_scaled_dot_product_attention", "2 · The formula") for n in (1, 5)},
    2: ("01_scaled_dot_product_attention", "4 · Why divide by"),
    3: ("01_scaled_dot_product_attention", "4 · Why divide by"),
    4: ("08_memory_efficient_attention", "1 · Intuition: the score matrix does not fit"),
    6: ("02_multi_head_attention", "9. Cross-attention"),
    7: ("02_multi_head_attention", "1. Intuition"),
    8: ("02_multi_head_attention", "6. How many parameters?"),
    9: ("02_multi_head_attention", "3. One big projection"),
    10: ("05_masks_and_dropout", "2 · The five masks from scratch"),
    11: ("05_masks_and_dropout", "4 · Causal alignment"),
    12: ("05_masks_and_dropout", "3 · Padding"),
    13: ("05_masks_and_dropout", "6 · Mask conventions across APIs"),
    14: ("05_masks_and_dropout", "5 · A fully masked row"),
    15: ("05_masks_and_dropout", "7 · Dropout on the attention weights"),
    16: ("07_kv_cache_and_decoding", "2 · Greedy decoding from scratch"),
    17: ("07_kv_cache_and_decoding", "4 · How big is the cache?"),
    18: ("03_multi_query_attention", "2 · Build it from scratch"),
    19: ("04_grouped_query_attention", "2 · From scratch, three equal ways"),
    20: ("04_grouped_query_attention", "7 · What GQA buys"),
    21: ("04_grouped_query_attention", "3 · The silent bug"),
    22: ("06_rotary_position_embeddings", "1 · Attention cannot see order"),
    23: ("08_memory_efficient_attention", "3 · From scratch: FlashAttention"),
    24: ("08_memory_efficient_attention", "2 · The online softmax"),
    25: ("05_masks_and_dropout", "5 · A fully masked row"),
    26: ("06_rotary_position_embeddings", "4 · RoPE inside a layer"),
    27: ("06_rotary_position_embeddings", "3 · Why rotations"),
    28: ("06_rotary_position_embeddings", "5 · The layout trap"),
    29: ("06_rotary_position_embeddings", "4 · RoPE inside a layer"),
    30: ("06b_long_context_rope_scaling", "2 · YaRN, derived band by band"),
    31: ("09_multi_head_latent_attention", "1 · What is cached per token"),
    32: ("09_multi_head_latent_attention", "3 · Why RoPE cannot go through the latent"),
    33: ("09_multi_head_latent_attention", "4 · Absorption"),
    34: ("09_multi_head_latent_attention", "4 · Absorption"),
    35: ("01_scaled_dot_product_attention", "6 · Self-attention"),
    36: ("01_scaled_dot_product_attention", "1 · The idea"),
    37: ("02_multi_head_attention", "5. Realistic sizes"),
}
TOPIC_OF_QUESTION = {
    **dict.fromkeys((1, 2, 3, 4, 5, 35, 36, 37), "mechanics"),
    **dict.fromkeys((6, 7, 8, 9), "heads"),
    **dict.fromkeys((10, 11, 12, 13, 14, 15, 25), "masks"),
    **dict.fromkeys((16, 17), "kv-cache"),
    **dict.fromkeys((18, 19, 20, 21), "mqa-gqa"),
    **dict.fromkeys((22, 26, 27, 28, 29, 30), "positions"),
    **dict.fromkeys((23, 24), "flash"),
    **dict.fromkeys((31, 32, 33, 34), "mla"),
}
TOPIC_OF_NOTEBOOK = {
    "00": "mechanics", "01": "mechanics", "02": "heads", "03": "mqa-gqa", "04": "mqa-gqa", "05": "masks",
    "06": "positions", "06b": "positions", "07": "kv-cache", "08": "flash", "09": "mla", "09b": "sparse",
    "10": "real-models", "11": "real-models", "11b": "real-models", "11c": "real-models", "12": "flash",
    "12b": "flash", "12c": "sinks-gates", "12d": "linear", "12e": "linear", "12f": "linear", "12g": "linear",
    "13": "serving", "13b": "serving", "14": "bugs", "15": "real-models",
    "16": "hand-write", "18": "hand-write",
}  # fmt: skip
# ★ for a folded question: the editor's estimate per topic (how often 2025–26 public question lists ask the topic).
STARS_OF_TOPIC = {
    "mechanics": 3, "heads": 2, "mqa-gqa": 3, "masks": 2, "positions": 2, "kv-cache": 3, "flash": 3, "mla": 2,
    "sparse": 1, "real-models": 1, "sinks-gates": 1, "linear": 2, "serving": 2, "bugs": 1, "hand-write": 2,
}  # fmt: skip


def before_generation(path: str) -> str:
    """17 as it was before the bank generated it (the hand-written 37 questions were imported from there)."""
    return subprocess.run(
        ["git", "show", f"{HAND_WRITTEN_17}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def cells(name: str, zh: bool = False) -> list[dict]:
    return json.loads(((ZH if zh else NOTEBOOKS) / f"{name}.ipynb").read_text())["cells"]


def text(cell: dict) -> str:
    return "".join(cell["source"])


def section_of(notebook_cells: list[dict], index: int) -> str:
    for cell in reversed(notebook_cells[: index + 1]):
        if cell["cell_type"] == "markdown":
            for line in text(cell).splitlines():
                if line.startswith("## "):
                    return line[3:].strip()
    return ""


def best_proof(notebook_cells: list[dict], interview_index: int, question: str) -> tuple[int, list[str]]:
    """The code cell (before the interview section) sharing the most rare identifiers with the question and answer."""
    code = [(i, c) for i, c in enumerate(notebook_cells[:interview_index]) if c["cell_type"] == "code" and c["outputs"]]
    docs = {i: Counter(WORD.findall(text(c).lower())) for i, c in code}
    df = Counter(w for d in docs.values() for w in d)
    wanted = set(WORD.findall(question.lower()))

    def score(i: int) -> float:
        return sum(math.log(1 + len(docs) / df[w]) for w in wanted & set(docs[i]))

    best = max(docs, key=lambda i: (score(i), -i))
    lines = [line for line in text(notebook_cells[best]).splitlines() if line.strip() and not line.startswith("#")]
    ranked = sorted(lines, key=lambda s: -len(wanted & set(WORD.findall(s.lower()))))[:2]
    return best, [line for line in lines if line in ranked]


def folded_questions(notebook_cells: list[dict], english: list[dict] | None = None) -> list[tuple[int, re.Match]]:
    """The folded questions of a notebook's interview (or warm-up) section; hints and derivations fold too. A Chinese
    notebook has its English twin's cells, so ``english`` says which section each cell is in."""
    english = notebook_cells if english is None else english
    return [
        (i, m)
        for i, c in enumerate(notebook_cells)
        if c["cell_type"] == "markdown" and QUESTION_SECTION.search(section_of(english, i))
        for m in DETAILS.finditer(text(c))
    ]


def cheat_sheet_cards() -> list[dict]:
    en = json.loads(before_generation(f"notebooks/{CHEAT}.ipynb"))["cells"]
    translation = json.loads(before_generation(f"notebooks/zh/translations/{CHEAT}.json"))["cells"]
    cards = []
    for i, cell in enumerate(en):
        match = QUESTION.match(text(cell))
        if not match:
            continue
        number, question, chinese_term, stars, answer = match.groups()
        zh_match = QUESTION.match(translation[cell["id"]]["zh"])
        code_cell = en[i + 1]
        code_zh = translation.get(code_cell["id"], {})
        n = int(number)
        notebook, section = TEACHES[n]
        cards.append(
            {
                "id": f"q{n:02d}",
                "origin": f"{CHEAT} Q{n}",
                "topic": TOPIC_OF_QUESTION[n],
                "stars": len(stars),
                "term": {"en": zh_match.group(3).strip(), "zh": chinese_term.strip()},
                "en": {"q": question.strip(), "a": answer.strip()},
                "zh": {"q": zh_match.group(2).strip(), "a": zh_match.group(5).strip()},
                "teaches": {"notebook": notebook, "section": section},
                "code": text(code_cell),
                "code_zh": {k: code_zh[k] for k in ("comments", "strings") if code_zh.get(k)},
            }
        )
    return cards


def folded_cards() -> list[dict]:
    cards = []
    for path in sorted(NOTEBOOKS.glob("[0-9]*.ipynb")):
        name = path.stem
        if name == CHEAT:
            continue
        en, zh = cells(name), cells(name, zh=True)
        en_q = folded_questions(en)
        zh_q = [m for _, m in folded_questions(zh, en)]
        assert len(en_q) == len(zh_q), (name, len(en_q), len(zh_q))
        short = name.split("_")[0]
        topic = TOPIC_OF_NOTEBOOK[short]
        for n, ((_, m), z) in enumerate(zip(en_q, zh_q, strict=True), 1):
            first_interview = next(j for j, _ in en_q)
            proof_index, lines = best_proof(en, first_interview, m.group(1) + " " + m.group(2))
            cards.append(
                {
                    "id": f"n{short}-{n:02d}",
                    "origin": f"{name} interview question {n}",
                    "topic": topic,
                    "stars": STARS_OF_TOPIC[topic],
                    "en": {"q": NUMBER.sub("", m.group(1)).strip(), "a": m.group(2).strip()},
                    "zh": {"q": NUMBER.sub("", z.group(1)).strip(), "a": z.group(2).strip()},
                    "teaches": {"notebook": name, "section": section_of(en, proof_index)},
                    "proof": {"notebook": name, "cell": en[proof_index]["id"], "lines": lines},
                }
            )
    return cards


def dump(bank: dict) -> str:
    """YAML with multi-line strings as literal blocks, so the bank diffs and reads well."""

    class Dumper(yaml.SafeDumper):
        pass

    def text_block(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)

    Dumper.add_representer(str, text_block)
    return yaml.dump(bank, Dumper=Dumper, allow_unicode=True, sort_keys=False, width=120)


def sync(path: Path) -> int:
    """Refresh the bank's folded-question cards from the notebooks (text, proof cell, section); keep everything else.
    Keeps a card's stars and stars_from when the question is still there."""
    bank = yaml.safe_load(path.read_text(encoding="utf-8"))
    old = {c["id"]: c for c in bank["cards"]}
    fresh = folded_cards()
    for card in fresh:
        card["stars"] = old.get(card["id"], card)["stars"]
        card["stars_from"] = old.get(card["id"], {}).get("stars_from", ["editor-estimate"])
        if old.get(card["id"], {}).get("companies"):  # company tags stay with their question, as its stars do
            card["companies"] = old[card["id"]]["companies"]
        order = ["id", "origin", "topic", "stars", "stars_from", "companies", "en", "zh", "teaches", "proof"]
        card_sorted = {k: card[k] for k in order if k in card}
        card.clear()
        card.update(card_sorted)
    kept = [c for c in bank["cards"] if "proof" not in c]
    bank["cards"] = kept + fresh
    path.write_text(dump(bank), encoding="utf-8")
    print(f"{path.name}: {len(kept)} cards kept, {len(fresh)} folded questions refreshed from the notebooks")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--sync"]:
        sys.exit(sync(ROOT / "interview" / "questions.yaml"))
    yaml.safe_dump(cheat_sheet_cards() + folded_cards(), sys.stdout, allow_unicode=True, sort_keys=False, width=120)
