"""One glossary for the Chinese edition, the words Chinese learners already know (issue #21).

Checked over every Chinese text the edition ships: the ``zh``, ``comments`` and ``strings`` values of every
``notebooks/zh/translations/*.json`` (new notebooks' files included as they appear), the Chinese templates of
every ``attn_core/i18n/zh_*.py`` catalog and ``README.zh-CN.md``. English help fields (``en``, ``translated_from``)
are not checked, nor is English quoted or written in a table's English column ("| 等人 | et al. |" stays).

Also checked: no line break between two Chinese characters in markdown (Chromium and JupyterLab show it as a
space in the middle of a word; CSS would drop it, browsers other than Firefox do not).

    python tests/test_zh_glossary.py --fix FILE...   # apply the mechanical replacements to translation/catalog files

Each rule: a pattern that must not occur, the form to use, and why. Where the replacement is mechanical the rule
carries it, so ``--fix`` rewrites a file; the rest need a translator's judgement.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRANSLATIONS = sorted((REPO / "notebooks" / "zh" / "translations").glob("*.json"))
CATALOGS = sorted((REPO / "attn_core" / "i18n").glob("zh_*.py")) + sorted(
    (REPO / "attn_core" / "locale").glob("*/LC_MESSAGES/*.po")  # the gettext catalog (its msgstr)
)
README_ZH = REPO / "README.zh-CN.md"
CJK_CHAR = r"[\u3000-\u303f\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]"  # ideographs, CJK and full-width punctuation


def _english_only_span(text: str, start: int) -> bool:
    """Whether position ``start`` lies in a table cell or a quotation with no Chinese in it (English kept as such:
    a glossary's English column, a paper's title)."""
    line_start, line_end = text.rfind("\n", 0, start) + 1, text.find("\n", start)
    line = text[line_start : len(text) if line_end < 0 else line_end]
    at = start - line_start
    spans = []
    if line.lstrip().startswith("|"):
        left, right = line.rfind("|", 0, at), line.find("|", at)
        spans.append(line[left + 1 : right if right >= 0 else len(line)])
    for quote in re.finditer(r'"[^"\n]*"|“[^”\n]*”|\*[^*\n]+\*', line):
        if quote.start() <= at < quote.end():
            spans.append(quote.group(0))
    return any(not re.search(CJK_CHAR, span) for span in spans)


def _spaced(word: str) -> Callable[[re.Match], str]:
    """A replacement that puts ``word`` (Latin) in with one space on each side that touches Chinese, a letter,
    a digit or code (not punctuation)."""

    def replace(match: re.Match) -> str:
        before = match.string[match.start() - 1 : match.start()]
        after = match.string[match.end() : match.end() + 1]
        left = " " if re.fullmatch(r"[\u3400-\u9fffA-Za-z0-9`$*]", before or "，") else ""
        right = " " if re.fullmatch(r"[\u3400-\u9fffA-Za-z0-9`$*]", after or "，") else ""
        return f"{left}{word}{right}"

    return replace


@dataclasses.dataclass(frozen=True)
class Rule:
    pattern: str  # a regular expression that must not match Chinese text
    use: str  # the form to use instead
    why: str
    replace: str | Callable[[re.Match], str] | None = None  # re.sub replacement when the fix is mechanical
    english_ok: bool = False  # the pattern is English: leave it where it stands in English (a table column, quotes)

    def hits(self, text: str) -> list[re.Match]:
        return [
            m for m in re.finditer(self.pattern, text) if not (self.english_ok and _english_only_span(text, m.start()))
        ]

    def find(self, text: str) -> list[str]:
        return [match.group(0) for match in self.hits(text)]

    def fix(self, text: str) -> str:
        if self.replace is None:
            return text
        keep = {m.start() for m in re.finditer(self.pattern, text)} - {m.start() for m in self.hits(text)}
        replace = self.replace

        def one(match: re.Match) -> str:
            if match.start() in keep:
                return match.group(0)
            return replace(match) if callable(replace) else match.expand(replace)

        return re.sub(self.pattern, one, text)


GLOSSARY = [
    Rule(
        r"注意力汇聚(?!点)",
        "注意力汇聚点 (attention sink)",
        "in d2l-zh, where most Chinese learners start, 注意力汇聚 is attention *pooling*",
        "注意力汇聚点",
    ),
    Rule(
        r"键值缓存|KV缓存|(?i:kv)(?<!KV) ?缓存",
        "KV 缓存",
        "one form for the KV cache (键值缓存 was the most common)",
        "KV 缓存",
    ),
    Rule(r"(?:kv|Kv|kV|K/V) ?头|KV头", "KV 头", "one form for a key/value head", "KV 头"),
    Rule(r"(?<=[\u4e00-\u9fff])KV (?=[缓头])", "的 KV 缓存", "a space between Chinese and KV", " KV "),
    Rule(r"基数(?!树)", "底数 (RoPE's base θ)", "基数 is cardinality; 基数树 (radix tree) is fine", "底数"),
    Rule(r"\s*\bet al\.'s", "等人的", "one form for et al.", " 等人的", english_ok=True),
    Rule(r"\s*\bet al\.", "等人", "one form for et al.", " 等人", english_ok=True),
    Rule(r"(?<=[A-Za-z]) 等(?=[，,、（(；;）)])", "等人", "one form for et al.: Ainslie 等人，2023", " 等人"),
    Rule(r"悄无声息的 ?bug", "静默错误", "silent bug: 静默错误 (悄无声息 is literary)", "静默错误"),
    Rule(r"悄无声息", "静默", "silent: 静默 (悄无声息 is literary)", "静默"),
    Rule(r"前缀填充", "预填充 (prefill)", "prefill is 预填充", "预填充"),
    Rule(r"去除分数", "除以", "the temperature divides the scores", None),
    # term drift found by the round-3 review (issue #33)
    Rule(
        r" ?笔记本(?!电脑) ?",
        "notebook",
        "one word: notebook NN, as in ~140 places (笔记本 was 11)",
        _spaced("notebook"),
    ),
    Rule(
        r"(?<!词)提示(?!词|信息|与|：|:|。|」|”|\*\*|<)",
        "提示词 (a prompt)",
        "提示词 is a prompt everywhere else; 提示 alone is a hint (the 提示 folds, 提示信息) and stays so",
        "提示词",
    ),
    Rule(
        r"(?<!可)学习的(?= ?(?:汇聚|sink|logit|偏置|标量))", "可学习的", "learned (a parameter): 可学习的", "可学习的"
    ),
    Rule(
        r"(?:缩小|减少|降低|少|小)了?\s*(?:约\s*)?(?:\$[^$\n]{1,12}\$|[\d.,]+)\s*倍",
        "只有……的 1/N；缩小到原来的 1/N",
        "Chinese editorial practice does not use 倍 for a decrease (17 Q18/Q20 already write 1/N)",
    ),
    Rule(
        r"召回率", "准确率 (联想回忆)", "召回率 is recall, TP/(TP+FN); an associative-recall task is scored by 准确率"
    ),
    Rule(r"座位", "槽位 (slot)", "a batch's slots are 槽位, as in 11b and 13", "槽位"),
    Rule(r"交错排列", "交错布局", "the text says 交错布局 (interleaved layout)", "交错布局"),
    Rule(r"半旋转", "rotate-half（前后两半配对）", "the text says rotate-half; 半旋转 reads as a half turn"),
    Rule(
        r"快的对|慢的对|快速的对|慢速的对|快速配对|慢速配对|快的和慢的对",
        "高频维度对 / 低频维度对",
        "Chinese RoPE writing (苏剑林, YaRN write-ups) says 高频/低频: learners search with those words",
        lambda m: (
            "高频和低频维度对"
            if m.group(0) == "快的和慢的对"
            else ("高频" if "快" in m.group(0) else "低频") + "维度对"
        ),
    ),
]


def translation_texts(path: Path) -> list[tuple[str, str]]:
    """``(where, Chinese text)`` of every translated value in one translation file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    texts = []
    for cell_id, entry in data.get("cells", {}).items():
        if isinstance(entry.get("zh"), str):
            texts.append((f"cell {cell_id}", entry["zh"]))
        for field in ("comments", "strings"):
            for english, chinese in (entry.get(field) or {}).items():
                texts.append((f"cell {cell_id} {field} {english[:40]!r}", chinese))
    return texts


