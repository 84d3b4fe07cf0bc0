"""Chinese for what the notebooks themselves print or label through ``ac.localize(...)`` (and the ``attn_core``
messages a notebook shows on purpose), so the English and the Chinese notebooks run the same code.

A notebook's own sentences are translated by the build (``notebooks/zh/build.py``: comments and string
literals); this catalog holds the text that comes from ``attn_core`` at run time, e.g. the bug hunt's titles.
"""

from __future__ import annotations

from attn_core.i18n import exact

BUG_TITLES = {  # attn_core.exercises.bug_hunt.BUGS[...].title, listed by notebook 14
    "Scaled by the model width": "按模型宽度缩放",
    "Values from the key projection": "值来自键投影",
    "Flipped mask convention": "掩码约定取反",
    "-inf turns padded rows into NaN": "-inf 让填充行变成 NaN",
    "Softmax over the wrong dimension": "softmax 沿错误的维度",
    "Mask applied after the softmax": "softmax 之后才加掩码",
    "Dropout before the softmax": "dropout 放在 softmax 之前",
    "Dropout still active in eval mode": "eval 模式下 dropout 仍然生效",
    "view after transpose": "转置之后直接 view",
    "repeat instead of repeat_interleave for GQA": "GQA 用了 repeat 而不是 repeat_interleave",
    "Per-sequence mask not broadcast over heads": "按序列的掩码没有在头维度上广播",
    "Causal mask aligned top-left in a decode step": "解码步中因果掩码按左上对齐",
    "RoPE positions restart at 0 in every decode step": "每个解码步 RoPE 位置都从 0 重新开始",
    "RoPE applied to the values": "RoPE 作用在了值上",
    "RoPE pairs in the wrong layout": "RoPE 的配对布局错误",
    "MLA: RoPE pushed through the absorbed W_UK": "MLA：RoPE 被推过了吸收后的 W_UK",
    "MLA: W_UV folded with the wrong transpose": "MLA：W_UV 折叠时转置错了",
    "MLA: the up-projected keys cached instead of the latent": "MLA：缓存的是上投影后的键，而不是潜向量",
}

ERRORS = [  # attn_core errors a notebook shows on purpose (caught and printed through ac.localize)
    (  # notebook 04: GroupedQueryAttention(64, 8, 3)
        r"num_heads \((?P<heads>\d+)\) must be divisible by num_kv_heads \((?P<kv>\d+)\) so every kv head serves the "
        r"same number of query heads\. Try num_kv_heads in (?P<choices>\[[\d, ]*\])\.",
        "num_heads（{heads}）必须能被 num_kv_heads（{kv}）整除，每个 KV 头才能服务同样多的查询头。"
        "num_kv_heads 可取 {choices}。",
    ),
    (  # notebook 13: KVCache(window=4, max_rollback=0).truncate(10) after the ring wrapped
        r"rolling back to (?P<length>\d+) tokens needs the keys at positions (?P<first>\d+)\.\.(?P<last>\d+), but "
        r"this window cache \(window=(?P<window>\d+), max_rollback=(?P<rollback>\d+)\) has already evicted some of "
        r"them; it holds (?P<held>\d+) of (?P<total>\d+) tokens\. Build it with KVCache\(window, max_rollback=\.\.\.\) "
        r"at least as large as the longest rollback\.",
        "回滚到 {length} 个词元需要位置 {first}..{last} 的键，但这个窗口缓存（window={window}，"
        "max_rollback={rollback}）已经逐出了其中一些；它只存着 {total} 个词元中的 {held} 个。"
        "请用 KVCache(window, max_rollback=...) 构建，且 max_rollback 不小于最长的回滚。",
    ),
]

CATALOG = [*exact(BUG_TITLES), *ERRORS]
