"""Chinese for the text drawn INSIDE the figures of ``attn_core.viz``: axis names, titles, legends, captions and
notes of ``plot_attention`` and the explorers' pictures (``tiles``, ``rope``, ``mla``, ``paged``, ``training``,
``decoder_view``, ``head_view``), and the diagrams of ``images/make_diagrams.py`` (its ``images/zh/`` copies).

They are drawn with the Noto Sans CJK SC subset that ``ac.set_language("zh")`` registers. Symbols (q, k, m, θ, ℓ),
units (rad, GiB, B) and names (MHA, GQA, <bos>, head_dim) stay as in the code.
"""

from __future__ import annotations

from attn_core.i18n import exact
from attn_core.i18n.zh_viz import NUM

_INT = r"\d+"


def _caption(match, tr) -> str:
    """The colour bar's caption of ``plot_attention``: a scale, then what was clipped, then the bottom."""
    scale = {
        "fixed scale 0–1": "固定色标 0–1",
        "relative: top = largest value": "相对色标：顶端 = 最大值",
    }.get(match["scale"])
    if scale is None:
        scale = f"0–1，扩展到最大值 {match['extended']}" if match["extended"] else f"色标 0–{match['top']}"
    clipped = f"；高于 {match['clip']} 的值被截断" if match["clip"] else ""
    bottom = f"；底端 {match['bottom']}" if match["bottom"] else ""
    return scale + clipped + bottom


def _layer_title(match, tr) -> str:
    """``layer 3``, ``layer 3 (global)``, ``layer 3 (local, window 512) · head 2`` (head_view, decoder_view)."""
    kind = ""
    if match["kind"] == "global":
        kind = "（全局）"
    elif match["kind"]:
        kind = f"（局部，窗口 {match['window']}）"
    head = f" · 头 {match['head']}" if match["head"] else ""
    return f"第 {match['layer']} 层{kind}{head}"


