"""The same tiny LM trained four ways: vanilla softmax, learned sinks, output gate, differential attention.

Notebook 12c reads the JSON this writes. Model: ``attn_core.models.tiny_lm.TinyLM`` (vocabulary 33, hidden 32,
2 layers of (RMSNorm -> mixer) + (RMSNorm -> SiLU MLP of 64), 4 heads of 8, RoPE base 1e4). The mixers:

- ``vanilla``: ``ac.GroupedQueryAttention(32, 4, 4, rope_base=1e4)``;
- ``sink``: the same with ``sinks=True`` (gpt-oss: one learned logit per head, zeros at init);
- ``gate``: the same with ``output_gate=True`` (Qwen3-Next: sigmoid gate per head feature before o_proj);
- ``diff``: ``ac.DifferentialAttention(32, 4, 4, rope_base=1e4, layer_idx=i)`` (DiffLlama; 2 pairs of heads).

Task: multi-query associative recall (``tiny_lm.associative_recall_batch``: 6 key-value pairs, then 4 queried
keys each followed by its value) behind a fixed ``<bos>`` token. The loss is next-token cross-entropy on *every*
position, as a language model's: most tokens are random and unpredictable, so at most positions a head has nothing
useful to read, the situation in which sinks form. Reported on 256 held-out sequences after training: the recall
loss and accuracy (the queried values only), the first-token share of every head (mean weight of queries 1..L-1 on
key 0, notebook 11's measure), the learned sink's share (``sink`` only: 1 − row sum) and the largest absolute
activation of the residual stream per layer.

``--gemma`` adds the same two measures on Gemma 3 270M (``ac.load_gemma3()``, notebook 11's ``<bos>`` share per layer
and head; the residual stream's largest absolute value after each block, through forward hooks) over the first 400
tokens of ``data/streaming_text.txt``, stored under ``"gemma3"`` in the same JSON (the training runs are kept).

Same seeds, data and steps for every variant (``train_lm`` seeds the initial weights with ``seed`` and the batches
with ``seed + 1``). Run: ``python benchmarks/train_sink_variants.py`` (12 runs of 500 steps, 2-6 minutes on an idle
2-core machine, much longer under load); writes ``images/sink_variants.json``. ``--quick`` runs 1 seed x 20 steps
and writes nothing.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import time
from pathlib import Path

import torch

import attn_core as ac
from attn_core.models import tiny_lm

VOCAB, HIDDEN, LAYERS, HEADS, MLP = 32, 32, 2, 4, 64
PAIRS, QUERIES = 6, 4
BOS = VOCAB  # one more embedding than the task's tokens
LR, BATCH = 1e-2, 32
OUT = Path(__file__).resolve().parents[1] / "images" / "sink_variants.json"

MIXERS = {
    "vanilla": lambda i: ac.GroupedQueryAttention(HIDDEN, HEADS, HEADS, rope_base=10000.0),
    "sink": lambda i: ac.GroupedQueryAttention(HIDDEN, HEADS, HEADS, rope_base=10000.0, sinks=True),
    "gate": lambda i: ac.GroupedQueryAttention(HIDDEN, HEADS, HEADS, rope_base=10000.0, output_gate=True),
    "diff": lambda i: ac.DifferentialAttention(HIDDEN, HEADS, HEADS, rope_base=10000.0, layer_idx=i),
}

recall = functools.partial(
    tiny_lm.associative_recall_batch, num_pairs=PAIRS, num_queries=QUERIES, vocab_size=VOCAB, bos=BOS
)


def every_next_token(batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The recall batch with every next token as a target (a language model's loss), not only the values."""
    inputs, targets = recall(batch_size, generator)  # (B, L), (B, L)
    return inputs, torch.cat([inputs[:, 1:], targets[:, -1:]], dim=1)  # (B, L): token i + 1 at position i