def catalog_texts(path: Path) -> list[tuple[str, str]]:
    """``(where, text)`` of every string constant with Chinese in a catalog module (its templates), or of every
    translation in a gettext ``.po``."""
    if path.suffix == ".po":
        from babel.messages.pofile import read_po

        with open(path, "rb") as file:
            return [(f"msgid {message.id[:40]!r}", message.string) for message in read_po(file) if message.id]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (f"line {node.lineno}", node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(r"[\u4e00-\u9fff]", node.value)
    ]


def violations(texts: list[tuple[str, str]]) -> list[str]:
    found = []
    for where, text in texts:
        for rule in GLOSSARY:
            for hit in rule.find(text):
                found.append(f"  {where}: {hit.strip()!r} -> {rule.use} ({rule.why})")
    return found


def fix_text(text: str) -> str:
    for rule in GLOSSARY:
        text = rule.fix(text)
    return text


def readme_chinese_section(path: Path = REPO / "README.md") -> str:
    """The Chinese paragraphs of README.md: its "## 中文版" section up to the next heading, English lines dropped."""
    text = path.read_text(encoding="utf-8")
    section = re.search(r"^## 中文版.*?\n(.*?)(?=^## )", text, flags=re.S | re.M)
    assert section is not None, "README.md has no '## 中文版' section"
    paragraphs = section.group(1).split("\n\n")
    return "\n\n".join(p for p in paragraphs if re.search(r"[\u4e00-\u9fff]", p))


