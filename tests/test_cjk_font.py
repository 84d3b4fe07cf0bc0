"""Chinese in the figures (issue #21): the shipped Noto Sans CJK SC subset covers every character the edition
uses, ``ac.set_language("zh")`` makes matplotlib draw with it, and every figure of ``attn_core.viz`` shows real
Chinese glyphs.

Matplotlib draws a character no font of the family has as the font's ``.notdef`` glyph (an empty box) with, in
``TextPath``, no warning at all. So these tests look at glyphs, not warnings: a character is covered when a font
of the fallback family maps it in its ``cmap``, and a drawn label is proven by comparing its pixels with the
``.notdef`` box (the method is checked too: with DejaVu Sans alone, a Chinese character IS that box).
"""

from __future__ import annotations

import importlib.util
import io
import re
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch
from fontTools.ttLib import TTFont
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties, fontManager
from matplotlib.text import Text
from matplotlib.textpath import TextPath

import attn_core as ac
from attn_core import i18n
from attn_core.i18n import fonts
from attn_core.viz import decoder_view, mla, paged, rope, tiles, training, widgets
from attn_core.viz.textpaths import text_items

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("build_cjk_font_subset", ROOT / "tools" / "build_cjk_font_subset.py")
subset_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(subset_tool)

CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


@pytest.fixture(autouse=True)
def no_system_cjk(monkeypatch):
    """This machine as most learners' Linux boxes and CI: no Chinese font known to matplotlib (a test that wants
    one registers it, see ``system_font``)."""
    monkeypatch.setattr(fonts, "SYSTEM_CJK_FAMILIES", ())


@pytest.fixture
def zh():
    ac.set_language("zh")
    try:
        yield
    finally:
        ac.set_language("en")


def cmap_of(path) -> set[int]:
    """Code points of a font file (a member of a collection where matplotlib found one, e.g. a system .ttc)."""
    return set(TTFont(str(path), fontNumber=getattr(path, "face_index", 0)).getBestCmap())


def family_cmaps() -> list[set[int]]:
    """The code points of each font matplotlib falls back through for the current ``font.family``."""
    return [cmap_of(found) for found in fontManager._find_fonts_by_props(FontProperties())]


def uncovered(text: str, cmaps: list[set[int]]) -> set[str]:
    return {c for c in text if not c.isspace() and not any(ord(c) in cmap for cmap in cmaps)}


def rendered(text: str, size: float = 20) -> np.ndarray:
    """Grey pixels of ``text`` drawn by Agg with the current family (a regular Text, as fig.suptitle draws)."""
    fig = Figure(figsize=(2, 0.6), dpi=100)
    fig.add_artist(Text(0.05, 0.3, text, fontsize=size))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., 0].copy()  # (60, 200)


# ----------------------------------------------------------------------------------------------- the font file
def test_subset_covers_every_chinese_character_of_translations_and_catalogs() -> None:
    needed = {c for c in subset_tool.needed_characters(ROOT) if subset_tool.is_cjk(c)}
    assert len(needed) > 500  # the translations are there: a broken glob must not make this pass
    have = cmap_of(i18n.CJK_FONT_FILE)  # once: parsing the cmap of a 4,000-glyph font takes ~0.1 s
    missing = sorted(c for c in needed if ord(c) not in have)
    assert not missing, f"{''.join(missing)} not in the font subset: run python tools/build_cjk_font_subset.py"
    # and the other non-ASCII characters of the catalogs (θ, √, —, →) are in one of the two fonts, except emoji,
    # which only verdicts print (never drawn in a figure)
    catalogs = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "attn_core" / "i18n").glob("zh_viz*.py"))
    ac.set_language("zh")
    try:
        left = uncovered({c for c in catalogs if ord(c) > 0x7F}, family_cmaps())
    finally:
        ac.set_language("en")
    assert not {c for c in left if not 0x2600 <= ord(c) <= 0x27BF and ord(c) < 0x1F000}, left