def measure(model: tiny_lm.TinyLM, probes: torch.Tensor, targets: torch.Tensor) -> dict:
    with torch.no_grad():
        logits, weights, hidden = model(probes, return_hidden=True)  # (B, L, V), layers x (B, H, L, L), ...
    scored = targets != tiny_lm.IGNORE  # (B, L): the queried values
    result = {
        "recall_loss": tiny_lm.lm_loss(logits, targets).item(),
        "recall_accuracy": (logits.argmax(-1) == targets)[scored].float().mean().item(),
        "first_token_share": tiny_lm.first_token_share(weights).tolist(),  # (layers, H)
        "residual_max": tiny_lm.residual_max(hidden).tolist(),  # (layers + 1,)
    }
    if all(getattr(mixer, "sinks", None) is not None for mixer in model.mixers):
        result["sink_share"] = [(1 - w[:, :, 1:].sum(-1)).mean(dim=(0, 2)).tolist() for w in weights]  # (layers, H)
    return result


def run(seeds: int, steps: int) -> dict:
    probes, targets = recall(256, torch.Generator().manual_seed(10_000))  # held out, fixed
    runs = []
    for seed in range(seeds):
        for name, mixer in MIXERS.items():
            build = functools.partial(tiny_lm.TinyLM, VOCAB + 1, HIDDEN, LAYERS, mixer, mlp_hidden=MLP)
            result = tiny_lm.train_lm(build, every_next_token, steps=steps, lr=LR, batch_size=BATCH, seed=seed)
            record = {"variant": name, "seed": seed, "seconds": round(result.seconds, 2)}
            record["losses"] = [round(loss, 4) for loss in result.losses[:: max(1, steps // 50)]]
            record["parameters"] = sum(p.numel() for p in result.model.parameters())
            record |= measure(result.model, probes, targets)
            runs.append(record)
            print(
                f"seed {seed} {name:8s} recall loss {record['recall_loss']:.3f} acc {record['recall_accuracy']:.2f} "
                f"first-token share (mean) {torch.tensor(record['first_token_share']).mean():.3f} "
                f"residual max {record['residual_max'][-1]:.1f} ({record['seconds']:.0f} s)",
                flush=True,
            )
    return {
        "config": {
            "vocab": VOCAB,
            "hidden": HIDDEN,
            "layers": LAYERS,
            "heads": HEADS,
            "mlp_hidden": MLP,
            "pairs": PAIRS,
            "queries": QUERIES,
            "lr": LR,
            "batch": BATCH,
            "steps": steps,
            "seeds": seeds,
            "loss_every": max(1, steps // 50),
        },
        "machine": {"torch": torch.__version__, "python": platform.python_version(), "threads": 1},
        "runs": runs,
    }


def gemma3_measures(num_tokens: int = 400) -> dict:
    """<bos> share per layer and head (notebook 11's measure) and max |residual| after each block, on Gemma 3."""
    lm = ac.load_gemma3()
    text = (Path(__file__).resolve().parents[1] / "data" / "streaming_text.txt").read_text()
    ids = torch.tensor([lm.encode(text)[:num_tokens]])  # (1, L): <bos> first
    peaks = []
    hooks = [
        layer.register_forward_hook(lambda module, args, output: peaks.append(output[0].abs().max().item()))
        for layer in lm.layers
    ]
    with torch.no_grad():
        _, maps = lm(ids, return_attention=True)  # layers x (1, H, L, L)
    for hook in hooks:
        hook.remove()
    return {
        "model": "Gemma 3 270M (ac.load_gemma3)",
        "tokens": int(ids.shape[1]),
        "bos_share": [w[0, :, 1:, 0].mean(-1).tolist() for w in maps],  # (layers, H): queries 1..L-1, key 0
        "residual_max": peaks,  # (layers,): after each block
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="1 seed x 20 steps, nothing written")
    parser.add_argument("--gemma", action="store_true", help="only add Gemma 3's measures to the existing JSON")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.gemma:
        result = json.loads(OUT.read_text())
        result["gemma3"] = gemma3_measures()
        OUT.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote Gemma 3's measures into {OUT}")
        return
    start = time.perf_counter()
    result = run(1, 20) if args.quick else run(args.seeds, args.steps)
    print(f"total {time.perf_counter() - start:.0f} s")
    if not args.quick:
        OUT.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