def readme_texts(path: Path = README_ZH) -> list[tuple[str, str]]:
    """``(where, text)`` of README.zh-CN.md outside fenced code (commands, the attn_core example)."""
    text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), path.read_text(encoding="utf-8"), flags=re.S)
    return [(f"line {number}", line) for number, line in enumerate(text.split("\n"), 1) if line.strip()]


MARKDOWN_BREAK = re.compile(rf"(?<={CJK_CHAR})\n(?={CJK_CHAR})")


def markdown_prose(text: str) -> str:
    """``text`` with fenced code and display math blanked (their line breaks are theirs)."""
    return re.sub(r"```.*?```|\$\$.*?\$\$", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)


def cjk_line_breaks(text: str) -> list[str]:
    """Line breaks between two Chinese characters in markdown prose (a heading line is its own paragraph)."""
    prose = markdown_prose(text)
    found = []
    for match in MARKDOWN_BREAK.finditer(prose):
        line_start = prose.rfind("\n", 0, match.start()) + 1
        if prose[line_start:].lstrip().startswith(("#", "|")):
            continue
        found.append(text[max(0, match.start() - 8) : match.end() + 8])
    return found


def join_cjk_line_breaks(text: str) -> str:
    """Remove the breaks :func:`cjk_line_breaks` finds (the two lines become one)."""
    prose = markdown_prose(text)
    cuts = []
    for match in MARKDOWN_BREAK.finditer(prose):
        line_start = prose.rfind("\n", 0, match.start()) + 1
        if not prose[line_start:].lstrip().startswith(("#", "|")):
            cuts.append(match.start())
    for at in reversed(cuts):
        text = text[:at] + text[at + 1 :]
    return text


def fix_file(path: Path) -> int:
    """Apply the mechanical rules to the Chinese values of one translation file or the Chinese of a catalog."""
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        for entry in data.get("cells", {}).values():
            if isinstance(entry.get("zh"), str):
                entry["zh"] = join_cjk_line_breaks(fix_text(entry["zh"]))
            for field in ("comments", "strings"):
                if isinstance(entry.get(field), dict):
                    entry[field] = {english: fix_text(chinese) for english, chinese in entry[field].items()}
        new = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
    elif path.suffix == ".md":  # README.zh-CN.md: prose only, not the commands in its code blocks
        parts = re.split(r"(```.*?```)", path.read_text(encoding="utf-8"), flags=re.S)
        new = "".join(part if part.startswith("```") else join_cjk_line_breaks(fix_text(part)) for part in parts)
    else:  # a catalog: only string literals that hold Chinese, never code or the English patterns
        new = re.sub(
            r"\"[^\"\n]*[\u4e00-\u9fff][^\"\n]*\"", lambda m: fix_text(m.group(0)), path.read_text(encoding="utf-8")
        )
    changed = new != path.read_text(encoding="utf-8")
    path.write_text(new, encoding="utf-8")
    return int(changed)


@pytest.mark.parametrize("path", TRANSLATIONS, ids=lambda path: path.stem)
def test_translation_follows_the_glossary(path: Path) -> None:
    found = violations(translation_texts(path))
    assert not found, f"{path.name}: {len(found)} term(s) off the glossary (python {__file__} --fix):\n" + "\n".join(
        found[:40]
    )


@pytest.mark.parametrize("path", CATALOGS, ids=lambda path: path.stem)
def test_catalog_follows_the_glossary(path: Path) -> None:
    found = violations(catalog_texts(path))
    assert not found, f"{path.name}: {len(found)} term(s) off the glossary:\n" + "\n".join(found[:40])


def test_readme_follows_the_glossary() -> None:
    found = violations(readme_texts())
    assert not found, f"README.zh-CN.md: {len(found)} term(s) off the glossary:\n" + "\n".join(found[:40])


