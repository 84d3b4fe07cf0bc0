"""Gemma 4 through ac.layer_from_hf: K = V, v_norm, scaling 1, per-layer head_dim, proportional RoPE, KV sharing.

Every layer of a tiny Gemma4TextModel (float64) is compared with what HF's own module returned in the full model's
forward. Reusing layers read the storing layer's ac.KVCache (the design documented in attn_core/models/hf_gemma4.py),
so prefill, decode one token at a time and chunked prefill run the layers in model order, storing layer first.
Tolerance as in tests/test_layer_from_hf.py (HF rounds rotary tables and RMSNorm through float32).
"""

from __future__ import annotations

import pytest
import torch
import transformers

import attn_core as ac

U32 = 2.0**-24
SEQ = 12
TYPES = ["sliding_attention", "full_attention"] * 3


def _config(k_eq_v=True, shared=2):
    return transformers.Gemma4TextConfig(
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
        layer_types=list(TYPES),
        attention_k_eq_v=k_eq_v,
        num_kv_shared_layers=shared,
        hidden_size_per_layer_input=4,
        vocab_size_per_layer_input=64,
    )


def _hf_run(config):
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.Gemma4TextModel(config).to(torch.float64).eval()
    with torch.no_grad():
        for param in model.parameters():
            if param.ndim == 1:
                param.normal_(0.0, 0.5)  # norms at random values, not their one init
    seen = {}

    def hook(i):
        def fn(module, args, kwargs, output):
            seen[i] = (kwargs.get("hidden_states", args[0] if args else None).clone(), output[0].clone())

        return fn

    handles = [layer.self_attn.register_forward_hook(hook(i), with_kwargs=True) for i, layer in enumerate(model.layers)]
    with torch.no_grad():
        model(input_ids=torch.randint(0, 64, (2, SEQ)), use_cache=False)
    for h in handles:
        h.remove()
    return model, seen


def _storing_layer(config, idx):
    """The last non-reusing layer of idx's type (HF's kv_sharing_modes 'store')."""
    modes, kind = config.kv_sharing_modes, config.layer_types[idx]
    return max(i for i in range(len(modes)) if modes[i] == "store" and config.layer_types[i] == kind)


def _run(layers, config, xs, cut):
    """Run every layer over its recorded input in chunks ``cut``, caches shared by design; outputs per layer."""
    caches = [ac.KVCache() for _ in layers]
    outs = [[] for _ in layers]
    start = 0
    for size in cut:
        for i, layer in enumerate(layers):
            reuse = config.kv_sharing_modes[i] == "reuse"
            cache = caches[_storing_layer(config, i)] if reuse else caches[i]
            outs[i].append(layer(xs[i][:, start : start + size], cache=cache)[0])
        start += size
    return [torch.cat(o, dim=1) for o in outs]


@pytest.mark.parametrize("k_eq_v", [True, False])
def test_gemma4_every_layer_prefill_decode_chunked(k_eq_v):
    config = _config(k_eq_v)
    model, seen = _hf_run(config)
    layers = []
    for i, hf_layer in enumerate(model.layers):
        ours = ac.layer_from_hf(config, i).to(torch.float64).eval()
        ours.load_state_dict(hf_layer.self_attn.state_dict(), strict=True)
        layers.append(ours)
    assert [hasattr(layer, "k_proj") for layer in layers] == [True] * 4 + [False] * 2  # reusing layers: no K/V weights
    assert (layers[1].v_proj is None) == k_eq_v and layers[0].v_proj is not None  # K = V on global layers only
    xs = [seen[i][0] for i in range(len(layers))]
    with torch.no_grad():
        full = _run(layers, config, xs, [SEQ])
        for i, out in enumerate(full):
            ref = seen[i][1]
            assert (out - ref).abs().max().item() <= U32 * 64 * ref.abs().max().item(), i
        for cut in ([1] * SEQ, [5, 7], [3, 3, 6]):
            for i, out in enumerate(_run(layers, config, xs, cut)):
                assert (out - full[i]).abs().max().item() <= 1e-12, (cut, i)
        for i in range(4):  # non-reusing layers also run alone, without a cache
            assert (layers[i](xs[i])[0] - full[i]).abs().max().item() <= 1e-12


def test_gemma4_reusing_layer_needs_the_storing_cache():
    config = _config()
    layer = ac.layer_from_hf(config, 5).double()
    with pytest.raises(ValueError, match="storing layer"):
        layer(torch.zeros(1, 3, 32, dtype=torch.float64))


def test_proportional_rope_turns_only_the_first_pairs():
    x = torch.randn(1, 1, 5, 16, dtype=torch.float64)
    from attn_core.models.hf_gemma4 import proportional_rope

    out = proportional_rope(x, torch.arange(5), base=1e6, partial_rotary_factor=0.25)
    still = [i for i in range(8) if i >= 2]  # int(0.25 · 16 / 2) = 2 pairs turn
    assert torch.equal(out[..., still], x[..., still]) and torch.equal(
        out[..., [s + 8 for s in still]], x[..., [s + 8 for s in still]]
    )
    assert not torch.allclose(out[..., 1:2], x[..., 1:2])
