"""Chinese for the decoder head view of notebook 11 (``attn_core/viz/decoder_view.py``): the explanation line
of ``explain_decoder_heads`` and the messages of settings or prompts the view cannot draw.

Its controls ("prompt", "layer", "head", "scale") and the display row are labels of ``zh_viz``; the text in
the figure is in ``zh_viz_figures``. Token labels (``<bos>``), shares and numbers stay as the view printed them.
"""

from __future__ import annotations

from attn_core.i18n import exact
from attn_core.i18n.zh_viz import NUM

_PCT = r"\d+%"  # a share as the view prints it ({:.0%})
_BASE = r"(?:, RoPE base (?P<base>\S+))?"  # ", RoPE base 1e6" when the view knows the layer's RoPE base


def _base(match) -> str:
    return f"，RoPE 底数 {match['base']}" if match["base"] else ""


def _global(match, tr) -> str:
    return f"第 {match['layer']} 层是全局层（看到前面的所有词元{_base(match)}）"


def _local_fits(match, tr) -> str:
    return (
        f"第 {match['layer']} 层是局部层（滑动窗口 {match['window']}{_base(match)}）：这个提示词只有 {match['n']} 个"
        "词元，装得进窗口，所以它和全局层一样看到前面的所有词元"
    )


def _local_cut(match, tr) -> str:
    return (
        f"第 {match['layer']} 层是局部层（滑动窗口 {match['window']}{_base(match)}）："
        f"查询 i 只看到键 i−{match['w1']}..i"
    )


def _sink_shares(match, tr) -> str:
    shares = "、".join(match["shares"].split(", "))
    return (
        f"头 0–{match['last']} 分给 {match['first']} 的注意力依次为 {shares}"
        f"（对 {match['first']} 之后的 {match['q']} 个查询取平均）。"
    )


def _without_first(match, tr) -> str:
    magnified = match["mag"]
    if magnified.startswith("∞"):
        magnified = "∞ 倍（全为 0 的行仍然是 0）"
    first = match["first"]
    return (
        f"颜色：去掉 {first}，每行在其余键上重新归一化（除以该行 {first} 以外的份额，这里最小为 {match['smallest']}："
        f"那一行被放大了 {magnified}）；相对值，画在 0–1 上。"
    )


