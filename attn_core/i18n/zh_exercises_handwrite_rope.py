"""Chinese for notebook 16's MHA + KV cache + RoPE drill (``attn_core/exercises/handwrite_rope.py``).

The diagnoses of ``check_rope_mha`` as ``(regex, template)`` pairs (see ``attn_core.i18n``); the case in
brackets, a wrong return value, a crash in ``forward``, a cache that did not grow and the layer checks it
shares with ``check_mha`` are in ``zh_exercises_handwrite``.
"""

from __future__ import annotations

import re

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"
_WORST = r"largest difference (?P<diff>\S+) at index (?P<index>\([\d, ]*\))"
_ROTATE_HALF = "rotate_half(x) = torch.cat((-x2, x1), dim=-1) with x1, x2 = x[..., :D/2], x[..., D/2:]"
_ROTATE_HALF_ZH = "rotate_half(x) = torch.cat((-x2, x1), dim=-1)，其中 x1, x2 = x[..., :D/2], x[..., D/2:]"


def _weights_shape(match: re.Match, tr) -> str:
    text = f"weights 的形状应为 (B, num_heads, L, T) = {match['expected']}，得到的是 {match['got']}"
    if match["only"]:
        text += "：你只在这一步的键上做了注意力。要在缓存的全部内容上做注意力：k_all, v_all = cache.update(k, v)"
    return text + "。"


