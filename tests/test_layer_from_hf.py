"""ac.layer_from_hf against the Hugging Face modules it mirrors, layer by layer, on tiny float64 configs.

Each test runs the whole tiny HF model in float64, records what every layer's token mixer received and returned (so
HF's own masks, windows, chunks and rotary tables decide "equal"), loads the HF module's weights into our layer
strictly and checks prefill, decode one token at a time through an ac.KVCache, and chunked prefill.

Tolerance: HF rounds through float32 on the way (rotary cos/sin tables built with ``.float()``, RMSNorm's
``_norm(x.float())``, eager softmax ``dtype=torch.float32``); our layer stays in float64. Each of those roundings is a
relative error of at most u = 2^-24 on a quantity of size ~1, carried to the output through the value and output
projections, so the difference is bounded by a few u times the output's scale: ``TOL = 2^-24 · 64 · max|out|`` (64 =
the roundings per output element — cos, sin, q, k norms, one softmax weight per key — times the at most 8 keys
that carry weight in these 12-token runs, with room for their sum). Our own prefill, decode and chunked runs agree
with each other to 1e-12 (float64, no rounding through float32 anywhere).
"""

from __future__ import annotations

import pytest
import torch
import transformers
from chunked_runs import run_in_chunks

import attn_core as ac

U32 = 2.0**-24
SEQ = 12


def _record(model, attn_modules):
    """Forward hooks that store each attention module's hidden_states input and output."""
    seen = {}

    def hook(index):
        def fn(module, args, kwargs, output):
            x = kwargs.get("hidden_states", args[0] if args else None)
            seen[index] = (x.detach().clone(), output[0].detach().clone())

        return fn

    handles = [m.register_forward_hook(hook(i), with_kwargs=True) for i, m in enumerate(attn_modules)]
    return seen, handles


def _run_hf(model_cls, config, attn_name="self_attn"):
    torch.manual_seed(0)
    model = model_cls(config).to(torch.float64).eval()
    for _name, param in model.named_parameters():  # norms and sinks at random values, not their zero/one init
        if param.ndim == 1:
            with torch.no_grad():
                param.normal_(0.0, 0.5)
    attn_modules = [getattr(layer, attn_name, None) for layer in model.layers]
    attn_modules = [m if "Attention" in type(m).__name__ else None for m in attn_modules]  # softmax mixers only
    seen, handles = _record(model, [m for m in attn_modules if m is not None])
    ids = torch.randint(0, config.vocab_size, (2, SEQ))
    with torch.no_grad():
        model(input_ids=ids, use_cache=False)
    for h in handles:
        h.remove()
    return attn_modules, seen


def _check_layer(config, layer_idx, hf_attn, x, ref, exact=False, new_cache=ac.KVCache):
    layer = ac.layer_from_hf(config, layer_idx).to(torch.float64).eval()
    layer.load_state_dict(hf_attn.state_dict(), strict=True)
    tol = 1e-10 if exact else U32 * 64 * ref.abs().max().item()  # exact: HF stays in float64 on this layer
    with torch.no_grad():
        out = layer(x)[0]  # (B, L, hidden)
        assert (out - ref).abs().max().item() <= tol, (layer_idx, (out - ref).abs().max().item(), tol)
        for cut in ([1] * SEQ, [5, 7], [3, 3, 6], [1, 10, 1]):  # decode one token at a time, then chunked prefill
            pieces = run_in_chunks(layer, x, cut, new_cache(), first=True)
            assert (pieces - out).abs().max().item() <= 1e-12, cut
    return layer


def _check_model(model_cls, config, exact_layers=(), attn_name="self_attn", new_cache=ac.KVCache):
    config._attn_implementation = "eager"
    config._experts_implementation = "eager"  # grouped_mm has no float64 kernel
    attn_modules, seen = _run_hf(model_cls, config, attn_name)
    checked = 0
    kinds = getattr(config, "layer_types", None) or [None] * len(attn_modules)
    for idx, hf_attn in enumerate(attn_modules):
        if hf_attn is None:
            continue
        x, ref = seen[checked]
        if kinds[idx] == "linear_attention":  # linear / SSM mixers: attn_core/models/from_hf_linear.py's tests
            checked += 1
            continue
        _check_layer(config, idx, hf_attn, x, ref, exact=idx in exact_layers, new_cache=new_cache)
        checked += 1
    assert checked >= 2


