"""The language models the serving-engine tests run on: a tiny Gemma 3 with random weights, and the real one.

The engine's contract (``run()`` == ``lm.generate`` token for token, faults rolled back, blocks released tail first,
sampling by the request's seed, windows kept) is about scheduling and caches, not about what the weights say: a
Gemma 3 of the same architecture with 6 layers of width 32 (local and global layers, the real vocabulary so the
real token ids work) checks all of it in float64 at ~1/20 of the real model's cost per token. The real Gemma 3
270M runs the same tests under the ``slow`` marker (the scheduled CI run: ``pytest -m slow``).
"""

from __future__ import annotations

import pytest
import torch

import attn_core as ac
from attn_core.models.gemma3 import Gemma3
from attn_core.models.gemma3_config import Gemma3Config

TINY_GEMMA3 = Gemma3Config(
    vocab_size=262_144,  # the real vocabulary: the tests' prompts are real token ids
    hidden_dim=32,
    num_layers=6,  # layers 2 and 5 global, the other four local (the real model: 15 local, 3 global)
    num_heads=2,
    num_kv_heads=1,
    head_dim=16,
    ffn_dim=64,
    sliding_window=512,
    global_every=3,
    rope_base_local=1e4,
    rope_base_global=1e6,
    query_pre_attn_scalar=16.0,
    rms_norm_eps=1e-6,
    bos_token_id=2,
    eos_token_id=1,
    pad_token_id=0,
)

MODELS = ["tiny-gemma3", pytest.param("gemma3-270m", marks=pytest.mark.slow)]


def serving_lm(name: str) -> Gemma3:
    """``name`` from MODELS, in float64 and eval mode, on one thread."""
    torch.set_num_threads(1)
    if name == "gemma3-270m":
        return ac.load_gemma3(dtype=torch.float64)
    torch.manual_seed(0)
    lm = Gemma3(TINY_GEMMA3).to(torch.float64).eval()
    with torch.no_grad():
        for param in lm.parameters():
            if param.ndim == 1:  # norms at random values, not their init
                param.normal_(0.0, 0.5)
    return lm
