"""Chinese for the graders of notebook 06 (``attn_core/exercises/rope.py``).

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). A verdict is
``"{where}: {problem}"``; the case (a shape, positions and base; a decoding step; head counts) becomes the start
of the Chinese sentence with its numbers as printed, and the problem is translated on its own (``{problem!t}``).
"""

from __future__ import annotations

from attn_core.exercises.rope import (
    IGNORED_POSITIONS,
    REPEAT_INTERLEAVED_COS,
    UNCHANGED,
    WRONG_DIRECTION,
    WRONG_FREQUENCY,
    WRONG_LAYOUT,
)
from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 3, 4, 16)
_X = rf"x (?P<x>{_SHAPE})"
_ROPE_WHERE = rf"{_X}, positions (?P<positions>\[[-\d, ]*\]), base (?P<base>[\w.+-]+)"
_ROPE_WHERE_ZH = "当 x 的形状为 {x}、positions 为 {positions}、base 为 {base} 时，"
_STEP = r"step (?P<step>\d+) \(cache of (?P<cached>\d+) tokens\)"
_HEADS = r"num_heads=(?P<heads>\d+), head_dim=(?P<head_dim>\d+)"
_HEADS_ZH = "当 num_heads={heads}、head_dim={head_dim} 时，"


CATALOG = [
    # the names of the three checks (the start of every verdict line)
    *exact(
        {
            "RoPE, rotate-half layout": "RoPE（rotate-half 布局）",
            "decoding step with RoPE and a KV cache": "带 RoPE 和 KV 缓存的一步解码",
            "Meta / Llama-GGUF rows -> Hugging Face rows": "Meta / Llama 系 GGUF 的行 -> Hugging Face 的行",
        }
    ),
    # ---- the cases a verdict is about
    (
        rf"{_ROPE_WHERE}: (?P<problem>.+)",
        _ROPE_WHERE_ZH + "{problem!t}",
    ),
    (
        rf"{_X}: (?P<problem>.+)",
        "当 x 的形状为 {x} 时，{problem!t}",
    ),
    (
        rf"{_STEP}: (?P<problem>.+)",
        "第 {step} 步（缓存中有 {cached} 个词元）：{problem!t}",
    ),
    (
        rf"{_HEADS}: (?P<problem>.+)",
        _HEADS_ZH + "{problem!t}",
    ),
    # ---- a tensor that does not look like the expected one (exercises 1 and 3)
    *exact({"the rotated x": "旋转后的 x", "the reordered weight": "重新排序后的权重"}),
    (
        rf"return one tensor, (?P<what>.+?) of shape (?P<shape>{_SHAPE}), not a tuple of two\.",
        "请返回一个张量，即形状为 {shape} 的{what!t}，而不是由两个张量组成的元组。",
    ),
    (
        rf"expected a torch\.Tensor \((?P<what>.+?), shape (?P<shape>{_SHAPE})\), got (?P<type>[\w.]+)\.",
        "应为 torch.Tensor（{what!t}，形状为 {shape}），你返回的是 {type}。",
    ),
    (
        rf"wrong shape (?P<shape>{_SHAPE}), expected (?P<expected>{_SHAPE}): RoPE keeps the shape of its "
        r"input \(\.\.\., L, D\); build cos/sin of shape \(L, D/2\) or \(L, D\) and let them broadcast\.",
        "形状 {shape} 不对，应为 {expected}：RoPE 保持输入的形状 (..., L, D)；"
        "请构造形状为 (L, D/2) 或 (L, D) 的 cos/sin，让它们广播。",
    ),
    (
        r"your answer is complex \((?P<dtype>[\w.]+)\): after multiplying by e\^\(i·angle\), turn the pairs back "
        r"into real features with torch\.view_as_real\(\.\.\.\)\.flatten\(-2\) \(and keep the input's layout\)\.",
        "你的答案是复数（{dtype}）：乘以 e^(i·angle) 之后，请用 torch.view_as_real(...).flatten(-2) "
        "把各对变回实数特征（并保持输入的布局）。",
    ),
    (
        r"your answer has dtype (?P<dtype>[\w.]+), the input was (?P<expected>[\w.]+): RoPE must keep the dtype "
        r"\(compute the angles in float64 if you like, then cast cos/sin with \.to\(x\.dtype\)\)\.",
        "你的答案的 dtype 是 {dtype}，输入却是 {expected}：RoPE 必须保持 dtype"
        "（愿意的话可以用 float64 计算角度，再用 .to(x.dtype) 转换 cos/sin）。",
    ),
    (r"your answer contains NaN or inf\.", "你的答案中含有 NaN 或 inf。"),
    # ---- exercise 1: rotate-half RoPE from scratch
    *exact(
        {
            WRONG_LAYOUT: "布局不对：你旋转的是相邻的对 (2i, 2i+1)，"
            "这是 RoFormer / Meta 的 Llama / Llama 系 GGUF 的交错布局。"
            "这道练习要求的是 rotate-half（Llama / Hugging Face）布局：第 i 对是 (x[i], x[i + D/2])。",
            WRONG_DIRECTION: "你的旋转方向反了（转了 −angle）：rotate_half(x) 是 cat(−x2, x1)，而不是 "
            "cat(x2, −x1)；旋转后的一对是 (x1·cos − x2·sin, x1·sin + x2·cos)。",
            WRONG_FREQUENCY: "频率公式不对：第 i 对每个位置应转 base^(-2i/D)（torch.arange(0, D, 2) / D）；"
            "你用的是 base^(-i/D)，所以低频的对转得太快。",
            IGNORED_POSITIONS: "你忽略了 `positions`，用的是 0, 1, ..., L-1：请用传给你的位置"
            "（解码中的某一步或平移过的片段并不从 0 开始）。",
            UNCHANGED: "你的函数原样返回了 x：请把每一对旋转 position · θ_i。",
            REPEAT_INTERLEAVED_COS: "cos/sin 是按交错布局排列的"
            "（angles.repeat_interleave(2, dim=-1)：θ0, θ0, θ1, θ1, ...），却用在了 rotate-half 上，"
            "而 rotate-half 把 x[i] 和 x[i + D/2] 配成一对：特征 i 和特征 i + D/2 必须转相同的 θ_i，"
            "所以要把角度按前后两半重复，torch.cat([angles, angles], dim=-1)。",
        }
    ),
    (
        r"the angles were computed in float32: your answer is off by (?P<error>\S+)\. float32 keeps 24 bits, so "
        r"θ_i = base\^\(-2i/D\) is rounded \(relative error up to 7e-8\) and so is position·θ_i \(to a multiple of "
        r"2\^-8 ≈ 0\.004 rad between 32,768 and 65,536 rad\); only pair 0's angle, position · 1, is exact\. Measured "
        r"for D = 64, base 10,000: angles off by up to 7e-4 rad at position 65,535, and up to 2\.4e-3 rad at positions "
        r"below 65,536\. Compute positions·θ in float64 \(positions\.to\(torch\.float64\) times a float64 θ\), then "
        r"cast cos and sin to x\.dtype\.",
        "角度是用 float32 计算的：你的答案偏差了 {error}。float32 只有 24 位有效二进制位，所以 θ_i = base^(-2i/D) "
        "会被舍入（相对误差最多 7e-8），position·θ_i 也会被舍入（在 32,768 到 65,536 弧度之间舍入到 2^-8 ≈ 0.004 "
        "弧度的整数倍）；只有第 0 对的角度 position · 1 是精确的。在 D = 64、base 10,000 下实测：位置 65,535 处角度"
        "最多偏差 7e-4 弧度，65,536 以下的各位置最多偏差 2.4e-3 弧度。请用 float64 计算 positions·θ"
        "（positions.to(torch.float64) 乘以 float64 的 θ），再把 cos 和 sin 转成 x.dtype。",
    ),
    (
        r"you ignored `base` and used 10000: use the base you were given \((?P<base>[\w.+-]+)\)\.",
        "你忽略了 `base`，用的是 10000：请用传给你的 base（{base}）。",
    ),
    (
        r"off by one: you rotated the token at position m by \((?P<shift>m [+−] 1)\) · θ\. Use the positions as "
        r"given: the token at position m turns by m · θ_i \(position 0 is not turned\)\.",
        "差了一个：你把位置 m 的词元转了 ({shift}) · θ。请按给定的位置旋转：位置 m 的词元转 m · θ_i（位置 0 不转）。",
    ),
    (
        r"wrong values, largest error (?P<error>\S+) at position (?P<position>\d+)\. Check cos/sin: angles "
        r"positions\[:, None\] · θ with θ_i = base\^\(-2i/D\), repeated for both halves\.",
        "数值不对，最大误差 {error}，出现在位置 {position}。请检查 cos/sin：角度为 positions[:, None] · θ，"
        "其中 θ_i = base^(-2i/D)，并在前后两半上各重复一次。",
    ),
    # ---- exercise 2: one decoding step with a KV cache
    (
        r"return three things, \(out, cache_k, cache_v\); got a (?P<kind>tuple|list) of (?P<count>\d+)\.",
        "请返回三样东西 (out, cache_k, cache_v)；你返回的是含 {count} 个元素的 {kind}。",
    ),
    (
        r"return three things, \(out, cache_k, cache_v\); got (?P<type>[\w.]+)\.",
        "请返回三样东西 (out, cache_k, cache_v)；你返回的是 {type}。",
    ),
    (
        rf"(?P<what>out|cache_k|cache_v) should be a real tensor of shape (?P<shape>{_SHAPE}), got (?P<got>.+?)\. "
        r"Append the new key/value along the sequence axis \(dim=-2\)\.",
        "{what} 应为形状 {shape} 的实数张量，你给的是 {got}。请沿序列轴（dim=-2）追加新的键/值。",
    ),
    (
        rf"(?P<what>out|cache_k|cache_v) should be a real tensor of shape (?P<shape>{_SHAPE}), got (?P<got>.+?)\.",
        "{what} 应为形状 {shape} 的实数张量，你给的是 {got}。",
    ),
    (r"out contains NaN or inf\.", "out 中含有 NaN 或 inf。"),
    (
        r"you changed the cached values: keep cache_v as it is and append the new v\.",
        "你改动了缓存的值：cache_v 要保持原样，只在末尾追加新的 v。",
    ),
    (
        r"you rotated V: RoPE turns only q and k, so that the score q·k depends on their distance; the "
        r"values carry content and must be cached as they are\.",
        "你旋转了 V：RoPE 只转动 q 和 k，使分数 q·k 取决于两者的距离；值承载的是内容，必须原样缓存。",
    ),
    (
        r"the value you appended to cache_v is wrong: append the new v itself\.",
        "你追加到 cache_v 的值不对：请追加新的 v 本身。",
    ),
    (
        r"you rotated the cached keys again: they were rotated once, at their own positions, when they were "
        r"cached\. Rotate only the new q and k\.",
        "你把缓存中的键又旋转了一遍：它们在存入缓存时已经按各自的位置旋转过一次。只旋转新的 q 和 k。",
    ),
    (
        r"you changed the cached keys: keep cache_k as it is and append the new rotated key\.",
        "你改动了缓存的键：cache_k 要保持原样，只在末尾追加旋转后的新键。",
    ),
    (
        r"positions restarted at 0: the new token was rotated as position 0 \(RoPE at position 0 is the "
        r"identity\), as if it were the first token\. Its position is the number of tokens already cached: "
        r"cache_k\.shape\[-2\] \(here (?P<t>\d+)\)\.",
        "位置从 0 重新开始了：新词元被当作位置 0 来旋转（位置 0 处的 RoPE 是恒等变换），仿佛它是第一个词元。"
        "它的位置是已缓存的词元数：cache_k.shape[-2]（这里是 {t}）。",
    ),
    (
        r"your cache holds the new key BEFORE rotation: rotate k first, then append it\. Keys are rotated once, "
        r"before caching; a cache of raw keys must be rotated again, all T of them, at every step\.",
        "你的缓存里存的是旋转之前的新键：请先旋转 k，再追加。键只在缓存之前旋转一次；"
        "缓存未旋转的键，就得在每一步把全部 T 个键重新旋转一遍。",
    ),
    (
        r"off by one: you rotated the new key at position (?P<found>\d+); tokens 0\.\.(?P<last>\d+) are cached, "
        r"so the new one is at position cache_k\.shape\[-2\] = (?P<t>\d+)\.",
        "差了一个：你在位置 {found} 旋转了新键；已缓存的是词元 0..{last}，所以新词元的位置是 cache_k.shape[-2] = {t}。",
    ),
    (
        r"you rotated the new key at position (?P<found>\d+); it is at position cache_k\.shape\[-2\] = (?P<t>\d+)\.",
        "你在位置 {found} 旋转了新键；它的位置是 cache_k.shape[-2] = {t}。",
    ),
    (
        r"the key you appended is not k rotated at position (?P<t>\d+): rotate k \(rotate-half layout\) at "
        r"position cache_k\.shape\[-2\], then append it\.",
        "你追加的键不是在位置 {t} 旋转后的 k：请在位置 cache_k.shape[-2] 旋转 k（rotate-half 布局），再追加。",
    ),
    (
        r"the cache is right, but the query is not rotated \(or rotated at position 0, where RoPE is the "
        r"identity\): rotate q AND k at the new token's position, cache_k\.shape\[-2\] = (?P<t>\d+)\.",
        "缓存对了，但查询没有旋转（或在位置 0 旋转了，而 RoPE 在位置 0 是恒等变换）：q 和 k 都要在新词元的位置上"
        "旋转，即 cache_k.shape[-2] = {t}。",
    ),
    (
        r"the cache is right, but you rotated the query at position (?P<p>\d+): q and k of the new token share "
        r"its position, cache_k\.shape\[-2\] = (?P<t>\d+)\.",
        "缓存对了，但你在位置 {p} 旋转了查询：新词元的 q 和 k 共用它的位置，cache_k.shape[-2] = {t}。",
    ),
    (
        r"your one new query saw only key 0: F\.scaled_dot_product_attention\(is_causal=True\) aligns the mask "
        r"top-left, so with 1 query and T\+1 keys it hides all but the first\. One new query may see every "
        r"cached key: pass no mask \(or a bottom-right one, ac\.causal_mask\(1, T \+ 1\)\)\.",
        "你唯一的新查询只看到了键 0：F.scaled_dot_product_attention(is_causal=True) 按左上角对齐掩码，"
        "所以 1 个查询对 T+1 个键时，除了第一个键，其余全被遮住。一个新查询可以看到所有缓存的键："
        "不传掩码即可（或传一个按右下角对齐的掩码，ac.causal_mask(1, T + 1)）。",
    ),
    (
        r"the cache is right but the output is not: attend with the rotated q over the whole updated cache "
        r"\(scale 1/√D; no mask is needed for one query\)\.",
        "缓存对了，输出却不对：请用旋转后的 q 在整个更新后的缓存上做注意力（缩放 1/√D；一个查询不需要掩码）。",
    ),
    # ---- exercise 3: Meta / Llama-GGUF rows to Hugging Face rows
    (
        rf"you returned the transposed weight (?P<shape>{_SHAPE}): keep \(out_features, in_features\) = "
        rf"(?P<expected>{_SHAPE}) and reorder its rows\.",
        "你返回的是转置后的权重 {shape}：请保持 (out_features, in_features) = {expected}，只重新排列它的行。",
    ),
    (
        r"you applied the inverse permutation \(Hugging Face -> GGUF, as in llama\.cpp's convert_hf_to_gguf\.py\)\. "
        r"From interleaved to half, each head's rows become \[0, 2, 4, \.\.\., D-2, 1, 3, \.\.\., D-1\]: "
        r"view\(H, D/2, 2, hidden\)\.transpose\(1, 2\)\.",
        "你用的是逆置换（Hugging Face -> GGUF，如 llama.cpp 的 convert_hf_to_gguf.py）。"
        "从交错到 rotate-half，每个头的行应变为 [0, 2, 4, ..., D-2, 1, 3, ..., D-1]："
        "view(H, D/2, 2, hidden).transpose(1, 2)。",
    ),
    (
        r"you permuted the whole matrix as one head: reorder the rows within each head "
        r"\(view\(num_heads, head_dim // 2, 2, hidden\) first\)\.",
        "你把整个矩阵当成一个头来置换了：应在每个头内部重新排列行（先 view(num_heads, head_dim // 2, 2, hidden)）。",
    ),
    (
        r"the rows are unchanged: the interleaved pairs \(2i, 2i\+1\) must move to \(i, i \+ D/2\)\.",
        "行没有变：交错的对 (2i, 2i+1) 必须移到 (i, i + D/2)。",
    ),
    (
        r"you reordered the columns \(input features\): RoPE pairs the OUTPUT features of q_proj/k_proj, which "
        r"are the rows of weight \(out, in\)\.",
        "你重新排列的是列（输入特征）：RoPE 配对的是 q_proj/k_proj 的输出特征，也就是 weight (out, in) 的行。",
    ),
    (
        r"the rows are a permutation of the input but not the right one: head h's row h·D \+ 2i \+ j must go "
        r"to row h·D \+ j·D/2 \+ i\.",
        "这些行是输入的一个置换，但不是正确的那个：头 h 的第 h·D + 2i + j 行必须移到第 h·D + j·D/2 + i 行。",
    ),
    (
        r"wrong values: reorder rows only, do not change them\.",
        "数值不对：只重新排列行，不要改动它们。",
    ),
]
