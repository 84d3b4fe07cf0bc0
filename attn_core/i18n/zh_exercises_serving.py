"""Chinese for the graders of notebook 13 (``attn_core/exercises/serving.py``).

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). A message
starts with "where": the failing case and the learner's answer; the diagnosis after it is matched separately
(``{…!t}``) where it is shared. Lists, tuples, numbers and type names stay as the grader printed them.
"""

from __future__ import annotations

from attn_core.i18n import exact

_LIST = r"\[[^\]]*\]"  # a list as Python prints it: [5, 16, 17, 0, 33]
_PAIR = r"\([^)]*\)"  # a tuple as Python prints it: (2, 1)
_INT = r"-?\d+"

# the "where" of each exercise (the failing case and what the learner returned)
_BLOCKS = rf"for seq_lens=(?P<lens>{_LIST}), block_size=(?P<bs>\d+) you returned (?P<value>{_INT})"
_BLOCKS_ZH = "seq_lens={lens}、block_size={bs} 时，你返回了 {value}"
_LOOKUP = rf"for block_table=(?P<table>{_LIST}), block_size=(?P<bs>\d+), position=(?P<pos>\d+) you returned"
_LOOKUP_ZH = "block_table={table}、block_size={bs}、position={pos} 时，你返回了"
_STREAM = rf"for query_position=(?P<q>\d+), window=(?P<w>\d+), num_sinks=(?P<s>\d+) you returned (?P<values>{_LIST})"
_STREAM_ZH = "query_position={q}、window={w}、num_sinks={s} 时，你返回了 {values}"

