"""Chinese for the graders of notebook 13b (``attn_core/exercises/serving_engine.py``) and the labels of
``attn_core.viz.serving_timeline`` and of the notebook's own figures and printed lines.

Every ❌ message the graders can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``): the "where"
(the failing case and the learner's answer), then the diagnosis, matched on its own (``{…!t}``).
"""

from __future__ import annotations

from attn_core.i18n import exact

_LIST = r"\[[^\]]*\]"  # a list as Python prints it
_INT = r"-?\d+"

_HITS = (
    rf"for cached=(?P<cached>{_LIST}), prompt=(?P<prompt>{_LIST}), block_size=(?P<bs>\d+) you returned "
    rf"(?P<value>{_INT})"
)
_HITS_ZH = "cached={cached}、prompt={prompt}、block_size={bs} 时，你返回了 {value}"
_EVICT = (
    rf"for released=(?P<released>{_LIST}), hit_again=(?P<hit>{_LIST}), num_needed=(?P<n>\d+) you returned "
    rf"(?P<value>{_LIST})"
)
_EVICT_ZH = "released={released}、hit_again={hit}、num_needed={n} 时，你返回了 {value}"
_BUDGET = rf"for the case (?P<case>\([^)]*\)) you returned (?P<value>{_INT})"
_BUDGET_ZH = "对于参数 {case}，你返回了 {value}"

