"""Associative recall: softmax vs linear attention vs Gated DeltaNet vs a 3:1 hybrid, trained on CPU.

The same 4-layer ``TinyLM`` (``attn_core.models.tiny_lm``, hidden 64), every mixer built on Qwen3.5's layer
(``ac.GatedDeltaNet``: in_proj, causal depthwise conv of kernel 4 + SiLU, l2-normalised q/k, gated RMSNorm, out_proj)
with only its token mixer (``state_update``) swapped, so all four find the previous token the same way (the conv)
and differ only in their memory:

- **softmax**: causal softmax attention over every past (q, k, v) (keeps every token: a KV cache that grows with
  P), with a learned temperature per head (q and k are unit vectors; initialised at sqrt(head_k_dim), the logit
  size of unnormalised attention);
- **linear**: plain causal linear attention ``S ← S + k vᵀ`` (write only, never erase, no gate);
- **gated delta**: ``ac.GatedDeltaNet`` as it is (erase-then-write, learned decay), its ``dt_bias`` initialised as
  flash-linear-attention does (``slow_decay_init``);
- **hybrid 3:1**: three Gated DeltaNet layers and one softmax layer last (Qwen3.5's pattern: full attention every 4th).

Task: multi-query associative recall (``associative_recall_batch``: P key-value pairs, then all P keys asked in a
random order, each followed by its value). Vocabulary 128: keys drawn from 64 tokens, values from the other 64
(chance 1/64). The fixed states are small on purpose: 2 key heads of head_k_dim 8, 2 value heads of 16, per layer
two (8 × 16) matrices. l2-normalised 8-dim keys hold at most 8 orthogonal keys per head, so with P = 8..32 the
states overflow (predicted: write-only first, the delta rule, which can overwrite, later; measured: both fall,
the delta rule no later: notebook 12d, section 7), while softmax keeps every pair. Accuracy: fraction of the
asked values predicted (argmax) on 512 fresh sequences. Each run is seeded; numbers vary slightly across
machines and torch versions.

Run: ``python benchmarks/train_recall.py`` (about 30 minutes per seed on one busy CPU core, 0.5–4 min per
model; ``--mixers``/``--pairs``/``--seeds`` run a subset, ``--out`` names the JSON, ``--merge`` joins several)
writes ``data/linear_attention_recall.json`` after every run (the notebook reads it). ``--quick`` trains 20 steps
and writes nothing. The stored JSON: ``--seeds 0`` and ``--seeds 1`` runs, merged.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import platform
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import attn_core as ac
from attn_core.models.tiny_lm import IGNORE, TinyLM, associative_recall_batch, train_lm

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "linear_attention_recall.json"
HIDDEN, LAYERS, VOCAB = 64, 4, 128
HEADS = dict(num_k_heads=2, num_v_heads=2, head_k_dim=8, head_v_dim=16)
NUM_PAIRS = (4, 8, 16, 32)
SEEDS = (0,)
STEPS, LR, BATCH = 1000, 3e-3, 64
TRAIN_CHUNK = 16  # chunk size for training (forward + backward) at these lengths (15..127 tokens)


class AsMixer(nn.Module):
    """TinyLM's mixer interface, ``forward(x, is_causal=True) -> (out, weights)``, for a layer without weights."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor, is_causal: bool = True):
        return self.layer(x), None  # (B, L, hidden), no (L, L) weights returned


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


