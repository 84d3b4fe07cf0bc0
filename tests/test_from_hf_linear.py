"""ac.layer_from_hf for linear / SSM mixers (attn_core.models.from_hf_linear): every layer index of tiny HF configs
whose layer_types mix linear and softmax layers. The whole tiny HF model runs in float64 (its float32 round trips
lifted, tests/hf_float64.py); each linear mixer's recorded input goes through our layer, loaded strictly from the HF
module's state_dict, and must return the recorded output to 1e-10; then decode and chunked prefill through one
ac.LinearAttentionCache must equal our prefill. (Each family's float32 bound as shipped: tests/test_kda.py,
test_ssd.py, test_lightning_attention.py.)"""

from __future__ import annotations

import importlib

import pytest
import torch
import transformers as T
from chunked_runs import run_in_chunks
from hf_float64 import hf_in_float64

import attn_core as ac
from attn_core.models.from_hf_linear import linear_layer_from_hf

F64 = torch.float64
MIXER_NAMES = ("self_attn", "linear_attn", "mixer")


def _configs():
    common = {"vocab_size": 64, "pad_token_id": 0}
    mixed3 = ["linear_attention", "full_attention", "linear_attention"]
    qwen_hybrid = dict(  # Qwen3-Next and Qwen3.5: Gated DeltaNet with 2 key heads shared by 4 value heads
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
        layer_types=mixed3,
    )
    return {
        "kimi_linear": T.KimiLinearConfig(
            **common,
            hidden_size=32,
            intermediate_size=64,
            moe_intermediate_size=32,
            num_hidden_layers=3,
            num_attention_heads=2,
            num_key_value_heads=2,
            linear_num_heads=2,
            linear_head_dim=8,
            q_lora_rank=None,
            kv_lora_rank=16,
            qk_rope_head_dim=8,
            qk_nope_head_dim=8,
            v_head_dim=8,
            layer_types=mixed3,
            mlp_layer_types=["dense"] * 3,
            num_experts=4,
            num_experts_per_token=2,
        ),
        "qwen3_next": T.Qwen3NextConfig(
            **common,
            **qwen_hybrid,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=32,
            num_experts=4,
            num_experts_per_tok=2,
        ),
        "qwen3_5_text": T.Qwen3_5TextConfig(
            **common,
            **qwen_hybrid,
            rms_norm_eps=1e-5,
        ),
        "mamba2": T.Mamba2Config(
            **common,
            hidden_size=16,
            num_heads=4,
            head_dim=8,
            expand=2,
            state_size=6,
            n_groups=2,
            chunk_size=8,
            num_hidden_layers=2,
        ),
        "nemotron_h": T.NemotronHConfig(
            **common,
            hidden_size=16,
            intermediate_size=32,
            mamba_num_heads=4,
            mamba_head_dim=8,
            ssm_state_size=6,
            n_groups=2,
            chunk_size=8,
            num_hidden_layers=3,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
            layers_block_type=["mamba", "attention", "mlp"],
        ),
        "minimax": T.MiniMaxConfig(
            **common,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=3,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            block_size=8,
            num_local_experts=4,
            num_experts_per_tok=2,
            layer_types=mixed3,
        ),
    }


def _mixer(decoder_layer):
    for name in MIXER_NAMES:
        if hasattr(decoder_layer, name):
            return getattr(decoder_layer, name)
    raise AssertionError(f"no token mixer in {type(decoder_layer).__name__}")


@torch.no_grad()
def _record(model_type, config, length=19):
    torch.manual_seed(0)
    model = T.AutoModel.from_config(config, experts_implementation="eager").double().eval()  # grouped_mm: no float64
    for p in model.parameters():  # HF's init leaves many weights zero / one: random weights test more
        p.add_(torch.randn_like(p) * 0.2)
    records = {}
    for idx, kind in enumerate(config.layer_types):
        if kind != "linear_attention":
            continue
        mixer = _mixer(model.layers[idx])
        if hasattr(mixer, "decay_factors"):  # MiniMax: rebuild its float32-made decay buffers in float64
            for name, value in zip(
                ("query_decay", "key_decay", "diagonal_decay"), mixer.decay_factors(mixer.slope_rate), strict=True
            ):
                setattr(mixer, name, value)

        def pre(module, args, kwargs, idx=idx):
            records[idx] = {"x": args[0] if args else kwargs["hidden_states"], "module": module}

        def post(module, args, output, idx=idx):
            records[idx]["out"] = output[0] if isinstance(output, tuple) else output

        mixer.register_forward_pre_hook(pre, with_kwargs=True)
        mixer.register_forward_hook(post)
    modeling = importlib.import_module(type(model).__module__)
    ids = torch.randint(1, 64, (2, length))
    with hf_in_float64(modeling):
        model(input_ids=ids, use_cache=False)
    assert records, "the config has no linear layer"
    return records


@pytest.mark.parametrize("model_type", list(_configs()))
@torch.no_grad()
def test_every_linear_layer_equals_hf_and_decodes(model_type):
    config = _configs()[model_type]
    for idx, record in _record(model_type, config).items():
        ours = ac.layer_from_hf(config, idx).double()
        assert ours is not None
        ours.load_state_dict(record["module"].state_dict(), strict=True)
        x = record["x"]
        got = ours(x)
        torch.testing.assert_close(got, record["out"], rtol=0, atol=1e-10, msg=f"{model_type} layer {idx}")
        for splits in ([1] * x.shape[1], [5, x.shape[1] - 5], [1, 9, x.shape[1] - 10]):
            pieces = run_in_chunks(ours, x, splits, ac.LinearAttentionCache())
            torch.testing.assert_close(pieces, got, rtol=0, atol=1e-12)


def test_softmax_layer_or_unknown_type_is_refused_by_name():
    config = _configs()["minimax"]
    with pytest.raises(NotImplementedError, match="'full_attention'"):
        linear_layer_from_hf(config, 1)
    llama = T.LlamaConfig(num_hidden_layers=1, layer_types=["linear_attention"])
    with pytest.raises(NotImplementedError, match="'llama'"):
        linear_layer_from_hf(llama, 0)
