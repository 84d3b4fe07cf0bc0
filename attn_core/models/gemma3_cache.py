"""Is a converted Gemma 3 cache exactly what the conversion wrote? Content checks, cheap enough for every load.

The cache folder holds ``model.safetensors`` (1 GB of float32 weights), ``tokenizer.json`` and ``config.json``;
``config.json`` also records what the conversion wrote (:func:`make_record`):

- ``record_sha256``: the sha256 of the record itself, so a hand-edited ``config.json`` is caught;
- ``tokenizer_sha256``: checked on every load (33 MB, ~0.03 s);
- ``weights_header_sha256``: the safetensors header (tensor names, shapes, offsets), checked on every load, so a
  corrupt header is caught here instead of surfacing as a raw ``SafetensorError``;
- ``weights_chunk_sha256``: one sha256 per 4 MiB chunk of ``model.safetensors``.

Hashing all 1 GB costs ~1.9 s (an idle 2-core machine), more than the load itself (~1.2 s), so the full
check runs once per build and again whenever the file's size, modification time or status-change time (which
every write moves, and which ``touch -r`` cannot set back) differs from the stamp written by the last full check
(``config.json``'s ``verified``, outside ``record_sha256``). Every load also re-hashes ``SPOT_CHUNKS`` chunks
picked at random, which in time catches a corruption that left the file's times alone (bit rot); all per-load
checks together take 0.04-0.08 s. They guard against accidents, not against an attacker (who could rewrite the
record too).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import tempfile
from pathlib import Path

__all__ = ["FORMAT", "cache_dir", "make_record", "write_stamp", "cache_problem"]

FORMAT = 2  # bump when the cached layout changes: old caches are then rebuilt (2: content hashes, context_length)
CHUNK_BYTES = 4 << 20  # the weights are hashed in 4 MiB chunks
SPOT_CHUNKS = 2  # chunks re-hashed on every load when the stamp matches
_MAX_HEADER = 100 << 20  # safetensors refuses larger headers too


def _record_digest(record: dict) -> str:
    body = {key: value for key, value in record.items() if key not in ("record_sha256", "verified")}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _header_sha256(path: Path) -> str:
    """sha256 of the safetensors header: its 8-byte little-endian length, then that many bytes of JSON."""
    with open(path, "rb") as file:
        prefix = file.read(8)
        length = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        if not 0 < length <= _MAX_HEADER:
            raise ValueError(f"the header length field reads {length}")
        header = file.read(length)
    if len(header) != length:
        raise ValueError(f"the header is cut short ({len(header)} of {length} bytes)")
    return hashlib.sha256(prefix + header).hexdigest()


def _chunk_sha256(path: Path, chunk_bytes: int, indices=None) -> dict[int, str]:
    """sha256 of chunk ``i`` (bytes ``i * chunk_bytes`` onwards) for each index (all chunks when None)."""
    size = path.stat().st_size
    count = -(-size // chunk_bytes)
    hashes = {}
    with open(path, "rb") as file:
        for i in range(count) if indices is None else indices:
            file.seek(i * chunk_bytes)
            hashes[i] = hashlib.sha256(file.read(chunk_bytes)).hexdigest()
    return hashes


def make_record(folder: Path, *, config: dict, gguf_sha256: str) -> dict:
    """What ``config.json`` holds: the model config and the hashes of the files just written in ``folder``
    (the full hash of the weights, done once per build)."""
    weights = folder / "model.safetensors"
    chunks = _chunk_sha256(weights, CHUNK_BYTES)
    record = {
        "format": FORMAT,
        "gguf_sha256": gguf_sha256,
        "config": config,
        "tokenizer_sha256": _file_sha256(folder / "tokenizer.json"),
        "weights_bytes": weights.stat().st_size,
        "weights_header_sha256": _header_sha256(weights),
        "chunk_bytes": CHUNK_BYTES,
        "weights_chunk_sha256": [chunks[i] for i in range(len(chunks))],
    }
    record["record_sha256"] = _record_digest(record)
    return record


def _stamp_of(folder: Path, record: dict) -> dict:
    stat = (folder / "model.safetensors").stat()
    # ctime changes with any write and cannot be set back (os.utime sets only atime/mtime); a copy changes it too
    return {
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
        "record_sha256": record["record_sha256"],
    }


def write_stamp(folder: Path, record: dict) -> None:
    """Write ``record`` as ``config.json``, stamped: the weights as they are now (size, modification time)
    passed the full check. Written to a temporary file, then renamed (a reader never sees half a file)."""
    record = {**record, "verified": _stamp_of(folder, record)}
    handle, name = tempfile.mkstemp(prefix="config.json.", dir=folder)
    with os.fdopen(handle, "w") as file:
        json.dump(record, file, indent=1)
    os.chmod(name, 0o644)
    os.replace(name, folder / "config.json")


def cache_problem(folder: Path, gguf_sha256: str, *, spot_chunks: int = SPOT_CHUNKS) -> str | None:
    """None when ``folder`` holds the cache the conversion of ``gguf_sha256`` wrote, else what is wrong.

    May re-hash all the weights (when the stamp does not match; then a passing check renews the stamp)."""
    try:
        record = json.loads((folder / "config.json").read_text())
    except FileNotFoundError:
        return "no cache yet"
    except (OSError, ValueError) as error:
        return f"config.json is unreadable ({error})"
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return f"config.json is not format {FORMAT} (written by another version of attn_core)"
    if record.get("gguf_sha256") != gguf_sha256:
        return f"config.json belongs to another GGUF ({record.get('gguf_sha256')!r}, expected {gguf_sha256!r})"
    if record.get("record_sha256") != _record_digest(record):
        return "config.json was edited after conversion (its record_sha256 no longer matches its content)"
    weights = folder / "model.safetensors"
    try:
        if _file_sha256(folder / "tokenizer.json") != record["tokenizer_sha256"]:
            return "tokenizer.json changed since conversion (sha256 mismatch)"
        if weights.stat().st_size != record["weights_bytes"]:
            return f"model.safetensors has {weights.stat().st_size} bytes, expected {record['weights_bytes']}"
        try:
            header_ok = _header_sha256(weights) == record["weights_header_sha256"]
        except ValueError as error:
            return f"model.safetensors has a corrupt header ({error})"
        if not header_ok:
            return "model.safetensors has a corrupt header (sha256 mismatch: tensor names, shapes or offsets)"
        expected = record["weights_chunk_sha256"]
        full = record.get("verified") != _stamp_of(folder, record)
        indices = None if full else random.sample(range(len(expected)), min(spot_chunks, len(expected)))
        for i, digest in _chunk_sha256(weights, record["chunk_bytes"], indices).items():
            if digest != expected[i]:
                start = i * record["chunk_bytes"]
                return f"model.safetensors changed since conversion (bytes {start}..{start + record['chunk_bytes']})"
    except (OSError, KeyError, TypeError) as error:
        return f"a cache file is missing or unreadable, or the record incomplete ({error!r})"
    if full:
        write_stamp(folder, record)
    return None


def cache_dir() -> Path:
    """Where converted models live: ``$ATTN_CORE_CACHE``, else ``$XDG_CACHE_HOME/attn_core``, else
    ``~/.cache/attn_core``."""
    if os.environ.get("ATTN_CORE_CACHE"):
        return Path(os.environ["ATTN_CORE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attn_core"
