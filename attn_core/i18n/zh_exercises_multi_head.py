"""Chinese for the graders of notebook 02 (``attn_core/exercises/multi_head.py``).

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). The
variable parts (shapes, numbers, type names) are named groups and stay as the grader printed them.
"""

from __future__ import annotations

import re

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 3, 8), (5,), ()
_CASES = {  # the three cases of check_mha_forward, printed in brackets before the diagnosis
    "self-attention, no mask": "自注意力，无掩码",
    "self-attention, causal mask (L, L)": "自注意力，因果掩码 (L, L)",
    "cross-attention, context padding mask (B, 1, 1, Lk)": "交叉注意力，上下文填充掩码 (B, 1, 1, Lk)",
}
_CONFIG = r"hidden_dim=(?P<hidden>\d+), num_heads=(?P<heads>\d+), bias=(?P<bias>True|False)"
_CONFIG_ZH = "当 hidden_dim={hidden}、num_heads={heads}、bias={bias} 时，"
_CONFIG_BIAS = _CONFIG.replace("True|False", "True")
_CONFIG_NO_BIAS = _CONFIG.replace("True|False", "False")
_CONTEXT_HINT = (
    r" Hint: queries come from x \(Lq=(?P<lq>\d+)\), keys and values from `context` \(Lk=(?P<lk>\d+)\); "
    r"the scores and the mask are \(B, H, Lq, Lk\)\."
)


def _in_case(match: re.Match, tr) -> str:
    """``[case] problem`` (+ the cross-attention hint when the learner's function crashed on a context)."""
    text = f"[{_CASES[match['case']]}] {tr(match['problem'])}"
    if match["hint"]:
        text += (
            f" 提示：查询来自 x（Lq={match['lq']}），键和值来自 `context`（Lk={match['lk']}）；"
            "分数和掩码的形状都是 (B, H, Lq, Lk)。"
        )
    return text


