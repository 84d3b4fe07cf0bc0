"""Chinese for the graders of notebook 09b (``attn_core/exercises/sparse_attention.py``) and the labels of its
explorer and figures (``attn_core/viz/sparse.py``).

Every ❌ message the graders can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``); shapes, numbers
and type names are named groups and stay as printed.
"""

from __future__ import annotations

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple
_WHAT = r"(?P<what>the scores|the rotated tensor|the picks|the visibility mask)"

CATALOG = [
    *exact(
        {
            # the names of the four checks, and the `what` of the shape checks
            "the indexer's scores": "索引器的分数",
            "the indexer's RoPE": "索引器的 RoPE",
            "causal top-k picks": "因果 top-k 选择",
            "visible compressed entries": "可见的压缩条目",
            "the scores": "分数",
            "the rotated tensor": "旋转后的张量",
            "the picks": "选中的键",
            "the visibility mask": "可见性掩码",
        }
    ),
    (
        rf"return a torch\.Tensor \({_WHAT}, shape (?P<shape>{_SHAPE})\), got (?P<type>[\w.]+)\.",
        "请返回一个 torch.Tensor（{what!t}，形状 {shape}），你返回的是 {type}。",
    ),
    (
        rf"{_WHAT} has shape (?P<got>{_SHAPE}), expected (?P<shape>{_SHAPE})\.",
        "{what!t}的形状是 {got}，应为 {shape}。",
    ),
    (
        rf"{_WHAT} has dtype (?P<got>[\w.]+), expected (?P<dtype>[\w.]+)\.",
        "{what!t}的 dtype 是 {got}，应为 {dtype}。",
    ),
    # ---- exercise 1: scores
    (
        r"you took a softmax over the head weights: DeepSeek scales them by 1/sqrt\(num_heads\) and keeps their "
        r"signs \(no softmax\); only the ranking matters, and a head may vote against a key\.",
        "你对头权重做了 softmax：DeepSeek 只把它们乘以 1/sqrt(num_heads) 并保留正负号（不做 softmax）；"
        "只有排序重要，而且一个头可以投票反对某个键。",
    ),
    (
        r"you forgot the ReLU on each head's q · k: a head that does not care about a key would then vote "
        r"against it\.",
        "你漏掉了每个头的 q · k 上的 ReLU：否则一个不关心某个键的头会投票反对它。",
    ),
    (
        r"you applied the ReLU after summing the heads: it belongs on each head's q · k, before the weighted sum\.",
        "你在对各头求和之后才做 ReLU：它应作用在每个头的 q · k 上，在加权求和之前。",
    ),
    (
        r"you took a softmax over the heads of the per-head scores relu\(q_h · k\): the indexer weights each head "
        r"by head_weights\[h\] / sqrt\(num_heads\) and sums, with no normalisation across the heads\.",
        "你在各头之间对每个头的分数 relu(q_h · k) 做了 softmax：索引器用 head_weights[h] / sqrt(num_heads) "
        "给每个头加权后求和，各头之间不做归一化。",
    ),
    (
        r"your head weights lost their signs: with every head weight negative, every score must be <= 0 \(each "
        r"head votes against the key\), and yours are >= 0\. A softmax over the heads \(or exp, sigmoid\) makes "
        r"the weights positive; DeepSeek only scales them by 1/sqrt\(num_heads\) \(no softmax\)\.",
        "你的头权重丢掉了正负号：当所有头权重都为负时，每个分数都应 <= 0（每个头都在投票反对该键），"
        "而你的结果都 >= 0。在各头之间做 softmax（或 exp、sigmoid）会让权重全为正；"
        "DeepSeek 只把它们乘以 1/sqrt(num_heads)（不做 softmax）。",
    ),
    (r"you forgot to scale the head weights by 1/sqrt\(num_heads\)\.", "你忘了把头权重乘以 1/sqrt(num_heads)。"),
    (r"you forgot the 1/sqrt\(head_dim\) scale of q · k\.", "你漏掉了 q · k 的缩放 1/sqrt(head_dim)。"),
    (
        r"you forgot both scales: 1/sqrt\(num_heads\) and 1/sqrt\(head_dim\)\.",
        "两个缩放你都漏掉了：1/sqrt(num_heads) 和 1/sqrt(head_dim)。",
    ),
    (
        r"the scores differ from Σ_h head_weights\[h\] / sqrt\(num_heads\) · relu\(q_h · k\) / sqrt\(head_dim\)\.",
        "分数与 Σ_h head_weights[h] / sqrt(num_heads) · relu(q_h · k) / sqrt(head_dim) 不一致。",
    ),
    # ---- exercise 2: rope
    (
        r"you rotated interleaved pairs \(2i, 2i \+ 1\), MLA's layout: the indexer rotates rotate-half pairs "
        r"\(i, i \+ rope_dim/2\)\.",
        "你旋转的是交错的特征对 (2i, 2i + 1)，那是 MLA 的布局：索引器旋转的是前后两半配对 (i, i + rope_dim/2)。",
    ),
    (
        r"you rotated the LAST rope_dim features \(where MLA and V4 put their rotary part\): the V3\.2 indexer "
        r"rotates the FIRST rope_dim features\.",
        "你旋转了最后 rope_dim 个特征（MLA 和 V4 把旋转部分放在那里）：V3.2 的索引器旋转的是最前面的 rope_dim 个特征。",
    ),
    (
        r"you rotated the last rope_dim features in interleaved pairs, as MLA does: the indexer rotates the "
        r"FIRST rope_dim features in rotate-half pairs \(i, i \+ rope_dim/2\)\.",
        "你像 MLA 那样以交错配对旋转了最后 rope_dim 个特征：索引器以前后两半配对 (i, i + rope_dim/2) "
        "旋转最前面的 rope_dim 个特征。",
    ),
    (
        r"you rotated every feature: only the first rope_dim are rotated, the rest pass through\.",
        "你旋转了所有特征：只旋转前 rope_dim 个，其余保持不变。",
    ),
    (
        r"nothing was rotated: rotate the first rope_dim features at the given positions\.",
        "什么都没有旋转：请在给定位置旋转前 rope_dim 个特征。",
    ),
    (
        r"you rotated at positions 0, 1, 2, …: use the given positions \(a decode step starts after the cache\)\.",
        "你在位置 0, 1, 2, … 处旋转：请使用给定的位置（解码步从缓存之后开始）。",
    ),
    (
        r"you ignored base: the frequencies are base\^\(-2i/rope_dim\)\.",
        "你忽略了 base（底数）：频率是 base^(-2i/rope_dim)。",
    ),
    (
        r"the rotation differs from rotate-half RoPE on the first features\.",
        "旋转结果与在最前面特征上的前后两半配对 RoPE 不一致。",
    ),
    # ---- exercise 3: causal top-k
    (
        r"a query that sees fewer than topk keys got hidden \(-inf\) keys among its picks: mark those picks -1\.",
        "看得到的键少于 topk 的查询选中了被屏蔽（-inf）的键：把这些选择标记为 -1。",
    ),
    (
        r"your picks include future keys: mask the keys after each query's position \(-inf\) before the top-k\.",
        "你选中了未来的键：在 top-k 之前把每个查询位置之后的键屏蔽掉（-inf）。",
    ),
    (
        r"your causal mask is not offset: query i of this chunk sits at position start \+ i, and the keys "
        r"0 \.\. start - 1 \(the index keys of earlier tokens, from the cache\) are all in its past\.",
        "你的因果掩码没有偏移：这一块的第 i 个查询位于位置 start + i，键 0 .. start - 1"
        "（更早词元的索引键，来自缓存）全都在它的过去。",
    ),
    (
        r"a query hid its own key: the query at position start \+ i may read keys 0 \.\. start \+ i \(itself "
        r"included\); mask only the keys after it \(key > position\), not key >= position\.",
        "查询把自己的键也屏蔽了：位置 start + i 的查询可以读取键 0 .. start + i（包括它自己）；"
        "只屏蔽它之后的键（key > position），而不是 key >= position。",
    ),
    (
        r"with (?P<keys>\d+) keys and topk=(?P<topk>\d+) you returned (?P<got>\d+) picks per query: a row has only "
        r"(?P<keys2>\d+) keys, so return min\(topk, Lk\) = (?P<k>\d+) columns; -1 marks a hidden key, not a "
        r"missing one\.",
        "只有 {keys} 个键而 topk={topk} 时，你为每个查询返回了 {got} 个选择：一行只有 {keys2} 个键，"
        "所以应返回 min(topk, Lk) = {k} 列；-1 标记的是被屏蔽的键，而不是缺少的键。",
    ),
    (
        r"(?P<problem>your function raised .*)\. With (?P<keys>\d+) keys and topk=(?P<topk>\d+) \(a row at the "
        r"start of decoding\), take min\(topk, Lk\) picks\.",
        "{problem!t}。只有 {keys} 个键而 topk={topk} 时（解码刚开始时的一行），请取 min(topk, Lk) 个选择。",
    ),
    (
        r"your picks are in the wrong order: best \(highest score\) first\.",
        "选择的顺序错了：最好的（分数最高的）在前。",
    ),
    (
        r"for start=(?P<start>\d+), topk=(?P<topk>\d+) your picks differ from the top-k\.",
        "对 start={start}、topk={topk}，你的选择与 top-k 不一致。",
    ),
    # ---- exercise 4: visible entries
    (
        r"an entry is visible too early: entry w pools tokens w·m \.\. \(w\+1\)·m - 1, so a query at position t "
        r"may read it only once its window has closed, \(w \+ 1\)·m <= t \+ 1; before that it would see the "
        r"future\.",
        "条目可见得太早：条目 w 汇集词元 w·m .. (w+1)·m - 1，所以位置 t 的查询只有在它的窗口关闭之后、"
        "即 (w + 1)·m <= t + 1 时才能读取它；在那之前它会看到未来。",
    ),
    (
        r"an entry is visible too early: it needs its whole window, \(w \+ 1\)·m <= t \+ 1\.",
        "条目可见得太早：它需要整个窗口，(w + 1)·m <= t + 1。",
    ),
    (
        r"one token late: the query at t = \(w \+ 1\)·m - 1 is the window's last token, and may already read it\.",
        "晚了一个词元：位于 t = (w + 1)·m - 1 的查询就是窗口的最后一个词元，已经可以读取它。",
    ),
    (
        r"too late: an entry is visible as soon as its window has closed, \(w \+ 1\)·m <= t \+ 1\.",
        "太晚了：窗口一关闭条目就可见，(w + 1)·m <= t + 1。",
    ),
    (r"True where \(w \+ 1\) · compress_rate <= t \+ 1\.", "在 (w + 1) · compress_rate <= t + 1 处为 True。"),
    # ---- the explorer and figures of attn_core/viz/sparse.py (09b)
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
