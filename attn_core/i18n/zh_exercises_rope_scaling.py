"""Chinese for the graders of notebook 06b (``attn_core/exercises/rope_scaling.py``): every ❌ message they print."""

from __future__ import annotations

from attn_core.exercises.rope_scaling import (
    ALL_INTERPOLATED,
    EXPONENT_OVER_HEAD_DIM,
    NOT_CAUSAL,
    NOT_SCALED,
    NOT_TRUNCATED,
    PAIRS_ACROSS_HEAD,
    RAMP_NOT_CLAMPED,
    RAMP_OVER_FEATURES,
    RAMP_SWAPPED,
    ROTATED_EVERYTHING,
    ROTATED_THE_END,
    TEMPERATURE_DIVIDED,
    TEMPERATURE_LOG10,
    TEMPERATURE_MISSING,
    TEMPERATURE_NO_ONE,
    TEMPERATURE_ONCE,
    TEMPERATURE_TWICE,
)
from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"
_NUMBER = r"[-+\w.]+"

CATALOG = [
    *exact(
        {
            "YaRN's inverse frequencies": "YaRN 的逆频率",
            "YaRN's attention temperature": "YaRN 的注意力温度",
            "partial RoPE": "部分 RoPE",
            "inv_freq": "inv_freq",
            "the attention weights": "注意力权重",
            "the rotated x": "旋转后的 x",
        }
    ),
    (
        rf"expected a torch\.Tensor \((?P<what>.+?), shape (?P<shape>{_SHAPE})\), got (?P<type>[\w.]+)\.",
        "应为 torch.Tensor（{what!t}，形状为 {shape}），你返回的是 {type}。",
    ),
    (
        rf"wrong shape (?P<shape>{_SHAPE}) for (?P<what>.+?): expected (?P<expected>{_SHAPE})\.",
        "{what!t}的形状 {shape} 不对，应为 {expected}。",
    ),
    (r"(?P<what>.+?) must be a finite floating-point tensor\.", "{what!t}必须是有限值的浮点张量。"),
    # ---- exercise 1
    *exact(
        {
            RAMP_OVER_FEATURES: "过渡函数是在特征下标 2i（torch.arange(0, D, 2)）上求的，而不是在对的下标 i 上："
            "YaRN 的修正区间 [low, high] 数的是对（它对 i 解 rotations(i) = beta），所以过渡函数要在 "
            "torch.arange(D // 2) 上求。",
            RAMP_SWAPPED: "过渡函数的两端反了：高频维度对（在原上下文里转很多圈，i 小）必须保持频率，"
            "低频维度对（转不到 beta_slow 圈）必须除以 factor，而不是反过来。",
            RAMP_NOT_CLAMPED: "过渡函数没有截断：(i - low) / (high - low) 在带外会小于 0、大于 1；请把它限制在 [0, 1]"
            "（torch.clamp），否则高频维度对会变快，低频维度对会被拉伸得比 factor 还多。",
            NOT_TRUNCATED: "修正区间没有取整：truncate=True（默认值，也是 DeepSeek 和 Qwen 的配置）时 low 向下取整"
            "（math.floor）、high 向上取整（math.ceil）；只有 gpt-oss 发布的是 truncate=False。",
            ALL_INTERPOLATED: "每一对都除以了 factor：这是位置插值。YaRN 让高频维度对"
            "（在原上下文里转超过 beta_fast 圈）保持不变，只除低频维度对。",
            NOT_SCALED: "你的频率就是普通 RoPE 的 base^(-2i/D)：YaRN 要把低频维度对除以 factor。",
        }
    ),
    (
        rf"computed in float32: the frequencies are off by (?P<error>{_NUMBER}) relative\. Compute them in float64 "
        r"\(dtype=torch\.float64\), angles too: at position 131,000 float32 angles are off by up to ~8e-3 rad\.",
        "用 float32 计算了：频率的相对误差为 {error}。请用 float64（dtype=torch.float64）计算，角度也一样："
        "在位置 131,000 处 float32 的角度最多偏差约 8e-3 弧度。",
    ),
    (
        rf"head_dim (?P<d>\d+), base (?P<base>{_NUMBER}), factor (?P<factor>{_NUMBER}), original context "
        rf"(?P<n>\d+): inv_freq is off by up to (?P<error>{_NUMBER}) relative\. Build it as \(1 - ramp\) / "
        r"base\^\(2i/D\) \+ ramp / \(factor · base\^\(2i/D\)\), with the ramp clamp\(\(i - low\) / \(high - low\), "
        r"0, 1\) over pairs\.",
        "当 head_dim 为 {d}、base 为 {base}、factor 为 {factor}、原上下文为 {n} 时：inv_freq 的相对误差最多为 "
        "{error}。请按 (1 - ramp) / base^(2i/D) + ramp / (factor · base^(2i/D)) 来构造，"
        "过渡函数为在对上求的 clamp((i - low) / (high - low), 0, 1)。",
    ),
    # ---- exercise 2
    *exact(
        {
            TEMPERATURE_ONCE: "温度只乘了一次（只乘在 q 上，或者在 logits 上乘 g）：YaRN 把 cos 和 sin 都乘以 "
            "g = 0.1·ln(s) + 1，所以 q 和 k 都放大 g 倍，每个分数放大 g² 倍。",
            TEMPERATURE_TWICE: "温度乘了两次：cos/sin 上的 g（q 和 k 都有）已经让每个分数乘了 g²；"
            "再把 logits 乘以 g² 就成了 g⁴。",
            TEMPERATURE_MISSING: "没有温度：用 YaRN 时每个分数都要乘以 g² = (0.1·ln(s) + 1)²。",
            TEMPERATURE_DIVIDED: "分数被除以了温度：YaRN 要让 softmax 在更长的上下文上更尖锐，所以分数乘以 g²，"
            "而不是除以。",
            TEMPERATURE_LOG10: "g 用了 log10：YaRN 的温度是 0.1·ln(s) + 1，用的是自然对数（math.log）。",
            TEMPERATURE_NO_ONE: "g 丢了 + 1：YaRN 的温度是 0.1·ln(s) + 1（s = 1、不拉伸时为 1）。",
            NOT_CAUSAL: "权重不是因果的：查询不能关注后面的键（用 tril 做掩码）。",
        }
    ),
    (
        rf"factor (?P<factor>{_NUMBER}): your weights differ from softmax\(q·kᵀ · g² / √D\) \(causal\) by "
        rf"(?P<error>{_NUMBER}), g = 0\.1·ln\(factor\) \+ 1\.",
        "factor 为 {factor} 时：你的权重与 softmax(q·kᵀ · g² / √D)（因果）相差 {error}，g = 0.1·ln(factor) + 1。",
    ),
    # ---- exercise 3
    *exact(
        {
            EXPONENT_OVER_HEAD_DIM: "指数是按 head_dim 算的：部分 RoPE 中第 i 对每个位置转 base^(-2i / rotary_dim)，"
            "rotary_dim = int(head_dim · partial_rotary_factor)，这样被旋转的特征覆盖与完整的头相同的频率范围。",
            ROTATED_EVERYTHING: "所有特征都被旋转了：只有前 rotary_dim = int(head_dim · partial_rotary_factor) "
            "个特征旋转，其余的原样通过。",
            PAIRS_ACROSS_HEAD: "rotate-half 的对是跨整个头取的，(i, i + head_dim/2)：部分 RoPE 的对在被旋转的部分之内，"
            "(i, i + rotary_dim/2)，特征 rotary_dim: 保持不动。",
            ROTATED_THE_END: "旋转的特征不对：Hugging Face（StableLM、Phi、Qwen3-Next）旋转的是前 rotary_dim 个特征 "
            "x[..., :rotary_dim]，x[..., rotary_dim:] 原样通过。",
        }
    ),
    (
        rf"the angles were computed in float32: your answer is off by (?P<error>{_NUMBER}), and at position 131,000 "
        r"float32 angles are off by up to ~8e-3 rad\. Compute positions·θ in float64 and cast only cos and sin to "
        r"x\.dtype\.",
        "角度是用 float32 计算的：你的答案偏差了 {error}，而在位置 131,000 处 float32 的角度最多偏差约 8e-3 弧度。"
        "请用 float64 计算 positions·θ，只把 cos 和 sin 转成 x.dtype。",
    ),
    (
        rf"head_dim (?P<d>\d+), partial_rotary_factor (?P<f>{_NUMBER}), positions from (?P<start>\d+): your answer "
        rf"is off by (?P<error>{_NUMBER})\.",
        "当 head_dim 为 {d}、partial_rotary_factor 为 {f}、位置从 {start} 开始时：你的答案偏差了 {error}。",
    ),
]

