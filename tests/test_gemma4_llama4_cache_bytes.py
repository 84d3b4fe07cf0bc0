"""Notebook 11c's claims about the cache, checked on Hugging Face's own objects (float64 tiny models).

- A K = V layer's cached keys are a function of its cached values alone: K = RoPE_p(k_norm.weight ⊙ V), so a cache
  may store V only. HF rounds RMSNorm and the rotary table through float32, hence the tolerance of
  tests/test_layer_from_hf.py (2^-24 · 64 · max|K|).
- The bytes HF's DynamicCache holds after a prefill equal 11c's count (``check_kv_cache_bytes``' reference): reusing
  layers hold nothing, global layers every token, sliding layers W - 1 tokens (HF keeps the window minus the token
  that comes next; ``ac.KVCache(window=W)`` keeps W).
- The released Llama 4 Scout numbers of the notebook's table come from ``Llama4TextConfig``'s defaults.
"""

import torch
import transformers

from attn_core.exercises.gemma4_llama4 import _cache_bytes
from attn_core.models.hf_gemma4 import proportional_rope

U32 = 2.0**-24
SEQ = 12


def _gemma():
    cfg = transformers.Gemma4TextConfig(
        vocab_size=64,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        global_head_dim=16,
        num_global_key_value_heads=1,
        num_hidden_layers=6,
        intermediate_size=32,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"] * 3,
        attention_k_eq_v=True,
        num_kv_shared_layers=2,
        hidden_size_per_layer_input=4,
        vocab_size_per_layer_input=64,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.Gemma4TextModel(cfg).to(torch.float64).eval()
    with torch.no_grad():
        for param in model.parameters():
            if param.ndim == 1:
                param.normal_(1.0, 0.5)  # norms at random values: k_norm's weight must matter
        cache = model(input_ids=torch.randint(0, 64, (2, SEQ)), use_cache=True).past_key_values
    return cfg, model, cache


def test_hf_k_eq_v_keys_are_rebuilt_from_the_cached_values():
    cfg, model, cache = _gemma()
    rope = cfg.rope_parameters["full_attention"]
    for index in (1, 3):  # the storing global layers (K = V)
        keys, values = cache.layers[index].keys, cache.layers[index].values  # (B, 1, T, 16) each
        weight = model.layers[index].self_attn.k_norm.weight  # (16,)
        rebuilt = proportional_rope(
            values * weight, torch.arange(SEQ), base=rope["rope_theta"], partial_rotary_factor=0.25
        )  # (B, 1, T, 16)
        assert (rebuilt - keys).abs().max().item() <= U32 * 64 * keys.abs().max().item()
        assert not torch.allclose(keys, values)  # the two tensors differ: K = V is not "store one, read it twice"


def test_hf_cache_bytes_equal_the_count():
    cfg, _, cache = _gemma()
    held = sum(
        layer.keys.nbytes + layer.values.nbytes for layer in cache.layers if getattr(layer, "keys", None) is not None
    )
    modes = cfg.kv_sharing_modes
    layers = [
        dict(
            num_heads=4,
            num_kv_heads=2 if kind == "sliding_attention" else 1,
            head_dim=8 if kind == "sliding_attention" else 16,
            window=cfg.sliding_window - 1 if kind == "sliding_attention" else None,  # HF keeps W - 1
            k_eq_v=False,  # HF stores keys and values both
            reuse=modes[i] == "reuse",
        )
        for i, kind in enumerate(cfg.layer_types)
    ]
    assert held == 2 * _cache_bytes(layers, SEQ, 8)  # B = 2 sequences, float64


def test_llama4_scout_numbers_of_the_table():
    scout = transformers.Llama4TextConfig()
    assert (scout.num_hidden_layers, scout.num_key_value_heads, scout.head_dim) == (48, 8, 128)
    assert scout.attention_chunk_size == 8192 and scout.layer_types.count("full_attention") == 12
    assert scout.no_rope_layers.count(0) == 12 and (scout.floor_scale, scout.attn_scale) == (8192, 0.1)
    per_token_full = scout.num_hidden_layers * 2 * scout.num_key_value_heads * scout.head_dim * 2  # bf16 K and V
    assert per_token_full == 192 * 1024
