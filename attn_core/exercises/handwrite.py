"""Checks for notebook 16 (hand-write it: SDPA, causal mask, MHA, GQA from a blank cell).

Interview-style exercises: the learner writes each piece from nothing and the check grades it
against the ``attn_core`` references on several shapes. Each ``check_…`` prints one verdict
through :func:`attn_core.exercises.feedback` and returns True/False; it never raises on a wrong
answer. A stub (``...``, ``None``, ``raise NotImplementedError``) gets the "not attempted" line.
Wrong answers are matched against the usual mistakes so the message says *which* one:

- ``check_sdpa(fn)``: ``fn(q, k, v, mask=None) -> (out, weights)``; diagnoses a swapped
  ``(weights, out)`` return, a wrong output or weights shape, transposed weights, softmax over
  the wrong dim, a missing or wrong scale (d_k, √d_v, √d_model), a flipped or ignored mask, the
  mask applied after the softmax or added as numbers, dropout left on, a parameter not named
  ``mask``, NaN on fully masked rows, else the largest error and where.
- ``check_causal_mask(fn)``: ``fn(q_len, k_len) -> bool (q_len, k_len)``; diagnoses a float or
  integer mask (each in its own words), a flipped (``triu``) mask, top-left alignment (for
  q_len < k_len and q_len > k_len) and an off-by-one diagonal.
- ``check_mha(cls)``: ``cls(hidden_dim, num_heads)`` with ``q_proj/k_proj/v_proj/o_proj``;
  diagnoses attribute names and shapes, the head split and merge (bare ``reshape``, no
  transpose), V from ``k_proj``, a missing ``o_proj``, scaling by √hidden_dim, softmax over the
  queries, the mask ignored, flipped, applied after the softmax or to the query rows, a causal
  mask always on, dropout left on in eval, and "weights right, out wrong" (merge or ``o_proj``).
- ``check_gqa(cls)``: ``cls(hidden_dim, num_heads, num_kv_heads)``; the same, plus the K/V
  projection sizes and ``repeat`` instead of ``repeat_interleave``.
- ``check_rope_mha(cls)`` (in :mod:`attn_core.exercises.handwrite_rope`):
  ``cls(hidden_dim, num_heads, rope_base=10000.0)`` with ``forward(x, cache=None)``, MHA + KV cache +
  RoPE; diagnoses rotated V, positions restarting at 0 in each decode step, the wrong pairing layout,
  keys rotated after caching, and the usual layer mistakes.
- ``check_mla(cls)`` (in :mod:`attn_core.exercises.handwrite_mla`): naive
  multi-head latent attention with DeepSeek's parameter names and a latent KV cache.

The checks clone every input they pass, so an answer that modifies its arguments in place is
graded on its result alone.

This module only gathers the checks, one module per concept: ``handwrite_sdpa``, ``handwrite_causal_mask``,
``handwrite_layers`` (MHA, GQA), ``handwrite_rope``, ``handwrite_mla``, on the helpers of ``handwrite_common``.
"""

from attn_core.exercises.handwrite_causal_mask import check_causal_mask
from attn_core.exercises.handwrite_layers import check_gqa, check_mha
from attn_core.exercises.handwrite_mla import check_mla
from attn_core.exercises.handwrite_rope import check_rope_mha
from attn_core.exercises.handwrite_sdpa import check_sdpa

__all__ = ["check_sdpa", "check_causal_mask", "check_mha", "check_gqa", "check_rope_mha", "check_mla"]
