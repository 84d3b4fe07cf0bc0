"""Chinese for the interview gym's speculative-decoding drill (``attn_core/exercises/drills_speculative.py``)."""

from __future__ import annotations

from attn_core.i18n import exact

NUM = r"[−-]?\d[\d.]*(?:e[+-]?\d+)?"

CATALOG = [
    *exact({"check_speculative_verify": "check_speculative_verify"}),
    (
        r"accept has NaN or inf where q\(x\) > 0: accept = min\(1, p\(x\)/q\(x\)\) is finite wherever q\(x\) > 0\.",
        "在 q(x) > 0 的位置 accept 出现了 NaN 或 inf：只要 q(x) > 0，accept = min(1, p(x)/q(x)) 就是有限值。",
    ),
    (
        rf"accept\(x\) exceeds 1 \(max (?P<max>{NUM})\): it is a probability, min\(1, p\(x\)/q\(x\)\), "
        r"not the ratio p\(x\)/q\(x\)\.",
        "accept(x) 超过了 1（最大 {max}）：它是一个概率 min(1, p(x)/q(x))，而不是比值 p(x)/q(x)。",
    ),
    (
        r"accept is inverted: min\(1, q\(x\)/p\(x\)\) keeps the tokens the draft over-proposes\. "
        r"Keep x with probability min\(1, p\(x\)/q\(x\)\)\.",
        "accept 写反了：min(1, q(x)/p(x)) 会保留草稿模型提议过多的词元。应以 min(1, p(x)/q(x)) 的概率保留 x。",
    ),
    (
        r"accept is p\(x\) itself: the test compares target and draft, accept = min\(1, p\(x\)/q\(x\)\)\.",
        "accept 直接用了 p(x)：接受检验要比较目标模型和草稿模型，accept = min(1, p(x)/q(x))。",
    ),
    (
        r"accept is 1 everywhere: every drafted token is kept, so the output follows the draft q, not p\.",
        "accept 处处为 1：每个草稿词元都被保留，输出就服从草稿分布 q，而不是 p。",
    ),
    (
        rf"accept differs from min\(1, p\(x\)/q\(x\)\) by up to (?P<error>{NUM})\.",
        "accept 与 min(1, p(x)/q(x)) 最多相差 {error}。",
    ),
    (
        r"the residual has NaN or inf: normalise max\(0, p - q\) by its sum, which is > 0 whenever p ≠ q\.",
        "残差分布中有 NaN 或 inf：用 max(0, p - q) 的和来归一化，只要 p ≠ q，这个和就 > 0。",
    ),
    (
        r"the residual has negative entries: it is a distribution\. Clamp p - q at 0 before normalising: "
        r"max\(0, p - q\) / sum\(max\(0, p - q\)\)\.",
        "残差分布出现了负值：它必须是一个概率分布。归一化之前先把 p - q 截断到 0：max(0, p - q) / sum(max(0, p - q))。",
    ),
    (
        rf"the residual max\(0, p - q\) must be normalised to sum to 1 \(yours sums to (?P<total>{NUM})\)\.",
        "残差 max(0, p - q) 必须归一化，使其和为 1（你的和为 {total}）。",
    ),
    (
        r"after a rejection you resample from p: tokens the draft already proposed get counted twice\. "
        r"Resample from max\(0, p - q\), normalised\.",
        "拒绝之后你从 p 重新采样：草稿已经提议过的词元被重复计入了。应从归一化后的 max(0, p - q) 重新采样。",
    ),
    (
        r"after a rejection you resample from the draft q: resample from max\(0, p - q\), normalised\.",
        "拒绝之后你从草稿分布 q 重新采样：应从归一化后的 max(0, p - q) 重新采样。",
    ),
    (
        r"the residual is flipped: max\(0, q - p\) favours the tokens the draft over-proposes; "
        r"use max\(0, p - q\), normalised\.",
        "残差写反了：max(0, q - p) 偏向草稿模型提议过多的词元；应使用归一化后的 max(0, p - q)。",
    ),
    (
        r"\|p - q\| also puts mass where q > p: the residual is max\(0, p - q\) \(clamped at 0\), normalised\.",
        "|p - q| 在 q > p 的位置也放了概率：残差是 max(0, p - q)（截断到 0）再归一化。",
    ),
    (
        rf"the residual differs from max\(0, p - q\) / sum\(max\(0, p - q\)\) by up to (?P<error>{NUM})\.",
        "残差与 max(0, p - q) / sum(max(0, p - q)) 最多相差 {error}。",
    ),
    (
        r"return a pair \(accept, residual\), got (?P<type>[\w.]+)\.",
        "请返回一对 (accept, residual)，你返回的是 {type}。",
    ),
    (
        r"accept and residual must each be a vector of shape \((?P<vocab>\d+),\) like p\.",
        "accept 和 residual 都必须是形状为 ({vocab},) 的向量，和 p 一样。",
    ),
    (
        rf"the emitted token is not distributed as p \(off by (?P<error>{NUM})\)\.",
        "输出词元的分布不是 p（最多相差 {error}）。",
    ),
]
