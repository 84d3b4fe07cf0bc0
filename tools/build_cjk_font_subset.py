"""Rebuild ``attn_core/fonts/``: the subset of Noto Sans CJK SC the Chinese edition's figures fall back to.

    python tools/build_cjk_font_subset.py            # installs Debian's fonts-noto-cjk if missing, then rebuilds
    python tools/build_cjk_font_subset.py --check    # exit 1 if a character of the edition is missing from the subset

Run it after adding Chinese text (a translation in ``notebooks/zh/translations/*.json`` or a catalog entry in
``attn_core/i18n/zh_*.py``) whose characters the subset lacks; ``tests/test_cjk_font.py`` fails until then.

What it keeps: every character of the edition (~1,200 distinct Chinese characters) and what a learner is likely to
type in their own labels and prompts: the 3,755 characters of GB2312 level 1 (rows 0xB0-0xD7 of Python's ``gb2312``
codec: the common characters of simplified Chinese), GB2312's punctuation and symbols (row 0xA1) and full-width
forms (row 0xA3). ``ac.set_language("zh")`` uses a full system Chinese font first where the machine has one; this
subset is the fallback (``attn_core/i18n/fonts.py``).

Why a subset: the full font is 16 MB per style; these ~4,400 characters take ~1.5 MB. The subset gets its own family
name, "attn-core Noto Sans CJK SC subset", so it never shadows a full "Noto Sans CJK SC" a machine has. Noto Sans CJK
is under the SIL Open Font License 1.1 (a modified version may keep the name "Noto"; the only reserved name is
Adobe's "Source"); the licence text and the font's copyright notice go into ``attn_core/fonts/OFL.txt`` beside the
subset, as the OFL requires. fontTools comes with matplotlib. Building needs Debian's ``fonts-noto-cjk`` (apt-get,
installed if missing): on Windows or macOS run it in a Linux container, or only ``--check``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTCollection, TTFont

ROOT = Path(__file__).resolve().parents[1]
FONT_DIR = ROOT / "attn_core" / "fonts"
SUBSET_FILE = FONT_DIR / "NotoSansCJKsc-Regular-subset.otf"
LICENSE_FILE = FONT_DIR / "OFL.txt"
FAMILY = "Noto Sans CJK SC"  # the member of the Debian collection the subset is cut from
SUBSET_FAMILY = "attn-core Noto Sans CJK SC subset"  # = attn_core.i18n.fonts.SUBSET_FAMILY
SUBSET_POSTSCRIPT = "attn-core-NotoSansCJKsc-Regular-subset"
DEBIAN_PACKAGE = "fonts-noto-cjk"
DEBIAN_FONT = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
DEBIAN_COPYRIGHT = Path("/usr/share/doc/fonts-noto-cjk/copyright")
MAX_BYTES = 2_000_000  # the package ships this file: GB2312 level 1 + the edition is ~1.5 MB


def text_sources(root: Path = ROOT) -> list[Path]:
    """Every file whose Chinese text a learner can see drawn: the translations and the catalogs (gettext and regex)."""
    return (
        sorted((root / "notebooks" / "zh" / "translations").glob("*.json"))
        + sorted((root / "attn_core" / "i18n").glob("zh_*.py"))
        + sorted((root / "attn_core" / "locale").glob("*/LC_MESSAGES/*.po"))
    )


def is_cjk(char: str) -> bool:
    """A character DejaVu Sans lacks and Chinese text uses: CJK ideographs, CJK punctuation, full-width forms."""
    code = ord(char)
    return (
        0x2E80 <= code <= 0x2FDF  # radicals
        or 0x3000 <= code <= 0x303F  # CJK symbols and punctuation: 、。「」《》
        or 0x3400 <= code <= 0x4DBF  # extension A
        or 0x4E00 <= code <= 0x9FFF  # unified ideographs
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
        or 0xFE30 <= code <= 0xFE4F  # compatibility forms
        or 0xFF00 <= code <= 0xFFEF  # full-width forms: ，：（）！？
    )


def gb2312_rows(first: int, last: int) -> set[str]:
    """The characters of GB2312 rows ``first``..``last`` (EUC-CN lead bytes; 0xB0-0xD7 is level 1, 3,755 hanzi)."""
    chars = set()
    for lead in range(first, last + 1):
        for trail in range(0xA1, 0xFF):
            try:
                chars.add(bytes([lead, trail]).decode("gb2312"))
            except UnicodeDecodeError:  # an unassigned cell (row 0xD7 ends at 0xF9)
                pass
    return chars


def gb2312_level1() -> set[str]:
    """The 3,755 common characters of simplified Chinese (GB2312 level 1), derived from Python's codec."""
    return gb2312_rows(0xB0, 0xD7)


def learner_characters() -> set[str]:
    """What a learner may type beyond the edition: GB2312 level 1, its punctuation/symbols and full-width forms."""
    return gb2312_level1() | gb2312_rows(0xA1, 0xA1) | gb2312_rows(0xA3, 0xA3)


def needed_characters(root: Path = ROOT) -> set[str]:
    """Every non-ASCII character of the sources (the subset keeps those the full font has)."""
    chars: set[str] = set()
    for path in text_sources(root):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":  # the Chinese as written, not JSON's \\u escapes
            text = json.dumps(json.loads(text), ensure_ascii=False)
        chars |= {c for c in text if ord(c) > 0x7F}
    return chars


