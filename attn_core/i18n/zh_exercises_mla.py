"""Chinese for the graders of notebook 09 (``attn_core/exercises/mla.py``).

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). The
variable parts (shapes, numbers, configs, type names) are named groups and stay as the grader printed them.
"""

from __future__ import annotations

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 3, 8), (5,), ()
_WHAT = r"(?P<what>the absorbed query|the rotary key)"  # `what` of _shape_dtype_problem, translated with !t

CATALOG = [
    # the names of the three checks (the start of every verdict line), and the `what` of the shape checks
    *exact(
        {
            "MLA cache bytes per token": "MLA 每个词元的缓存字节数",
            "the absorbed query": "吸收后的查询",
            "the decoupled rotary key": "解耦的旋转键",
            "the rotary key": "旋转键",
        }
    ),
    # ---- exercise 1: cache bytes per token
    (
        r"return a number \(bytes, an int\), got (?P<type>[\w.]+)\.",
        "请返回一个数（字节数，整数），你返回的是 {type}。",
    ),
    (
        r"for (?P<config>\{[^{}]*\}) at (?P<b>\d+) bytes per element you returned (?P<answer>.+?), "
        r"expected (?P<expected>[\d,]+): num_hidden_layers · \(kv_lora_rank \+ qk_rope_head_dim\) · "
        r"bytes_per_element\.",
        "对配置 {config}、每个元素 {b} 字节，你返回了 {answer}，应为 {expected}："
        "num_hidden_layers · (kv_lora_rank + qk_rope_head_dim) · bytes_per_element。",
    ),
    (
        r"for (?P<config>\{[^{}]*\}) at (?P<b>\d+) bytes per element you returned (?P<answer>.+?): "
        r"(?P<diagnosis>.*)",
        "对配置 {config}、每个元素 {b} 字节，你返回了 {answer}：{diagnosis!t}",
    ),
    # what is wrong with the count (after "... you returned N: ")
    (
        r"you forgot the rotary part: besides the latent \(kv_lora_rank numbers\) MLA caches the shared rotated "
        r"key k_rope \(qk_rope_head_dim numbers\) per token per layer\.",
        "你漏掉了旋转部分：除了潜在向量（kv_lora_rank 个数），MLA 每个词元、每层还要缓存共享的旋转后的键 k_rope"
        "（qk_rope_head_dim 个数）。",
    ),
    (
        r"you counted per-head keys and values \(heads · \(nope \+ rope \+ v\)\): that is what the naive, "
        r"up-projected form builds for one step, not what MLA caches\. The cache holds the latent and one shared "
        r"k_rope\.",
        "你算的是逐头的键和值（heads · (nope + rope + v)）：那是朴素的上投影形式在一步中构造出来的东西，"
        "不是 MLA 缓存的内容。缓存里存的是潜在向量和一个共享的 k_rope。",
    ),
    (
        r"you counted an MHA-style cache of per-head keys and values: MLA caches the latent and one shared k_rope\.",
        "你算的是 MHA 式的逐头 KV 缓存：MLA 缓存的是潜在向量和一个共享的 k_rope。",
    ),
    (
        r"you counted v_head_dim as well: the values are up-projected from the same latent \(W_UV\), nothing "
        r"extra is cached for them\.",
        "你把 v_head_dim 也算进去了：值是由同一个潜在向量上投影（W_UV）得到的，不必为它们额外缓存任何东西。",
    ),
    (
        r"you doubled the count as for K and V: the latent serves as both \(W_UK and W_UV read it\), count it once\.",
        "你像分别存 K 和 V 那样把数量翻了倍：潜在向量同时充当两者（W_UK 和 W_UV 都读取它），只算一次。",
    ),
    (
        r"you cached a rotary key per head: DeepSeek's decoupled rotary key is ONE \(qk_rope_head_dim,\) vector per "
        r"token, shared by all heads \(like MQA\)\.",
        "你为每个头缓存了一个旋转键：DeepSeek 的解耦旋转键每个词元只有一个 (qk_rope_head_dim,) 向量，"
        "由所有头共享（就像 MQA）。",
    ),
    (
        r"that is one layer: multiply by num_hidden_layers\.",
        "这只是一层：还要乘以 num_hidden_layers。",
    ),
    (
        r"that is the number of elements: multiply by bytes_per_element \(2 for bf16\)\.",
        "这是元素个数：还要乘以 bytes_per_element（bf16 为 2）。",
    ),
    (
        r"that is bits, not bytes: drop the factor 8\.",
        "这是比特数，不是字节数：去掉因子 8。",
    ),
    # ---- exercises 2 and 3: the answer's type, shape, dtype (what = the absorbed query / the rotary key)
    (
        rf"expected a torch\.Tensor \({_WHAT}, shape (?P<shape>{_SHAPE})\), got (?P<type>[\w.]+)\.",
        "应返回 torch.Tensor（{what!t}，形状为 {shape}），你返回的是 {type}。",
    ),
    (
        rf"wrong shape (?P<shape>{_SHAPE}) for {_WHAT}, expected (?P<expected>{_SHAPE}): (?P<hint>.*)",
        "{what!t}的形状 {shape} 不对，应为 {expected}：{hint!t}",
    ),
    (
        rf"{_WHAT} has dtype (?P<dtype>[\w.]+), expected (?P<expected>[\w.]+) \(keep the input's dtype\)\.",
        "{what!t}的 dtype 是 {dtype}，应为 {expected}（请保持输入的 dtype）。",
    ),
    (
        rf"{_WHAT} contains NaN or inf\.",
        "{what!t}中含有 NaN 或 inf。",
    ),
    # the hints after "wrong shape ...: "
    (
        r"it lives in the latent space, \(B, H, L, kv_lora_rank\): q_nope @ w_uk with w_uk \(H, nope, r\)\.",
        "它位于潜在空间，形状为 (B, H, L, kv_lora_rank)：q_nope @ w_uk，其中 w_uk 为 (H, nope, r)。",
    ),
    (
        r"take the LAST qk_rope_head_dim = (?P<rope>\d+) features \(compressed_kv\[\.\.\., kv_lora_rank:\]\), "
        r"rotate, add a head axis\.",
        "取最后 qk_rope_head_dim = {rope} 个特征（compressed_kv[..., kv_lora_rank:]），旋转，再加一个头轴。",
    ),
    # ---- exercise 2: the absorbed query
    (
        r"your function raised RuntimeError: (?P<error>.*) \(w_uk is \(H, nope, r\): q_nope @ w_uk multiplies over "
        r"nope; no transpose is needed\.\)",
        "你的函数抛出了 RuntimeError：{error!o}"
        "（w_uk 的形状是 (H, nope, r)：q_nope @ w_uk 在 nope 维上相乘，不需要转置。）",
    ),
    (
        rf"q_nope (?P<q>{_SHAPE}), w_uk (?P<w>{_SHAPE}): (?P<diagnosis>.*)",
        "当 q_nope 为 {q}、w_uk 为 {w} 时：{diagnosis!t}",
    ),
    (
        r"you used W_UK transposed: k_nope = c @ w_uk\.T, so the scores are q_nope @ w_uk @ c\.T; the query is "
        r"multiplied by w_uk itself \(over its nope axis\), not by w_uk\.T\.",
        "你用了转置的 W_UK：k_nope = c @ w_uk.T，所以分数是 q_nope @ w_uk @ c.T；"
        "查询乘的是 w_uk 本身（在它的 nope 轴上），而不是 w_uk.T。",
    ),
    (
        r"you summed W_UK over the heads: each head has its own W_UK, so each head's query gets its own\.",
        "你把 W_UK 在各个头上求和了：每个头都有自己的 W_UK，所以每个头的查询要用它自己的那个。",
    ),
    (
        r"you used head 0's W_UK for every head: broadcast the \(H, nope, r\) weight over the heads\.",
        "你让每个头都用 0 号头的 W_UK：应把形状为 (H, nope, r) 的权重在各个头上广播。",
    ),
    (
        r"you folded a softmax scale of nope\*\*-0\.5 into the query: the scale belongs to the scores, and MLA's "
        r"is \(nope \+ rope\)\*\*-0\.5; return the plain absorbed query\.",
        "你把 nope**-0.5 的 softmax 缩放因子折叠进了查询：缩放属于分数，而且 MLA 的缩放因子是 (nope + rope)**-0.5；"
        "请返回不带缩放的吸收后查询。",
    ),
    (
        r"you folded a softmax scale of kv_lora_rank\*\*-0\.5 into the query: the absorbed query lives in the "
        r"latent space, but the scores keep MLA's scale \(nope \+ rope\)\*\*-0\.5, applied to the scores; return "
        r"the plain absorbed query\.",
        "你把 kv_lora_rank**-0.5 的 softmax 缩放因子折叠进了查询：吸收后的查询位于潜空间，但分数的缩放仍是 MLA 的 "
        "(nope + rope)**-0.5，而且作用在分数上；请返回不带缩放的吸收后查询。",
    ),
    (
        r"wrong numbers; the absorbed query is q_nope @ w_uk \(per head\)\.",
        "数值不对；吸收后的查询是 q_nope @ w_uk（逐头相乘）。",
    ),
    # ---- exercise 3: the decoupled rotary key
    (
        rf"you returned (?P<shape>{_SHAPE}): a rotary key per head\. DeepSeek's rotary key is shared: cache ONE head "
        rf"\(B, 1, T, rope\) = (?P<expected>{_SHAPE}) and let it broadcast over the query heads\.",
        "你返回的是 {shape}：每个头一个旋转键。DeepSeek 的旋转键是共享的：只缓存一个头 (B, 1, T, rope) = {expected}，"
        "让它在各个查询头上广播。",
    ),
    (
        rf"you returned (?P<shape>{_SHAPE}): the head axis is in the wrong place, \(B, T, 1, rope\) is the layout of "
        rf"a projection's output before \.transpose\(1, 2\)\. The cache is \(B, 1, T, rope\) = (?P<expected>{_SHAPE}): "
        r"k_rope\[:, None\] \(or \.transpose\(1, 2\)\)\.",
        "你返回的是 {shape}：头轴的位置不对，(B, T, 1, rope) 是投影输出在 .transpose(1, 2) 之前的布局。"
        "缓存的形状是 (B, 1, T, rope) = {expected}：用 k_rope[:, None]（或 .transpose(1, 2)）。",
    ),
    (
        rf"add the head axis: \(B, 1, T, rope\) = (?P<expected>{_SHAPE}), e\.g\. k_rope\[:, None\]\.",
        "请加上头轴：(B, 1, T, rope) = {expected}，例如 k_rope[:, None]。",
    ),
    (
        rf"compressed_kv (?P<shape>{_SHAPE}), kv_lora_rank (?P<rank>\d+), positions (?P<positions>\[[\d, ]*\]): "
        r"(?P<diagnosis>.*)",
        "当 compressed_kv 为 {shape}、kv_lora_rank 为 {rank}、positions 为 {positions} 时：{diagnosis!t}",
    ),
    (
        r"the key is not rotated: apply RoPE to k_rope \(that is the point of the decoupled key\)\.",
        "键没有旋转：要对 k_rope 施加 RoPE（这正是解耦旋转键的用意）。",
    ),
    (
        r"wrong layout: you rotated \(i, i \+ D/2\) pairs \(rotate-half\); DeepSeek's checkpoints pair adjacent "
        r"features \(2i, 2i\+1\): apply_rope\(\.\.\., interleaved=True\)\.",
        "布局不对：你旋转的是 (i, i + D/2) 配对（rotate-half）；DeepSeek 的检查点把相邻特征 (2i, 2i+1) 配成一对："
        "apply_rope(..., interleaved=True)。",
    ),
    (
        r"you took the FIRST rope features: kv_a_proj_with_mqa outputs \[latent \| k_rope\], the rotary key is the "
        r"last qk_rope_head_dim features\.",
        "你取的是最前面的 rope 个特征：kv_a_proj_with_mqa 的输出是 [latent | k_rope]，"
        "旋转键是最后 qk_rope_head_dim 个特征。",
    ),
    (
        r"you ignored `positions` and rotated at 0\.\.T-1: a decoding step's key sits at its absolute position\.",
        "你忽略了 `positions`，按 0..T-1 做了旋转：解码步骤中的键位于它的绝对位置上。",
    ),
    (
        r"the right rotated numbers in Hugging Face's de-interleaved order \(features 0, 2, 4, \.\.\. then 1, 3, "
        r"5, \.\.\.: what apply_rotary_pos_emb_interleave returns\)\. Inside a model that order is harmless when "
        r"q_rope gets the same permutation \(the scores do not change\), but this cache keeps DeepSeek's order, "
        r"each pair \(2i, 2i\+1\) in place: ac\.apply_rope\(\.\.\., interleaved=True\)\.",
        "数值是对的旋转结果，但用的是 Hugging Face 的去交错顺序（先是特征 0, 2, 4, ...，再是 1, 3, 5, ...："
        "即 apply_rotary_pos_emb_interleave 的返回值）。在模型内部，只要 q_rope 也做同样的置换，这个顺序无害"
        "（分数不变）；但这个缓存保持 DeepSeek 的顺序，每一对 (2i, 2i+1) 留在原位："
        "ac.apply_rope(..., interleaved=True)。",
    ),
    (
        r"you ignored `base` and rotated with 10000: use the base you were given \((?P<base>[\w.+-]+)\)\.",
        "你忽略了 `base`，按 10000 做了旋转：请用传给你的 base（{base}）。",
    ),
    (
        r"wrong numbers; rotate compressed_kv\[\.\.\., kv_lora_rank:\] at `positions`\.",
        "数值不对；请在 `positions` 处旋转 compressed_kv[..., kv_lora_rank:]。",
    ),
]
