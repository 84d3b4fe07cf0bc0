"""Chinese for notebook 16's safe-softmax and RMSNorm drills (``attn_core/exercises/handwrite_norms.py``)."""

from __future__ import annotations

from attn_core.i18n import exact

NUM = r"[−-]?\d[\d.]*(?:e[+-]?\d+)?"

CATALOG = [
    *exact({"check_safe_softmax": "check_safe_softmax", "check_rms_norm": "check_rms_norm"}),
    (
        r"return (?P<what>the weights|the normalised x) as a tensor of shape (?P<shape>\(.*?\)), "
        r"got (?P<type>[\w.]+)\.",
        "请把结果以形状为 {shape} 的张量返回，你返回的是 {type}。",
    ),
    (
        r"(?P<what>the weights|the normalised x) must keep the input's shape (?P<shape>\(.*?\)), "
        r"got (?P<got>\(.*?\))\.",
        "结果必须保持输入的形状 {shape}，你得到的是 {got}。",
    ),
    (
        r"you ignored `dim`: with dim=(?P<dim>-?\d+) the weights must sum to 1 along dim (?P<again>-?\d+)\.",
        "你忽略了 `dim`：dim={dim} 时，权重应沿第 {again} 维求和为 1。",
    ),
    (
        r"the weights do not sum to 1 along dim=(?P<dim>-?\d+): normalise over that dimension\.",
        "权重沿 dim={dim} 的和不是 1：请在这个维度上归一化。",
    ),
    (
        rf"the weights differ from torch\.softmax by up to (?P<error>{NUM}) \(dim=(?P<dim>-?\d+)\)\.",
        "权重与 torch.softmax 最多相差 {error}（dim={dim}）。",
    ),
    (
        r"NaN or inf for scores near 1000: exp overflowed\. Subtract each row's max before exp "
        r"\(softmax\(s\) = softmax\(s - max\(s\)\), and exp\(s - max\) <= 1\)\.",
        "分数接近 1000 时出现 NaN 或 inf：exp 溢出了。先减去每行的最大值再取 exp"
        "（softmax(s) = softmax(s - max(s))，而且 exp(s - max) <= 1）。",
    ),
    (
        rf"for scores near 1000 the weights differ from torch\.softmax by up to (?P<error>{NUM})\.",
        "分数接近 1000 时，权重与 torch.softmax 最多相差 {error}。",
    ),
    (
        r"a row 1000 below another one gives NaN or wrong weights: subtract the max of each row "
        r"\(amax\(dim, keepdim=True\)\), not the max of the whole tensor, whose exp underflows to 0/0 there\.",
        "某一行比另一行低 1000 时得到 NaN 或错误的权重：要减去每一行的最大值（amax(dim, keepdim=True)），"
        "而不是整个张量的最大值，否则那一行的 exp 下溢成 0/0。",
    ),
    (
        r"you subtracted the mean: that is LayerNorm\. RMSNorm only divides by sqrt\(mean\(x²\) \+ eps\)\.",
        "你减去了均值：那是 LayerNorm。RMSNorm 只除以 sqrt(mean(x²) + eps)。",
    ),
    (
        r"you used the sum of x², not its mean: the result is √d times too small\.",
        "你用的是 x² 的和，而不是均值：结果小了 √d 倍。",
    ),
    (
        r"eps goes inside the square root: x / sqrt\(mean\(x²\) \+ eps\), not x / \(sqrt\(mean\(x²\)\) \+ eps\)\.",
        "eps 要放在平方根里面：x / sqrt(mean(x²) + eps)，而不是 x / (sqrt(mean(x²)) + eps)。",
    ),
    (
        r"add eps inside the square root: without it a quiet token is over-amplified and a zero one gives 0/0\.",
        "请在平方根里加上 eps：没有它，幅度很小的词元会被过度放大，全零的词元则得到 0/0。",
    ),
    (r"multiply by `weight`, the learned per-feature scale\.", "请乘以 `weight`，即每个特征学到的缩放系数。"),
    (
        r"you multiplied by \(1 \+ weight\): that is Gemma's RMSNorm; the usual one multiplies by weight\.",
        "你乘的是 (1 + weight)：那是 Gemma 的 RMSNorm；通常的 RMSNorm 乘的是 weight。",
    ),
    (
        r"take the mean over the last dimension \(the features of each token\), not over the batch\.",
        "均值要沿最后一维（每个词元的特征）求，而不是沿批量维。",
    ),
    (
        rf"the result differs from torch\.nn\.functional\.rms_norm by up to (?P<error>{NUM})\.",
        "结果与 torch.nn.functional.rms_norm 最多相差 {error}。",
    ),
    (
        r"an all-zero row gives NaN: add eps inside the square root \(0 / sqrt\(0 \+ eps\) = 0\)\.",
        "全零的行得到 NaN：请在平方根里加上 eps（0 / sqrt(0 + eps) = 0）。",
    ),
]
