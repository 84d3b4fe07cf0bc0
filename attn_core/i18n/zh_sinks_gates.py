"""Chinese for notebook 12c's own printed labels, figure texts and explorer (attention sinks, gates, differential).

The notebook prints and draws through ``localize`` / ``ac.localize_figure``; these entries give the Chinese edition
the same lines in Chinese. Numbers stay as printed.
"""

from __future__ import annotations

from attn_core.i18n import exact

_NUMBER = r"[+\-−]?\d+(?:\.\d+)?"

CATALOG = [
    *exact(
        {
            "score of key 0   weight on key 0   |output|": "键 0 的分数   键 0 的权重   |输出|",
            "<bos> share per layer (G = global)": "每层给 <bos> 的注意力份额（G = 全局层）",
            "mean": "平均",
            "layer": "层",
            "weight on <bos>": "<bos> 上的权重",
            "Gemma 3 270M: share of attention on <bos> (orange: global layers)": (
                "Gemma 3 270M：<bos> 上的注意力份额（橙色：全局层）"
            ),
            "row sums, head 0:": "每行之和，头 0：",
            "row sums, head 1:": "每行之和，头 1：",
            "✅ learned sinks: from scratch == attn_core == a zero-value key in torch's SDPA (float64)": (
                "✅ 可学习的汇聚点 logit：从零实现 == attn_core == torch SDPA 中一个值为零的键（float64）"
            ),
            "Weights with a learned sink: rows sum below 1 (fixed 0–1 scale)": (
                "带可学习汇聚点的权重：每行之和小于 1（固定 0–1 色标）"
            ),
            "mean gate value:": "门控平均值：",
            "✅ output gate: from scratch == torch's SDPA == attn_core (float64)": (
                "✅ 输出门控：从零实现 == torch SDPA == attn_core（float64）"
            ),
            "gates closed: largest |head output| =": "门全部关闭：最大 |头输出| =",
            "differential rows sum to 1 − λ:": "差分注意力每行之和为 1 − λ：",
            "✅ differential attention: from scratch == attn_core (float64)": (
                "✅ 差分注意力：从零实现 == attn_core（float64）"
            ),
            "variant   recall acc    first-token share   max head   residual max": (
                "变体      回忆准确率    首词元份额          最大头     残差最大值"
            ),
            "learned sink's share (sink variant), per layer:": "可学习汇聚点分走的份额（sink 变体），逐层：",
            "recall accuracy (copying: ≥ 1/6)": "回忆准确率（照抄：≥ 1/6）",
            "vanilla": "普通",
            "sink": "汇聚点",
            "gate": "门控",
            "diff": "差分",
            "first-token share (mean)": "首词元份额（平均）",
            "max |residual| (last layer)": "最大 |残差|（最后一层）",
            "Four variants, 3 seeds each (dots), 500 steps": "四种变体，各 3 个随机种子（圆点），500 步",
            "softcap 20 + causal": "softcap 20 + 因果",
            "ALiBi + causal": "ALiBi + 因果",
            "sliding window 3": "滑动窗口 3",
            "documents + causal": "按文档 + 因果",
            "sinks through the log-sum-exp == ac.scaled_dot_product_attention(sinks=)": (
                "经 log-sum-exp 合并的汇聚点 == ac.scaled_dot_product_attention(sinks=)"
            ),
            "whole-projection split: differs from the per-head layout": "整段投影对半切：与按头排列的结果不同",
            "per-head [query | gate] split == ac.GroupedQueryAttention(output_gate=True)": (
                "按头 [query | gate] 切分 == ac.GroupedQueryAttention(output_gate=True)"
            ),
            "renormalised rows: the sink's share is gone": "每行重新归一化：汇聚点的份额不见了",
            "renormalising == plain softmax: that is why the rows must sum to 1 − p_sink": (
                "重新归一化 == 普通 softmax：所以每行之和必须是 1 − p_sink"
            ),
            "adjacent kv heads: differs from DiffLlama's layout": "相邻的 KV 头：与 DiffLlama 的排列不同",
            "pair p reads kv heads g and g + Hkv/2 == ac.DifferentialAttention": (
                "头对 p 读取 KV 头 g 和 g + Hkv/2 == ac.DifferentialAttention"
            ),
            "sink logit": "汇聚点 logit",
            "query scale": "查询缩放",
        }
    ),
    (rf"sink logit (?P<s>{_NUMBER})", "汇聚点 logit {s}"),
    (
        rf"sink logit (?P<s>{_NUMBER}), query scale (?P<q>{_NUMBER})",
        "汇聚点 logit {s}，查询缩放 {q}",
    ),
    (
        rf"rows keep between (?P<lo>{_NUMBER}) and (?P<hi>{_NUMBER}) of their weight for real keys; "
        rf"the sink takes (?P<mean>{_NUMBER}) on average\.",
        "每行留给真实键的权重在 {lo} 到 {hi} 之间；汇聚点平均分走 {mean}。",
    ),
]

CATALOG += exact(
    {
        "<bos> share per layer (mean of 4 heads; G = global)": "每层给 <bos> 的注意力份额（4 个头的平均；G = 全局层）",
        "heads above 0.5:": "份额超过 0.5 的头：",
        "max |residual| after blocks 0, 5, 11, 17:": "第 0、5、11、17 块之后的最大 |残差|：",
        "share of attention on <bos>": "<bos> 上的注意力份额",
        "max |residual|": "最大 |残差|",
        "largest residual activation": "残差流中最大的激活值",
        "Gemma 3 270M, 400 tokens (orange: global layers)": "Gemma 3 270M，400 个词元（橙色：全局层）",
    }
)
