"""Chinese for the graders of notebooks 11 and 11b in ``attn_core/exercises/decoder_maps.py``.

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). A message is
"where: problem"; the where part (the shape and dtype of the input, p, the generated ids, the penalty) and the
problem are matched separately (``{…!t}``). Shapes, lists, numbers and type names stay as the grader printed them.
The shape and dtype problems shared with ``decoder.py`` are translated there.
"""

from __future__ import annotations

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 12), (5,), ()
_IDS = r"\[\[.*?\]\]"  # generated ids as tolist() prints them: [[1, 4], [0, 2]]

CATALOG = [
    *exact({"top-p filtering": "top-p 过滤", "repetition penalty": "重复惩罚", "first-token share": "首词元占比"}),
    # ---- where
    (
        rf"probs (?P<shape>{_SHAPE}) (?P<dtype>[\w.]+), p (?P<p>\S+): (?P<problem>.+)",
        "probs 为 {shape} {dtype}、p 为 {p} 时：{problem!t}",
    ),
    (
        rf"logits (?P<shape>{_SHAPE}) (?P<dtype>[\w.]+), generated (?P<ids>{_IDS}), penalty (?P<penalty>\S+): "
        r"(?P<problem>.+)",
        "logits 为 {shape} {dtype}、generated 为 {ids}、penalty 为 {penalty} 时：{problem!t}",
    ),
    (
        rf"weights (?P<shape>{_SHAPE}) (?P<dtype>[\w.]+): (?P<problem>.+)",
        "weights 为 {shape} {dtype} 时：{problem!t}",
    ),
    # ---- shared problems
    (
        r"return a torch\.Tensor of filtered probabilities, renormalised to sum to 1, got (?P<type>[\w.]+)\.",
        "请返回过滤后并重新归一化（和为 1）的概率张量（torch.Tensor），你返回的是 {type}。",
    ),
    (
        r"return a torch\.Tensor of penalised logits, got (?P<type>[\w.]+)\.",
        "请返回惩罚后的 logits 张量（torch.Tensor），你返回的是 {type}。",
    ),
    (
        r"return a torch\.Tensor of shares, one per layer and head, got (?P<type>[\w.]+)\.",
        "请返回占比张量（torch.Tensor），每层每头一个数，你返回的是 {type}。",
    ),
    (
        r"you returned a mask; return the filtered probabilities, renormalised to sum to 1\.",
        "你返回的是掩码；请返回过滤后的概率，并重新归一化使其和为 1。",
    ),
    (r"you returned a mask; return the penalised logits\.", "你返回的是掩码；请返回惩罚后的 logits。"),
    (
        r"you returned a mask; return the shares, one per layer and head\.",
        "你返回的是掩码；请返回占比，每层每头一个数。",
    ),
    (
        r"your result contains NaN or inf where the expected one is finite\.",
        "你的结果在应为有限值的位置含有 NaN 或 inf。",
    ),
    # ---- top-p
    (
        r"you dropped the token that crosses p \(cumsum < p\): keep a token when the mass of the tokens "
        r"\*before\* it is below p, so the nucleus reaches p and is never empty\.",
        "你丢掉了让累计概率越过 p 的那个词元（cumsum < p）：应当在它*之前*的词元的总概率小于 p 时保留它，"
        "这样核（nucleus）的总概率能达到 p，而且永远不会为空。",
    ),
    (
        r"your result is in sorted order: scatter the kept probabilities back to their vocabulary positions\.",
        "你的结果是排序后的顺序：要把保留的概率 scatter 回它们在词表中的位置。",
    ),
    (
        r"you kept the tail and dropped the nucleus: sort in descending order \(most likely first\)\.",
        "你保留了尾部、丢掉了核：应按降序排序（最可能的在前）。",
    ),
    (
        r"wrong numbers; keep the most likely tokens until their mass reaches p \(the crossing token included\), "
        r"zero the rest, then renormalise\.",
        "数值不对；保留最可能的词元，直到它们的总概率达到 p（包括越过 p 的那个），其余置 0，然后重新归一化。",
    ),
    # ---- repetition penalty
    (
        r"you divided every repeated logit by the penalty: a negative logit divided by penalty > 1 moves "
        r"\*up\*, making the repeated token more likely; multiply negative logits by the penalty instead\.",
        "你把每个重复词元的 logit 都除以了惩罚系数：负的 logit 除以大于 1 的系数会*变大*，"
        "反而让重复的词元更可能出现；负的 logit 应乘以惩罚系数。",
    ),
    (
        r"you penalised a token once per occurrence: the penalty applies once per token already generated, "
        r"whatever its count \(a scatter, not a scatter_add\)\.",
        "你按出现次数多次惩罚了同一个词元：每个已生成的词元只惩罚一次，"
        "与出现次数无关（用 scatter，不是 scatter_add）。",
    ),
    (
        r"you penalised a row with the tokens of every row: each row has its own history \(generated\[b\]\)\.",
        "你用所有行的词元惩罚了每一行：每一行有它自己已生成的词元（generated[b]）。",
    ),
    (
        r"you penalised every token: only the tokens already generated in that row are changed\.",
        "你惩罚了所有词元：只应改动该行已经生成过的词元。",
    ),
    (
        r"you made repeated tokens more likely: divide positive logits by the penalty, multiply negative ones\.",
        "你让重复的词元更可能出现了：正的 logit 应除以惩罚系数，负的应乘以它。",
    ),
    (
        r"wrong numbers; for each token in the row's generated ids, once: logit / penalty if positive, "
        r"logit × penalty if negative; leave the rest unchanged\.",
        "数值不对；对该行已生成的每个词元（只算一次）：logit 为正则除以 penalty，为负则乘以 penalty；其余不变。",
    ),
    # ---- first-token share
    (
        r"you averaged over every query, query 0 included: it can only attend to itself \(weight 1\), so "
        r"leave it out \(weights\[\.\.\., 1:, 0\]\)\.",
        "你对所有查询取了平均，包括查询 0：它只能关注自己（权重为 1），所以要把它排除（weights[..., 1:, 0]）。",
    ),
    (
        r"you summed the weights on key 0: divide by the L - 1 queries \(a mean\)\.",
        "你对键 0 上的权重求了和：还要除以 L - 1 个查询（取平均）。",
    ),
    (
        r"you read a row, not the column: key 0 is column 0 \(weights\[\.\.\., 1:, 0\]\); row 0 is the first query\.",
        "你读的是一行而不是一列：键 0 是第 0 列（weights[..., 1:, 0]）；第 0 行是第一个查询。",
    ),
    (
        r"you divided by L: the mean is over the L - 1 queries 1 … L-1\.",
        "你除以了 L：平均是对查询 1 … L-1 这 L - 1 个查询取的。",
    ),
    (r"you took the last key: the first token is key 0\.", "你取的是最后一个键：第一个词元是键 0。"),
    (
        r"wrong numbers; the mean of weights\[\.\.\., i, 0\] over queries i = 1 … L-1, one number per layer and head\.",
        "数值不对；应为 weights[..., i, 0] 在查询 i = 1 … L-1 上的平均，每层每头一个数。",
    ),
]
