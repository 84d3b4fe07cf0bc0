"""Chinese for notebook 11c's graders (``attn_core/exercises/gemma4_llama4.py``) and its chunked-mask explorer
(``attn_core/viz/chunked.py``)."""

from __future__ import annotations

from attn_core.i18n import exact

CATALOG = [
    *exact(
        {
            "check_chunked_mask": "check_chunked_mask",
            "check_nope_temperature": "check_nope_temperature",
            "check_kv_cache_bytes": "check_kv_cache_bytes",
        }
    ),
    # check_chunked_mask
    (r"return a boolean \(L, L\) mask, got (?P<type>[\w.]+)\.", "请返回形状为 (L, L) 的布尔掩码，你返回的是 {type}。"),
    (
        r"return a mask of shape \(L, L\) = (?P<want>\(.*?\)), got (?P<got>\(.*?\))\.",
        "请返回形状为 (L, L) = {want} 的掩码，你返回的形状是 {got}。",
    ),
    (
        r"that is an additive mask \(0 / -inf\): return booleans, True = may attend\.",
        "这是加性掩码（0 / -inf）：请返回布尔值，True = 可以关注。",
    ),
    (
        r"return a boolean mask \(True = may attend\), not scores\.",
        "请返回布尔掩码（True = 可以关注），而不是分数。",
    ),
    (
        r"your mask is inverted: True must mean the query may attend to the key\.",
        "你的掩码取反了：True 必须表示查询可以关注该键。",
    ),
    (
        r"your mask is transposed: rows are queries, columns are keys \(key k <= query q\)\.",
        "你的掩码转置了：行是查询，列是键（键 k <= 查询 q）。",
    ),
    (
        r"each chunk is bidirectional: inside a chunk a query still sees only keys k <= q \(add the causal part\)\.",
        "每个块内部成了双向注意力：块内的查询仍然只能看到 k <= q 的键（加上因果部分）。",
    ),
    (
        r"that is the plain causal mask: cut it at chunk boundaries \(k // chunk_size == q // chunk_size\)\.",
        "这是普通的因果掩码：要在块边界处截断（k // chunk_size == q // chunk_size）。",
    ),
    (r"the diagonal is missing: a query sees its own token\.", "缺少对角线：查询能看到它自己的词元。"),
    (
        r"that is a sliding window of (?P<w>\d+) keys: a chunked query forgets everything before its chunk started, "
        r"so the first token of a chunk sees only itself\.",
        "这是 {w} 个键的滑动窗口：分块注意力的查询看不到它所在块开始之前的任何内容，所以块的第一个词元只能看到它自己。",
    ),
    (
        r"your chunk boundaries are shifted by one: chunks start at positions 0, C, 2C, \.\.\. \(k // C\)\.",
        "你的块边界错开了一位：块从位置 0、C、2C、……开始（k // C）。",
    ),
    (
        r"those are chunks of (?P<other>\d+) tokens; the chunk size is (?P<size>\d+)\.",
        "这些块有 {other} 个词元；块大小应为 {size}。",
    ),
    (
        r"some queries see future keys: the chunked mask is causal inside each chunk\.",
        "有些查询看到了未来的键：分块掩码在每个块内部是因果的。",
    ),
    (
        r"some queries see the wrong keys: query q sees exactly the keys k <= q in its own chunk "
        r"\(k // C == q // C\)\.",
        "有些查询看到的键不对：查询 q 恰好看到它自己块内 k <= q 的键（k // C == q // C）。",
    ),
    # check_nope_temperature
    (
        r"some factors are -inf or nan: log\(0\) at the first positions\. It is log\(1 \+ floor\(\.\.\.\)\) "
        r"\(torch\.log1p\)\.",
        "有些系数是 -inf 或 nan：最前面的位置出现了 log(0)。公式是 log(1 + floor(...))（torch.log1p）。",
    ),
    (
        r"you divided: the query is multiplied by 1 \+ attn_scale · log\(\.\.\.\), a factor >= 1 that grows\.",
        "你做了除法：查询要乘以 1 + attn_scale · log(...)，这是一个 >= 1 且随位置增大的系数。",
    ),
    (
        r"the factor is 1 \+ attn_scale · log\(\.\.\.\): without the \+ 1 the first positions scale the query by 0\.",
        "系数是 1 + attn_scale · log(...)：少了 + 1，最前面的位置会把查询乘以 0。",
    ),
    (
        r"the floor is missing: the factor steps up once every floor_scale tokens and is flat in between\.",
        "缺少 floor：系数每隔 floor_scale 个词元跳升一次，中间保持不变。",
    ),
    (
        r"off by one: HF uses floor\(\(pos \+ 1\) / floor_scale\), so the first step is at position "
        r"floor_scale - 1\.",
        "差了一位：HF 使用 floor((pos + 1) / floor_scale)，所以第一次跳升在位置 floor_scale - 1。",
    ),
    (
        r"round down: floor\(\(pos \+ 1\) / floor_scale\), not round or ceil\.",
        "要向下取整：floor((pos + 1) / floor_scale)，而不是 round 或 ceil。",
    ),
    (
        r"attn_scale multiplies the log, not its argument: 1 \+ attn_scale · log\(1 \+ floor\(\.\.\.\)\)\.",
        "attn_scale 乘的是对数本身，而不是它的自变量：1 + attn_scale · log(1 + floor(...))。",
    ),
    (r"use the natural log \(torch\.log1p\), as HF does\.", "请使用自然对数（torch.log1p），与 HF 一致。"),
    (
        r"floor_scale and attn_scale are swapped: divide positions by floor_scale, scale the log by attn_scale\.",
        "floor_scale 和 attn_scale 用反了：位置除以 floor_scale，对数乘以 attn_scale。",
    ),
    (r"you divided the log by attn_scale: multiply it\.", "你把对数除以了 attn_scale：应该乘以它。"),
    (
        r"the factors differ from 1 \+ attn_scale · log\(1 \+ floor\(\(pos \+ 1\) / floor_scale\)\)\.",
        "这些系数与 1 + attn_scale · log(1 + floor((pos + 1) / floor_scale)) 不一致。",
    ),
    (
        r"return one factor per position, a float tensor of shape \(L,\), got (?P<type>[\w.]+)\.",
        "请为每个位置返回一个系数，即形状为 (L,) 的浮点张量，你返回的是 {type}。",
    ),
    (
        r"return one factor per position: shape \(L,\) = (?P<want>\(.*?\)), got (?P<got>\(.*?\))\.",
        "请为每个位置返回一个系数：形状应为 (L,) = {want}，你返回的形状是 {got}。",
    ),
    # check_kv_cache_bytes
    (
        r"return the number of bytes as an int, got (?P<type>[\w.]+)\.",
        "请以 int 返回字节数，你返回的是 {type}。",
    ),
    (
        r"return the total for the whole context, not bytes per token\.",
        "请返回整个上下文的总字节数，而不是每个词元的字节数。",
    ),
    (
        r"a cache holds a whole number of bytes, got (?P<number>.+?)\.",
        "缓存占用的字节数是整数，你返回的是 {number}。",
    ),
    (r"that is bits: return bytes\.", "这是比特数：请返回字节数。"),
    (
        r"a reusing layer \(reuse=True\) stores nothing: it reads the keys and values of the storing layer\.",
        "复用层（reuse=True）自己不存任何东西：它读取存储层的键和值。",
    ),
    (
        r"a K = V layer needs one tensor per token, not two: its values are its keys before k_norm and RoPE, so "
        r"keys can be rebuilt from them\.",
        "K = V 层每个词元只需一个张量，而不是两个：它的值就是做 k_norm 和 RoPE 之前的键，所以键可以由值重建。",
    ),
    (
        r"keys and values: two tensors per token on layers without K = V\.",
        "键和值：没有 K = V 的层每个词元存两个张量。",
    ),
    (
        r"a sliding-window or chunked layer \(window set\) keeps at most `window` tokens, not the whole context\.",
        "滑动窗口层或分块层（设置了 window）最多保留 `window` 个词元，而不是整个上下文。",
    ),
    (
        r"with a context shorter than the window a layer holds only the context: min\(context, window\)\.",
        "上下文比窗口短时，层只保存上下文那么多词元：min(context, window)。",
    ),
    (
        r"off by one: `window` is the most tokens the layer keeps, so it holds min\(context, window\)\.",
        "差了一位：`window` 就是该层最多保留的词元数，所以它保存 min(context, window) 个。",
    ),
    (
        r"the cache holds the key/value heads \(num_kv_heads\), not the query heads\.",
        "缓存保存的是键/值头（num_kv_heads），而不是查询头。",
    ),
    (r"multiply by bytes_per_element \(2 for bfloat16\)\.", "请乘以 bytes_per_element（bfloat16 为 2）。"),
    (
        r"the total differs from the sum over the storing layers of tokens kept × num_kv_heads × head_dim × "
        r"tensors per token × bytes_per_element\.",
        "总数与各存储层的“保留词元数 × num_kv_heads × head_dim × 每词元张量数 × bytes_per_element”之和不一致。",
    ),
    # attn_core/viz/chunked.py: the explorer's titles, axes and line; the NoPE plot
    *exact(
        {
            "full causal": "完整因果",
            "key position": "键位置",
            "position": "位置",
            "query factor": "查询系数",
            "floor_scale 8192, attn_scale 0.1 (released)": "floor_scale 8192，attn_scale 0.1（发布版）",
            "no effect here: a boolean mask is already 0 or 1": "此处无效：布尔掩码本来就是 0 或 1",
            "NoPE query temperature 1 + attn_scale · log(1 + floor((pos + 1) / floor_scale))": (
                "NoPE 查询温度 1 + attn_scale · log(1 + floor((pos + 1) / floor_scale))"
            ),
        }
    ),
    (r"sliding window W = (?P<w>\d+)", "滑动窗口 W = {w}"),
    (r"chunked C = (?P<c>\d+)", "分块 C = {c}"),
    (r"query (?P<q>\d+) reads (?P<n>\d+) keys", "查询 {q} 读取 {n} 个键"),
    (
        r"Query (?P<q>\d+): full causal reads keys (?P<full>\S+) \((?P<nf>\d+)\); the sliding window reads keys "
        r"(?P<win>\S+) \((?P<nw>\d+)\), always the last (?P<w>\d+) once there are that many; the chunk reads keys "
        r"(?P<chunk>\S+) \((?P<nc>\d+)\): it starts over at every multiple of (?P<c>\d+), so a cache keeps at most "
        r"(?P<c2>\d+) tokens and the first query of a chunk sees only itself\.",
        "查询 {q}：完整因果读取键 {full}（{nf} 个）；滑动窗口读取键 {win}（{nw} 个），词元足够多之后总是最后 {w} 个；"
        "分块读取键 {chunk}（{nc} 个）：每到 {c} 的倍数就重新开始，"
        "所以缓存最多保留 {c2} 个词元，块的第一个查询只能看到它自己。",
    ),
    (
        r"(?P<name>\w+) must be an int >= 1, got (?P<got>.+?)\.",
        "{name} 必须是 >= 1 的整数，你给的是 {got}。",
    ),
    (
        r"query must be a position 0 \.\. seq_len - 1 = (?P<last>\d+), got (?P<got>.+?)\.",
        "query 必须是 0 .. seq_len - 1 = {last} 之间的位置，你给的是 {got}。",
    ),
]
