"""Chinese for the graders of notebook 12b (``attn_core/exercises/triton_kernel.py``).

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). A message
starts with "where": the failing case and the learner's answer; the diagnosis after it is matched separately
(``{…!t}``). Shapes, numbers and type names stay as the grader printed them.
"""

from __future__ import annotations

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 3, 5)
_INT = r"-?\d+"
_END = rf"for tile=(?P<t>\d+), block_size=(?P<b>\d+), q_len=(?P<lq>\d+), k_len=(?P<lk>\d+) you returned (?P<v>{_INT})"
_END_ZH = "tile={t}、block_size={b}、q_len={lq}、k_len={lk} 时，你返回了 {v}"
_HEAD = rf"for head=(?P<h>\d+), num_heads=(?P<hq>\d+), num_kv_heads=(?P<hkv>\d+) you returned (?P<v>{_INT})"
_HEAD_ZH = "head={h}、num_heads={hq}、num_kv_heads={hkv} 时，你返回了 {v}"
_N = r"-?\d+"
_VISITS = r"(?P<full>\d+) without a mask, (?P<masked>\d+) with one; (?P<skipped>\d+) skipped\."
_VISITS_ZH = "{full} 个不需要掩码，{masked} 个需要掩码；跳过 {skipped} 个。"

CATALOG = [
    # the names of the three checks (the start of every verdict line)
    *exact(
        {"causal key bound": "因果键循环的终点", "kv head of a query head": "查询头对应的 KV 头", "delta": "Δ（delta）"}
    ),
    # ---- exercise 1: the causal key bound
    (
        r"return the end of the key loop \(an int\), got (?P<type>[\w.]+)\.",
        "请返回键循环的终点（一个 int），你返回的是 {type}。",
    ),
    (
        rf"{_END}, expected (?P<e>{_INT}): min\(k_len, \(tile \+ 1\) \* block_size \+ k_len - q_len\)\.",
        _END_ZH + "，应为 {e}：min(k_len, (tile + 1) * block_size + k_len - q_len)。",
    ),
    (rf"{_END}: (?P<problem>.+)", _END_ZH + "：{problem!t}"),
    *exact(
        {
            "one tile short: that is where the tile's FIRST query stops. The loop must reach the last query's "
            "keys, so the diagonal tile is computed: (tile + 1) * block_size + Lk - Lq.": (
                "少了一个分块：这是该分块第一个查询的终点。循环必须走到最后一个查询能看到的键，"
                "这样对角线上的分块才会被计算：(tile + 1) * block_size + Lk - Lq。"
            ),
            "one key short: the last query i sees key i + Lk - Lq itself, so the exclusive end is one more.": (
                "少了一个键：最后一个查询 i 能看到键 i + Lk - Lq 本身，所以（不含的）终点要再加一。"
            ),
            "top-left causal: you ignored Lk - Lq, right only when Lq == Lk. With cached keys (Lk > Lq) the "
            "queries are the LAST ones and see more keys; the series aligns causal masks bottom-right.": (
                "左上角对齐的因果掩码：你忽略了 Lk - Lq，只有 Lq == Lk 时才对。有缓存的键时（Lk > Lq），"
                "这些查询是最后的几个，能看到更多的键；本系列的因果掩码一律右下角对齐。"
            ),
            "you visit every key tile: correct with the causal mask, but the tiles wholly in the future are "
            "computed and thrown away (about half the work). Stop at (tile + 1) * block_size + Lk - Lq.": (
                "你遍历了所有键分块：有因果掩码时结果是对的，但完全位于未来的分块被算了又丢掉（约一半的工作量）。"
                "应在 (tile + 1) * block_size + Lk - Lq 处停止。"
            ),
            "the end runs past the last key: clamp it with min(k_len, ...).": (
                "终点超过了最后一个键：用 min(k_len, ...) 截断。"
            ),
        }
    ),
    # ---- exercise 2: the kv head of a query head
    (
        r"return a kv head index \(an int\), got (?P<type>[\w.]+)\.",
        "请返回 KV 头的编号（一个 int），你返回的是 {type}。",
    ),
    (
        rf"{_HEAD}, expected (?P<e>{_INT}): head // \(num_heads // num_kv_heads\)\.",
        _HEAD_ZH + "，应为 {e}：head // (num_heads // num_kv_heads)。",
    ),
    (rf"{_HEAD}: (?P<problem>.+)", _HEAD_ZH + "：{problem!t}"),
    *exact(
        {
            "interleaved: h % Hkv is what k.repeat(1, G, 1, 1) would pair, not repeat_interleave. Consecutive "
            "query heads share a kv head (Hugging Face's repeat_kv, ac.tiled_attention): h // (Hq // Hkv).": (
                "交错配对：h % Hkv 是 k.repeat(1, G, 1, 1) 的配对方式，不是 repeat_interleave 的。"
                "相邻的查询头共享一个 KV 头（Hugging Face 的 repeat_kv、ac.tiled_attention）：h // (Hq // Hkv)。"
            ),
            "you divided by Hkv; divide by the group size G = Hq // Hkv (the query heads per kv head).": (
                "你除以了 Hkv；应除以组的大小 G = Hq // Hkv（每个 KV 头对应的查询头数）。"
            ),
            "that is the query head's index inside its group; the kv head is the group's number, h // G.": (
                "这是查询头在组内的序号；KV 头是组的编号，即 h // G。"
            ),
            "you read kv head h: with fewer kv heads than query heads that is past the last kv head.": (
                "你读取的是第 h 个 KV 头：KV 头比查询头少时，这会越过最后一个 KV 头。"
            ),
        }
    ),
    # ---- exercise 3: Δ
    (
        rf"return a tensor \(B, H, L\) = (?P<shape>{_SHAPE}), got (?P<type>[\w.]+)\.",
        "请返回形状为 (B, H, L) = {shape} 的张量，你返回的是 {type}。",
    ),
    (
        rf"delta has shape (?P<shape>{_SHAPE}), expected (?P<e>{_SHAPE}): one number per query row, a sum over the "
        r"last axis \(D\) without keepdim\.",
        "delta 的形状为 {shape}，应为 {e}：每个查询行一个数，即在最后一维（D）上求和，不要 keepdim。",
    ),
    (
        r"delta has dtype (?P<dtype>[\w.]+), the inputs were (?P<e>[\w.]+): keep their dtype\.",
        "delta 的 dtype 是 {dtype}，而输入是 {e}：请保持输入的 dtype。",
    ),
    (
        r"wrong values, largest error (?P<err>\S+)\. Δ = \(grad_out \* out\)\.sum\(-1\) - grad_lse\.",
        "数值不对，最大误差 {err}。Δ = (grad_out * out).sum(-1) - grad_lse。",
    ),
    *exact(
        {
            "delta contains NaN or inf.": "delta 中含有 NaN 或 inf。",
            "delta is missing (all zeros): then dS = P ∘ dP, only the diagonal half of the softmax's Jacobian. "
            "Δ = rowsum(dO ∘ O) − dlse is what makes the rows' gradients sum to zero.": (
                "缺了 Δ（全为 0）：这样 dS = P ∘ dP，只是 softmax 雅可比矩阵的对角那一半。"
                "正是 Δ = rowsum(dO ∘ O) − dlse 让每一行的梯度之和为 0。"
            ),
            "lse's gradient is dropped: Δ = rowsum(dO ∘ O) − dlse. Without − dlse, anything built on lse "
            "(merge_attention, a loss on lse) gets wrong gradients.": (
                "丢掉了 lse 的梯度：Δ = rowsum(dO ∘ O) − dlse。少了 − dlse，凡是用到 lse 的地方"
                "（merge_attention、以 lse 为损失）梯度都会出错。"
            ),
            "the sign of dlse: ∂lse/∂S = P, so dS = P ∘ (dP − rowsum(dO ∘ O) + dlse): Δ subtracts it.": (
                "dlse 的符号错了：∂lse/∂S = P，所以 dS = P ∘ (dP − rowsum(dO ∘ O) + dlse)：Δ 中是减去它。"
            ),
            "rowsum(dO) is not enough: Δ = rowsum(dO ∘ O), each dO weighted by the output it is the gradient of.": (
                "只算 rowsum(dO) 不够：Δ = rowsum(dO ∘ O)，每个 dO 要乘以它所对应的输出。"
            ),
            "the sign is flipped: Δ = rowsum(dO ∘ O) − dlse.": "符号反了：Δ = rowsum(dO ∘ O) − dlse。",
        }
    ),
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
