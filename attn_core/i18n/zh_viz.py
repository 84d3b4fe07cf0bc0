"""Chinese for the explorers: control labels, the explanation line under each figure, the messages of
impossible settings (``attn_core/viz/widgets.py``, ``tiles.py``, ``rope.py``, ``mla.py``, ``head_view.py``).

The text inside the figures is in ``zh_viz_figures``. Dropdown choices stay as in
the code too (``causal``, ``prefix-LM``, ...): they are the values a learner would type.

One piece: the catalog of the explorers' shared labels and lines, searched as one list.
"""

from __future__ import annotations

import re

from attn_core.i18n import exact

NUM = r"[−-]?(?:\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?|inf|nan|∞)"  # a number as the explain_… functions print it

LABELS = {
    # widgets.py: the explorers of 01-05 and the display row every explorer shares
    "divide by √d_k": "除以 √d_k",
    "temperature": "温度",
    "tokens": "词元数",
    "seed": "随机种子",
    "heads": "头数",
    "head": "头",
    "all": "全部",  # the head dropdown's first choice
    "mask": "掩码",
    "query heads": "查询头数",
    "kv heads": "KV 头数",
    "window": "窗口",
    "padding": "填充",
    "prefix": "前缀长度",
    "dropout p": "dropout 概率 p",
    "size": "尺寸",
    "font": "字号",
    "print values": "显示数值",
    "fixed scale 0–1": "固定色标 0–1",
    "off: colours stretch to the largest weight shown": "关闭：颜色按所显示的最大权重拉伸",
    "Save PNG": "保存 PNG",
    "Save SVG": "保存 SVG",
    "write the figure to saved_figures/": "把当前图写入 saved_figures/",
    # tiles.py (08)
    "step": "步骤",
    "queries": "查询数",
    "keys": "键数",
    "query block": "查询块",
    "key block": "键块",
    "causal": "因果",
    "row": "行",
    "play": "播放",
    # rope.py (06)
    "query position m": "查询位置 m",
    "key position n": "键位置 n",
    "pair i": "维度对 i",
    "base": "底数 base",
    "distances shown": "显示的距离",
    # mla.py (09)
    "GQA kv heads": "GQA 的 KV 头数",
    "layers": "层数",
    "element": "元素类型",
    # head_view.py (10), decoder_view.py (11), training.py (12)
    "sentence": "句子",
    "layer": "层",
    "prompt": "提示词",
    "scale": "色标",
    "training step": "训练步数",
}

MASK_TEXT = [
    (rf"no mask: every query attends to all (?P<n>{NUM}) keys\.", "无掩码：每个查询都关注全部 {n} 个键。"),
    (
        r"causal: row i attends to keys 0\.\.i \(no peeking at later tokens\)\.",
        "因果掩码：第 i 行关注键 0..i（不偷看后面的词元）。",
    ),
    (
        rf"padding: keys (?P<first>{NUM})\.\.(?P<last>{NUM}) are padding and get weight 0 in every row\.",
        "填充掩码：键 {first}..{last} 是填充，每一行给它们的权重都是 0。",
    ),
    (
        rf"causal \+ padding: row i attends to keys 0\.\.min\(i, (?P<last>{NUM})\)\.",
        "因果 + 填充掩码：第 i 行关注键 0..min(i, {last})。",
    ),
    (
        rf"sliding window (?P<w>{NUM}): row i attends to keys i-(?P<w1>{NUM})\.\.i \((?P<w2>{NUM}) most recent\)\.",
        "滑动窗口 {w}：第 i 行关注键 i-{w1}..i（最近的 {w2} 个）。",
    ),
    (
        rf"prefix-LM: tokens 0\.\.(?P<last>{NUM}) see each other both ways; later rows are causal\.",
        "前缀语言模型（prefix-LM）：词元 0..{last} 彼此双向可见；之后的行是因果的。",
    ),
]

