"""Sparse attention over gathered keys against dense attention with the same picks as a mask (notebook 09b, §3).

Prefill-shaped: ``L`` queries, ``L`` keys, each query reading ``k`` causal picks (the top-k of random scores,
what the lightning indexer would hand over), one shared kv head as in absorbed MLA (``H`` query heads of
``head_dim``), float32. For each ``L``:

- ``dense``: ``ac.scaled_dot_product_attention`` under the boolean mask "key picked for that query": it forms
  the ``(H, L, L)`` scores and weights, then masks;
- ``sparse``: ``ac.sparse_attention`` with the ``(1, L, k)`` indices: it gathers ``k`` keys and values per
  query and never forms an ``(L, L)`` matrix;

both checked equal first, then timed round-robin (medians, CPU time of this process: on a shared machine that
is what the code costs). The bytes of the score/weight tensors each form creates are counted, not measured.

Run: ``python benchmarks/bench_sparse_attention.py`` (about a minute on 2 cores) writes
``data/sparse_attention_bench.json``, which notebook 09b reads.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import torch
from timing import round_robin_medians  # benchmarks/timing.py (scripts run from their folder)

import attn_core as ac

HEADS, HEAD_DIM, TOPK = 8, 64, 128
LENGTHS = (512, 1024, 2048, 4096)
OUT = Path(__file__).resolve().parents[1] / "data" / "sparse_attention_bench.json"


def case(length: int) -> dict:
    generator = torch.Generator().manual_seed(length)
    q = torch.randn(1, HEADS, length, HEAD_DIM, generator=generator)  # (1, H, L, D)
    k = torch.randn(1, 1, length, HEAD_DIM, generator=generator)  # (1, 1, L, D): one shared kv head
    v = torch.randn(1, 1, length, HEAD_DIM, generator=generator)  # (1, 1, L, D)
    scores = torch.rand(1, length, length, generator=generator).masked_fill(
        ~ac.causal_mask(length), -float("inf")
    )  # (1, L, L): stand-in indexer scores
    best, picks = scores.topk(min(TOPK, length), dim=-1)  # (1, L, k)
    picks = picks.masked_fill(best == -float("inf"), -1)  # (1, L, k)
    mask = torch.zeros(1, length, length + 1, dtype=torch.bool)  # (1, L, L + 1)
    mask = mask.scatter(-1, torch.where(picks < 0, length, picks), True)[..., :length].unsqueeze(1)  # (1, 1, L, L)

    dense_out, _ = ac.scaled_dot_product_attention(q, k, v, mask)
    sparse_out, _ = ac.sparse_attention(q, k, v, picks)
    torch.testing.assert_close(sparse_out, dense_out, rtol=1e-5, atol=1e-5)  # float32, sums of ≤ 128 terms

    medians = round_robin_medians(
        {
            "dense": lambda: ac.scaled_dot_product_attention(q, k, v, mask),
            "sparse": lambda: ac.sparse_attention(q, k, v, picks),
        },
        rounds=7,
        clock=time.process_time,
    )
    n = picks.shape[-1]
    return {
        "length": length,
        "topk": n,
        "dense_ms": round(medians["dense"] * 1e3, 2),
        "sparse_ms": round(medians["sparse"] * 1e3, 2),
        "dense_score_bytes": 2 * HEADS * length * length * 4,  # scores and weights, float32
        "sparse_score_bytes": 2 * HEADS * length * n * 4 + 2 * length * n * HEAD_DIM * 4,  # + gathered K and V
    }


def main() -> None:
    torch.set_num_threads(1)
    results = {
        "setup": f"H={HEADS}, head_dim={HEAD_DIM}, one kv head, top-{TOPK} causal picks, float32, 1 thread",
        "machine": f"{platform.processor() or platform.machine()}, torch {torch.__version__}",
        "cases": [case(length) for length in LENGTHS],
    }
    for row in results["cases"]:
        print(row)
    OUT.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
