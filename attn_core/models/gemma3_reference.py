"""The reference: Hugging Face's ``Gemma3ForCausalLM`` holding the same weights as our :class:`Gemma3`.

``transformers`` can load the GGUF itself (``from_pretrained(dir, gguf_file=..., attn_implementation="eager")``),
but that parses and dequantizes the file again (about 45 s here). ``hugging_face_gemma3(lm)`` builds the
same Hugging Face module from our already-converted tensors in a fraction of a second (after importing
transformers' Gemma 3 code, ~3 s); ``tests/test_gemma3.py``
checks that both routes give Hugging Face identical weights, so comparisons with either are the same.
"""

from __future__ import annotations

import torch

from attn_core.models.gemma3 import Gemma3, _skip_init

__all__ = ["hugging_face_config", "hugging_face_state_dict", "hugging_face_gemma3"]

# our per-block names -> Hugging Face's (under model.layers.{i}.)
HF_BLOCK_NAMES = {
    "attention.q_proj": "self_attn.q_proj",
    "attention.k_proj": "self_attn.k_proj",
    "attention.v_proj": "self_attn.v_proj",
    "attention.o_proj": "self_attn.o_proj",
    "attention.q_norm": "self_attn.q_norm",
    "attention.k_norm": "self_attn.k_norm",
    "input_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "pre_ffn_norm": "pre_feedforward_layernorm",
    "post_ffn_norm": "post_feedforward_layernorm",
    "gate": "mlp.gate_proj",
    "up": "mlp.up_proj",
    "down": "mlp.down_proj",
}


def hugging_face_config(lm: Gemma3):
    """A ``Gemma3TextConfig`` with our config's numbers (eager attention: the weights can be returned)."""
    from transformers import Gemma3TextConfig

    c = lm.config
    return Gemma3TextConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_dim,
        intermediate_size=c.ffn_dim,
        num_hidden_layers=c.num_layers,
        num_attention_heads=c.num_heads,
        num_key_value_heads=c.num_kv_heads,
        head_dim=c.head_dim,
        sliding_window=c.sliding_window,
        layer_types=["full_attention" if c.is_global(i) else "sliding_attention" for i in range(c.num_layers)],
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": c.rope_base_global},
            "sliding_attention": {"rope_type": "default", "rope_theta": c.rope_base_local},
        },
        query_pre_attn_scalar=int(c.query_pre_attn_scalar),
        rms_norm_eps=c.rms_norm_eps,
        max_position_embeddings=c.context_length,
        bos_token_id=c.bos_token_id,
        eos_token_id=c.eos_token_id,
        pad_token_id=c.pad_token_id,
        tie_word_embeddings=True,
        attn_implementation="eager",
    )


def hugging_face_state_dict(lm: Gemma3) -> dict[str, torch.Tensor]:
    """Our weights under Hugging Face's names. Its RMSNorms multiply by ``1 + weight``: subtract the 1."""
    state = {}
    for name, tensor in lm.state_dict().items():
        if name == "embed.weight":
            state["model.embed_tokens.weight"] = tensor
            continue
        if name == "final_norm.weight":
            state["model.norm.weight"] = tensor - 1
            continue
        _, index, *rest = name.split(".")  # layers.{i}.<module>.weight
        module, leaf = ".".join(rest[:-1]), rest[-1]
        value = tensor - 1 if module.endswith("norm") else tensor
        state[f"model.layers.{index}.{HF_BLOCK_NAMES[module]}.{leaf}"] = value
    return state


def hugging_face_gemma3(lm: Gemma3):
    """``transformers.Gemma3ForCausalLM`` (eager attention, eval mode) with ``lm``'s weights and dtype."""
    from transformers import Gemma3ForCausalLM
    from transformers import initialization as hf_init

    dtype = lm.embed.weight.dtype
    with _skip_init(hf_init):  # no random init: our tensors replace every weight
        model = Gemma3ForCausalLM(hugging_face_config(lm))
    state = hugging_face_state_dict(lm)
    state["lm_head.weight"] = state["model.embed_tokens.weight"]  # tied
    model.load_state_dict(state, assign=True, strict=False)
    model.tie_weights()
    return model.to(dtype).eval()