# ---- the band explorer (attn_core/viz/rope_scaling.py): controls, figure labels, explanation line
CATALOG += [
    *exact(
        {
            "scaling": "缩放方式 scaling",
            "factor": "倍数 factor",
            "original context": "原上下文长度",
            "beta_fast": "beta_fast",
            "beta_slow": "beta_slow",
            "ramp (YaRN)": "线性过渡带（YaRN）",
            "smoothed band (llama3)": "平滑过渡带（llama3）",
            "scaled / plain": "缩放后 / 原始",
            "turns in the original context": "在原上下文中转过的圈数",
            "frequency ratio": "频率之比",
            "each pair's new speed": "每一对的新转速",
            "plain": "原始 RoPE",
            "scaled": "缩放后",
            "average score / |q|²": "平均分数 / |q|²",
            "long-range decay": "远程衰减",
        }
    ),
    (
        r"(?P<kind>\w+), factor (?P<f>[\d.]+): of (?P<pairs>\d+) pairs, (?P<kept>\d+) keep their speed, (?P<div>\d+) "
        r"are slowed (?P<f2>[\d.]+)x, (?P<blend>\d+) are blended; attention factor (?P<a>[\d.]+) \(scores x "
        r"(?P<a2>[\d.]+)\)\.",
        "{kind}，倍数 {f}：{pairs} 对中 {kept} 对保持转速，{div} 对慢了 {f2} 倍，{blend} 对介于两者之间；"
        "注意力因子 {a}（分数乘以 {a2}）。",
    ),
    (
        r"beta_slow \((?P<slow>[\d.]+)\) must be below beta_fast \((?P<fast>[\d.]+)\): pairs turning more than "
        r"beta_fast times are kept, fewer than beta_slow times are interpolated\.",
        "beta_slow（{slow}）必须小于 beta_fast（{fast}）：转超过 beta_fast 圈的对保持不变，"
        "少于 beta_slow 圈的对做插值。",
    ),
]

