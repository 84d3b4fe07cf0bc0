"""Chinese for notebook 11's sampling explorer (``attn_core/viz/sampling.py``): controls, labels, explanation line."""

from __future__ import annotations

from attn_core.i18n import exact

_NUMBER = r"[\d,.]+"

CATALOG = [
    *exact(
        {
            "top-k (0: off)": "top-k（0：关闭）",
            "top-p (1: off)": "top-p（1：关闭）",
            "temperature 1": "温度 1",
            "drawn from": "实际抽样分布",
            "cut": "被截掉",
            "off": "关闭",
            "probability (log scale)": "概率（对数坐标）",
        }
    ),
    (
        rf"(?P<left>{_NUMBER}) of (?P<vocab>{_NUMBER}) tokens can be drawn; the top token has p = (?P<top>{_NUMBER}) "
        rf"\(at temperature 1: (?P<top1>{_NUMBER})\); entropy (?P<bits>{_NUMBER}) bits \(as uncertain as a uniform "
        rf"choice among (?P<n>{_NUMBER}) tokens\)\.",
        "{vocab} 个词元中有 {left} 个可能被抽到；最可能的词元 p = {top}（温度 1 时：{top1}）；熵 {bits} 比特"
        "（相当于在 {n} 个词元中均匀地选一个）。",
    ),
    (
        r"temperature must be > 0 \(0 is greedy: always the top token\), got (?P<t>.+)\.",
        "温度必须 > 0（0 即贪心解码：总是取最可能的词元），当前为 {t}。",
    ),
    (r"top_k must be an int >= 0 \(0: off\), got (?P<k>.+)\.", "top_k 必须是 >= 0 的整数（0：关闭），当前为 {k}。"),
    (r"top_p must lie in \(0, 1\] \(1: off\), got (?P<p>.+)\.", "top_p 必须在 (0, 1] 之内（1：关闭），当前为 {p}。"),
]
