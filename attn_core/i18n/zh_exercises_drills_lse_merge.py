"""Chinese for the interview gym's log-sum-exp merge drill (``attn_core/exercises/drills_lse_merge.py``)."""

from __future__ import annotations

from attn_core.i18n import exact

CATALOG = [
    *exact({"check_lse_merge": "check_lse_merge"}),
    (
        r"NaN in your merge: exp of a large lse overflows \(inf/inf\), or -inf - -inf appears\. Subtract the larger "
        r"lse first \(torch\.logaddexp does\): lse = m \+ log\(e\^\(lse_a - m\) \+ e\^\(lse_b - m\)\), "
        r"m = max\(lse_a, lse_b\)\.",
        "合并结果里出现了 NaN：对很大的 lse 取 exp 会溢出（inf/inf），或者出现了 -inf - -inf。先减去较大的 lse"
        "（torch.logaddexp 就是这样做的）：lse = m + log(e^(lse_a - m) + e^(lse_b - m))，m = max(lse_a, lse_b)。",
    ),
    (
        r"the merged lse is log\(e\^lse_a \+ e\^lse_b\), not max\(lse_a, lse_b\): the smaller part adds mass too\.",
        "合并后的 lse 是 log(e^lse_a + e^lse_b)，而不是 max(lse_a, lse_b)：较小的那部分也贡献了概率质量。",
    ),
    (
        r"adding log-sum-exps multiplies the sums: the merged lse is log\(e\^lse_a \+ e\^lse_b\)\.",
        "把 log-sum-exp 相加等于把两个和相乘：合并后的 lse 是 log(e^lse_a + e^lse_b)。",
    ),
    (
        r"the merged lse overflowed to inf: compute it as m \+ log\(e\^\(lse_a - m\) \+ e\^\(lse_b - m\)\)\.",
        "合并后的 lse 溢出成了 inf：请按 m + log(e^(lse_a - m) + e^(lse_b - m)) 计算。",
    ),
    (
        r"the merged lse is wrong: log\(e\^lse_a \+ e\^lse_b\) \(torch\.logaddexp\)\.",
        "合并后的 lse 不对：应为 log(e^lse_a + e^lse_b)（torch.logaddexp）。",
    ),
    (
        r"you averaged the two outputs: weight each by its share of the softmax mass, e\^\(lse_i - lse\)\.",
        "你把两个输出直接取了平均：每个输出要按它在 softmax 总质量中的占比 e^(lse_i - lse) 加权。",
    ),
    (
        r"the weights are swapped: out_a gets e\^\(lse_a - lse\), out_b gets e\^\(lse_b - lse\)\.",
        "权重用反了：out_a 的权重是 e^(lse_a - lse)，out_b 的权重是 e^(lse_b - lse)。",
    ),
    (
        r"these lse are natural logs: weight by e\^\(lse_i - lse\), not 2\^\(lse_i - lse\) "
        r"\(that is for log2 kernels\)\.",
        "这里的 lse 是自然对数：权重是 e^(lse_i - lse)，而不是 2^(lse_i - lse)（后者用于以 2 为底的内核）。",
    ),
    (
        r"the weighted sum is not normalised: divide by e\^lse \(i\.e\. weight by e\^\(lse_i - lse\)\)\.",
        "加权和没有归一化：要除以 e^lse（也就是用 e^(lse_i - lse) 加权）。",
    ),
    (
        r"the merged output differs from attention over all keys: out = Σ_i e\^\(lse_i - lse\) out_i\.",
        "合并后的输出与对全部键做注意力的结果不同：out = Σ_i e^(lse_i - lse) out_i。",
    ),
    (
        r"return a pair \(out, lse\), got (?P<type>[\w.]+)\.",
        "请返回一对 (out, lse)，你返回的是 {type}。",
    ),
    (
        r"out must have the shape of out_a \(H, Lq, dv\) and lse the shape of lse_a \(H, Lq\)\.",
        "out 的形状必须与 out_a 相同 (H, Lq, dv)，lse 的形状必须与 lse_a 相同 (H, Lq)。",
    ),
]
