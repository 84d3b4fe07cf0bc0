"""Decoding speed: MHA vs GQA vs MQA with a KV cache. Ratios against MHA measured in the same run.

1. One full decode step of an attention layer (q/k/v projections + KVCache append + attention +
   output projection) for ``ac.MultiHeadAttention`` / ``ac.GroupedQueryAttention`` /
   ``ac.MultiQueryAttention``: hidden 1024, 16 query heads (head_dim 64), kv heads 16 / 4 / 1,
   a KVCache holding 2048 tokens, batch 8, float32. Target: MQA <= 0.3x MHA, GQA-4 <= 0.5x MHA.
2. The attention kernel alone on decode-shaped inputs (one query token per sequence against the
   2048 cached tokens) in four forms: K/V expanded with ``repeat_interleave``, the
   5-D "broadcast" form many tutorials use, the grouped-query form (queries of a group stacked, attn_core's), and
   ``F.scaled_dot_product_attention(enable_gqa=True)``, plus ``ac.scaled_dot_product_attention``
   (the grouped-query form with masking and returned weights); at kv heads 16 / 4 / 1.
3. Appending one token to a cache of T tokens: ``ac.KVCache.update`` (writes into spare
   capacity) against a naive ``torch.cat`` cache (copies all T tokens), per step.

Sections 1 and 2 time their variants round-robin (one run of each per round) so that a burst of
load from other processes hits every variant alike; the tables show medians and ratios from the
same run.

Run: ``python benchmarks/bench_decode.py [--threads N]`` (about 30 s on 2 cores, ~1 GiB of
memory). The default is one torch thread: on a small machine shared with other jobs, a second
OpenMP thread waits on whichever core is busy and makes the medians much noisier; pass
``--threads 2`` on a quiet machine to use both cores.
"""

from __future__ import annotations

import argparse
import math
import os
import platform

import torch
import torch.nn.functional as F
from timing import round_robin_medians  # benchmarks/timing.py (scripts run from their folder)

import attn_core as ac

HIDDEN, NUM_HEADS, HEAD_DIM = 1024, 16, 64
BATCH, CONTEXT = 8, 2048
KV_HEADS = (16, 4, 1)  # MHA, GQA-4, MQA


def family(num_kv_heads: int) -> str:
    return {NUM_HEADS: "MHA", 1: "MQA"}.get(num_kv_heads, f"GQA-{num_kv_heads}")


# --------------------------------------------------------------------------- 1. layer decode step


def make_layer(num_kv_heads: int) -> ac.GroupedQueryAttention:
    if num_kv_heads == NUM_HEADS:
        return ac.MultiHeadAttention(HIDDEN, NUM_HEADS)
    if num_kv_heads == 1:
        return ac.MultiQueryAttention(HIDDEN, NUM_HEADS)
    return ac.GroupedQueryAttention(HIDDEN, NUM_HEADS, num_kv_heads)


def prefilled_cache(num_kv_heads: int) -> ac.KVCache:
    """A KVCache holding CONTEXT tokens of random keys/values (B, Hkv, T, head_dim).

    The capacity is 2·CONTEXT, the state a doubling cache is in after it outgrew CONTEXT, so the
    timed append writes into spare room, as nearly every real decode step does (the rare doubling
    is amortised; section 3 measures appends separately). Random keys/values instead of a real
    prefill: the step's cost does not depend on the values, and projecting 8 × 2048 prompt tokens
    would only slow the benchmark down.
    """
    cache = ac.KVCache(initial_capacity=2 * CONTEXT)
    keys = torch.randn(BATCH, num_kv_heads, CONTEXT, HEAD_DIM)  # (B, Hkv, T, d)
    cache.update(keys, torch.randn_like(keys))  # values (B, Hkv, T, d)
    return cache


