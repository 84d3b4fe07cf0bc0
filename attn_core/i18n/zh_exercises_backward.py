"""Chinese for the graders of notebook 12 (``attn_core/exercises/backward.py``).

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). A message
is "where: problem"; the where part (the input shapes, or the merge case and its log-sum-exps) and the
problem are matched separately (``{…!t}``). Shapes, numbers and type names stay as the grader printed them.
"""

from __future__ import annotations

import re

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 3, 8), (5,), ()
_LIST = r"\[[^\]]*\]"  # a list of log-sum-exps as tolist() prints it: [0.3, 2.0, -inf]
_WHAT = r"(?P<what>dL/dscores|dq|dk|dv|out|lse)"  # the `what` of _tensor_problem: a code name, kept as it is
_SWAP = "是不是把 dq 和 dk 弄反了？请按 (dq, dk, dv) 的顺序返回。"
_CASES = {
    # the merge checker's cases (the start of its "where")
    "ordinary rows": "普通的行",
    "large log-sum-exps (long rows of large scores)": "很大的对数求和指数（由大分数组成的长行）",
    "a query that saw no key in A": "有一个查询在 A 中没看到任何键",
    "a query that saw no key at all": "有一个查询一个键也没看到",
}
_CASE = "|".join(map(re.escape, _CASES))

