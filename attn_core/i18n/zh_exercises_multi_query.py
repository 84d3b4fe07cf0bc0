"""Chinese for the graders of notebook 03 (``attn_core/exercises/multi_query.py``).

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). The
variable parts (sizes, numbers, type names, the learner's settings) are named groups and stay as the
grader printed them.
"""

from __future__ import annotations

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 5, 16)
_NUM = r"-?[\d,]+(?:\.\d+)?"  # a count as the grader prints it: 8,333 or 12,345.67
_SETTINGS = r"\{[^{}]*\}"  # the keyword arguments of a call, printed as a dict
_PROJ = r"(?P<proj>[qkvo]_proj)"
_MQA_WHERE = (
    rf"hidden_dim=(?P<hidden>\d+), num_heads=(?P<heads>\d+): you return (?P<got>{_NUM}), expected (?P<expected>{_NUM})"
)
_MQA_WHERE_ZH = "当 hidden_dim={hidden}、num_heads={heads} 时，你返回 {got}，应为 {expected}"

CATALOG = [
    # the names of the three checks are the learner's function names: they stay as they are
    *exact({name: name for name in ("max_cached_tokens", "mqa_num_params", "mqa_module")}),
    # ---- exercise 1: how many tokens fit
    (
        r"return a number of tokens \(an int\), got (?P<type>[\w.]+)\.",
        "请返回词元个数（一个整数），你返回的是 {type}。",
    ),
    (
        r"your answer changes with num_heads\. Only keys and values are cached, one pair per \*kv\* head; query "
        r"heads are computed fresh for the new token and never stored\. Use num_kv_heads\.",
        "你的答案会随 num_heads 变化。缓存的只有键和值，每个 *kv* 头一对；"
        "查询头是为新词元现算的，从不保存。请用 num_kv_heads。",
    ),
    (
        r"doubling (?P<factor>num_layers|num_kv_heads|head_dim|bytes_per_element) should halve the number of tokens "
        r"that fit, but your answer ignores it\.",
        "{factor} 翻倍时，能放下的词元数应当减半，但你的答案忽略了它。",
    ),
    (
        rf"you get (?P<got>{_NUM}) tokens, twice the right number: each token stores a key AND a value vector per "
        r"kv head per layer \(the factor 2\)\.",
        "你算出 {got} 个词元，是正确答案的两倍：每个词元在每一层的每个 KV 头上都要存一个键向量*和*一个值向量"
        "（因子 2）。",
    ),
    (
        rf"for (?P<settings>{_SETTINGS}) you return (?P<got>{_NUM}), expected (?P<expected>{_NUM})\. Bytes per "
        r"token = 2 · layers · kv_heads · head_dim · bytes_per_element; divide the budget by it\.",
        "对 {settings}，你返回 {got}，应为 {expected}。每个词元的字节数 = "
        "2 · layers · kv_heads · head_dim · bytes_per_element；用预算除以它。",
    ),
    (
        rf"for (?P<settings>{_SETTINGS}) you return (?P<got>{_NUM}); a token's K/V is stored whole or not at all: "
        rf"round down with // \(expected (?P<expected>{_NUM})\)\.",
        "对 {settings}，你返回 {got}；一个词元的 K/V 要么完整存下，要么不存：请用 // 向下取整（应为 {expected}）。",
    ),
    (
        rf"for (?P<settings>{_SETTINGS}) you return (?P<got>{_NUM}), one token too many: (?P<budget>{_NUM}) bytes "
        rf"hold (?P<tokens>{_NUM}) tokens' K/V, and a partial token cannot be stored\. round\(\) and ceil\(\) round "
        rf"up here; round down with // \(expected (?P<expected>{_NUM})\)\.",
        "对 {settings}，你返回 {got}，多了一个词元：{budget} 字节能放下 {tokens} 个词元的 K/V，"
        "而不完整的词元无法存储。round() 和 ceil() 在这里会向上取整；请用 // 向下取整（应为 {expected}）。",
    ),
    (
        rf"for (?P<settings>{_SETTINGS}) you return (?P<got>.+?), expected (?P<expected>{_NUM}) "
        r"\(round down with //\)\.",
        "对 {settings}，你返回 {got}，应为 {expected}（请用 // 向下取整）。",
    ),
    # ---- exercise 2: parameters of an MQA layer
    (
        r"return a number \(an int\), got (?P<type>[\w.]+)\.",
        "请返回一个数（整数），你返回的是 {type}。",
    ),
    (
        rf"{_MQA_WHERE}; that is the multi-head count: in MQA k_proj and v_proj map hidden -> head_dim, not "
        r"hidden -> hidden\.",
        _MQA_WHERE_ZH + "；这是多头注意力的参数量：在 MQA 中 k_proj 和 v_proj 的映射是 hidden -> head_dim，"
        "而不是 hidden -> hidden。",
    ),
    (
        rf"{_MQA_WHERE}; you left out the biases \(each nn\.Linear\(in, out\) has in·out weights \+ out biases\)\.",
        _MQA_WHERE_ZH + "；你漏掉了偏置（每个 nn.Linear(in, out) 有 in·out 个权重 + out 个偏置）。",
    ),
    (
        rf"{_MQA_WHERE}; you left out o_proj \(hidden -> hidden\), which MQA keeps as in MHA\.",
        _MQA_WHERE_ZH + "；你漏掉了 o_proj（hidden -> hidden），MQA 与 MHA 一样保留了它。",
    ),
    (
        rf"{_MQA_WHERE}; K and V share the head, not the projection: k_proj and v_proj are two separate "
        r"hidden -> head_dim layers\.",
        _MQA_WHERE_ZH + "；K 和 V 共享的是头，而不是投影：k_proj 和 v_proj 是两个独立的 hidden -> head_dim 层。",
    ),
    (
        rf"{_MQA_WHERE}; the biases of k_proj and v_proj have head_dim entries \(their output size\), not "
        r"hidden_dim\.",
        _MQA_WHERE_ZH + "；k_proj 和 v_proj 的偏置有 head_dim 个元素（等于它们的输出大小），而不是 hidden_dim 个。",
    ),
    (
        rf"{_MQA_WHERE}\. Count q_proj, k_proj, v_proj, o_proj: each Linear\(in, out\) has in·out \+ out\.",
        _MQA_WHERE_ZH + "。请数清 q_proj、k_proj、v_proj、o_proj：每个 Linear(in, out) 有 in·out + out 个参数。",
    ),
    # ---- exercise 3: the MQA module
    (
        r"pass the class itself \(its name, no parentheses\), got (?P<type>[\w.]+)\.",
        "请传入类本身（只写类名，不加括号），你传入的是 {type}。",
    ),
    (
        r"(?P<cls>[\w.]+)\((?P<hidden>\d+), (?P<heads>\d+)\) raised (?P<type>[\w.]+): (?P<error>.*)",
        "{cls}({hidden}, {heads}) 抛出了 {type}：{error!o}",
    ),
    (
        r"the class should subclass nn\.Module, got an instance of (?P<type>[\w.]+)\.",
        "这个类应当继承 nn.Module，而它创建出的是一个 {type} 实例。",
    ),
    (
        rf"self\.{_PROJ} should be an nn\.Linear \(named exactly so the weights can be copied\)\.",
        "self.{proj} 应当是一个 nn.Linear（名字必须完全一致，这样才能复制权重）。",
    ),
    (
        rf"{_PROJ} maps hidden -> hidden \((?P<got>\d+ -> \d+)\): that is one (?P<kind>[KV]) head per query head, "
        r"i\.e\. multi-head attention\. MQA has ONE shared head: hidden -> head_dim \((?P<expected>\d+ -> \d+)\)\.",
        "{proj} 的映射是 hidden -> hidden（{got}）：这相当于每个查询头一个 {kind} 头，也就是多头注意力。"
        "MQA 只有一个共享的头：hidden -> head_dim（{expected}）。",
    ),
    (
        rf"{_PROJ} maps (?P<got>\d+ -> \d+), expected (?P<expected>\d+ -> \d+)\.",
        "{proj} 的映射是 {got}，应为 {expected}。",
    ),
    (
        rf"{_PROJ} has no bias; keep nn\.Linear's default bias=True to match attn_core\.",
        "{proj} 没有偏置；请保留 nn.Linear 默认的 bias=True，以便与 attn_core 一致。",
    ),
    (
        r"copying ac\.MultiQueryAttention's weights failed \((?P<error>.*)\); keep only "
        r"q_proj/k_proj/v_proj/o_proj\.",
        "复制 ac.MultiQueryAttention 的权重失败（{error}）；只保留 q_proj/k_proj/v_proj/o_proj。",
    ),
    (
        r"(?P<problem>your function raised RuntimeError: .*)\. Hint: k_proj\(x\) is \(B, L, head_dim\), a single "
        r"head: give it a head axis with \.unsqueeze\(1\) instead of splitting it into num_heads heads\.",
        "{problem!t}。提示：k_proj(x) 的形状是 (B, L, head_dim)，只有一个头："
        "用 .unsqueeze(1) 给它加一个头轴，而不是把它拆成 num_heads 个头。",
    ),
    (
        r"forward should return the output tensor, got (?P<type>[\w.]+)\.",
        "forward 应当返回输出张量，你返回的是 {type}。",
    ),
    (
        rf"output shape (?P<got>{_SHAPE}), expected (?P<expected>{_SHAPE}) = \(batch, seq_len, hidden_dim\)\.",
        "输出形状为 {got}，应为 {expected} = (batch, seq_len, hidden_dim)。",
    ),
    (
        r"the output \(no mask given\) contains NaN\.",
        "输出（未给掩码）中有 NaN。",
    ),
    (
        r"wrong numbers: you did not scale the scores: multiply Q Kᵀ by 1/√head_dim\.",
        "数值不对：你没有缩放分数：请把 Q Kᵀ 乘以 1/√head_dim。",
    ),
    (
        r"wrong numbers: the scale is per head: 1/√head_dim, not 1/√hidden_dim\.",
        "数值不对：缩放是按头算的：1/√head_dim，而不是 1/√hidden_dim。",
    ),
    (
        r"wrong numbers: the values use k_proj: v must come from v_proj \(a shapes-only test would not catch "
        r"this\)\.",
        "数值不对：值用的是 k_proj：v 必须来自 v_proj（只检查形状的测试发现不了这个错误）。",
    ),
    (
        r"wrong numbers: the heads are merged in the wrong order: transpose \(B, H, L, d\) -> \(B, L, H, d\) "
        r"before reshaping to \(B, L, hidden\)\.",
        "数值不对：合并各头的顺序错了：先把 (B, H, L, d) 转置成 (B, L, H, d)，再 reshape 成 (B, L, hidden)。",
    ),
    (
        r"wrong numbers: the output projection o_proj is missing\.",
        "数值不对：缺少输出投影 o_proj。",
    ),
    (
        r"wrong numbers: softmax runs over the wrong axis: normalise over the keys, dim=-1\.",
        "数值不对：softmax 用错了轴：应在键上归一化，dim=-1。",
    ),
    (
        r"wrong numbers \(largest difference (?P<diff>.+?)\) against ac\.MultiQueryAttention with the same "
        r"weights\.",
        "数值不对（最大差值 {diff}），对照的是持有相同权重的 ac.MultiQueryAttention。",
    ),
    (
        r"(?P<problem>.*) Give forward a `mask=None` argument \(boolean, True = may attend\)\.",
        "{problem!t}请给 forward 加一个 `mask=None` 参数（布尔型，True = 允许关注）。",
    ),
    (
        r"with a \((?P<rows>\d+), (?P<cols>\d+)\) causal mask: (?P<problem>.*)",
        "带 ({rows}, {cols}) 因果掩码时：{problem!t}",
    ),
    (
        rf"with a mask, output shape (?P<got>{_SHAPE}), expected (?P<expected>{_SHAPE})\.",
        "带掩码时，输出形状为 {got}，应为 {expected}。",
    ),
    (
        r"the mask convention is flipped: True means \*may attend\*, so fill the scores where the mask is False "
        r"\(masked_fill\(~mask, \.\.\.\)\)\.",
        "掩码约定反了：True 表示*允许关注*，所以要在掩码为 False 的位置填充分数（masked_fill(~mask, ...)）。",
    ),
    (
        r"the mask is ignored: the output with a causal mask equals the unmasked one\.",
        "掩码被忽略了：带因果掩码的输出与不带掩码的输出相同。",
    ),
    (
        r"the masked output contains NaN: is the convention flipped \(True = may attend\)\?",
        "加掩码后的输出中有 NaN：是不是把约定弄反了（True = 允许关注）？",
    ),
    (
        r"with a causal mask the numbers differ \(largest difference (?P<diff>.+?)\)\.",
        "带因果掩码时数值不一致（最大差值 {diff}）。",
    ),
    (
        r"the numbers are right, but forward printed (?P<lines>\d+) line\(s\)\. Debug prints in forward run on every "
        r"call \(every decoding step\): remove them, return what you want to inspect\.",
        "数值对了，但 forward 打印了 {lines} 行。forward 里的调试打印每次调用（每个解码步骤）都会执行："
        "请删掉它们，把想查看的东西返回出来。",
    ),
]
