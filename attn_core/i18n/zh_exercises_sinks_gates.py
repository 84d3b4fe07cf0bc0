"""Chinese for the graders of notebook 12c (``attn_core/exercises/sinks_gates.py``).

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). Shapes, numbers and
type names stay as the grader printed them.
"""

from __future__ import annotations

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"
_WHAT = {
    "the weights": "注意力权重",
    "the query": "查询",
    "the gate": "门控",
    "the pair values": "头对的值",
}
_WHAT_RE = "|".join(_WHAT)


CATALOG = [
    *exact(
        {name: name for name in ("check_sink_softmax", "check_gate_split", "check_diff_lambda", "check_pair_values")}
    ),
    # ---- shapes and types
    (
        rf"return (?P<what>{_WHAT_RE}) as a tensor of shape (?P<shape>{_SHAPE}), got (?P<type>[\w.]+)\.",
        lambda m, tr: f"请把{_WHAT[m['what']]}作为形状为 {m['shape']} 的张量返回，你返回的是 {m['type']}。",
    ),
    (
        rf"(?P<what>{_WHAT_RE}) must have shape (?P<shape>{_SHAPE}), got (?P<got>{_SHAPE})\.",
        lambda m, tr: f"{_WHAT[m['what']]}的形状应为 {m['shape']}，你的是 {m['got']}。",
    ),
    (
        r"return two tensors \(query, gate\), got (?P<type>[\w.]+)\.",
        "请返回两个张量 (query, gate)，你返回的是 {type}。",
    ),
    (r"return λ as one number, got (?P<type>[\w.]+)\.", "请把 λ 作为一个数返回，你返回的是 {type}。"),
    # ---- exercise 1: the softmax with a sink
    (
        rf"you returned the sink's column too, shape (?P<got>{_SHAPE}): the sink has no value, so drop its column "
        rf"after the softmax and return (?P<shape>{_SHAPE})\.",
        "你把汇聚点那一列也返回了，形状为 {got}：汇聚点没有值，所以在 softmax 之后去掉这一列，返回 {shape}。",
    ),
    (
        r"the sink logit was scaled too: it is a learned logit that joins the softmax as it is; only the q·k scores "
        r"are multiplied by 1/sqrt\(head_dim\)\.",
        "汇聚点的 logit 也被缩放了：它是一个学到的 logit，原样加入 softmax；只有 q·k 分数才乘以 1/sqrt(head_dim)。",
    ),
    (
        r"your rows sum to 1: that is the plain softmax, the sink dropped \(or the rows renormalised after dropping "
        r"its column\)\. The sink's share must stay missing: rows sum to 1 − p_sink\.",
        "你的每行之和为 1：这是普通的 softmax，汇聚点被丢掉了（或者去掉它那一列后又把每行重新归一化）。"
        "汇聚点分走的份额必须保持缺失：每行之和为 1 − p_sink。",
    ),
    (
        r"the scores were not scaled: multiply q·kᵀ by scale \(1/sqrt\(head_dim\)\) before the softmax\.",
        "分数没有缩放：softmax 之前先把 q·kᵀ 乘以 scale（1/sqrt(head_dim)）。",
    ),
    (
        r"the weights differ from exp\(s_ij·scale\) / \(exp\(sink_h\) \+ Σ_j' exp\(s_ij'·scale\)\): append each "
        r"head's sink logit as one more column, softmax over the row, drop that column\.",
        "权重与 exp(s_ij·scale) / (exp(sink_h) + Σ_j' exp(s_ij'·scale)) 不符：把每个头的汇聚点 logit 作为多出的一列"
        "拼上，对整行做 softmax，再去掉这一列。",
    ),
    # ---- exercise 2: query and gate halves
    (
        r"you split the whole projection in two \(all queries, then all gates\): Qwen3-Next lays q_proj's rows out "
        r"per head as \[query_h \| gate_h\]\. View it as \(B, L, H, 2·D\) first, then split the last axis\.",
        "你把整个投影一分为二（先全部查询，再全部门控）：Qwen3-Next 的 q_proj 按头排列为 [query_h | gate_h]。"
        "先 view 成 (B, L, H, 2·D)，再沿最后一维切开。",
    ),
    (
        r"query and gate are swapped: in each head's 2·D features the query comes first\.",
        "查询和门控弄反了：每个头的 2·D 个特征里查询在前。",
    ),
    (
        r"query or gate differs from q_proj\(x\)\.view\(B, L, H, 2·D\) split in halves along the last axis\.",
        "查询或门控与 q_proj(x).view(B, L, H, 2·D) 沿最后一维对半切开的结果不符。",
    ),
    # ---- exercise 3: λ
    (
        r"you returned (?P<n>\d+) numbers: λ_q1·λ_k1 is a dot product \(sum the element-wise products\), so λ is "
        r"one number per layer\.",
        "你返回了 {n} 个数：λ_q1·λ_k1 是点积（把逐元素乘积求和），所以每层的 λ 只是一个数。",
    ),
    (
        r"λ_init is missing: λ = exp\(λ_q1·λ_k1\) − exp\(λ_q2·λ_k2\) \+ λ_init\.",
        "漏了 λ_init：λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init。",
    ),
    (
        r"λ_init is the constant 0\.8: it depends on the layer, 0\.8 − 0\.6·exp\(−0\.3·layer_idx\) "
        r"\(0\.2 in layer 0\)\.",
        "λ_init 被当成常数 0.8：它随层变化，0.8 − 0.6·exp(−0.3·layer_idx)（第 0 层为 0.2）。",
    ),
    (
        r"λ_init used a 1-based layer index: layer_idx counts from 0, so layer 0 gets 0\.8 − 0\.6 = 0\.2\.",
        "λ_init 用了从 1 开始的层号：layer_idx 从 0 开始，所以第 0 层得到 0.8 − 0.6 = 0.2。",
    ),
    (
        r"the exponent's sign is flipped: λ_init = 0\.8 − 0\.6·exp\(−0\.3·layer_idx\) grows towards 0\.8 with depth\.",
        "指数的符号反了：λ_init = 0.8 − 0.6·exp(−0.3·layer_idx) 随深度增大并趋近 0.8。",
    ),
    (
        r"for layer_idx=(?P<i>\d+) you returned (?P<got>\S+), expected (?P<expected>\S+): "
        r"exp\(λ_q1·λ_k1\) − exp\(λ_q2·λ_k2\) \+ 0\.8 − 0\.6·exp\(−0\.3·layer_idx\)\.",
        "layer_idx={i} 时你返回了 {got}，应为 {expected}："
        "exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + 0.8 − 0.6·exp(−0.3·layer_idx)。",
    ),
    # ---- exercise 4: the pair's values
    (
        r"you paired adjacent kv heads \(2g, 2g \+ 1\): DiffLlama splits the kv heads in two halves, so pair p reads "
        r"v\[g\] and v\[g \+ Hkv/2\] \(g = p // \(H / Hkv\)\), as it splits query heads into p and p \+ H/2\.",
        "你把相邻的 KV 头 (2g, 2g + 1) 配成了一对：DiffLlama 把 KV 头分成前后两半，所以头对 p 读取 v[g] 和 "
        "v[g + Hkv/2]（g = p // (H / Hkv)），正如它把查询头分成 p 和 p + H/2。",
    ),
    (
        r"you interleaved the two values' features: concatenate them, cat\(v\[g\], v\[g \+ Hkv/2\]\) over the last "
        r"axis, as torch\.cat\(\.\.\., dim=-1\) does\.",
        "你把两个值的特征逐个交错放在一起了：应该拼接，沿最后一维 cat(v[g], v[g + Hkv/2])，即 torch.cat(..., dim=-1)。",
    ),
    (
        rf"for v of shape (?P<shape>{_SHAPE}) and num_heads=(?P<h>\d+): "
        r"pair p must read cat\(v\[g\], v\[g \+ Hkv/2\]\) with g = p // \(H / Hkv\)\.",
        "当 v 的形状为 {shape}、num_heads={h} 时：头对 p 必须读取 cat(v[g], v[g + Hkv/2])，其中 g = p // (H / Hkv)。",
    ),
]
