"""Gated delta rule: chunked vs token-by-token time, and a fixed state's bytes vs a growing KV cache's.

1. Time (CPU, one thread, forward only, float32): ``ac.gated_delta_rule`` with ``chunk_size=None`` (the recurrence:
   L small steps in sequence) against ``chunk_size=64`` (L/64 steps, each a few (64 × 64) matmuls and one triangular
   solve), B = 1, Hk = 2, Hv = 4, Dk = Dv = 64; medians taken round-robin (``benchmarks/timing.py``).
2. Memory per sequence for the Qwen3.5 text config that ships as ``Qwen3_5TextConfig()``'s defaults in transformers
   (32 layers, full attention every 4th: 8 full-attention layers with 4 KV heads of dim 256, 24 Gated DeltaNet
   layers with 16 key heads, 32 value heads, head dims 128, conv kernel 4), in bfloat16 (2 bytes), against context
   length: the KV cache of its 8 full-attention layers, the fixed state of its 24 Gated DeltaNet layers, and what a
   model with full attention in all 32 layers would cache.

Run: ``python benchmarks/bench_linear_attention.py`` (about a minute) writes ``data/linear_attention_bench.json``,
which notebook 12d and the README read. Timings are wall-clock medians on whatever machine runs it.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import round_robin_medians  # noqa: E402

import attn_core as ac  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "linear_attention_bench.json"
LENGTHS = (256, 1024, 4096)
CONTEXTS = (1024, 4096, 16384, 32768, 65536, 131072, 262144)
BYTES = 2  # bfloat16


def qwen35_memory() -> dict:
    """Bytes per sequence: KV cache of the full-attention layers vs the Gated DeltaNet states, per context length."""
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig

    config = Qwen3_5TextConfig()
    full_layers = sum(kind == "full_attention" for kind in config.layer_types)
    linear_layers = sum(kind == "linear_attention" for kind in config.layer_types)
    kv_per_token_layer = 2 * config.num_key_value_heads * config.head_dim * BYTES  # K and V of one token, one layer
    conv_dim = 2 * config.linear_num_key_heads * config.linear_key_head_dim + (
        config.linear_num_value_heads * config.linear_value_head_dim
    )
    state_per_layer = (
        conv_dim * (config.linear_conv_kernel_dim - 1)
        + config.linear_num_value_heads * config.linear_key_head_dim * config.linear_value_head_dim
    ) * BYTES  # LinearAttentionCache.nbytes for B = 1
    return {
        "config": {
            "num_hidden_layers": config.num_hidden_layers,
            "full_attention_layers": full_layers,
            "linear_attention_layers": linear_layers,
            "num_key_value_heads": config.num_key_value_heads,
            "head_dim": config.head_dim,
            "linear_num_key_heads": config.linear_num_key_heads,
            "linear_num_value_heads": config.linear_num_value_heads,
            "linear_key_head_dim": config.linear_key_head_dim,
            "linear_value_head_dim": config.linear_value_head_dim,
            "linear_conv_kernel_dim": config.linear_conv_kernel_dim,
            "bytes_per_element": BYTES,
        },
        "kv_bytes_per_token_per_layer": kv_per_token_layer,
        "state_bytes_per_linear_layer": state_per_layer,
        "contexts": list(CONTEXTS),
        "hybrid_kv_bytes": [full_layers * kv_per_token_layer * n for n in CONTEXTS],
        "hybrid_state_bytes": [linear_layers * state_per_layer for _ in CONTEXTS],
        "all_full_attention_kv_bytes": [config.num_hidden_layers * kv_per_token_layer * n for n in CONTEXTS],
    }


def timings(rounds: int = 5) -> dict:
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    result = {"lengths": list(LENGTHS), "recurrent_s": [], "chunked_s": [], "max_abs_difference": []}
    for length in LENGTHS:
        q = torch.randn(1, 2, length, 64, generator=generator)  # (B, Hk, L, Dk)
        k = torch.nn.functional.normalize(torch.randn(1, 2, length, 64, generator=generator), dim=-1)  # (B, Hk, L, Dk)
        v = torch.randn(1, 4, length, 64, generator=generator)  # (B, Hv, L, Dv)
        g = -torch.rand(1, 4, length, generator=generator) * 0.1  # (B, Hv, L)
        beta = torch.rand(1, 4, length, generator=generator)  # (B, Hv, L)
        with torch.no_grad():
            medians = round_robin_medians(
                {
                    "recurrent": lambda args=(q, k, v, g, beta): ac.gated_delta_rule(*args),
                    "chunked": lambda args=(q, k, v, g, beta): ac.gated_delta_rule(*args, chunk_size=64),
                },
                rounds=rounds,
                warmup=1,
            )
            difference = (
                ac.gated_delta_rule(q, k, v, g, beta)[0] - ac.gated_delta_rule(q, k, v, g, beta, chunk_size=64)[0]
            )
        result["recurrent_s"].append(round(medians["recurrent"], 5))
        result["chunked_s"].append(round(medians["chunked"], 5))
        result["max_abs_difference"].append(float(difference.abs().max()))
        print(f"L={length}: recurrent {medians['recurrent'] * 1e3:.1f} ms, chunked {medians['chunked'] * 1e3:.1f} ms")
    return result


def main() -> None:
    results = {
        "machine": platform.machine(),
        "torch": torch.__version__,
        "threads": 1,
        "dtype": "float32",
        "time": timings(),
        "memory": qwen35_memory(),
    }
    OUT.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
