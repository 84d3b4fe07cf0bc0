"""images/make_diagrams.py regenerates the committed diagrams and their Chinese copies (images/zh/): valid PNGs."""

import importlib.util
import re
import struct
from pathlib import Path

import pytest

import attn_core as ac

IMAGES = Path(__file__).resolve().parents[1] / "images"
NAMES = ("sdpa_dataflow.png", "bug_map.png", "mha_mqa_gqa_sharing.png")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def load_script():
    spec = importlib.util.spec_from_file_location("make_diagrams", IMAGES / "make_diagrams.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) in pixels from the IHDR chunk of a PNG."""
    assert data[:8] == PNG_SIGNATURE, "not a PNG file"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def check_png(data: bytes) -> None:
    width, height = png_size(data)
    assert 1200 <= width <= 2400 and 400 <= height <= 1200, (width, height)  # wide, projector-sized
    assert 20_000 < len(data) < 200_000, len(data)  # non-trivial, yet light to commit
    assert data.endswith(b"IEND\xaeB`\x82"), "PNG truncated"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("diagrams")
    paths = load_script().main(out_dir)
    return out_dir, paths


def test_main_writes_every_diagram(generated):
    out_dir, paths = generated
    assert sorted(p.name for p in paths) == sorted(NAMES)
    for name in NAMES:
        check_png((out_dir / name).read_bytes())


def test_diagrams_are_deterministic(generated, tmp_path):
    out_dir, _ = generated
    load_script().main(tmp_path)
    for name in NAMES:
        assert (tmp_path / name).read_bytes() == (out_dir / name).read_bytes(), f"{name} differs between runs"


@pytest.mark.parametrize("name", NAMES)
def test_committed_diagrams_exist(name):
    path = IMAGES / name
    assert path.is_file(), f"{path} missing: run `python images/make_diagrams.py`"
    check_png(path.read_bytes())


def test_sharing_diagram_uses_the_explorers_group_colours():
    from matplotlib.colors import to_hex

    from attn_core.viz.plotting import group_colors

    fig = load_script().sharing_diagram()
    wires = [to_hex(line.get_color()) for line in fig.axes[0].lines]  # one per query head, panel by panel
    expected = group_colors(8, 8) + group_colors(8, 2) + group_colors(8, 1)  # MHA, GQA, MQA
    assert wires == expected


def test_bug_map_numbers_every_bug_of_the_bug_hunt_once():
    """bug_map.png marks each of notebook 14's kernel bugs (1-12), in BUGS order, with a numbered marker and a key
    line; the RoPE bugs (13+) strike in the rotation step, which the SDPA data flow does not draw."""
    from attn_core.exercises.bug_hunt import BUGS

    script = load_script()
    kernel_bugs = [name for name in BUGS if not name.startswith(("rope_", "mla_"))]
    assert kernel_bugs == list(BUGS)[:12]  # the map's numbers are the bug hunt's numbers
    assert len(script.BUG_MAP) == len(kernel_bugs) == 12
    fig = script.bug_map()
    numbers = [t.get_text() for t in fig.axes[0].texts if t.get_text().isdigit()]
    assert sorted(numbers, key=int) == [str(n) for n in range(1, 13) for _ in range(2)]  # on the flow and in the key
    assert fig.dpi >= 110
    keys = [text for _, _, text in script.BUG_MAP]
    fragments = ["√d_model", "k_proj", "flipped", "NaN", "dim=-2", "after the softmax", "before the softmax", "eval",
                 "contiguous", "repeat_interleave", "broadcast", "top-left"]  # fmt: skip
    for fragment, key in zip(fragments, keys, strict=True):
        assert fragment in key


# ----------------------------------------------------------------------------- the Chinese copies (issue #21)
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
# what stays as written in Chinese: symbols, shapes and code names (Q, Lq × Lk, softmax, q0, K/V 1, the numbers)
KEPT = re.compile(r"(\$.*\$|[QKV]|Lq × Lk|L[qk] × d|L[qk] × dv|softmax|dropout|q\d|kv\d|K/V \d|\d+)")


@pytest.fixture(scope="module")
def generated_zh(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("diagrams_zh")
    return out_dir, load_script().main(out_dir, lang="zh")


def test_chinese_diagrams_are_written_deterministically_and_committed(generated_zh, tmp_path):
    out_dir, paths = generated_zh
    assert sorted(p.name for p in paths) == sorted(NAMES)
    assert ac.get_language() == "en"  # main() puts the language back
    load_script().main(tmp_path, lang="zh")
    for name in NAMES:
        check_png((out_dir / name).read_bytes())
        assert (tmp_path / name).read_bytes() == (out_dir / name).read_bytes(), f"zh/{name} differs between runs"
        assert (IMAGES / "zh" / name).is_file(), f"images/zh/{name} missing: run `python images/make_diagrams.py`"
        assert (IMAGES / "zh" / name).read_bytes() != (IMAGES / name).read_bytes()


@pytest.mark.parametrize("draw", ["sdpa_dataflow", "bug_map", "sharing_diagram"])
def test_every_label_of_a_chinese_diagram_is_chinese_with_real_glyphs(draw):
    from fontTools.ttLib import TTFont
    from matplotlib.font_manager import FontProperties, fontManager

    script = load_script()
    ac.set_language("zh")
    try:
        texts = [t.get_text() for t in getattr(script, draw)().axes[0].texts if t.get_text()]
        fonts = fontManager._find_fonts_by_props(FontProperties())
        cmaps = [set(TTFont(str(f), fontNumber=f.face_index).getBestCmap()) for f in fonts]
    finally:
        ac.set_language("en")
    english = [t for t in texts if not CJK.search(t) and not KEPT.fullmatch(t)]
    assert not english, f"{draw}: labels left in English (add them to attn_core/i18n/zh_viz_figures.py): {english}"
    boxes = {c for t in texts for c in t if not c.isspace() and not any(ord(c) in cmap for cmap in cmaps)}
    boxes -= set(" $\\{}^_")  # mathtext source, drawn by mathtext's own fonts
    assert not boxes, f"{draw}: {sorted(boxes)} would be drawn as empty boxes"
