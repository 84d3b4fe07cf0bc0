"""Chinese for the labels of ``attn_core.viz.serving_timeline``, notebook 13b's memory-budget explorer and its own
figures and printed lines, until they are written with ``_()`` (the graders' messages are in the gettext catalog,
``attn_core/locale``)."""

from __future__ import annotations

from attn_core.i18n import exact

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
]
