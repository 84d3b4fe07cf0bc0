"""Chinese for the titles the notebooks give ``ac.plot_attention`` (``title=``, ``titles=``) and
``plot_block_tables``: those functions translate a caller's titles through the catalogs, so the notebooks' code is
the same in both editions and the Chinese edition's heatmaps carry Chinese titles.

Code names stay as written (``F.sdpa(is_causal=True)``, ``ac.causal_mask``, ``KVCache(window=4, num_sinks=2)``).
"""

from __future__ import annotations

from attn_core.i18n import exact

_INT = r"\d+"

_PROBE_HEADS = {
    "previous": "前一个词元",
    "next": "下一个词元",
    "[CLS] sink": "[CLS] 汇聚点",
    "best [SEP] head": "最佳 [SEP] 头",
}

CATALOG = [
    *exact(
        {
            # 00, 01
            "causal attention, one head": "因果注意力，单个头",
            "Which key does each query pick?": "每个查询选中了哪个键？",
            "Cross-attention: 3 queries × 5 keys": "交叉注意力：3 个查询 × 5 个键",
            "no scale: nearly one-hot rows": "不缩放：各行几乎是 one-hot",
            "÷ √256: soft rows": "÷ √256：各行变得平缓",
            # 02, 03, 04
            "head 0 · itself": "头 0 · 自身",
            "head 1 · previous token": "头 1 · 前一个词元",
            "head 2 · first token": "头 2 · 第一个词元",
            "head 3 · average": "头 3 · 平均",
            "four heads, four different relations over the same tokens": "四个头：同一组词元上的四种不同关系",
            "cross-attention (random weights)": "交叉注意力（随机权重）",
            "MQA: 4 query heads, ONE shared key/value head": "MQA：4 个查询头，共享一个 KV 头",
            "GQA: 8 query heads share 2 kv heads (colour = kv head)": "GQA：8 个查询头共享 2 个 KV 头（颜色 = KV 头）",
            # 05
            "padding (length 4)": "填充（长度 4）",
            "causal + padding": "因果 + 填充",
            "sliding window 3": "滑动窗口 3",
            "prefix-LM 3": "前缀 LM 3",
            "packed docs": "打包的多篇文档",
            "Masks: rows = queries, columns = keys": "掩码：行 = 查询，列 = 键",
            "Attention weights under each mask": "每种掩码下的注意力权重",
            "top-left: F.sdpa(is_causal=True)": "左上对齐：F.sdpa(is_causal=True)",
            "bottom-right: ac.causal_mask": "右下对齐：ac.causal_mask",
            "-inf: NaN rows (hatched)": "-inf：NaN 行（斜线）",
            "-1e9: uniform rows": "-1e9：均匀的行",
            "attn_core: zero rows": "attn_core：全零的行",
            "no dropout": "无 dropout",
            "mean of 20,000 draws": "20,000 次采样的平均",
            # 07
            "one full causal pass": "一次完整的因果前向",
            "prefill rows + one row per decode step": "预填充的行 + 每个解码步一行",
            # 13, 14, 15, 16
            "token t of a sequence: block table[t // 4], slot t % 4": (
                "序列的第 t 个词元：block table[t // 4]，槽位 t % 4"
            ),
            "one pass over KVCache(window=4, num_sinks=2): sinks + a band of 4": (
                "一次遍历 KVCache(window=4, num_sinks=2)：注意力汇聚点 + 宽 4 的带"
            ),
            "reference (attn_core)": "参考实现（attn_core）",
            "bug 3 · flipped mask": "bug 3 · 掩码取反",
            "bug 6 · mask after softmax": "bug 6 · softmax 之后才加掩码",
            "bug 5 · softmax over queries": "bug 5 · softmax 沿查询",
            "keras.layers.MultiHeadAttention (torch backend), causal + padding": (
                "keras.layers.MultiHeadAttention（torch 后端），因果 + 填充"
            ),
            "hand-written GQA, causal": "手写的 GQA，因果",
        }
    ),
    (r"one draw, p = (?P<p>[\d.]+)", "一次采样，p = {p}"),
    (
        rf"head 0: rows 0-(?P<last>{_INT}) come from the prefill, rows (?P<first>{_INT})-(?P<end>{_INT}) "
        r"from one decode step each",
        "头 0：第 0-{last} 行来自预填充，第 {first}-{end} 行各来自一个解码步",
    ),
    (
        rf"(?P<name>previous|next|\[CLS\] sink|best \[SEP\] head): L(?P<layer>{_INT}) H(?P<head>{_INT})",
        lambda match, tr: f"{_PROBE_HEADS[match['name']]}：L{match['layer']} H{match['head']}",
    ),
    (rf"step (?P<step>{_INT}) · (?P<name>L{_INT} H{_INT})", "第 {step} 步 · {name}"),
    (
        rf"KVCache\(window=(?P<window>{_INT}), num_sinks=(?P<sinks>{_INT})\): the keys each query sees",
        "KVCache(window={window}, num_sinks={sinks})：每个查询看到的键",
    ),
    (rf"Keras head (?P<head>{_INT})", "Keras 头 {head}"),
]