CATALOG = [
    # plotting.py: plot_attention
    *exact(
        {
            "query": "查询",
            "key": "键",
            "may attend": "可关注",
            "blocked": "被屏蔽",
            "values hidden: cells too small for legible numbers (enlarge the panels)": (
                "数值已隐藏：格子太小，数字看不清（请放大面板）"
            ),
        }
    ),
    (
        rf"(?P<scale>fixed scale 0–1|relative: top = largest value|0–1 extended to max (?P<extended>{NUM})"
        rf"|scale 0–(?P<top>{NUM}))(?:; values above (?P<clip>{NUM}) clipped)?(?:; bottom (?P<bottom>{NUM}))?",
        _caption,
    ),
    (rf"head (?P<head>{_INT})", "头 {head}"),
    (rf"head (?P<head>{_INT}) · kv (?P<kv>{_INT})", "头 {head} · KV {kv}"),
    (rf"layer (?P<layer>{_INT}) · head (?P<head>{_INT}) · kv (?P<kv>{_INT})", "第 {layer} 层 · 头 {head} · KV {kv}"),
    # head_view.py, decoder_view.py
    (
        rf"layer (?P<layer>{_INT})(?: \((?P<kind>global|local, window (?P<window>{_INT}))\))?"
        rf"(?: · head (?P<head>{_INT}))?",
        _layer_title,
    ),
    *exact(
        {
            "weight, log scale": "权重，对数色标",
            "share without <bos>": "去掉 <bos> 后的占比",
            "masked: future / outside window": "已屏蔽：未来词元 / 窗口之外",
            "masked: future key": "已屏蔽：未来的键",
        }
    ),
    # tiles.py (08)
    (rf"keys \(blocks of (?P<n>{_INT})\)", "键（每块 {n} 个）"),
    (rf"queries \(blocks of (?P<n>{_INT})\)", "查询（每块 {n} 个）"),
    (rf"tile (?P<step>{_INT})/(?P<total>{_INT})", "分块 {step}/{total}"),
    (rf"row (?P<row>{_INT}): (?P<seen>{_INT})/(?P<total>{_INT}) key blocks", "第 {row} 行：{seen}/{total} 个键块"),
    (rf"row (?P<row>{_INT}) sees no key at all: its output is 0", "第 {row} 行一个键也看不到：输出为 0"),
    (rf"final (?P<value>{NUM})", "最终 {value}"),
    *exact(
        {
            "max m": "最大值 m",
            "sum ℓ": "和 ℓ",
            "key block": "键块",
            "key block (numbers hidden: blocks too narrow)": "键块（数值已隐藏：块太窄）",
            "running max m": "当前最大值 m",
            "max of one key block": "单个键块的最大值",
        }
    ),
    # rope.py (06)
    # as short as the English: the label sits beside the circle and must not leave the figure
    (rf"(?P<vec>[qk]) at (?P<pos>{_INT})", "{vec} 在 {pos}"),
    (rf"(?P<vec>[qk]) at (?P<pos>{_INT}) \((?P<deg>{NUM})°\)", "{vec} 在 {pos} ({deg}°)"),
    (rf"pair (?P<i>{_INT}): θ = (?P<theta>{NUM}) rad/token", "维度对 {i}：θ = {theta} rad/词元"),
    (rf"m − n = (?P<d>{NUM}) is off the right edge", "m − n = {d}，超出右边界"),
    (rf"pair (?P<i>{_INT}) alone", "仅维度对 {i}"),
    (rf"base (?P<base>{NUM}), head_dim (?P<d>{_INT})", "底数 {base}，head_dim {d}"),
    *exact(
        {
            "distance m − n (tokens)": "距离 m − n（词元）",
            "score (cosine)": "得分（余弦）",
            "average over random q": "随机 q 上的平均",
            "this q, k": "当前这对 q、k",
        }
    ),
    # mla.py (09)
    (rf"(?P<layers>{_INT}) layers, (?P<bytes>{_INT}) B/element", "{layers} 层，每个元素 {bytes} B"),
    *exact(
        {
            "KiB cached per token": "每个词元缓存的 KiB",
            "context length (tokens)": "上下文长度（词元）",
            "cache of one sequence (GiB)": "一个序列的缓存（GiB）",
        }
    ),
    # paged.py (13)
    (
        rf"the pool: (?P<used>{_INT}) of (?P<total>{_INT}) blocks in use, (?P<size>{_INT}) slots each "
        r"\(grey, hatched: shared\)",
        "块池：{total} 个块中 {used} 个在用，每块 {size} 个槽位（灰色带斜线：共享）",
    ),
    (rf"(?P<seq>'[^']*'|{_INT}): (?P<n>{_INT}) tokens", "{seq}：{n} 个词元"),  # a sequence id as repr() shows it
    *exact(
        {
            "physical block": "物理块",
            "slot": "槽位",
            "logical block (position // block_size); the box holds the physical block": (
                "逻辑块（position // block_size）；方框里是物理块编号"
            ),
            "block tables": "块表",
        }
    ),
    # training.py (12)
    (
        rf"L(?P<layer>{_INT}) H(?P<head>{_INT}) · prev (?P<prev>{NUM}) · ind (?P<ind>{NUM})",
        "L{layer} H{head} · 前一词元 {prev} · 归纳 {ind}",
    ),
    (rf"loss (?P<loss>{NUM}) at step (?P<step>{_INT})", "第 {step} 步的损失 {loss}"),
    (rf"prev-token L(?P<layer>{_INT}) H(?P<head>{_INT})", "前一词元头 L{layer} H{head}"),
    (rf"induction L(?P<layer>{_INT}) H(?P<head>{_INT})", "归纳头 L{layer} H{head}"),
    *exact(
        {
            "key (values: pick one head)": "键（数值：请选一个头）",
            "loss": "损失",
            "score": "得分",
        }
    ),
    # images/make_diagrams.py: the Chinese copies in images/zh/
    *exact(
        {
            # sdpa_dataflow.png (and the data flow of bug_map.png)
            "Scaled dot-product attention:  softmax(Q Kᵀ / √d_k) · V,  blocked keys excluded": (
                "缩放点积注意力：softmax(Q Kᵀ / √d_k) · V，被屏蔽的键不参与"
            ),
            "scores:\nquery · key\nfor every pair": "分数：\n每一对\n查询 · 键",
            "keeps scores\n~unit variance\nas d_k grows": "d_k 增大时\n分数的方差\n仍约为 1",
            "bool, True =\nmay attend;\nblocked → excluded": "布尔值，True =\n可关注；\n被屏蔽 → 排除",
            "each row\nsums to 1": "每一行\n之和为 1",
            "training only;\nidentity in eval": "只在训练时；\n评估时为恒等",
            "weighted sum\nof value rows": "值向量各行的\n加权和",
            "over keys": "沿键的维度",
            "output": "输出",
            "bool mask": "布尔掩码",
            # bug_map.png: notebook 14's bugs, in order
            "Where the kernel bugs of notebook 14 strike": "notebook 14 的内核 bug 出在哪里",
            "scaled by √d_model, not √d_k (the head size)": "除以 √d_model，而不是 √d_k（头的维度）",
            "V computed with k_proj (copy-paste)": "V 用 k_proj 计算（复制粘贴）",
            "flipped mask: True read as blocked": "掩码取反：把 True 当成屏蔽",
            "-inf fill: fully masked rows → NaN": "用 -inf 填充：整行被屏蔽 → NaN",
            "softmax over queries (dim=-2), not keys": "softmax 沿查询（dim=-2），而不是沿键",
            "mask applied after the softmax": "在 softmax 之后才加掩码",
            "dropout before the softmax": "dropout 放在 softmax 之前",
            "dropout still on in eval()": "eval() 时 dropout 仍然开着",
            "head merge: view without contiguous()": "合并头：view 之前没有 contiguous()",
            "GQA: repeat, not repeat_interleave, for K/V": "GQA：K/V 用了 repeat，而不是 repeat_interleave",
            "per-sequence mask not broadcast over heads": "逐序列的掩码没有在头上广播",
            "decode step: causal mask aligned top-left": "解码步：因果掩码按左上角对齐",
            # mha_mqa_gqa_sharing.png
            "KV cache: 1× (baseline)": "KV 缓存：1×（基线）",
            "KV cache: 1/4× of MHA\nquery head h reads kv h // 4": "KV 缓存：MHA 的 1/4×\n查询头 h 读取 KV 头 h // 4",
            "KV cache: 1/8× of MHA": "KV 缓存：MHA 的 1/8×",
            "query\nheads": "查询\n头",
            "K/V\nheads": "KV\n头",
        }
    ),
    (r"(?P<kind>MHA|GQA|MQA): (?P<n>\d+) K/V heads?", "{kind}：{n} 个 KV 头"),
]
