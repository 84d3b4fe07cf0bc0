"""Notebook 14 (bug hunt): attention implementations with one planted bug each.

The catalogue :data:`BUGS` maps a bug id to a :class:`Bug`: the story (where the bug comes
from), the buggy implementation, a hint, the reference fix, and a ``probe`` that runs an
implementation against ``attn_core`` and returns a specific problem (or ``None`` when it
behaves like the reference). The learner calls :func:`check_bug` on their fix and
:func:`check_all` (or :func:`bug_report`) for the scoreboard. Nothing here raises on a
wrong answer: a crash in the learner's code becomes a readable problem.

Two interfaces, one per kind of bug:

* ``sdpa``: a function ``attention(q, k, v, mask=None)`` with q/k/v ``(B, H, L, D)`` and a
  boolean ``mask`` (True = may attend) that broadcasts to ``(B, H, Lq, Lk)``; it returns
  ``(out (B, H, Lq, D), weights (B, H, Lq, Lk))``. A few bugs change the arguments
  (``dropout_p``, no mask, ...); their ``signature`` says how. Only bug 4's probe has queries
  with no visible key (fully masked rows), so a correct fix of another bug written with a
  ``-inf`` fill passes; bug 4's probe accepts any finite weights and output on such rows.
* ``layer``: a module ``Layer(hidden_dim, num_heads[, num_kv_heads][, dropout=0.0])`` with
  ``q_proj/k_proj/v_proj/o_proj`` laid out as in ``ac.GroupedQueryAttention`` and
  ``forward(x, mask=None) -> (out (B, L, hidden), weights (B, H, L, L))``, where ``mask`` is
  one boolean mask per sequence, ``(B, L, L)`` or ``(L, L)``, shared by every head.
* RoPE (bugs 13-15): a layer ``Layer(hidden_dim, num_heads, rope_base=10000.0)`` with
  ``forward(x, cache=None)``, causal, q and k rotated by ``apply_rope``; graded like notebook 16's
  ``check_rope_mha`` (a full pass, then prefill + decode steps through an ``ac.KVCache``); and a
  function ``rotary(x, positions, base=10000.0)`` graded against ``ac.apply_rope``.
* MLA (bugs 16-18): a layer ``Layer(hidden_dim, num_heads, *, kv_lora_rank, qk_nope_head_dim,
  qk_rope_head_dim, v_head_dim, rope_base=10000.0)`` with DeepSeek's parameter names and
  ``forward(x, cache=None)``, causal; graded like notebook 16's ``check_mla`` against
  ``ac.MultiHeadLatentAttention`` (the cache must hold the latent and the shared rotated key).

The package, by the family of the bug: ``layer_bugs`` (1, 2, 8-11), ``sdpa_bugs`` (3-7, 12), ``rope_bugs``
(13-15) and ``mla_bugs`` (16-18) hold the planted code, its fix, the story and the hint (data); ``probes_sdpa``
and ``probes_layers`` hold the probes, ``scoreboard`` the learner API (code); ``common`` the :class:`Bug` record.
"""

from attn_core.exercises.bug_hunt.common import Bug
from attn_core.exercises.bug_hunt.layer_bugs import (  # noqa: F401 (the planted code)
    DropoutAttention,
    DropoutAttentionFixed,
    GroupedAttention,
    GroupedAttentionFixed,
    HeadsBase,
    MaskAttention,
    MaskAttentionFixed,
    ScaleAttention,
    ScaleAttentionFixed,
    ValueAttention,
    ValueAttentionFixed,
    ViewAttention,
    ViewAttentionFixed,
)
from attn_core.exercises.bug_hunt.mla_bugs import (  # noqa: F401 (the planted code)
    MlaAbsorbedValue,
    MlaAbsorbedValueFixed,
    MlaBase,
    MlaCacheUpProjected,
    MlaCacheUpProjectedFixed,
    MlaRopeAbsorbed,
    MlaRopeAbsorbedFixed,
)
from attn_core.exercises.bug_hunt.rope_bugs import (  # noqa: F401 (the planted code)
    RopeBase,
    RopeDecodeAttention,
    RopeDecodeAttentionFixed,
    RopeValueAttention,
    RopeValueAttentionFixed,
    rotary,
    rotary_fixed,
)
from attn_core.exercises.bug_hunt.scoreboard import BUGS, bug_report, check_all, check_bug, show_bug
from attn_core.exercises.bug_hunt.sdpa_bugs import (  # noqa: F401 (the planted code)
    causal_attention,
    causal_attention_fixed,
    dropout_attention,
    dropout_attention_fixed,
    flipped_mask_attention,
    flipped_mask_attention_fixed,
    mask_after_softmax_attention,
    mask_after_softmax_attention_fixed,
    neg_inf_attention,
    neg_inf_attention_fixed,
    wrong_dim_attention,
    wrong_dim_attention_fixed,
)

__all__ = ["Bug", "BUGS", "check_bug", "bug_report", "check_all", "show_bug"]