def bench_layer_step() -> None:
    print("\n## 1 · One decode step of an attention layer (projections + cache append + attention)")
    print(
        f"hidden {HIDDEN}, {NUM_HEADS} query heads × head_dim {HEAD_DIM}, KVCache of {CONTEXT} tokens, "
        f"batch {BATCH}, float32; median of 50 round-robin rounds; ratio = layer / MHA\n"
    )
    torch.manual_seed(0)
    x_step = torch.randn(BATCH, 1, HIDDEN)  # (B, 1, hidden): the newest token of every sequence
    steps = {}
    caches = {}
    for num_kv_heads in KV_HEADS:
        layer = make_layer(num_kv_heads).eval()
        cache = caches[num_kv_heads] = prefilled_cache(num_kv_heads)

        def step(layer=layer, cache=cache):
            # Honest decode step: project the new token, append its K/V (cache grows to 2049),
            # attend over all 2049 cached tokens, project out. Then drop the appended token again
            # (`truncate` back to 2048; the buffer is untouched) so every repeat sees the same
            # context instead of a cache that grows by one token per repeat.
            out, _ = layer(x_step, cache=cache, is_causal=True)  # (B, 1, hidden)
            cache.truncate(CONTEXT)
            return out

        steps[num_kv_heads] = step
    with torch.inference_mode():
        medians = round_robin_medians({family(h): steps[h] for h in KV_HEADS}, rounds=50)
    reference = medians["MHA"]
    print("| layer | kv heads | KV cache read per step (MiB) | step (ms) | ratio to MHA |")
    print("|---|---:|---:|---:|---:|")
    for num_kv_heads in KV_HEADS:
        name = family(num_kv_heads)
        mib = caches[num_kv_heads].nbytes / 2**20
        print(f"| {name} | {num_kv_heads} | {mib:.0f} | {medians[name] * 1e3:.2f} | {medians[name] / reference:.2f}× |")
    mqa, gqa = medians["MQA"] / reference, medians["GQA-4"] / reference
    print(
        f"\ntarget MQA <= 0.30× MHA: {mqa:.2f}× {'met' if mqa <= 0.3 else 'NOT met'};  "
        f"target GQA-4 <= 0.50× MHA: {gqa:.2f}× {'met' if gqa <= 0.5 else 'NOT met'}"
    )


# --------------------------------------------------------------------------- 2. attention kernel forms


def attend_repeat_interleave(q, k, v):
    """Copy every kv head n times (a fresh (B, H, T, d) tensor for K and for V), then plain MHA."""
    n = q.shape[1] // k.shape[1]
    k_full = k.repeat_interleave(n, dim=1)  # (B, H, T, d): copies the cache
    v_full = v.repeat_interleave(n, dim=1)  # (B, H, T, d): copies the cache
    weights = (q @ k_full.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1)  # (B, H, Lq, T)
    return weights @ v_full  # (B, H, Lq, d)


