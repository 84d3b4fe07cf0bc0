"""Chinese for the graders of notebook 01 (``attn_core/exercises/sdpa.py``).

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). The
variable parts (shapes, numbers, type names) are named groups and stay as the grader printed them.
"""

from __future__ import annotations

import re

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 3, 8), (5,), ()
_WHERE = rf"for q (?P<q>{_SHAPE}), k (?P<k>{_SHAPE}), v (?P<v>{_SHAPE})"
_WHERE_ZH = "（q 为 {q}，k 为 {k}，v 为 {v}）"  # after "形状不对" / "数值不对"
_SOFTMAX = r"softmax\(q @ k\.transpose\(-2, -1\) / √d_k, dim=-1\)"


def _pair_element(match: re.Match, tr) -> str:
    """The pair check's message about one element that is not a tensor (with the F.sdpa hint or not)."""
    position = {"output": "第一个元素（output）", "weights": "第二个元素（weights）"}[match["position"]]
    text = f"请返回由两个张量组成的元组 (output, weights)：你返回的{position}是 {match['type']}，不是张量。"
    if match["hint"]:
        text += (
            "（F.scaled_dot_product_attention 只返回输出：权重要自己算，"
            "softmax(q @ k.transpose(-2, -1) / √d_k, dim=-1)。）"
        )
    return text


def _rescaled_rows(match: re.Match, tr) -> str:
    """Every row sums to the same c != 1 (and c may be 1/√d_k)."""
    which = " = 1/√d_k" if match["which"] else ""
    return (
        f"你的权重每一行的和都是 {match['c']}{which}，而不是 1：你在 softmax 之后才做缩放。"
        "缩放是除在分数上的，要在 softmax 之前：softmax(q @ k.transpose(-2, -1) / √d_k, dim=-1)。"
    )


