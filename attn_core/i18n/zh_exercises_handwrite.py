"""Chinese for the graders of notebook 16 (``attn_core/exercises/handwrite*.py``), and what they share.

Every ❌ message ``check_sdpa``, ``check_causal_mask``, ``check_mha`` and ``check_gqa`` can print, plus the
pieces ``handwrite_rope`` and ``handwrite_mla`` reuse (the ``[case]`` in front of a diagnosis, a wrong return
value, a crash in ``forward``, a cache that did not grow, dropout left on, a wrong output shape), as
``(regex, template)`` pairs (see ``attn_core.i18n``). The diagnoses of ``check_rope_mha`` and ``check_mla``
are in ``zh_exercises_handwrite_rope`` and ``zh_exercises_handwrite_mla``. Shapes, numbers, type names and
code stay as the grader printed them.

One piece: the catalog of one grader family (notebook 16's hand-write checks), searched as one list.
"""

from __future__ import annotations

import re

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 3, 8), (5,), ()
_WORST = r"largest difference (?P<diff>\S+) at index (?P<index>\([\d, ]*\))"
_WORST_ZH = "最大差值 {diff}，位于下标 {index}"
_MERGE_FIX = r"transpose\(1, 2\) back to \(B, L, H, head_dim\), then reshape to \(B, L, hidden_dim\)"
_MERGE_FIX_ZH = "先 transpose(1, 2) 回到 (B, L, H, head_dim)，再 reshape 成 (B, L, hidden_dim)"

# ----------------------------------------------------------------------------- the case in brackets
_SDPA_CASES = {  # check_sdpa's four cases
    "q (2, 3, 8), k/v (2, 5, 8), no mask": "q (2, 3, 8)，k/v (2, 5, 8)，无掩码",
    "q/k (2, 3, 4, 16), v (2, 3, 4, 6), no mask": "q/k (2, 3, 4, 16)，v (2, 3, 4, 6)，无掩码",
    "q (2, 2, 3, 8), k/v (2, 2, 5, 8), causal mask (3, 5)": "q (2, 2, 3, 8)，k/v (2, 2, 5, 8)，因果掩码 (3, 5)",
    "q/k/v (2, 2, 4, 8), padding mask (2, 1, 1, 4) for lengths [4, 2]": (
        "q/k/v (2, 2, 4, 8)，长度为 [4, 2] 的填充掩码 (2, 1, 1, 4)"
    ),
}
# the layer checks: the class called with its arguments, e.g. MHA(12, 3) or MLA(16, 2, kv_lora_rank=6, ...),
# then (in a forward pass) what the check fed it
_CTOR = r"[\w<>.]+\([^()\[\]]*\)"
_LAYER_CASES = [
    (r"no mask", lambda m: "无掩码"),
    (r"causal mask (?P<shape>\(\d+, \d+\))", lambda m: f"因果掩码 {m['shape']}"),
    (
        rf"padding mask (?P<shape>{_SHAPE}), lengths (?P<lengths>\[[\d, ]*\])",
        lambda m: f"填充掩码 {m['shape']}，长度 {m['lengths']}",
    ),
    (r"full pass of (?P<n>\d+) tokens, no cache", lambda m: f"一次完整前向，{m['n']} 个词元，不用缓存"),
    (r"prefill of (?P<n>\d+) tokens into an empty cache", lambda m: f"向空缓存预填充 {m['n']} 个词元"),
    (
        r"decode step (?P<step>\d+): 1 new token at position (?P<position>\d+), (?P<cached>\d+) already cached",
        lambda m: f"解码第 {m['step']} 步：1 个新词元，位于位置 {m['position']}，缓存中已有 {m['cached']} 个",
    ),
]
_LAYER_CASE = "|".join(re.sub(r"\(\?P<\w+>", "(?:", pattern) for pattern, _ in _LAYER_CASES)  # groups unnamed


