"""attn_core: the small, verified attention package behind the attn-notebooks series.

The layout is a map of the ideas, in the order the notebooks teach them (one concept per module):

- ``attention``    scaled dot-product attention, the one kernel every layer uses (grouped-query, masks, dropout,
                   learned sink logits)                                                   notebooks 01, 05
- ``masks``        boolean mask factories (True = may attend) and converters              05
- ``layers``       MultiHeadAttention / MultiQueryAttention / GroupedQueryAttention (RoPE, QK-norm, windows,
                   ``output_gate=``, ``sinks=``)                                           02-04, 11, 12c
- ``positions/``   rope, rope_scaling: rotary embeddings and their long-context scalings   06, 06b
- ``caches/``      kv_cache, paged_cache, block_allocator: what decoding keeps             07, 13
- ``flash/``       tiled, tiled_backward, merge, fa4_tricks, kernels/ (Triton): FlashAttention 08, 12, 12b
- ``deepseek/``    latent_attention (MLA), lightning_indexer + sparse_attention (DSA),
                   compressor + compressed_cache + compressed_attention (V4)                09, 09b
- ``linear/``      linear_attention, gated_deltanet: a fixed-size state instead of a cache 12d
- ``variants/``    differential_attention, flex_variants: softmax attention changed in one place 12c

Built on those (never imported by them):

- ``models/``      real pretrained weights in our layers (``load_minilm``, ``load_gemma3``), generation; TinyLM
- ``serving/``     ServingEngine: continuous batching, chunked prefill, prefix caching, preemption (on Gemma 3)
- ``viz/``         plots and explorers (``plot_attention``, widgets, tiles, head view, ``localize_figure``)
- ``exercises/``   the ``check_…`` functions behind the notebooks' exercises
- ``i18n/``        set_language("zh"): learner-facing messages and figures in Chinese (``fonts/``: the CJK subset)

Every public name is ``ac.X``; ``tests/test_import_graph.py`` keeps the arrows pointing one way.
"""

from attn_core import _moved  # importing it lets old module paths (attn_core.rope, ...) work for one release
from attn_core.attention import scaled_dot_product_attention
from attn_core.caches.block_allocator import OutOfBlocksError
from attn_core.caches.kv_cache import KVCache
from attn_core.caches.paged_cache import PagedKVCache
from attn_core.deepseek.compressed_attention import CompressedAttention, CompressedKVCache
from attn_core.deepseek.latent_attention import MultiHeadLatentAttention
from attn_core.deepseek.lightning_indexer import LightningIndexer
from attn_core.deepseek.sparse_attention import sparse_attention
from attn_core.flash.kernels import triton_attention  # never imports triton (kernels/__init__.py)
from attn_core.flash.merge import merge_attention
from attn_core.flash.tiled import TiledAttentionCompileWarning, tiled_attention
from attn_core.i18n import get_language, localize, set_language
from attn_core.layers import GroupedQueryAttention, MultiHeadAttention, MultiQueryAttention
from attn_core.linear.gated_deltanet import GatedDeltaNet, LinearAttentionCache
from attn_core.linear.kda import KimiDeltaAttention, kda_rule
from attn_core.linear.lightning import LightningAttention, lightning_attention, lightning_slopes
from attn_core.linear.linear_attention import gated_delta_rule, linear_attention
from attn_core.linear.mamba2 import Mamba2Mixer
from attn_core.linear.ssd import ssd, ssd_as_attention, ssd_decay_mask
from attn_core.masks import (
    causal_mask,
    chunked_mask,
    mask_from_additive,
    mask_from_blocked,
    mask_from_float,
    mask_to_additive,
    mask_to_blocked,
    padding_mask,
    prefix_lm_mask,
    sliding_window_mask,
)
from attn_core.models.from_hf import layer_from_hf
from attn_core.models.gemma3 import load_gemma3
from attn_core.models.minilm import load_minilm
from attn_core.positions.rope import apply_rope, rope_angles
from attn_core.positions.rope_scaling import rope_frequencies
from attn_core.serving import ServingEngine
from attn_core.variants.differential_attention import DifferentialAttention
from attn_core.viz.figure_scale import set_figure_scale
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
    "chunked_mask",
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
    "OutOfBlocksError",  # what a full PagedKVCache raises: catch it to preempt or wait
    "plot_attention",
    "load_minilm",
    "set_language",
    "set_figure_scale",
    "get_language",
    "load_gemma3",
    "layer_from_hf",
    # round 3
    "localize_figure",
    "localize",
    "ServingEngine",
    "DifferentialAttention",
    "rope_frequencies",
    "gated_delta_rule",
    "linear_attention",
    "GatedDeltaNet",
    "ssd",
    "ssd_as_attention",
    "ssd_decay_mask",
    "Mamba2Mixer",
    "kda_rule",
    "KimiDeltaAttention",
    "lightning_attention",
    "lightning_slopes",
    "LightningAttention",
    "LinearAttentionCache",
    "triton_attention",
    "sparse_attention",
    "LightningIndexer",
    "CompressedAttention",
    "CompressedKVCache",
]

__version__ = "0.1.0"


def __getattr__(name: str):
    """``ac.rope``, ``ac.kv_cache``, ...: the old submodules, served (with a DeprecationWarning) for one release."""
    if f"{__name__}.{name}" in _moved.MOVED:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


import sys as _sys  # noqa: E402

_sys.modules[__name__].__class__ = _moved.Package  # an old path never replaces a public name (see _moved.Package)
