"""Chinese for notebook 06b's band explorer (``attn_core/viz/rope_scaling.py``): controls, figure labels, explanation
line; until they are written with ``_()`` (the graders' messages are in the gettext catalog, ``attn_core/locale``)."""

from __future__ import annotations

from attn_core.i18n import exact

CATALOG = [
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
