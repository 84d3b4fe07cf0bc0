"""``ac.layer_from_hf(config, layer_idx)``: our token mixer for one decoder layer of a Hugging Face text config.

The returned module's parameter names equal the HF module's (``layer.load_state_dict(hf_attn.state_dict())`` is
strict) and its call is ``layer(x, *, positions=None, cache=None)``: causal as the decoder layer (its window, chunks
and sinks built in, no mask argument), positions ``0..L-1`` or continuing the cache. Softmax layers return
``(out, weights)`` as every softmax layer of the series (and HF's attention modules) does, and take an
``ac.KVCache()``; linear / SSM mixers come from ``attn_core.models.from_hf_linear.linear_layer_from_hf``.

Which class serves which type (each documented against the HF source it mirrors):
- ``HFSoftmaxAttention`` (models/hf_softmax.py; options named after the HF config keys): llama, gemma3_text, gpt_oss
  (sinks, windows, YaRN), llama4_text (chunked attention, NoPE temperature, L2 QK-norm), the full-attention layers of
  qwen3_next / qwen3_5_text (output gate), minimax's softmax layers, nemotron_h's attention layers (no RoPE);
- ``HFDiffLlamaAttention`` (models/hf_diff.py): diffllama;
- ``HFLatentAttention`` / ``HFSparseLatentAttention`` (models/hf_mla.py): deepseek_v3, kimi_linear's MLA layers
  (no RoPE), deepseek_v32 (indexer top-k);
- ``HFGemma4Attention`` (models/hf_gemma4.py): gemma4_text (K=V, KV sharing through the storing layer's cache);
- ``ac.CompressedAttention`` (deepseek/): deepseek_v4, with its own ``ac.CompressedKVCache``.
Layers of kind ``linear_attention`` go to ``attn_core.models.from_hf_linear.linear_layer_from_hf`` (imported lazily).
Every other type or layer raises NotImplementedError naming the type and what is missing.

One piece: the dispatcher, one short branch per covered model type reading that type's config keys.

Precision: our layers compute in the input dtype; HF rounds through float32 in its rotary tables, RMSNorms and most
eager softmaxes, so equality in float64 holds to a float32-sized bound there (tests/test_layer_from_hf.py derives
it), and to 1e-10 where HF stays in float64 (e.g. Llama 4's NoPE layers).
"""

from __future__ import annotations

import torch
from torch import nn

from attn_core.deepseek.compressed_attention import CompressedAttention
from attn_core.models.hf_softmax import HFSoftmaxAttention

__all__ = ["layer_from_hf", "COVERED_SOFTMAX_TYPES"]

# Linear / SSM mixers (another module builds them): (model type, layer kind) pairs served by linear_layer_from_hf.
_LINEAR_KINDS = {"linear_attention", "mamba", "ssm", "lightning"}

COVERED_SOFTMAX_TYPES = (
    "llama",
    "gemma3_text",
    "gpt_oss",
    "llama4_text",
    "qwen3_next",
    "qwen3_5_text",
    "diffllama",
    "deepseek_v3",
    "deepseek_v32",
    "deepseek_v4",
    "gemma4_text",
    "kimi_linear",
    "minimax",
    "nemotron_h",
)


def _rope(config, layer_type: str | None) -> tuple[float, dict | None, float]:
    """``(rope_theta, scaling or None, partial_rotary_factor)`` from ``config.rope_parameters``.

    Gemma 3 keeps one rope_parameters dict per layer type.
    """
    params = dict(getattr(config, "rope_parameters", None) or {})
    if layer_type is not None and layer_type in params and isinstance(params[layer_type], dict):
        params = dict(params[layer_type])  # Gemma 3: {"sliding_attention": {...}, "full_attention": {...}}
    theta = float(params.pop("rope_theta"))
    partial = params.pop("partial_rotary_factor", getattr(config, "partial_rotary_factor", None) or 1.0)
    for multimodal_only in ("mrope_section", "mrope_interleaved"):  # text positions: every section equal
        params.pop(multimodal_only, None)
    scaling = None if params.get("rope_type", "default") == "default" else params
    if scaling is not None and scaling.get("rope_type") == "yarn":
        # HF's yarn reads original_max_position_embeddings from the config when rope_parameters lacks it
        scaling.setdefault("original_max_position_embeddings", config.max_position_embeddings)
    return theta, scaling, float(partial)


