"""What the gate and the delta rule each do: Gated DeltaNet vs an ungated DeltaNet vs KDA, on 12d's recall task.

The same model, task and training as ``benchmarks/train_recall.py`` (notebook 12d, section 7: ``TinyLM`` with 4
layers, hidden 64, Qwen3.5's layer with only its token mixer swapped; multi-query associative recall, vocabulary
128, chance 1/64; Adam, 64 sequences a step). Three mixers:

- **gated delta**: 12d's Gated DeltaNet as it is (one log decay ``g`` per token and value head, ``dt_bias``
  initialised as flash-linear-attention does), re-run here to record its decay before and after training;
- **delta (g = 0)**: the same layer with ``g = 0``: the delta rule alone, nothing decays (``A_log``, ``dt_bias``
  and ``in_proj_a`` are then unused);
- **kda**: the same layer with Kimi Delta Attention's per-*channel* decay (``ac.kda_rule``; ``g`` of shape
  ``(B, H, L, Dk)`` from KDA's own low-rank forget gate), initialised as Hugging Face's ``KimiLinear`` does
  (``A_log = log U(1, 16)`` per head, ``dt`` log-uniform in [0.001, 0.1] per channel).

Besides recall it stores each model's log decay ``g`` on 64 fresh sequences, at initialisation and after training:
the mean over tokens per (layer, head) for Gated DeltaNet and per (layer, head, key channel) for KDA.

Run: ``nice python benchmarks/train_delta_variants.py`` (one thread; ``--pairs``/``--seeds``/``--mixers`` pick a
subset, ``--merge`` joins the JSON of several processes) writes ``data/delta_variants_recall.json`` after every run
(notebook 12e reads it). ``--quick`` trains 20 steps and writes nothing. The stored JSON: P = 8, seeds 0 and 1, four
processes (Gated DeltaNet and the ungated DeltaNet in one, KDA in another, per seed) merged with ``--merge``; 12 to
40 minutes per model on one core of a shared 2-core machine (load 5-10).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import math
import platform
from pathlib import Path

import torch
import torch.nn.functional as F

import attn_core as ac
from attn_core.linear.kda import KimiForgetGate
from attn_core.models.tiny_lm import TinyLM, associative_recall_batch, train_lm

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "delta_variants_recall.json"
_spec = importlib.util.spec_from_file_location("train_recall", ROOT / "benchmarks" / "train_recall.py")
train_recall = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(train_recall)
HIDDEN, LAYERS, VOCAB, HEADS = train_recall.HIDDEN, train_recall.LAYERS, train_recall.VOCAB, train_recall.HEADS
TRAIN_CHUNK = train_recall.TRAIN_CHUNK


class UngatedDeltaNet(train_recall.TrainGatedDeltaNet):
    """The layer with g = 0: erase-then-write, never decay."""

    def state_update(self, q, k, v, g, beta, state):
        return ac.gated_delta_rule(q, k, v, torch.zeros_like(g), beta, chunk_size=TRAIN_CHUNK, initial_state=state)


class KDANet(train_recall.TrainGatedDeltaNet):
    """The layer with KDA's per-channel decay in place of the per-head one (the per-head g it computes is unused)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.forget_gate = KimiForgetGate(self.hidden_dim, self.num_v_heads, self.head_k_dim)
        with torch.no_grad():  # Hugging Face's KimiLinear _init_weights (flash-linear-attention's)
            self.forget_gate.A_log.copy_(torch.empty_like(self.forget_gate.A_log).uniform_(1.0, 16.0).log())
            low, high = math.log(1e-3), math.log(1e-1)
            dt = torch.empty_like(self.forget_gate.dt_bias).uniform_(low, high).exp().clamp_min(1e-4)  # (H·Dk,)
            self.forget_gate.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
        self._x = None

    def channel_decay(self, x):
        return self.forget_gate(x).transpose(1, 2)  # (B, H, L, Dk) log decay per key channel

    def forward(self, x, **kwargs):
        self._x = x  # the per-channel gate reads the layer's input, as KDA's does
        try:
            return super().forward(x, **kwargs)
        finally:
            self._x = None

    def state_update(self, q, k, v, g, beta, state):
        g = self.channel_decay(self._x)  # (B, H, L, Dk)
        return ac.kda_rule(q, k, v, g, beta, chunk_size=TRAIN_CHUNK, initial_state=state)


