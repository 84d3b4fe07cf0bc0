"""Export the interview bank as Anki decks and CSV (issue #38).

    python interview/export.py --anki [--csv] [--out DIR]      (default DIR: build/anki/)

Writes attn-interview-en.apkg, -zh.apkg and -bilingual.apkg (genanki), and with --csv the same cards as
attn-interview-{en,zh,bilingual}.csv for other tools. Note ids (guids) come from the card ids, so re-importing an
updated deck updates its notes instead of adding copies; the notes' modification time is the bank's last commit (or
SOURCE_DATE_EPOCH), so two exports of the same bank are byte-identical and a newer bank wins on re-import.
"""

from __future__ import annotations

import argparse
import csv
import html
import itertools
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import genanki

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bank as interview_bank  # noqa: E402

ROOT = interview_bank.ROOT
LANGUAGES = ("en", "zh", "bilingual")
# Fixed ids: Anki recognises a deck and a note type by them across imports. Never change them.
DECK_IDS = {"en": 1_838_380_001, "zh": 1_838_380_002, "bilingual": 1_838_380_003}
MODEL_ID = 1_838_380_100
DECK_NAMES = {
    "en": "Attention interview (English)",
    "zh": "注意力面试（中文）",
    "bilingual": "Attention interview · 注意力面试 (bilingual)",
}
FIELDS = ["CardId", "Front", "Back", "Code", "Source", "Stars"]
STYLE = """.card { font-family: sans-serif; font-size: 18px; text-align: left; }
pre { background: #f6f8fa; color: #24292f; padding: 8px; overflow-x: auto; font-size: 14px; white-space: pre; }
.source { color: #57606a; font-size: 14px; }"""
MODEL = genanki.Model(
    MODEL_ID,
    "attn-notebooks interview card",
    fields=[{"name": name} for name in FIELDS],
    templates=[
        {
            "name": "Question → answer",
            "qfmt": "<div class=stars>{{Stars}}</div>{{Front}}",
            "afmt": "{{FrontSide}}<hr id=answer>{{Back}}{{#Code}}<pre><code>{{Code}}</code></pre>{{/Code}}"
            "<div class=source>{{Source}}</div>",
        }
    ],
    css=STYLE,
)


def to_html(markdown: str) -> str:
    """The bank's Markdown subset as Anki HTML: $…$ → \\(…\\) (Anki's MathJax), `code`, **bold**, *italic*, <br>."""
    pieces = re.split(r"(\$\$.*?\$\$|\$[^$]+\$|`[^`]+`)", markdown, flags=re.S)
    out = []
    for piece in pieces:
        if piece.startswith("$$"):
            out.append(r"\[" + html.escape(piece[2:-2], quote=False) + r"\]")
        elif piece.startswith("$") and len(piece) > 1:
            out.append(r"\(" + html.escape(piece[1:-1], quote=False) + r"\)")
        elif piece.startswith("`") and len(piece) > 1:
            out.append("<code>" + html.escape(piece[1:-1], quote=False) + "</code>")
        else:
            keep_tags = re.sub(r"<(/?)(code|b|i|em|strong|br)>", "\x00\\1\\2\x01", piece)
            text = html.escape(keep_tags, quote=False).replace("\x00", "<").replace("\x01", ">")
            text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
            text = re.sub(r"(?<![*\w])\*([^*\s][^*]*?)\*(?![*\w])", r"<i>\1</i>", text)
            out.append(text)
    text = "".join(out)
    text = re.sub(r"\n(?=\s*(?:[-*] |\d+\. |\|))", "<br>", text)  # list items and table rows keep their lines
    text = text.replace("\n\n", "<br><br>")
    return re.sub(r"\n", _join, text)


def _is_cjk(character: str) -> bool:
    return "\u3000" <= character <= "\u9fff" or "\uff00" <= character <= "\uffef"


def _join(match: re.Match) -> str:
    """A Markdown line break inside a paragraph: nothing between two Chinese characters, a space otherwise."""
    text, i = match.string, match.start()
    return "" if 0 < i < len(text) - 1 and _is_cjk(text[i - 1]) and _is_cjk(text[i + 1]) else " "


