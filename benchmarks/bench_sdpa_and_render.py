"""How fast is attn_core? Ratios against references measured in the same run.

1. ``ac.scaled_dot_product_attention`` (the teaching kernel: materialises the weights and
   returns them) against ``torch.nn.functional.scaled_dot_product_attention`` (torch's
   fused kernel), B=1, 8 heads, D=64, L in {128, 512, 2048}, with and without causal.
2. Explorer render time (parameters -> Figure -> PNG bytes, what a slider move costs in
   Python, with each explorer's own panel size), median over 20 redraws, as wall time and as
   CPU time of this process (the course machine is shared: CPU time hardly moves when other
   processes load it, wall time does). Then the single map against the 8-head grids: a grid
   must stay within 2x a single map. (One real control move of every explorer, the README's explorer table:
   ``benchmarks/bench_explorers.py``.)

Run: ``python benchmarks/bench_sdpa_and_render.py`` (about a minute on 2 cores); ``--render-only`` skips part 1.
"""

from __future__ import annotations

import os
import platform
import sys
import time

import matplotlib
from timing import round_robin_medians  # benchmarks/timing.py (scripts run from their folder)

matplotlib.use("Agg")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import attn_core as ac  # noqa: E402
from attn_core.viz import (  # noqa: E402
    kernel_schedule,
    linear_attention,
    mla,
    rope,
    rope_scaling,
    sampling,
    sparse,
    tiles,
    widgets,
)


def bench_kernels() -> None:
    print("\n## ac.scaled_dot_product_attention vs F.scaled_dot_product_attention")
    print("B=1, heads=8, D=64, float32; medians; ratio = ours / torch (lower is better)\n")
    print("| L | causal | torch fused (ms) | attn_core (ms) | ratio |")
    print("|---:|:---:|---:|---:|---:|")
    torch.manual_seed(0)
    for length in (128, 512, 2048):
        q, k, v = (torch.randn(1, 8, length, 64) for _ in range(3))  # (B, H, L, D)
        repeats = 30 if length < 2048 else 8
        for causal in (False, True):
            args = (q, k, v)
            with torch.inference_mode():
                medians = round_robin_medians(
                    {
                        "torch": lambda a=args, c=causal: F.scaled_dot_product_attention(*a, is_causal=c),
                        "ours": lambda a=args, c=causal: ac.scaled_dot_product_attention(*a, is_causal=c),
                    },
                    repeats,
                )
            reference, ours = medians["torch"], medians["ours"]
            row = f"| {length} | {'yes' if causal else 'no'} | {reference * 1e3:.2f} | {ours * 1e3:.2f} |"
            print(f"{row} {ours / reference:.1f}× |")


SINGLE = "temperature (01): 1 map, L=8"
GRIDS = ("heads (02): 8-head grid, L=8", "gqa (04): 8 heads / 2 kv, L=6")
RENDER_CASES = {  # parameters as each explorer starts (panel sizes from widgets.*_explorer)
    SINGLE: dict(seq_len=8, head_dim=64),
    "same with values printed": dict(seq_len=8, head_dim=64, values=True),
    "1 map, L=64": dict(seq_len=64),
    "masks (05): causal+dropout, L=8": dict(seq_len=8, mask_kind="causal", dropout_p=0.2),
    "heads (02): 4-head grid, L=8": dict(seq_len=8, num_heads=4, panel_size=2.4),
    GRIDS[0]: dict(seq_len=8, num_heads=8, panel_size=2.4),
    GRIDS[1]: dict(seq_len=6, num_heads=8, num_kv_heads=2, panel_size=2.0),
    "8-head grid, L=64 (panel 2.8)": dict(seq_len=64, num_heads=8),
}