@pytest.mark.parametrize("path", TRANSLATIONS, ids=lambda path: path.stem)
def test_no_line_break_between_chinese_characters(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    found = [
        f"  cell {cell_id}: {hit!r}"
        for cell_id, entry in data.get("cells", {}).items()
        if isinstance(entry.get("zh"), str)
        for hit in cjk_line_breaks(entry["zh"])
    ]
    assert not found, (
        f"{path.name}: {len(found)} line break(s) inside Chinese text, shown as a space (--fix joins):\n"
        + ("\n".join(found[:40]))
    )


def test_readme_has_no_line_break_between_chinese_characters() -> None:
    assert not cjk_line_breaks(README_ZH.read_text(encoding="utf-8"))
    chinese = readme_chinese_section()
    assert "中文版" in chinese or "notebook" in chinese
    assert not cjk_line_breaks(chinese), cjk_line_breaks(chinese)


def test_readmes_chinese_paragraph_follows_the_glossary() -> None:
    found = violations([("README.md 中文版", readme_chinese_section())])
    assert not found, "\n".join(found)


def test_the_line_break_check() -> None:
    assert len(cjk_line_breaks("逐个程序地\n检查，\n然后")) == 2
    assert join_cjk_line_breaks("逐个程序地\n检查，\n然后 x\ny") == "逐个程序地检查，然后 x\ny"
    kept = "## 标题\n正文\n\n| 一 |\n| 二 |\n```\n# 注释\n代码\n```\n$$\n甲\n乙\n$$"
    assert cjk_line_breaks(kept) == [] and join_cjk_line_breaks(kept) == kept


def test_the_drift_rules() -> None:
    assert fix_text("见笔记本 08 与本笔记本的图") == "见 notebook 08 与本 notebook 的图"
    assert fix_text("在笔记本电脑的 CPU 上") == "在笔记本电脑的 CPU 上"  # a laptop
    assert fix_text("共享的系统提示只计算一次；长提示被切成分块") == "共享的系统提示词只计算一次；长提示词被切成分块"
    hints = "打开**提示**。显示一条提示信息。“无法显示”的提示。探针、提示与修复；<summary>提示</summary>；提示：看形状"
    assert fix_text(hints) == hints  # a hint stays a hint
    assert fix_text("学习的汇聚点 logit；可学习的 sink") == "可学习的汇聚点 logit；可学习的 sink"
    assert fix_text("并占着每个座位") == "并占着每个槽位"
    assert violations([("x", "KV 缓存小 4 倍；缩小了 5.6 倍；少 $71$ 倍")]) and not violations(
        [("x", "只有 1/4，大 4 倍")]
    )
    assert violations([("x", "召回率")]) and violations([("x", "半旋转")]) and violations([("x", "慢的对")])
    assert not violations([("x", "rotate-half（前后两半配对）/ 交错布局；高频维度对")])
    assert fix_text("快速的对、慢的对，快的和慢的对") == "高频维度对、低频维度对，高频和低频维度对"


def test_english_stays_where_it_is_english() -> None:
    """The et al. rule never rewrites a glossary's English column or a quoted title (round 3: "| 等人 | 等人 |")."""
    table = "| 中文 | English |\n|---|---|\n| 等人 | et al. |"
    assert fix_text(table) == table and not violations([("x", table)])
    quoted = '论文 "Ring Attention, Liu et al." 与 *Xiao et al. 2023*'
    assert fix_text(quoted) == quoted
    assert fix_text("| Liu et al. 提出 |") == "| Liu 等人 提出 |"  # a Chinese cell is Chinese text


def test_the_rules() -> None:
    assert (
        fix_text("StreamingLLM（Xiao et al., ICLR 2024）里的注意力汇聚")
        == "StreamingLLM（Xiao 等人, ICLR 2024）里的注意力汇聚点"
    )
    assert fix_text("Ainslie 等，2023；Yang et al.'s µP") == "Ainslie 等人，2023；Yang 等人的 µP"
    assert fix_text("键值缓存与 kv 头、K/V 头、KV头") == "KV 缓存与 KV 头、KV 头、KV 头"
    assert fix_text("RoPE 基数 10 000；基数树") == "RoPE 底数 10 000；基数树"
    assert fix_text("估算真实模型的键值缓存") == "估算真实模型的 KV 缓存"
    assert fix_text("悄无声息的 bug：它悄无声息地错了") == "静默错误：它静默地错了"
    assert fix_text("注意力汇聚点和 KV 缓存、KV 头") == "注意力汇聚点和 KV 缓存、KV 头"  # already right: unchanged
    assert not violations([("x", "注意力汇聚点（attention sink）、KV 缓存、KV 头、底数、等人、静默错误、预填充")])


if __name__ == "__main__":
    if sys.argv[1:2] != ["--fix"] or len(sys.argv) < 3:
        sys.exit(__doc__)
    for name in sys.argv[2:]:
        print(f"{name}: {'fixed' if fix_file(Path(name)) else 'unchanged'}")
