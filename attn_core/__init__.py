"""attn_core: the small, verified attention package behind the attn-notebooks series.

One concept per module:

- ``attention``  scaled dot-product attention (grouped-query, masks, dropout)
- ``masks``      boolean mask factories (True = may attend) and converters
- ``rope``       rotary position embeddings: apply_rope, rope_angles
- ``layers``     MultiHeadAttention / GroupedQueryAttention / MultiQueryAttention (``rope_base=`` for RoPE)
  (``output_gate=``: Qwen3-Next's sigmoid gate; ``sinks=``: gpt-oss's learned sink logits)
- ``differential_attention``  DifferentialAttention: DiffLlama's two softmax maps subtracted per head pair
- ``flex_variants``  attention variants as FlexAttention score_mod / mask_mod functions (imported on demand)
- ``latent_attention``  MultiHeadLatentAttention: DeepSeek's MLA, a small latent cached per token
  (``index_topk=``: DeepSeek-V3.2's sparse attention, the ``lightning_indexer`` picking each query's top-k keys)
- ``sparse_attention``  sparse_attention: each query attends only to its listed keys, gathered (no (Lq, Lk) matrix)
- ``compressed_attention``  CompressedAttention + CompressedKVCache: DeepSeek-V4's layer (window, HCA, CSA)
- ``kv_cache``   KVCache for token-by-token decoding (``window=``, ``num_sinks=``: a bounded ring buffer)
- ``paged_cache`` PagedKVCache: fixed-size blocks from a shared pool, prefixes shared copy-on-write
- ``tiled``      tiled_attention: FlashAttention's forward pass, the weights never stored
  (``tiled_backward``: its hand-written backward, recomputing tiles from the log-sum-exp)
- ``merge``      merge_attention: two partial results over disjoint keys -> the result over all keys
- ``i18n``       set_language("zh"): learner-facing messages in Chinese

Grouped by what they are for:

- ``models/``    real pretrained weights in our layers (``load_minilm``, ``load_gemma3``), generation
- ``viz/``       plots and explorers (``plot_attention``, widgets, tiles, head view)
- ``exercises/`` the ``check_…`` functions behind the notebooks' exercises
- ``kernels/``   ``triton_attention``: FlashAttention-2 in Triton (the optional ``triton`` extra; imported lazily)
"""

from attn_core.attention import scaled_dot_product_attention
from attn_core.i18n import get_language, set_language
from attn_core.kv_cache import KVCache
from attn_core.latent_attention import MultiHeadLatentAttention
from attn_core.layers import GroupedQueryAttention, MultiHeadAttention, MultiQueryAttention
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
from attn_core.tiled import TiledAttentionCompileWarning, tiled_attention
from attn_core.viz.plotting import plot_attention

# round 3 (one line per issue; each issue's helper fills its own)
# round 3 #21 Chinese figures: localize_figure (a notebook's own figure through the catalogs)
# isort: split
from attn_core.viz.localize import localize_figure

# round 3 #21 printed output: localize (a message a notebook prints, e.g. a caught attn_core error, in Chinese)
# isort: split
from attn_core.i18n import localize

# round 3 #22 long context: rope_frequencies
# isort: split
from attn_core.rope_scaling import rope_frequencies

# isort: split

# round 3 #23 linear attention
# isort: split
from attn_core.linear_attention import GatedDeltaNet, LinearAttentionCache, gated_delta_rule, linear_attention

# round 3 #24 sparse attention
# isort: split
from attn_core.compressed_attention import CompressedAttention, CompressedKVCache
from attn_core.lightning_indexer import LightningIndexer
from attn_core.sparse_attention import sparse_attention

# round 3 #25 sinks, gates, differential attention
# isort: split
from attn_core.differential_attention import DifferentialAttention

# round 3 #26 serving engine
# isort: split
from attn_core.serving import ServingEngine

# round 3 #27 triton attention
# isort: split
from attn_core.kernels import triton_attention  # never imports triton (see kernels/__init__.py)

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
    # round 3 names (each issue adds its own below this line)
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