def ensure_debian_font() -> None:
    if DEBIAN_FONT.exists():
        return
    print(f"installing {DEBIAN_PACKAGE} (apt-get) ...")
    prefix = [] if shutil.which("sudo") is None else ["sudo"]
    subprocess.run(prefix + ["apt-get", "update"], check=True)
    subprocess.run(prefix + ["apt-get", "install", "-y", "--no-install-recommends", DEBIAN_PACKAGE], check=True)


def full_font() -> TTFont:
    """The Simplified Chinese member of the Debian collection (it holds JP, KR, SC, TC, HK and Mono members)."""
    for font in TTCollection(str(DEBIAN_FONT)).fonts:
        if font["name"].getDebugName(1) == FAMILY:
            return font
    raise SystemExit(f"{DEBIAN_FONT} has no '{FAMILY}' member; is {DEBIAN_PACKAGE} the expected version?")


def licence_text(font: TTFont) -> str:
    """OFL.txt: the font's own copyright and trademark notices, then the licence from Debian's copyright file."""
    copyright_text = DEBIAN_COPYRIGHT.read_bytes()
    if copyright_text[:2] == b"\x1f\x8b":
        copyright_text = gzip.decompress(copyright_text)
    block = re.search(r"^License: SIL-1\.1\n( .*?)(?=^\S|\Z)", copyright_text.decode(), re.M | re.S)
    if block is None:
        raise SystemExit(f"no 'License: SIL-1.1' block in {DEBIAN_COPYRIGHT}")
    body = "\n".join("" if line.strip() == "." else line[1:] for line in block.group(1).splitlines())
    notices = [font["name"].getDebugName(i) for i in (0, 7)]
    header = (
        f"{SUBSET_FILE.name} is a subset of {FAMILY} Regular (Noto CJK, https://github.com/notofonts/noto-cjk),\n"
        f"made by tools/build_cjk_font_subset.py from Debian's {DEBIAN_PACKAGE}: the glyphs of GB2312 level 1 and\n"
        f'of the Chinese edition of attn-notebooks, under the family name "{SUBSET_FAMILY}".\n'
        "It is distributed under the SIL Open Font License 1.1, below.\n\n"
    )
    return header + "\n".join(n for n in notices if n) + "\n\n" + body.strip() + "\n"


def rename(font: TTFont) -> None:
    """Give the subset its own family (name table and CFF names), so it never stands in for the full font."""
    names = {1: SUBSET_FAMILY, 3: f"{SUBSET_POSTSCRIPT};attn-core", 4: SUBSET_FAMILY, 6: SUBSET_POSTSCRIPT}
    for record in list(font["name"].names):
        if record.nameID in (16, 17):  # typographic family/style: the same as 1/2 for one weight
            font["name"].removeNames(nameID=record.nameID)
        elif record.nameID in names:
            record.string = names[record.nameID]
    cff = font["CFF "].cff
    cff.fontNames = [SUBSET_POSTSCRIPT]
    top = cff.topDictIndex[0]
    top.FamilyName, top.FullName = SUBSET_FAMILY, SUBSET_FAMILY


def build() -> None:
    ensure_debian_font()
    font = full_font()
    cmap = font.getBestCmap()
    chars = needed_characters() | learner_characters()
    kept = sorted(c for c in chars if ord(c) in cmap)
    missing_cjk = sorted(c for c in chars if is_cjk(c) and ord(c) not in cmap)
    if missing_cjk:
        raise SystemExit(f"{FAMILY} has no glyph for {''.join(missing_cjk)!r}")
    options = subset.Options()
    options.layout_features = ["*"]  # keep the font's own spacing of punctuation (GPOS) as in the full font
    options.hinting = False  # drawn as outlines at 9-13 pt by matplotlib, which does not hint CFF
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6, 7, 13, 14]  # names plus copyright, trademark, licence
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(c) for c in kept])
    subsetter.subset(font)
    rename(font)
    FONT_DIR.mkdir(parents=True, exist_ok=True)
    font.recalcTimestamp = False  # the same text gives the same bytes (no build time inside)
    font.save(str(SUBSET_FILE))
    LICENSE_FILE.write_text(licence_text(font), encoding="utf-8")
    size = SUBSET_FILE.stat().st_size
    print(f"{SUBSET_FILE.relative_to(ROOT)}: {len(kept)} characters, {size / 1e6:.2f} MB")
    if size > MAX_BYTES:
        raise SystemExit(f"the subset is {size:,} bytes, over the {MAX_BYTES:,} the package should ship")


def check() -> int:
    have = set(TTFont(str(SUBSET_FILE)).getBestCmap())
    missing = sorted(c for c in needed_characters() | gb2312_level1() if is_cjk(c) and ord(c) not in have)
    if missing:
        print(f"{len(missing)} characters missing from {SUBSET_FILE.name}: {''.join(missing)}")
        print("rebuild: python tools/build_cjk_font_subset.py")
        return 1
    print(f"{SUBSET_FILE.name} covers GB2312 level 1 and every Chinese character of the translations and catalogs")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only check coverage, do not rebuild")
    args = parser.parse_args(argv)
    if args.check:
        return check()
    build()
    return 0


if __name__ == "__main__":
    sys.exit(main())