CATALOG = [
    # the names of the four checks are the learner's function names: they stay as they are
    *exact({name: name for name in ("split_heads", "merge_heads", "mha_param_count", "mha_forward")}),
    # ---- shared: a crash of `.view` after a transpose, a result that is not a tensor
    (
        r"your function raised RuntimeError: (?P<error>view size is not compatible.*) `\.view` needs a contiguous "
        r"tensor, and `transpose` only swaps strides\. Use `\.reshape\(\.\.\.\)` or `\.contiguous\(\)\.view\(\.\.\.\)` "
        r"after the transpose\.",
        "你的函数抛出了 RuntimeError：{error} `.view` 需要连续的张量，而 `transpose` 只交换步长。"
        "请在转置之后用 `.reshape(...)` 或 `.contiguous().view(...)`。",
    ),
    (
        r"(?P<what>split_heads\(x, num_heads\)|merge_heads\(t\)|mha_forward\(\.\.\.\)) should be a torch\.Tensor, "
        r"got (?P<type>[\w.]+)\.",
        "{what} 应当返回 torch.Tensor，你返回的是 {type}。",
    ),
    # ---- exercises 1 and 2: split_heads / merge_heads ("for {config}")
    (
        rf"x of shape (?P<shape>{_SHAPE}) with num_heads=(?P<heads>\d+)",
        "形状为 {shape}、num_heads={heads} 的 x",
    ),
    (
        rf"t of shape \(B, H, L, head_dim\) = (?P<shape>{_SHAPE})",
        "形状为 (B, H, L, head_dim) = {shape} 的 t",
    ),
    (
        rf"wrong shape for (?P<config>x of .+?): got \(B, L, H, head_dim\) = (?P<got>{_SHAPE})\. That is the `\.view` "
        r"step; now `\.transpose\(1, 2\)` to bring the heads before the length\.",
        "对{config!t}，形状不对：得到的是 (B, L, H, head_dim) = {got}。"
        "这只是 `.view` 那一步；接下来用 `.transpose(1, 2)` 把头轴挪到长度轴前面。",
    ),
    (
        rf"wrong shape for (?P<config>x of .+?): expected \(B, H, L, head_dim\) = (?P<expected>{_SHAPE}), "
        rf"got (?P<got>{_SHAPE})\.",
        "对{config!t}，形状不对：应为 (B, H, L, head_dim) = {expected}，得到的是 {got}。",
    ),
    (
        r"right shape, wrong numbers for (?P<config>x of .+?): you reshaped straight to \(B, H, L, head_dim\), "
        r"which cuts the \*sequence\* into heads\. A head is a block of \*features\* of every token: view as "
        r"\(B, L, H, head_dim\) first, then transpose\(1, 2\)\.",
        "对{config!t}，形状对了，数值不对：你直接 reshape 成了 (B, H, L, head_dim)，这是把*序列*切成了各个头。"
        "一个头是每个词元的一块*特征*：先 view 成 (B, L, H, head_dim)，再 transpose(1, 2)。",
    ),
    (
        r"right shape, wrong numbers for (?P<config>x of .+?): head h got every H-th feature \(a strided slice\)\. "
        r"Head h owns the contiguous block of features h·head_dim \.\. \(h\+1\)·head_dim - 1: view as "
        r"\(B, L, H, head_dim\), not \(B, L, head_dim, H\)\.",
        "对{config!t}，形状对了，数值不对：头 h 拿到的是每隔 H 个取一个的特征（跨步切片）。"
        "头 h 拥有的是连续的一块特征 h·head_dim .. (h+1)·head_dim - 1：请 view 成 (B, L, H, head_dim)，"
        "而不是 (B, L, head_dim, H)。",
    ),
    (
        r"right shape, wrong numbers for (?P<config>x of .+?): element \[0, 1, 0, :\] should be (?P<value>\[.*\])\.",
        "对{config!t}，形状对了，数值不对：元素 [0, 1, 0, :] 应为 {value}。",
    ),
    (
        rf"wrong shape for (?P<config>t of .+?): got \(B, L, H, head_dim\) = (?P<got>{_SHAPE})\. Concatenate the "
        r"heads: flatten the last two dims into hidden = H·head_dim\.",
        "对{config!t}，形状不对：得到的是 (B, L, H, head_dim) = {got}。"
        "请把各头拼接起来：把最后两维展平成 hidden = H·head_dim。",
    ),
    (
        rf"wrong shape for (?P<config>t of .+?): expected \(B, L, hidden\) = (?P<expected>{_SHAPE}), "
        rf"got (?P<got>{_SHAPE})\.",
        "对{config!t}，形状不对：应为 (B, L, hidden) = {expected}，得到的是 {got}。",
    ),
    (
        r"right shape, wrong numbers for (?P<config>t of .+?): you reshaped \(B, H, L, head_dim\) straight to "
        r"\(B, L, hidden\) without transposing back, so one output token mixes rows of different tokens\. "
        r"transpose\(1, 2\) first, then reshape\.",
        "对{config!t}，形状对了，数值不对：你没有先转置回来，就把 (B, H, L, head_dim) 直接 reshape 成了 "
        "(B, L, hidden)，于是一个输出词元混进了不同词元的行。请先 transpose(1, 2)，再 reshape。",
    ),
    (
        r"right shape, wrong numbers for (?P<config>t of .+?): token 0 should be (?P<value>\[.*\])\.",
        "对{config!t}，形状对了，数值不对：词元 0 应为 {value}。",
    ),
    # ---- exercise 3: the parameter count ("for {config}")
    (
        r"mha_param_count should return a whole number, got (?P<type>[\w.]+)\.",
        "mha_param_count 应当返回一个整数，你返回的是 {type}。",
    ),
    (
        r"a parameter count is a whole number, got (?P<value>.+)\.",
        "参数个数是整数，你返回的是 {value}。",
    ),
    (
        rf"for {_CONFIG} you return (?P<got>-?\d+), but "
        r"(?P<one>-?\d+) with num_heads=1\. The count does not depend on num_heads: heads split the hidden_dim "
        r"features, they add no parameters\.",
        _CONFIG_ZH + "你返回 {got}，而 num_heads=1 时返回 {one}。参数个数与 num_heads 无关："
        "各个头只是瓜分 hidden_dim 个特征，并不增加参数。",
    ),
    (
        rf"for {_CONFIG_BIAS} you return (?P<got>-?\d+) = 4·d², the weights "
        r"only: add the 4 bias vectors \(4·d\)\.",
        _CONFIG_ZH + "你返回 {got} = 4·d²，只算了权重：请加上 4 个偏置向量（4·d）。",
    ),
    (
        rf"for {_CONFIG_NO_BIAS} you return (?P<got>-?\d+), which counts "
        r"biases; with bias=False there are none \(4·d²\)\.",
        _CONFIG_ZH + "你返回 {got}，把偏置也算进去了；bias=False 时没有偏置（4·d²）。",
    ),
    (
        rf"for {_CONFIG} you return (?P<got>-?\d+): that is "
        r"Q, K, V only\. The output projection W_O \(d·d weights \+ d bias\) is a parameter matrix too\.",
        _CONFIG_ZH + "你返回 {got}：这只算了 Q、K、V。输出投影 W_O（d·d 个权重 + d 个偏置）也是参数矩阵。",
    ),
    (
        rf"for {_CONFIG} expected (?P<expected>-?\d+), "
        r"got (?P<got>-?\d+)\. Count the 4 projections \(Q, K, V, O\): d·d weights \+ d bias each\.",
        _CONFIG_ZH + "应为 {expected}，你返回的是 {got}。请数清 4 个投影（Q、K、V、O）：各有 d·d 个权重 + d 个偏置。",
    ),
    # ---- exercise 4: the forward pass ("[case] problem")
    (
        r"\[(?P<case>" + "|".join(map(re.escape, _CASES)) + r")\] (?P<problem>.*?)(?P<hint>" + _CONTEXT_HINT + ")?",
        _in_case,
    ),
    (
        rf"got \(B, H, Lq, head_dim\) = (?P<got>{_SHAPE}): merge the heads and apply layer\.o_proj\.",
        "得到的是 (B, H, Lq, head_dim) = {got}：请合并各头，再作用 layer.o_proj。",
    ),
    (
        rf"got (?P<got>{_SHAPE}): the output has one row per \*query\* \(x\), Lq=(?P<lq>\d+), not per context "
        r"token \(Lk=(?P<lk>\d+)\)\.",
        "得到的是 {got}：输出是每个*查询*（x）一行，共 Lq={lq} 行，而不是每个上下文词元一行（Lk={lk}）。",
    ),
    (
        rf"expected shape \(B, Lq, hidden\) = (?P<expected>{_SHAPE}), got (?P<got>{_SHAPE})\.",
        "形状应为 (B, Lq, hidden) = {expected}，得到的是 {got}。",
    ),
    (
        r"the scores are scaled by 1/√hidden_dim; the scale is per head: 1/√head_dim "
        r"\(= 1/√(?P<head_dim>\d+), not 1/√(?P<hidden>\d+)\)\.",
        "分数按 1/√hidden_dim 缩放了；缩放是按头算的：1/√head_dim（= 1/√{head_dim}，而不是 1/√{hidden}）。",
    ),
    (
        r"the 1/√head_dim scale is missing\.",
        "缺少 1/√head_dim 的缩放。",
    ),
    (
        r"the values come from layer\.k_proj; use layer\.v_proj \(every shape is right, only a reference catches "
        r"this\)\.",
        "值来自 layer.k_proj；应该用 layer.v_proj（所有形状都对，只有与参考实现对比才能发现）。",
    ),
    (
        r"the output projection layer\.o_proj is missing\.",
        "缺少输出投影 layer.o_proj。",
    ),
    (
        r"heads were split with one reshape to \(B, H, L, head_dim\); view as \(B, L, H, head_dim\), then "
        r"transpose\(1, 2\)\.",
        "拆分头时直接 reshape 成了 (B, H, L, head_dim)；应先 view 成 (B, L, H, head_dim)，再 transpose(1, 2)。",
    ),
    (
        r"heads were merged with one reshape of \(B, H, Lq, head_dim\) to \(B, Lq, hidden\), without transposing "
        r"back, so one output row mixes different tokens: transpose\(1, 2\), then reshape\.",
        "合并头时没有先转置回来，就把 (B, H, Lq, head_dim) 直接 reshape 成了 (B, Lq, hidden)，"
        "于是一个输出行混进了不同的词元：请先 transpose(1, 2)，再 reshape。",
    ),
    (
        r"the mask is ignored: blocked positions \(False\) must get weight 0\.",
        "掩码被忽略了：被屏蔽的位置（False）的权重必须为 0。",
    ),
    (
        r"you multiplied the scores by the mask: a blocked score becomes 0, and softmax still gives it weight "
        r"e\^0 > 0\. Fill blocked scores with -inf instead: scores\.masked_fill\(~mask, float\('-inf'\)\)\.",
        "你把分数乘以了掩码：被屏蔽的分数变成 0，而 softmax 仍会给它 e^0 > 0 的权重。"
        "应该把被屏蔽的分数填成 -inf：scores.masked_fill(~mask, float('-inf'))。",
    ),
    (
        r"you zeroed the blocked weights after the softmax, so the rows no longer sum to 1\. Mask the scores before "
        r"the softmax: scores\.masked_fill\(~mask, float\('-inf'\)\), then softmax\.",
        "你在 softmax 之后才把被屏蔽的权重置零，于是各行的和不再是 1。"
        "请在 softmax 之前对分数加掩码：scores.masked_fill(~mask, float('-inf'))，再做 softmax。",
    ),
    (
        r"keys and values came from x; in cross-attention they come from `context` \(queries from x\)\.",
        "键和值来自 x；在交叉注意力中它们应来自 `context`（查询来自 x）。",
    ),
    (
        r"the mask convention is flipped: in attn_core True = may attend, so fill the scores where the mask is "
        r"False \(`scores\.masked_fill\(~mask, -inf\)`\), not where it is True\.",
        "掩码约定反了：在 attn_core 中 True = 允许关注，所以要在掩码为 False 的位置填充分数"
        "（`scores.masked_fill(~mask, -inf)`），而不是在 True 的位置。",
    ),
    (
        r"the output contains NaN: did a query row end up with every key masked\?",
        "输出中有 NaN：是不是某个查询行的所有键都被屏蔽了？",
    ),
    (
        r"right shape, wrong numbers: largest difference from the reference is (?P<diff>.+?)\.",
        "形状对了，数值不对：与参考实现的最大差值为 {diff}。",
    ),
]