CATALOG = [
    *exact(
        {
            "prefix-cache hits": "前缀缓存命中",
            "eviction order": "淘汰顺序",
            "sequences that fit": "能容纳的序列数",
            # figure labels (viz.serving_timeline and the notebook)
            "step": "步",
            "request": "请求",
            "prefill chunk (tokens)": "预填充分块（词元数）",
            "decode (1 token)": "解码（1 个词元）",
            "tokens/s": "词元/秒",
            "one at a time": "逐个处理",
            "static batching": "静态批处理",
            "engine": "引擎",
            "tokens per CPU second": "每 CPU 秒词元数",
            "engine / one at a time": "引擎 / 逐个处理",
            "engine / static batching": "引擎 / 静态批处理",
            "static batching / one at a time": "静态批处理 / 逐个处理",
            "Throughput on one workload (Gemma 3 270M, float32)": "同一负载下的吞吐量（Gemma 3 270M，float32）",
            "Which request ran in which step": "每一步运行了哪些请求",
            "token budget per step": "每步词元预算",
            "mean TTFT (steps)": "平均 TTFT（步）",
            "mean TPOT (steps)": "平均 TPOT（步）",
            "mean TPOT (CPU ms)": "平均 TPOT（CPU 毫秒）",
            "longest step (CPU ms)": "最长的一步（CPU 毫秒）",
            "✅ engine == generate, token for token": "✅ 引擎 == generate，逐词元一致",
            "✅ a shared system prompt is computed once": "✅ 共享的系统提示词只计算一次",
            "✅ preempted requests still get generate's tokens": "✅ 被抢占的请求仍得到与 generate 相同的词元",
        }
    ),
    # the memory-budget explorer of notebook 13b (controls, title, explanation line, its "Not possible" message)
    *exact({"memory (GB)": "显存（GB）", "KV heads": "KV 头数"}),
    (
        r"70B GQA, bf16: (?P<n>\d+) sequences of (?P<t>\d+) tokens",
        "70B GQA，bf16：可容纳 {n} 条 {t} 词元的序列",
    ),
    (
        r"(?P<n>\d+) sequences fit: (?P<gb>[\d.]+) GB of keys and values each, next to (?P<w>[\d.]+) GB of weights "
        r"in (?P<m>\d+) GB\.",
        "能容纳 {n} 条序列：每条的键和值占 {gb} GB，另有 {w} GB 权重，总共 {m} GB。",
    ),
    (
        r"the weights \((?P<w>[\d.]+) GB\) leave no room for one sequence in (?P<m>\d+) GB\.",
        "权重（{w} GB）占满了 {m} GB，连一条序列都放不下。",
    ),
    # ---- exercise 1
    (r"return a number of tokens \(an int\), got (?P<type>[\w.]+)\.", "请返回词元数（一个 int），你返回的是 {type}。"),
    (
        rf"{_HITS}, expected (?P<expected>{_INT}): whole leading blocks equal in both, never the last token\.",
        _HITS_ZH + "，应为 {expected}：两者相同的开头整块，且绝不包括最后一个词元。",
    ),
    (rf"{_HITS}: (?P<problem>.+)", _HITS_ZH + "：{problem!t}"),
    *exact(
        {
            "you counted the common prefix token by token: the cache holds whole blocks, so a block that matches "
            "only partly cannot be shared. Round down to whole blocks.": (
                "你逐个词元地数公共前缀：缓存以整块为单位，只部分相同的块不能共享。请向下取整到整块。"
            ),
            "that includes the prompt's last token: its logits are what the request needs, so it must be computed. "
            "Stop one token earlier: hits <= len(prompt) - 1.": (
                "这包括了提示词的最后一个词元：请求需要的正是它的 logits，所以它必须被计算。"
                "请提前一个词元停下：命中数 <= len(prompt) - 1。"
            ),
            "you matched each block on its own tokens: a block's keys depend on every earlier token, so after "
            "the first differing block nothing matches (chain the hash: hash(parent hash, tokens)).": (
                "你只按每个块自己的词元匹配：一个块的键依赖它之前的所有词元，所以第一个不同的块之后都不能命中"
                "（链式哈希：hash(父块哈希, 词元)）。"
            ),
        }
    ),
    # ---- exercise 2
    (r"return a list of block ids, got (?P<type>[\w.]+)\.", "请返回块编号的列表，你返回的是 {type}。"),
    (rf"{_EVICT}, expected (?P<expected>{_LIST})\.", _EVICT_ZH + "，应为 {expected}。"),
    (rf"{_EVICT}: (?P<problem>.+)", _EVICT_ZH + "：{problem!t}"),
    *exact(
        {
            "that evicts the most recently released blocks first; LRU evicts the least recently "
            "released (the oldest) first: they are the least likely to be hit again.": (
                "这样先淘汰的是最近释放的块；LRU 先淘汰最久未用（最早释放）的块：它们最不可能再被命中。"
            ),
            "a block a prefix hit took back is in use again (refcount >= 1): it cannot be evicted.": (
                "被前缀命中重新取回的块又在使用中（引用计数 >= 1）：它不能被淘汰。"
            ),
        }
    ),
    # ---- exercise 3
    (
        r"return a number of sequences \(an int\), got (?P<type>[\w.]+)\.",
        "请返回序列数（一个 int），你返回的是 {type}。",
    ),
    (
        rf"{_BUDGET}, expected (?P<expected>{_INT}): \(memory - weights\) // "
        r"\(2·layers·kv_heads·head_dim·bytes·tokens\)\.",
        _BUDGET_ZH + "，应为 {expected}：(memory - weights) // (2·layers·kv_heads·head_dim·bytes·tokens)。",
    ),
    (rf"{_BUDGET}: (?P<problem>.+)", _BUDGET_ZH + "：{problem!t}"),
    *exact(
        {
            "the cache holds keys AND values: multiply by 2.": "缓存同时存放键和值：要乘以 2。",
            "only the KV heads are cached (grouped-query attention shares them): use num_kv_heads, not num_heads.": (
                "只有 KV 头被缓存（分组查询注意力共享它们）：用 num_kv_heads，而不是 num_heads。"
            ),
            "the weights take their share of memory first: subtract weight_bytes.": (
                "权重先占去一部分显存：要减去 weight_bytes。"
            ),
            "a partly fitting sequence does not fit: round down (//).": (
                "只能放下一部分的序列放不下：要向下取整（//）。"
            ),
        }
    ),
]
