"""Chinese for notebook 12e: its graders (``attn_core/exercises/kda.py``) and its explorer and figures
(``attn_core/viz/kda.py``)."""

from __future__ import annotations

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"
_WHAT = {
    "the new state (B, H, Dk, Dv)": "新状态 (B, H, Dk, Dv)",
    "the pair decays (..., C, C, Dk)": "成对衰减 (..., C, C, Dk)",
    "g (B, L, H, Dk)": "g (B, L, H, Dk)",
}
_WHAT_RE = "|".join(w.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.") for w in _WHAT)

CATALOG = [
    *exact(
        {
            "check_kda_step": "check_kda_step",
            "check_kda_pair_decay": "check_kda_pair_decay",
            "check_kimi_forget_gate": "check_kimi_forget_gate",
        }
    ),
    # ---- shapes, types, inputs
    (
        rf"return (?P<what>{_WHAT_RE}) as a tensor of shape (?P<shape>{_SHAPE}), got (?P<type>[\w.]+)\.",
        lambda m, tr: f"请把{_WHAT[m['what']]}作为形状为 {m['shape']} 的张量返回，你返回的是 {m['type']}。",
    ),
    (
        rf"(?P<what>{_WHAT_RE}) must have shape (?P<shape>{_SHAPE}), got (?P<got>{_SHAPE})\.",
        lambda m, tr: f"{_WHAT[m['what']]}的形状应为 {m['shape']}，你的是 {m['got']}。",
    ),
    (
        rf"the state is \(B, H, Dk, Dv\) = (?P<shape>{_SHAPE}): keys index its rows; you returned it transposed\.",
        "状态是 (B, H, Dk, Dv) = {shape}：键对应它的行；你返回的是它的转置。",
    ),
    *exact(
        {
            "the state is (B, H, Dk, Dv): keys index its rows; you returned it transposed.": (
                "状态是 (B, H, Dk, Dv)：键对应它的行；你返回的是它的转置。"
            ),
            "your function changed its inputs in place: return a new state instead.": (
                "你的函数原地修改了输入：请返回一个新的状态。"
            ),
            "your function changed its inputs in place: compute a new tensor instead.": (
                "你的函数原地修改了输入：请计算一个新的张量。"
            ),
            "your function changed g in place: compute a new tensor instead.": (
                "你的函数原地修改了 g：请计算一个新的张量。"
            ),
            # ---- exercise 1: one token of KDA
            "the decay multiplies the value columns: the state is (Dk, Dv) and g has one entry per KEY channel, so "
            "row c is multiplied by exp(g_c): state * g.exp()[..., :, None].": (
                "衰减乘到了值的列上：状态是 (Dk, Dv)，g 每个**键**通道一个值，所以应当把第 c 行乘以 exp(g_c)："
                "state * g.exp()[..., :, None]。"
            ),
            "one decay for the whole head (the mean over channels): that is Gated DeltaNet. KDA decays each key "
            "channel (row of the state) by its own exp(g_c).": (
                "整个头只用一个衰减（对通道取平均）：那是 Gated DeltaNet。KDA 让每个键通道（状态的每一行）按自己的 "
                "exp(g_c) 衰减。"
            ),
            "one decay for the whole head (the mean of exp(g) over channels): that is Gated DeltaNet. KDA decays each "
            "key channel (row of the state) by its own exp(g_c).": (
                "整个头只用一个衰减（对通道取 exp(g) 的平均）：那是 Gated DeltaNet。KDA 让每个键通道（状态的每一行）按"
                "自己的 exp(g_c) 衰减。"
            ),
            "no decay at all: that is the ungated delta rule (DeltaNet). Multiply row c of the state by exp(g_c) "
            "first.": "完全没有衰减：那是不带门控的 delta 规则（DeltaNet）。先把状态的第 c 行乘以 exp(g_c)。",
            "you decayed after the write: exp(g) multiplies the new token's write too. Decay first, then read and "
            "write.": "你在写入之后才衰减：exp(g) 把新词元的写入也缩小了。应先衰减，再读取和写入。",
            "the erase reads the state before its decay: read Sᵀk from the decayed state (the one this token writes "
            "into), as Hugging Face's recurrent_kimi_delta_attention does.": (
                "擦除读取的是衰减之前的状态：应从衰减后的状态（本词元写入的那个状态）读取 Sᵀk，"
                "和 Hugging Face 的 recurrent_kimi_delta_attention 一样。"
            ),
            "the erase term is missing: that is gated linear attention, S ← diag(exp(g))·S + β k vᵀ. The delta rule "
            "first subtracts what k already reads: S ← S + β k (v − Sᵀk)ᵀ.": (
                "缺少擦除项：那是门控线性注意力，S ← diag(exp(g))·S + β k vᵀ。delta 规则先减去 k 已经读出的内容："
                "S ← S + β k (v − Sᵀk)ᵀ。"
            ),
            "beta is missing: it is the write strength, multiplying the whole correction (v − Sᵀk).": (
                "缺少 beta：它是写入强度，乘在整个修正量 (v − Sᵀk) 上。"
            ),
            "beta multiplies v only: the erase needs it too, S ← S + β k (v − Sᵀk)ᵀ, so beta is how much of the old "
            "value is overwritten.": (
                "beta 只乘了 v：擦除项也需要它，S ← S + β k (v − Sᵀk)ᵀ，beta 决定旧值被覆盖多少。"
            ),
            "g was used as the decay factor itself: g is a log decay (g ≤ 0); the state's rows are multiplied by "
            "exp(g).": "把 g 直接当成了衰减因子：g 是对数衰减（g ≤ 0）；状态的各行应乘以 exp(g)。",
            "exp(−g) grows the state: g ≤ 0 is the log of the factor kept, so multiply by exp(g).": (
                "exp(−g) 会让状态变大：g ≤ 0 是保留因子的对数，所以应乘以 exp(g)。"
            ),
            "you returned only the write: add it to the decayed state, S ← diag(exp(g))·S + β k (v − Sᵀk)ᵀ.": (
                "你只返回了写入量：应把它加到衰减后的状态上，S ← diag(exp(g))·S + β k (v − Sᵀk)ᵀ。"
            ),
            "the new state differs from per-channel decay, then the delta write: S ← diag(exp(g))·S; "
            "S ← S + β k (v − Sᵀk)ᵀ.": (
                "新状态与“先按通道衰减，再做 delta 写入”不一致：S ← diag(exp(g))·S；S ← S + β k (v − Sᵀk)ᵀ。"
            ),
            # ---- exercise 2: a chunk's pair decays
            "the factored form exp(G_i)·exp(−G_j) overflows: exp(−G_j) is inf (exp(G_j) is 0) once the decay passes "
            "−709 (float64; −88 in float32), and inf · 0 = NaN (0 / 0 too). Subtract first, exp(G_i − G_j), and "
            "mask j > i to −inf before the "
            "exp.": (
                "分解形式 exp(G_i)·exp(−G_j) 会溢出：累计衰减低于 −709（float64；float32 中是 −88）时 exp(−G_j) "
                "变成 inf（exp(G_j) 变成 0），而 inf · 0 = NaN（0 / 0 也是）。"
                "应先相减，exp(G_i − G_j)，并在 exp 之前把 j > i 的位置掩码为 −inf。"
            ),
            "the mask multiplies after the exp: above the diagonal G_i − G_j > 0 grows with the chunk and exp "
            "overflows to inf, and inf · 0 = NaN. Mask j > i to −inf before the exp (masked_fill), or pick with "
            "torch.where.": (
                "掩码在 exp 之后用乘法施加：对角线以上 G_i − G_j > 0 随块长增大，exp 溢出为 inf，而 inf · 0 = NaN。"
                "应在 exp 之前把 j > i 掩码为 −inf（masked_fill），或用 torch.where 选取。"
            ),
            "no causal mask: entries with j > i must be 0 (a pair written later cannot be read), not "
            "exp(G_i − G_j) > 1.": (
                "没有因果掩码：j > i 的元素必须为 0（之后才写入的键值对读不到），而不是 exp(G_i − G_j) > 1。"
            ),
            "masked with 0 before the exp: exp(0) = 1, so the future pairs j > i get weight 1. Mask to −inf before "
            "the exp (or to 0 after it).": (
                "在 exp 之前用 0 做掩码：exp(0) = 1，未来的键值对 j > i 得到权重 1。应在 exp 之前掩码为 −inf"
                "（或在 exp 之后置 0）。"
            ),
            "the pair's own token is counted: a pair written at token j decays at tokens j+1 … i only (each token "
            "decays, then writes), so the exponent is g_{j+1} + … + g_i = G_i − G_j, and the diagonal is 1.": (
                "把写入键值对的那个词元也算进去了：在词元 j 写入的键值对只在词元 j+1 … i 衰减（每个词元先衰减再写入），"
                "所以指数是 g_{j+1} + … + g_i = G_i − G_j，对角线为 1。"
            ),
            "the diagonal is 0: a pair read at the token that wrote it is kept whole, exp(0) = 1 (only j > i is "
            "masked).": "对角线为 0：在写入它的词元处读取，键值对完整保留，exp(0) = 1（只有 j > i 要掩码）。",
            "i and j are swapped: entry [i, j] is what a query at token i reads of the pair written at token j ≤ i, "
            "so the nonzero entries are on and below the diagonal.": (
                "i 和 j 颠倒了：元素 [i, j] 是词元 i 的查询读到的、在词元 j ≤ i 写入的键值对，"
                "所以非零元素在对角线及其下方。"
            ),
            "the sign is flipped: exp(G_j − G_i) ≥ 1 grows with the distance; the decay kept from j to i is "
            "exp(G_i − G_j) ≤ 1.": (
                "符号反了：exp(G_j − G_i) ≥ 1 随距离增大；从 j 到 i 保留下来的衰减是 exp(G_i − G_j) ≤ 1。"
            ),
            "the cumulative sum runs over the channels (the last axis): it must run over the tokens (axis −2), one "
            "running sum per key channel.": (
                "累加沿着通道（最后一维）进行了：它应沿词元（第 −2 维）进行，每个键通道一个累加和。"
            ),
            "one decay for all channels (the mean over the key channels): that is Gated DeltaNet's chunk. KDA keeps "
            "one decay per key channel, so the result is (..., C, C, Dk).": (
                "所有通道共用一个衰减（对键通道取平均）：那是 Gated DeltaNet 的块。KDA 每个键通道各有一个衰减，"
                "所以结果是 (..., C, C, Dk)。"
            ),
            "this is exp(G_i), the decay since the chunk start: the pair decay is the difference, exp(G_i − G_j).": (
                "这是 exp(G_i)，即从块开始算起的衰减：成对衰减是两者之差，exp(G_i − G_j)。"
            ),
            "your result holds inf or NaN: an exp overflowed (the last case is a chunk of 64 tokens with g ≈ −50). "
            "Subtract before the exp, exp(G_i − G_j), and mask j > i to −inf before it.": (
                "你的结果含有 inf 或 NaN：某个 exp 溢出了（最后一个用例是 64 个词元、g ≈ −50 的块）。"
                "应在 exp 之前相减，exp(G_i − G_j)，并在 exp 之前把 j > i 掩码为 −inf。"
            ),
            "the pair decays differ from exp(g_{j+1} + … + g_i) per channel for j ≤ i, 0 above.": (
                "成对衰减与逐通道的 exp(g_{j+1} + … + g_i)（j ≤ i，对角线以上为 0）不一致。"
            ),
            # ---- exercise 3: the forget gate
            "the sign is missing: g is a log decay, g ≤ 0 (the state keeps exp(g) ≤ 1), so "
            "g = −exp(A_log)·softplus(…).": (
                "缺少负号：g 是对数衰减，g ≤ 0（状态保留 exp(g) ≤ 1），所以 g = −exp(A_log)·softplus(…)。"
            ),
            "A_log is the log of the rate: multiply by exp(A_log), not by A_log.": (
                "A_log 是速率的对数：应乘以 exp(A_log)，而不是 A_log。"
            ),
            "exp(−A_log) inverts the rate: the rate is exp(A_log), g = −exp(A_log)·softplus(…).": (
                "exp(−A_log) 把速率取了倒数：速率是 exp(A_log)，g = −exp(A_log)·softplus(…)。"
            ),
            "softplus is missing: without it pre + dt_bias can be positive, and g > 0 would grow the state. "
            "g = −exp(A_log)·softplus(pre + dt_bias).": (
                "缺少 softplus：没有它，pre + dt_bias 可能为正，g > 0 会让状态变大。"
                "g = −exp(A_log)·softplus(pre + dt_bias)。"
            ),
            "sigmoid caps the rate at exp(A_log): KDA uses softplus(pre + dt_bias), unbounded above.": (
                "sigmoid 会把速率限制在 exp(A_log) 以内：KDA 用的是 softplus(pre + dt_bias)，没有上界。"
            ),
            "relu is not softplus: KDA's rate is softplus(pre + dt_bias), smooth and > 0 everywhere.": (
                "relu 不是 softplus：KDA 的速率是 softplus(pre + dt_bias)，处处光滑且大于 0。"
            ),
            "exp is not softplus: softplus(x) = log(1 + exp(x)).": "exp 不是 softplus：softplus(x) = log(1 + exp(x))。",
            "dt_bias goes inside the softplus: softplus(pre + dt_bias), so it sets the rate a token starts from.": (
                "dt_bias 应放在 softplus 里面：softplus(pre + dt_bias)，它决定词元起始的衰减速率。"
            ),
            "dt_bias is missing: g = −exp(A_log)·softplus(pre + dt_bias).": (
                "缺少 dt_bias：g = −exp(A_log)·softplus(pre + dt_bias)。"
            ),
            "you returned the factor exp(g): return the log decay g itself (≤ 0); the rule takes exp(g).": (
                "你返回的是因子 exp(g)：应返回对数衰减 g 本身（≤ 0）；规则内部才取 exp(g)。"
            ),
            "A_log is one rate per head: broadcast it over the channels, A_log.exp()[:, None] (shape (H, 1)), not "
            "over the heads.": (
                "A_log 是每个头一个速率：应沿通道广播，A_log.exp()[:, None]（形状 (H, 1)），而不是沿头广播。"
            ),
            "dt_bias is laid out head by head, (H·Dk,) = H blocks of Dk: dt_bias.view(H, Dk), not view(Dk, H).T.": (
                "dt_bias 按头依次排列，(H·Dk,) = H 段、每段 Dk 个：应 dt_bias.view(H, Dk)，而不是 view(Dk, H).T。"
            ),
            "g differs from −exp(A_log_h)·softplus(pre + dt_bias) with dt_bias viewed as (H, Dk).": (
                "g 与 −exp(A_log_h)·softplus(pre + dt_bias)（dt_bias 视为 (H, Dk)）不一致。"
            ),
            # ---- the explorer and figures (attn_core/viz/kda.py)
            "mean rate −g": "平均速率 −g",
            "spread (decades)": "通道间跨度（数量级）",
            "values are printed for up to 128 cells": "最多 128 个格子时才打印数值",
            "Gated DeltaNet: one decay per token": "Gated DeltaNet：每个词元一个衰减",
            "KDA: one decay per token and key channel": "KDA：每个词元、每个键通道一个衰减",
            "token t (pair written)": "词元 t（写入键值对的位置）",
            "key channel (slow → fast)": "键通道（慢 → 快）",
            "kept at the last token": "保留到最后一个词元的比例",
            "at initialisation": "初始化时",
            "after training": "训练之后",
            "kept per token, exp(g)": "每个词元保留的比例 exp(g)",
            "Decay per token before and after training": "训练前后每个词元的衰减",
            "delta (g = 0)": "delta 规则（g = 0）",
            "kda": "KDA",
            "DeltaNet (g = 0)": "DeltaNet（g = 0）",
        }
    ),
    (
        r"After (?P<n>\d+) tokens the first pair keeps (?P<t>[\d.e+-]+) in every channel of the Gated DeltaNet "
        r"state; in KDA's it keeps (?P<lo>[\d.e+-]+) \(fastest channel\) to (?P<hi>[\d.e+-]+) \(slowest\), and "
        r"(?P<half>\d+) of (?P<dk>\d+) channels keep at least half\.",
        "经过 {n} 个词元后，第一个键值对在 Gated DeltaNet 状态的每个通道中都只剩 {t}；在 KDA 的状态中剩 {lo}"
        "（最快的通道）到 {hi}（最慢的通道），{dk} 个通道中有 {half} 个至少保留一半。",
    ),
]
