"""Chinese for notebook 16's MLA drill (``attn_core/exercises/handwrite_mla.py``).

The diagnoses of ``check_mla`` as ``(regex, template)`` pairs (see ``attn_core.i18n``); the case in brackets,
a wrong return value, a crash in ``forward``, a cache that did not grow and the output-shape messages it shares
with the other drills are in ``zh_exercises_handwrite``.
"""

from __future__ import annotations

import re

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"
_WORST = r"largest difference (?P<diff>\S+) at index (?P<index>\([\d, ]*\))"


def _weights_shape(match: re.Match, tr) -> str:
    text = f"weights 的形状应为 (B, num_heads, L, T) = {match['expected']}，得到的是 {match['got']}"
    if match["only"]:
        text += "：你只在这一步的词元上做了注意力；要在 cache.update 返回的全部内容上做注意力"
    return text + "。"


CATALOG = [
    # ---- the layer: DeepSeek's names and shapes
    (
        r"no nn\.Linear attribute (?P<missing>[\w, ]+)\. Use DeepSeek's names: self\.q_proj, "
        r"self\.kv_a_proj_with_mqa, self\.kv_b_proj, self\.o_proj \(found nn\.Linear attributes (?P<found>\[.*\])\)\.",
        "找不到 nn.Linear 属性 {missing}。请用 DeepSeek 的命名：self.q_proj、self.kv_a_proj_with_mqa、"
        "self.kv_b_proj、self.o_proj（找到的 nn.Linear 属性是 {found}）。",
    ),
    (
        rf"self\.(?P<name>\w+)\.weight has shape (?P<got>{_SHAPE}), expected (?P<expected>{_SHAPE}) "
        r"\(nn\.Linear\(in, out\)\.weight is \(out, in\)\)\. q_proj: hidden -> H·\(nope \+ rope\); "
        r"kv_a_proj_with_mqa: hidden -> kv_lora_rank \+ rope; kv_b_proj: kv_lora_rank -> H·\(nope \+ v\); "
        r"o_proj: H·v -> hidden\.",
        "self.{name}.weight 的形状为 {got}，应为 {expected}（nn.Linear(in, out).weight 是 (out, in)）。"
        "q_proj：hidden -> H·(nope + rope)；kv_a_proj_with_mqa：hidden -> kv_lora_rank + rope；"
        "kv_b_proj：kv_lora_rank -> H·(nope + v)；o_proj：H·v -> hidden。",
    ),
    (
        r"self\.(?P<name>\w+) has a bias; DeepSeek's projections have none: bias=False\.",
        "self.{name} 带有偏置；DeepSeek 的投影都没有偏置：bias=False。",
    ),
    (
        r"kv_a_layernorm has eps=None \(nn\.RMSNorm's default\), so it uses torch\.finfo\(x\.dtype\)\.eps; "
        r"DeepSeek's RMSNorm uses eps=1e-6: nn\.RMSNorm\(kv_lora_rank, eps=1e-6\)\.",
        "kv_a_layernorm 的 eps=None（nn.RMSNorm 的默认值），于是它用的是 torch.finfo(x.dtype).eps；"
        "DeepSeek 的 RMSNorm 用 eps=1e-6：nn.RMSNorm(kv_lora_rank, eps=1e-6)。",
    ),
    (
        r"kv_a_layernorm uses eps=(?P<eps>\S+); DeepSeek's RMSNorm uses eps=1e-6\.",
        "kv_a_layernorm 用的是 eps={eps}；DeepSeek 的 RMSNorm 用 eps=1e-6。",
    ),
    # ---- what the cache holds
    (
        rf"your cache holds up-projected per-head keys (?P<shape>{_SHAPE}) = \(B, H, T, \.\.\.\), not the "
        r"latent: that is an MHA-sized cache, the very thing MLA avoids\. Cache the normalised latent "
        r"\(B, 1, T, kv_lora_rank = (?P<rank>\d+)\) and the rotated shared key \(B, 1, T, (?P<rope>\d+)\): "
        r"cache\.update\(latent, k_rope\), then up-project what it returns\.",
        "你的缓存存的是上投影之后的逐头键 {shape} = (B, H, T, ...)，而不是潜在向量：这是 MHA 大小的缓存，"
        "恰恰是 MLA 要避免的。请缓存归一化后的潜在向量 (B, 1, T, kv_lora_rank = {rank}) 和旋转后的共享键 "
        "(B, 1, T, {rope})：cache.update(latent, k_rope)，再对它返回的内容做上投影。",
    ),
    (
        rf"your cache's values are per-head (?P<what>values|rope keys) (?P<shape>{_SHAPE}) = \(B, H, T, \.\.\.\): "
        r"the rope key is SHARED by all heads, one \(B, 1, T, (?P<rope>\d+)\) tensor, broadcast \(expand\) to "
        r"the heads when scoring\. Cache \(latent, k_rope\), nothing per head\.",
        lambda m, tr: (
            f"你的缓存里的 values 是逐头的{'值' if m['what'] == 'values' else ' rope 键'} "
            f"{m['shape']} = (B, H, T, ...)："
            f"rope 键由所有头共享，只有一个 (B, 1, T, {m['rope']}) 张量，计算分数时再广播（expand）到各头。"
            "缓存 (latent, k_rope)，不存任何逐头的东西。"
        ),
    ),
    (
        rf"the cache should hold the latent (?P<want_k>{_SHAPE}) as keys and the rotated shared key "
        rf"(?P<want_v>{_SHAPE}) as values \(cache\.update\(latent, k_rope\)\); yours holds (?P<keys>{_SHAPE}) "
        rf"and (?P<values>{_SHAPE})\.",
        "缓存的 keys 应为潜在向量 {want_k}，values 应为旋转后的共享键 {want_v}（cache.update(latent, k_rope)）；"
        "你的缓存存的是 {keys} 和 {values}。",
    ),
    (
        r"you cache a rope key per head \(values \((?P<batch>\d+), (?P<heads>\d+), \.\.\.\)\): the rope key is "
        r"SHARED by all heads, one \(B, 1, T, (?P<rope>\d+)\) tensor cached once and broadcast \(expand\) to the "
        r"heads only when scoring: cache\.update\(latent, k_rope\) with both of shape \(B, 1, \.\.\.\)\.",
        "你为每个头都缓存了一个 rope 键（values 为 ({batch}, {heads}, ...)）：rope 键由所有头共享，"
        "只有一个 (B, 1, T, {rope}) 张量，缓存一次，计算分数时才广播（expand）到各头："
        "cache.update(latent, k_rope)，两者的形状都是 (B, 1, ...)。",
    ),
    # ---- a forward step
    (
        rf"weights should have shape \(B, num_heads, L, T\) = (?P<expected>{_SHAPE}), got (?P<got>{_SHAPE})"
        r"(?P<only>: you attended over this step's tokens only; attend over everything cache\.update returns)?\.",
        _weights_shape,
    ),
    (
        rf"the weights are right but out is not \({_WORST}\): check weights @ v \(v from kv_b_proj, after "
        r"k_nope\), the head merge \(transpose, then reshape\) and self\.o_proj\.",
        "权重对了，out 却不对（最大差值 {diff}，位于下标 {index}）：请检查 weights @ v（v 来自 kv_b_proj，"
        "排在 k_nope 之后）、合并各头（先 transpose，再 reshape）和 self.o_proj。",
    ),
    *exact(
        {
            "no self.kv_a_layernorm with a weight: the latent is normalised by an RMSNorm(kv_lora_rank) "
            "(ac.deepseek.latent_attention.RMSNorm, or nn.RMSNorm(kv_lora_rank, eps=1e-6)).": (
                "找不到带 weight 的 self.kv_a_layernorm：潜在向量要经过一个 RMSNorm(kv_lora_rank) 归一化"
                "（ac.deepseek.latent_attention.RMSNorm，或 nn.RMSNorm(kv_lora_rank, eps=1e-6)）。"
            ),
            # the diagnoses: one replayed mistake each
            "the rope part is missing: the score of head h is q_nope·k_nope + q_rope·k_rope, where q_rope is the "
            "last qk_rope_head_dim features of each head's query and k_rope the rotated shared key from "
            "kv_a_proj_with_mqa. Without it MLA has no position information at all.": (
                "缺了 rope 部分：头 h 的分数是 q_nope·k_nope + q_rope·k_rope，其中 q_rope 是每个头的查询的最后 "
                "qk_rope_head_dim 个特征，k_rope 是来自 kv_a_proj_with_mqa、旋转后的共享键。"
                "没有它，MLA 就完全没有位置信息。"
            ),
            "the rope part is missing (and the scale is 1/√qk_nope_head_dim): add q_rope·k_rope to every head's "
            "scores and scale by 1/√(qk_nope_head_dim + qk_rope_head_dim).": (
                "缺了 rope 部分（缩放因子也成了 1/√qk_nope_head_dim）：给每个头的分数加上 q_rope·k_rope，"
                "并按 1/√(qk_nope_head_dim + qk_rope_head_dim) 缩放。"
            ),
            "RoPE applied to the latent: only the decoupled part is rotated (q_rope and the shared k_rope). A "
            "rotated latent puts a position-dependent rotation between the cache and W_UK, which is exactly what "
            "the decoupled key exists to avoid (notebook 09: it breaks absorption).": (
                "RoPE 施加到了潜在向量上：只有解耦的那部分（q_rope 和共享的 k_rope）要旋转。"
                "旋转潜在向量会在缓存和 W_UK 之间插入一个依赖位置的旋转，"
                "而解耦键存在的意义正是避免这一点（notebook 09：它会破坏吸收）。"
            ),
            "RoPE pushed through the absorbed W_UK: you rotate the latent-space query q_nope·W_UK and the cached "
            "latent. The rotation of key n sits BETWEEN W_UK and c_n and depends on n, so it cannot be folded; leave "
            "the latent path unrotated and put all position information in q_rope · k_rope (the decoupled key).": (
                "把 RoPE 推过了吸收后的 W_UK：你旋转了潜在空间中的查询 q_nope·W_UK 和缓存的潜在向量。键 n 的旋转夹在 "
                "W_UK 和 c_n 之间，并且依赖于 n，所以无法折叠；潜在路径保持不旋转，"
                "把全部位置信息放进 q_rope · k_rope（解耦键）。"
            ),
            "RoPE applied to the nope part too: q_nope and k_nope stay unrotated ('no position embedding'); only "
            "q_rope and the shared k_rope are rotated.": (
                "nope 部分也施加了 RoPE：q_nope 和 k_nope 保持不旋转（nope 即“没有位置编码”）；"
                "只有 q_rope 和共享的 k_rope 要旋转。"
            ),
            "wrong scale: 1/√qk_nope_head_dim. The dot product runs over nope + rope features, so the scale is "
            "(qk_nope_head_dim + qk_rope_head_dim) ** -0.5 (DeepSeek's softmax_scale).": (
                "缩放因子不对：1/√qk_nope_head_dim。点积是在 nope + rope 个特征上求和的，所以缩放因子是 "
                "(qk_nope_head_dim + qk_rope_head_dim) ** -0.5（DeepSeek 的 softmax_scale）。"
            ),
            "the scale is missing: multiply the scores by (qk_nope_head_dim + qk_rope_head_dim) ** -0.5.": (
                "缺了缩放：把分数乘以 (qk_nope_head_dim + qk_rope_head_dim) ** -0.5。"
            ),
            "kv_a_layernorm is skipped: the latent is c = kv_a_layernorm(first kv_lora_rank features of "
            "kv_a_proj_with_mqa(x)); cache and up-project the NORMALISED latent (the rope key is not normalised).": (
                "跳过了 kv_a_layernorm：潜在向量是 c = kv_a_layernorm(kv_a_proj_with_mqa(x) 的前 kv_lora_rank 个特征)；"
                "缓存并上投影的是归一化后的潜在向量（rope 键不做归一化）。"
            ),
            "kv_a_proj_with_mqa's output split in the wrong order: it is [latent (kv_lora_rank), k_rope "
            "(qk_rope_head_dim)], latent first: latent, k_rope = kv_a.split([kv_lora_rank, qk_rope_head_dim], "
            "dim=-1).": (
                "kv_a_proj_with_mqa 的输出拆分顺序不对：它是 [latent (kv_lora_rank), k_rope (qk_rope_head_dim)]，"
                "潜在向量在前：latent, k_rope = kv_a.split([kv_lora_rank, qk_rope_head_dim], dim=-1)。"
            ),
            "kv_b_proj's output split in the wrong order: per head it is [k_nope (qk_nope_head_dim), v (v_head_dim)], "
            "k_nope first: view(B, T, H, nope + v) then split([nope, v], dim=-1).": (
                "kv_b_proj 的输出拆分顺序不对：每个头是 [k_nope (qk_nope_head_dim), v (v_head_dim)]，k_nope 在前："
                "先 view(B, T, H, nope + v)，再 split([nope, v], dim=-1)。"
            ),
            "wrong RoPE layout: you rotate the pairs (i, i + D/2) ('rotate half', Llama in Hugging Face); DeepSeek's "
            "checkpoints rotate the interleaved pairs (2i, 2i + 1): ac.apply_rope(t, positions, base=rope_base, "
            "interleaved=True).": (
                "RoPE 布局不对：你旋转的是 (i, i + D/2) 这样的对（rotate half，Hugging Face 中 Llama 的布局）；"
                "DeepSeek 的检查点旋转的是交错的对 (2i, 2i + 1)："
                "ac.apply_rope(t, positions, base=rope_base, interleaved=True)。"
            ),
            "the positions restart at 0 in every call: a decode step's token sits at position len(cache). Take "
            "offset = len(cache) BEFORE cache.update and rotate q_rope and k_rope with offset .. offset + L - 1.": (
                "每次调用位置都从 0 重新开始：解码步骤的词元位于位置 len(cache)。在 cache.update 之前取 "
                "offset = len(cache)，再用 offset .. offset + L - 1 旋转 q_rope 和 k_rope。"
            ),
            "no causal mask: each token may see itself and the EARLIER ones only. Mask the scores with a causal "
            "mask (L, T), aligned bottom-right.": (
                "没有因果掩码：每个词元只能看到自己和更早的词元。请用右下角对齐的因果掩码 (L, T) 屏蔽分数。"
            ),
            "the causal mask is aligned top-left: with a cache the L new queries are the LAST L of T tokens: "
            "torch.ones(L, T, dtype=torch.bool).tril(diagonal=T - L).": (
                "因果掩码是左上角对齐的：有缓存时，L 个新查询是 T 个词元中的最后 L 个："
                "torch.ones(L, T, dtype=torch.bool).tril(diagonal=T - L)。"
            ),
        }
    ),
]
