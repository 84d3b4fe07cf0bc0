"""Chinese for the graders of notebook 14 (``attn_core/exercises/bug_hunt/``): ``check_bug``, ``show_bug``
and the scoreboard of ``bug_report`` / ``check_all``.

Every ❌ message the module's own probes can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``).
Most verdicts are ``"{where}: {problem}"``: the test case (a mask, a head count, a decode step, ...) becomes
the start of the Chinese sentence and the problem is translated on its own (``{problem!t}``). The probes of
the RoPE and MLA bugs (13, 14, 16-18) are notebook 16's checks (``handwrite_rope`` / ``handwrite_mla``):
their messages belong to those modules' catalogs.
"""

from __future__ import annotations

import re

from attn_core.i18n import exact

_NUM = r"-?(?:\d+(?:\.\d*)?(?:e[+-]?\d+)?|inf|nan)"  # a number as the probes print it: 2.82843, 0.054, 1e-06
_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 2, 5, 4)
_LIST = r"\[[\d, ]*\]"  # a list of indices: [0], [1, 0, 3]
_ID = r"(?P<id>\w+)"  # a bug id: scale_by_model_dim

# ---- the test cases ("where") a verdict starts with; each is also an entry of its own, for {where!t}
_WHERE_ENTRIES = [
    # kernel bugs (_sdpa_cases, _dropout_probe)
    (r"without a mask", "不带掩码时"),
    (r"with a causal mask \(L, L\)", "带因果掩码 (L, L) 时"),
    (
        rf"with padding, lengths (?P<lengths>{_LIST}), mask \(B, 1, 1, L\)",
        "带填充掩码时（长度 {lengths}，掩码形状 (B, 1, 1, L)）",
    ),
    (
        r"with padded queries AND keys \(rows of a padded query are fully masked\)",
        "查询和键都带填充时（填充查询所在的行整行被掩码）",
    ),
    (rf"with dropout_p=(?P<p>{_NUM})", "dropout_p={p} 时"),
    # bug 12 (_causal_probe), after "in "
    (
        r"in prefill \((?P<q>\d+) queries, (?P<k>\d+) keys\)",
        "预填充时（{q} 个查询，{k} 个键）",
    ),
    (
        r"in a decode step \((?P<q>\d+) new query, (?P<k>\d+) cached keys\)",
        "在一步解码中（{q} 个新查询，{k} 个缓存的键）",
    ),
    (
        r"in a chunk of (?P<q>\d+) new queries after (?P<cached>\d+) cached tokens \((?P<k>\d+) keys\)",
        "在已缓存 {cached} 个词元之后、一次来 {q} 个新查询的分块中（共 {k} 个键）",
    ),
    # layer bugs (_eval_dropout_probe, _gqa_probe, _mask_probe)
    (
        rf"built with dropout=(?P<p>{_NUM}) and switched to \.eval\(\)",
        "以 dropout={p} 构造并切换到 .eval() 后",
    ),
    (r"in train mode", "在训练模式下"),
    (
        r"with (?P<heads>\d+) query heads and (?P<kv>\d+) kv heads",
        "{heads} 个查询头、{kv} 个 KV 头时",
    ),
    (
        r"with a per-sequence mask \(B=(?P<b>\d+), L, L\) and (?P<heads>\d+) heads",
        "每个序列各一个掩码 (B={b}, L, L)、{heads} 个头时",
    ),
    # bug 15 (_rotary_probe)
    (r"with positions (?P<first>\d+)\.\.(?P<last>\d+)", "位置为 {first}..{last} 时"),
    (
        rf"with positions (?P<first>\d+)\.\.(?P<last>\d+), base (?P<base>{_NUM})",
        "位置为 {first}..{last}、base 为 {base} 时",
    ),
]
_WHERE = "|".join(re.sub(r"\(\?P<\w+>", "(?:", pattern) for pattern, _ in _WHERE_ENTRIES)  # no named groups


def _unscaled(match: re.Match, tr) -> str:
    """Weights computed with no scale, or with 1/d (``_weights_diagnosis``)."""
    what = "完全没有缩放" if match["label"] == "no scale at all" else "用的是 1/d，而不是 1/sqrt(d)"
    return f"你的权重{what}；缩放系数应为 1/sqrt(head_dim)。"


