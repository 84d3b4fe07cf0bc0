"""The question bank's ★ sources and company tags (issue #38 §1): a company is tagged only where a cited source says
it asked the question, every source is public (a URL) or the editor's estimate, and both languages describe it."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "interview"))

import bank as interview_bank  # noqa: E402

BANK = interview_bank.load()


def test_every_company_tag_is_backed_by_a_cited_source():
    sources = BANK["sources"]
    for card in BANK["cards"]:
        backed = {company for s in card["stars_from"] for company in sources[s].get("companies", {})}
        assert set(card.get("companies", [])) <= backed, f"{card['id']}: {card.get('companies')} not in {backed}"


def test_every_source_is_public_or_the_editors_estimate_and_reads_in_both_languages():
    for name, source in BANK["sources"].items():
        assert source.get("en") and source.get("zh"), name
        assert name == "editor-estimate" or source.get("url", "").startswith("https://"), name
        for company, why in source.get("companies", {}).items():
            assert company and why, f"{name}: say how the source names {company!r}"


def test_stars_always_keep_the_editors_estimate_and_a_public_list_where_one_was_found():
    cards = BANK["cards"]
    assert all(card["stars_from"][-1] == "editor-estimate" for card in cards)
    with_public = [card for card in cards if len(card["stars_from"]) > 1]
    assert len(with_public) >= 100  # 102 when the sources were added; a drop means citations were lost
    cited = {s for card in cards for s in card["stars_from"]}
    assert cited == set(BANK["sources"]), f"sources no card cites: {set(BANK['sources']) - cited}"