def test_the_subset_is_small_licensed_and_named() -> None:
    assert i18n.CJK_FONT_FILE.stat().st_size <= subset_tool.MAX_BYTES
    font = TTFont(str(i18n.CJK_FONT_FILE))
    # its own family name: a full "Noto Sans CJK SC" on the machine is never shadowed by the subset
    assert font["name"].getDebugName(1) == i18n.CJK_FONT_FAMILY == "attn-core Noto Sans CJK SC subset"
    assert font["CFF "].cff.topDictIndex[0].FamilyName == i18n.CJK_FONT_FAMILY
    licence = (i18n.CJK_FONT_FILE.parent / "OFL.txt").read_text(encoding="utf-8")
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence and "Adobe" in licence
    assert "Copyright" in font["name"].getDebugName(0) or "©" in font["name"].getDebugName(0)
    assert "SimHei" not in licence and "mplfonts" not in licence


def test_the_subset_covers_what_learners_type() -> None:
    """GB2312 level 1 (3,755 common characters, from Python's codec) and full-width punctuation: a learner's own
    title or prompt (北京, 柏林, 老鼠) is drawn even where the machine has no Chinese font."""
    level1 = subset_tool.gb2312_level1()
    assert len(level1) == 3755 and "啊" in level1 and "座" in level1  # the first and the last of level 1
    have = cmap_of(i18n.CJK_FONT_FILE)
    assert not sorted(c for c in level1 if ord(c) not in have)
    assert not [c for c in "北京柏林老鼠，。：；！？（）【】《》“”、" if ord(c) not in have]


def test_check_command_passes() -> None:
    assert subset_tool.main(["--check"]) == 0


# ----------------------------------------------------------------------------------------------- the switch
def test_set_language_sets_and_restores_the_family() -> None:
    before = list(matplotlib.rcParams["font.family"])
    ac.set_language("zh")
    try:
        assert list(matplotlib.rcParams["font.family"]) == [*before, "attn-core Noto Sans CJK SC subset"]
        ac.set_language("zh")  # twice: still restores what was there before the first
        found = [Path(f) for f in fontManager._find_fonts_by_props(FontProperties())]
        assert found[0].name == "DejaVuSans.ttf" and found[-1].name.startswith("NotoSansCJK")
    finally:
        ac.set_language("en")
    assert list(matplotlib.rcParams["font.family"]) == before
    with matplotlib.rc_context({"font.family": ["serif"]}):  # a learner's own choice survives a round trip
        ac.set_language("zh")
        ac.set_language("en")
        assert list(matplotlib.rcParams["font.family"]) == ["serif"]


@pytest.mark.filterwarnings("ignore:Glyph .* missing from font")  # Agg warns for the English boxes (TextPath not)
def test_the_glyph_check_detects_boxes() -> None:
    """The method: with the English family a Chinese character is silently drawn as a missing-glyph box (ink, no
    error, no warning in TextPath) and the cmap check catches it; with the subset the glyph is a real one."""
    chars = "注意力查询键"

    def outline(text: str) -> np.ndarray:  # how attn_core.viz draws labels
        return TextPath((0, 0), text, size=1, prop=FontProperties()).vertices

    english_outlines = {char: outline(char) for char in chars}
    assert all(len(v) for v in english_outlines.values())  # something was drawn: the box
    assert uncovered(chars, family_cmaps()) == set(chars)  # ... and the check says so
    english_pixels = {char: rendered(char) for char in chars}
    ac.set_language("zh")
    try:
        assert uncovered(chars, family_cmaps()) == set()
        for char in chars:
            glyph = outline(char)
            assert glyph.shape != english_outlines[char].shape or not np.allclose(glyph, english_outlines[char])
            assert not np.array_equal(rendered(char), english_pixels[char]), char  # Agg's Text (titles) too
    finally:
        ac.set_language("en")


def test_english_pixels_are_unchanged_by_a_round_trip() -> None:
    """English figures look the same before and after the Chinese edition ran in the same kernel."""

    def png() -> bytes:
        buffer = io.BytesIO()
        ac.plot_attention(torch.eye(3) * 0.5, titles=["head 0"]).savefig(buffer, format="png")
        return buffer.getvalue()

    before = png()
    ac.set_language("zh")
    chinese = png()
    ac.set_language("en")
    assert png() == before != chinese