# ---- notebook 06b's own figure and printed ✅/❌ lines (through attn_core.i18n.localize)
_FIXED = "✅ fixed: scale the frequencies per band (ac.rope_frequencies / apply_rope(scaling=)), never clamp positions"
_WRONG_EXPONENT = "❌ exponent over head_dim: the rotated features lose the slow pairs"
_TITLE = "how each scheme slows each pair (D = 128, s = 4, trained on 4096)"
CATALOG += exact(
    {
        "YaRN's ramp: 1 to 32 turns": "YaRN 的过渡带：1 到 32 圈",
        "position interpolation": "位置插值",
        "NTK-aware base": "NTK 感知的底数",
        "llama3": "llama3",
        "YaRN": "YaRN",
        "new frequency / old": "新频率 / 原频率",
        _TITLE: "各方案如何放慢每一对（D = 128，s = 4，训练长度 4096）",
        _FIXED: "✅ 修正：按频段缩放频率（ac.rope_frequencies / apply_rope(scaling=)），绝不截断位置",
        _WRONG_EXPONENT: "❌ 指数按 head_dim 算：被旋转的特征丢掉了低频维度对",
        "beta_fast and beta_slow are YaRN's band edges; linear and llama3 do not use them": (
            "beta_fast 和 beta_slow 是 YaRN 的频段边界；linear 和 llama3 不使用它们"
        ),
    }
)
