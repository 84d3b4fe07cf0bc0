"""Which attention features the pinned ``transformers`` ships, and which ``attn_core`` piece teaches each.

    python tools/attention_census.py            # the table: model type -> features -> piece and notebook
    python tools/attention_census.py --summary  # the counts the README quotes
    python tools/attention_census.py --json     # machine-readable, for tests and the book

It walks every model type that has a causal-LM class (``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``: decoders, and the
decoder halves that transformers also registers as causal LMs), reads the text config's defaults and the
modeling source file (read as text: nothing is imported or run), and detects the features below from config keys
and source markers. A feature is **covered** when its piece exists in the installed ``attn_core`` (the name is
resolved, and a keyword checked in its signature where the feature is an option), **excluded** when
``EXCLUDED`` gives a reason, and otherwise **not covered**. Two catch-alls keep the census honest as transformers
moves: a token-mixer class whose name no feature explains, and a value of ``layer_types`` (or its cousins) that
no feature explains, are features of their own, and so are not covered until someone classifies them.
tests/test_attention_census.py fails when a feature is neither covered nor excluded.

Detection is by markers, an editor's reading of the code, not a proof: the table says which key or source
marker each feature was found by, so a reader can check any row.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import logging
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

# ---------------------------------------------------------------- what teaches what
# feature -> (piece: "Name" or "Name(keyword=)" or "module:Name", notebook(s), one line)
PIECES: dict[str, tuple[str, str, str]] = {
    "softmax attention": ("scaled_dot_product_attention", "01", "softmax(QKᵀ/√d)V, masks, dropout"),
    "multi-head": ("MultiHeadAttention", "02", "heads split, attend, concatenate, project"),
    "grouped/multi-query KV heads": ("GroupedQueryAttention", "03, 04", "fewer K/V heads than query heads"),
    "cross-attention": ("scaled_dot_product_attention", "01", "queries from one sequence, keys from another"),
    "bidirectional / prefix attention": ("prefix_lm_mask", "05, 10", "encoders and prefix-LM masks"),
    "rotary (RoPE)": ("apply_rope", "06", "rotate query/key pairs by position"),
    "interleaved rotary pairs": ("apply_rope(interleaved=)", "06, 09", "GPT-J / DeepSeek pair layout"),
    "partial rotary": ("apply_rope(partial_rotary_factor=)", "06b", "RoPE on a fraction of the dimensions"),
    "RoPE scaling: linear": ("rope_frequencies", "06b", "position interpolation"),
    "RoPE scaling: llama3": ("rope_frequencies", "06b", "Llama 3's band-wise scaling"),
    "RoPE scaling: yarn": ("rope_frequencies", "06b", "YaRN: NTK-by-parts + attention factor"),
    "NoPE layers": ("GroupedQueryAttention(rope_base=)", "06b", "layers without positions (rope_base=None)"),
    "ALiBi": ("attn_core.variants.flex_variants:alibi", "12c", "linear distance bias per head"),
    "sliding window": ("sliding_window_mask", "05, 11b, 13", "local layers; KVCache(window=) keeps only the window"),
    "QK-norm": ("GroupedQueryAttention(qk_norm=)", "11", "RMSNorm on queries and keys per head"),
    "attention logit soft-capping": ("attn_core.variants.flex_variants:softcap", "12c", "tanh cap on scores"),
    "learned attention sinks": ("GroupedQueryAttention(sinks=)", "12c", "a learned logit per head in the softmax"),
    "output gate": ("GroupedQueryAttention(output_gate=)", "12c", "sigmoid gate on the attention output"),
    "differential attention": ("DifferentialAttention", "12c", "two softmax maps subtracted"),
    "latent KV (MLA)": ("MultiHeadLatentAttention", "09", "one small latent cached per token"),
    "top-k indexer (DSA)": ("LightningIndexer", "09b", "a cheap scorer picks each query's keys"),
    "compressed KV (DeepSeek-V4)": ("CompressedAttention", "09b", "m tokens pooled into one entry"),
    "gated delta rule": ("GatedDeltaNet", "12d", "linear attention with a delta-rule write and a decay"),
    "linear attention": ("linear_attention", "12d", "attention without the softmax, a fixed-size state"),
    # issue #37's second wave: covered as soon as the piece exists in attn_core
    "chunked local attention": ("chunked_mask", "-", "Llama 4: attention within fixed chunks"),
    "NoPE query temperature": (
        "attn_core.models.hf_softmax:HFSoftmaxAttention(attn_temperature_tuning=)",
        "-",
        "Llama 4: log-position temperature on NoPE layers",
    ),
    "weightless L2 QK-norm": (
        "attn_core.models.hf_softmax:HFSoftmaxAttention(qk_norm=)",
        "-",
        "Llama 4: L2-normalised queries and keys",
    ),
    "K = V": (
        "attn_core.models.hf_gemma4:HFGemma4Attention(k_eq_v=)",
        "-",
        "Gemma 4: keys reused as values on global layers",
    ),
    "KV sharing across layers": (
        "attn_core.models.hf_gemma4:HFGemma4Attention(reuse_kv=)",
        "-",
        "Gemma 4: later layers read earlier layers' K/V",
    ),
    "RoPE scaling: proportional": ("attn_core.models.hf_gemma4:proportional_rope", "-", "Gemma 4's proportional RoPE"),
    "per-channel gated delta (KDA)": ("KimiDeltaAttention", "-", "Kimi Linear's KDA"),
    "state-space duality (Mamba-2)": ("Mamba2Mixer", "-", "a selective SSM as masked attention"),
    "lightning attention": ("LightningAttention", "-", "MiniMax's block-wise linear attention with decay"),
}

# feature -> what it is and where it stands: found in the pinned transformers, read, not built yet (issue #37's
# follow-up). Reported as "pending" in the table and the summary, never as covered.
PENDING: dict[str, str] = {
    "convolutional attention (ZAYA CCA)": "ZAYA's compressed convolutional attention: depthwise convolutions over "
    "time on compressed queries/keys (config cca_time0/cca_time1)",
    "QK L2 clipping (Inkling 2)": "queries and keys clipped in L2 norm before the dot product (qk_l2_clip_threshold)",
    "attention-residual blocks (Inkling 2)": "residual stream regrouped every n layers (n_layers_per_attn_res_block)",
    "token-budget indexer (Qwen4-exp QSA)": "an indexer that keeps a token budget over compressed keys "
    "(indexer_budget, indexer_compress_ratio)",
    "block top-k indexer (MiniMax-M3)": "an indexer that picks top-k key blocks plus local blocks "
    "(index_topk_blocks, index_block_size, index_local_blocks)",
    "value scale (MiMo-V2)": "values multiplied by a constant before attention (attention_value_scale)",
    "negative-eigenvalue delta rule (OLMo hybrid)": "the delta rule's beta allowed in (0, 2) so the state "
    "transition can have negative eigenvalues (linear_allow_neg_eigval)",
    "dynamic mask attention (Doge)": "a learned, input-dependent mask keeping keep_window_size keys per query",
}
# issue #37's second wave, being built: PIECES names the piece, and the feature turns "covered" when it exists
for _feature in (
    "chunked local attention",
    "NoPE query temperature",
    "weightless L2 QK-norm",
    "K = V",
    "KV sharing across layers",
    "RoPE scaling: proportional",
    "per-channel gated delta (KDA)",
    "state-space duality (Mamba-2)",
    "lightning attention",
):
    PENDING[_feature] = f"issue #37: {PIECES[_feature][2]}"

# feature -> why the series does not build it (each a deliberate choice, re-read when transformers moves)
EXCLUDED: dict[str, str] = {
    "Mamba-1 selective scan": "per-channel diagonal A without the scalar-A structure that makes Mamba-2 an attention "
    "(SSD); the series teaches the SSM family through Mamba-2",
    "RWKV time mixing": "RWKV-4's WKV recurrence (decay + bonus per channel); per-channel decay is taught through KDA",
    "xLSTM cells": "mLSTM/sLSTM recurrent cells with exponential gating: a recurrent family, not attention",
    "RG-LRU recurrence": "RecurrentGemma's real-gated linear recurrent unit: an RNN layer beside local attention",
    "short convolution mixer": "LFM2's gated depthwise convolution layers: a convolution, not an attention",
    "LSH attention": "Reformer's locality-sensitive hashing attention (2020): superseded by exact tiled attention",
    "block-sparse attention (BigBird)": "fixed random/window/global block sparsity of 2020 encoders; "
    "the series teaches learned sparsity (DeepSeek's indexer) instead",
    "relative position buckets": "T5-style bucketed relative bias of encoder-decoder models (2019-20)",
    "segment memory (Transformer-XL/XLNet)": "recurrence over cached segments with relative encodings (2019)",
    "n-gram stream (ProphetNet)": "predicting n future tokens with extra attention streams (2020)",
    "hierarchical reasoning loops": "HRM's recurrent modules wrap ordinary attention blocks; no new attention",
}

# known token-mixer class name endings: a class matching none of these is reported as unclassified
MIXER_CLASS = re.compile(
    r"(Attention|Mixer|DeltaNet|Retention|Indexer|Compressor|Rwkv\w*|Lstm\w*|RecurrentBlock|Rglru|ShortConv)\d*$"
)
NOT_TEXT = re.compile(r"Vision|Audio|Image|Visual|Patch|VQVAE|Conformer|Speech|Video|Vit|Clip|Siglip|Pixel|Sound")
EXPLAINED_CLASS = re.compile(
    r"(Self|Cross|Flash|Sdpa|Decoder|Encoder|Text|Global|Local|Sliding|Full|Sparse|Block|Causal|Linear)?Attention\d*$"
    r"|Indexer$|IndexerScorer$|Compressor$|GatedDeltaNet$|DeltaAttention$|Mamba2?Mixer$|LightningAttention$"
    r"|ShortConv$|Rwkv\w*$|RecurrentBlock$|Rglru$|Lstm\w*$"
    r"|^BambaMixer$|^FalconH1Mixer$"  # Mamba-2 mixers under their model's name (detected by segment_sum)
)


# config keys about attention: one that is neither read by a detector above nor listed here as not a feature of
# its own becomes the feature "config key 'name'" (not covered), so a new transformers release is noticed.
ATTENTION_KEY = re.compile(
    r"attn|attention|rope|rotary|kv|window|chunk|sink|index|compress|ssm|mamba|linear_|lora|qk|query|softcap"
    r"|temperature|nope|cca|clip|lambda|conv|state|time_step|dt_|eigval|gate"
)
KNOWN_KEYS = {
    # read by the detectors in detect()
    "num_key_value_heads",
    "num_kv_heads",
    "num_query_groups",
    "multi_query",
    "add_cross_attention",
    "cross_attention_layers",
    "cross_attention_hidden_size",
    "use_bidirectional_attention",
    "prefix_lm",
    "rope_parameters",
    "rope_theta",
    "rotary_dim",
    "layer_rope_theta",
    "rope_interleave",
    "partial_rotary_factor",
    "rotary_pct",
    "no_rope_layers",
    "no_rope_layer_interval",
    "sliding_window",
    "sliding_window_pattern",
    "_sliding_window_pattern",
    "use_sliding_window",
    "attention_window_size",
    "local_attention_window_len",
    "sliding_window_size",
    "attention_chunk_size",
    "attn_temperature_tuning",
    "qk_layernorm",
    "use_qk_norm",
    "attn_logit_softcapping",
    "logits_soft_cap",
    "attn_output_gate",
    "output_gate_type",
    "use_attention_gate",
    "kv_lora_rank",
    "index_topk",
    "indexer_n_heads",
    "index_n_heads",
    "compress_rates",
    "compress_ratio",
    "attention_k_eq_v",
    "num_kv_shared_layers",
    "kv_sharing_modes",
    "relative_attention_num_buckets",
    "position_bias_num_buckets",
    "mem_len",
    "cca_time0",
    "cca_time1",
    "qk_l2_clip_threshold",
    "rel_l2_clip_threshold",
    "n_layers_per_attn_res_block",
    "indexer_budget",
    "indexer_compress_ratio",
    "index_topk_blocks",
    "index_block_size",
    "index_local_blocks",
    "attention_value_scale",
    "linear_allow_neg_eigval",
    "keep_window_size",
    "rope_scaling",
    # sizes, rates and switches of features detected above (no feature of their own)
    "attention_bias",
    "attention_dropout",
    "attention_probs_dropout_prob",
    "attn_pdrop",
    "attention_out_bias",
    "qkv_bias",
    "use_qkv_bias",
    "attention_head_dim",
    "attention_head_size",
    "attention_heads",
    "attention_hidden_size",
    "num_attention_heads_per_layer",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "num_encoder_attention_heads",
    "num_decoder_attention_heads",
    "attention_layers",
    "attention_types",
    "attention_type",
    "attn_type",
    "attn_layers",
    "attn_config",
    "attn_layer_indices",
    "attn_layer_offset",
    "attn_layer_period",
    "full_attn_idxs",
    "global_attn_every_n_layers",
    "local_layer_ids",
    "mtp_local_layer_ids",
    "hybrid_layer_ids",
    "max_window_layers",
    "prefix_dense_sliding_window_pattern",
    "swa_head_dim",
    "swa_num_attention_heads",
    "swa_num_key_value_heads",
    "local_attention",
    "attn_scale",
    "floor_scale",
    "q_lora_rank",
    "o_lora_rank",
    "qk_head_dim",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "kv_channels",
    "index_head_dim",
    "indexer_head_dim",
    "indexer_kv_heads",
    "indexer_types",
    "compress_rope_theta",
    "learnable_sink_init",
    "lambda_std_dev",
    "kda_safe_gate",
    "linear_conv_kernel_dim",
    "linear_head_dim",
    "linear_num_heads",
    "linear_key_head_dim",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_value_head_dim",
    "linear_a_log_max",
    "linear_a_log_min",
    "linear_dt_init_floor",
    "linear_dt_max",
    "linear_dt_min",
    "linear_attn_alpha_factor",
    "linear_attn_beta_factor",
    "full_attn_alpha_factor",
    "full_attn_beta_factor",
    "short_conv_kernel_size",
    "conv_L_cache",
    "conv_bias",
    "conv_kernel",
    "conv_kernel_size",
    "conv1d_width",
    "use_conv_bias",
    "number_of_conv_states",
    "state_size",
    "ssm_state_size",
    "time_step_floor",
    "time_step_init_scheme",
    "time_step_limit",
    "time_step_max",
    "time_step_min",
    "time_step_rank",
    "time_step_scale",
    "mamba_chunk_size",
    "mamba_conv_bias",
    "mamba_d_conv",
    "mamba_d_head",
    "mamba_d_ssm",
    "mamba_d_state",
    "mamba_dt_rank",
    "mamba_expand",
    "mamba_head_dim",
    "mamba_headdim",
    "mamba_hidden_act",
    "mamba_n_groups",
    "mamba_n_heads",
    "mamba_ngroups",
    "mamba_norm_before_gate",
    "mamba_num_heads",
    "mamba_proj_bias",
    "mamba_rms_norm",
    "mamba_ssm_cache_dtype",
    "n_mamba_heads",
    "hidden_mamba_act",
    "use_mamba_kernels",
    "use_mambapy",
    "ssm_in_multiplier",
    "ssm_multipliers",
    "ssm_out_multiplier",
    "query_pre_attn_scalar",
    "attention_multiplier",
    "attention_in_multiplier",
    "attention_out_multiplier",
    "scale_attn_weights",
    "scale_attn_by_inverse_layer_idx",
    "reorder_and_upcast_attn",
    "attention_softmax_in_fp32",
    "scale_attention_softmax_in_fp32",
    "clip_qkv",
    "chunk_size",
    "block_size",
    "num_random_blocks",
    "local_attn_chunk_length",
    "local_num_chunks_after",
    "local_num_chunks_before",
    "lsh_attn_chunk_length",
    "lsh_num_chunks_after",
    "lsh_num_chunks_before",
    "lsh_attention_probs_dropout_prob",
    "local_attention_probs_dropout_prob",
    "chunkwise_kernel",
    "gate_soft_cap",
    "qk_dim_factor",
    "inference_state_dtype",
    "max_inference_chunksize",
    "return_last_states",
    "use_shared_attention_adapter",
    "use_mem_rope",
    "cross_attn_k",
    "parallel_attn",
    "num_ln_in_parallel_attn",
    "position_bias_max_distance",
    "rotary_value",
    "window_size",
    # not about attention at all (the pattern above is wide on purpose)
    "chunk_size_feed_forward",
    "chunk_size_lm_head",
    "output_attentions",
    "mlp_gate_softcap",
    "mlp_up_softcap",
    "moe_router_logit_softcapping",
    "gated_norm_rank",
    "gating",
    "altup_coef_clip",
    "final_logit_softcapping",
    "rms_norm_eps_moe_gate",
    "ple_conv_kernel_size",
    "enable_moe_block",
    "block_types",
    "hc_sinkhorn_iters",
    "num_attention_heads",
    "output_hidden_states",
    "mask_index",
    "unk_index",
    "moe_layer_start_index",
    "moe_layer_end_index",
    "mtp_hidden_states_first",
    "shared_expert_sink",
}


@dataclass
class Row:
    model_type: str
    features: dict[str, str]  # feature -> evidence (config key or source marker)
    status: dict[str, str]  # feature -> "covered: piece (notebook)" / "excluded: reason" / "not covered"

    @property
    def fully_covered(self) -> bool:
        return all(s.startswith("covered") for s in self.status.values())

    @property
    def accounted(self) -> bool:
        """Every feature covered or excluded with a reason (pending ones are gaps, not accounted for)."""
        return all(s.startswith(("covered", "excluded")) for s in self.status.values())


def piece_exists(piece: str) -> bool:
    """``Name``, ``Name(keyword=)`` or ``module:Name`` resolved in the installed attn_core."""
    import attn_core

    keyword = None
    match = re.fullmatch(r"(.+)\((\w+)=\)", piece)
    if match:
        piece, keyword = match.groups()
    module, _, name = piece.rpartition(":")
    try:
        obj = getattr(importlib.import_module(module) if module else attn_core, name)
    except (ImportError, AttributeError):
        return False
    if keyword is None:
        return True
    return keyword in inspect.signature(obj).parameters


def _source(model_type: str) -> str:
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    module = model_type_to_module_name(model_type)
    for name in (
        f"transformers.models.{module}.modeling_{module}",
        f"transformers.models.deprecated.{module}.modeling_{module}",
    ):
        try:
            spec = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            spec = None
        if spec is not None and spec.origin:
            return Path(spec.origin).read_text(encoding="utf-8")
    return ""


def _config(model_type: str) -> dict:
    from transformers import CONFIG_MAPPING

    try:
        config = CONFIG_MAPPING[model_type]()
        config = config.get_text_config(decoder=True)
        return config.to_dict()
    except Exception:  # a config class that cannot be built from defaults: keys from its signature
        cls = CONFIG_MAPPING[model_type]
        return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items() if name != "self"}


LAYER_KIND_KEYS = ("layer_types", "layers_block_type", "block_types", "attention_types", "hybrid_override_pattern")
LAYER_KINDS = {  # a value of those keys -> the feature it is (None: not a token mixer, or plain softmax attention)
    "full_attention": None,
    "attention": None,
    "global": None,
    "full": None,
    "mlp": None,
    "moe": None,
    "hybrid": None,
    "shared": None,
    "*": None,
    "-": None,
    "E": None,
    "sliding_attention": "sliding window",
    "local": "sliding window",
    "hybrid_sliding": "sliding window",
    "chunked_attention": "chunked local attention",
    "linear_attention": None,  # which linear mixer is detected from the source (delta rule, KDA, lightning, ...)
    "mamba": "state-space duality (Mamba-2)",
    "M": "state-space duality (Mamba-2)",
    "conv": "short convolution mixer",
    "recurrent": "RG-LRU recurrence",
    "compressed_sparse_attention": "compressed KV (DeepSeek-V4)",
    "heavily_compressed_attention": "compressed KV (DeepSeek-V4)",
    "indexed_attention": "top-k indexer (DSA)",
}


def detect(model_type: str, cfg: dict | None = None, src: str | None = None) -> dict[str, str]:
    """The attention features of one model type: feature -> the key or marker it was found by.

    ``cfg`` (the text config's ``to_dict()``) and ``src`` (the modeling file's text) are read from the installed
    transformers unless given (tests give them)."""
    cfg = _config(model_type) if cfg is None else cfg
    src = _source(model_type) if src is None else src
    keys = set(cfg)
    found: dict[str, str] = {}

    def key(feature: str, *names: str, truthy: bool = False) -> None:
        for name in names:
            if name in keys and (not truthy or cfg[name] not in (None, False, 0, [], "")):
                found.setdefault(feature, f"config {name}")
                return

    def marker(feature: str, pattern: str, flags: int = 0) -> None:
        hit = re.search(pattern, src, flags)
        if hit:
            found.setdefault(feature, f"source {hit.group(0)[:40]!r}")

    marker("softmax attention", r"softmax\(")
    marker("multi-head", r"num_heads|num_attention_heads|n_head")
    key("grouped/multi-query KV heads", "num_key_value_heads", "num_kv_heads", "num_query_groups", "multi_query")
    marker("grouped/multi-query KV heads", r"def repeat_kv")
    key("cross-attention", "add_cross_attention", "cross_attention_layers", "cross_attention_hidden_size")
    marker("cross-attention", r"encoder_attn\b|class \w*CrossAttention\b")
    key("bidirectional / prefix attention", "use_bidirectional_attention", "prefix_lm", "is_decoder")
    key("rotary (RoPE)", "rope_parameters", "rope_theta", "rotary_dim", "layer_rope_theta")
    marker("rotary (RoPE)", r"apply_rotary_pos_emb|rotate_half|RotaryEmbedding")
    key("interleaved rotary pairs", "rope_interleave")
    marker("interleaved rotary pairs", r"apply_rotary_pos_emb_interleave|rotate_every_two")
    key("partial rotary", "partial_rotary_factor", "rotary_dim", "rotary_pct", truthy=True)
    marker("partial rotary", r"partial_rotary_factor|rotary_ndims")
    key("NoPE layers", "no_rope_layers", "no_rope_layer_interval")
    marker("ALiBi", r"alibi", re.I)
    key(
        "sliding window",
        "sliding_window",
        "sliding_window_pattern",
        "use_sliding_window",
        "attention_window_size",
        "local_attention_window_len",
        "sliding_window_size",
        truthy=True,
    )
    key("chunked local attention", "attention_chunk_size", truthy=True)
    key("NoPE query temperature", "attn_temperature_tuning", truthy=True)
    marker("weightless L2 QK-norm", r"class \w*L2Norm\b")
    key("QK-norm", "qk_layernorm", "use_qk_norm", truthy=True)
    marker("QK-norm", r"self\.(q_norm|k_norm|q_layernorm|k_layernorm|query_layernorm)\s*=")
    key("attention logit soft-capping", "attn_logit_softcapping", "logits_soft_cap", truthy=True)
    marker("learned attention sinks", r"self\.sinks\s*=|learnable_sink")
    key("output gate", "attn_output_gate", "output_gate_type", "use_attention_gate", truthy=True)
    marker("output gate", r"attn_output_gate|torch\.sigmoid\(gate\)")
    marker("differential attention", r"lambda_q1")
    key("latent KV (MLA)", "kv_lora_rank", truthy=True)
    key("top-k indexer (DSA)", "index_topk", "indexer_n_heads", "index_n_heads", "index_topk_blocks", truthy=True)
    marker("top-k indexer (DSA)", r"class \w*Indexer\(")
    key("compressed KV (DeepSeek-V4)", "compress_rates", "compress_ratio", truthy=True)
    marker("gated delta rule", r"gated_delta_rule")
    marker("per-channel gated delta (KDA)", r"chunk_kda|KimiDeltaAttention|kda_gate|def \w*kda\w*\(")
    marker("state-space duality (Mamba-2)", r"class \w*Mamba2\w*Mixer\b|def segment_sum|segsum")
    if "state-space duality (Mamba-2)" not in found:
        marker("Mamba-1 selective scan", r"class \w*MambaMixer\b|selective_scan")
    marker("lightning attention", r"class \w*LightningAttention\b")
    key("K = V", "attention_k_eq_v")  # the type can do it (off in some default configs)
    key("KV sharing across layers", "num_kv_shared_layers", "kv_sharing_modes")
    marker("RWKV time mixing", r"class \w*Rwkv\w*(SelfAttention|TimeMix)\b|rwkv_linear_attention")
    marker("xLSTM cells", r"mlstm|slstm", re.I)
    marker("RG-LRU recurrence", r"class \w*Rglru\b|RecurrentBlock")
    marker("short convolution mixer", r"class \w*ShortConv\b")
    marker("LSH attention", r"class \w*LSHSelfAttention\b")
    marker("block-sparse attention (BigBird)", r"class \w*BlockSparseAttention\b")
    key("relative position buckets", "relative_attention_num_buckets", "position_bias_num_buckets", "num_buckets")
    key("segment memory (Transformer-XL/XLNet)", "mem_len")
    key("n-gram stream (ProphetNet)", "ngram")
    key("hierarchical reasoning loops", "H_cycles")
    marker("linear attention", r"def \w*linear_attention\w*\(|class \w*LinearAttention\b")
    key("convolutional attention (ZAYA CCA)", "cca_time0", "cca_time1")
    key("QK L2 clipping (Inkling 2)", "qk_l2_clip_threshold", "rel_l2_clip_threshold")
    key("attention-residual blocks (Inkling 2)", "n_layers_per_attn_res_block")
    key("token-budget indexer (Qwen4-exp QSA)", "indexer_budget", "indexer_compress_ratio")
    key("block top-k indexer (MiniMax-M3)", "index_topk_blocks", "index_block_size", "index_local_blocks")
    key("value scale (MiMo-V2)", "attention_value_scale", truthy=True)
    key("negative-eigenvalue delta rule (OLMo hybrid)", "linear_allow_neg_eigval", truthy=True)
    key("dynamic mask attention (Doge)", "keep_window_size")
    for name in sorted(keys - KNOWN_KEYS):
        if ATTENTION_KEY.search(name):
            found.setdefault(f"config key {name!r}", "config key no feature explains")

    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    ropes = rope.values() if isinstance(rope, dict) and all(isinstance(v, dict) for v in rope.values()) else [rope]
    for params in ropes:
        if isinstance(params, dict):
            kind = params.get("rope_type", params.get("type", "default"))
            if kind and kind != "default":
                feature = {"dynamic": "dynamic NTK RoPE", "longrope": "longrope"}.get(kind, f"RoPE scaling: {kind}")
                found.setdefault(feature, f"config rope_parameters rope_type={kind!r}")

    for name in LAYER_KIND_KEYS:
        values = cfg.get(name)
        if isinstance(values, str):
            values = list(values)
        for value in values if isinstance(values, list | tuple) else []:
            if isinstance(value, list | tuple):
                continue
            value = str(value)
            feature = LAYER_KINDS.get(value, f"layer kind {value!r}")
            if feature is not None:
                found.setdefault(feature, f"config {name} has {value!r}")

    for cls in re.findall(r"^class (\w+)\(", src, flags=re.M):
        if MIXER_CLASS.search(cls) and not NOT_TEXT.search(cls) and not EXPLAINED_CLASS.search(cls):
            found.setdefault(f"mixer class {cls}", "source class")
    return found


def status_of(feature: str) -> str:
    if feature in PIECES:
        piece, notebook, _ = PIECES[feature]
        if piece_exists(piece):
            where = piece.replace(":", ".") if ":" in piece else f"ac.{piece}"  # a module path, or a public name
            return f"covered: {where} (notebook {notebook})"
    if feature in EXCLUDED:
        return f"excluded: {EXCLUDED[feature]}"
    if feature in PENDING:
        return f"pending: {PENDING[feature]}"
    return "not covered"


def census() -> list[Row]:
    logging.getLogger("transformers").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    rows = []
    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        features = detect(model_type)
        rows.append(Row(model_type, features, {f: status_of(f) for f in features}))
    return rows


def summary(rows: list[Row]) -> dict:
    features = sorted({f for row in rows for f in row.features})
    return {
        "model_types": len(rows),
        "fully_covered": sum(row.fully_covered for row in rows),
        "covered_or_excluded": sum(row.accounted for row in rows),
        "pending": sorted({f for row in rows for f, s in row.status.items() if s.startswith("pending")}),
        "features": len(features),
        "not_covered": sorted({f for row in rows for f, s in row.status.items() if s == "not covered"}),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summary", action="store_true", help="print the counts only")
    parser.add_argument("--json", action="store_true", help="print rows and summary as JSON")
    args = parser.parse_args(argv)
    rows = census()
    if args.json:
        out = {"rows": [row.__dict__ for row in rows], "summary": summary(rows)}
        print(json.dumps(out, indent=1, ensure_ascii=False))
        return
    if not args.summary:
        print("| model type | feature | found by | attn_core |")
        print("|---|---|---|---|")
        for row in rows:
            for feature in sorted(row.features):
                print(f"| {row.model_type} | {feature} | {row.features[feature]} | {row.status[feature]} |")
        print()
    s = summary(rows)
    print(
        f"{s['model_types']} model types with a causal-LM class in transformers "
        f"{importlib.import_module('transformers').__version__}; {s['features']} attention features found; "
        f"{s['fully_covered']} types fully covered by attn_core, {s['covered_or_excluded']} covered or excluded "
        f"with a reason."
    )
    if s["pending"]:
        print("pending (read, not built yet):", ", ".join(s["pending"]))
    if s["not_covered"]:
        print("not covered:", ", ".join(s["not_covered"]))


if __name__ == "__main__":
    sys.exit(main())