CATALOG = [
    (
        rf"weights should have shape \(B, num_heads, L, T\) = (?P<expected>{_SHAPE}), got (?P<got>{_SHAPE})"
        r"(?P<only>: you attended over this step's keys only\. Attend over everything cached: "
        r"k_all, v_all = cache\.update\(k, v\))?\.",
        _weights_shape,
    ),
    (
        rf"the weights are right but out is not \({_WORST}\): the mistake comes after the softmax\. "
        r"Check weights @ v \(v never rotated\), the merge and self\.o_proj\.",
        "权重对了，out 却不对（最大差值 {diff}，位于下标 {index}）：错误出在 softmax 之后。"
        "请检查 weights @ v（v 从不旋转）、合并各头和 self.o_proj。",
    ),
    *exact(
        {
            "out contains NaN: is a query row fully masked?": "out 中有 NaN：是不是某个查询行被完全屏蔽了？",
            # the diagnoses: one replayed mistake each
            "you rotated V as well: RoPE goes on q and k only. The rotation exists to make the scores q·k depend on "
            "the distance m - n; rotating the values just scrambles what each token contributes. "
            "Leave v as v_proj(x).": (
                "你把 V 也旋转了：RoPE 只作用于 q 和 k。旋转的目的是让分数 q·k 只取决于距离 m - n；"
                "旋转值只会打乱每个词元的贡献。v 保持为 v_proj(x)。"
            ),
            "the positions restart at 0 in every call: in a decode step the new token must sit at position "
            "len(cache) (the tokens already cached), not 0. Take offset = len(cache) BEFORE cache.update and rotate "
            "with positions offset .. offset + L - 1.": (
                "每次调用位置都从 0 重新开始：解码步骤中，新词元必须位于位置 len(cache)（已缓存的词元数），而不是 0。"
                "在 cache.update 之前取 offset = len(cache)，再用位置 offset .. offset + L - 1 旋转。"
            ),
            "rotated after caching: your cache holds unrotated keys and you rotate ALL cached keys at read time "
            "with the new token's position, so every key gets the same angle and the relative positions vanish. "
            "Rotate k with its own positions before cache.update(k, v); cached keys are final.": (
                "缓存之后才旋转：你的缓存存的是未旋转的键，读取时再用新词元的位置旋转全部缓存的键，"
                "于是每个键都转了同样的角度，相对位置就消失了。请在 cache.update(k, v) 之前用 k 自己的位置旋转它；"
                "缓存里的键是最终结果。"
            ),
            "wrong pairing layout: you rotate the pairs (2i, 2i+1) (interleaved, the RoFormer / Meta-original / "
            "Llama-GGUF "
            "layout); this layer, like Llama in Hugging Face, rotates the pairs (i, i + head_dim/2): "
            f"{_ROTATE_HALF}. The two layouts differ by a permutation of q/k features, and a checkpoint fixes "
            "which one.": (
                "配对布局不对：你旋转的是 (2i, 2i+1) 这样的对（交错布局，"
                "RoFormer / Meta 最初代码 / Llama 系 GGUF 的布局）；"
                "这个层与 Hugging Face 中的 Llama 一样，旋转的是 (i, i + head_dim/2) 这样的对："
                f"{_ROTATE_HALF_ZH}。两种布局相差一个 q/k 特征的置换，用哪一种由检查点决定。"
            ),
            "no rotary embedding at all: rotate q and k by their positions before the scores.": (
                "完全没有旋转位置编码：在计算分数之前，按各自的位置旋转 q 和 k。"
            ),
            "only q is rotated: rotate k as well (with the keys' own positions).": (
                "只旋转了 q：k 也要旋转（用键自己的位置）。"
            ),
            "only k is rotated: rotate q as well (with the queries' positions).": (
                "只旋转了 k：q 也要旋转（用查询的位置）。"
            ),
            f"the rotation turns the wrong way (sin with the wrong sign): {_ROTATE_HALF}, and "
            "x_rotated = x * cos + rotate_half(x) * sin.": (
                f"旋转方向反了（sin 的符号错了）：{_ROTATE_HALF_ZH}，且 x_rotated = x * cos + rotate_half(x) * sin。"
            ),
            "the frequencies use base^(-i/head_dim); pair i turns at base^(-2i/head_dim), i = 0 .. head_dim/2 - 1 "
            "(in code: 1 / base ** (torch.arange(0, head_dim, 2) / head_dim)).": (
                "频率用成了 base^(-i/head_dim)；第 i 对的转速是 base^(-2i/head_dim)，i = 0 .. head_dim/2 - 1"
                "（代码：1 / base ** (torch.arange(0, head_dim, 2) / head_dim)）。"
            ),
            "the angles use base 10000 whatever rope_base says: use self.rope_base.": (
                "不管 rope_base 是多少，角度都用的是底数 10000：请用 self.rope_base。"
            ),
            "wrong head split: reshape(B, H, L, head_dim) cuts the *sequence* into heads. "
            "view(B, L, H, head_dim).transpose(1, 2).": (
                "切分注意力头的方式不对：reshape(B, H, L, head_dim) 把*序列*切成了各头。"
                "应为 view(B, L, H, head_dim).transpose(1, 2)。"
            ),
            "heads merged without the transpose: transpose(1, 2) back to (B, L, H, head_dim), then reshape to "
            "(B, L, hidden_dim).": (
                "合并注意力头时没有转置：先 transpose(1, 2) 回到 (B, L, H, head_dim)，"
                "再 reshape 成 (B, L, hidden_dim)。"
            ),
            "V comes from k_proj: use self.v_proj(x) for the values.": "V 来自 k_proj：值要用 self.v_proj(x)。",
            "scores scaled by √hidden_dim; the scale is per head: 1/√head_dim.": (
                "分数按 √hidden_dim 缩放了；缩放是按头算的：1/√head_dim。"
            ),
            "softmax over the wrong dim (-2, the queries): normalise over the keys, dim=-1.": (
                "softmax 的维度不对（-2，即查询这一维）：要在键上归一化，dim=-1。"
            ),
            "no causal mask: in a pass over several tokens each token may see itself and the EARLIER ones only. "
            "Mask the scores with a causal mask (L, T), aligned bottom-right.": (
                "没有因果掩码：一次处理多个词元时，每个词元只能看到自己和更早的词元。"
                "请用右下角对齐的因果掩码 (L, T) 屏蔽分数。"
            ),
            "the causal mask is aligned top-left: with a cache the L new queries are the LAST L of T tokens, so "
            "query i sees keys 0 .. i + (T - L): torch.ones(L, T, dtype=torch.bool).tril(diagonal=T - L).": (
                "因果掩码是左上角对齐的：有缓存时，L 个新查询是 T 个词元中的最后 L 个，所以查询 i 看到键 "
                "0 .. i + (T - L)：torch.ones(L, T, dtype=torch.bool).tril(diagonal=T - L)。"
            ),
            # not a verdict: the note check_rope_mha prints under a ✅ when the cache holds unrotated keys
            "note: your cache holds UNROTATED keys and you rotate all of them again at every step. Right "
            "numbers, but O(T) extra work per token, and a cache other code cannot share: rotate k before "
            "cache.update, as Llama does.": (
                "注意：你的缓存存的是未旋转的键，每一步都把它们全部重新旋转一遍。数值是对的，"
                "但每个词元要多做 O(T) 的工作，缓存也没法与其他代码共享：请像 Llama 那样，在 cache.update 之前旋转 k。"
            ),
        }
    ),
]
