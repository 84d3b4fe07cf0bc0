"""Chinese for the interview gym's sink-softmax drill (``attn_core/exercises/drills_sinks.py``)."""

from __future__ import annotations

from attn_core.i18n import exact

CATALOG = [
    *exact({"check_sink_softmax": "check_sink_softmax"}),
    (
        r"NaN in the weights: exp overflowed\. Subtract each row's max \(over the scores and the sink\) first\.",
        "权重中出现了 NaN：exp 溢出了。先减去每一行的最大值（对分数和 sink 一起取最大值）。",
    ),
    (
        r"a fully masked row gives NaN: with a sink it must give zeros \(the sink takes all the mass\)\. "
        r"Take the max over the scores \*and\* the sink, or softmax over the scores with the sink appended\.",
        "全被掩码的行得到了 NaN：有 sink 时这一行应该全为 0（sink 拿走全部质量）。"
        "最大值要对分数*和* sink 一起取，或者把 sink 拼接到分数后面再做 softmax。",
    ),
    (
        r"each row sums to 1: the sink never took its share\. Add e\^sink to the denominator: "
        r"weights = e\^s / \(Σ e\^s \+ e\^sink\)\.",
        "每一行的和都是 1：sink 没有分走它的那一份。把 e^sink 加到分母上：weights = e^s / (Σ e^s + e^sink)。",
    ),
    (
        r"the sink is a logit: it enters the denominator as e\^sink, not e\^\(e\^sink\)\.",
        "sink 是一个 logit：它以 e^sink 的形式进入分母，而不是 e^(e^sink)。",
    ),
    (
        r"the sink's sign is flipped: the denominator gets e\^\(\+sink\)\.",
        "sink 的符号反了：分母中应为 e^(+sink)。",
    ),
    (
        r"you subtracted the row max from the scores but not from the sink: use e\^\(sink - m\) in the denominator\.",
        "你从分数中减去了行最大值，却没有从 sink 中减去：分母里要用 e^(sink - m)。",
    ),
    (
        r"the weights differ from e\^s / \(Σ_j e\^s_j \+ e\^sink\) per head\.",
        "权重与逐头的 e^s / (Σ_j e^s_j + e^sink) 不一致。",
    ),
    (
        r"return the weights as a tensor, got (?P<type>[\w.]+)\.",
        "请把权重以张量返回，你返回的是 {type}。",
    ),
    (
        r"drop the sink's column: it has no value, return weights of shape \(H, Lq, Lk\)\.",
        "去掉 sink 那一列：它没有对应的值，请返回形状为 (H, Lq, Lk) 的权重。",
    ),
    (
        r"the weights must have the shape of scores (?P<shape>\(.*?\))\.",
        "权重的形状必须与分数相同 {shape}。",
    ),
]
