"""One glossary for the Chinese edition, the words Chinese learners already know (issue #21).

Checked over every Chinese text the edition ships: the ``zh``, ``comments`` and ``strings`` values of every
``notebooks/zh/translations/*.json`` (new notebooks' files included as they appear) and the Chinese templates of
every ``attn_core/i18n/zh_*.py`` catalog. English help fields (``en``, ``translated_from``) are not checked.

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
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRANSLATIONS = sorted((REPO / "notebooks" / "zh" / "translations").glob("*.json"))
CATALOGS = sorted((REPO / "attn_core" / "i18n").glob("zh_*.py"))


@dataclasses.dataclass(frozen=True)
class Rule:
    pattern: str  # a regular expression that must not match Chinese text
    use: str  # the form to use instead
    why: str
    replace: str | None = None  # re.sub replacement when the fix is mechanical

    def find(self, text: str) -> list[str]:
        return [match.group(0) for match in re.finditer(self.pattern, text)]


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
    Rule(r"\s*\bet al\.'s", "等人的", "one form for et al.", " 等人的"),
    Rule(r"\s*\bet al\.", "等人", "one form for et al.", " 等人"),
    Rule(r"(?<=[A-Za-z]) 等(?=[，,、（(；;）)])", "等人", "one form for et al.: Ainslie 等人，2023", " 等人"),
    Rule(r"悄无声息的 ?bug", "静默错误", "silent bug: 静默错误 (悄无声息 is literary)", "静默错误"),
    Rule(r"悄无声息", "静默", "silent: 静默 (悄无声息 is literary)", "静默"),
    Rule(r"前缀填充", "预填充 (prefill)", "prefill is 预填充", "预填充"),
    Rule(r"去除分数", "除以", "the temperature divides the scores", None),
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
    """``(where, text)`` of every string constant with Chinese in a catalog module (its templates)."""
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
        if rule.replace is not None:
            text = re.sub(rule.pattern, rule.replace, text)
    return text


def fix_file(path: Path) -> int:
    """Apply the mechanical rules to the Chinese values of one translation file or the Chinese of a catalog."""
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        for entry in data.get("cells", {}).values():
            if isinstance(entry.get("zh"), str):
                entry["zh"] = fix_text(entry["zh"])
            for field in ("comments", "strings"):
                if isinstance(entry.get(field), dict):
                    entry[field] = {english: fix_text(chinese) for english, chinese in entry[field].items()}
        new = json.dumps(data, ensure_ascii=False, indent=1) + "\n"
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