def _layer_case(case: str) -> str:
    for pattern, chinese in _LAYER_CASES:
        match = re.fullmatch(pattern, case)
        if match:
            return chinese(match)
    return case


def _in_case(match: re.Match, tr) -> str:
    """``[case] problem``: the case in Chinese, then the problem through the catalogs."""
    if match["sdpa"]:
        label = _SDPA_CASES[match["sdpa"]]
    else:
        label = match["ctor"] + (f"，{_layer_case(match['case'])}" if match["case"] else "")
    return f"[{label}] {tr(match['problem'])}"


def _forward_raised(match: re.Match, tr) -> str:
    """``forward raised X: ...``: call_learner's "your function raised ...", said of forward."""
    english = "your function " + match["rest"]
    chinese = tr(english)
    return chinese.replace("你的函数", "forward ", 1) if chinese != english else "forward " + match["rest"]


def _cache_not_updated(match: re.Match, tr) -> str:
    hint = {
        "k_all, v_all = cache.update(k, v), then attend over k_all, v_all": (
            "k_all, v_all = cache.update(k, v)，然后在 k_all, v_all 上做注意力"
        ),
        "latent_all, k_rope_all = cache.update(latent, k_rope)": (
            "latent_all, k_rope_all = cache.update(latent, k_rope)"
        ),
    }[match["hint"]]
    return f"你的 forward 没有把这一步的词元加进缓存（len(cache) 一直是 {match['n']}）：{hint}。"


def _wrong_dtype(match: re.Match, tr) -> str:
    """A 0/1 mask of the right pattern: float (added to the scores) or integer (refused, or read as blocked)."""
    if match["int_dtype"]:
        why = (
            f"F.scaled_dot_product_attention 不接受整数（{match['int_dtype']}）的 attn_mask，"
            "而旧版 nn.MultiheadAttention 把 uint8 掩码读作 True = *屏蔽*，恰好相反"
        )
    else:
        why = "浮点的 0/1 掩码作为 attn_mask 传入时会被*加*到分数上（+0 或 +1：什么也没屏蔽）"
    return (
        f"图案对了，dtype 却不对：{match['dtype']} 的 0/1。这里的掩码是 torch.bool，True = 允许关注"
        f"（F.scaled_dot_product_attention 的约定）；{why}。请返回 .bool()（或直接用比较运算构造它）。"
    )


def _projection_size(match: re.Match, tr) -> str:
    text = f"self.{match['p']} 把 {match['a']} 个特征映射到 {match['b']} 个，应为 {match['c']} -> {match['d']}。"
    if match["gqa"]:
        text += (
            f"GQA 中键和值有 num_kv_heads·head_dim = {match['g']}·{match['hd']} = {match['kv']} 个特征，"
            f"而不是 hidden_dim = {match['hidden']}" + ("（那是 MHA 的大小）。" if match["mha"] else "。")
        )
    return text


_DROPOUT_ON = (
    "your results change from call to call on the same input: dropout is still on. F.dropout(x, p) "
    "defaults to training=True; pass training=self.training (or use nn.Dropout, which .eval() turns off). "
    "Attention in eval mode, and in this check, must be deterministic."
)

