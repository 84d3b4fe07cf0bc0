"""Chinese for the interview gym's DSA top-k drill (``attn_core/exercises/drills_indexer_topk.py``)."""

from __future__ import annotations

from attn_core.i18n import exact

CATALOG = [
    *exact({"check_indexer_topk": "check_indexer_topk"}),
    (
        r"you chose the top-k before masking: future keys were selected\. Mask \(set to -inf\) first, then top-k\.",
        "你在加掩码之前就取了 top-k：选中了未来的键。先加掩码（设为 -inf），再取 top-k。",
    ),
    (
        r"top-left alignment: the queries are the last Lq tokens, so query i sees keys 0\.\.i \+ \(Lk - Lq\)\.",
        "左上角对齐了：查询是最后 Lq 个词元，所以查询 i 能看到键 0..i + (Lk - Lq)。",
    ),
    (
        r"some selected keys are in the future of their query: apply the causal \(bottom-right\) mask first\.",
        "有些被选中的键位于其查询的未来：先施加因果（右下角对齐）掩码。",
    ),
    (
        r"you kept the k \*lowest\* scores: topk\(largest=True\), or argsort descending\.",
        "你保留了得分*最低*的 k 个：应使用 topk(largest=True)，或按降序 argsort。",
    ),
    (
        r"the diagonal is visible: a query may read its own token \(key i \+ Lk - Lq\)\.",
        "对角线是可见的：查询可以读取它自己的词元（键 i + Lk - Lq）。",
    ),
    (
        r"a query reads (?P<got>\d+) keys; it reads min\(k, visible\) = at most (?P<k>\d+)\.",
        "有一个查询读取了 {got} 个键；它应读取 min(k, 可见键数) 个，最多 {k} 个。",
    ),
    (
        r"a query reads fewer than min\(k, visible\) keys: mask before the top-k, not after it\.",
        "有查询读取的键少于 min(k, 可见键数)：要在取 top-k 之前加掩码，而不是之后。",
    ),
    (
        r"the selected keys are not each query's highest-scoring visible keys\.",
        "选中的键不是每个查询得分最高的可见键。",
    ),
    (
        r"return a boolean \(Lq, Lk\) mask, got (?P<type>[\w.]+)\.",
        "请返回形状为 (Lq, Lk) 的布尔掩码，你返回的是 {type}。",
    ),
    (
        r"you returned top-k indices: return a boolean \(Lq, Lk\) mask, True = the key is read\.",
        "你返回的是 top-k 的索引：请返回形状为 (Lq, Lk) 的布尔掩码，True = 读取该键。",
    ),
    (
        r"return a boolean mask of shape \(Lq, Lk\) = (?P<shape>\(.*?\))\.",
        "请返回形状为 (Lq, Lk) = {shape} 的布尔掩码。",
    ),
    (
        r"return a boolean mask \(True = read\), not scores or indices\.",
        "请返回布尔掩码（True = 读取），而不是分数或索引。",
    ),
]
