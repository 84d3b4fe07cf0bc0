"""Associative recall: softmax vs linear attention vs Gated DeltaNet vs a 3:1 hybrid, trained on CPU.

The same 4-layer ``TinyLM`` (``attn_core.models.tiny_lm``, hidden 64) with four token mixers:

- **softmax**: ``ac.GroupedQueryAttention(64, 4, 4, rope_base=10000.0)`` in every layer (keeps every token);
- **linear**: Qwen3.5's layer (``ac.GatedDeltaNet``: conv, l2-normalised q/k, gated norm) with its state update
  swapped for plain causal linear attention ``S ← S + k vᵀ`` (write only, never erase, no gate);
- **gated delta**: ``ac.GatedDeltaNet`` as it is (erase-then-write, learned decay), its ``dt_bias`` initialised as
  flash-linear-attention does (``slow_decay_init``);
- **hybrid 3:1**: three Gated DeltaNet layers and one softmax layer last (Qwen3.5's pattern: full attention every 4th).

Task: multi-query associative recall (``associative_recall_batch``: P key-value pairs, then all P keys asked in a
random order, each followed by its value). Every mixer's state per layer: a (Dk, Dv) = (16, 16) matrix per value
head, 4 value heads; l2-normalised 16-dim keys can hold at most 16 orthogonal keys per head, so recall may degrade
for the fixed-state mixers as P grows, while softmax keeps every pair. Vocabulary 32: keys from 16 tokens, values
from the other 16 (chance 1/16). Accuracy: fraction of the asked values predicted (argmax) on 512 fresh sequences.
Each run is seeded; numbers vary slightly across machines and torch versions.

Run: ``python benchmarks/train_recall.py`` (over an hour on one busy CPU core; ``--mixers`` runs a subset, so
several processes can share the work, and ``--out`` names their JSON) writes ``data/linear_attention_recall.json``
after every run (the notebook reads it). ``--quick`` trains 20 steps and writes nothing.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import platform
import time
from pathlib import Path

import torch
from torch import nn

import attn_core as ac
from attn_core.models.tiny_lm import IGNORE, TinyLM, associative_recall_batch, train_lm

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "linear_attention_recall.json"
HIDDEN, LAYERS, VOCAB = 64, 4, 32
HEADS = dict(num_k_heads=2, num_v_heads=4, head_k_dim=16, head_v_dim=16)
NUM_PAIRS = (4, 8, 16)
STEPS, LR, BATCH = 500, 5e-3, 64
TRAIN_CHUNK = 16  # chunk size for training: sequences are 15..63 tokens, and 16 was fastest (forward + backward)


class AsMixer(nn.Module):
    """TinyLM's mixer interface, ``forward(x, is_causal=True) -> (out, weights)``, for a layer without weights."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor, is_causal: bool = True):
        return self.layer(x), None  # (B, L, hidden), no (L, L) weights: the state replaces them


def slow_decay_init(layer: ac.GatedDeltaNet) -> ac.GatedDeltaNet:
    """flash-linear-attention's GatedDeltaNet init: softplus(dt_bias) = dt in [0.001, 0.1] (log-uniform), so a
    state starts out remembering across the whole sequence (HF's dt_bias = 1 decays most heads within a token)."""
    with torch.no_grad():
        dt = torch.exp(torch.rand(layer.num_v_heads) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))  # (Hv,)
        layer.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
    return layer


class TrainGatedDeltaNet(ac.GatedDeltaNet):
    """Qwen3.5's layer, chunked with TRAIN_CHUNK (same result as the default, faster at these lengths)."""

    def state_update(self, q, k, v, g, beta, state):
        return ac.gated_delta_rule(q, k, v, g, beta, chunk_size=TRAIN_CHUNK, initial_state=state)


class LinearAttentionNet(ac.GatedDeltaNet):
    """The same layer with plain linear attention as its state update: no erase, no decay (g and beta unused)."""

    def state_update(self, q, k, v, g, beta, state):
        return ac.linear_attention(q, k, v, initial_state=state)