TINY = dict(vocab_size=64, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8)
# DeepSeek V3 / V3.2: MLA with a dense first layer and a 4-expert MoE after it
DEEPSEEK_TINY = dict(
    vocab_size=64,
    hidden_size=32,
    num_attention_heads=4,
    num_key_value_heads=4,
    num_hidden_layers=2,
    intermediate_size=32,
    moe_intermediate_size=16,
    n_routed_experts=4,
    num_experts_per_tok=2,
    n_group=1,
    topk_group=1,
    first_k_dense_replace=1,
    kv_lora_rank=10,
    qk_nope_head_dim=6,
    qk_rope_head_dim=4,
    v_head_dim=5,
)


def test_llama():
    cfg = transformers.LlamaConfig(**TINY, num_hidden_layers=2, intermediate_size=64)
    _check_model(transformers.LlamaModel, cfg)


def test_gemma3_text_sliding_and_global():
    cfg = transformers.Gemma3TextConfig(
        **TINY,
        num_hidden_layers=3,
        intermediate_size=64,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        query_pre_attn_scalar=16,
    )
    _check_model(transformers.Gemma3TextModel, cfg)


def test_gpt_oss_sinks_window_yarn():
    cfg = transformers.GptOssConfig(
        **TINY,
        num_hidden_layers=2,
        intermediate_size=32,
        num_local_experts=2,
        num_experts_per_tok=1,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"],
    )
    _check_model(transformers.GptOssModel, cfg)


@pytest.mark.parametrize("model_type", ["qwen3_next", "qwen3_5_text"])
def test_qwen3_next_full_attention_layers(model_type):
    if model_type == "qwen3_next":
        cfg = transformers.Qwen3NextConfig(
            **TINY,
            num_hidden_layers=3,
            intermediate_size=32,
            moe_intermediate_size=16,
            num_experts=2,
            num_experts_per_tok=1,
            shared_expert_intermediate_size=16,
            layer_types=["linear_attention", "full_attention", "full_attention"],
        )
        cls = transformers.Qwen3NextModel
    else:
        cfg = transformers.Qwen3_5TextConfig(
            **TINY,
            num_hidden_layers=3,
            intermediate_size=32,
            layer_types=["linear_attention", "full_attention", "full_attention"],
        )
        cls = transformers.Qwen3_5TextModel
    _check_model(cls, cfg)


def test_llama4_chunked_nope_temperature_l2():
    cfg = transformers.Llama4TextConfig(
        **TINY,
        num_hidden_layers=4,
        intermediate_size=32,
        intermediate_size_mlp=32,
        num_local_experts=2,
        attention_chunk_size=5,
        floor_scale=3,
        attn_scale=0.5,
        use_qk_norm=True,
    )
    assert cfg.layer_types == ["chunked_attention"] * 3 + ["full_attention"]
    # layer 3 is NoPE without QK-norm: no rotary table, no norm, so HF stays in float64 there
    _check_model(transformers.Llama4TextModel, cfg, exact_layers=(3,))


def test_diffllama():
    cfg = transformers.DiffLlamaConfig(**TINY, num_hidden_layers=2, intermediate_size=32, lambda_std_dev=0.3)
    _check_model(transformers.DiffLlamaModel, cfg)


@pytest.mark.parametrize("q_lora_rank", [None, 12])
@pytest.mark.parametrize("rope_interleave", [True, False])
def test_deepseek_v3_mla(q_lora_rank, rope_interleave):
    cfg = transformers.DeepseekV3Config(**DEEPSEEK_TINY, q_lora_rank=q_lora_rank, rope_interleave=rope_interleave)
    _check_model(transformers.DeepseekV3Model, cfg)


def test_deepseek_v3_yarn_mscale():
    rope = {
        "rope_type": "yarn",
        "rope_theta": 10000.0,
        "factor": 4.0,
        "original_max_position_embeddings": 8,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
    }
    cfg = transformers.DeepseekV3Config(
        **DEEPSEEK_TINY, q_lora_rank=12, rope_parameters=rope, max_position_embeddings=32
    )
    _check_model(transformers.DeepseekV3Model, cfg)


def test_uncovered_type_raises():
    cfg = transformers.MistralConfig(**TINY, num_hidden_layers=1)
    with pytest.raises(NotImplementedError, match="mistral"):
        ac.layer_from_hf(cfg, 0)


