"""Chinese for the labels of notebook 09b's explorer and figures (``attn_core/viz/sparse.py``), until they are
written with ``_()`` (the graders' messages are in the gettext catalog, ``attn_core/locale``)."""

from __future__ import annotations

from attn_core.i18n import exact

CATALOG = [
    *exact(
        {
            "top-k": "top-k",
            "CSA m": "CSA 压缩率 m",
            "HCA m": "HCA 压缩率 m",
            "V3.2 DSA (top-k tokens)": "V3.2 DSA（top-k 个词元）",
            "V4 sliding window": "V4 滑动窗口",
            "V4 HCA": "V4 HCA",
            "V4 CSA": "V4 CSA",
            "keys (tokens | entries)": "键（词元 | 压缩条目）",
            "query position": "查询位置",
            "not read": "未读取",
            "a token read": "读取的词元",
            "a compressed entry read": "读取的压缩条目",
            # notebook 09b's own figure (ac.localize_figure)
            "KV cache of one sequence of 1M tokens (GiB, bf16)": "一条 1M 词元序列的 KV 缓存（GiB，bf16）",
            "V3 (MLA)": "V3（MLA）",
            "V3.2 (+ index keys)": "V3.2（+ 索引键）",
        }
    ),
    (r"last query reads (?P<n>\d+)", "最后一个查询读取 {n} 个"),
    (
        r"the last query \(position (?P<pos>\d+)\) reads (?P<parts>.+), of (?P<length>\d+) tokens\.",
        lambda m, tr: (
            f"最后一个查询（位置 {m['pos']}）读取："
            + m["parts"]
            .replace("V3.2 DSA (top-k tokens)", "V3.2 DSA（top-k 个词元）")
            .replace("V4 sliding window", "V4 滑动窗口")
            .replace(" tokens", " 个词元")
            .replace(" entries", " 个压缩条目")
            .replace(" of ", "，共 ")
            .replace(": ", "：")
            .replace("; ", "；")
            + f"；总共 {m['length']} 个词元。"
        ),
    ),
]