# ----------------------------------------------------------------------------------------------- every figure
def drawn_texts(fig) -> list[str]:
    """Every string a figure shows: the glyph-outline labels and any matplotlib Text (titles, axes, ticks)."""
    found = [label.text for _, label, _ in text_items(fig)]
    found += [t.get_text() for t in fig.findobj(Text) if t.get_text() and t.get_visible()]
    return found


def _training_history():
    from test_viz_training import make_history

    return make_history()


FIGURES = {
    "plot_attention": lambda: ac.plot_attention(torch.rand(2, 2, 4, 4), title="demo", num_kv_heads=1),
    "plot_attention mask": lambda: ac.plot_attention(torch.tril(torch.ones(4, 4, dtype=torch.bool))),
    "plot_attention extended": lambda: ac.plot_attention(torch.rand(3, 3) * 2 - 0.5, annotate=True),
    "plot_attention hidden values": lambda: ac.plot_attention(torch.rand(12, 12), annotate=True, panel_size=1),
    "explorer 01-05": lambda: widgets.render_attention(num_heads=4, num_kv_heads=2, head="all"),
    "tiles": lambda: tiles.render_tiles(5, values=True),
    "tiles no key": lambda: tiles.render_tiles(1, q_len=8, k_len=12, is_causal=True, row=0),
    "rope": lambda: rope.render_rope(values=True),
    "rope off edge": lambda: rope.render_rope(q_position=200, k_position=0),
    "mla": lambda: mla.render_mla_cache(values=True),
    "paged": lambda: paged.plot_block_tables(_paged(), title="demo"),
    "training": lambda: training.render_training(_training_history(), step=12),
    "training one head": lambda: training.render_training(_training_history(), step=12, head="L1 H0", values=True),
    "decoder view": lambda: decoder_view.render_decoder_heads(
        _decoder_maps(), list("abcdef"), 0, 1, "log", windows=[3]
    ),  # fmt: skip
}


def _paged():
    from test_viz_paged import filled_cache

    return filled_cache()


