"""attn_core: the small, verified attention package behind the attn-notebooks series.

One concept per module:

- ``attention``  scaled dot-product attention (grouped-query, masks, dropout, learned sink logits)
- ``masks``      boolean mask factories (True = may attend) and converters
- ``rope``       rotary position embeddings: apply_rope, rope_angles (``scaling=``, ``partial_rotary_factor=``)
- ``rope_scaling``  long-context RoPE: rope_frequencies (linear / llama3 / yarn, partial rotary)
- ``layers``     MultiHeadAttention / GroupedQueryAttention / MultiQueryAttention (``rope_base=`` for RoPE)
  (``output_gate=``: Qwen3-Next's sigmoid gate; ``sinks=``: gpt-oss's learned sink logits)
- ``differential_attention``  DifferentialAttention: DiffLlama's two softmax maps subtracted per head pair
- ``flex_variants``  attention variants as FlexAttention score_mod / mask_mod functions (imported on demand)
- ``latent_attention``  MultiHeadLatentAttention: DeepSeek's MLA, a small latent cached per token
  (``index_topk=``: DeepSeek-V3.2's sparse attention, the ``lightning_indexer`` picking each query's top-k keys)
- ``sparse_attention``  sparse_attention: each query attends only to its listed keys, gathered (no (Lq, Lk) matrix)
- ``compressed_attention``  CompressedAttention + CompressedKVCache: DeepSeek-V4's layer (window, HCA, CSA)
  (``compressor``, ``compressed_cache``)
- ``linear_attention``  linear_attention, gated_delta_rule (recurrent or chunked); ``gated_deltanet``: Qwen3.5's
  GatedDeltaNet layer and its LinearAttentionCache (a fixed-size state instead of a KV cache)
- ``kv_cache``   KVCache for token-by-token decoding (``window=``, ``num_sinks=``: a bounded ring buffer)
- ``paged_cache`` PagedKVCache: fixed-size blocks from a shared pool, prefixes shared copy-on-write
  (``block_allocator``: the free list, reference counts and block tables, one allocator for every layer)
- ``tiled``      tiled_attention: FlashAttention's forward pass, the weights never stored
  (``tiled_backward``: its hand-written backward, recomputing tiles from the log-sum-exp;
  ``fa4_tricks``: FlashAttention-4's conditional rescaling and exp2)
- ``merge``      merge_attention: two partial results over disjoint keys -> the result over all keys
- ``i18n``       set_language("zh"): learner-facing messages and figures in Chinese (``fonts/``: the CJK subset)

Grouped by what they are for:

- ``models/``    real pretrained weights in our layers (``load_minilm``, ``load_gemma3``), generation; TinyLM
- ``serving/``   ServingEngine: continuous batching, chunked prefill, prefix caching, preemption (on Gemma 3)
- ``kernels/``   ``triton_attention``: FlashAttention-2 in Triton (the optional ``triton`` extra; imported lazily)
- ``viz/``       plots and explorers (``plot_attention``, widgets, tiles, head view, ``localize_figure``)
- ``exercises/`` the ``check_…`` functions behind the notebooks' exercises
"""

from attn_core.attention import scaled_dot_product_attention
from attn_core.compressed_attention import CompressedAttention, CompressedKVCache
from attn_core.differential_attention import DifferentialAttention
from attn_core.i18n import get_language, localize, set_language
from attn_core.kernels import triton_attention  # never imports triton (kernels/__init__.py)
from attn_core.kv_cache import KVCache
from attn_core.latent_attention import MultiHeadLatentAttention
from attn_core.layers import GroupedQueryAttention, MultiHeadAttention, MultiQueryAttention
from attn_core.lightning_indexer import LightningIndexer
from attn_core.linear_attention import GatedDeltaNet, LinearAttentionCache, gated_delta_rule, linear_attention
from attn_core.masks import (
    causal_mask,
    mask_from_additive,
    mask_from_blocked,
    mask_from_float,
    mask_to_additive,
    mask_to_blocked,
    padding_mask,
    prefix_lm_mask,
    sliding_window_mask,
)
from attn_core.merge import merge_attention
from attn_core.models.gemma3 import load_gemma3
from attn_core.models.minilm import load_minilm
from attn_core.paged_cache import PagedKVCache
from attn_core.rope import apply_rope, rope_angles
from attn_core.rope_scaling import rope_frequencies
from attn_core.serving import ServingEngine
from attn_core.sparse_attention import sparse_attention
from attn_core.tiled import TiledAttentionCompileWarning, tiled_attention
from attn_core.viz.localize import localize_figure
from attn_core.viz.plotting import plot_attention

__all__ = [
    "scaled_dot_product_attention",
    "tiled_attention",
    "TiledAttentionCompileWarning",
    "merge_attention",
    "causal_mask",
    "padding_mask",
    "sliding_window_mask",
    "prefix_lm_mask",
    "mask_from_float",
    "mask_from_blocked",
    "mask_from_additive",
    "mask_to_blocked",
    "mask_to_additive",
    "apply_rope",
    "rope_angles",
    "MultiHeadAttention",
    "MultiQueryAttention",
    "GroupedQueryAttention",
    "MultiHeadLatentAttention",
    "KVCache",
    "PagedKVCache",
    "plot_attention",
    "load_minilm",
    "set_language",
    "get_language",
    "load_gemma3",
    # round 3
    "localize_figure",
    "localize",
    "ServingEngine",
    "DifferentialAttention",
    "rope_frequencies",
    "gated_delta_rule",
    "linear_attention",
    "GatedDeltaNet",
    "LinearAttentionCache",
    "triton_attention",
    "sparse_attention",
    "LightningIndexer",
    "CompressedAttention",
    "CompressedKVCache",
]

__version__ = "0.1.0"