def code_of(card: dict, language: str) -> str:
    """The code that proves the card, with Chinese comments on the Chinese deck; a proof cell's lines otherwise."""
    if "code" in card:
        code = card["code"].rstrip()
        if language == "zh":
            for english, chinese in card.get("code_zh", {}).get("comments", {}).items():
                code = code.replace(english, chinese)
        return html.escape(code, quote=False)
    lines = card["proof"]["lines"]
    return html.escape("\n".join(line.strip() for line in lines), quote=False)


def fields_of(card: dict, language: str, topics: dict) -> list[str]:
    teaches = card["teaches"]
    where = f"{teaches['notebook']}" + (f" § {teaches['section']}" if teaches.get("section") else "")
    if language == "bilingual":
        front = to_html(card["en"]["q"]) + "<br>" + to_html(card["zh"]["q"])
        back = to_html(card["en"]["a"]) + "<hr>" + to_html(card["zh"]["a"])
        topic = f"{topics[card['topic']]['en']} · {topics[card['topic']]['zh']}"
    else:
        front, back = to_html(card[language]["q"]), to_html(card[language]["a"])
        topic = topics[card["topic"]][language]
    label = {"en": "Taught in", "zh": "讲解位置", "bilingual": "Taught in · 讲解位置"}[language]
    source = f"{html.escape(topic)} · {label}: {html.escape(where)}"
    return [
        card["id"],
        front,
        back,
        code_of(card, "zh" if language == "zh" else "en"),
        source,
        interview_bank.stars(card),
    ]


def tags_of(card: dict) -> list[str]:
    return [
        f"topic::{card['topic']}",
        f"stars::{interview_bank.stars(card)}",
        f"notebook::{card['teaches']['notebook']}",
    ]


def note_guid(card: dict, language: str) -> str:
    return genanki.guid_for("attn-notebooks", language, card["id"])


def deck(bank: dict, language: str) -> genanki.Deck:
    result = genanki.Deck(DECK_IDS[language], DECK_NAMES[language])
    for card in bank["cards"]:
        result.add_note(
            genanki.Note(
                model=MODEL,
                fields=fields_of(card, language, bank["topics"]),
                tags=tags_of(card),
                guid=note_guid(card, language),
                sort_field=card["id"],
            )
        )
    return result


def bank_timestamp() -> int:
    """SOURCE_DATE_EPOCH, else the last commit that touched the bank, else the file's mtime."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%ct", "--", str(interview_bank.BANK)],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        if out:
            return int(out)
    except (OSError, subprocess.CalledProcessError):
        pass
    return int(interview_bank.BANK.stat().st_mtime)


def write_apkg(package_deck: genanki.Deck, path: Path, timestamp: int) -> None:
    """genanki's Package.write_to_file with a fixed timestamp and fixed zip dates, so the bytes are reproducible."""
    with tempfile.TemporaryDirectory() as tmp:
        database = Path(tmp) / "collection.anki2"
        connection = sqlite3.connect(database)
        genanki.Package(package_deck).write_to_db(connection.cursor(), timestamp, itertools.count(timestamp * 1000))
        connection.commit()
        connection.close()
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in (("collection.anki2", database.read_bytes()), ("media", b"{}")):
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, data)


def write_csv(bank: dict, language: str, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*FIELDS, "Tags"])
        for card in bank["cards"]:
            writer.writerow([*fields_of(card, language, bank["topics"]), " ".join(tags_of(card))])


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anki", action="store_true", help="write the .apkg decks")
    parser.add_argument("--csv", action="store_true", help="write the CSV files")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "anki", help="output folder (build/anki/)")
    args = parser.parse_args(argv)
    if not (args.anki or args.csv):
        parser.error("choose --anki and/or --csv")
    bank = interview_bank.load()
    args.out.mkdir(parents=True, exist_ok=True)
    timestamp, written = bank_timestamp(), []
    for language in LANGUAGES:
        if args.anki:
            written.append(args.out / f"attn-interview-{language}.apkg")
            write_apkg(deck(bank, language), written[-1], timestamp)
        if args.csv:
            written.append(args.out / f"attn-interview-{language}.csv")
            write_csv(bank, language, written[-1])
    for path in written:
        print(f"wrote {path} ({path.stat().st_size:,} bytes, {len(bank['cards'])} cards)")
    return written


if __name__ == "__main__":
    main()
