"""The stored references notebook 11 compares against, checked here against their live sources.

Notebook 11 must run in seconds, so it does not import transformers (~3 s) nor parse the GGUF (~11 s idle, 40 s
busy); it reads two small files in ``data/``, made and verified by this module:

- ``gemma3_reference_hf.safetensors``: Hugging Face's ``Gemma3ForCausalLM`` (eager attention, our converted
  tensors, ``hugging_face_gemma3``) on notebook 11's prompt: greedy ``generate`` of 8 tokens (the token ids), the
  top-64 logits of each of the 8 steps (ids and float32 values), the prefill's attention weights of all 18 layers,
  and the sliding-window mask Hugging Face builds for a 560-token local layer (bit-packed rows).
- ``gemma3_reference_gguf_tensors.json``: name, quantisation type, shape, element and byte counts of every tensor in
  the packaged GGUF, read with the ``gguf`` library (notebook 11's Q4_K_M table).

Each test rebuilds its reference live and asserts that the stored file equals it: token ids, mask and GGUF records
exactly, floats within the float32 rounding bound of notebook 11 (4 sqrt(2048) u per rounding stage, 20 stages,
relative to the largest |logit|), doubled because the stored run and the live one may come from different CPUs.
After a deliberate change (a new prompt, a new transformers), regenerate both files and review the diff:

    ATTN_CORE_REGENERATE_REFERENCE=1 pytest -p no:cacheprovider tests/test_gemma3_stored_reference.py
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import importlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import attn_core as ac  # noqa: E402
from attn_core.models import gemma3  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HF_FILE = ROOT / "data" / "gemma3_reference_hf.safetensors"
GGUF_FILE = ROOT / "data" / "gemma3_reference_gguf_tensors.json"
NOTEBOOK = ROOT / "notebooks" / "11_real_decoder_gemma3.ipynb"
NOTEBOOK_MAPS = ROOT / "notebooks" / "11b_gemma3_attention_maps.ipynb"  # reads the stored window mask
REGENERATE = os.environ.get("ATTN_CORE_REGENERATE_REFERENCE") == "1"

PROMPT = "The capital of France is Paris, and the capital of Germany is"  # notebook 11, section 2
NUM_NEW = 8  # greedy tokens
TOP_K = 64  # logits stored per step
MASK_LENGTH = 560  # notebook 11, section 4: the long text's tokens
U = torch.finfo(torch.float32).eps / 2  # unit roundoff of float32


def stage_bound(config, stages: int) -> float:
    """Notebook 11's a-priori float32 rounding bound after ``stages`` stages, relative to the largest value."""
    return 4 * math.sqrt(config.ffn_dim) * U * stages


def hugging_face_reference(lm) -> tuple[dict[str, torch.Tensor], dict[str, str], torch.Tensor]:
    """Run Hugging Face live: what notebook 11 compares with (tensors, provenance metadata, all 8 logit rows)."""
    import transformers
    from transformers.masking_utils import sdpa_mask, sliding_window_causal_mask_function

    from attn_core.models.gemma3_reference import hugging_face_gemma3

    hf = hugging_face_gemma3(lm)
    input_ids = torch.tensor([lm.encode(PROMPT)])  # (1, P)
    with torch.no_grad():
        out = hf.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=NUM_NEW,
            min_new_tokens=NUM_NEW,
            do_sample=False,
            output_logits=True,
            output_attentions=True,
            return_dict_in_generate=True,
        )
    logits = torch.cat(out.logits)  # (NUM_NEW, V)
    top = logits.topk(TOP_K, dim=-1)  # (NUM_NEW, TOP_K) ids and values
    prefill = torch.cat(out.attentions[0])  # (layers, H, P, P): one (1, H, P, P) per layer
    mask = sdpa_mask(
        batch_size=1,
        q_length=MASK_LENGTH,
        kv_length=MASK_LENGTH,
        mask_function=sliding_window_causal_mask_function(lm.config.sliding_window),
        allow_is_causal_skip=False,
    )[0, 0]  # (L, L) bool, True = may attend
    tensors = {
        "tokens": out.sequences.contiguous(),  # (1, P + NUM_NEW)
        "top_ids": top.indices.contiguous(),  # (NUM_NEW, TOP_K)
        "top_logits": top.values.contiguous(),  # (NUM_NEW, TOP_K) float32
        "prefill_attentions": prefill.contiguous(),  # (layers, H, P, P) float32
        "window_mask_bits": torch.from_numpy(np.packbits(mask.numpy(), axis=-1)),  # (L, ceil(L / 8)) uint8
    }
    metadata = {
        "prompt": PROMPT,
        "window_mask": f"transformers.masking_utils.sdpa_mask, {MASK_LENGTH} tokens, "
        f"sliding_window={lm.config.sliding_window}; np.unpackbits(bits, axis=-1)[:, :{MASK_LENGTH}]",
        "model": f"Hugging Face Gemma3ForCausalLM (eager) holding attn_core's tensors; GGUF sha256 {gemma3.SHA256}",
        "transformers": transformers.__version__,
        "torch": torch.__version__.split("+")[0],
        "made_by": "tests/test_gemma3_stored_reference.py",
    }
    return tensors, metadata, logits