CATALOG = [
    # explain_decoder_heads: "L tokens; <layer kind>." + the shares + the colour scale
    (
        rf"(?P<n>{NUM}) tokens; (?P<kind>layer \d+ is (?:GLOBAL|LOCAL) .+?)\. "
        r"(?:(?P<shares>.+?\)\.) )?(?P<colours>Colours: .+)",
        "{n} 个词元；{kind!t}。{shares!t}{colours!t}",
    ),
    (rf"layer (?P<layer>\d+) is GLOBAL \(every earlier token{_BASE}\)", _global),
    (
        rf"layer (?P<layer>\d+) is LOCAL \(sliding window (?P<window>\d+){_BASE}\): this (?P<n>\d+)-token prompt "
        r"fits the window, so it sees every earlier token as a global layer would",
        _local_fits,
    ),
    (
        rf"layer (?P<layer>\d+) is LOCAL \(sliding window (?P<window>\d+){_BASE}\): "
        r"query i sees keys i−(?P<w1>\d+)\.\.i only",
        _local_cut,
    ),
    (
        rf"(?P<first>.+?) takes (?P<shares>{_PCT}(?:, {_PCT})*) of heads 0–(?P<last>\d+)'s attention "
        r"\(mean over the (?P<q>\d+) queries after (?P=first)\)\.",
        _sink_shares,
    ),
    (
        rf"head (?P<h>\d+) puts (?P<sink>{_PCT}) of its attention on (?P<first>.+?), (?P<prev>{_PCT}) on the "
        rf"previous token and (?P<self>{_PCT}) on itself \(mean over the (?P<q>\d+) queries after (?P=first)\)\.",
        "头 {h} 把 {sink} 的注意力放在 {first} 上，{prev} 放在前一个词元上，{self} 放在自身上"
        "（对 {first} 之后的 {q} 个查询取平均）。",
    ),
    (
        r"Colours: weights on a fixed 0–1 scale; hatched grey = masked\.",
        "颜色：权重画在固定的 0–1 色标上；灰色斜线 = 被掩码。",
    ),
    (
        rf"Colours: log scale from (?P<floor>{NUM}) \(smaller weights and zeros too\) to 1, so small weights show; "
        r"hatched grey = masked; values are not printed on this scale\.",
        "颜色：对数色标，从 {floor}（更小的权重和 0 也画成这个颜色）到 1，小权重也看得见；灰色斜线 = 被掩码；"
        "这个色标下不显示数值。",
    ),
    (
        rf"Colours: (?P<first>.+?) removed and each row renormalised over the other keys \(÷ its share off "
        rf"(?P=first), as small as (?P<smallest>{_PCT}) here: that row is magnified (?P<mag>.+)\); "
        r"relative, on 0–1\.",
        _without_first,
    ),
    # the choices of the head and scale dropdowns (the explorer translates labels; choices stay as in the code)
    *exact(
        {
            "all heads": "全部头",
            "fixed 0–1": "固定 0–1",
            "log 1e-4–1": "对数 1e-4–1",
            "without <bos>": "去掉 <bos>",
        }
    ),
    # notebook 11b's pattern table: the row names (printed through ac.localize)
    *exact({"<bos> sink": "<bos> 汇聚点", "previous": "前一词元", "itself": "自身"}),
    # ValueErrors the explorer shows as "Not possible: ..." (a prompt typed in, or maps passed in by hand)
    (r"type a prompt\.", "请输入提示词。"),
    (
        rf"the prompt is (?P<n>{NUM}) tokens; this view draws at most (?P<max>{NUM}): "
        r"shorten it, or build DecoderView\(lm, max_tokens=\.\.\.\)\.",
        "这个提示词有 {n} 个词元；这个视图最多画 {max} 个：请缩短提示词，或者构造 DecoderView(lm, max_tokens=...)。",
    ),
    (
        r"scale 'without_bos' needs at least one token after <bos>: type a prompt\.",
        "色标 'without_bos' 需要 <bos> 之后至少还有一个词元：请输入提示词。",
    ),
    (
        r"scale must be one of (?P<scales>\(.*\)), got (?P<scale>.+)\.",
        "scale 必须是 {scales} 之一，当前为 {scale}。",
    ),
    (
        rf"layer (?P<layer>.+?) does not exist; the maps hold layers 0\.\.(?P<last>{NUM})\.",
        "第 {layer} 层不存在；这些注意力图只有第 0..{last} 层。",
    ),
    (
        rf"head (?P<head>.+?) does not exist: use 'all' or 0\.\.(?P<last>{NUM})\.",
        "头 {head} 不存在：请用 'all' 或 0..{last}。",
    ),
    (
        r"a list of maps must hold one \(1, heads, L, L\) tensor per layer, got shapes (?P<shapes>.+)\.",
        "注意力图的列表必须每层一个 (1, heads, L, L) 张量，得到的形状是 {shapes}。",
    ),
    (
        r"maps must be \(layers, heads, L, L\) self-attention weights, got shape (?P<shape>.+)\.",
        "maps 必须是 (layers, heads, L, L) 的自注意力权重，得到的形状是 {shape}。",
    ),
    (
        rf"(?P<n>{NUM}) tokens given for maps over (?P<length>{NUM}) positions\.",
        "给了 {n} 个词元，但注意力图覆盖 {length} 个位置。",
    ),
    (
        rf"windows must give one entry per layer \((?P<n>{NUM})\), got (?P<got>{NUM})\.",
        "windows 必须每层给一项（{n} 项），得到的是 {got} 项。",
    ),
    (
        rf"layer (?P<layer>{NUM})'s maps are not attention weights \((?P<found>NaN or inf|values from \S+ to \S+); "
        r"weights lie in \[0, 1\]\): pass the softmax output, not the scores\.",
        "第 {layer} 层的图不是注意力权重（{found!t}；权重应在 [0, 1] 内）：请传入 softmax 的输出，而不是分数。",
    ),
    (r"NaN or inf", "含有 NaN 或 inf"),
    (r"values from (?P<low>\S+) to (?P<high>\S+)", "数值从 {low} 到 {high}"),
    (
        rf"layer (?P<layer>{NUM}) puts weight (?P<leak>{NUM}) on a masked cell \(a future key or one outside window "
        r"(?P<window>\S+)\): are these a causal decoder's maps, and are windows right\?",
        "第 {layer} 层在被掩码的格子上放了 {leak} 的权重（未来的键，或窗口 {window} 之外的键）："
        "这些真是因果解码器的注意力图吗？windows 设对了吗？",
    ),
]