def _layer_type(config, layer_idx: int) -> str | None:
    layer_types = getattr(config, "layer_types", None)
    return None if layer_types is None else layer_types[layer_idx]


def _common(config) -> dict:
    return {
        "hidden_size": config.hidden_size,
        "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads,
        "head_dim": getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads,
        "attention_bias": bool(getattr(config, "attention_bias", False)),
    }


def _missing(model_type: str, what: str) -> NotImplementedError:
    return NotImplementedError(f"layer_from_hf does not cover model type {model_type!r}: {what}.")


def _mla(config, *, nope: bool = False, sparse: bool = False) -> nn.Module:
    from attn_core.models.hf_mla import HFLatentAttention, HFSparseLatentAttention

    theta, scaling, _ = (None, None, 1.0) if nope else _rope(config, None)
    extra = {}
    if sparse:  # DeepSeek-V3.2: the indexer; HF always interleaves the MLA's rotary pairs there
        extra = {
            "index_n_heads": config.index_n_heads,
            "index_head_dim": config.index_head_dim,
            "index_topk": config.index_topk,
        }
    return (HFSparseLatentAttention if sparse else HFLatentAttention)(
        config.hidden_size,
        config.num_attention_heads,
        q_lora_rank=config.q_lora_rank,
        kv_lora_rank=config.kv_lora_rank,
        qk_nope_head_dim=config.qk_nope_head_dim,
        qk_rope_head_dim=config.qk_rope_head_dim,
        v_head_dim=config.v_head_dim,
        attention_bias=bool(getattr(config, "attention_bias", False)),
        rope_theta=theta,
        rope_scaling=scaling,
        rope_interleave=True if sparse else bool(getattr(config, "rope_interleave", False)),
        rms_norm_eps=1e-6,  # HF builds these two RMSNorms with their default eps, not config.rms_norm_eps
        **extra,
    )


def _gemma4(config, layer_idx: int, layer_type: str) -> nn.Module:
    from attn_core.models.hf_gemma4 import HFGemma4Attention

    if getattr(config, "use_bidirectional_attention", None) == "all":
        raise _missing("gemma4_text", "bidirectional attention (use_bidirectional_attention='all')")
    layer_config = config.per_layer_config[layer_idx]  # per-layer head_dim and kv heads, as HF reads them
    rope = config.rope_parameters[layer_type] if layer_type in config.rope_parameters else config.rope_parameters
    sliding = layer_type == "sliding_attention"
    return HFGemma4Attention(
        config.hidden_size,
        config.num_attention_heads,
        layer_config.num_key_value_heads,
        layer_config.head_dim,
        rope=rope,
        rms_norm_eps=config.rms_norm_eps,
        attention_bias=bool(config.attention_bias),
        sliding_window=config.sliding_window if sliding else None,
        k_eq_v=bool(config.attention_k_eq_v) and not sliding,
        reuse_kv=config.kv_sharing_modes[layer_idx] == "reuse",
    )


