"""The stored Hugging Face reference notebook 09 compares against, checked here against transformers run live.

Importing transformers costs ~2.7 s of notebook 09's ~6 s of cells, so the notebook reads
``data/mla_reference_hf.safetensors``, made and verified by this module: for each rotary layout (interleaved pairs,
as DeepSeek's checkpoints, and rotate-half) the weights of a tiny ``DeepseekV3Attention`` (notebook 09's sizes,
sdpa attention, float64, Hugging Face's parameter names), one float64 input and Hugging Face's output on it with a
causal mask; and, in the metadata, the softmax scale Hugging Face gives the released DeepSeek-V3's YaRN config.

Each test rebuilds the reference live from the stored weights and input and asserts that the stored output equals
it within ``HF_ATOL``: Hugging Face runs its RMSNorm in float32 even for float64 inputs (notebook 09, section 2),
and two runs on different CPUs may round those float32 sums differently. After a deliberate change (new sizes, a
new transformers), regenerate the file and review the diff:

    ATTN_CORE_REGENERATE_REFERENCE=1 pytest -p no:cacheprovider tests/test_mla_stored_reference.py
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import nbformat
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT / "data" / "mla_reference_hf.safetensors"
NOTEBOOKS = [ROOT / "notebooks" / "09_multi_head_latent_attention.ipynb"]
NOTEBOOKS += [ROOT / "notebooks" / "zh" / "09_multi_head_latent_attention.ipynb"]
REGENERATE = os.environ.get("ATTN_CORE_REGENERATE_REFERENCE") == "1"

SIZES = dict(hidden=32, heads=4, rank=16, q_rank=24, nope=8, rope=4, v_dim=6)  # notebook 09, section 2
B, L = 2, 5
HF_ATOL = 16 * torch.finfo(torch.float32).eps  # notebook 09's bound for Hugging Face's float32 RMSNorm
V3_ROPE = dict(  # the released DeepSeek-V3's config.json rope scaling (Hugging Face's key names)
    rope_type="yarn",
    rope_theta=10000.0,
    factor=40.0,
    mscale=1.0,
    mscale_all_dim=1.0,
    original_max_position_embeddings=4096,
    beta_fast=32,
    beta_slow=1,
)


def hf_layer(interleaved: bool):
    """Hugging Face's DeepseekV3Attention at notebook 09's sizes, float64, sdpa (keeps float64; eager does not)."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding

    s = SIZES
    config = DeepseekV3Config(
        hidden_size=s["hidden"],
        num_attention_heads=s["heads"],
        num_key_value_heads=s["heads"],
        kv_lora_rank=s["rank"],
        q_lora_rank=s["q_rank"],
        qk_nope_head_dim=s["nope"],
        qk_rope_head_dim=s["rope"],
        v_head_dim=s["v_dim"],
        rope_interleave=interleaved,
        attention_bias=False,
    )
    config._attn_implementation = "sdpa"
    return DeepseekV3Attention(config, layer_idx=0).double().eval(), DeepseekV3RotaryEmbedding(config)


def hf_output(interleaved: bool, x: torch.Tensor, weights: dict[str, torch.Tensor] | None):
    """Hugging Face's output on ``x`` (B, L, hidden), causal; with ``weights`` None, its own random init."""
    hf, rotary = hf_layer(interleaved)
    if weights is not None:
        hf.load_state_dict(weights, strict=True)
    causal = torch.full((L, L), float("-inf"), dtype=torch.float64).triu(1)[None, None]  # (1, 1, L, L)
    cos, sin = rotary(x, torch.arange(L)[None])  # (1, L, rope) each
    with torch.no_grad():
        out, _ = hf(x, position_embeddings=(cos, sin), attention_mask=causal)  # (B, L, hidden)
    return out, {name: tensor.detach().clone() for name, tensor in hf.state_dict().items()}