CATALOG = [
    # the names of the checks are the learner's function names: they stay as they are
    *exact({name: name for name in ("check_sdpa", "check_causal_mask", "check_mha", "check_gqa")}),
    *exact({name: name for name in ("check_rope_mha", "check_mla")}),
    # ---- "[case] problem" (every check but check_causal_mask)
    (
        r"\[(?:(?P<sdpa>" + "|".join(map(re.escape, _SDPA_CASES)) + r")"
        rf"|(?P<ctor>{_CTOR})(?:, (?P<case>{_LAYER_CASE}))?)\] (?P<problem>.*)",
        _in_case,
    ),
    # ---- shared: what the answer returned, a crash inside forward, the cache, dropout
    (
        rf"your function returned one tensor (?P<shape>{_SHAPE}); return the pair \(out, weights\)\.",
        "你的函数只返回了一个张量 {shape}；请返回二元组 (out, weights)。",
    ),
    (
        rf"forward returned one tensor (?P<shape>{_SHAPE}); return the pair \(out, weights\)\.",
        "forward 只返回了一个张量 {shape}；请返回二元组 (out, weights)。",
    ),
    (
        r"your function should return a tuple \(out, weights\) of two tensors, got (?P<type>[\w.]+)\.",
        "你的函数应当返回由两个张量组成的元组 (out, weights)，得到的是 {type}。",
    ),
    (
        r"forward should return a tuple \(out, weights\) of two tensors, got (?P<type>[\w.]+)\.",
        "forward 应当返回由两个张量组成的元组 (out, weights)，得到的是 {type}。",
    ),
    (r"forward (?P<rest>raised .*)", _forward_raised),
    (r"forward: (?P<problem>.*)", "forward：{problem!t}"),
    (
        r"your forward did not add this step's tokens to the cache \(len\(cache\) stayed (?P<n>\d+)\): "
        r"(?P<hint>k_all, v_all = cache\.update\(k, v\), then attend over k_all, v_all"
        r"|latent_all, k_rope_all = cache\.update\(latent, k_rope\))\.",
        _cache_not_updated,
    ),
    (
        r"the cache grew by (?P<grew>-?\d+) tokens for (?P<new>\d+) new ones: call cache\.update once\.",
        "缓存增长了 {grew} 个词元，而新词元只有 {new} 个：cache.update 只应调用一次。",
    ),
    *exact(
        {
            _DROPOUT_ON: "同样的输入，你的结果每次调用都不一样：dropout 还开着。F.dropout(x, p) 默认 training=True；"
            "请传入 training=self.training（或改用 nn.Dropout，.eval() 会关掉它）。"
            "eval 模式下的注意力（以及这项检查里的注意力）必须是确定性的。",
        }
    ),
    (
        rf"out should have shape \(B, L, hidden_dim\) = (?P<expected>{_SHAPE}), got (?P<got>{_SHAPE})\.",
        "out 的形状应为 (B, L, hidden_dim) = {expected}，得到的是 {got}。",
    ),
    (
        rf"right shapes, wrong numbers: {_WORST} in out\.",
        "形状对了，数值不对：out 的" + _WORST_ZH + "。",
    ),
    # ---- check_sdpa
    (
        rf"did you return \(weights, out\)\? Your first tensor has the weights' shape \(\.\.\., Lq, Lk\) = "
        rf"(?P<shape>{_SHAPE}): return \(out, weights\), out first\.",
        "你是不是返回了 (weights, out)？你的第一个张量具有权重的形状 (..., Lq, Lk) = {shape}："
        "请返回 (out, weights)，out 在前。",
    ),
    (
        rf"weights have shape (?P<shape>{_SHAPE}) = \(\.\.\., Lk, Lq\): transposed\. The scores are "
        r"Q Kᵀ = q @ k\.transpose\(-2, -1\), one row per query, one column per key\.",
        "weights 的形状为 {shape} = (..., Lk, Lq)：转置了。分数是 Q Kᵀ = q @ k.transpose(-2, -1)，"
        "每个查询一行，每个键一列。",
    ),
    (
        rf"weights should have shape \(\.\.\., Lq, Lk\) = (?P<expected>{_SHAPE}), got (?P<got>{_SHAPE})\.",
        "weights 的形状应为 (..., Lq, Lk) = {expected}，得到的是 {got}。",
    ),
    (
        rf"out should have shape \(\.\.\., Lq, Dv\) = (?P<expected>{_SHAPE}), got (?P<got>{_SHAPE}): "
        r"out = weights @ v, one mixed value vector per query\.",
        "out 的形状应为 (..., Lq, Dv) = {expected}，得到的是 {got}："
        "out = weights @ v，每个查询得到一个混合后的值向量。",
    ),
    (
        rf"the weights are right but out is not \({_WORST}\): out = weights @ v\.",
        "权重对了，out 却不对（" + _WORST_ZH + "）：out = weights @ v。",
    ),
    (
        rf"the weights differ from softmax\(Q Kᵀ / √d_k\) with the mask applied \({_WORST}\)\.",
        "权重与施加掩码后的 softmax(Q Kᵀ / √d_k) 不一致（" + _WORST_ZH + "）。",
    ),
    (
        r"you divided by d_k = (?P<d>\d+); divide by √d_k = √(?P=d) \(math\.sqrt\(q\.size\(-1\)\)\)\.",
        "你除以的是 d_k = {d}；应该除以 √d_k = √{d}（math.sqrt(q.size(-1))）。",
    ),
    (
        r"you divided by √d_v = √(?P<d_v>\d+) \(the last dim of v\); the scale belongs to the dot products q·k: "
        r"√d_k = √(?P<d_k>\d+) \(the last dim of q\)\.",
        "你除以的是 √d_v = √{d_v}（v 的最后一维）；缩放针对的是点积 q·k：应为 √d_k = √{d_k}（q 的最后一维）。",
    ),
    (
        r"you scaled by √d_model = √\(heads·d_k\) = √(?P<d_model>\d+); the scale is per head: "
        r"√d_k = √(?P<d_k>\d+) \(the last dim of q\)\.",
        "你按 √d_model = √(heads·d_k) = √{d_model} 缩放了；缩放是按头算的：应为 √d_k = √{d_k}（q 的最后一维）。",
    ),
    *exact(
        {
            "the weights are transposed: weights[..., i, j] must be how much query i attends to key j. "
            "Use q @ k.transpose(-2, -1), not k @ q.transpose(-2, -1).": (
                "权重被转置了：weights[..., i, j] 必须是查询 i 对键 j 的关注程度。"
                "请用 q @ k.transpose(-2, -1)，而不是 k @ q.transpose(-2, -1)。"
            ),
            "softmax over the wrong dim: your columns sum to 1, not your rows. Each query spreads one unit "
            "of attention over the keys: torch.softmax(scores, dim=-1).": (
                "softmax 的维度不对：你的权重每一列和为 1，而不是每一行。每个查询把一个单位的注意力分给各个键："
                "torch.softmax(scores, dim=-1)。"
            ),
            "the mask is ignored: scores where the mask is False must be filled with -inf before the softmax.": (
                "掩码被忽略了：掩码为 False 处的分数必须在 softmax 之前填成 -inf。"
            ),
            "you applied the mask after the softmax: the blocked weights are zeroed, but the remaining ones "
            "no longer sum to 1 (the blocked keys still took their share). Fill the blocked *scores* with "
            "-inf before the softmax: scores.masked_fill(~mask, float('-inf')), then softmax.": (
                "你在 softmax 之后才施加掩码：被屏蔽的权重置零了，"
                "但剩下的权重之和不再是 1（被屏蔽的键仍分走了它们的份额）。"
                "请在 softmax 之前把被屏蔽的*分数*填成 -inf：scores.masked_fill(~mask, float('-inf'))，再做 softmax。"
            ),
            "you added the mask to the scores as numbers (True -> +1, False -> 0): a blocked key only loses "
            "1 from its score and keeps most of its weight. A boolean mask selects: "
            "scores.masked_fill(~mask, float('-inf')) (an additive mask would hold 0 and -inf).": (
                "你把掩码当作数值加到了分数上（True -> +1，False -> 0）：被屏蔽的键的分数只少了 1，"
                "权重大都还在。布尔掩码是用来选择的：scores.masked_fill(~mask, float('-inf'))"
                "（加性掩码里存的应是 0 和 -inf）。"
            ),
            "the mask convention is flipped: you blocked the True positions. Here True = may attend "
            "(as in F.scaled_dot_product_attention), so fill where the mask is False: "
            "scores.masked_fill(~mask, float('-inf')).": (
                "掩码约定反了：你屏蔽的是 True 的位置。这里 True = 允许关注（与 F.scaled_dot_product_attention 相同），"
                "所以要在掩码为 False 处填充：scores.masked_fill(~mask, float('-inf'))。"
            ),
            "the weights contain NaN on rows that do see some key. Fill blocked scores with a large negative "
            "number (or -inf) *before* the softmax, and never where the mask is True.": (
                "在确实能看到某些键的行上，权重出现了 NaN。请在 softmax *之前*把被屏蔽的分数填成一个很大的负数"
                "（或 -inf），并且绝不要填在掩码为 True 的地方。"
            ),
            "no scale: divide the scores by √d_k before the softmax.": "没有缩放：在 softmax 之前把分数除以 √d_k。",
            "you multiplied by √d_k; divide by it.": "你乘了 √d_k；应该除以它。",
            # not a verdict: the note check_sdpa prints under a ✅ when a fully masked row gets NaN
            "note: a query whose keys are ALL masked gets NaN weights (softmax of a row of -inf). "
            "Fine for a causal mask, but padding queries hit it. Fill with torch.finfo(dtype).min instead "
            "of -inf, or zero such rows afterwards (attn_core returns zero weights there).": (
                "注意：所有键都被屏蔽的查询会得到 NaN 权重（对一整行 -inf 做 softmax）。因果掩码下没问题，"
                "但填充查询会碰上。请用 torch.finfo(dtype).min 代替 -inf 来填充，或者事后把这样的行置零"
                "（attn_core 在那里返回全零的权重）。"
            ),
        }
    ),
    # ---- check_causal_mask ("for q_len=.., k_len=.. problem")
    (
        r"for q_len=(?P<q>\d+), k_len=(?P<k>\d+) (?P<problem>.*)",
        "当 q_len={q}、k_len={k} 时，{problem!t}",
    ),
    (r"return a torch\.Tensor, got (?P<type>[\w.]+)\.", "请返回 torch.Tensor，你返回的是 {type}。"),
    (
        rf"got shape (?P<shape>{_SHAPE}) = \(k_len, q_len\); one row per query: \(q_len, k_len\)\.",
        "得到的形状是 {shape} = (k_len, q_len)；应当每个查询一行：(q_len, k_len)。",
    ),
    (
        rf"expected shape \(q_len, k_len\) = (?P<expected>{_SHAPE}), got (?P<got>{_SHAPE})\.",
        "形状应为 (q_len, k_len) = {expected}，得到的是 {got}。",
    ),
    (
        r"you returned an additive float mask \(0 / -inf, dtype (?P<dtype>[\w.]+)\)\. Return a torch\.bool "
        r"mask with True = may attend; ac\.mask_to_additive converts it when an API wants the additive form\.",
        "你返回的是加性的浮点掩码（0 / -inf，dtype 为 {dtype}）。请返回 True = 允许关注的 torch.bool 掩码；"
        "某个 API 需要加性形式时，用 ac.mask_to_additive 转换。",
    ),
    (
        r"right pattern, wrong dtype: (?P<dtype>[\w.]+) 0/1\. Masks here are torch\.bool with "
        r"True = may attend \(the convention of F\.scaled_dot_product_attention\); "
        r"(?:a float 0/1 mask passed as attn_mask is \*added\* to the scores \(\+0 or \+1: nothing blocked\)"
        r"|F\.scaled_dot_product_attention refuses an integer \((?P<int_dtype>[\w.]+)\) attn_mask, and older "
        r"nn\.MultiheadAttention read a uint8 mask as True = \*blocked\*, the opposite)\. "
        r"Return \.bool\(\) \(or build it with a comparison\)\.",
        _wrong_dtype,
    ),
    (
        r"wrong dtype \((?P<dtype>[\w.]+)\) and flipped: your 1s mark the \*blocked\* keys\. Return a "
        r"torch\.bool mask with True = may attend, i\.e\. torch\.tril\(\.\.\.\)\.bool\(\) rather than triu\.",
        "dtype 不对（{dtype}），而且反了：你的 1 标的是*被屏蔽*的键。请返回 True = 允许关注的 torch.bool 掩码，"
        "即 torch.tril(...).bool()，而不是 triu。",
    ),
    (
        r"return a torch\.bool mask \(True = may attend\), got dtype (?P<dtype>[\w.]+)\.",
        "请返回 torch.bool 掩码（True = 允许关注），你返回的 dtype 是 {dtype}。",
    ),
    (
        r"top-left alignment\. The rule is bottom-right for q_len > k_len too: the last query sees every key "
        r"and query i sees keys 0\.\.i\+\(k_len-q_len\), so the first q_len-k_len = (?P<n>\d+) queries see no "
        r"key at all \(as ac\.causal_mask\)\. A negative diagonal does it: "
        r"torch\.tril\(torch\.ones\(q_len, k_len, dtype=torch\.bool\), diagonal=k_len - q_len\)\.",
        "左上角对齐了。q_len > k_len 时规则同样是右下角对齐：最后一个查询看到所有键，查询 i 看到键 "
        "0..i+(k_len-q_len)，所以前 q_len-k_len = {n} 个查询一个键也看不到（与 ac.causal_mask 相同）。"
        "用负的对角线偏移即可：torch.tril(torch.ones(q_len, k_len, dtype=torch.bool), diagonal=k_len - q_len)。",
    ),
    (
        r"top-left alignment: query i sees keys 0\.\.i\. With a KV cache the (?P<q>\d+) queries are the "
        r"\*last\* (?P=q) of (?P<k>\d+) tokens, so query i sees keys 0\.\.i\+\(k_len-q_len\): "
        r"torch\.tril\(torch\.ones\(q_len, k_len, dtype=torch\.bool\), diagonal=k_len - q_len\)\.",
        "左上角对齐了：查询 i 看到键 0..i。有 KV 缓存时，这 {q} 个查询是 {k} 个词元中的*最后* {q} 个，"
        "所以查询 i 看到键 0..i+(k_len-q_len)："
        "torch.tril(torch.ones(q_len, k_len, dtype=torch.bool), diagonal=k_len - q_len)。",
    ),
    (
        r"entry (?P<entry>\([\d, ]*\)) is (?P<got>True|False), expected (?P<expected>True|False): "
        r"query i may attend to keys 0\.\.i\+\(k_len-q_len\)\.",
        "元素 {entry} 是 {got}，应为 {expected}：查询 i 可以关注键 0..i+(k_len-q_len)。",
    ),
    *exact(
        {
            "the mask is flipped: True marks the future keys (a triu mask, True = blocked, as in "
            "nn.MultiheadAttention). Here True = may attend: keep the lower triangle (torch.tril) instead.": (
                "掩码反了：True 标的是未来的键（triu 掩码，True = 屏蔽，nn.MultiheadAttention 的约定）。"
                "这里 True = 允许关注：请保留下三角（torch.tril）。"
            ),
            "off by one: the diagonal is excluded, so a token cannot see itself (diagonal=-1 or "
            "triu(..., 0)). A query may attend to its own position.": (
                "差了一位：对角线被排除了，词元看不到自己（diagonal=-1 或 triu(..., 0)）。查询可以关注它自己的位置。"
            ),
            "off by one: every query also sees the next (future) key. Shift the diagonal down by one.": (
                "差了一位：每个查询还能看到下一个（未来的）键。把对角线往下移一位。"
            ),
        }
    ),
    # ---- check_mha / check_gqa (and the layer checks of check_rope_mha)
    (
        r"your class should be an nn\.Module \(class \.\.\.\(nn\.Module\)\), got an instance of (?P<type>[\w.<>]+)\.",
        "你的类应当是 nn.Module（class ...(nn.Module)），得到的却是 {type} 的实例。",
    ),
    (
        r"no nn\.Linear attribute (?P<missing>[\w, ]+)\. Name the projections self\.q_proj, self\.k_proj, "
        r"self\.v_proj, self\.o_proj \(one nn\.Linear each\); found nn\.Linear attributes (?P<found>\[.*\])\.",
        "找不到 nn.Linear 属性 {missing}。请把投影命名为 self.q_proj、self.k_proj、self.v_proj、self.o_proj"
        "（各一个 nn.Linear）；找到的 nn.Linear 属性是 {found}。",
    ),
    (
        r"self\.(?P<p>\w+) maps (?P<a>\d+) -> (?P<b>\d+) features, expected (?P<c>\d+) -> (?P<d>\d+)\."
        r"(?P<gqa> In GQA the keys and values have num_kv_heads·head_dim = (?P<g>\d+)·(?P<hd>\d+) = (?P<kv>\d+) "
        r"features, not hidden_dim = (?P<hidden>\d+)(?P<mha> \(that is MHA-sized\))?\.)?",
        _projection_size,
    ),
    (
        rf"out has shape \(B, H, L, head_dim\) = (?P<shape>{_SHAPE}): merge the heads, then apply self\.o_proj\.",
        "out 的形状是 (B, H, L, head_dim) = {shape}：请合并各头，再作用 self.o_proj。",
    ),
    (
        rf"weights should have shape \(B, num_heads, L, L\) = (?P<expected>{_SHAPE}), got (?P<got>{_SHAPE})\.",
        "weights 的形状应为 (B, num_heads, L, L) = {expected}，得到的是 {got}。",
    ),
    (
        r"you applied a causal mask although the check passed (?P<what>no mask|a padding mask only): the `mask` "
        r"argument decides what a query sees \(mask=None: every key\)\. Apply the mask you are given, and add no "
        r"causal mask of your own\.",
        lambda m, tr: (
            "检查{what}，你却施加了因果掩码：查询能看到什么由参数 `mask` 决定（mask=None：所有键）。"
            "只施加传给你的掩码，不要自己再加因果掩码。"
        ).format(what={"no mask": "没有传入掩码", "a padding mask only": "只传入了填充掩码"}[m["what"]]),
    ),
    (
        rf"out is right but the returned weights are not \({_WORST}\): return the softmax weights \(B, H, L, L\)\.",
        "out 对了，返回的权重却不对（" + _WORST_ZH + "）：请返回 softmax 之后的权重 (B, H, L, L)。",
    ),
    (
        rf"the weights are right but out is not \({_WORST}\): the mistake comes after the softmax\. "
        rf"Check weights @ v, the merge \({_MERGE_FIX}\) and self\.o_proj\.",
        "权重对了，out 却不对（" + _WORST_ZH + "）：错误出在 softmax 之后。"
        "请检查 weights @ v、合并各头（" + _MERGE_FIX_ZH + "）和 self.o_proj。",
    ),
    *exact(
        {
            "wrong head split: you reshaped (B, L, hidden) straight to (B, H, L, head_dim), which cuts the "
            "*sequence* into heads. view(B, L, H, head_dim) first, then transpose(1, 2) (and transpose back "
            "before merging).": (
                "切分注意力头的方式不对：你把 (B, L, hidden) 直接 reshape 成 (B, H, L, head_dim)，"
                "这是把*序列*切成了各头。"
                "应先 view(B, L, H, head_dim)，再 transpose(1, 2)（合并之前再转置回来）。"
            ),
            "heads split AND merged with a bare reshape: (B, L, hidden) -> (B, H, L, head_dim) cuts the *sequence* "
            "into heads, and reshaping back does not undo it inside the attention. Split with view(B, L, H, head_dim) "
            "+ transpose(1, 2); merge with transpose(1, 2) back to (B, L, H, head_dim), then reshape to "
            "(B, L, hidden_dim).": (
                "切分和合并注意力头都只用了 reshape：(B, L, hidden) -> (B, H, L, head_dim) 把*序列*切成了各头，"
                "注意力算完再 reshape 回去也无法挽回。切分用 view(B, L, H, head_dim) + transpose(1, 2)；"
                "合并时" + _MERGE_FIX_ZH + "。"
            ),
            "heads merged without the transpose: reshaping (B, H, L, head_dim) straight to (B, L, hidden_dim) mixes "
            "tokens of one head into one row. transpose(1, 2) back to (B, L, H, head_dim), then reshape to "
            "(B, L, hidden_dim).": (
                "合并注意力头时没有转置：把 (B, H, L, head_dim) 直接 reshape 成 (B, L, hidden_dim)，"
                "会把同一个头的多个词元混进一行。" + _MERGE_FIX_ZH + "。"
            ),
            "V comes from k_proj: use self.v_proj(x) for the values "
            "(every shape is right; only a reference test catches this).": (
                "V 来自 k_proj：值要用 self.v_proj(x)（所有形状都对；只有与参考实现比较才能发现）。"
            ),
            "the output projection is missing: return self.o_proj(merged heads).": (
                "缺了输出投影：请返回 self.o_proj(合并后的各头)。"
            ),
            "scores scaled by √hidden_dim; the scale is per head: 1/√head_dim (head_dim = hidden_dim // num_heads).": (
                "分数按 √hidden_dim 缩放了；缩放是按头算的：1/√head_dim（head_dim = hidden_dim // num_heads）。"
            ),
            "the 1/√head_dim scale is missing.": "缺了 1/√head_dim 的缩放。",
            "softmax over the wrong dim (-2, the queries): each query spreads one unit of attention over the "
            "keys, so normalise over the last dim: scores.softmax(dim=-1).": (
                "softmax 的维度不对（-2，即查询这一维）：每个查询把一个单位的注意力分给各个键，"
                "所以要在最后一维上归一化：scores.softmax(dim=-1)。"
            ),
            "K/V heads expanded with .repeat (tiles kv heads 0,1,0,1): query heads 2h and 2h+1 must share kv head h. "
            "Use repeat_interleave(num_heads // num_kv_heads, dim=1).": (
                "KV 头是用 .repeat 扩展的（平铺成 KV 头 0,1,0,1）：查询头 2h 和 2h+1 必须共用 KV 头 h。"
                "请用 repeat_interleave(num_heads // num_kv_heads, dim=1)。"
            ),
            "the mask is ignored: scores where mask is False must become -inf.": (
                "掩码被忽略了：mask 为 False 处的分数必须变成 -inf。"
            ),
            "the mask is applied after the softmax: zeroing blocked weights leaves rows that sum to less than 1. "
            "Fill the blocked *scores* with -inf before the softmax: scores.masked_fill(~mask, float('-inf')).": (
                "掩码是在 softmax 之后施加的：把被屏蔽的权重置零，各行之和就小于 1 了。"
                "请在 softmax 之前把被屏蔽的*分数*填成 -inf：scores.masked_fill(~mask, float('-inf'))。"
            ),
            "the mask convention is flipped: True = may attend here, so fill the scores where "
            "the mask is False: scores.masked_fill(~mask, float('-inf')).": (
                "掩码约定反了：这里 True = 允许关注，所以要在掩码为 False 处填充分数："
                "scores.masked_fill(~mask, float('-inf'))。"
            ),
            "the padding mask blocked the padded query ROWS instead of the padded KEYS: a "
            "(B, 1, 1, L) padding mask indexes the keys (the last axis), so that no query sees a padded "
            "key. Use it as given (it broadcasts over heads and queries); do not transpose it.": (
                "填充掩码屏蔽的是填充位置的查询行，而不是填充位置的键：(B, 1, 1, L) 的填充掩码索引的是键"
                "（最后一维），好让没有查询能看到填充键。请原样使用它（它会在头和查询上广播）；不要转置。"
            ),
            "out contains NaN: is a query row fully masked, or the mask applied where it is True?": (
                "out 中有 NaN：是不是某个查询行被完全屏蔽了，或者掩码施加在了 True 的位置？"
            ),
        }
    ),
]