EXPLAIN_ATTENTION = [
    # widgets.explain_attention: mask, scale, then the kv sharing and dropout when they apply
    (
        r"(?P<mask>.+?) (?P<scale>scale = .+?\(1\.00 = one-hot\)\.)"
        r"(?: (?P<gqa>\d+ query heads share .+?same keys and values\.))?(?: (?P<dropout>dropout p=.+))?",
        "{mask!t}{scale!t}{gqa!t}{dropout!t}",
    ),
    (
        rf"scale = (?P<scale>1/√\d+|1) ÷ temperature (?P<t>{NUM}) = (?P<value>{NUM}); "
        rf"largest weight per row averages (?P<avg>{NUM}) \(1\.00 = one-hot\)\.",
        "缩放系数 = {scale} ÷ 温度 {t} = {value}；每行最大权重的平均值为 {avg}（1.00 = one-hot）。",
    ),
    (
        rf"(?P<h>{NUM}) query heads share (?P<kv>{NUM}) kv head\(s\): groups of (?P<g>{NUM}), "
        rf"head h reads kv head h // (?P<g2>{NUM}); same colour = same keys and values\.",
        "{h} 个查询头共享 {kv} 个 KV 头：每组 {g} 个，头 h 读取 KV 头 h // {g2}；颜色相同 = 键和值相同。",
    ),
    (
        rf"dropout p=(?P<p>{NUM}): (?P<pct>{NUM})% of the weights were zeroed and the rest scaled by "
        rf"1/\(1-p\) = (?P<factor>{NUM}), so rows no longer sum to exactly 1\.",
        "dropout p={p}：{pct}% 的权重被置零，其余的乘以 1/(1-p) = {factor}，所以每行之和不再恰好是 1。",
    ),
]