def _decoder_maps():
    visible = decoder_view.visible_keys(6, 3)  # (6, 6)
    scores = torch.randn(1, 2, 6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return scores.masked_fill(~visible, float("-inf")).softmax(-1)  # (1, 2, 6, 6)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_figure_draws_chinese_with_real_glyphs(name, zh) -> None:
    fig = FIGURES[name]()
    texts = drawn_texts(fig)
    chinese = [t for t in texts if CJK.search(t)]
    assert chinese, f"{name}: no Chinese drawn; texts were {texts}"
    cmaps = family_cmaps()
    missing = {c for t in texts for c in uncovered(t, cmaps)}
    assert not missing, f"{name}: {sorted(missing)} would be drawn as empty boxes"
    # a whole English phrase left in the picture (a label the catalogs missed): 2+ English words in a row,
    # other than code names the Chinese edition keeps (head_dim, block_size, <bos>)
    english = [t for t in texts if re.search(r"\b[a-z]{3,} [a-z]{2,}\b", re.sub(r"head_dim|block_size", "", t))]
    assert not english, f"{name}: English phrases in the Chinese figure: {english}"
    FigureCanvasAgg(fig).draw()  # draws without error through the fallback family


# ----------------------------------------------------------------------------------------------- a notebook's figure
def notebook_figure() -> Figure:
    """A figure as a notebook draws it itself: title, axis names, legend, a note, a suptitle, numbers."""
    fig = Figure(figsize=(4, 3), dpi=80)
    ax = fig.add_subplot()
    ax.plot([1, 2], [1, 2], label="average over random q")
    ax.plot([1, 2], [2, 1], label="GQA")  # a name: no entry, stays
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("score (cosine)")
    ax.set_title("layer 3 (global)")
    ax.text(1.5, 1.5, "0.25")
    ax.legend()
    fig.suptitle("key block")
    return fig


def test_localize_figure_translates_a_notebooks_own_figure(zh) -> None:
    fig = ac.localize_figure(notebook_figure())
    ax = fig.axes[0]
    assert ax.get_title() == "第 3 层（全局）"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("上下文长度（词元）", "得分（余弦）")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["随机 q 上的平均", "GQA"]
    assert fig.get_suptitle() == "键块" and ax.texts[0].get_text() == "0.25"
    assert ac.localize_figure(fig) is fig and ax.get_title() == "第 3 层（全局）"  # twice: unchanged
    assert not uncovered("".join(drawn_texts(fig)), family_cmaps())
    FigureCanvasAgg(fig).draw()


def test_localize_figure_leaves_english_alone() -> None:
    def png(fig) -> bytes:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        return buffer.getvalue()

    assert png(ac.localize_figure(notebook_figure())) == png(notebook_figure())


def test_localize_figure_refuses_what_is_not_a_figure() -> None:
    fig = notebook_figure()
    with pytest.raises(TypeError, match=r"got Axes \(an Axes: pass ax.figure\)"):
        ac.localize_figure(fig.axes[0])
    with pytest.raises(TypeError, match="takes a matplotlib Figure, got str"):
        ac.localize_figure("figure")


def test_plot_attention_labels_in_chinese(zh) -> None:
    """Each kind of label plot_attention draws, in Chinese; token labels and numbers as given."""

    def roles(fig) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for role, label, _ in text_items(fig):
            found.setdefault(role, []).append(label.text)
        return found

    grid = roles(ac.plot_attention(torch.full((2, 2, 3), 1 / 3), num_kv_heads=1, query_labels=["the", "key"]))
    assert grid["axis-name"] == ["查询", "键"] and grid["caption"] == ["固定色标 0–1"]
    assert grid["title"] == ["头 0 · KV 0", "头 1 · KV 0"]
    assert grid["query-label"] == ["the", "key"]  # tokens are never translated, even one that is an English word
    mask = roles(ac.plot_attention(torch.tril(torch.ones(3, 3, dtype=torch.bool))))
    assert mask["legend"] == ["可关注", "被屏蔽"]
    stretched = roles(ac.plot_attention(torch.tensor([[-0.5, 2.0], [0.2, 0.3]])))
    assert stretched["caption"] == ["0–1，扩展到最大值 2.00；底端 -0.50"]
    hidden = roles(ac.plot_attention(torch.rand(12, 12), annotate=True, panel_size=1))
    assert hidden["note"] == ["数值已隐藏：格子太小，数字看不清（请放大面板）"]
    layers = roles(ac.plot_attention(torch.rand(2, 2, 3, 3), titles=["head 0", "x", "layer 1", "y"]))
    assert layers["title"] == ["头 0", "x", "第 1 层", "y"]  # a caller's titles: translated where a catalog has them


@pytest.mark.parametrize("module", ["zh_viz_notebook_titles"])
def test_notebook_figure_entries_name_text_the_notebooks_draw(module) -> None:
    """A fixed entry for a notebook's figure must name text an English notebook draws (no entry left behind when
    a notebook changes its wording): each line of it is in some notebook's code."""
    import importlib
    import json

    sources = "\n".join(
        "".join(cell["source"])
        for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]
        if cell["cell_type"] == "code"
    )
    catalog = importlib.import_module(f"attn_core.i18n.{module}").CATALOG
    fixed = [re.sub(r"\\(.)", lambda m: "\n" if m[1] == "\n" else m[1], p) for p, _ in catalog if re.escape(
        re.sub(r"\\(.)", r"\1", p)) == p]  # fmt: skip
    assert len(fixed) > 10
    orphans = [text for text in fixed if not all(line in sources for line in text.split("\n"))]
    assert not orphans, f"{module}: no notebook draws {orphans}"


def test_bold_chinese_is_drawn_regular_without_a_warning(zh, caplog) -> None:
    """The subset ships one weight on purpose: bold labels (NaN values, diagram titles) fall back to it quietly."""
    prop = FontProperties(weight="bold", size=13.37)  # a size no other test asked for: findfont's cache is cold
    with caplog.at_level("WARNING", logger="matplotlib.font_manager"):
        found = fontManager._find_fonts_by_props(prop)
    assert Path(found[-1]).name.startswith("NotoSansCJK")
    assert not [r for r in caplog.records if "Failed to find font weight" in r.getMessage()]
    assert len(TextPath((0, 0), "注", size=1, prop=prop).vertices) > 20


