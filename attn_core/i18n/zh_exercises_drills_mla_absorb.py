"""Chinese for the interview gym's absorbed-MLA drill (``attn_core/exercises/drills_mla_absorb.py``)."""

from __future__ import annotations

from attn_core.i18n import exact

CATALOG = [
    *exact({"check_mla_absorbed": "check_mla_absorbed"}),
    (
        r"q_latent uses W_UV: the key's up-projection W_UK is the one absorbed into the query "
        r"\(q_nope · k_nope = \(q_nope W_UK\) · c\); W_UV belongs on the output side\.",
        "q_latent 用了 W_UV：吸收进查询的应该是键的上投影 W_UK（q_nope · k_nope = (q_nope W_UK) · c）；"
        "W_UV 属于输出一侧。",
    ),
    (
        r"W_UK and W_UV are swapped: W_UK \(the key up-projection\) goes into the query, W_UV \(the value "
        r"up-projection\) is applied to the weighted sum of latents\.",
        "W_UK 和 W_UV 用反了：W_UK（键的上投影）吸收进查询，W_UV（值的上投影）作用在潜在向量的加权和上。",
    ),
    (
        r"the output uses W_UK: after the weighted sum of latents, up-project with W_UV \(out = \(w @ c\) @ W_UVᵀ\)\.",
        "输出用了 W_UK：对潜在向量加权求和之后，要用 W_UV 上投影（out = (w @ c) @ W_UVᵀ）。",
    ),
    (
        r"W_UK is transposed: w_uk is \(H, nope, rank\), so q_latent = q_nope @ w_uk \(contract over nope\)\.",
        "W_UK 转置了：w_uk 的形状是 (H, nope, rank)，所以 q_latent = q_nope @ w_uk（在 nope 维上收缩）。",
    ),
    (
        r"W_UV is transposed: w_uv is \(H, v, rank\), so out = out_latent @ w_uv\.mT \(contract over rank\)\.",
        "W_UV 转置了：w_uv 的形状是 (H, v, rank)，所以 out = out_latent @ w_uv.mT（在 rank 维上收缩）。",
    ),
    (
        r"every head used head 0's W_UK: each head has its own slice w_uk\[h\] \(einsum 'hln,hnr->hlr'\)\.",
        "每个头都用了第 0 个头的 W_UK：每个头有自己的切片 w_uk[h]（einsum 'hln,hnr->hlr'）。",
    ),
    (
        r"the decoupled RoPE part is missing: add q_rope @ k_rope\.T to the scores\. RoPE cannot be absorbed "
        r"\(its rotation depends on the key's position\), which is why it is a separate shared key\.",
        "缺少解耦的 RoPE 部分：把 q_rope @ k_rope.T 加到分数上。RoPE 无法被吸收（它的旋转取决于键的位置），"
        "所以它是一个单独的共享键。",
    ),
    (
        r"the scale is 1/√\(rank \+ rope\): absorption changes no score, so the scale stays 1/√\(nope \+ rope\), "
        r"the head dimension of the naive form\.",
        "缩放用了 1/√(rank + rope)：吸收不改变任何分数，所以缩放仍是 1/√(nope + rope)，即朴素形式的头维度。",
    ),
    (
        r"the scale is 1/√nope: the rope part counts too, scale by 1/√\(nope \+ rope\)\.",
        "缩放用了 1/√nope：rope 部分也要算上，应按 1/√(nope + rope) 缩放。",
    ),
    (
        r"the scores are not scaled: multiply them by 1/√\(nope \+ rope\)\.",
        "分数没有缩放：要乘以 1/√(nope + rope)。",
    ),
    (
        r"no causal mask: the queries are the last Lq tokens, query i sees keys 0\.\.i \+ \(T - Lq\)\.",
        "没有因果掩码：查询是最后 Lq 个 token，查询 i 能看到键 0..i + (T - Lq)。",
    ),
    (
        r"top-left causal mask: the queries are the last Lq tokens, so query i sees keys 0\.\.i \+ \(T - Lq\)\.",
        "因果掩码左上对齐了：查询是最后 Lq 个 token，所以查询 i 能看到键 0..i + (T - Lq)。",
    ),
    (
        r"the softmax ran over the queries \(dim=-2\): each query's weights sum to 1 over the keys\.",
        "softmax 沿查询维（dim=-2）做了：每个查询的权重应在键上求和为 1。",
    ),
    (
        r"out is still in latent space: apply W_UV after the weighted sum \(out = \(w @ c\) @ W_UVᵀ\)\.",
        "out 还在潜在空间里：加权求和之后要乘 W_UV（out = (w @ c) @ W_UVᵀ）。",
    ),
    (
        r"return q_latent = q_nope @ w_uk unscaled: the softmax scale goes on the scores, not into q_latent\.",
        "返回未缩放的 q_latent = q_nope @ w_uk：softmax 的缩放作用在分数上，而不是放进 q_latent。",
    ),
    (
        r"q_latent is q_nope itself: you up-projected the keys instead of absorbing W_UK into the query\. "
        r"Return q_latent = q_nope @ w_uk and attend to the latent directly\.",
        "q_latent 就是 q_nope 本身：你对键做了上投影，而没有把 W_UK 吸收进查询。"
        "请返回 q_latent = q_nope @ w_uk，并直接对潜在向量做注意力。",
    ),
    (
        r"q_latent is right but out differs from the naive form softmax\(q·k\) @ v\.",
        "q_latent 是对的，但 out 与朴素形式 softmax(q·k) @ v 不一致。",
    ),
    (
        r"q_latent differs from q_nope @ w_uk \(each head's W_UK absorbed into its query\)\.",
        "q_latent 与 q_nope @ w_uk 不一致（每个头的 W_UK 吸收进它自己的查询）。",
    ),
    (
        r"return a pair \(q_latent, out\): the absorbed query and the output\.",
        "请返回一对 (q_latent, out)：吸收后的查询和输出。",
    ),
    (
        r"return tensors, got (?P<a>[\w.]+) and (?P<b>[\w.]+)\.",
        "请返回张量，你返回的是 {a} 和 {b}。",
    ),
    (
        r"q_latent must have shape \(H, Lq, rank\) = (?P<want>\(.*?\)), got (?P<got>\(.*?\))\.",
        "q_latent 的形状必须是 (H, Lq, rank) = {want}，你得到的是 {got}。",
    ),
    (
        r"out must have shape \(H, Lq, v\) = (?P<want>\(.*?\)), got (?P<got>\(.*?\))\.",
        "out 的形状必须是 (H, Lq, v) = {want}，你得到的是 {got}。",
    ),
    (
        r"your function raised RuntimeError: (?P<error>.*) Check the transposes: w_uk is \(H, nope, rank\) and w_uv "
        r"\(H, v, rank\), so q_latent = q_nope @ w_uk and out = \(weights @ latent\) @ w_uv\.mT\.",
        "你的函数抛出了 RuntimeError：{error} 检查转置：w_uk 是 (H, nope, rank)，w_uv 是 (H, v, rank)，"
        "所以 q_latent = q_nope @ w_uk，out = (weights @ latent) @ w_uv.mT。",
    ),
]
