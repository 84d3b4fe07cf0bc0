"""interview/export.py (issue #38): open the .apkg decks as Anki does (a zip holding a SQLite collection) and check
every note's fields, tags and guid against the bank; two exports are byte-identical; the CSV holds the same cards."""

import csv
import json
import sqlite3
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "interview"))

import bank as interview_bank  # noqa: E402
import export  # noqa: E402

BANK = interview_bank.load()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    first, second = tmp_path_factory.mktemp("first"), tmp_path_factory.mktemp("second")
    export.main(["--anki", "--csv", "--out", str(first)])
    export.main(["--anki", "--csv", "--out", str(second)])
    return first, second


def open_collection(apkg: Path, folder: Path) -> sqlite3.Connection:
    with zipfile.ZipFile(apkg) as archive:
        assert set(archive.namelist()) == {"collection.anki2", "media"}
        assert json.loads(archive.read("media")) == {}
        archive.extract("collection.anki2", folder)
    return sqlite3.connect(folder / "collection.anki2")


@pytest.mark.parametrize("language", export.LANGUAGES)
def test_deck_holds_every_card_with_its_fields_and_tags(exported, language, tmp_path):
    collection = open_collection(exported[0] / f"attn-interview-{language}.apkg", tmp_path)
    decks = json.loads(collection.execute("select decks from col").fetchone()[0])
    assert decks[str(export.DECK_IDS[language])]["name"] == export.DECK_NAMES[language]
    models = json.loads(collection.execute("select models from col").fetchone()[0])
    assert [f["name"] for f in models[str(export.MODEL_ID)]["flds"]] == export.FIELDS
    notes = {row[0]: row[1:] for row in collection.execute("select guid, flds, tags, mid from notes")}
    assert len(notes) == len(BANK["cards"])
    cards = collection.execute(
        "select count(*), count(distinct nid) from cards where did = ?", (export.DECK_IDS[language],)
    )
    assert cards.fetchone() == (len(BANK["cards"]), len(BANK["cards"]))
    for card in BANK["cards"]:
        guid = export.note_guid(card, language)
        fields, tags, model_id = notes[guid]
        assert model_id == export.MODEL_ID
        assert fields.split("\x1f") == export.fields_of(card, language, BANK["topics"])
        assert set(tags.split()) == {
            f"topic::{card['topic']}",
            f"stars::{'★' * card['stars']}",
            f"notebook::{card['teaches']['notebook']}",
        }
        front, back, code = fields.split("\x1f")[1:4]
        assert front and back and code, f"{card['id']}: an empty side"
        assert "$" not in front.replace(r"\$", ""), f"{card['id']}: unconverted math"
        if language != "en":
            assert any("\u4e00" <= ch <= "\u9fff" for ch in front), f"{card['id']}: no Chinese on the front"


def test_note_ids_are_stable_and_distinct():
    guids = [export.note_guid(c, lang) for lang in export.LANGUAGES for c in BANK["cards"]]
    assert len(set(guids)) == len(guids)
    assert export.note_guid(BANK["cards"][0], "en") == export.note_guid(dict(BANK["cards"][0]), "en")


def test_code_is_readable_in_the_deck(exported, tmp_path):
    collection = open_collection(exported[0] / "attn-interview-zh.apkg", tmp_path)
    q24 = export.note_guid(next(c for c in BANK["cards"] if c["id"] == "q24"), "zh")
    code = collection.execute("select flds from notes where guid = ?", (q24,)).fetchone()[0].split("\x1f")[3]
    assert "\n" in code and "    m_new = max(m, block.max().item())" in code  # lines and indentation kept (<pre>)
    templates = json.loads(collection.execute("select models from col").fetchone()[0])[str(export.MODEL_ID)]["tmpls"]
    assert "<pre><code>{{Code}}</code></pre>" in templates[0]["afmt"]


def test_two_exports_are_identical(exported):
    first, second = exported
    names = sorted(p.name for p in first.iterdir())
    assert len(names) == 6
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


@pytest.mark.parametrize("language", export.LANGUAGES)
def test_csv_holds_the_same_cards(exported, language):
    with (exported[0] / f"attn-interview-{language}.csv").open(encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == [*export.FIELDS, "Tags"]
    assert [row[0] for row in rows[1:]] == [c["id"] for c in BANK["cards"]]
    assert rows[1][:6] == export.fields_of(BANK["cards"][0], language, BANK["topics"])


def test_export_needs_a_format():
    with pytest.raises(SystemExit):
        export.main([])