@pytest.mark.parametrize("fmt", ["svg", "pdf"])
def test_chinese_figures_save_as_svg_and_pdf(fmt, zh) -> None:
    """The explorers' "Save SVG" button and a learner's savefig("x.pdf") work with the fallback family."""
    for name in ("plot_attention", "mla"):  # glyph outlines and matplotlib Text
        buffer = io.BytesIO()
        FIGURES[name]().savefig(buffer, format=fmt)
        assert len(buffer.getvalue()) > 5_000


# ----------------------------------------------------------------------------------------------- a learner's own text
LEARNER_TEXT = "北京柏林老鼠"  # 北 京 柏 鼠 were not in the edition's subset of round 3: drawn as boxes
NOT_IN_GB2312_LEVEL1 = "鼹"  # GB2312 level 2: not in the shipped subset, in every full Chinese font


def learner_figures() -> dict[str, Figure]:
    """A learner's own Chinese in a title, a tick label (matplotlib Text) and an explorer's prompt tokens
    (glyph-outline labels): the places round 3's review found boxes."""
    fig = Figure(figsize=(3, 2), dpi=80)
    ax = fig.add_subplot()
    ax.bar([0, 1, 2], [1, 2, 3])
    ax.set_xticks([0, 1, 2], ["北京", "柏林", "老鼠"])
    ax.set_title("提示词：北京和柏林、老鼠")
    tokens = ["<bos>", "北京", "和", "柏林", "的", "老鼠"]
    prompt = decoder_view.render_decoder_heads(_decoder_maps(), tokens, 0, 1, "log", windows=[3])
    names = ac.plot_attention(torch.full((3, 3), 1 / 3), query_labels=["北京", "柏林", "老鼠"], title="北京")
    return {"title and ticks": fig, "explorer prompt": prompt, "plot_attention labels": names}


def outline(text: str) -> np.ndarray:
    return TextPath((0, 0), text, size=1, prop=FontProperties()).vertices  # (n, 2), as attn_core.viz draws


def box_outline() -> np.ndarray:
    """The missing-glyph box of the current family (a private-use character no font has; its warning dropped)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return outline("\U000f0001")


def draw_recording_warnings(figs: dict[str, Figure]) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for fig in figs.values():
            FigureCanvasAgg(fig).draw()
    return [str(w.message) for w in caught if "glyph" in str(w.message).lower() or "字形" in str(w.message)]


@pytest.fixture
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(fonts, "_warned", set())


def test_a_learners_own_chinese_is_drawn_without_a_system_font(zh, fresh_warnings) -> None:
    assert fonts.system_cjk_families() == []
    assert list(matplotlib.rcParams["font.family"])[-1] == fonts.SUBSET_FAMILY
    figs = learner_figures()
    texts = [t for fig in figs.values() for t in drawn_texts(fig)]
    assert {c for t in texts for c in t} >= set(LEARNER_TEXT)
    assert not uncovered("".join(texts), family_cmaps())
    assert draw_recording_warnings(figs) == []  # no box: neither matplotlib's warning nor ours
    box = box_outline()
    for char in LEARNER_TEXT:  # each is a real glyph, not the box
        glyph = outline(char)
        assert glyph.shape != box.shape or not np.allclose(glyph, box), char
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            box_pixels = rendered("\U000f0001")
        assert not np.array_equal(rendered(char), box_pixels), char


@pytest.mark.filterwarnings("ignore:Glyph .* missing from font")  # matplotlib's own, for the Text title
def test_a_missing_glyph_in_a_label_warns_once(zh, fresh_warnings) -> None:
    """A character no font has: glyph-outline labels (TextPath, silent in matplotlib) warn, once per character."""
    with pytest.warns(fonts.MissingGlyphWarning, match=NOT_IN_GB2312_LEVEL1) as caught:
        ac.plot_attention(torch.full((2, 2), 0.5), query_labels=[NOT_IN_GB2312_LEVEL1, "a"])
    assert len([w for w in caught if w.category is fonts.MissingGlyphWarning]) == 1
    assert "空白方框" in str(caught[0].message)  # in the learner's language
    assert caught[0].filename == __file__  # points at the learner's line, not at attn_core

    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        ac.plot_attention(torch.full((2, 2), 0.5), query_labels=[NOT_IN_GB2312_LEVEL1 + "鼠", "b"])
    assert not [w for w in again if w.category is fonts.MissingGlyphWarning]  # once per character


@pytest.fixture
def system_font(tmp_path, monkeypatch):
    """A "system" Chinese font: the full Debian Noto Sans CJK SC cut to a few characters (it has 鼹, which the
    shipped subset lacks) where installed, else the shipped subset; named "WenQuanYi Zen Hei" and registered
    with matplotlib's font manager as a system font would be. Removed again afterwards."""
    from fontTools import subset

    monkeypatch.setattr(fonts, "SYSTEM_CJK_FAMILIES", ("Noto Sans CJK SC", "WenQuanYi Zen Hei"))
    full = subset_tool.DEBIAN_FONT.exists()
    font = subset_tool.full_font() if full else TTFont(str(i18n.CJK_FONT_FILE))
    options = subset.Options()
    options.name_IDs = [1, 2, 4, 6]
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=LEARNER_TEXT + NOT_IN_GB2312_LEVEL1 + "提示词：和、的")
    subsetter.subset(font)
    for record in font["name"].names:
        if record.nameID in (1, 4):
            record.string = "WenQuanYi Zen Hei"
        elif record.nameID == 6:
            record.string = "WenQuanYiZenHei"
    font["name"].removeNames(nameID=16)
    font["CFF "].cff.topDictIndex[0].FamilyName = "WenQuanYi Zen Hei"
    path = tmp_path / "wqy-test.otf"
    font.save(str(path))
    before = list(fontManager.ttflist)
    fontManager.addfont(str(path))
    assert fontManager.ttflist[-1].name == "WenQuanYi Zen Hei"
    try:
        yield path, full
    finally:
        fontManager.ttflist[:] = before
        type(fontManager)._findfont_cached.cache_clear()