EXPLAIN_TILES = [
    # tiles.explain_tiles: "step s/n: query block × key block" + what it did to the chosen row
    (
        rf"step 0/(?P<n>{NUM}): nothing computed yet; every row starts with running max m = −∞ and sum ℓ = 0; "
        rf"(?P<skipped>{NUM}) of the (?P<n2>{NUM}) tiles are fully masked and will be skipped\.",
        "第 0/{n} 步：还没有计算；每一行从运行最大值 m = −∞、运行和 ℓ = 0 开始；"
        "{n2} 个块中有 {skipped} 个完全被掩码，会被跳过。",
    ),
    (
        rf"step 0/(?P<n>{NUM}): nothing computed yet; every row starts with running max m = −∞ and sum ℓ = 0\.",
        "第 0/{n} 步：还没有计算；每一行从运行最大值 m = −∞、运行和 ℓ = 0 开始。",
    ),
    (
        rf"(?P<head>step {NUM}/{NUM}: query block {NUM} × key block {NUM}"
        r"(?: \(on the causal diagonal: the mask is applied inside this tile\))?)(?P<rest>(?: is|;) .+)",
        "{head!t}{rest!t}",
    ),
    (
        rf"step (?P<s>{NUM})/(?P<n>{NUM}): query block (?P<qb>{NUM}) × key block (?P<kb>{NUM})",
        "第 {s}/{n} 步：查询块 {qb} × 键块 {kb}",
    ),
    (
        rf"step (?P<s>{NUM})/(?P<n>{NUM}): query block (?P<qb>{NUM}) × key block (?P<kb>{NUM}) "
        r"\(on the causal diagonal: the mask is applied inside this tile\)",
        "第 {s}/{n} 步：查询块 {qb} × 键块 {kb}（位于因果对角线上：掩码在这个块内部施加）",
    ),
    (
        r" is skipped: every key in it comes after every query \(causal\), so all its scores would be −∞ "
        r"and it adds nothing\. No memory read, no FLOPs\.",
        " 被跳过：其中每个键都在每个查询之后（因果），它的分数全是 −∞，什么也不贡献。不读内存，不耗算力。",
    ),
    (
        rf"; row (?P<row>{NUM}) lives in query block (?P<block>{NUM}), which has not started yet\.",
        "；第 {row} 行在查询块 {block} 里，这个块还没开始。",
    ),
    (
        rf"; row (?P<row>{NUM}) saw no key at all \(causal with fewer keys than queries\): its output is 0\.",
        "；第 {row} 行一个键也看不到（因果掩码且键比查询少）：它的输出是 0。",
    ),
    (
        rf"; row (?P<row>{NUM}) is finished: max (?P<m>{NUM}), normaliser (?P<l>{NUM}), "
        rf"so its weights are exp\(s − (?P<m2>{NUM})\) / (?P<l2>{NUM})\.",
        "；第 {row} 行已完成：最大值 {m}，归一化因子 {l}，所以它的权重是 exp(s − {m2}) / {l2}。",
    ),
    (
        rf"; row (?P<row>{NUM}): every key of this block is masked for it, m stays −∞ and ℓ stays 0\.",
        "；第 {row} 行：这个块的键对它全被掩码，m 仍为 −∞，ℓ 仍为 0。",
    ),
    (
        rf"; row (?P<row>{NUM}): first visible keys, running max −∞ → (?P<m>{NUM}), sum 0 → (?P<l>{NUM})\.",
        "；第 {row} 行：第一次看到可见的键，运行最大值 −∞ → {m}，运行和 0 → {l}。",
    ),
    (
        rf"; row (?P<row>{NUM}): running max stays (?P<m>{NUM}), no rescale \(factor 1\); "
        rf"sum (?P<a>{NUM}) → (?P<b>{NUM})\.",
        "；第 {row} 行：运行最大值保持 {m}，无需重新缩放（因子为 1）；运行和 {a} → {b}。",
    ),
    (
        rf"; row (?P<row>{NUM}): running max (?P<m0>{NUM}) → (?P<m1>{NUM}), sum rescaled by "
        rf"exp\((?P<e0>{NUM})−(?P<e1>{NUM})\)=(?P<r>{NUM}); sum (?P<a>{NUM}) → (?P<b>{NUM})\.",
        "；第 {row} 行：运行最大值 {m0} → {m1}，运行和乘以 exp({e0}−{e1})={r} 重新缩放；运行和 {a} → {b}。",
    ),
]

EXPLAIN_ROPE = [
    # rope.explain_rope
    (
        rf"pair (?P<i>{NUM}) of (?P<pairs>{NUM}): θ = (?P<base>{NUM})\^\(−2·(?P<i2>{NUM})/(?P<d>{NUM})\) = "
        rf"(?P<theta>{NUM}) rad per token \(a full turn every (?P<turn>{NUM}) tokens\)\. "
        rf"q at (?P<m>{NUM}) turned (?P<qa>{NUM}) rad, k at (?P<n>{NUM}) turned (?P<ka>{NUM}) rad: "
        rf"RoPE added \(m − n\)·θ = (?P<diff>{NUM}) rad between them, the same for any m, n (?P<dist>{NUM}) apart; "
        r"(?P<scores>.+)",
        "第 {i} 对（共 {pairs} 对）：θ = {base}^(−2·{i2}/{d}) = {theta} 弧度/词元（每 {turn} 个词元转一整圈）。"
        "位置 {m} 的 q 转了 {qa} 弧度，位置 {n} 的 k 转了 {ka} 弧度：RoPE 在两者之间加上了 (m − n)·θ = {diff} 弧度，"
        "任何相距 {dist} 的 m、n 都一样；{scores!t}",
    ),
    (
        rf"score of this q, k (?P<this>{NUM}); averaged over random q, (?P<avg>{NUM})\.",
        "这对 q、k 的分数为 {this}；对随机 q 取平均为 {avg}。",
    ),
    (r"the distance is beyond the plotted range\.", "这个距离超出了图中画出的范围。"),
]

