"""Chinese for the admission grader of notebook 13b (``attn_core/exercises/serving_admission.py``).

Every ❌ message it can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``): the "where" (the failing
case and the learner's answer), then the diagnosis, matched on its own (``{…!t}``).
"""

from __future__ import annotations

from attn_core.i18n import exact

_LIST = r"\[[^\]]*\]"  # a list of tuples as Python prints it
_WHERE = (
    rf"for waiting=(?P<waiting>{_LIST}), num_running=(?P<running>\d+), free_blocks=(?P<free>\d+), "
    rf"budget_left=(?P<budget>\d+), block_size=(?P<bs>\d+), max_num_seqs=(?P<seats>\d+) you returned "
    rf"(?P<value>{_LIST})"
)
_WHERE_ZH = (
    "waiting={waiting}、num_running={running}、free_blocks={free}、budget_left={budget}、block_size={bs}、"
    "max_num_seqs={seats} 时，你返回了 {value}"
)

CATALOG = [
    *exact({"admission": "准入"}),
    (
        r"return a list of \(request_id, first-chunk tokens\) pairs, got (?P<type>[\w.]+)\.",
        "请返回 (request_id, 首个分块的词元数) 二元组的列表，你返回的是 {type}。",
    ),
    (
        r"each item must be a \(request_id, first-chunk tokens\) pair, with the request_id from waiting \(a str\), "
        r"got (?P<type>[\w.]+) (?P<item>.*)\.",
        "每一项都必须是 (request_id, 首个分块的词元数) 二元组，request_id 取自 waiting（一个 str），"
        "你给的是 {type} {item}。",
    ),
    (
        r"a first chunk is a whole number of tokens, got (?P<value>.*) for (?P<rid>.*)\.",
        "首个分块必须是整数个词元，{rid} 得到的是 {value}。",
    ),
    (
        rf"{_WHERE}, expected (?P<expected>{_LIST}): first come, first served; each needs a seat, budget left and "
        r"free blocks for its first chunk after prefix hits\.",
        _WHERE_ZH
        + "，应为 {expected}：先到先服务；每个请求都需要一个席位、剩余预算，以及前缀命中之后首个分块所需的空闲块。",
    ),
    (rf"{_WHERE}: (?P<problem>.+)", _WHERE_ZH + "：{problem!t}"),
    *exact(
        {
            "you skipped a request that does not fit and admitted a later one: admission is first come, first "
            "served and stops at the first request that does not fit (otherwise a long request starves behind "
            "a stream of short ones).": (
                "你跳过了放不下的请求，却准入了它后面的请求：准入是先到先服务的，在第一个放不下的请求处停下"
                "（否则长请求会被源源不断的短请求饿死）。"
            ),
            "you reserved blocks for the whole prompt: a request needs free blocks only for its first chunk, the "
            "tokens it computes in this step; later chunks take their blocks when they run.": (
                "你为整个提示词预留了块：请求只需要为首个分块（这一步要计算的词元）准备空闲块；后面的分块运行时再取块。"
            ),
            "you reserved blocks for the answer too (max_new_tokens): nothing is reserved ahead; a decode takes a "
            "block when it needs one, and preemption handles running out.": (
                "你连回答（max_new_tokens）的块也预留了：不提前预留任何块；解码需要块时才取，块用完时由抢占处理。"
            ),
            "you ignored the prefix-cache hits: cached leading blocks are shared, not computed again, so they need "
            "neither budget nor new blocks.": (
                "你忽略了前缀缓存命中：缓存中的开头块是共享的、不再计算，所以它们既不占预算，也不需要新块。"
            ),
            "you counted the prompt's last token as a hit: its logits are needed, so at most "
            "(prompt_tokens - 1) // block_size blocks are hits and the last token is computed.": (
                "你把提示词的最后一个词元也算作命中：需要的正是它的 logits，所以最多命中 "
                "(prompt_tokens - 1) // block_size 个块，最后一个词元必须计算。"
            ),
            "you admitted more requests than there are seats: running plus admitted stays <= max_num_seqs.": (
                "你准入的请求超过了席位数：运行中的加上新准入的必须 <= max_num_seqs。"
            ),
            "you admitted a request with no budget left: stop when the step's token budget is spent (a first chunk "
            "has at least one token).": (
                "你在没有剩余预算时仍准入了请求：这一步的词元预算用完就停下（首个分块至少有一个词元）。"
            ),
            "a first chunk bigger than the budget left: chunk = min(tokens left to compute, budget left) (chunked "
            "prefill), and it needs blocks for that chunk only.": (
                "首个分块超过了剩余预算：分块 = min(剩余待计算的词元数, 剩余预算)（分块预填充），"
                "并且只为这个分块准备块。"
            ),
        }
    ),
]