def _deepseek_v4(config, layer_idx: int, layer_type: str) -> nn.Module:
    kinds = ("sliding_attention", "heavily_compressed_attention", "compressed_sparse_attention")
    if layer_type not in kinds:
        raise _missing("deepseek_v4", f"layer {layer_idx} has layer type {layer_type!r} (built: {', '.join(kinds)})")
    params = dict(config.rope_parameters["main" if layer_type == "sliding_attention" else "compress"])
    theta = float(params.pop("rope_theta"))
    partial = params.pop("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0))
    scaling = None if params.get("rope_type", "default") == "default" else params
    compress_rate = None if layer_type == "sliding_attention" else config.compress_rates[layer_type]
    sparse = layer_type == "compressed_sparse_attention"
    return CompressedAttentionFromHF(
        config.hidden_size,
        config.num_attention_heads,
        head_dim=config.head_dim,
        q_lora_rank=config.q_lora_rank,
        qk_rope_head_dim=int(config.head_dim * partial),
        sliding_window=config.sliding_window,
        o_groups=config.o_groups,
        o_lora_rank=config.o_lora_rank,
        compress_rate=compress_rate,
        index_topk=config.index_topk if sparse else None,
        index_n_heads=config.index_n_heads,
        index_head_dim=config.index_head_dim,
        rope_base=theta,
        rope_scaling=scaling,
        eps=config.rms_norm_eps,
    )


class CompressedAttentionFromHF(CompressedAttention):
    """``ac.CompressedAttention`` (HF's names already) with the contract's call: ``positions`` must be the default
    (V4's layer derives them from its ``ac.CompressedKVCache``, the cache its family uses)."""

    def forward(self, x, *, positions=None, cache=None):
        if positions is not None:
            start = len(cache) if cache is not None else 0
            expected = torch.arange(start, start + x.shape[1], device=x.device)
            if not torch.equal(torch.as_tensor(positions, device=x.device).reshape(-1, x.shape[1])[0], expected):
                raise ValueError("DeepSeek-V4's layer takes its positions from the cache: pass positions=None.")
        return super().forward(x, cache=cache)


def layer_from_hf(config, layer_idx: int) -> nn.Module:
    """Our module for decoder layer ``layer_idx``'s token mixer of the HF text config ``config`` (see module doc)."""
    model_type = getattr(config, "model_type", None)
    if getattr(config, "text_config", None) is not None and model_type not in COVERED_SOFTMAX_TYPES:
        raise _missing(str(model_type), "pass the text config (config.text_config), not the multimodal wrapper")
    num_layers = getattr(config, "num_hidden_layers", None)
    if (
        isinstance(layer_idx, bool)
        or not isinstance(layer_idx, int)
        or num_layers is None
        or not 0 <= layer_idx < num_layers
    ):
        raise IndexError(f"layer_idx must be an int in [0, {num_layers}), got {layer_idx!r}.")
    layer_type = _layer_type(config, layer_idx)
    if layer_type in _LINEAR_KINDS:
        try:
            from attn_core.models.from_hf_linear import linear_layer_from_hf
        except ImportError as error:  # the linear/SSM families land separately
            raise _missing(
                str(model_type),
                f"layer {layer_idx} is a {layer_type!r} mixer and attn_core.models.from_hf_linear "
                f"(linear_layer_from_hf) is not available ({error})",
            ) from error
        return linear_layer_from_hf(config, layer_idx)
    if getattr(config, "attn_logit_softcapping", None):
        raise _missing(str(model_type), "attention logit soft-capping (attn_logit_softcapping) is not built")
    if getattr(config, "use_bidirectional_attention", False):
        raise _missing(str(model_type), "bidirectional attention (use_bidirectional_attention=True)")

    if model_type == "llama":
        theta, scaling, partial = _rope(config, None)
        return HFSoftmaxAttention(
            **_common(config), rope_theta=theta, rope_scaling=scaling, partial_rotary_factor=partial
        )
    if model_type == "gemma3_text":
        theta, scaling, partial = _rope(config, layer_type)
        return HFSoftmaxAttention(
            **_common(config),
            scaling=config.query_pre_attn_scalar**-0.5,
            rope_theta=theta,
            rope_scaling=scaling,
            qk_norm="gemma",
            rms_norm_eps=config.rms_norm_eps,
            sliding_window=config.sliding_window if layer_type == "sliding_attention" else None,
        )
    if model_type == "gpt_oss":
        theta, scaling, partial = _rope(config, None)
        return HFSoftmaxAttention(
            **_common(config),
            rope_theta=theta,
            rope_scaling=scaling,
            sinks=True,
            sliding_window=config.sliding_window if layer_type == "sliding_attention" else None,
        )
    if model_type in ("qwen3_next", "qwen3_5_text"):
        if layer_type != "full_attention":
            raise _missing(str(model_type), f"layer {layer_idx} has layer type {layer_type!r}")
        theta, scaling, partial = _rope(config, None)
        return HFSoftmaxAttention(
            **_common(config),
            rope_theta=theta,
            rope_scaling=scaling,
            partial_rotary_factor=partial,
            qk_norm="gemma",
            rms_norm_eps=config.rms_norm_eps,
            output_gate=True,
        )
    if model_type == "llama4_text":
        use_rope = bool(config.no_rope_layers[layer_idx])  # HF's name: 1 = this layer uses RoPE
        theta, scaling, partial = _rope(config, None)
        return HFSoftmaxAttention(
            **_common(config),
            rope_theta=theta if use_rope else None,
            rope_scaling=scaling,
            rope_interleaved=True,  # HF multiplies pairs (2i, 2i+1) as complex numbers
            qk_norm="l2" if config.use_qk_norm else None,
            rms_norm_eps=config.rms_norm_eps,
            attention_chunk_size=config.attention_chunk_size if layer_type == "chunked_attention" else None,
            attn_temperature_tuning=bool(config.attn_temperature_tuning),
            floor_scale=config.floor_scale,
            attn_scale=config.attn_scale,
        )
    if model_type == "diffllama":
        from attn_core.models.hf_diff import HFDiffLlamaAttention

        theta, scaling, _ = _rope(config, None)
        return HFDiffLlamaAttention(
            **_common(config),
            rope_theta=theta,
            rope_scaling=scaling,
            layer_idx=layer_idx,
            rms_norm_eps=config.rms_norm_eps,
        )
    if model_type == "deepseek_v3":
        return _mla(config)
    if model_type == "deepseek_v32":
        return _mla(config, sparse=True)
    if model_type == "deepseek_v4":  # cache: ac.CompressedKVCache (window keys and compressed entries)
        return _deepseek_v4(config, layer_idx, layer_type)
    if model_type == "minimax":  # its softmax layers: Mistral's (RoPE, an optional window on every one of them)
        if layer_type != "full_attention":
            raise _missing(str(model_type), f"layer {layer_idx} has layer type {layer_type!r}")
        theta, scaling, partial = _rope(config, None)
        return HFSoftmaxAttention(
            **{**_common(config), "attention_bias": False},  # HF's MiniMaxAttention has no biases
            rope_theta=theta,
            rope_scaling=scaling,
            partial_rotary_factor=partial,
            sliding_window=getattr(config, "sliding_window", None),
        )
    if model_type == "nemotron_h":  # its attention layers: no positions at all (the Mamba-2 layers carry order)
        if layer_type != "full_attention":
            what = "no token mixer (an MLP / MoE layer)" if layer_type in ("mlp", "moe") else "a mixer not built"
            raise _missing(str(model_type), f"layer {layer_idx} has layer type {layer_type!r}: {what}")
        return HFSoftmaxAttention(**{**_common(config), "attention_bias": False}, rope_theta=None)
    if model_type == "kimi_linear":  # its softmax layers: MLA without RoPE
        if layer_type != "full_attention":
            raise _missing(str(model_type), f"layer {layer_idx} has layer type {layer_type!r}")
        return _mla(config, nope=True)
    if model_type == "gemma4_text":
        return _gemma4(config, layer_idx, layer_type)
    raise _missing(str(model_type), f"no token mixer is built for it (covered: {', '.join(COVERED_SOFTMAX_TYPES)})")