CATALOG = [
    # the names of the four checks (the start of every verdict line)
    *exact(
        {
            "attention from scratch": "从零实现注意力",
            "variance of q·k": "q·k 的方差",
            "fused QKV split": "拆分融合的 QKV 投影",
            "temperature": "温度",
        }
    ),
    # ---- exercise 1: attention from a blank function
    (
        r"return a tuple \(output, weights\) of two tensors, got (?P<type>[\w.]+) instead\.",
        "请返回由两个张量组成的元组 (output, weights)，你返回的是 {type}。",
    ),
    (
        r"return a tuple \(output, weights\) of two tensors: your (?P<position>output|weights) element is a "
        r"(?P<type>[\w.]+), not a tensor\.(?P<hint> \(F\.scaled_dot_product_attention returns the output only: "
        rf"compute the weights yourself, {_SOFTMAX}\.\))?",
        _pair_element,
    ),
    (
        rf"did you return \(weights, output\)\? {_WHERE} your first tensor has the weights' shape "
        rf"\(\.\.\., Lq, Lk\) = (?P<shape>{_SHAPE}): return \(output, weights\), output first\.",
        "你是不是返回了 (weights, output)？当 q 为 {q}、k 为 {k}、v 为 {v} 时，"
        "你的第一个张量具有权重的形状 (..., Lq, Lk) = {shape}："
        "请返回 (output, weights)，输出在前。",
    ),
    (
        rf"wrong shape: weights (?P<shape>{_SHAPE}) {_WHERE} is \(\.\.\., Lk, Lq\), transposed: "
        r"the scores are Q Kᵀ = q @ k\.transpose\(-2, -1\), one row per query\.",
        "形状不对" + _WHERE_ZH + "：权重 {shape} 是 (..., Lk, Lq)，转置了："
        "分数是 Q Kᵀ = q @ k.transpose(-2, -1)，每个查询一行。",
    ),
    (
        rf"wrong shape: weights (?P<shape>{_SHAPE}) {_WHERE}; expected \(\.\.\., Lq, Lk\) = "
        rf"(?P<expected>{_SHAPE}), one row per query, one column per key\.",
        "形状不对" + _WHERE_ZH + "：权重为 {shape}；应为 (..., Lq, Lk) = {expected}，每个查询一行，每个键一列。",
    ),
    (
        rf"wrong shape: output (?P<shape>{_SHAPE}) {_WHERE}; expected \(\.\.\., Lq, d_v\) = "
        rf"(?P<expected>{_SHAPE}): each query gets a mix of the value vectors\.",
        "形状不对" + _WHERE_ZH + "：输出为 {shape}；应为 (..., Lq, d_v) = {expected}：每个查询得到的是值向量的混合。",
    ),
    (
        rf"wrong numbers {_WHERE}: (?P<diagnosis>.*)",
        "数值不对" + _WHERE_ZH + "：{diagnosis!t}",
    ),
    (
        rf"the weights are right but the output is not {_WHERE}: output = weights @ v "
        r"\(weights \(\.\.\., Lq, Lk\) times values \(\.\.\., Lk, d_v\)\)\.",
        "权重对了，输出却不对" + _WHERE_ZH + "：output = weights @ v（权重 (..., Lq, Lk) 乘以值 (..., Lk, d_v)）。",
    ),
    # what is wrong with the weights (after "wrong numbers ...: ")
    (
        r"the weights' columns sum to 1, not their rows: softmax ran over the queries \(dim=-2\)\. "
        r"Each query shares one unit of attention among the keys: use softmax\(\.\.\., dim=-1\)\.",
        "权重的每一列和为 1，而不是每一行：softmax 是在查询上做的（dim=-2）。"
        "每个查询把一个单位的注意力分给各个键：请用 softmax(..., dim=-1)。",
    ),
    (
        r"every row of your weights sums to (?P<c>[-\d.]+)(?P<which> = 1/√d_k)?, not 1: you scaled after the "
        rf"softmax\. The scale divides the scores, before the softmax: {_SOFTMAX}\.",
        _rescaled_rows,
    ),
    (
        r"the rows of your weights do not sum to 1 \(first row sums to (?P<c>.+?)\): "
        r"apply softmax over the keys \(dim=-1\)\.",
        "你的权重各行的和不是 1（第一行的和为 {c}）：请在键上做 softmax（dim=-1）。",
    ),
    (
        r"no scale at all: the scores must be divided by √d_k before the softmax\.",
        "完全没有缩放：分数在 softmax 之前必须除以 √d_k。",
    ),
    (
        r"you divided by d_k; divide by √d_k \(math\.sqrt\(q\.shape\[-1\]\)\)\.",
        "你除以的是 d_k；应该除以 √d_k（math.sqrt(q.shape[-1])）。",
    ),
    (
        r"you multiplied by √d_k; divide by it instead\.",
        "你乘了 √d_k；应该除以它。",
    ),
    (
        r"you divided by √d_v \(v\.shape\[-1\] = (?P<d_v>\d+)\); the scale belongs to the dot products q·k, "
        r"so it is √d_k \(q\.shape\[-1\] = (?P<d_k>\d+)\)\.",
        "你除以的是 √d_v（v.shape[-1] = {d_v}）；缩放针对的是点积 q·k，所以应该是 √d_k（q.shape[-1] = {d_k}）。",
    ),
    (
        r"the weights differ from softmax\(Q Kᵀ / √d_k\) \(largest difference (?P<diff>.+?)\)\.",
        "权重与 softmax(Q Kᵀ / √d_k) 不一致（最大差值 {diff}）。",
    ),
    # ---- exercise 2: the variance of a score
    (
        r"return a number, got (?P<type>[\w.]+)\.",
        "请返回一个数，你返回的是 {type}。",
    ),
    (
        r"close, but not exact \(a simulation estimate\?\): give the exact formula in d_k and std\.",
        "很接近，但不精确（是模拟出来的估计值吗？）：请给出用 d_k 和 std 表示的精确公式。",
    ),
    (
        r"that is the standard deviation of q·k; the variance is its square\.",
        "这是 q·k 的标准差；方差是它的平方。",
    ),
    (
        r"each product q_i·k_i of two independent zero-mean entries has variance std²·std² = std⁴, not std²; "
        r"the d_k products add up\.",
        "两个相互独立、均值为零的分量之积 q_i·k_i 的方差是 std²·std² = std⁴，而不是 std²；d_k 个乘积的方差相加。",
    ),
    (
        r"scaled=True must change the answer: dividing q·k by √d_k divides its variance\.",
        "scaled=True 时答案必须改变：把 q·k 除以 √d_k，它的方差也会被除。",
    ),
    (
        r"multiplying a random number by c multiplies its variance by c², so dividing q·k by √d_k divides the "
        r"variance by d_k, not by √d_k\.",
        "随机数乘以 c，方差就乘以 c²，所以把 q·k 除以 √d_k，方差要除以 d_k，而不是除以 √d_k。",
    ),
    (
        r"for d_k=(?P<d_k>\d+), std=(?P<std>\S+), scaled=(?P<scaled>True|False) you return (?P<got>.+?); "
        r"hint: q·k is a sum of d_k independent products q_i·k_i\.",
        "当 d_k={d_k}、std={std}、scaled={scaled} 时，你返回的是 {got}；"
        "提示：q·k 是 d_k 个相互独立的乘积 q_i·k_i 之和。",
    ),
    # ---- exercise 3: split a fused QKV projection
    (
        r"your function changed the fused layer's parameters; read them, do not modify them\.",
        "你的函数改动了融合层的参数；只能读取，不要修改。",
    ),
    (
        r"return three layers \(q_proj, k_proj, v_proj\), got (?P<type>[\w.]+)\.",
        "请返回三个层 (q_proj, k_proj, v_proj)，你返回的是 {type}。",
    ),
    (
        r"(?P<label>[qkv])_proj is a (?P<type>[\w.]+); return layers \(nn\.Linear\(d, d\)\) that can be called\.",
        "{label}_proj 是一个 {type}；请返回可以调用的层（nn.Linear(d, d)）。",
    ),
    (
        rf"calling (?P<label>[qkv])_proj on x (?P<shape>{_SHAPE}) raised (?P<type>[\w.]+): (?P<error>.*)",
        "在形状为 {shape} 的 x 上调用 {label}_proj 时抛出了 {type}：{error!o}",
    ),
    (
        r"wrong shape: (?P<label>[qkv])_proj\(x\) has shape (?P<shape>.+?), expected (?P<expected>.+?)\. "
        r"nn\.Linear stores weight as \(out_features, in_features\) = \((?P<rows>\d+), (?P<cols>\d+)\): "
        r"split it along dim 0\.",
        "形状不对：{label}_proj(x) 的形状为 {shape}，应为 {expected}。"
        "nn.Linear 的权重存为 (out_features, in_features) = ({rows}, {cols})：请沿 dim 0 切分。",
    ),
    (
        r"wrong order: your (?P<mine>[qkv])_proj reproduces the fused layer's (?P<theirs>[qkv]) chunk\. "
        r"The fused output is laid out \[q \| k \| v\]: rows 0\.\.d-1 of the weight are q, then k, then v\.",
        "顺序不对：你的 {mine}_proj 复现的是融合层的 {theirs} 那一块。"
        "融合输出的布局是 [q | k | v]：权重的第 0..d-1 行是 q，接着是 k，然后是 v。",
    ),
    (
        r"the weights are right but the biases are missing: split fused\.bias the same way\.",
        "权重对了，但缺了偏置：请用同样的方式切分 fused.bias。",
    ),
    (
        r"you took every third row \(interleaved\); chunk\(3, dim=0\) takes three contiguous blocks of d rows\.",
        "你每隔两行取一行（交错切分）；chunk(3, dim=0) 取的是三块连续的、各 d 行的块。",
    ),
    (
        r"q_proj\(x\), k_proj\(x\), v_proj\(x\) differ from fused\(x\)\.chunk\(3, dim=-1\) "
        r"\(largest difference (?P<diff>.+?)\)\.",
        "q_proj(x)、k_proj(x)、v_proj(x) 与 fused(x).chunk(3, dim=-1) 不一致（最大差值 {diff}）。",
    ),
    # ---- exercise 4: a temperature
    (
        r"give the temperature as one number, got (?P<type>[\w.]+)\.",
        "请把温度写成一个数，你给的是 {type}。",
    ),
    (
        r"a temperature must be a positive finite number, got (?P<value>\S+)\.",
        "温度必须是一个有限的正数，你给的是 {value}。",
    ),
    (
        r"at T=(?P<t>\S+) the top weight is (?P<top>\S+): too flat, lower the temperature to sharpen the row\.",
        "T={t} 时最大权重为 {top}：太平了，请降低温度，让这一行更尖锐。",
    ),
    (
        r"at T=(?P<t>\S+) the top weight is (?P<top>\S+): too sharp, raise the temperature a little\.",
        "T={t} 时最大权重为 {top}：太尖锐了，请把温度调高一点。",
    ),
]