def test_a_system_chinese_font_comes_before_the_shipped_subset(system_font, fresh_warnings) -> None:
    path, full = system_font
    before = list(matplotlib.rcParams["font.family"])
    ac.set_language("zh")
    try:
        assert list(matplotlib.rcParams["font.family"]) == [*before, "WenQuanYi Zen Hei", fonts.SUBSET_FAMILY]
        found = [Path(f) for f in fontManager._find_fonts_by_props(FontProperties())]
        assert found[0].name == "DejaVuSans.ttf" and found[1] == path and found[2] == i18n.CJK_FONT_FILE
        system_only = TextPath((0, 0), "北", size=1, prop=FontProperties(family="WenQuanYi Zen Hei")).vertices
        assert np.array_equal(outline("北"), system_only)  # drawn with the system font
        figs = learner_figures()
        if full:  # a character only a full font has: drawn, with no warning
            figs["level 2"] = ac.plot_attention(torch.full((2, 2), 0.5), query_labels=[NOT_IN_GB2312_LEVEL1, "a"])
        assert draw_recording_warnings(figs) == []
        assert not uncovered("".join(t for fig in figs.values() for t in drawn_texts(fig)), family_cmaps())
    finally:
        ac.set_language("en")
    assert list(matplotlib.rcParams["font.family"]) == before


def test_a_learners_font_choices_are_kept(zh) -> None:
    """The usual Chinese fix, ``rcParams["font.sans-serif"] = [...]``, still works after set_language("zh"), and a
    family the learner sets after it survives set_language("en")."""
    with matplotlib.rc_context({"font.sans-serif": ["DejaVu Serif"]}):  # stands in for ["SimHei"]
        found = [Path(f) for f in fontManager._find_fonts_by_props(FontProperties())]
        assert found[0].name == "DejaVuSerif.ttf" and found[-1] == i18n.CJK_FONT_FILE
        assert not np.array_equal(outline("A"), np.asarray(TextPath((0, 0), "A", size=1, prop=FontProperties(
            family="DejaVu Sans")).vertices))  # fmt: skip
    assert list(matplotlib.rcParams["font.sans-serif"])[0] == "DejaVu Sans"  # set_language never writes it
    matplotlib.rcParams["font.family"] = ["DejaVu Sans Mono", "WenQuanYi Zen Hei"]
    try:
        ac.set_language("en")
        assert list(matplotlib.rcParams["font.family"]) == ["DejaVu Sans Mono", "WenQuanYi Zen Hei"]
    finally:
        matplotlib.rcParams["font.family"] = ["sans-serif"]
