"""Chinese for the graders and figures of notebook 12g (``attn_core/exercises/lightning.py``,
``attn_core/viz/lightning.py``).

Every ❌ message the graders can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). A message built as
``"{where}: {problem}"`` translates its two parts separately (``{…!t}``).
"""

from __future__ import annotations

import re

from attn_core.exercises.lightning import FLOAT32
from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"
_WHAT = {"the slopes": "斜率", "the block's output": "块的输出", "the new state": "新的状态"}
_WHAT_RE = "|".join(re.escape(w) for w in _WHAT)


def _what(match) -> str:
    return _WHAT[match["what"]]


CATALOG = [
    *exact({name: name for name in ("check_slopes", "check_intra_block", "check_state_update")}),
    # ---- where a case is named, then the problem
    (
        r"for num_heads=(?P<h>\d+), layer_idx=(?P<i>\d+), num_layers=(?P<n>\d+): (?P<rest>.+)",
        "当 num_heads={h}、layer_idx={i}、num_layers={n} 时：{rest!t}",
    ),
    (rf"for q of shape (?P<shape>{_SHAPE}): (?P<rest>.+)", "当 q 的形状为 {shape} 时：{rest!t}"),
    (r"for a block of (?P<b>\d+) tokens: (?P<rest>.+)", "对一个 {b} 个词元的块：{rest!t}"),
    # ---- shapes and types
    (
        rf"return (?P<what>{_WHAT_RE}) as a tensor of shape (?P<shape>{_SHAPE}), got (?P<type>[\w.]+)\.",
        lambda m, tr: f"请把{_what(m)}作为形状为 {m['shape']} 的张量返回，你返回的是 {m['type']}。",
    ),
    (
        rf"(?P<what>{_WHAT_RE}) must have shape (?P<shape>{_SHAPE}), got (?P<got>{_SHAPE})\.",
        lambda m, tr: f"{_what(m)}的形状应为 {m['shape']}，你的是 {m['got']}。",
    ),
    (
        rf"(?P<what>{_WHAT_RE}) must be a real floating-point tensor, got (?P<dtype>[\w.]+)\.",
        lambda m, tr: f"{_what(m)}必须是实数浮点张量，你的是 {m['dtype']}。",
    ),
    (
        r"return shape \((?P<h>\d+),\); HF's slope_rate buffer is \(H, 1, 1\)\.",
        "请返回形状 ({h},)；(H, 1, 1) 是 HF 的 slope_rate 缓冲区的形状。",
    ),
    (
        r"your function changed its inputs in place: return a new state instead\.",
        "你的函数原地修改了输入：请返回一个新的状态。",
    ),
    (
        r"the state is \(B, H, Dk, Dv\) = (?P<shape>[^:]+): write k vᵀ, not v kᵀ\.",
        "状态是 (B, H, Dk, Dv) = {shape}：请写 k vᵀ，而不是 v kᵀ。",
    ),
    (r"the state is \(B, H, Dk, Dv\): write k vᵀ, not v kᵀ\.", "状态是 (B, H, Dk, Dv)：请写 k vᵀ，而不是 v kᵀ。"),
    (
        re.escape(FLOAT32),
        "很接近，但只达到 float32 的精度：你的衰减是用 float32 构造的（例如 torch.arange(b).float()）。"
        "请用输入的 dtype（这里是 float64）构造：torch.arange(b, dtype=q.dtype)。",
    ),
    # ---- exercise 1: the slopes
    (
        r"the exponent starts at 0: head 0 got slope 1 · factor\. MiniMax's \(and ALiBi's\) heads run h = 1\.\.H, "
        r"slope 2\^\(−8h/H\), so head 0 gets 2\^\(−8/H\)\.",
        "指数从 0 开始了：头 0 的斜率成了 1 · 层因子。MiniMax（和 ALiBi）的头编号为 h = 1..H，斜率 2^(−8h/H)，"
        "所以头 0 的斜率是 2^(−8/H)。",
    ),
    (
        r"the exponent's sign is flipped: slopes must be below 1, 2\^\(−8 \(h\+1\)/H\), so every head decays\.",
        "指数的符号反了：斜率必须小于 1，即 2^(−8 (h+1)/H)，这样每个头都会衰减。",
    ),
    (
        r"operator precedence: 1 / \(2 \*\* 8 / n\) is n / 256\. The base is 1 / 2 \*\* \(8 / n\) \(HF writes "
        r"1 / \(2 \*\* \(8 / n\)\)\)\.",
        "运算符优先级：1 / (2 ** 8 / n) 等于 n / 256。底数应为 1 / 2 ** (8 / n)（HF 写作 1 / (2 ** (8 / n))）。",
    ),
    (
        r"the base is 2, not e: 2\^\(−8 \(h\+1\)/H\), ALiBi's geometric series\.",
        "底数是 2，不是 e：2^(−8 (h+1)/H)，即 ALiBi 的几何级数。",
    ),
    (
        r"the heads are in reverse order: head 0 decays fastest, 2\^\(−8/H\), the last head slowest, 2\^\(−8\)\.",
        "头的顺序反了：头 0 衰减最快，2^(−8/H)；最后一个头最慢，2^(−8)。",
    ),
    (
        r"the layer factor is inverted: deeper layers must decay slower \(look further back\), so the factor is "
        r"1 − layer_idx / \(num_layers − 1 \+ 1e-5\) \+ 1e-5, largest at layer 0\.",
        "层因子反了：越深的层衰减越慢（看得越远），所以因子是 1 − layer_idx / (num_layers − 1 + 1e-5) + 1e-5，"
        "在第 0 层最大。",
    ),
    (
        r"the 1e-5 guards are missing: without them the last layer's slopes are exactly 0 \(no decay at all\) and "
        r"a one-layer model divides by 0\. Use 1 − layer_idx / \(num_layers − 1 \+ 1e-5\) \+ 1e-5\.",
        "缺少 1e-5 保护项：没有它们，最后一层的斜率恰好为 0（完全不衰减），单层模型还会除以 0。"
        "请用 1 − layer_idx / (num_layers − 1 + 1e-5) + 1e-5。",
    ),
    (
        r"off by one in depth: divide layer_idx by num_layers − 1 \(\+ 1e-5\), so the last layer's factor is "
        r"about 1e-5, not 1 / num_layers\.",
        "层深差了一：layer_idx 应除以 num_layers − 1（+ 1e-5），这样最后一层的因子约为 1e-5，而不是 1 / num_layers。",
    ),
    (
        r"you returned the decay factor exp\(−s\) per token: return the slope s itself\.",
        "你返回的是每个词元的衰减系数 exp(−s)：请返回斜率 s 本身。",
    ),
    (
        r"you returned log2 of the slope: the slope is 2 raised to that exponent\.",
        "你返回的是斜率的 log2：斜率是 2 的这个次方。",
    ),
    (
        r"the layer factor is missing: slopes shrink with depth, times 1 − layer_idx / \(num_layers − 1 \+ 1e-5\) "
        r"\+ 1e-5 \(deeper layers look further back\)\.",
        "缺少层因子：斜率随深度变小，要乘以 1 − layer_idx / (num_layers − 1 + 1e-5) + 1e-5（越深的层看得越远）。",
    ),
    (
        r"expected 2\^\(−8 \(h\+1\)/H\) · \(1 − layer_idx / \(num_layers − 1 \+ 1e-5\) \+ 1e-5\)\.",
        "应为 2^(−8 (h+1)/H) · (1 − layer_idx / (num_layers − 1 + 1e-5) + 1e-5)。",
    ),
    # ---- exercise 2: one block, inside
    (
        r"the future leaks: keys j > i must get weight 0 \(the causal mask\), not exp\(−s \|i − j\|\)\.",
        "未来信息泄露了：j > i 的键权重必须为 0（因果掩码），而不是 exp(−s |i − j|)。",
    ),
    (
        r"the causal mask is missing: above the diagonal exp\(−s \(i − j\)\) grows past 1\. Keep only j ≤ i\.",
        "缺少因果掩码：对角线以上 exp(−s (i − j)) 会超过 1。只保留 j ≤ i。",
    ),
    (
        r"the decay's sign is flipped: older keys must weigh less, exp\(−s \(i − j\)\) ≤ 1\.",
        "衰减的符号反了：越旧的键权重越小，exp(−s (i − j)) ≤ 1。",
    ),
    (
        r"the decay is missing: that is plain causal linear attention\. Multiply q kᵀ by exp\(−s \(i − j\)\)\.",
        "缺少衰减：这是普通的因果线性注意力。请把 q kᵀ 乘以 exp(−s (i − j))。",
    ),
    (
        r"lightning attention has no softmax: the weights are q kᵀ times the decay, used as they are\.",
        "闪电注意力没有 softmax：权重就是 q kᵀ 乘以衰减，直接使用。",
    ),
    (
        r"no 1/√d here: MiniMax's lightning attention does not scale q kᵀ \(the output RMSNorm sets the size\)\.",
        "这里没有 1/√d：MiniMax 的闪电注意力不缩放 q kᵀ（由输出的 RMSNorm 决定大小）。",
    ),
    (
        r"the diagonal is decayed: a token's own key weighs exp\(0\) = 1, so the exponent is −s \(i − j\), "
        r"not −s \(i − j \+ 1\)\.",
        "对角线被衰减了：词元自己的键权重是 exp(0) = 1，所以指数是 −s (i − j)，而不是 −s (i − j + 1)。",
    ),
    (
        r"the decay is transposed: row i is the query, and it reads keys j ≤ i\.",
        "衰减矩阵转置了：第 i 行是查询，它读取 j ≤ i 的键。",
    ),
    (
        r"the diagonal is masked: token i must see its own key \(j ≤ i, the diagonal included\)\.",
        "对角线被屏蔽了：词元 i 必须能看到自己的键（j ≤ i，包括对角线）。",
    ),
    (
        r"the heads are paired with the slopes in reverse: head h must use slopes\[h\]\.",
        "头与斜率的对应反了：头 h 必须使用 slopes[h]。",
    ),
    (
        r"every head used slopes\[0\]: each head has its own slope, slopes\[h\] \(broadcast as "
        r"slopes\[:, None, None\]\)\.",
        "每个头都用了 slopes[0]：每个头有自己的斜率 slopes[h]（广播为 slopes[:, None, None]）。",
    ),
    (
        r"every head used slopes\[0\]: each head has its own slope, slopes\[h\]\.",
        "每个头都用了 slopes[0]：每个头有自己的斜率 slopes[h]。",
    ),
    (
        r"that decay, exp\(−s \(i \+ 1\)\), is the inter-block one \(how the state is read\): inside a block a key "
        r"decays by its distance to the query, exp\(−s \(i − j\)\)\.",
        "这个衰减 exp(−s (i + 1)) 属于块间部分（读取状态的方式）：在块内，键按它到查询的距离衰减，exp(−s (i − j))。",
    ),
    (
        r"that decay, exp\(−s \(b − 1 − j\)\), is the one that carries keys to the block's end \(the state update\): "
        r"inside a block a key decays by its distance to the query, exp\(−s \(i − j\)\)\.",
        "这个衰减 exp(−s (b − 1 − j)) 是把键带到块末尾的那个（状态更新）：在块内，键按它到查询的距离衰减，"
        "exp(−s (i − j))。",
    ),
    (
        r"the rows are normalised: linear attention here has no denominator, use the decayed scores as they are\.",
        "你对行做了归一化：这里的线性注意力没有分母，直接使用衰减后的分数。",
    ),
    (
        r"expected \(\(q kᵀ\) ∘ D\) v with D\[i, j\] = exp\(−s \(i − j\)\), j ≤ i\.",
        "应为 ((q kᵀ) ∘ D) v，其中当 j ≤ i 时 D[i, j] = exp(−s (i − j))。",
    ),
    # ---- exercise 3: the state update
    (
        r"the carried state is not decayed: all b tokens of the block pass over it, so it is multiplied by "
        r"exp\(−s b\)\.",
        "传入的状态没有衰减：块中的 b 个词元都经过了它，所以要乘以 exp(−s b)。",
    ),
    (
        r"the carried state decayed one token only: the block has b tokens, so exp\(−s b\), not exp\(−s\)\.",
        "传入的状态只衰减了一个词元：块有 b 个词元，所以是 exp(−s b)，而不是 exp(−s)。",
    ),
    (
        r"the carried state decayed b − 1 tokens: it is older than every key of the block, so exp\(−s b\)\.",
        "传入的状态只衰减了 b − 1 个词元：它比块中每个键都旧，所以是 exp(−s b)。",
    ),
    (
        r"the keys' decay is off by one: the block's last key is written last and not decayed, "
        r"exp\(−s \(b − 1 − j\)\), not exp\(−s \(b − j\)\)\.",
        "键的衰减差了一：块中最后一个键最后写入、不衰减，应为 exp(−s (b − 1 − j))，而不是 exp(−s (b − j))。",
    ),
    (
        r"the keys' decay runs from the wrong end: the oldest key \(j = 0\) decays most, exp\(−s \(b − 1 − j\)\), "
        r"not exp\(−s j\)\.",
        "键的衰减方向反了：最旧的键（j = 0）衰减最多，exp(−s (b − 1 − j))，而不是 exp(−s j)。",
    ),
    (
        r"the keys are not decayed: key j is b − 1 − j tokens old at the block's end, so it carries "
        r"exp\(−s \(b − 1 − j\)\)\.",
        "键没有衰减：到块末尾时键 j 已经过了 b − 1 − j 个词元，所以要乘以 exp(−s (b − 1 − j))。",
    ),
    (
        r"you decayed after the write: exp\(−s b\) multiplies the carried state only; the new keys carry their "
        r"own exp\(−s \(b − 1 − j\)\)\.",
        "你在写入之后才衰减：exp(−s b) 只乘在传入的状态上；新的键各自带着 exp(−s (b − 1 − j))。",
    ),
    (
        r"the decay's sign is flipped: exp\(−s …\) ≤ 1, the state must shrink, not grow\.",
        "衰减的符号反了：exp(−s …) ≤ 1，状态必须缩小，而不是增大。",
    ),
    (
        r"expected exp\(−s b\) S \+ Σ_j exp\(−s \(b − 1 − j\)\) k_j v_jᵀ\.",
        "应为 exp(−s b) S + Σ_j exp(−s (b − 1 − j)) k_j v_jᵀ。",
    ),
]