def gguf_records() -> dict:
    """Every tensor of the packaged GGUF: name, type, shape, elements, bytes (the gguf library's reader)."""
    import gguf

    path = importlib.import_module(gemma3.PACKAGE).assemble()
    reader = gguf.GGUFReader(path)
    tensors = [
        {
            "name": info.name,
            "type": info.tensor_type.name,
            "shape": [int(n) for n in info.shape],
            "elements": int(info.n_elements),
            "bytes": int(info.n_bytes),
        }
        for info in reader.tensors
    ]
    return {"gguf_sha256": gemma3.SHA256, "made_by": "tests/test_gemma3_stored_reference.py", "tensors": tensors}


def test_stored_hugging_face_reference_equals_the_live_one(lm):
    live, metadata, live_logits = hugging_face_reference(lm)
    if REGENERATE:
        save_file(live, HF_FILE, metadata=metadata)
    assert HF_FILE.stat().st_size < 2**20, "keep the stored reference small"
    stored = load_file(HF_FILE)
    with safe_open(HF_FILE, "pt") as handle:
        assert handle.metadata()["prompt"] == PROMPT
    assert set(stored) == set(live)
    for name in ("tokens", "window_mask_bits"):
        assert torch.equal(stored[name], live[name]), name
    assert lm.decode(stored["tokens"][0, -NUM_NEW:]).startswith(" Berlin")

    # the stored top-64 are the live run's top-64, within rounding: same values, and no live logit outside them
    bound = stage_bound(lm.config, lm.config.num_layers + 2) * live_logits.abs().max().item()
    at_stored = live_logits.gather(-1, stored["top_ids"])  # (NUM_NEW, TOP_K)
    assert (at_stored - stored["top_logits"]).abs().max() <= 2 * bound
    assert (at_stored.amin(-1) >= live_logits.topk(TOP_K, dim=-1).values[:, -1] - 2 * bound).all()
    assert torch.equal(stored["top_ids"][:, 0], stored["tokens"][0, -NUM_NEW:])  # greedy: the argmax each step
    for layer, (ours, theirs) in enumerate(zip(stored["prefill_attentions"], live["prefill_attentions"], strict=True)):
        torch.testing.assert_close(ours, theirs, atol=2 * stage_bound(lm.config, layer + 2), rtol=0)

    # the mask unpacks to exactly our sliding-window mask (the notebook's "off by one" check compares with it)
    bits = stored["window_mask_bits"].numpy()  # (L, ceil(L / 8))
    mask = torch.from_numpy(np.unpackbits(bits, axis=-1)[:, :MASK_LENGTH].astype(bool))  # (L, L)
    assert torch.equal(mask, ac.sliding_window_mask(MASK_LENGTH, lm.config.sliding_window))


def test_stored_gguf_table_equals_the_packaged_file():
    live = gguf_records()
    if REGENERATE:
        head = {key: value for key, value in live.items() if key != "tensors"}
        rows = ",\n".join(json.dumps(record) for record in live["tensors"])  # one tensor per line
        GGUF_FILE.write_text(json.dumps(head, indent=1)[:-2] + ',\n "tensors": [\n' + rows + "\n ]\n}\n")
    stored = json.loads(GGUF_FILE.read_text())
    assert stored == live
    assert len(stored["tensors"]) == 236 and sum(t["elements"] for t in stored["tensors"]) == 268_098_176


@pytest.mark.parametrize("notebook", [NOTEBOOK, NOTEBOOK_MAPS], ids=lambda path: path.stem)
def test_notebook_11_reads_the_stored_references_on_one_thread(notebook):
    """Notebooks 11 and 11b compare with the stored files, import no transformers, and never set 2 threads (under
    load, OpenMP's spinning workers made 8 greedy tokens 10x slower on 2 threads than on 1)."""
    code = "\n".join(cell.source for cell in nbformat.read(notebook, 4).cells if cell.cell_type == "code")
    assert HF_FILE.name in code and (notebook != NOTEBOOK or GGUF_FILE.name in code)
    assert not re.search(r"^\s*(import|from)\s+(transformers|gguf)\b", code, flags=re.MULTILINE)
    assert "hugging_face_gemma3" not in code and "GGUFReader" not in code
    assert "set_num_threads(1)" in code and "set_num_threads(2)" not in code
