"""Chinese for the graders of notebook 12d (``attn_core/exercises/linear_attention.py``).

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). A message built
as ``"{where}: {problem}"`` translates its two parts separately (``{…!t}``).
"""

from __future__ import annotations

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"
_WHAT = {
    "the new state (B, H, Dk, Dv)": "新的状态 (B, H, Dk, Dv)",
    "the expanded heads": "扩展后的头",
    "the decay matrix": "衰减矩阵",
    "the output": "输出",
}
_WHAT_RE = "|".join(w.replace("(", r"\(").replace(")", r"\)") for w in _WHAT)


def _what(match, tr) -> str:
    return _WHAT[match["what"]]


CATALOG = [
    *exact(
        {name: name for name in ("check_delta_step", "check_expand_heads", "check_chunk_decay", "check_gated_norm")}
    ),
    # ---- where a case is named, then the problem
    (
        rf"for qk of shape (?P<shape>{_SHAPE}) and num_v_heads=(?P<hv>\d+): (?P<rest>.+)",
        "当 qk 的形状为 {shape}、num_v_heads={hv} 时：{rest!t}",
    ),
    (r"with mild gates: (?P<rest>.+)", "门控较温和时：{rest!t}"),
    (
        r"with gates of (?P<g>-?\d+) per token \(C = (?P<c>\d+)\): (?P<rest>.+)",
        "每个词元的门控为 {g}（C = {c}）时：{rest!t}",
    ),
    # ---- shapes and types
    (
        rf"return (?P<what>{_WHAT_RE}) as a tensor of shape (?P<shape>{_SHAPE}), got (?P<type>[\w.]+)\.",
        lambda m, tr: f"请把{_what(m, tr)}作为形状为 {m['shape']} 的张量返回，你返回的是 {m['type']}。",
    ),
    (
        rf"(?P<what>{_WHAT_RE}) must have shape (?P<shape>{_SHAPE}), got (?P<got>{_SHAPE})\.",
        lambda m, tr: f"{_what(m, tr)}的形状应为 {m['shape']}，你的是 {m['got']}。",
    ),
    (
        rf"the state is \(B, H, Dk, Dv\) = (?P<shape>{_SHAPE}): keys index its rows; you returned it transposed\.",
        "状态是 (B, H, Dk, Dv) = {shape}：键对应它的行；你返回的是它的转置。",
    ),
    (
        r"your function changed its inputs in place: return a new state instead\.",
        "你的函数原地修改了输入：请返回一个新的状态。",
    ),
    # ---- exercise 1: one token of the gated delta rule
    (
        r"you decayed after the write: exp\(g\) multiplies the new token's write too\. Decay first, "
        r"S ← exp\(g\)·S, then read and write, so the token's own write is not shrunk\.",
        "你在写入之后才衰减：exp(g) 把新词元的写入也缩小了。先衰减 S ← exp(g)·S，再读取和写入，"
        "这样词元自己的写入不会被缩小。",
    ),
    (
        r"the erase term is missing: that is linear attention's write S ← exp\(g\)·S \+ β k vᵀ\. The delta rule "
        r"first subtracts what k already reads: S ← S \+ β k \(v − Sᵀk\)ᵀ\.",
        "缺少擦除项：这是线性注意力的写入 S ← exp(g)·S + β k vᵀ。delta 规则先减去 k 已经读到的内容："
        "S ← S + β k (v − Sᵀk)ᵀ。",
    ),
    (
        r"the erase reads the state before its decay: read Sᵀk from exp\(g\)·S \(the state this token "
        r"writes into\), as Qwen3\.5 and Hugging Face do\.",
        "擦除读取的是衰减之前的状态：应从 exp(g)·S（这个词元要写入的状态）读取 Sᵀk，"
        "Qwen3.5 和 Hugging Face 都是这样做的。",
    ),
    (
        r"beta is missing: it is the write strength \(the learning rate of the online least-squares "
        r"step\), multiplying the whole correction \(v − Sᵀk\)\.",
        "缺少 beta：它是写入强度（在线最小二乘一步的学习率），乘在整个修正量 (v − Sᵀk) 上。",
    ),
    (
        r"g was used as the decay factor itself: g is a log decay \(g ≤ 0\); the state is multiplied by exp\(g\)\.",
        "你把 g 直接当作衰减系数：g 是对数衰减（g ≤ 0），状态应乘以 exp(g)。",
    ),
    (
        r"the new state differs from decay-then-delta-write: S ← exp\(g\)·S; S ← S \+ β k \(v − Sᵀk\)ᵀ\.",
        "新的状态与“先衰减、再 delta 写入”不一致：S ← exp(g)·S；S ← S + β k (v − Sᵀk)ᵀ。",
    ),
    # ---- exercise 2: value heads
    (
        r"you tiled the heads with `repeat` \(head h reads h % Hk\)\. Qwen3\.5's value heads that share "
        r"a q/k head are consecutive: use repeat_interleave\((?P<group>\d+), dim=1\) "
        r"\(head h reads h // (?P=group)\)\.",
        "你用 `repeat` 平铺了头（头 h 读取 h % Hk）。Qwen3.5 中共享同一个 q/k 头的值头是相邻的："
        "请用 repeat_interleave({group}, dim=1)（头 h 读取 h // {group}）。",
    ),
    (
        r"value head h must equal q/k head h // \(Hv // Hk\) = h // (?P<group>\d+)\.",
        "值头 h 必须等于 q/k 头 h // (Hv // Hk) = h // {group}。",
    ),
    # ---- exercise 3: the chunked form's decays
    (
        r"your matrix has inf or NaN\. exp\(G_i\)·exp\(−G_j\) overflows: exp\(−G_j\) = exp\((?P<big>\d+)\) is "
        r"inf in any precision \(and exp\(G_i\) underflows to 0, so inf · 0 = NaN\)\. Subtract first, "
        r"exp\(G_i − G_j\), and mask j > i to −inf before the exp\.",
        "你的矩阵里有 inf 或 NaN。exp(G_i)·exp(−G_j) 会上溢：exp(−G_j) = exp({big}) 在任何精度下都是 inf"
        "（而 exp(G_i) 下溢为 0，于是 inf · 0 = NaN）。先相减 exp(G_i − G_j)，并在 exp 之前把 j > i 的位置置为 −inf。",
    ),
    (
        r"your matrix has inf or NaN above the diagonal only\. Subtracting first was right, but the future was "
        r"masked after the exp: there G_i − G_j > 0, exp\(G_i − G_j\) is inf, and inf · 0 = NaN\. Mask j > i to "
        r"−inf before the exp \(masked_fill\), or pick 0 with torch\.where\.",
        "你的矩阵只在对角线以上有 inf 或 NaN。先相减是对的，但你在 exp 之后才屏蔽未来：那里 G_i − G_j > 0，"
        "exp(G_i − G_j) 是 inf，而 inf · 0 = NaN。请在 exp 之前把 j > i 的位置置为 −inf（masked_fill），"
        "或者用 torch.where 取 0。",
    ),
    (
        r"your matrix is transposed: row i is the query/reader, \[i, j\] = exp\(G_i − G_j\)\.",
        "你的矩阵转置了：第 i 行是查询/读取者，[i, j] = exp(G_i − G_j)。",
    ),
    (
        r"entries above the diagonal \(j > i, the future\) must be 0: mask them\.",
        "对角线以上的元素（j > i，即未来）必须为 0：请把它们屏蔽掉。",
    ),
    (
        r"off by one token: G_i = g_1 \+ … \+ g_i includes token i's own gate\.",
        "差了一个词元：G_i = g_1 + … + g_i 包含词元 i 自己的门控。",
    ),
    (
        r"entry \[i, j\] must be exp\(G_i − G_j\) with G = cumsum\(g\) for j ≤ i, else 0\.",
        "当 j ≤ i 时，元素 [i, j] 必须是 exp(G_i − G_j)，其中 G = cumsum(g)；其余为 0。",
    ),
    # ---- exercise 4: the gated RMSNorm
    (
        r"you multiplied by \(1 \+ weight\): that is Qwen3\.5's plain RMSNorm \(weights stored around 0\)\. "
        r"The gated norm stores the scale itself \(init ones\): multiply by weight\.",
        "你乘的是 (1 + weight)：那是 Qwen3.5 普通 RMSNorm 的约定（权重存储在 0 附近）。"
        "门控归一化存储的是缩放本身（初始化为 1）：请乘以 weight。",
    ),
    (
        r"the gate goes after the norm: normalise o first, then multiply by silu\(z\) "
        r"\(Qwen3\.5's norm-before-gate\)\.",
        "门控应在归一化之后：先归一化 o，再乘以 silu(z)（Qwen3.5 先归一化后门控）。",
    ),
    (
        r"the gate is silu\(z\) = z · sigmoid\(z\), not sigmoid\(z\)\.",
        "门控是 silu(z) = z · sigmoid(z)，不是 sigmoid(z)。",
    ),
    (r"the gate silu\(z\) is missing\.", "缺少门控 silu(z)。"),
    (
        r"normalise over the last dim only \(one value head, Dv numbers\), not over all heads\.",
        "只在最后一维上归一化（一个值头，Dv 个数），不要跨所有头。",
    ),
    (
        r"expected weight · o · rsqrt\(mean\(o²\) \+ 1e-6\) · silu\(z\), the mean over the last dim\.",
        "应为 weight · o · rsqrt(mean(o²) + 1e-6) · silu(z)，均值取在最后一维上。",
    ),
]