CATALOG = [
    # the names of the three checks (the start of every verdict line)
    *exact(
        {
            "blocks needed": "所需的块数",
            "block-table lookup": "查块表",
            "keys a streaming query sees": "流式查询能看到的键",
        }
    ),
    # ---- exercise 1: blocks a batch needs
    (
        r"return a number of blocks \(an int\), got (?P<type>[\w.]+)\.",
        "请返回块数（一个 int），你返回的是 {type}。",
    ),
    (
        rf"{_BLOCKS}, expected (?P<expected>{_INT}): the sum over sequences of ceil\(length / block_size\)\.",
        _BLOCKS_ZH + "，应为 {expected}：即对每个序列的 ceil(length / block_size) 求和。",
    ),
    (rf"{_BLOCKS}: (?P<problem>.+)", _BLOCKS_ZH + "：{problem!t}"),
    *exact(
        {
            "floor division drops each sequence's partly filled last block: round up, -(-length // block_size).": (
                "向下取整的除法丢掉了每个序列最后那个没填满的块：应向上取整，即 -(-length // block_size)。"
            ),
            "you pooled the tokens of all sequences before rounding up: a block holds ONE sequence's tokens, so "
            "round up per sequence.": (
                "你先把所有序列的词元加在一起再向上取整：一个块只存放一个序列的词元，所以要对每个序列分别向上取整。"
            ),
            "length // block_size + 1 is one block too many when a length is a multiple of block_size (or 0): "
            "round up instead, -(-length // block_size).": (
                "当长度是 block_size 的整数倍（或为 0）时，length // block_size + 1 会多算一个块："
                "应改为向上取整，即 -(-length // block_size)。"
            ),
            "that is tokens, not blocks: divide each length by block_size, rounding up.": (
                "这是词元数，不是块数：把每个长度除以 block_size，再向上取整。"
            ),
            "you reserved the longest sequence's blocks for every sequence: that is the contiguous layout's "
            "waste; paged blocks follow each sequence's own length.": (
                "你给每个序列都预留了最长序列所需的块数：这正是连续布局的浪费；分页的块数跟随每个序列自己的长度。"
            ),
        }
    ),
    # ---- exercise 2: the block-table lookup
    (
        rf"{_LOOKUP} (?P<flat>{_INT}): the flat index block \* block_size \+ slot into the pool\. Return the pair "
        rf"\(block, slot\) = (?P<expected>{_PAIR})\.",
        _LOOKUP_ZH + " {flat}：这是池中的扁平下标 block * block_size + slot。请返回二元组 (block, slot) = {expected}。",
    ),
    (
        rf"{_LOOKUP} a tensor of shape (?P<shape>{_PAIR}): return a pair of ints \(block, slot\)\.",
        _LOOKUP_ZH + "一个形状为 {shape} 的张量：请返回由两个 int 组成的二元组 (block, slot)。",
    ),
    (
        rf"{_LOOKUP} an array of shape (?P<shape>{_PAIR}): return a pair of ints \(block, slot\)\.",
        _LOOKUP_ZH + "一个形状为 {shape} 的数组：请返回由两个 int 组成的二元组 (block, slot)。",
    ),
    (
        rf"{_LOOKUP} a (?P<type>list|tuple) of (?P<count>\d+) numbers: return a pair of ints \(block, slot\)\.",
        _LOOKUP_ZH + "一个含 {count} 个数的 {type}：请返回由两个 int 组成的二元组 (block, slot)。",
    ),
    (
        rf"{_LOOKUP} (?P<type>[\w.]+): return a pair of ints \(block, slot\)\.",
        _LOOKUP_ZH + "类型为 {type} 的值：请返回由两个 int 组成的二元组 (block, slot)。",
    ),
    (
        rf"{_LOOKUP} (?P<pair>{_PAIR}): (?P<logical>\d+) is the logical block \(position // block_size\), the "
        rf"sequence's (?P=logical)-th block\. Its keys live in physical block "
        rf"block_table\[(?P=logical)\] = (?P<block>{_INT})\.",
        _LOOKUP_ZH + " {pair}：{logical} 是逻辑块号（position // block_size），即该序列的第 {logical} 个块。"
        "它的键存放在物理块 block_table[{logical}] = {block} 中。",
    ),
    (
        rf"{_LOOKUP} (?P<pair>{_PAIR}): you indexed the table by the token position; each entry covers "
        rf"block_size = (?P<size>\d+) tokens, so the entry is block_table\[position // block_size\]\.",
        _LOOKUP_ZH + " {pair}：你用词元位置去索引块表；而每个表项覆盖 block_size = {size} 个词元，"
        "所以表项应是 block_table[position // block_size]。",
    ),
    (
        rf"{_LOOKUP} (?P<pair>{_PAIR}): block and slot swapped; expected \(block, slot\) = (?P<expected>{_PAIR})\.",
        _LOOKUP_ZH + " {pair}：block 和 slot 弄反了；应为 (block, slot) = {expected}。",
    ),
    (
        rf"{_LOOKUP} (?P<pair>{_PAIR}), expected (?P<expected>{_PAIR}): block_table\[position // block_size\], "
        r"position % block_size\.",
        _LOOKUP_ZH + " {pair}，应为 {expected}：即 block_table[position // block_size] 和 position % block_size。",
    ),
    # ---- exercise 3: the keys a streaming query sees
    (
        r"return a list of ints \(key positions\), got (?P<type>[\w.]+)\.",
        "请返回由 int 组成的列表（键的位置），你返回的是 {type}。",
    ),
    (
        rf"{_STREAM}: the right keys, but return them in ascending order: (?P<expected>{_LIST})\.",
        _STREAM_ZH + "：键是对的，但要按升序返回：{expected}。",
    ),
    (
        rf"{_STREAM}, expected (?P<expected>{_LIST}): the sinks 0 \.\. num_sinks - 1 and the last `window` "
        r"positions\.",
        _STREAM_ZH + "，应为 {expected}：即汇聚点 0 .. num_sinks - 1，加上最后 `window` 个位置。",
    ),
    (rf"{_STREAM}: (?P<problem>.+)", _STREAM_ZH + "：{problem!t}"),
    *exact(
        {
            "a position is listed twice. A sink inside the window is one key: take the union.": (
                "有一个位置出现了两次。落在窗口内的汇聚点只是一个键：取并集。"
            ),
            "you left out the sinks: the first num_sinks positions stay visible to every later query.": (
                "你漏掉了汇聚点：前 num_sinks 个位置对之后的每个查询都始终可见。"
            ),
            "one key too many: the window holds `window` keys, the query's own included: q - window + 1 .. q.": (
                "多了一个键：窗口容纳 `window` 个键，包括查询自己的那个：q - window + 1 .. q。"
            ),
            "you counted the sinks inside the window: KVCache(window=W, num_sinks=S) keeps S sinks ON TOP of the "
            "last W tokens (S + W slots).": (
                "你把汇聚点算进了窗口：KVCache(window=W, num_sinks=S) 在最后 W 个词元之外另外保留 S 个汇聚点"
                "（共 S + W 个槽位）。"
            ),
            "you numbered the keys by their place in the cache (0, 1, 2, ...: StreamingLLM's re-indexed "
            "positions); return the tokens' original positions, which is what this cache keeps.": (
                "你按键在缓存中的位置给它们编号（0, 1, 2, ...：StreamingLLM 重新编号后的位置）；"
                "请返回词元的原始位置，这个缓存保留的正是原始位置。"
            ),
            "a sink in the query's future: a query at position q < num_sinks sees only positions 0 .. q.": (
                "有一个汇聚点在查询的未来：位置 q < num_sinks 的查询只能看到位置 0 .. q。"
            ),
        }
    ),
]