def test_chunked_mask():
    expected = torch.tensor(
        [[k <= q and k // 3 == q // 3 for k in range(7)] for q in range(7)]
    )  # chunks {0,1,2} {3,4,5} {6}
    assert torch.equal(ac.chunked_mask(7, 3), expected)
    assert torch.equal(ac.chunked_mask(2, 3, 7), expected[5:])  # bottom-right: the newest queries of a cache
    with pytest.raises(ValueError):
        ac.chunked_mask(4, 0)


def test_kimi_linear_mla_layers():
    cfg = transformers.KimiLinearConfig(
        vocab_size=64,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_hidden_layers=3,
        intermediate_size=32,
        moe_intermediate_size=16,
        num_experts=2,
        num_experts_per_token=1,
        kv_lora_rank=10,
        qk_nope_head_dim=6,
        qk_rope_head_dim=4,
        v_head_dim=5,
        q_lora_rank=None,
        layer_types=["linear_attention", "full_attention", "full_attention"],
        mlp_layer_types=["dense"] * 3,
        pad_token_id=0,
    )
    _check_model(transformers.KimiLinearModel, cfg)


def test_minimax_softmax_layers():
    cfg = transformers.MiniMaxConfig(
        **TINY,
        num_hidden_layers=3,
        intermediate_size=32,
        num_local_experts=2,
        num_experts_per_tok=1,
        layer_types=["linear_attention", "full_attention", "full_attention"],
        sliding_window=5,
    )
    _check_model(transformers.MiniMaxModel, cfg)


def test_nemotron_h_attention_layers():
    cfg = transformers.NemotronHConfig(
        vocab_size=64,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        intermediate_size=32,
        layers_block_type=["full_attention", "mlp", "full_attention", "linear_attention"],
    )
    _check_model(transformers.NemotronHModel, cfg, attn_name="mixer")  # eager softmax in float32: the bound
    with pytest.raises(NotImplementedError, match="nemotron_h.*'mlp'"):
        ac.layer_from_hf(cfg, 1)


@pytest.mark.parametrize("index_topk", [4, 64])
def test_deepseek_v32_sparse_mla(index_topk):
    # 16 indexer heads: a key scores exactly 0 (a tie) only when all 16 relus are 0, so the top-k is unambiguous
    # here; with 2 heads ties among zeros are common and torch.topk (HF) picks among them in an unspecified order
    cfg = transformers.DeepseekV32Config(
        **DEEPSEEK_TINY,
        q_lora_rank=12,
        index_n_heads=16,
        index_head_dim=8,
        index_topk=index_topk,
    )
    _check_model(transformers.DeepseekV32Model, cfg)


def test_deepseek_v4_window_hca_csa_layers():
    cfg = transformers.DeepseekV4Config(
        vocab_size=64,
        hidden_size=32,
        num_attention_heads=4,
        head_dim=16,
        q_lora_rank=12,
        partial_rotary_factor=6 / 16,
        sliding_window=5,
        o_groups=2,
        o_lora_rank=8,
        index_topk=2,
        index_n_heads=3,
        index_head_dim=8,
        compress_rates={"compressed_sparse_attention": 3, "heavily_compressed_attention": 4},
        layer_types=["sliding_attention", "heavily_compressed_attention", "compressed_sparse_attention"],
        num_hidden_layers=3,
        intermediate_size=32,
        moe_intermediate_size=16,
        n_routed_experts=4,
        num_experts_per_tok=2,
    )
    _check_model(transformers.DeepseekV4Model, cfg, new_cache=ac.CompressedKVCache)


def test_linear_layers_go_to_linear_layer_from_hf(monkeypatch):
    import sys

    cfg = transformers.Qwen3NextConfig(**TINY, num_hidden_layers=4)
    assert cfg.layer_types[0] == "linear_attention"
    monkeypatch.setitem(sys.modules, "attn_core.models.from_hf_linear", None)  # as if H7b's module were missing
    with pytest.raises(NotImplementedError, match="qwen3_next.*linear_attention.*from_hf_linear"):
        ac.layer_from_hf(cfg, 0)
    assert isinstance(ac.layer_from_hf(cfg, 3), torch.nn.Module)  # the full-attention layer needs no linear module


def test_bad_layer_index_and_multimodal_wrapper():
    cfg = transformers.LlamaConfig(**TINY, num_hidden_layers=2)
    with pytest.raises(IndexError):
        ac.layer_from_hf(cfg, 2)
    with pytest.raises(NotImplementedError, match="text_config"):
        ac.layer_from_hf(transformers.Gemma3Config(), 0)


def test_ring_cache_is_refused_by_name():
    # a ring buffer's slots are not token positions: once it wraps the layer would read keys at the wrong places
    cfg = transformers.Gemma3TextConfig(
        **TINY, num_hidden_layers=1, sliding_window=4, layer_types=["sliding_attention"]
    )
    layer = ac.layer_from_hf(cfg, 0)
    with pytest.raises(ValueError, match=r"KVCache\(window=4\).*ac\.KVCache\(\)"):
        layer(torch.randn(1, 6, 32), cache=ac.KVCache(window=4))