CATALOG = [
    # the names on the verdict lines are the learner-facing calls: they stay as they are
    *exact({"check_bug": "check_bug", "show_bug": "show_bug"}),
    (rf"check_bug\('{_ID}'\)", "check_bug('{id}')"),
    (rf"test '{_ID}' on the buggy code", "在有 bug 的原始代码上运行测试 '{id}'"),
    # ---- the scoreboard (bug_report, check_all)
    (r"fixed (?P<fixed>\d+)/(?P<total>\d+)", "已修复 {fixed}/{total}"),
    (rf"  ⬜ {_ID}: not attempted", "  ⬜ {id}：未作答"),
    (rf"  ❌ {_ID}: still failing", "  ❌ {id}：仍未通过"),
    # ---- check_bug / show_bug themselves
    (
        r"unknown bug id (?P<given>.+?); the ids are: (?P<ids>[\w, ]+)\.",
        "未知的 bug 编号 {given}；可用的编号有：{ids}。",
    ),
    (
        r"that is still the original buggy code: pass your fixed version\.",
        "这还是原来那份有 bug 的代码：请传入你修好的版本。",
    ),
    (
        r"could not run your code \((?P<type>[\w.]+): (?P<error>.*)\)\.",
        "无法运行你的代码（{type}：{error!o}）。",
    ),
    (
        r"could not run the probe \((?P<type>[\w.]+): (?P<error>.*)\)\.",
        "测试本身无法运行（{type}：{error!o}）。",
    ),
    # ---- messages that carry their case without a colon (checked before the general "where: problem")
    (
        rf"with dropout_p=(?P<p>{_NUM}) not one weight is exactly 0 and every row still sums to 1: the dropout "
        r"zeroed scores before the softmax \(exp\(0\) = 1 is not 0\), so whole rows are renormalised instead of "
        r"individual probabilities being dropped\.",
        "dropout_p={p} 时没有一个权重恰好为 0，而且每一行之和仍然是 1：dropout 在 softmax 之前把分数置零了"
        "（exp(0) = 1，不是 0），结果是整行被重新归一化，而不是丢弃单个概率。",
    ),
    (
        rf"with dropout_p=(?P<p>{_NUM}) not one weight is exactly 0: the dropout must zero attention weights\.",
        "dropout_p={p} 时没有一个权重恰好为 0：dropout 必须把注意力权重置零。",
    ),
    (
        rf"with dropout_p=(?P<p>{_NUM}) the weights that survive are not softmax / \(1 - p\): apply dropout to the "
        r"softmax output \(inverted dropout scales the kept ones by 1/\(1-p\)\)\.",
        "dropout_p={p} 时保留下来的权重不等于 softmax / (1 - p)：请对 softmax 的输出做 dropout"
        "（inverted dropout 会把保留的权重乘以 1/(1-p)）。",
    ),
    (
        rf"with dropout_p=(?P<p>{_NUM}) out is not weights @ v: use the dropped weights for the output\.",
        "dropout_p={p} 时 out 不等于 weights @ v：输出要用 dropout 之后的权重来算。",
    ),
    (
        r"in (?P<where>prefill .+?|a decode step .+?|a chunk of .+?) your newest query attends to keys "
        rf"(?P<seen>{_LIST}), but it must see all (?P<k>\d+) keys \(itself and everything before it\): the causal "
        r"mask is aligned top-left\.",
        lambda m, tr: (
            f"{tr('in ' + m['where'])}，你最新的查询只关注了键 {m['seen']}，但它必须看到全部 {m['k']} 个键"
            "（它自己以及之前的所有键）：因果掩码按左上角对齐了。"
        ),
    ),
    (
        rf"(?P<where>built with dropout=(?:{_NUM}) and switched to \.eval\(\)), two calls on the same input gave "
        r"different outputs: dropout is still active in eval mode\. F\.dropout\(x, p\) defaults to training=True\.",
        "{where!t}，对同一个输入调用两次得到了不同的输出：dropout 在评估模式下仍然生效。"
        "F.dropout(x, p) 默认 training=True。",
    ),
    # ---- "where: problem"
    *_WHERE_ENTRIES,
    (rf"(?P<where>{_WHERE}): (?P<problem>.+)", "{where!t}，{problem!t}"),
    # ---- what a kernel returned (_unpack, _nan_problem)
    (
        r"return a pair \(out, weights\) of tensors, got (?P<type>[\w.]+)\.",
        "请返回由两个张量组成的 (out, weights)，你返回的是 {type}。",
    ),
    (r"return a pair \(out, weights\)\.", "请返回 (out, weights) 这一对张量。"),
    (
        rf"(?P<what>out|weights) should have shape (?P<shape>{_SHAPE}), got (?P<got>{_SHAPE})\.",
        "{what} 的形状应为 {shape}，你的是 {got}。",
    ),
    (
        rf"(?P<n>\d+) output rows contain NaN/inf \(the first at batch, head, query = (?P<first>{_LIST})\)\. Those "
        r"are the padded queries whose every key is masked: softmax over a row that is all -inf computes 0/0\.",
        "输出中有 {n} 行含 NaN/inf（第一行位于 batch, head, query = {first}）。它们是所有键都被掩码的填充查询："
        "对全是 -inf 的一行做 softmax，算的是 0/0。",
    ),
    (
        rf"out is finite, but (?P<n>\d+) rows of the weights you return contain NaN/inf \(the first at batch, head, "
        rf"query = (?P<first>{_LIST})\): the padded queries whose every key is masked, where softmax over a row of "
        r"-inf computes 0/0\. Cleaning the output \(nan_to_num, or taking it from another kernel\) leaves the "
        r"weights you return broken: avoid the 0/0 itself and give those rows finite weights \(zeros, as "
        r"attn_core does\)\.",
        "out 是有限的，但你返回的权重中有 {n} 行含 NaN/inf（第一行位于 batch, head, query = {first}）："
        "它们是所有键都被掩码的填充查询，对一行 -inf 做 softmax 算的是 0/0。只清理输出"
        "（nan_to_num，或从另一个算子取输出）时，你返回的权重仍然是坏的：要从根上避免 0/0，"
        "给这些行有限的权重（像 attn_core 那样给全零）。",
    ),
    # ---- what is wrong with a kernel's weights (_weights_diagnosis)
    (
        r"your weights are zero exactly where the mask is True and non-zero where it is False: the mask "
        r"convention is flipped\. Here True = may attend\.",
        "你的权重恰好在掩码为 True 的位置为零，在为 False 的位置不为零：掩码约定弄反了。这里 True = 允许关注。",
    ),
    (
        r"some weights on blocked keys \(mask False\) are not zero: the mask leaks\.",
        "被屏蔽的键（掩码为 False）上有些权重不为零：掩码漏了。",
    ),
    (
        rf"the blocked weights are zero, but the rows no longer sum to 1 \(query 0 of head 0 sums to (?P<s>{_NUM})\): "
        r"zeroing after softmax removes probability mass instead of renormalising over the visible keys\.",
        "被屏蔽的权重是零，但各行之和不再是 1（头 0 的查询 0 之和为 {s}）：在 softmax 之后置零只是拿掉了"
        "一部分概率质量，并没有在可见的键上重新归一化。",
    ),
    (
        r"each row of your weights should sum to 1 over the keys, but yours sum to 1 down each column: the "
        r"softmax normalised over the queries\.",
        "权重的每一行在所有键上之和应为 1，而你的是每一列之和为 1：softmax 是在查询上归一化的。",
    ),
    (
        rf"the rows of your weights do not sum to 1 \(the first sums to (?P<s>{_NUM})\)\.",
        "你的权重各行之和不是 1（第一行之和为 {s}）。",
    ),
    (
        r"your weights use (?P<label>no scale at all|1/d instead of 1/sqrt\(d\)); the scale is 1/sqrt\(head_dim\)\.",
        _unscaled,
    ),
    (
        r"the weights differ from the reference softmax\(q kᵀ / sqrt\(d\)\) \(masked\)\.",
        "权重与参考结果（带掩码的 softmax(q kᵀ / sqrt(d))）不一致。",
    ),
    (r"the weights are right but out is not weights @ v\.", "权重对了，但 out 不等于 weights @ v。"),
    # ---- layer bugs (_build_learner_layer, _layer_problem, _value_probe, _eval_dropout_probe, _gqa_probe)
    (
        r"pass the layer class itself; calling it gave a (?P<type>[\w.]+), not an nn\.Module\.",
        "请传入层的类本身；调用它得到的是 {type}，不是 nn.Module。",
    ),
    (
        r"keep the q_proj/k_proj/v_proj/o_proj linear layers of the original \(the probe copies reference "
        r"weights into them\): load_state_dict raised (?P<type>[\w.]+): (?P<error>.*)",
        "请保留原代码中的 q_proj/k_proj/v_proj/o_proj 这几个线性层（测试会把参考权重复制进去）："
        "load_state_dict 抛出了 {type}：{error!o}",
    ),
    (
        r"head h of every sequence got the mask of sequence h: broadcasting lined the batch axis of the mask "
        r"\(B, L, L\) up with the head axis of the scores \(B, H, L, L\)\.",
        "每个序列的头 h 拿到的都是序列 h 的掩码：广播把掩码 (B, L, L) 的批次维和分数 (B, H, L, L) 的头维对齐了。",
    ),
    (
        rf"the weights match softmax\(q kᵀ / (?P<label>sqrt\(hidden_dim\)|head_dim|1)\) with (?P=label) = "
        rf"(?P<divisor>{_NUM}): the scores must be divided by sqrt\(head_dim\) = (?P<right>{_NUM}), the size of "
        r"one head's vectors\.",
        "你的权重等于 softmax(q kᵀ / {label})，其中 {label} = {divisor}：分数应当除以 sqrt(head_dim) = {right}，"
        "head_dim 是单个头的向量长度。",
    ),
    (r"the attention weights differ from the reference layer's\.", "注意力权重与参考层的不一致。"),
    (
        r"the attention weights match the reference but the outputs do not: check how you compute v and out\.",
        "注意力权重与参考一致，输出却不一致：检查 v 和 out 是怎么算的。",
    ),
    (
        r"the weights match the reference but the outputs do not, and doubling v_proj's weights does not change "
        r"your output at all: v_proj is never used\.",
        "权重与参考一致，输出却不一致；而且把 v_proj 的权重翻倍，你的输出纹丝不动：v_proj 根本没被用到。",
    ),
    (
        rf"in train mode with dropout=(?P<p>{_NUM}) no attention weight was dropped: keep dropout for training\.",
        "在训练模式下、dropout={p} 时，没有一个注意力权重被丢弃：训练时要保留 dropout。",
    ),
    (
        r"(?P<problem>.+?) It is right for (?P<mha>\d+) kv heads \(MHA\) and 1 kv head \(MQA\): the query heads are "
        r"paired with the wrong kv heads \(query head h must read kv head h // \(num_heads // num_kv_heads\)\)\.",
        "{problem!t}而在 {mha} 个 KV 头（MHA）和 1 个 KV 头（MQA）时它是对的：查询头配错了 KV 头"
        "（查询头 h 必须读 KV 头 h // (num_heads // num_kv_heads)）。",
    ),
    # bug 11: an unsqueeze(1) that crashes on an (L, L) mask (the problem before it is the crash)
    (
        r"(?P<problem>.+)\. An \(L, L\) mask has no batch axis: mask\.unsqueeze\(1\) turns it into \(L, 1, L\), which "
        r"does not line up with the scores \(B, H, L, L\)\. unsqueeze\(1\), as in the Annotated Transformer, "
        r"assumes a mask with a batch axis in front\. Count the new head axis from the right instead: "
        r"mask\.unsqueeze\(-3\) makes \(L, L\) into \(1, L, L\) and \(B, L, L\) into \(B, 1, L, L\)\.",
        "{problem!t}。(L, L) 掩码没有批次维：mask.unsqueeze(1) 把它变成 (L, 1, L)，和分数 (B, H, L, L) 对不上。"
        "Annotated Transformer 里的 unsqueeze(1) 默认掩码最前面有批次维。应该从右往左数来插入新的头维："
        "mask.unsqueeze(-3) 把 (L, L) 变成 (1, L, L)，把 (B, L, L) 变成 (B, 1, L, L)。",
    ),
    # ---- bug 15: rotary(x, positions, base) against ac.apply_rope (_rotary_probe)
    (
        rf"return one tensor of x's shape (?P<shape>{_SHAPE}), got (?P<got>.+?)\.",
        "请返回一个与 x 形状相同的张量 {shape}，你返回的是 {got}。",
    ),
    (
        r"your rotation pairs features \(2i, 2i\+1\), the interleaved layout of the RoFormer paper and of Meta's "
        r"original Llama code; the weights here \(as in Hugging Face's Llama\) expect pairs \(i, i \+ d/2\)\. "
        r"Each layout works with weights in its own order, so the model runs, and every score is silently wrong\.",
        "你的旋转把特征 (2i, 2i+1) 配成一对，这是 RoFormer 论文和 Meta 原版 Llama 代码的交错（interleaved）布局；"
        "这里的权重（与 Hugging Face 的 Llama 一样）要求 (i, i + d/2) 配对。每种布局只适用于按它自己的顺序排列的"
        "权重，所以模型照样能跑，每个分数却都静默地错了。",
    ),
    (r"your function returns x unrotated\.", "你的函数返回的是没有旋转的 x。"),
    (r"you rotate by -angle: sin has the wrong sign\.", "你转的是 -angle：sin 的符号反了。"),
    (
        r"the rotation differs from ac\.apply_rope\(x, positions, base=base\)\.",
        "旋转结果与 ac.apply_rope(x, positions, base=base) 不一致。",
    ),
]