class SoftmaxNet(ac.GatedDeltaNet):
    """The same layer (same conv, projections, norms) with causal softmax attention over every past token as its
    mixer: no fixed state, it keeps all keys and values (g and beta unused). q and k arrive l2-normalised, so
    q·k lies in [-1, 1]; a learned temperature per value head (initialised at sqrt(head_k_dim), the logit size of
    unnormalised attention) lets the softmax become sharp, as the learned q/k norm weights of QK-norm models do."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.log_temperature = nn.Parameter(torch.full((self.num_v_heads,), 0.5 * math.log(self.head_k_dim)))

    def state_update(self, q, k, v, g, beta, state):
        group = self.num_v_heads // self.num_k_heads
        q = q.repeat_interleave(group, dim=1)  # (B, Hv, L, Dk): value head h reads q/k head h // group
        k = k.repeat_interleave(group, dim=1)  # (B, Hv, L, Dk)
        q = q * self.log_temperature.exp()[:, None, None]  # (B, Hv, L, Dk)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0), None  # (B, Hv, L, Dv), no state


def softmax_layer(layer_idx: int) -> nn.Module:
    return AsMixer(SoftmaxNet(HIDDEN, **HEADS))


def gated_delta_layer(layer_idx: int) -> nn.Module:
    return AsMixer(slow_decay_init(TrainGatedDeltaNet(HIDDEN, **HEADS)))


MIXERS = {
    "softmax": softmax_layer,
    "linear": lambda i: AsMixer(LinearAttentionNet(HIDDEN, **HEADS)),
    "gated delta": gated_delta_layer,
    "hybrid 3:1": lambda i: softmax_layer(i) if i == LAYERS - 1 else gated_delta_layer(i),
}


def recall_accuracy(model: nn.Module, num_pairs: int, seed: int = 1234) -> float:
    inputs, targets = associative_recall_batch(
        512, torch.Generator().manual_seed(seed), num_pairs=num_pairs, num_queries=num_pairs, vocab_size=VOCAB
    )  # (512, L), (512, L)
    with torch.no_grad():
        predicted = torch.cat([model(part)[0].argmax(-1) for part in inputs.split(128)])  # (512, L)
    scored = targets != IGNORE  # (512, L)
    return (predicted[scored] == targets[scored]).double().mean().item()


def summarize(results: dict) -> None:
    """accuracy[name][P] = mean over the seeds run; spread[name][P] = (max − min) / 2 over them (None: one seed)."""
    for name, by_pairs in results["by_seed"].items():
        results["accuracy"][name] = {p: round(statistics.fmean(a), 4) for p, a in by_pairs.items()}
        results["spread"][name] = {
            p: round((max(a) - min(a)) / 2, 4) if len(a) > 1 else None for p, a in by_pairs.items()
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 steps per run, nothing written")
    parser.add_argument("--pairs", type=int, nargs="*", default=list(NUM_PAIRS), help="numbers of pairs P to run")
    parser.add_argument("--mixers", nargs="*", default=list(MIXERS), help="mixers to run")
    parser.add_argument("--seeds", type=int, nargs="*", default=list(SEEDS), help="training seeds")
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
            for key in ("by_seed", "final_loss", "seconds"):  # lists, one entry per seed, in the files' order
                for name, by_pairs in part[key].items():
                    for pairs, values in by_pairs.items():
                        merged[key].setdefault(name, {}).setdefault(pairs, []).extend(values)
            merged["parameters"].update(part["parameters"])
            merged["setup"]["seeds"] = sorted(set(merged["setup"]["seeds"]) | set(part["setup"]["seeds"]))
        for key in ("by_seed", "final_loss", "seconds", "parameters"):  # in MIXERS' order, P ascending
            merged[key] = {name: merged[key][name] for name in MIXERS if name in merged[key]}
            if key != "parameters":
                merged[key] = {n: dict(sorted(d.items(), key=lambda kv: int(kv[0]))) for n, d in merged[key].items()}
        merged["accuracy"], merged["spread"] = {}, {}
        summarize(merged)
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
            seeds=args.seeds,
            **HEADS,
            conv_kernel_size=4,
            torch=torch.__version__,
            machine=platform.machine(),
        ),  # fmt: skip
        "accuracy": {},
        "spread": {},
        "by_seed": {name: {} for name in args.mixers},
        "final_loss": {name: {} for name in args.mixers},
        "seconds": {name: {} for name in args.mixers},  # training wall time, one busy CPU core: varies
        "parameters": {},
    }
    for num_pairs in args.pairs:
        make_batch = functools.partial(
            associative_recall_batch, num_pairs=num_pairs, num_queries=num_pairs, vocab_size=VOCAB
        )
        for name in args.mixers:
            for seed in args.seeds:
                factory = MIXERS[name]
                run = train_lm(
                    lambda factory=factory: TinyLM(VOCAB, HIDDEN, LAYERS, factory),
                    make_batch,
                    steps=steps,
                    lr=args.lr,
                    batch_size=BATCH,
                    seed=seed,
                )
                accuracy = recall_accuracy(run.model, num_pairs)
                key = str(num_pairs)
                results["by_seed"][name].setdefault(key, []).append(round(accuracy, 4))
                loss = round(sum(run.losses[-20:]) / len(run.losses[-20:]), 4)
                results["final_loss"][name].setdefault(key, []).append(loss)
                results["seconds"][name].setdefault(key, []).append(round(run.seconds))
                results["parameters"][name] = sum(p.numel() for p in run.model.parameters())
                summarize(results)
                print(
                    f"P={num_pairs:2d} {name:12s} seed {seed} accuracy {accuracy:.3f} loss {loss:.3f} "
                    f"({run.seconds:.0f} s)",
                    flush=True,
                )
                if not args.quick:
                    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