# ---- notebook 12d's figures and chunk explorer (attn_core/viz/linear_attention.py)
_NUMBER = r"[−-]?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?"
CATALOG += [
    *exact(
        {
            "decay exp(G_i − G_j); boxes: inside a chunk": "衰减 exp(G_i − G_j)；方框：块内计算",
            "key j (written)": "键 j（被写入）",
            "query i (reads)": "查询 i（读取）",
            "recurrent": "逐词元递推",
            "chunked": "分块",
            "sequential steps": "顺序步数",
            "sequence length": "序列长度",
            "chunk size": "块大小",
            "gate −g": "门控 −g",
            "Recall from a fixed state": "从固定大小的状态中回忆",
            "stored pairs": "存入的键值对数",
            "relative retrieval error": "相对读取误差",
            "linear attention": "线性注意力",
            "delta rule": "delta 规则",
            "linear, last 4 pairs": "线性，最近 4 对",
            "delta, last 4 pairs": "delta，最近 4 对",
            "Memory per sequence, Qwen3.5 config (bf16)": "每个序列的显存，Qwen3.5 配置（bf16）",
            "context length (tokens)": "上下文长度（词元）",
            "bytes": "字节",
            "KV cache, 32 full layers": "KV 缓存，32 个全注意力层",
            "KV cache, 8 full layers (3:1 hybrid)": "KV 缓存，8 个全注意力层（3:1 混合）",
            "states of 24 Gated DeltaNet layers": "24 个 Gated DeltaNet 层的状态",
            "Associative recall after training": "训练后的联想回忆",
            "key-value pairs in the context": "上下文中的键值对数",
            "accuracy": "准确率",
            "softmax": "softmax",
            "linear": "线性注意力",
            "gated delta": "Gated DeltaNet",
            "hybrid 3:1": "3:1 混合",
            "chance": "随机猜测",
            "no effect here: the decay is 1 on the diagonal and 0 above it, already 0–1": (
                "此处无效：衰减在对角线上为 1、对角线以上为 0，本来就是 0–1"
            ),
            "values are printed for up to 16 tokens": "最多 16 个词元时才显示数值",
        }
    ),
    (
        rf"L = (?P<length>\d+), chunk size (?P<size>\d+): (?P<chunks>\d+) chunks, "
        rf"so (?P=chunks) sequential state updates instead of (?P=length); "
        rf"each chunk solves one (?P<c>\d+)×(?P=c) triangular system\. "
        rf"max \|chunked − recurrent\| = (?P<diff>{_NUMBER})\.",
        "L = {length}，块大小 {size}：共 {chunks} 块，所以只需 {chunks} 次顺序的状态更新，而不是 {length} 次；"
        "每块求解一个 {c}×{c} 的三角方程组。max |分块 − 逐词元递推| = {diff}。",
    ),
]