# ---- notebook 12g's figures and block explorer (attn_core/viz/lightning.py)
_NUMBER = r"[−-]?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?"
CATALOG += [
    *exact(
        {
            "decay exp(−s (i − j)); boxes: inside a block": "衰减 exp(−s (i − j))；方框：块内计算",
            "key j": "键 j",
            "query i": "查询 i",
            "earlier blocks, via the state": "之前的块，经由状态",
            "own block, masked q kᵀ": "本块，掩码后的 q kᵀ",
            "block size": "块大小",
            "slope s": "斜率 s",
            "query position": "查询位置",
            "head h": "头 h",
            "half-life ln2 / s (tokens)": "半衰期 ln2 / s（词元）",
            "Stored in lower precision: error vs float64": "以较低精度存储：相对 float64 的误差",
            "token position t": "词元位置 t",
            "relative error of o_t": "o_t 的相对误差",
            "linear state in bf16": "线性注意力状态用 bf16",
            "linear state in fp16": "线性注意力状态用 fp16",
            "linear state in fp32": "线性注意力状态用 fp32",
            "KV cache in bf16 (softmax)": "KV 缓存用 bf16（softmax）",
            "no effect here: the decay is 1 on the diagonal and 0 above it, already 0–1": (
                "此处无效：衰减在对角线上为 1、对角线以上为 0，本来就是 0–1"
            ),
        }
    ),
    (r"weights of query (?P<i>\d+)", "查询 {i} 的权重"),
    (r"Decay per head, (?P<n>\d+) layers", "每个头的衰减，共 {n} 层"),
    (
        rf"query (?P<row>\d+) is token (?P<offset>\d+) of block (?P<block>\d+): (?P<inside>\d+) keys reach it inside "
        rf"its block \(the masked, decayed q kᵀ\), (?P<outside>\d+) keys of (?P=block) earlier blocks only through "
        rf"the state, read with exp\(−s·(?P=inside)\) = (?P<read>{_NUMBER}); the oldest key weighs "
        rf"exp\(−s·(?P=row)\) = (?P<oldest>{_NUMBER})\. max \|blocks − recurrence\| = (?P<diff>{_NUMBER})\.",
        "查询 {row} 是第 {block} 块中的第 {offset} 个词元：{inside} 个键在块内到达它（掩码并衰减后的 q kᵀ），"
        "之前 {block} 个块中的 {outside} 个键只能经由状态到达，读取时乘以 exp(−s·{inside}) = {read}；"
        "最旧的键权重为 exp(−s·{row}) = {oldest}。max |分块 − 逐词元递推| = {diff}。",
    ),
]