def bench_render() -> None:
    print("\n## Explorer render time: parameters -> Figure -> PNG bytes, median of 20 redraws\n")
    redraws = {
        name: (lambda params=params: widgets.figure_png(widgets.render_attention(**params)))
        for name, params in RENDER_CASES.items()
    }
    redraws["tiles (08): 32×32, step 6"] = lambda: widgets.figure_png(tiles.render_tiles(step=6))
    redraws["rope (06): default view"] = lambda: widgets.figure_png(rope.render_rope())
    redraws["rope (06): D=128, 1024 distances"] = lambda: widgets.figure_png(
        rope.render_rope(q_position=100, k_position=3, pair=5, head_dim=128, max_distance=1024)
    )
    redraws["mla cache (09): default view"] = lambda: widgets.figure_png(mla.render_mla_cache())
    redraws["bands (06b): default view"] = lambda: widgets.figure_png(rope_scaling.render_bands())
    redraws["bands (06b): head_dim 128, context 8192"] = lambda: widgets.figure_png(
        rope_scaling.render_bands(head_dim=128, original_context=8192)
    )
    redraws["bands (06b): llama3, head_dim 128, context 8192, values"] = lambda: widgets.figure_png(
        rope_scaling.render_bands(scaling="llama3", head_dim=128, original_context=8192, values=True)
    )
    redraws["sparse masks (09b): default view"] = lambda: widgets.figure_png(sparse.render_sparse_masks())

    def sparse_move() -> None:  # a slider move: a new setting runs the four layers once for figure and line
        sparse._run_layers.cache_clear()
        widgets.figure_png(sparse.render_sparse_masks(seq_len=48))
        sparse.explain_sparse_masks(seq_len=48)

    redraws["sparse masks (09b): a move to 48 tokens, layers run"] = sparse_move
    redraws["kernel schedule (12b): default view"] = lambda: widgets.figure_png(kernel_schedule.render_schedule())
    redraws["chunks (12d): default view"] = lambda: widgets.figure_png(linear_attention.render_chunks())
    # 11's explorer on a Gemma-sized vocabulary (random logits cost the same as the model's): one slider move
    vocab = torch.randn(262_144, generator=torch.Generator().manual_seed(0)) * 3  # (V,)
    top_p = sampling.sampling_explorer(vocab).controls["top_p"]  # setting its value redraws once (observe)

    def move_top_p() -> None:
        top_p.value = 0.9 if top_p.value < 0.7 else 0.5

    redraws["sampling (11): a top-p move, 262,144 tokens"] = move_top_p
    wall, cpu = round_robin_medians(redraws, 20), round_robin_medians(redraws, 20, clock=time.process_time)
    print("| explorer view | wall (ms) | CPU (ms) |")
    print("|---|---:|---:|")
    for name in redraws:
        print(f"| {name} | {wall[name] * 1e3:.0f} | {cpu[name] * 1e3:.0f} |")
    print("\n| 8-head grid vs single map | wall ratio | CPU ratio |")
    print("|---|---:|---:|")
    for grid in GRIDS:
        print(f"| {grid} | {wall[grid] / wall[SINGLE]:.2f}× | {cpu[grid] / cpu[SINGLE]:.2f}× |")


def bench_saved_figure() -> None:
    """The plain call a teacher makes: ``ac.plot_attention(weights).savefig(...)`` to PNG, one map vs an 8-head
    grid, with attn_core's PNG writer (``attn_core.viz.png``) and with matplotlib's own (Pillow) in the same run."""
    import io

    from matplotlib.figure import Figure

    import attn_core as ac

    generator = torch.Generator().manual_seed(0)
    one = torch.softmax(torch.randn(64, 64, generator=generator), -1)  # (64, 64)
    grid = torch.softmax(torch.randn(8, 64, 64, generator=generator), -1)  # (8, 64, 64)
    cases = {
        "1 map 64×64, attn_core PNG": lambda: ac.plot_attention(one).savefig(io.BytesIO(), format="png"),
        "8-head grid 64×64, attn_core PNG": lambda: ac.plot_attention(grid).savefig(io.BytesIO(), format="png"),
        "1 map 64×64, matplotlib PNG": lambda: Figure.savefig(ac.plot_attention(one), io.BytesIO(), format="png"),
        "8-head grid 64×64, matplotlib PNG": lambda: Figure.savefig(
            ac.plot_attention(grid), io.BytesIO(), format="png"
        ),
    }
    cpu = round_robin_medians(cases, 20, clock=time.process_time)
    print("\n## plot_attention(weights) + savefig to PNG, median CPU of 20 (ms)\n")
    print("| figure | CPU (ms) |")
    print("|---|---:|")
    for name in cases:
        print(f"| {name} | {cpu[name] * 1e3:.1f} |")
    ratio = cpu["8-head grid 64×64, attn_core PNG"] / cpu["1 map 64×64, attn_core PNG"]
    print(f"\ngrid / map: {ratio:.2f}× (the series' bound: a grid <= 2× a map or <= 50 ms)")


def main() -> None:
    print("# attn_core benchmarks")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; python {platform.python_version()}; "
        f"torch {torch.__version__}; torch threads {torch.get_num_threads()}"
    )
    if "--render-only" not in sys.argv:
        bench_kernels()
    bench_saved_figure()
    bench_render()


if __name__ == "__main__":
    main()