CATALOG = [
    # the names of the three checks (the start of every verdict line)
    *exact(
        {
            "softmax backward": "softmax 的反向传播",
            "FlashAttention backward": "FlashAttention 的反向传播",
            "merge two partial results": "合并两个部分结果",
        }
    ),
    # ---- where: the inputs of the failing case, then the problem
    (rf"probs (?P<shape>{_SHAPE}): (?P<problem>.+)", "probs 为 {shape} 时：{problem!t}"),
    (rf"q (?P<q>{_SHAPE}), k (?P<k>{_SHAPE}): (?P<problem>.+)", "q 为 {q}、k 为 {k} 时：{problem!t}"),
    (
        rf"(?P<case>{_CASE}): "
        rf"lse_a (?P<a>{_LIST}), lse_b (?P<b>{_LIST}): (?P<problem>.+)",
        "{case!t}（lse_a {a}，lse_b {b}）：{problem!t}",
    ),
    *exact(_CASES),
    # ---- the answer's type, shape, dtype, finiteness (every exercise)
    (
        r"(?P<problem>.+?) Did you swap dq and dk\? Return \(dq, dk, dv\) in that order\.",
        "{problem!t}" + _SWAP,
    ),
    (
        rf"expected a torch\.Tensor \({_WHAT}, shape (?P<shape>{_SHAPE})\), got (?P<type>[\w.]+)\.",
        "应返回 torch.Tensor（{what}，形状为 {shape}），你返回的是 {type}。",
    ),
    (
        rf"{_WHAT} has shape (?P<shape>{_SHAPE}), expected (?P<expected>{_SHAPE})\.",
        "{what} 的形状为 {shape}，应为 {expected}。",
    ),
    (
        rf"{_WHAT} has dtype (?P<dtype>[\w.]+), the inputs were (?P<expected>[\w.]+): keep their dtype\.",
        "{what} 的 dtype 是 {dtype}，而输入是 {expected}：请保持输入的 dtype。",
    ),
    (rf"{_WHAT} contains NaN or inf\.", "{what} 中含有 NaN 或 inf。"),
    # ---- exercise 1: the softmax backward
    (
        r"you passed the gradient straight through \(dS = dP\), the bug pjreddie/darknet PR #96 reports in its "
        r"softmax layer\. Softmax couples every score of a row: multiply by its Jacobian diag\(p\) − p pᵀ, "
        r"i\.e\. dS = P ∘ \(dP − rowsum\(P ∘ dP\)\)\.",
        "你让梯度原样穿过了 softmax（dS = dP），pjreddie/darknet PR #96 报告的正是 darknet 的 softmax 层中的这个 bug。"
        "softmax 把一行中的所有分数耦合在一起：要乘以它的雅可比矩阵 diag(p) − p pᵀ，"
        "即 dS = P ∘ (dP − rowsum(P ∘ dP))。",
    ),
    (
        r"the − D term is missing: you computed P ∘ dP, the diag\(p\) half of the Jacobian\. Raising one score "
        r"lowers every other probability of the row \(the − p pᵀ half\): subtract D = rowsum\(P ∘ dP\) from dP "
        r"first\.",
        "缺了 − D 项：你算的是 P ∘ dP，只是雅可比矩阵中 diag(p) 的那一半。提高一个分数会降低同一行的其他所有概率"
        "（即 − p pᵀ 那一半）：先从 dP 中减去 D = rowsum(P ∘ dP)。",
    ),
    (
        r"D must weight dP by the probabilities: D = Σ_j P_j · dP_j \(rowsum\(P ∘ dP\)\), not Σ_j dP_j\.",
        "D 必须用概率给 dP 加权：D = Σ_j P_j · dP_j（rowsum(P ∘ dP)），而不是 Σ_j dP_j。",
    ),
    (
        r"D is a P-weighted sum, Σ_j P_j · dP_j, not the mean of dP\.",
        "D 是以 P 为权重的和 Σ_j P_j · dP_j，不是 dP 的均值。",
    ),
    (
        r"the sign is flipped: dS = P ∘ \(dP − D\), not P ∘ \(D − dP\)\.",
        "符号反了：dS = P ∘ (dP − D)，不是 P ∘ (D − dP)。",
    ),
    (
        r"that is the backward of log_softmax \(dS = dP − p · Σ dP\), whose output is log p\. For "
        r"P = softmax\(S\) itself multiply by p first: dS = P ∘ \(dP − rowsum\(P ∘ dP\)\)\.",
        "这是 log_softmax 的反向传播（dS = dP − p · Σ dP），它的输出是 log p。"
        "对 P = softmax(S) 本身，要先乘以 p：dS = P ∘ (dP − rowsum(P ∘ dP))。",
    ),
    (
        r"D is summed over the wrong axis: one number per row, \(P \* dP\)\.sum\(dim=-1, keepdim=True\), "
        r"the axis softmax normalised\.",
        "D 求和的轴不对：每行一个数，即 (P * dP).sum(dim=-1, keepdim=True)，也就是 softmax 做归一化的那个轴。",
    ),
    (
        r"wrong values, largest error (?P<error>\S+)\. dS = P ∘ \(dP − rowsum\(P ∘ dP\)\)\.",
        "数值不对，最大误差 {error}。dS = P ∘ (dP − rowsum(P ∘ dP))。",
    ),
    # ---- exercise 2: FlashAttention's backward from out and lse
    (
        r"return three tensors \(dq, dk, dv\), got (?P<type>[\w.]+)\.",
        "请返回三个张量 (dq, dk, dv)，你返回的是 {type}。",
    ),
    (
        r"D = rowsum\(dO ∘ O\), not rowsum\(dO\): multiply by the output before summing "
        r"\(D_i = dO_i · O_i = Σ_j P_ij dP_ij\)\. Your dV is right, dQ and dK are not\.",
        "D = rowsum(dO ∘ O)，不是 rowsum(dO)：求和之前先乘以输出（D_i = dO_i · O_i = Σ_j P_ij dP_ij）。"
        "你的 dV 是对的，dQ 和 dK 不对。",
    ),
    (
        r"dS = P ∘ \(dP − D\): the − D term is missing, so dQ and dK are wrong while dV is right\. "
        r"D = rowsum\(dO ∘ O\) is one number per query row\.",
        "dS = P ∘ (dP − D)：缺了 − D 项，所以 dQ 和 dK 不对，而 dV 是对的。D = rowsum(dO ∘ O)，每个查询行一个数。",
    ),
    (
        r"P = exp\(S − lse\): you used exp\(S\), the unnormalised weights\. The saved log-sum-exp is what turns a "
        r"recomputed score tile into probabilities\.",
        "P = exp(S − lse)：你用的是 exp(S)，即未归一化的权重。正是保存下来的对数求和指数把重新计算出的分数块变成概率。",
    ),
    (
        r"recompute S with the scale: P = exp\(q kᵀ · scale − lse\); lse was computed from the scaled scores\.",
        "重新计算 S 时要乘上缩放系数：P = exp(q kᵀ · scale − lse)；lse 是由缩放后的分数算出来的。",
    ),
    (
        r"dq and dk have the wrong sign, dV is right: dS = P ∘ \(dP − D\), not P ∘ \(D − dP\)\.",
        "dq 和 dk 的符号反了，dV 是对的：dS = P ∘ (dP − D)，不是 P ∘ (D − dP)。",
    ),
    (
        r"you used 1/√D = (?P<usual>\S+) instead of the `scale` you were given \((?P<scale>\S+)\): use the "
        r"argument in P = exp\(q kᵀ · scale − lse\) and in dQ, dK \(MLA's scale, for one, is 1/√\(nope \+ rope\)\)\.",
        "你用的是 1/√D = {usual}，而不是传给你的 `scale`（{scale}）：在 P = exp(q kᵀ · scale − lse) 以及 dQ、dK "
        "中都要用这个参数（比如 MLA 的缩放就是 1/√(nope + rope)）。",
    ),
    (
        r"dQ and dK miss the factor scale: S = q kᵀ · scale, so dQ = dS k · scale and dK = dSᵀ q · scale\.",
        "dQ 和 dK 漏了因子 scale：S = q kᵀ · scale，所以 dQ = dS k · scale，dK = dSᵀ q · scale。",
    ),
    (
        r"you swapped dq and dk: return \(dq, dk, dv\) in that order\.",
        "你把 dq 和 dk 弄反了：请按 (dq, dk, dv) 的顺序返回。",
    ),
    (
        r"dV = Pᵀ dO \(each key collects the gradient of every query that read it\), not P dO\.",
        "dV = Pᵀ dO（每个键收集所有读过它的查询的梯度），不是 P dO。",
    ),
    (r"(?P<wrong>d[qkv](?:, d[qkv])*) wrong\. (?P<hint>.+)", "{wrong} 不对。{hint!t}"),
    (
        r"dV is right, so P is: look at dS = P ∘ \(dP − D\) and the products with k and q\.",
        "dV 是对的，说明 P 没问题：检查 dS = P ∘ (dP − D) 以及与 k、q 的乘积。",
    ),
    (
        r"Start from dV = Pᵀ dO with P = exp\(q kᵀ · scale − lse\)\.",
        "先从 dV = Pᵀ dO 查起，其中 P = exp(q kᵀ · scale − lse)。",
    ),
    # ---- exercise 3: merge two partial results
    (
        r"return two tensors \(out, lse\); the merged lse is needed to merge again\.",
        "请返回两个张量 (out, lse)；以后再合并时还要用到合并后的 lse。",
    ),
    (r"return \(out, lse\), got (?P<type>[\w.]+)\.", "请返回 (out, lse)，你返回的是 {type}。"),
    (
        r"NaN for the query that saw no key: with both lse = -inf, lse_a − max = \(−inf\) − \(−inf\) = NaN, the bug "
        r"of logsumexp over all −inf \(e\.g\. JuliaStats/StatsFuns\.jl #22\)\. Use 0 as the reference there: "
        r"out 0, lse −inf\.",
        "没看到任何键的那个查询得到了 NaN：两个 lse 都是 -inf 时，lse_a − max = (−inf) − (−inf) = NaN，"
        "这是对全为 −inf 的输入求 logsumexp 的经典 bug（例如 JuliaStats/StatsFuns.jl #22）。"
        "在这种行上用 0 作参考值：out 为 0，lse 为 −inf。",
    ),
    (
        r"exp\(lse\) overflows to inf at lse = 800: subtract m = max\(lse_a, lse_b\) first, weights "
        r"exp\(lse_a − m\) and exp\(lse_b − m\)\.",
        "lse = 800 时 exp(lse) 上溢为 inf：先减去 m = max(lse_a, lse_b)，权重取 exp(lse_a − m) 和 exp(lse_b − m)。",
    ),
    (
        r"the merged lse is log\(e\^lse_a \+ e\^lse_b\) \(torch\.logaddexp\), not max\(lse_a, lse_b\): "
        r"both sets add to the normaliser\.",
        "合并后的 lse 是 log(e^lse_a + e^lse_b)（torch.logaddexp），不是 max(lse_a, lse_b)：两组键都要计入归一化因子。",
    ),
    (
        r"the merged lse is log\(e\^lse_a \+ e\^lse_b\), not lse_a \+ lse_b: adding logs multiplies the "
        r"normalisers \(asked and answered in zhuzilin/ring-flash-attention issue #20\)\.",
        "合并后的 lse 是 log(e^lse_a + e^lse_b)，不是 lse_a + lse_b：对数相加等于把两个归一化因子相乘"
        "（zhuzilin/ring-flash-attention issue #20 里有人问过，也有人解答过）。",
    ),
    (
        r"the merged lse is wrong: lse = log\(e\^lse_a \+ e\^lse_b\) = torch\.logaddexp\(lse_a, lse_b\)\.",
        "合并后的 lse 不对：lse = log(e^lse_a + e^lse_b) = torch.logaddexp(lse_a, lse_b)。",
    ),
    (
        r"a plain average of the two outputs: weight each by its share of the normaliser, exp\(lse_a − lse\) and "
        r"exp\(lse_b − lse\)\.",
        "你对两个输出做了简单平均：应按各自在归一化因子中所占的份额加权，即 exp(lse_a − lse) 和 exp(lse_b − lse)。",
    ),
    (
        r"the outputs are normalised averages: adding them double-counts\. Weight each by exp\(lse_x − lse\) "
        r"\(the two weights sum to 1\)\.",
        "两个输出都已经是归一化的加权平均：直接相加会重复计数。请给每个乘上 exp(lse_x − lse)（两个权重之和为 1）。",
    ),
    (
        r"weight by the normalisers e\^lse, not by the log-sum-exps themselves\.",
        "应该按归一化因子 e^lse 加权，而不是按对数求和指数本身。",
    ),
    (
        r"out is wrong: out = exp\(lse_a − lse\) · out_a \+ exp\(lse_b − lse\) · out_b\.",
        "out 不对：out = exp(lse_a − lse) · out_a + exp(lse_b − lse) · out_b。",
    ),
]
