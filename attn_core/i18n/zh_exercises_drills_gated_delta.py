"""Chinese for the interview gym's gated-delta-rule drill (``attn_core/exercises/drills_gated_delta.py``)."""

from __future__ import annotations

from attn_core.i18n import exact

CATALOG = [
    *exact({"check_gated_delta_chunk": "check_gated_delta_chunk"}),
    (
        r"alpha is missing: the state decays by alpha_t every token \(the gate\), S_t = alpha_t \(\.\.\.\)\.",
        "缺少 alpha：状态每个词元都要按 alpha_t 衰减（门控），S_t = alpha_t (...)。",
    ),
    (
        r"no erase term: that is gated linear attention\. The delta rule first removes what k_t read: "
        r"\(I - beta_t k_t k_t\^T\) S\.",
        "没有擦除项：那是门控线性注意力。delta 规则先移除 k_t 读出的内容：(I - beta_t k_t k_t^T) S。",
    ),
    (
        r"the erase term needs beta too: \(I - beta_t k_t k_t\^T\), so beta_t is how much of the old value is "
        r"overwritten\.",
        "擦除项也需要 beta：(I - beta_t k_t k_t^T)，beta_t 决定旧值被覆盖多少。",
    ),
    (
        r"the gate also scaled the new write: alpha_t multiplies the old state only, then \+ beta_t k_t v_t\^T\.",
        "门控把新写入也缩放了：alpha_t 只乘旧状态，然后再加上 beta_t k_t v_t^T。",
    ),
    (
        r"o_t reads the state before token t's update: read S_t \(after the write\) with q_t\.",
        "o_t 读取的是词元 t 更新之前的状态：应该用 q_t 读取 S_t（写入之后的状态）。",
    ),
    (
        r"you started from a zero state: carry the state passed in from the previous chunk\.",
        "你从零状态开始了：要沿用上一个块传进来的状态。",
    ),
    (
        r"the outputs are right but the returned state is not S_C, the state after the last token\.",
        "输出是对的，但返回的状态不是 S_C，即最后一个词元之后的状态。",
    ),
    (
        r"the outputs differ from o_t = S_t\^T q_t with S_t = alpha_t \(I - beta_t k_t k_t\^T\) S_\{t-1\} "
        r"\+ beta_t k_t v_t\^T\.",
        "输出与 o_t = S_t^T q_t 不一致，其中 S_t = alpha_t (I - beta_t k_t k_t^T) S_{{t-1}} + beta_t k_t v_t^T。",
    ),
    (
        r"return a pair \(out, new_state\), got (?P<type>[\w.]+)\.",
        "请返回一对 (out, new_state)，你返回的是 {type}。",
    ),
    (
        r"return tensors: out \(C, d_v\) and new_state \(d_k, d_v\)\.",
        "请返回张量：out (C, d_v) 和 new_state (d_k, d_v)。",
    ),
]