def softmax_layer(layer_idx: int) -> nn.Module:
    return ac.GroupedQueryAttention(HIDDEN, 4, 4, rope_base=10000.0)


MIXERS = {
    "softmax": softmax_layer,
    "linear": lambda i: AsMixer(LinearAttentionNet(HIDDEN, **HEADS)),
    "gated delta": lambda i: AsMixer(slow_decay_init(TrainGatedDeltaNet(HIDDEN, **HEADS))),
    "hybrid 3:1": lambda i: (
        softmax_layer(i) if i == LAYERS - 1 else AsMixer(slow_decay_init(TrainGatedDeltaNet(HIDDEN, **HEADS)))
    ),
}


def recall_accuracy(model: nn.Module, num_pairs: int, seed: int = 1234) -> float:
    inputs, targets = associative_recall_batch(
        512, torch.Generator().manual_seed(seed), num_pairs=num_pairs, num_queries=num_pairs, vocab_size=VOCAB
    )  # (512, L), (512, L)
    with torch.no_grad():
        predicted = model(inputs)[0].argmax(-1)  # (512, L)
    scored = targets != IGNORE  # (512, L)
    return (predicted[scored] == targets[scored]).double().mean().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 steps per run, nothing written")
    parser.add_argument("--pairs", type=int, nargs="*", default=list(NUM_PAIRS), help="numbers of pairs P to run")
    parser.add_argument("--mixers", nargs="*", default=list(MIXERS), help="mixers to run")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--lr", type=float, default=LR)
    parser.add_argument("--out", type=Path, default=OUT, help="where to write the JSON")
    parser.add_argument(
        "--merge", type=Path, nargs="*", help="only merge these JSON files (one per process) into --out"
    )
    args = parser.parse_args()
    if args.merge:
        merged = json.loads(args.merge[0].read_text(encoding="utf-8"))
        for path in args.merge[1:]:
            part = json.loads(path.read_text(encoding="utf-8"))
            for key in ("accuracy", "final_loss", "parameters"):
                merged[key].update(part[key])
        for key in ("accuracy", "final_loss", "parameters"):  # in MIXERS' order, whatever the files' order
            merged[key] = {name: merged[key][name] for name in MIXERS if name in merged[key]}
        args.out.write_text(json.dumps(merged, indent=1) + "\n", encoding="utf-8")
        return
    torch.set_num_threads(1)
    steps = 20 if args.quick else args.steps
    results = {
        "setup": dict(
            hidden=HIDDEN,
            layers=LAYERS,
            vocab=VOCAB,
            steps=steps,
            lr=args.lr,
            batch=BATCH,
            **HEADS,
            torch=torch.__version__,
            machine=platform.machine(),
        ),  # fmt: skip
        "accuracy": {name: {} for name in args.mixers},
        "final_loss": {name: {} for name in args.mixers},
        "parameters": {},
    }
    for num_pairs in args.pairs:
        make_batch = functools.partial(
            associative_recall_batch, num_pairs=num_pairs, num_queries=num_pairs, vocab_size=VOCAB
        )
        for name in args.mixers:
            factory = MIXERS[name]
            start = time.perf_counter()
            run = train_lm(
                lambda factory=factory: TinyLM(VOCAB, HIDDEN, LAYERS, factory),
                make_batch,
                steps=steps,
                lr=args.lr,
                batch_size=BATCH,
            )
            accuracy = recall_accuracy(run.model, num_pairs)
            results["accuracy"][name][str(num_pairs)] = round(accuracy, 4)
            results["final_loss"][name][str(num_pairs)] = round(sum(run.losses[-20:]) / len(run.losses[-20:]), 4)
            results["parameters"][name] = sum(p.numel() for p in run.model.parameters())
            print(
                f"P={num_pairs:2d} {name:12s} accuracy {accuracy:.3f} ({time.perf_counter() - start:.0f} s)", flush=True
            )
            if not args.quick:
                args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
