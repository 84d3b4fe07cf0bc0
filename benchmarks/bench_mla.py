"""Multi-head latent attention: one decode step, naive (up-project the cache) vs absorbed (attend in latent space).

A DeepSeek-V2-Lite-shaped layer (hidden 2048, 16 heads, kv_lora_rank 512, rope 64, nope 128, v 128,
q_lora_rank None), a KVCache holding 4096 tokens, batch 1, float32. One decode step = one new token through
``ac.MultiHeadLatentAttention`` with ``absorb=False`` and ``absorb=True``, timed round-robin (one run of each per
round) so a burst of load from other processes hits both alike. Target: absorbed <= 0.1x naive.

Also printed: the cache bytes per token (latent + shared rotary key) against multi-head attention with the
same heads caching full keys (nope + rope) and values, and the parts that dominate each path.

Run: ``python benchmarks/bench_mla.py [--threads N]`` (about 20 s on 2 cores, ~0.5 GiB of memory).
"""

from __future__ import annotations

import argparse
import platform

import torch
from timing import round_robin_medians  # benchmarks/timing.py (scripts run from their folder)

import attn_core as ac

HIDDEN, HEADS, RANK, ROPE, NOPE, V = 2048, 16, 512, 64, 128, 128
CONTEXT, BATCH = 4096, 1


def main() -> None:
    torch.manual_seed(0)
    mla = ac.MultiHeadLatentAttention(
        HIDDEN, HEADS, kv_lora_rank=RANK, qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=V
    ).eval()
    cache = ac.KVCache(initial_capacity=CONTEXT + 1)
    with torch.no_grad():
        # Prefill by hand: a real 4096-token prefill through the naive path would build (16, 4096, 4096) weights.
        latent = mla.kv_a_layernorm(torch.randn(BATCH, 1, CONTEXT, RANK))  # (B, 1, T, rank)
        k_rope = ac.apply_rope(
            torch.randn(BATCH, 1, CONTEXT, ROPE), range(CONTEXT), interleaved=True
        )  # (B, 1, T, rope)
        cache.update(latent, k_rope)
    x = torch.randn(BATCH, 1, HIDDEN)  # (B, 1, hidden): the new token

    def step(absorb: bool):
        def run() -> None:
            with torch.no_grad():
                mla(x, cache=cache, absorb=absorb)
            cache.truncate(CONTEXT)  # replay the same step

        return run

    with torch.no_grad():  # the two paths agree (float32): a benchmark of a wrong answer is worthless
        a = mla(x, cache=cache, absorb=False)[0]  # (B, 1, hidden)
        cache.truncate(CONTEXT)
        b = mla(x, cache=cache, absorb=True)[0]  # (B, 1, hidden)
        cache.truncate(CONTEXT)
    print(f"max |naive - absorbed| = {(a - b).abs().max().item():.2e} (|out| max {a.abs().max().item():.2f})")

    medians = round_robin_medians({"naive": step(False), "absorbed": step(True)}, rounds=30)
    print(f"\ndecode step, {CONTEXT} tokens cached, batch {BATCH}, float32:")
    for name, t in medians.items():
        print(f"  {name:9s} {t * 1e3:8.2f} ms")
    ratio = medians["absorbed"] / medians["naive"]
    print(f"  absorbed / naive = {ratio:.3f}x (target <= 0.1x): {'OK' if ratio <= 0.1 else 'MISSED'}")

    # What dominates: the parts of each step timed alone.
    lat = cache.keys.squeeze(1)  # (B, T, rank)
    q_cat = torch.randn(BATCH, HEADS, 1, RANK + ROPE)  # (B, H, 1, rank + rope)
    k_cat = torch.cat([cache.keys, cache.values], -1)  # (B, 1, T, rank + rope)
    x1 = torch.randn(BATCH, 1, HIDDEN)  # (B, 1, hidden)
    parts = {
        "naive: kv_b_proj over the cache": lambda: mla.kv_b_proj(lat),  # (B, T, H * (nope + v))
        "absorbed: attention on the latent": lambda: ac.scaled_dot_product_attention(q_cat, k_cat, cache.keys),
        "absorbed: cat [latent, k_rope] per step": lambda: torch.cat([cache.keys, cache.values], -1),
        "both: q/kv_a/o projections (1 token)": lambda: (
            mla.q_proj(x1),
            mla.kv_a_proj_with_mqa(x1),
            mla.o_proj(torch.randn(BATCH, 1, HEADS * V)),
        ),
    }
    with torch.no_grad():
        part_medians = round_robin_medians(parts, rounds=20)
    print("\nparts (timed alone):")
    for name, t in part_medians.items():
        print(f"  {name:40s} {t * 1e3:8.2f} ms")

    itemsize = torch.finfo(torch.float32).bits // 8
    mla_bytes = (RANK + ROPE) * itemsize
    mha_bytes = 2 * HEADS * (NOPE + ROPE) * itemsize  # per head a key (nope + rope) and a value padded to the same
    mha_exact = HEADS * ((NOPE + ROPE) + V) * itemsize  # keys nope + rope, values v = 128
    print(
        f"\ncache per token: MLA {mla_bytes} B (= ({RANK}+{ROPE})·{itemsize}); cache.nbytes / T = "
        f"{cache.nbytes // CONTEXT} B"
    )
    print(
        f"  MHA with the same heads: {mha_bytes} B (2·{HEADS}·({NOPE}+{ROPE})·{itemsize}), "
        f"{mha_bytes / mla_bytes:.1f}x; keys {NOPE + ROPE} + values {V} per head: {mha_exact} B, "
        f"{mha_exact / mla_bytes:.1f}x"
    )
    print(f"\ntorch threads {torch.get_num_threads()}; torch {torch.__version__}; python {platform.python_version()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    torch.set_num_threads(parser.parse_args().threads)
    main()
