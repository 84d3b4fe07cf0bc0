"""Chinese for notebook 12b's kernel-schedule explorer (``attn_core/viz/kernel_schedule.py``) and its own printed
lines; until they are written with ``_()`` (the graders' messages are in the gettext catalog, ``attn_core/locale``)."""

from __future__ import annotations

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 3, 5)
_N = r"-?\d+"
_VISITS = r"(?P<full>\d+) without a mask, (?P<masked>\d+) with one; (?P<skipped>\d+) skipped\."
_VISITS_ZH = "{full} 个不需要掩码，{masked} 个需要掩码；跳过 {skipped} 个。"

CATALOG = [
    # ---- the kernel-schedule explorer of notebook 12b (attn_core/viz/kernel_schedule.py): labels, titles, lines
    *exact(
        {
            "key tile": "键分块",
            "query tile": "查询分块",
            "forward / dQ kernel: one program per query tile": "前向 / dQ 内核：每个查询分块一个程序",
            "dK/dV kernel: one program per key tile": "dK/dV 内核：每个键分块一个程序",
            "kernel": "内核",
            "forward": "前向",
            "dK/dV": "dK/dV",
            "program": "程序",
            "block": "分块大小",
        }
    ),
    (
        rf"program (?P<p>\d+) \(queries (?P<a>\d+)–(?P<b>\d+)\) visits key tiles 0–(?P<e>\d+): {_VISITS}",
        "程序 {p}（查询 {a}–{b}）访问键分块 0–{e}：" + _VISITS_ZH,
    ),
    (
        r"program (?P<p>\d+) \(queries (?P<a>\d+)–(?P<b>\d+)\) sees no key: it writes zeros and lse = −inf\.",
        "程序 {p}（查询 {a}–{b}）一个键也看不到：它写入 0，lse = −inf。",
    ),
    (
        rf"program (?P<p>\d+) \(keys (?P<a>\d+)–(?P<b>\d+)\) visits query tiles (?P<s>\d+)–(?P<e>\d+): {_VISITS}",
        "程序 {p}（键 {a}–{b}）访问查询分块 {s}–{e}：" + _VISITS_ZH,
    ),
    (
        rf"program (?P<p>{_N}) does not exist: the (?P<k>forward|dK/dV) kernel has (?P<n>\d+) programs per head "
        r"\(0\.\.(?P<last>-?\d+)\) for these lengths\.",
        "程序 {p} 不存在：在这些长度下，{k} 内核每个头只有 {n} 个程序（0..{last}）。",
    ),
    # ---- notebook 12b's own printed lines and figure titles (through attn_core.i18n.localize)
    *exact(
        {
            'triton is not installed: this cell skips (pip install -e ".[triton]" installs it).': (
                '没有安装 triton：本单元格跳过（用 pip install -e ".[triton]" 安装）。'
            ),
            "weights rebuilt from the kernel's lse": "由内核的 lse 重建的注意力权重",
            "square, no mask": "方阵，无掩码",
            "GQA chunk, causal": "GQA 分块，因果",
            "Lq > Lk, causal (blind queries)": "Lq > Lk，因果（有看不到任何键的查询）",
        }
    ),
    (
        r"✅ (?P<what>.+): kernel == ac\.triton_attention == ac\.tiled_attention == float64 reference",
        "✅ {what!t}：内核 == ac.triton_attention == ac.tiled_attention == float64 参考实现",
    ),
]