EXPLAIN_MLA = [
    # mla.explain_mla_cache
    (
        rf"per token per layer: MHA 2·(?P<h>{NUM})·(?P<d>{NUM}) = (?P<n_mha>{NUM}), "
        rf"GQA 2·(?P<kv>{NUM})·(?P<d2>{NUM}) = (?P<n_gqa>{NUM}), MQA 2·(?P<d3>{NUM}) = (?P<n_mqa>{NUM}), "
        rf"MLA (?P<rank>{NUM}) \+ (?P<rope>{NUM}) = (?P<n_mla>{NUM}) numbers "
        rf"\(MHA, GQA and MQA with head_dim (?P<d4>{NUM}) for K and for V\)\. "
        rf"MLA caches (?P<bytes>{NUM}) B per token \((?P<total>{NUM} (?:GiB|MiB|KiB|B)) at (?P<at>{NUM}) tokens\); "
        rf"the others cache (?P<mha>{NUM})× for MHA, (?P<gqa>{NUM})× for GQA, (?P<mqa>{NUM})× for MQA\.",
        "每个词元每层缓存的数值个数：MHA 2·{h}·{d} = {n_mha}，GQA 2·{kv}·{d2} = {n_gqa}，MQA 2·{d3} = {n_mqa}，"
        "MLA {rank} + {rope} = {n_mla}（MHA、GQA、MQA 的 K 和 V 都按 head_dim {d4} 计）。"
        "MLA 每个词元缓存 {bytes} B（{at} 个词元共 {total}）；"
        "其他方式的缓存是它的 MHA {mha}×、GQA {gqa}×、MQA {mqa}×。",
    ),
]


PATTERN_NAMES = {"previous": "前一个词元", "self": "自身", "next": "后一个词元"}  # [CLS], [SEP] stay as they are


def _best_heads(match, tr) -> str:
    # "previous → head 3 (41%); self → head 0 (22%); ..." from head_view.HeadView.explain
    parts = [re.fullmatch(r"(.+?) → head (\d+) \((.+?)\)", part).groups() for part in match["best"].split("; ")]
    best = "；".join(f"{PATTERN_NAMES.get(name, name)} → 头 {head}（{share}）" for name, head, share in parts)
    return f"{match['n']} 个词元。第 {match['layer']} 层里在每种模式上占比最大的头：{best}。"


def _shares(match, tr) -> str:
    # "previous 41%, self 2%, [CLS] 30%, ..." from head_view.HeadView.explain
    parts = [part.rsplit(" ", 1) for part in match["shares"].split(", ")]
    shares = "，".join(f"{PATTERN_NAMES.get(name, name)} {share}" for name, share in parts)
    return f"{match['n']} 个词元。第 {match['layer']} 层第 {match['head']} 头：一个词元的注意力平均分到 {shares}。"


EXPLAIN_HEAD_VIEW = [
    # head_view.HeadView.explain
    (
        rf"(?P<n>{NUM}) tokens\. Layer (?P<layer>{NUM}), head with the largest share on each pattern: "
        r"(?P<best>(?:.+? → head \d+ \(.+?\))(?:; .+? → head \d+ \(.+?\))*)\.",
        _best_heads,
    ),
    (
        rf"(?P<n>{NUM}) tokens\. Layer (?P<layer>{NUM}) head (?P<head>{NUM}): "
        r"average share of a token's attention on (?P<shares>(?:\S+ \S+%)(?:, \S+ \S+%)*)\.",
        _shares,
    ),
]

