"""The serving engine vs one request at a time vs static batching on Gemma 3 270M (float32, CPU), one workload.

Workload: 10 requests of mixed lengths (prompts of 9 to 200 tokens, 4 to 24 new tokens); six of them start with
the same 21-token system prompt (``<bos>`` included), so prefix caching has something to find. Three ways to serve
it, tokens checked against one-at-a-time greedy ``lm.generate`` (the oracle):

- **one at a time**: ``lm.generate(prompt, n)`` per request, in arrival order;
- **static batching**: batches of ``max_num_seqs`` requests in arrival order, each one left-padded
  ``lm.generate`` call that runs until its longest request is done (shorter ones keep their seats, padding);
- **engine**: ``ac.ServingEngine`` (continuous batching, chunked prefill, prefix caching), all requests added
  at once.

Throughput = new tokens / process CPU seconds (``time.process_time``, one thread: the work done, which other jobs
on a shared machine inflate far less than wall time), in ``--rounds`` interleaved rounds whose order rotates
(round ``r`` starts with way ``r mod 3``); each round gives its own ratios, and the JSON keeps every round (the
spread), wall seconds next to them. Also, with one request arriving before each step (arrivals while others
decode): TTFT and TPOT in steps and in CPU seconds (``time.process_time`` per step) as the token budget changes,
and the prefix-cache hit tokens / computed tokens with prefix caching on and off; the engine's step timeline.

Also the sliding-window memory: the same workload with the local layers' window shrunk to ``--window`` tokens (so
these short requests cross it), the peak blocks of the global and of the local pool, tokens checked against
``generate`` with the same window.

Run: ``python benchmarks/bench_serving_engine.py [--threads 1] [--rounds 3]`` (about 4 CPU minutes; 10-15 wall
minutes on a loaded 2-core machine); writes ``images/serving_engine.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import time
from pathlib import Path

import torch

import attn_core as ac

ROOT = Path(__file__).resolve().parent.parent
SYSTEM_IDS: list[int] = []
SYSTEM = "You are a helpful assistant for a lighthouse museum. Answer briefly and politely, in plain English. "


def workload(lm) -> list[tuple[list[int], int]]:
    """(prompt ids, max_new_tokens) for 10 requests: six share SYSTEM, four stand alone."""
    questions = [
        ("When does the museum open?", 8),
        ("How tall is the lighthouse, and how many steps lead to the lamp room at the top?", 24),
        ("Can I bring a dog?", 4),
        ("Is there a cafe?", 16),
        ("Who was the last keeper and how long did he live in the tower before it was automated?", 12),
        ("Do you sell tickets online?", 20),
    ]
    shared = [(lm.encode(SYSTEM + "Question: " + q + "\nAnswer:"), n) for q, n in questions]
    story = (ROOT / "data" / "streaming_text.txt").read_text().split("\n", 1)[1].strip()
    alone = [
        (lm.encode(story)[:200], 6),  # one long prompt: what chunked prefill spreads over steps
        (lm.encode("def fibonacci(n):\n    "), 24),
        (lm.encode("Once upon a time, in a village by the sea, there lived an old keeper who"), 10),
        (lm.encode("1, 2, 3, 4,"), 14),
    ]
    order = [0, 6, 1, 7, 2, 3, 8, 4, 9, 5]  # interleave: mixed lengths arrive mixed
    return [(shared + alone)[i] for i in order]


def one_at_a_time(lm, requests) -> list[list[int]]:
    return [lm.generate(torch.tensor([p]), n)[0, len(p) :].tolist() for p, n in requests]


def static_batching(lm, requests, batch_size: int) -> list[list[int]]:
    outputs = []
    for begin in range(0, len(requests), batch_size):
        batch = requests[begin : begin + batch_size]
        width, longest = max(len(p) for p, _ in batch), max(n for _, n in batch)
        ids = torch.tensor([[0] * (width - len(p)) + p for p, _ in batch])  # (B, width), left-padded
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p, _ in batch])  # (B, width)
        out = lm.generate(ids, longest, mask)  # (B, width + longest): every row runs as long as the longest
        outputs += [out[row, width : width + n].tolist() for row, (_, n) in enumerate(batch)]
    return outputs


def serve(lm, requests, **engine_kwargs) -> tuple[list[list[int]], ac.ServingEngine]:
    engine = ac.ServingEngine(lm, **engine_kwargs)
    rids = [engine.add_request(p, n) for p, n in requests]
    results = engine.run()
    return [results[rid] for rid in rids], engine


def per_request(engine, rids) -> list[dict]:
    return [engine.stats(rid) for rid in rids]  # the requests the last run() handed out


def serve_arriving(lm, requests, **engine_kwargs) -> tuple[list[list[int]], ac.ServingEngine, list[float], list]:
    """One request arrives before each step (arrivals while others decode); the CPU seconds of every step."""
    engine, pending, rids, step_cpu = ac.ServingEngine(lm, **engine_kwargs), list(requests), [], []
    while pending or engine.has_unfinished():
        if pending:
            prompt, n = pending.pop(0)
            rids.append(engine.add_request(prompt, n))
        start = time.process_time()  # CPU time: what a step costs, whatever else runs on the machine
        engine.step()
        step_cpu.append(time.process_time() - start)
    results = engine.run()
    return [results[rid] for rid in rids], engine, step_cpu, rids


def latency_in_cpu_seconds(engine, rids, step_cpu: list[float]) -> tuple[list[float], list[float]]:
    """TTFT and TPOT per request from the steps' CPU seconds (steps arrival+1 .. first, first+1 .. finish)."""
    ttft, tpot = [], []
    for s in per_request(engine, rids):
        ttft.append(sum(step_cpu[s["arrival_step"] : s["first_token_step"]]))
        if s["output_tokens"] > 1:
            tpot.append(sum(step_cpu[s["first_token_step"] : s["finish_step"]]) / (s["output_tokens"] - 1))
    return ttft, tpot