MIXERS = {
    "gated delta": train_recall.gated_delta_layer,
    "delta (g = 0)": lambda i: train_recall.AsMixer(UngatedDeltaNet(HIDDEN, **HEADS)),
    "kda": lambda i: train_recall.AsMixer(KDANet(HIDDEN, **HEADS)),
}


def mean_log_decay(model, inputs) -> list | None:
    """Mean log decay g over the tokens of ``inputs``: [layer][head] (Gated DeltaNet), [layer][head][channel]
    (KDA), or None (no decay)."""
    result = []
    with torch.no_grad():
        hidden = []  # each layer's input, recorded by hooks
        layers = [m for m in model.modules() if isinstance(m, ac.GatedDeltaNet)]
        hooks = [m.register_forward_hook(lambda mod, args, out: hidden.append(args[0])) for m in layers]
        model(inputs)
        for hook in hooks:
            hook.remove()
        for layer, x in zip(layers, hidden, strict=True):
            if isinstance(layer, KDANet):
                result.append(layer.channel_decay(x).mean((0, 2)).tolist())  # (H, Dk)
            elif isinstance(layer, UngatedDeltaNet):
                return None
            else:
                a = layer.in_proj_a(x)  # (B, L, Hv)
                g = -layer.A_log.exp() * F.softplus(a + layer.dt_bias)  # (B, L, Hv) as in its forward
                result.append(g.mean((0, 1)).tolist())  # (Hv,)
    return [[[round(v, 5) for v in h] if isinstance(h, list) else round(h, 5) for h in layer] for layer in result]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 steps per run, nothing written")
    parser.add_argument("--pairs", type=int, nargs="*", default=[8], help="numbers of pairs P to run")
    parser.add_argument("--mixers", nargs="*", default=list(MIXERS), help="mixers to run")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0], help="training seeds")
    parser.add_argument("--steps", type=int, default=train_recall.STEPS)
    parser.add_argument("--out", type=Path, default=OUT, help="where to write the JSON")
    parser.add_argument("--merge", type=Path, nargs="*", help="only merge these JSON files into --out")
    args = parser.parse_args()
    if args.merge:
        merged = json.loads(args.merge[0].read_text(encoding="utf-8"))
        for path in args.merge[1:]:
            merged["runs"].extend(json.loads(path.read_text(encoding="utf-8"))["runs"])
        merged["runs"].sort(key=lambda r: (r["pairs"], list(MIXERS).index(r["mixer"]), r["seed"]))
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
            lr=train_recall.LR,
            batch=train_recall.BATCH,
            **HEADS,
            conv_kernel_size=4,
            torch=torch.__version__,
            machine=platform.machine(),
        ),  # fmt: skip
        "runs": [],  # one per (P, mixer, seed): accuracy, final loss, seconds, decay at init and after training
    }
    for num_pairs in args.pairs:
        make_batch = functools.partial(
            associative_recall_batch, num_pairs=num_pairs, num_queries=num_pairs, vocab_size=VOCAB
        )
        probe, _ = make_batch(64, torch.Generator().manual_seed(99))  # (64, L) sequences the decay is read on
        for name in args.mixers:
            for seed in args.seeds:
                factory = MIXERS[name]
                torch.manual_seed(seed)  # what train_lm does: the same initial weights
                init_decay = mean_log_decay(TinyLM(VOCAB, HIDDEN, LAYERS, factory), probe)
                run = train_lm(
                    lambda factory=factory: TinyLM(VOCAB, HIDDEN, LAYERS, factory),
                    make_batch,
                    steps=steps,
                    lr=train_recall.LR,
                    batch_size=train_recall.BATCH,
                    seed=seed,
                )
                run.model.eval()
                accuracy = train_recall.recall_accuracy(run.model, num_pairs)
                loss = sum(run.losses[-20:]) / len(run.losses[-20:])
                results["runs"].append(
                    dict(
                        pairs=num_pairs,
                        mixer=name,
                        seed=seed,
                        accuracy=round(accuracy, 4),
                        final_loss=round(loss, 4),
                        seconds=round(run.seconds),
                        parameters=sum(p.numel() for p in run.model.parameters()),
                        init_decay=init_decay,
                        learned_decay=mean_log_decay(run.model, probe),
                    )  # fmt: skip
                )
                print(f"P={num_pairs:2d} {name:14s} seed {seed} accuracy {accuracy:.3f} loss {loss:.3f} "
                      f"({run.seconds:.0f} s)", flush=True)  # fmt: skip
                if not args.quick:
                    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