ERRORS = [
    # ValueErrors an explorer shows as "Not possible: ..." (the usual ones a slider can reach)
    (
        rf"query heads \((?P<h>{NUM}), q dim -3\) must be a multiple of key/value heads \((?P<kv>{NUM}), k dim -3\): "
        r"each kv head serves a whole group of query heads\. "
        rf"Choose num_kv_heads among the divisors of (?P<h2>{NUM})\.",
        "查询头数（{h}，q 的第 -3 维）必须是键/值头数（{kv}，k 的第 -3 维）的整数倍：每个 KV 头服务一整组查询头。"
        "请从 {h2} 的约数中选择 num_kv_heads。",
    ),
    (
        rf"num_kv_heads=(?P<kv>{NUM}) must divide num_heads=(?P<h>{NUM}) "
        r"\(each kv head serves a whole group of query heads\)\.",
        "num_kv_heads={kv} 必须整除 num_heads={h}（每个 KV 头服务一整组查询头）。",
    ),
    (
        rf"padding \((?P<padding>{NUM})\) must leave at least one real token of the (?P<n>{NUM})\.",
        "填充长度（{padding}）必须在 {n} 个词元中至少留下一个真实词元。",
    ),
    (r"temperature must be > 0, got (?P<t>.+)\.", "温度必须 > 0，当前为 {t}。"),
    (r"num_kv_heads must be at least 1, got (?P<kv>.+)\.", "num_kv_heads 至少为 1，当前为 {kv}。"),
    (
        rf"head (?P<head>.+?) does not exist; there are (?P<n>{NUM}) heads \(0\.\.(?P<last>{NUM})\)\.",
        "头 {head} 不存在；共有 {n} 个头（0..{last}）。",
    ),
    (
        rf"layer (?P<layer>.+?) does not exist; the model has layers 0\.\.(?P<last>{NUM})\.",
        "第 {layer} 层不存在；模型的层是 0..{last}。",
    ),
    (r"type a sentence\.", "请输入一个句子。"),
    (
        rf"the key \(position (?P<k>{NUM})\) comes after the query \(position (?P<q>{NUM})\): under a causal mask "
        r"a query only sees keys at or before it\. Move the key to a position <= the query's\.",
        "键（位置 {k}）在查询（位置 {q}）之后：在因果掩码下，查询只能看到它自己及之前的键。"
        "请把键移到不超过查询的位置。",
    ),
    (
        rf"pair (?P<i>{NUM}) does not exist: head_dim (?P<d>{NUM}) has pairs 0\.\.(?P<last>{NUM})\.",
        "第 {i} 对不存在：head_dim {d} 只有第 0..{last} 对。",
    ),
    (
        rf"row (?P<row>{NUM}) is outside the sequence: there are (?P<n>{NUM}) queries "
        rf"\(rows 0\.\.(?P<last>{NUM})\)\. Pick a smaller row or more queries\.",
        "第 {row} 行超出了序列：只有 {n} 个查询（第 0..{last} 行）。请选更小的行号，或增加查询数。",
    ),
    (
        rf"step (?P<step>{NUM}) does not exist: this grid has (?P<n>{NUM}) tiles \(steps 0\.\.(?P<last>{NUM})\)\.",
        "第 {step} 步不存在：这个网格有 {n} 个块（第 0..{last} 步）。",
    ),
    (
        r"nothing to save: the current settings did not produce a figure\.",
        "没有可保存的图：当前设置没有生成图。",
    ),
]

CATALOG = [
    *exact(LABELS),
    *EXPLAIN_ATTENTION,
    *MASK_TEXT,
    *EXPLAIN_TILES,
    *EXPLAIN_ROPE,
    *EXPLAIN_MLA,
    *EXPLAIN_HEAD_VIEW,
    *ERRORS,
    # the line stored under every explorer's static figure (Explorer.fallback_line; the labels are already Chinese)
    (
        r"Static figure at the default settings\. With a running kernel \(JupyterLab, see the README's Quick "
        r"start\) the controls \((?P<controls>.*)\) redraw it live\.",
        "默认设置下的静态图。在运行中的内核里（JupyterLab，见 README 的“快速开始”），"
        "控件（{controls}）会实时重绘这张图。",
    ),
]
