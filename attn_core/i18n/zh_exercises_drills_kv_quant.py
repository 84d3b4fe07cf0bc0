"""Chinese for the interview gym's KV-cache quantiser drill (``attn_core/exercises/drills_kv_quant.py``)."""

from __future__ import annotations

from attn_core.i18n import exact

CATALOG = [
    *exact({"check_kv_quantize": "check_kv_quantize"}),
    (
        r"(?P<which>K|V): one scale for the whole tensor; quantise (?P<again>K|V) per (?P<per>channel|token) "
        r"\(amax over dim (?P<dim>\d)\)\.",
        lambda m, _tr: (
            f"{m['which']}：整个张量只用了一个缩放因子；{m['which']} 要按{'通道' if m['per'] == 'channel' else '词元'}"
            f"量化（在第 {m['dim']} 维上取 amax）。"
        ),
    ),
    (
        r"K is quantised per token; quantise it per channel: one scale per feature \(amax over tokens, dim 0\)\.",
        "K 被按词元量化了；应按通道量化：每个特征一个缩放因子（在词元维度 dim 0 上取 amax）。",
    ),
    (
        r"V is quantised per channel; quantise it per token: one scale per token \(amax over features, dim 1\)\.",
        "V 被按通道量化了；应按词元量化：每个词元一个缩放因子（在特征维度 dim 1 上取 amax）。",
    ),
    (
        r"(?P<which>K|V)'s scale has (?P<got>\d+) entries; per (?P<per>channel|token) it has (?P<want>\d+)\.",
        lambda m, _tr: (
            f"{m['which']} 的缩放因子有 {m['got']} 个元素；按{'通道' if m['per'] == 'channel' else '词元'}"
            f"量化时应有 {m['want']} 个。"
        ),
    ),
    (
        r"(?P<which>K|V): symmetric int8 uses ±127: scale = max\|x\| / 127 \(yours wastes or overflows the range\)\.",
        "{which}：对称 int8 使用 ±127：scale = max|x| / 127（你的缩放因子浪费了量化范围或会溢出）。",
    ),
    (
        r"(?P<which>K|V): the scale is the step, x ≈ code · scale with scale = max\|x\| / 127, not 127 / max\|x\|\.",
        "{which}：缩放因子是量化步长，x ≈ code · scale，其中 scale = max|x| / 127，而不是 127 / max|x|。",
    ),
    (
        r"(?P<which>K|V): the scale should be max\|x\| / 127 per (?P<per>channel|token)\.",
        lambda m, _tr: (
            f"{m['which']}：缩放因子应为按{'通道' if m['per'] == 'channel' else '词元'}计算的 max|x| / 127。"
        ),
    ),
    (
        r"(?P<which>K|V): return integer codes \(torch\.int8\), not (?P<dtype>[\w.]+)\.",
        "{which}：请返回整数码（torch.int8），而不是 {dtype}。",
    ),
    (
        r"(?P<which>K|V): the codes must have the shape of the input (?P<shape>\(.*?\))\.",
        "{which}：整数码的形状必须与输入相同 {shape}。",
    ),
    (
        r"(?P<which>K|V): codes outside \[-127, 127\] \((?P<low>-?\d+)\.\.(?P<high>-?\d+)\): clamp after rounding\.",
        "{which}：整数码超出了 [-127, 127]（{low}..{high}）：取整之后要截断（clamp）。",
    ),
    (
        r"(?P<which>K|V): round, don't truncate: \.to\(torch\.int8\) truncates toward 0, an error up to a full step\.",
        "{which}：要四舍五入，不要截断：.to(torch.int8) 会向 0 截断，误差可达一整个步长。",
    ),
    (
        r"(?P<which>K|V): the error exceeds half a step \(scale / 2\): codes = round\(x / scale\)\.",
        "{which}：误差超过了半个步长（scale / 2）：codes = round(x / scale)。",
    ),
    (
        r"return four things \(k_codes, k_scale, v_codes, v_scale\), got (?P<type>[\w.]+)\.",
        "请返回四个结果 (k_codes, k_scale, v_codes, v_scale)，你返回的是 {type}。",
    ),
    (
        r"return tensors or arrays \(k_codes, k_scale, v_codes, v_scale\)\.",
        "请返回张量或数组 (k_codes, k_scale, v_codes, v_scale)。",
    ),
]
