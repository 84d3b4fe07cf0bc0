"""``linear_layer_from_hf(config, layer_idx)``: our module for a Hugging Face linear-attention / SSM token mixer.

``ac.layer_from_hf`` (``attn_core.models.from_hf``) sends every layer whose ``layer_types`` entry is a linear mixer
here. Covered: ``kimi_linear`` (KDA → ``ac.KimiDeltaAttention``), ``qwen3_5_text`` (``ac.GatedDeltaNet``),
``qwen3_next`` (the same layer with HF's two fused input projections, ``Qwen3NextGatedDeltaNet`` below), ``mamba2``
and ``nemotron_h`` (``ac.Mamba2Mixer``), ``minimax`` (``ac.LightningAttention``). Parameter names equal HF's, so
``layer.load_state_dict(hf_layer.state_dict())`` works strictly. Each layer: ``layer(x, *, positions=None,
cache=None)`` with one ``ac.LinearAttentionCache()`` per layer. Anything else raises NotImplementedError naming what
is missing.

Where HF rounds through float32 even for a float64 model (ours stays in the input's dtype): KDA casts q, k, v, g, beta
to float32 for the whole rule, computes the forget gate and the gated output norm in float32 and stores the state in
float32; Qwen3-Next / Qwen3.5 run the chunked rule in float32; Mamba-2 / Nemotron-H run the chunk scan, the decay
``exp(dt · A)`` and the gated norm in float32; MiniMax builds its decay buffers in float32 at init and runs the output
norm in float32. With those casts lifted (tests/hf_float64.py) every layer equals HF to 1e-10; as shipped the gap is
first-order in float32's unit roundoff u = 2⁻²⁴, bounded by γ_n · max|out| with n the longest accumulation (one chunk
plus the state's inner dimension), checked per family in tests/test_kda.py, test_ssd.py, test_lightning_attention.py.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attn_core.linear.gated_deltanet import GatedDeltaNet, GatedRMSNorm
from attn_core.linear.kda import KimiDeltaAttention
from attn_core.linear.lightning import LightningAttention
from attn_core.linear.mamba2 import Mamba2Mixer

__all__ = ["linear_layer_from_hf", "Qwen3NextGatedDeltaNet", "COVERED_LINEAR_TYPES"]

COVERED_LINEAR_TYPES = ("kimi_linear", "qwen3_next", "qwen3_5_text", "mamba2", "nemotron_h", "minimax")


def _missing(model_type, what: str) -> NotImplementedError:
    return NotImplementedError(f"linear_layer_from_hf does not cover model type {model_type!r}: {what}.")


class _EpsGatedRMSNorm(GatedRMSNorm):
    """GatedRMSNorm with the config's eps (Qwen3.5's layer fixes 1e-6; a config may say otherwise)."""

    def __init__(self, head_v_dim: int, eps: float) -> None:
        super().__init__(head_v_dim)
        self.eps = eps

    def forward(self, out, gate):
        out = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., Dv)
        return self.weight * out * F.silu(gate)  # (..., Dv)


class Qwen3NextGatedDeltaNet(GatedDeltaNet):
    """Qwen3-Next's Gated DeltaNet (HF ``Qwen3NextGatedDeltaNet``): Qwen3.5's layer with q, k, v, z fused into
    ``in_proj_qkvz`` and b, a into ``in_proj_ba``, laid out per key head:
    ``[q_h | k_h | v_h (r heads) | z_h (r heads)]`` and ``[b_h (r) | a_h (r)]`` for each key head h, r = Hv / Hk."""

    def __init__(self, hidden_dim, **kwargs) -> None:
        super().__init__(hidden_dim, **kwargs)
        del self.in_proj_qkv, self.in_proj_z, self.in_proj_b, self.in_proj_a
        self.in_proj_qkvz = nn.Linear(hidden_dim, 2 * self.key_dim + 2 * self.value_dim, bias=False)
        self.in_proj_ba = nn.Linear(hidden_dim, 2 * self.num_v_heads, bias=False)

    def project(self, x):
        batch, length, _ = x.shape
        hk, dk, dv = self.num_k_heads, self.head_k_dim, self.head_v_dim
        per_k = self.num_v_heads // hk * dv  # value (and z) width per key head
        qkvz = self.in_proj_qkvz(x).reshape(batch, length, hk, 2 * dk + 2 * per_k)  # (B, L, Hk, ...)
        q, k, v, z = qkvz.split([dk, dk, per_k, per_k], dim=-1)
        ba = self.in_proj_ba(x).reshape(batch, length, hk, -1)  # (B, L, Hk, 2r)
        b, a = ba.split(ba.shape[-1] // 2, dim=-1)  # (B, L, Hk, r) each
        mixed = torch.cat([t.reshape(batch, length, -1) for t in (q, k, v)], dim=-1)  # (B, L, C)
        return mixed, z.reshape(batch, length, -1), b.reshape(batch, length, -1), a.reshape(batch, length, -1)


def _require_silu(model_type, config, key: str) -> None:
    act = getattr(config, key, "silu")
    if act not in ("silu", "swish"):
        raise _missing(model_type, f"{key}={act!r} (the built layer uses SiLU)")


def _gated_deltanet(model_type, config) -> nn.Module:
    _require_silu(model_type, config, "hidden_act")
    cls = Qwen3NextGatedDeltaNet if model_type == "qwen3_next" else GatedDeltaNet
    layer = cls(
        config.hidden_size,
        num_k_heads=config.linear_num_key_heads,
        num_v_heads=config.linear_num_value_heads,
        head_k_dim=config.linear_key_head_dim,
        head_v_dim=config.linear_value_head_dim,
        conv_kernel_size=config.linear_conv_kernel_dim,
    )
    layer.norm = _EpsGatedRMSNorm(config.linear_value_head_dim, config.rms_norm_eps)
    return layer


def _mamba2(model_type, config) -> nn.Module:
    if model_type == "mamba2":
        heads, head_dim, state = config.num_heads, config.head_dim, config.state_size
        if int(config.expand * config.hidden_size) != heads * head_dim:
            raise _missing(model_type, "expand · hidden_size != num_heads · head_dim (HF's mixer would not run either)")
        act, bias, limit = "hidden_act", config.use_bias, tuple(config.time_step_limit)
    else:  # nemotron_h: no upper limit, the lower one time_step_min (as HF's NemotronHMamba2Mixer)
        heads, head_dim, state = config.mamba_num_heads, config.mamba_head_dim, config.ssm_state_size
        act, bias, limit = "mamba_hidden_act", config.mamba_proj_bias, (config.time_step_min, float("inf"))
    _require_silu(model_type, config, act)
    return Mamba2Mixer(
        config.hidden_size,
        num_heads=heads,
        head_dim=head_dim,
        state_size=state,
        n_groups=config.n_groups,
        conv_kernel_size=config.conv_kernel,
        chunk_size=config.chunk_size,
        use_bias=bias,
        use_conv_bias=config.use_conv_bias,
        eps=config.layer_norm_epsilon,
        time_step_limit=limit,
    )


def linear_layer_from_hf(config, layer_idx: int) -> nn.Module:
    """Our module for the linear / SSM token mixer of decoder layer ``layer_idx`` of the HF text config."""
    model_type = getattr(config, "model_type", None)
    layer_types = getattr(config, "layer_types", None)
    if layer_types is None or not 0 <= layer_idx < len(layer_types):
        raise _missing(model_type, f"no layer_types entry for layer {layer_idx}")
    if layer_types[layer_idx] != "linear_attention":
        raise _missing(model_type, f"layer {layer_idx} is {layer_types[layer_idx]!r}, not a linear / SSM mixer")
    if model_type == "kimi_linear":
        _require_silu(model_type, config, "hidden_act")
        return KimiDeltaAttention(
            config.hidden_size,
            num_heads=config.linear_num_heads,
            head_dim=config.linear_head_dim,
            conv_kernel_size=config.linear_conv_kernel_dim,
            eps=config.rms_norm_eps,
        )
    if model_type in ("qwen3_next", "qwen3_5_text"):
        return _gated_deltanet(model_type, config)
    if model_type in ("mamba2", "nemotron_h"):
        return _mamba2(model_type, config)
    if model_type == "minimax":
        _require_silu(model_type, config, "hidden_act")
        return LightningAttention(
            config.hidden_size,
            num_heads=config.num_attention_heads,
            head_dim=getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads,
            block_size=config.block_size,
            layer_idx=layer_idx,
            num_layers=config.num_hidden_layers,
        )
    raise _missing(model_type, f"no linear / SSM mixer is built for it (covered: {', '.join(COVERED_LINEAR_TYPES)})")