def v3_yarn_scale() -> tuple[float, float]:
    """(DeepseekV3Attention.scaling, DeepseekV3RotaryEmbedding.attention_scaling) for the released V3's YaRN."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding

    config = DeepseekV3Config(
        hidden_size=32,
        num_attention_heads=1,
        num_key_value_heads=1,
        kv_lora_rank=16,
        q_lora_rank=24,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        max_position_embeddings=163840,
        rope_parameters=dict(V3_ROPE),
    )
    return DeepseekV3Attention(config, layer_idx=0).scaling, DeepseekV3RotaryEmbedding(config).attention_scaling


def regenerate() -> None:
    import transformers

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(B, L, SIZES["hidden"], dtype=torch.float64, generator=generator)  # (B, L, hidden)
    tensors = {"x": x}
    torch.manual_seed(0)  # Hugging Face's own initialisation of the weights
    for interleaved in (True, False):
        out, weights = hf_output(interleaved, x, None)
        prefix = f"interleaved={interleaved}/"
        tensors |= {prefix + name: tensor.contiguous() for name, tensor in weights.items()}
        tensors[prefix + "out"] = out.contiguous()
    scaling, attention_scaling = v3_yarn_scale()
    metadata = {
        "model": "transformers DeepseekV3Attention (sdpa, float64), notebook 09's sizes, causal mask",
        "v3_yarn_scaling": repr(scaling),
        "v3_yarn_attention_scaling": repr(attention_scaling),
        "transformers": transformers.__version__,
        "torch": torch.__version__.split("+")[0],
        "made_by": "tests/test_mla_stored_reference.py",
    }
    save_file(tensors, FILE, metadata=metadata)
    FILE.chmod(0o644)  # safetensors writes 0600


def read() -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    with safe_open(FILE, "pt") as handle:
        return {name: handle.get_tensor(name) for name in handle.keys()}, handle.metadata()  # noqa: SIM118


def layout(stored: dict[str, torch.Tensor], interleaved: bool) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The stored weights (Hugging Face's names) and output of one rotary layout."""
    prefix = f"interleaved={interleaved}/"
    weights = {name.removeprefix(prefix): t for name, t in stored.items() if name.startswith(prefix)}
    return weights, weights.pop("out")


@pytest.mark.parametrize("interleaved", [True, False])
def test_stored_output_equals_hugging_face_live(interleaved):
    if REGENERATE and interleaved:
        regenerate()
    assert FILE.stat().st_size < 2**17, "keep the stored reference small"
    stored, _ = read()
    weights, out = layout(stored, interleaved)
    live, loaded = hf_output(interleaved, stored["x"], weights)
    assert loaded.keys() == weights.keys() and all(torch.equal(loaded[name], weights[name]) for name in weights)
    assert out.dtype == torch.float64 and out.shape == (B, L, SIZES["hidden"])
    torch.testing.assert_close(out, live, rtol=0, atol=HF_ATOL)


def test_stored_v3_scale_equals_hugging_face_live():
    _, metadata = read()
    scaling, attention_scaling = v3_yarn_scale()
    assert float(metadata["v3_yarn_scaling"]) == scaling
    assert float(metadata["v3_yarn_attention_scaling"]) == attention_scaling == 1.0
    mscale = 0.1 * math.log(40.0) + 1
    assert abs(scaling - 192**-0.5 * mscale**2) < 1e-15


def test_the_reference_catches_a_wrong_layer():
    """The stored output tells the layouts apart: loading interleaved weights into a rotate-half layer misses it."""
    import attn_core as ac

    stored, _ = read()
    s = SIZES
    weights, out_hf = layout(stored, interleaved=True)
    wrong = ac.MultiHeadLatentAttention(
        s["hidden"],
        s["heads"],
        kv_lora_rank=s["rank"],
        qk_nope_head_dim=s["nope"],
        qk_rope_head_dim=s["rope"],
        v_head_dim=s["v_dim"],
        q_lora_rank=s["q_rank"],
        rope_interleave=False,
    ).double()
    wrong.load_state_dict(weights)
    with torch.no_grad():
        out, _ = wrong(stored["x"], is_causal=True)  # (B, L, hidden)
    assert (out - out_hf).abs().max() > 1e3 * HF_ATOL


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.parent.name + "/" + path.stem)
def test_notebook_09_reads_the_stored_reference(notebook):
    code = "\n".join(cell.source for cell in nbformat.read(notebook, 4).cells if cell.cell_type == "code")
    assert FILE.name in code
    assert not re.search(r"^\s*(import|from)\s+transformers\b", code, flags=re.MULTILINE)
