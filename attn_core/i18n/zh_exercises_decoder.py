"""Chinese for the graders of notebook 11 (``attn_core/exercises/decoder.py``).

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). A message
is "where: problem"; the where part (the config and the answer, the ring's slots and queries, the shape of
probs) and the problem are matched separately (``{…!t}``). Configs, lists, shapes, numbers and type names
stay as the grader printed them.
"""

from __future__ import annotations

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 12), (5,), ()
_LIST = r"\[[^\]]*\]"  # a list as tolist() prints it: [8, 9, 5, 6, 7]
_CACHE_RULE = (
    "各层求和：2 · num_kv_heads · head_dim · 保留的词元数 · bytes_per_element；"
    "全局层保留的词元数为 seq_len，局部层为 min(seq_len, sliding_window)。"
)

CATALOG = [
    # the names of the three checks (the start of every verdict line)
    *exact(
        {
            "KV-cache bytes with sliding windows": "带滑动窗口的 KV 缓存字节数",
            "ring-buffer visibility": "环形缓冲区的可见性",
            "min-p filtering": "min-p 过滤",
        }
    ),
    # ---- exercise 1: KV-cache bytes
    (r"return a number \(bytes, an int\), got (?P<type>[\w.]+)\.", "请返回一个数（字节数，int），你返回的是 {type}。"),
    (
        r"for (?P<config>\{.*?\}) after (?P<n>\d+) tokens at (?P<b>\d+) bytes per element "
        r"you returned (?P<answer>[^,\s]+), expected (?P<expected>[\d,]+): sum over layers of 2 · num_kv_heads · "
        r"head_dim · tokens kept · bytes_per_element, tokens kept = seq_len on a global layer, "
        r"min\(seq_len, sliding_window\) on a local one\.",
        "配置 {config}、{n} 个词元、每个元素 {b} 字节时，你返回的是 {answer}，应为 {expected}：" + _CACHE_RULE,
    ),
    (
        r"for (?P<config>\{.*?\}) after (?P<n>\d+) tokens at (?P<b>\d+) bytes per element "
        r"you returned (?P<answer>[^,\s]+): (?P<problem>.+)",
        "配置 {config}、{n} 个词元、每个元素 {b} 字节时，你返回的是 {answer}：{problem!t}",
    ),
    (
        r"you ignored the sliding windows: a local layer never reads keys older than sliding_window tokens, "
        r"so its ring buffer keeps at most min\(seq_len, sliding_window\) of them\.",
        "你忽略了滑动窗口：局部层从不读取早于 sliding_window 个词元之前的键，"
        "所以它的环形缓冲区最多只保留 min(seq_len, sliding_window) 个。",
    ),
    (
        r"you capped every layer at the window: the global layers \(every global_every-th\) keep all seq_len tokens\.",
        "你给每一层都设了窗口上限：全局层（每 global_every 层一个）保留全部 seq_len 个词元。",
    ),
    (
        r"you counted query heads \(num_heads\): only the num_kv_heads key/value heads are cached\.",
        "你按查询头数（num_heads）算了缓存：实际只缓存 num_kv_heads 个键/值头。",
    ),
    (
        r"you counted the keys only: the cache holds a key AND a value per token \(factor 2\)\.",
        "你只算了键：缓存中每个词元既有一个键，也有一个值（因子 2）。",
    ),
    (
        r"you counted the global layers from layer 0 \(i % global_every == 0\): layer i is global when "
        r"\(i \+ 1\) % global_every == 0, the 6th, 12th, 18th layer \(indices 5, 11, 17\)\.",
        "你从第 0 层开始数全局层（i % global_every == 0）：第 i 层是全局层的条件是 (i + 1) % global_every == 0，"
        "即第 6、12、18 层（索引 5、11、17）。",
    ),
    (
        r"a local layer keeps sliding_window tokens, the query's own included, not sliding_window \+ 1\.",
        "局部层保留 sliding_window 个词元（包括查询自己），而不是 sliding_window + 1 个。",
    ),
    (r"that is bits, not bytes: drop the factor 8\.", "这是比特数，不是字节数：去掉因子 8。"),
    (
        r"that is the number of elements: multiply by bytes_per_element\.",
        "这是元素个数：还要乘以 bytes_per_element。",
    ),
    # ---- exercise 2: ring-buffer visibility
    (
        rf"slot_positions (?P<held>{_LIST}), query_positions (?P<query>{_LIST}), window (?P<window>\d+): "
        r"(?P<problem>.+)",
        "slot_positions 为 {held}、query_positions 为 {query}、window 为 {window} 时：{problem!t}",
    ),
    (
        r"return a torch\.Tensor \(a boolean mask\), got (?P<type>[\w.]+)\.",
        "请返回 torch.Tensor（布尔掩码），你返回的是 {type}。",
    ),
    (
        r"your mask has dtype (?P<dtype>[\w.]+); masks here are boolean with True = may attend "
        r"\(comparisons such as p <= q already give booleans\)\.",
        "你的掩码 dtype 是 {dtype}；这里的掩码是布尔型，True = 可以关注（p <= q 这样的比较本身就得到布尔值）。",
    ),
    (
        rf"wrong shape (?P<shape>{_SHAPE}), expected \(Lq, S\) = (?P<expected>{_SHAPE}): one row per "
        r"query, one column per slot \(query_positions\[:, None\] against slot_positions\[None, :\]\)\.",
        "形状 {shape} 不对，应为 (Lq, S) = {expected}：每个查询一行，每个槽位一列"
        "（query_positions[:, None] 与 slot_positions[None, :] 比较）。",
    ),
    (
        r"flipped convention: your mask is True where attention is blocked; True = may attend\.",
        "约定反了：你的掩码在禁止关注的位置为 True；应当是 True = 可以关注。",
    ),
    (
        r"you used the slot index as the key's position: once the ring wraps, slot s holds position "
        r"slot_positions\[s\], not s \(this is litgpt #2182's bug\)\. Compare the query with slot_positions\.",
        "你把槽位索引当成了键的位置：环形缓冲区一旦绕回，槽位 s 存的是位置 slot_positions[s]，而不是 s"
        "（这正是 litgpt #2182 的 bug）。应当拿查询与 slot_positions 比较。",
    ),
    (
        r"the window is one too wide: query q sees window keys, itself included: q - p < window\.",
        "窗口宽了一个：查询 q 看到 window 个键（包括它自己）：q - p < window。",
    ),
    (
        r"you let the query read empty slots \(position -1\): a slot that holds no token must be masked "
        r"\(p >= 0\)\.",
        "你让查询读到了空槽位（位置 -1）：没有存词元的槽位必须被掩码掉（p >= 0）。",
    ),
    (
        r"you let a query read tokens after it: in a prefill longer than the ring, slots already hold later "
        r"positions; keep p <= q \(causal\)\.",
        "你让查询读到了它之后的词元：预填充比环形缓冲区长时，槽位里已经存着更靠后的位置；要保证 p <= q（因果）。",
    ),
    (
        r"you let every filled slot through: a slot is visible only when its position is within the window "
        r"\(q - p < window\) and not after the query \(p <= q\)\.",
        "你放行了所有已填充的槽位：只有位置在窗口内（q - p < window）且不在查询之后（p <= q）的槽位才可见。",
    ),
    (
        r"query (?P<q>-?\d+) and the slot holding (?P<p>-?\d+): yours (?P<yours>True|False), "
        r"expected (?P<expected>True|False)\. A slot is visible when it is filled \(p >= 0\), not in the future "
        r"\(p <= q\) and in the window \(q - p < window\)\.",
        "查询 {q} 与存有位置 {p} 的槽位：你给出的是 {yours}，应为 {expected}。"
        "槽位可见的条件是：已填充（p >= 0）、不在未来（p <= q）、且在窗口内（q - p < window）。",
    ),
    # ---- exercise 3: min-p filtering
    (
        rf"probs (?P<shape>{_SHAPE}) (?P<dtype>[\w.]+), min_p (?P<min_p>\S+): (?P<problem>.+)",
        "probs 为 {shape} {dtype}、min_p 为 {min_p} 时：{problem!t}",
    ),
    (
        r"return a torch\.Tensor of probabilities, got (?P<type>[\w.]+)\.",
        "请返回一个概率张量（torch.Tensor），你返回的是 {type}。",
    ),
    (
        r"you returned a mask; return the filtered probabilities, renormalised to sum to 1\.",
        "你返回的是掩码；请返回过滤后的概率，并重新归一化使其和为 1。",
    ),
    (
        rf"wrong shape (?P<shape>{_SHAPE}), expected (?P<expected>{_SHAPE})\.",
        "形状 {shape} 不对，应为 {expected}。",
    ),
    (
        r"dtype (?P<dtype>[\w.]+), expected (?P<expected>[\w.]+) \(keep the input's dtype\)\.",
        "dtype 是 {dtype}，应为 {expected}（保持输入的 dtype）。",
    ),
    (
        r"your result contains NaN or inf \(did a row lose every token\?\)\.",
        "你的结果中含有 NaN 或 inf（是不是有一行的词元全被去掉了？）。",
    ),
    (
        r"you did not renormalise: divide the kept probabilities by their sum so each row sums to 1\.",
        "你没有重新归一化：把保留下来的概率除以它们的和，使每行之和为 1。",
    ),
    (
        r"you used min_p as an absolute threshold: min-p keeps the tokens with p >= min_p × \(the row's "
        r"largest p\), so the cut follows the model's confidence\.",
        "你把 min_p 当成了绝对阈值：min-p 保留 p >= min_p × （该行最大的 p）的词元，所以截断点随模型的置信度而变。",
    ),
    (
        r"you took the largest probability of the whole batch: each row has its own top token "
        r"\(probs\.amax\(dim=-1, keepdim=True\)\)\.",
        "你取的是整个批次的最大概率：每一行有它自己的最可能词元（probs.amax(dim=-1, keepdim=True)）。",
    ),
    (
        r"you kept the unlikely tokens and dropped the likely ones: keep p >= min_p × max p\.",
        "你保留了不太可能的词元，去掉了可能的词元：应保留 p >= min_p × max p 的词元。",
    ),
    (
        r"wrong numbers; zero the tokens below min_p × each row's largest probability, then renormalise\.",
        "数值不对；把低于 min_p × 该行最大概率的词元置 0，然后重新归一化。",
    ),
]