def timed(fn) -> tuple[float, float]:
    """(process CPU seconds, wall seconds) of ``fn()``."""
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def shrink_window(lm, window: int) -> None:
    """Give Gemma's local layers a ``window``-token window (the engine and ``generate`` both read it)."""
    for block in lm.layers:
        if not block.is_global:
            block.attention.sliding_window = window
    lm.config = dataclasses.replace(lm.config, sliding_window=window)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lm = ac.load_gemma3(dtype=torch.float32)
    requests = workload(lm)
    global SYSTEM_IDS
    SYSTEM_IDS = lm.encode(SYSTEM)[:-1]  # the shared tokens (the last one may merge with the next word)
    new_tokens = sum(n for _, n in requests)
    expected = one_at_a_time(lm, requests)
    engine_kwargs = {"block_size": 16, "num_blocks": 256, "max_num_seqs": 8, "max_num_batched_tokens": 256}
    ways = {
        "one at a time": lambda: one_at_a_time(lm, requests),
        "static batching": lambda: static_batching(lm, requests, engine_kwargs["max_num_seqs"]),
        "engine": lambda: serve(lm, requests, **engine_kwargs)[0],
    }
    identical = {name: fn() == expected for name, fn in ways.items()}  # also the warm-up
    names = list(ways)
    cpu: dict[str, list[float]] = {name: [] for name in ways}
    wall: dict[str, list[float]] = {name: [] for name in ways}
    for r in range(args.rounds):
        for name in names[r % 3 :] + names[: r % 3]:  # rotate the order: no way always runs first or last
            c, w = timed(ways[name])
            cpu[name].append(c)
            wall[name].append(w)
    pairs = {
        "engine / one at a time": ("engine", "one at a time"),
        "engine / static batching": ("engine", "static batching"),
        "static batching / one at a time": ("static batching", "one at a time"),
    }

    def speedups(seconds: dict[str, list[float]]) -> dict[str, list[float]]:  # per round: how many times faster
        return {label: [b / a for a, b in zip(seconds[x], seconds[y], strict=True)] for label, (x, y) in pairs.items()}

    cpu_seconds = {name: statistics.median(t) for name, t in cpu.items()}
    engine = ac.ServingEngine(lm, **engine_kwargs)
    rids_engine = [engine.add_request(p, n) for p, n in requests]
    engine.run()
    budgets = {}
    for budget in (16, 64, 256):
        outputs, run, step_cpu, rids = serve_arriving(
            lm, requests, **{**engine_kwargs, "max_num_batched_tokens": budget}
        )
        stats = per_request(run, rids)
        ttft_cpu, tpot_cpu = latency_in_cpu_seconds(run, rids, step_cpu)
        budgets[budget] = {
            "identical": outputs == expected,
            "steps": run.stats()["steps"],
            "max_step_tokens": run.stats()["max_step_tokens"],
            "mean_ttft_steps": statistics.mean(s["ttft_steps"] for s in stats),
            "mean_tpot_steps": statistics.mean(s["tpot_steps"] for s in stats if s["tpot_steps"] is not None),
            "mean_ttft_cpu_s": statistics.mean(ttft_cpu),
            "mean_tpot_cpu_s": statistics.mean(tpot_cpu),
            "max_tpot_cpu_s": max(tpot_cpu),
            "longest_step_cpu_s": max(step_cpu),
        }
    prefix = {}
    for on in (True, False):
        outputs, run, _, _ = serve_arriving(lm, requests, **{**engine_kwargs, "prefix_caching": on})
        prompt_tokens = sum(len(p) for p, _ in requests)
        shared_prompts = sum(len(p) for p, _ in requests if p[: len(SYSTEM_IDS)] == SYSTEM_IDS)
        prefix["on" if on else "off"] = {
            "identical": outputs == expected,
            "prefix_hit_tokens": run.stats()["prefix_hit_tokens"],
            "computed_tokens": run.stats()["computed_tokens"],
            "prompt_tokens": prompt_tokens,
            "shared_prompt_tokens": shared_prompts,
            "hit_rate": run.stats()["prefix_hit_tokens"] / prompt_tokens,
        }
    shrink_window(lm, args.window)
    outputs, windowed = serve(lm, requests, **engine_kwargs)
    window = {
        "window": args.window,
        "identical": outputs == one_at_a_time(lm, requests),
        "peak_global_blocks": windowed.stats()["peak_blocks_used"],
        "peak_window_blocks": windowed.stats()["peak_window_blocks_used"],
        "block_size": engine_kwargs["block_size"],
    }
    result = {
        "model": "Gemma 3 270M (float32)",
        "machine": f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {args.threads} thread(s)",
        "note": "process CPU time, interleaved rounds with rotating order; wall time on a shared 2-core machine swings",
        "engine_kwargs": engine_kwargs,
        "requests": [{"prompt_tokens": len(p), "max_new_tokens": n} for p, n in requests],
        "new_tokens": new_tokens,
        "rounds": args.rounds,
        "cpu_seconds_per_round": cpu,
        "wall_seconds_per_round": wall,
        "cpu_seconds": cpu_seconds,
        "tokens_per_cpu_s": {name: new_tokens / s for name, s in cpu_seconds.items()},
        "speedup_cpu_per_round": speedups(cpu),
        "speedup_wall_per_round": speedups(wall),
        "identical_tokens": identical,
        "engine_stats": engine.stats(),
        "engine_requests": per_request(engine, rids_engine),
        "timeline": engine.timeline,
        "budgets": budgets,
        "prefix_caching": prefix,
        "sliding_window": window,
    }
    out = ROOT / "images" / "serving_engine.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    keys = ("tokens_per_cpu_s", "speedup_cpu_per_round", "speedup_wall_per_round", "identical_tokens", "sliding_window")
    print(json.dumps({k: result[k] for k in keys}, indent=1))


if __name__ == "__main__":
    main()
