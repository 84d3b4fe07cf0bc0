"""The mock interview's hand-write pool (interview/mock.py): each problem's statement in both languages, its blank stub
and the ``attn_core.exercises`` grader whose hidden cases judge it (the cases live in the grader, never in a notebook).

Four warm-ups of notebook 16 and the eight drills of the 2026 canon (issue #38 §3). Minutes are an interview's
time box for writing the function from a blank cell, an editor's estimate.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    id: str
    name: str  # the function or class the candidate writes
    signature: str  # its parameters, as the stub declares them
    kind: str  # "def" or "class"
    check: str  # "module:function" in attn_core.exercises
    minutes: int
    en: str
    zh: str

    def stub(self) -> str:
        """The blank answer: the signature and ``...``; the grader reads ``...`` as "not attempted yet"."""
        if self.kind == "class":
            return f"class {self.name}:\n    def __init__(self, {self.signature}):\n        ...\n"
        return f"def {self.name}({self.signature}):\n    ...\n"

    def grader(self):
        module, function = self.check.split(":")
        return getattr(importlib.import_module(f"attn_core.exercises.{module}"), function)


POOL = [
    Problem(
        "causal_mask", "causal_mask", "q_len, k_len", "def", "handwrite_causal_mask:check_causal_mask", 5,
        "Return a torch.bool (q_len, k_len) causal mask, True = may attend, bottom-right aligned (the queries are the "
        "last q_len of k_len tokens).",
        "返回形状为 (q_len, k_len) 的 torch.bool 因果掩码，True = 可以关注，右下对齐（查询是 k_len 个 token 中的最后 "
        "q_len 个）。",
    ),
    Problem(
        "safe_softmax", "safe_softmax", "scores, dim=-1", "def", "handwrite_norms:check_safe_softmax", 5,
        "Softmax of scores along dim from exp and sum, safe for scores near 1000.",
        "只用 exp 和 sum 写出沿 dim 的 softmax，分数接近 1000 时也不能溢出。",
    ),
    Problem(
        "rms_norm", "rms_norm", "x, weight, eps=1e-6", "def", "handwrite_norms:check_rms_norm", 5,
        "RMSNorm: x (..., d) divided by the root mean square of its last dim (plus eps), times weight (d,).",
        "RMSNorm：x (..., d) 除以最后一维的均方根（加上 eps），再乘以 weight (d,)。",
    ),
    Problem(
        "sdpa", "sdpa", "q, k, v, mask=None", "def", "handwrite_sdpa:check_sdpa", 10,
        "Scaled dot-product attention: return (out (..., Lq, d_v), weights (..., Lq, Lk)); mask bool, True = may "
        "attend; a fully masked row gives zeros.",
        "缩放点积注意力：返回 (out (..., Lq, d_v), weights (..., Lq, Lk))；mask 为布尔型，True = 可以关注；"
        "全被掩码的行输出 0。",
    ),
    Problem(
        "indexer_topk", "select", "index_scores, k", "def", "drills_indexer_topk:check_indexer_topk", 10,
        "DSA's top-k: index_scores (Lq, Lk) for the last Lq tokens; return a bool (Lq, Lk) mask of each query's "
        "min(k, visible) highest-scoring visible keys (bottom-right causal mask first).",
        "DSA 的 top-k：index_scores (Lq, Lk) 属于最后 Lq 个 token；返回布尔掩码 (Lq, Lk)，每个查询选出它可见的键中"
        "得分最高的 min(k, 可见数) 个（先加右下对齐的因果掩码）。",
    ),
    Problem(
        "sinks", "sink_softmax", "scores, sinks", "def", "drills_sinks:check_sink_softmax", 10,
        "Softmax with a learned sink per head: scores (H, Lq, Lk) (-inf = masked), sinks (H,); "
        "weights = e^s / (Σ e^s + e^sink), shape (H, Lq, Lk); a fully masked row gives zeros.",
        "带可学习 sink 的 softmax（每个头一个）：scores (H, Lq, Lk)（-inf = 被掩码），sinks (H,)；"
        "weights = e^s / (Σ e^s + e^sink)，形状 (H, Lq, Lk)；全被掩码的行输出 0。",
    ),
    Problem(
        "lse_merge", "merge", "out_a, lse_a, out_b, lse_b", "def", "drills_lse_merge:check_lse_merge", 10,
        "Merge two partial attentions over disjoint keys: outputs (H, Lq, dv) and natural-log LSEs (H, Lq); "
        "return (out, lse) of attention over all keys (an LSE may be -inf).",
        "合并两个不相交键集合上的部分注意力：输出 (H, Lq, dv) 和自然对数的 LSE (H, Lq)；返回全部键上注意力的 "
        "(out, lse)（LSE 可能是 -inf）。",
    ),
    Problem(
        "speculative", "verify", "p, q", "def", "drills_speculative:check_speculative_verify", 10,
        "Speculative decoding's accept/reject step: target p and draft q (V,); return (accept (V,), residual (V,)) "
        "so that the emitted token is distributed exactly as p.",
        "投机解码的接受/拒绝步骤：目标分布 p 和草稿分布 q，形状 (V,)；返回 (accept (V,), residual (V,))，"
        "使输出 token 的分布恰好是 p。",
    ),
    Problem(
        "kv_quant", "quantize_kv", "k, v", "def", "drills_kv_quant:check_kv_quantize", 10,
        "Symmetric int8 KV cache: k, v (T, d); return (k_codes, k_scale, v_codes, v_scale) with K per channel and "
        "V per token, scale = max|x| / 127, codes round(x / scale).",
        "对称 int8 KV 缓存：k, v (T, d)；返回 (k_codes, k_scale, v_codes, v_scale)，K 按通道、V 按 token 量化，"
        "scale = max|x| / 127，codes = round(x / scale)。",
    ),
    Problem(
        "gated_delta", "delta_chunk", "state, q, k, v, alpha, beta", "def",
        "drills_gated_delta:check_gated_delta_chunk", 15,
        "One chunk of the gated delta rule: state (d_k, d_v), q, k (C, d_k), v (C, d_v), alpha, beta (C,); "
        "S_t = alpha_t (I - beta_t k_t k_tᵀ) S_(t-1) + beta_t k_t v_tᵀ, o_t = S_tᵀ q_t; return (out, new_state).",
        "门控 delta 规则的一个 chunk：state (d_k, d_v)，q, k (C, d_k)，v (C, d_v)，alpha, beta (C,)；"
        "S_t = alpha_t (I - beta_t k_t k_tᵀ) S_(t-1) + beta_t k_t v_tᵀ，o_t = S_tᵀ q_t；返回 (out, new_state)。",
    ),
    Problem(
        "mla_absorb", "absorbed_mla", "q_nope, q_rope, latent, k_rope, w_uk, w_uv", "def",
        "drills_mla_absorb:check_mla_absorbed", 15,
        "MLA with weight absorption: q_nope (H, Lq, nope), q_rope (H, Lq, rope) rotated, latent (T, rank), k_rope "
        "(T, rope) rotated, w_uk (H, nope, rank), w_uv (H, v, rank); return (q_latent (H, Lq, rank), out (H, Lq, v)), "
        "equal to the naive form (bottom-right causal).",
        "带权重吸收的 MLA：q_nope (H, Lq, nope)，已旋转的 q_rope (H, Lq, rope)，latent (T, rank)，已旋转的 k_rope "
        "(T, rope)，w_uk (H, nope, rank)，w_uv (H, v, rank)；返回 (q_latent (H, Lq, rank), out (H, Lq, v))，"
        "结果与朴素形式相同（右下对齐的因果掩码）。",
    ),
    Problem(
        "paged_allocator", "PagedAllocator", "num_blocks, block_size", "class",
        "drills_paged_allocator:check_paged_allocator", 20,
        "A paged-KV block allocator: append(seq_id, num_tokens) -> copies [(src, dst)], fork(parent_id, child_id), "
        "free(seq_id), block_table(seq_id), ref_count(block); prefix sharing with reference counts, copy-on-write of "
        "a shared partly filled last block, a FIFO free queue, free tail first, refuse (raise) without changes.",
        "分页 KV 块分配器：append(seq_id, num_tokens) -> copies [(src, dst)]，fork(parent_id, child_id)，"
        "free(seq_id)，block_table(seq_id)，ref_count(block)；用引用计数共享前缀，对共享且未填满的最后一个块写时复制，"
        "先进先出的空闲队列，从尾部开始释放，块不够时抛出异常且不做任何改动。",
    ),
]  # fmt: skip
PROBLEMS = {problem.id: problem for problem in POOL}
