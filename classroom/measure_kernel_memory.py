"""Memory of Gemma notebook kernels sharing one model cache (classroom/README.md, section 4).

``python classroom/measure_kernel_memory.py [--kernels 2]`` starts that many real IPython kernels with the same
``ATTN_CORE_CACHE`` (default: this machine's), runs what a Gemma notebook runs (``ac.load_gemma3()``, then forward
passes on a short prompt) in all of them, and prints, after each step, every kernel's RSS, PSS and USS from
``/proc/PID/smaps_rollup`` plus how much of ``model.safetensors`` each kernel still maps. PSS splits a page shared by
n processes n ways and USS counts only a process's own pages, so PSS ~ USS ~ RSS means nothing is shared: n kernels
cost n times one. Linux only.
"""

from __future__ import annotations

import argparse
import os
import sys

from jupyter_client.manager import start_new_kernel

STEPS = {
    "kernel started": "pass",
    "imports (torch, attn_core)": "import torch\nimport attn_core as ac",
    "ac.load_gemma3()": "lm = ac.load_gemma3()",
    "first forward (14 tokens)": (
        "ids = torch.tensor([lm.encode('The capital of France is Paris, and the capital of Germany is')])\n"
        "with torch.no_grad():\n    logits = lm(ids, last_only=True)"
    ),
    "second forward": "with torch.no_grad():\n    logits = lm(ids, last_only=True)",
    "gc + malloc_trim": "import ctypes, gc\ngc.collect()\nctypes.CDLL('libc.so.6').malloc_trim(0)",
}


def rollup(pid: int) -> dict[str, int]:
    """smaps_rollup in KiB: Rss, Pss, Shared_*, Private_* (USS = Private_Clean + Private_Dirty)."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                fields[parts[0].rstrip(":")] = int(parts[1])
    fields["Uss"] = fields["Private_Clean"] + fields["Private_Dirty"]
    return fields


def mapped_weights_kib(pid: int) -> int:
    """KiB of model.safetensors resident through an mmap in this process (0: the weights were copied)."""
    total, inside = 0, False
    with open(f"/proc/{pid}/smaps") as handle:
        for line in handle:
            if "-" in line.split(" ", 1)[0]:  # a mapping's header line: "start-end perms offset dev inode path"
                inside = line.rstrip().endswith("model.safetensors")
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernels", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"ATTN_CORE_CACHE={os.environ.get('ATTN_CORE_CACHE', '(default)')}")
    kernels = [start_new_kernel(kernel_name="python3") for _ in range(args.kernels)]
    try:
        pids = [manager.provisioner.process.pid for manager, _ in kernels]
        for step, code in STEPS.items():
            for _, client in kernels:
                reply = client.execute_interactive(code, timeout=600, output_hook=lambda msg: None)
                if reply["content"]["status"] != "ok":
                    raise RuntimeError(f"{step}: {reply['content'].get('evalue')}")
            for k, pid in enumerate(pids):
                mem = rollup(pid)
                print(
                    f"{step:28s} kernel {k}: RSS {mem['Rss'] / 1024:6.0f} MiB  PSS {mem['Pss'] / 1024:6.0f} MiB  "
                    f"USS {mem['Uss'] / 1024:6.0f} MiB  shared {(mem['Rss'] - mem['Uss']) / 1024:5.0f} MiB  "
                    f"model.safetensors mapped {mapped_weights_kib(pid) / 1024:5.0f} MiB",
                    flush=True,
                )
    finally:
        for manager, client in kernels:
            client.stop_channels()
            manager.shutdown_kernel(now=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