def attend_broadcast_5d(q, k, v):
    """The 5-D "broadcast" form many tutorials use: q (B, G, n, Lq, d) against k (B, G, 1, T, d).

    Looks copy-free, but torch.matmul folds the broadcast batch dims into one bmm batch by
    expanding K (and V) to (B, G, n, ...) and making them contiguous: a copy of the cache.
    """
    B, H, Lq, d = q.shape
    G = k.shape[1]
    q5 = q.view(B, G, H // G, Lq, d)  # (B, G, n, Lq, d)
    scores = q5 @ k.unsqueeze(2).transpose(-2, -1) / math.sqrt(d)  # (B, G, n, Lq, T)
    out = scores.softmax(dim=-1) @ v.unsqueeze(2)  # (B, G, n, Lq, d)
    return out.reshape(B, H, Lq, d)  # (B, H, Lq, d)


def attend_grouped(q, k, v):
    """attn_core's form: the n query heads of a group stacked along the length axis, one bmm per kv head."""
    B, H, Lq, d = q.shape
    G = k.shape[1]
    q_grouped = q.reshape(B, G, (H // G) * Lq, d)  # (B, G, n·Lq, d): a view, q is tiny anyway
    scores = q_grouped @ k.transpose(-2, -1) / math.sqrt(d)  # (B, G, n·Lq, T): K read once
    out = scores.softmax(dim=-1) @ v  # (B, G, n·Lq, d): V read once
    return out.reshape(B, H, Lq, d)  # (B, H, Lq, d)


def attend_sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # (B, H, Lq, d)


FORMS = {
    "repeat_interleave": attend_repeat_interleave,
    "broadcast 5-D": attend_broadcast_5d,
    "grouped-query": attend_grouped,
    "F.sdpa(enable_gqa)": attend_sdpa,
    "ac.scaled_dot_product_attention": lambda q, k, v: ac.scaled_dot_product_attention(q, k, v)[0],
}


def bench_kernel_forms() -> None:
    print("\n## 2 · Attention kernel alone, decode-shaped: q (B, 16, 1, 64) against a 2048-token cache")
    print(
        f"batch {BATCH}, float32, K/V are views into a KVCache buffer (as in the layer); median of 30 rounds; "
        "ratio = time / MHA's plain attention (the grouped-query form at 16 kv heads: q @ kᵀ, no copies)\n"
    )
    torch.manual_seed(0)
    rows = {}
    for num_kv_heads in KV_HEADS:
        cache = prefilled_cache(num_kv_heads)
        k, v = cache.keys, cache.values  # (B, Hkv, T, d) each
        q = torch.randn(BATCH, NUM_HEADS, 1, HEAD_DIM)  # (B, H, 1, d)
        with torch.inference_mode():
            reference = attend_sdpa(q, k, v)  # (B, H, 1, d)
            for name, form in FORMS.items():
                torch.testing.assert_close(form(q, k, v), reference, rtol=1e-4, atol=1e-5, msg=name)
            rows[num_kv_heads] = round_robin_medians(
                {name: lambda form=form, q=q, k=k, v=v: form(q, k, v) for name, form in FORMS.items()}, rounds=30
            )
    reference = rows[NUM_HEADS]["grouped-query"]
    print(
        "| form | "
        + " | ".join(f"{family(h)} (ms)" for h in KV_HEADS)
        + " | "
        + " | ".join(f"{family(h)} ratio" for h in KV_HEADS)
        + " |"
    )
    print("|---|" + "---:|" * (2 * len(KV_HEADS)))
    for name in FORMS:
        times = " | ".join(f"{rows[h][name] * 1e3:.2f}" for h in KV_HEADS)
        ratios = " | ".join(f"{rows[h][name] / reference:.2f}×" for h in KV_HEADS)
        print(f"| {name} | {times} | {ratios} |")
    print("\n(all four forms asserted equal to F.scaled_dot_product_attention(enable_gqa=True) at every kv-head count)")


# --------------------------------------------------------------------------- 3. cache append


def bench_append() -> None:
    kv_heads = 4
    print("\n## 3 · Appending one token's K and V to a cache of T tokens")
    print(
        f"batch {BATCH}, {kv_heads} kv heads, head_dim {HEAD_DIM}, float32 "
        f"({2 * BATCH * kv_heads * HEAD_DIM * 4 // 1024} KiB per cached token); "
        "median of 200 appends (KVCache) and of 15 (torch.cat)\n"
    )
    torch.manual_seed(0)
    print("| T (tokens cached) | cache size (MiB) | KVCache.update (µs) | torch.cat (µs) | cat / KVCache |")
    print("|---:|---:|---:|---:|---:|")
    new_k = torch.randn(BATCH, kv_heads, 1, HEAD_DIM)  # (B, Hkv, 1, d): the newest token
    new_v = torch.randn_like(new_k)  # (B, Hkv, 1, d)
    for length in (128, 512, 2048, 8192):
        keys = torch.randn(BATCH, kv_heads, length, HEAD_DIM)  # (B, Hkv, T, d)
        values = torch.randn_like(keys)  # (B, Hkv, T, d)
        cache = ac.KVCache(initial_capacity=2 * length)  # spare room, as after a doubling
        cache.update(keys, values)

        def kv_cache_append(cache=cache, length=length):
            cache.update(new_k, new_v)  # writes 1 token into spare capacity
            cache.truncate(length)  # back to T tokens for the next repeat (buffer untouched)

        def cat_append(keys=keys, values=values):
            # A naive cache: a fresh (B, Hkv, T+1, d) tensor for K and for V, copying all T tokens.
            return torch.cat([keys, new_k], dim=2), torch.cat([values, new_v], dim=2)

        # Timed in two blocks, not round-robin: each torch.cat allocates and frees tens of MiB, and that
        # churn (page faults, TLB flushes) would land on the tiny KVCache append that follows it.
        with torch.inference_mode():
            medians = round_robin_medians({"cache": kv_cache_append}, rounds=200)
            medians |= round_robin_medians({"cat": cat_append}, rounds=15)
        mib = 2 * keys.nbytes / 2**20
        print(
            f"| {length} | {mib:.1f} | {medians['cache'] * 1e6:.1f} | {medians['cat'] * 1e6:.0f} | "
            f"{medians['cat'] / medians['cache']:.0f}× |"
        )
    print(
        "\nKVCache's doublings copy < 2T tokens in total while growing to T (amortised O(1) per step); "
        "a torch.cat cache copies 1 + 2 + ... + T ≈ T²/2 tokens."
    )


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    torch.set_num_threads(parser.parse_args().threads)
    print("# Decoding benchmarks: MHA vs GQA vs MQA with a KV cache")
    print(
        f"machine: {platform.machine()} {cpu_name()}, {os.cpu_count()} cores; "
        f"torch threads {torch.get_num_threads()}; torch {torch.__version__}; python {platform.python_version()}"
    )
    if hasattr(os, "getloadavg"):
        print("load average at start (1/5/15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    bench_layer_step()
    bench_kernel_forms()
    bench_append()


if __name__ == "__main__":
    main()
