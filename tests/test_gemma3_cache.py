"""The converted Gemma 3 cache is checked for content (attn_core.models.gemma3_cache), not only for size:
garbage written into the weights (same size), a corrupt safetensors header, a hand-edited config.json, a changed
tokenizer are each caught, and load_gemma3 rebuilds the cache (one real rebuild here, ~30-90 s; the others stop
at the rebuild decision with a stand-in converter). Also: query_pre_attn_scalar is read, not assumed.

The content checks run on a small synthetic cache (a few tensors, 64-byte hash chunks), so every corruption is
cheap to make; the loader runs on the same files, named as the real cache, in a temporary ATTN_CORE_CACHE.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import warnings

import pytest
import torch
from safetensors.torch import save_file

import attn_core as ac
from attn_core.models import gemma3, gemma3_cache, gemma3_convert
from attn_core.models.gemma3_convert import query_pre_attn_scalar


class Converted(Exception):
    """Raised by a stand-in for convert_gguf: proves that loading decided to rebuild."""


@pytest.fixture
def synthetic(tmp_path, monkeypatch):
    """A cache folder named as the real one, written and recorded by gemma3_cache, in a temporary ATTN_CORE_CACHE."""
    monkeypatch.setattr(gemma3_cache, "CHUNK_BYTES", 64)
    monkeypatch.setenv("ATTN_CORE_CACHE", str(tmp_path))
    folder = tmp_path / f"gemma3-270m-{gemma3.SHA256[:16]}"
    folder.mkdir()
    generator = torch.Generator().manual_seed(0)
    tensors = {f"layers.{i}.w": torch.randn(8, 16, generator=generator) for i in range(4)}  # 4 x 512 bytes
    save_file(tensors, folder / "model.safetensors")
    os.utime(folder / "model.safetensors", ns=(0, 10**18))  # a fixed past mtime: any later write moves it
    (folder / "tokenizer.json").write_text('{"model": "a stand-in"}')
    record = gemma3_cache.make_record(folder, config={"hidden_dim": 16}, gguf_sha256=gemma3.SHA256)
    gemma3_cache.write_stamp(folder, record)  # writes config.json
    assert len(record["weights_chunk_sha256"]) > 30
    assert gemma3_cache.cache_problem(folder, gemma3.SHA256) is None
    return folder


def write_garbage(path, offset, size, *, keep_mtime=False):
    before = os.stat(path)
    with open(path, "r+b") as file:
        file.seek(offset)
        file.write(bytes(range(256)) * (size // 256) + bytes(size % 256))
    if keep_mtime:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size


def header_length(path):
    with open(path, "rb") as file:
        return 8 + int.from_bytes(file.read(8), "little")


def edit_config(folder, change):
    record = json.loads((folder / "config.json").read_text())
    change(record)
    (folder / "config.json").write_text(json.dumps(record, indent=1))


SPOILS = {
    "garbage-in-weights": (
        lambda f: write_garbage(f / "model.safetensors", header_length(f / "model.safetensors") + 700, 300),
        "model.safetensors changed since conversion",
    ),
    "corrupt-header": (lambda f: write_garbage(f / "model.safetensors", 20, 40), "corrupt header"),
    "header-length": (lambda f: write_garbage(f / "model.safetensors", 0, 8), "corrupt header"),
    "truncated-weights": (lambda f: os.truncate(f / "model.safetensors", 1000), "model.safetensors has 1000 bytes"),
    "edited-config": (
        lambda f: edit_config(f, lambda r: r["config"].update(hidden_dim=32)),
        "config.json was edited",
    ),
    "garbage-config": (lambda f: (f / "config.json").write_text("{ not json"), "config.json is unreadable"),
    "old-format": (lambda f: edit_config(f, lambda r: r.update(format=1)), "not format 2"),
    "changed-tokenizer": (lambda f: (f / "tokenizer.json").write_text('{"model": "another"}'), "tokenizer.json"),
    "missing-tokenizer": (lambda f: (f / "tokenizer.json").unlink(), "missing or unreadable"),
}


@pytest.mark.parametrize("spoil", SPOILS, ids=list(SPOILS))
def test_a_corrupted_cache_is_detected_and_rebuilt(synthetic, monkeypatch, spoil):
    make, message = SPOILS[spoil]
    make(synthetic)
    problem = gemma3_cache.cache_problem(synthetic, gemma3.SHA256)
    assert problem is not None and message in problem, problem

    def convert(target):
        assert target == synthetic
        raise Converted

    monkeypatch.setattr(gemma3_convert, "convert_gguf", convert)
    with warnings.catch_warnings(record=True) as caught, pytest.raises(Converted):
        warnings.simplefilter("always")
        ac.load_gemma3()
    if spoil != "old-format":  # an outdated cache is rebuilt silently; a corrupted one says why
        assert any(message in str(w.message) and "Rebuilding" in str(w.message) for w in caught), spoil


def test_garbage_that_keeps_the_modification_time_is_caught(synthetic):
    weights = synthetic / "model.safetensors"
    time.sleep(0.05)  # past the file system's timestamp tick (a few ms), as any real later write is
    write_garbage(weights, header_length(weights) + 64, 64, keep_mtime=True)  # the status-change time still moves
    assert "changed since conversion" in gemma3_cache.cache_problem(synthetic, gemma3.SHA256, spot_chunks=0)


def test_bit_rot_under_a_matching_stamp_is_caught_by_the_spot_checks(synthetic):
    weights = synthetic / "model.safetensors"
    write_garbage(weights, header_length(weights) + 64, 64)
    gemma3_cache.write_stamp(synthetic, json.loads((synthetic / "config.json").read_text()))  # times unchanged
    chunks = len(json.loads((synthetic / "config.json").read_text())["weights_chunk_sha256"])
    assert gemma3_cache.cache_problem(synthetic, gemma3.SHA256, spot_chunks=0) is None  # the stamp is trusted
    assert "changed since conversion" in gemma3_cache.cache_problem(synthetic, gemma3.SHA256, spot_chunks=chunks)
    edit_config(synthetic, lambda record: record.pop("verified"))  # no stamp: the full check
    assert "changed since conversion" in gemma3_cache.cache_problem(synthetic, gemma3.SHA256, spot_chunks=0)


def test_a_copied_cache_is_fully_checked_once_then_stamped(synthetic):
    os.utime(synthetic / "model.safetensors", ns=(0, 123))  # as after a copy: same bytes, another time
    stamp = json.loads((synthetic / "config.json").read_text())["verified"]
    assert gemma3_cache.cache_problem(synthetic, gemma3.SHA256) is None
    renewed = json.loads((synthetic / "config.json").read_text())["verified"]
    assert renewed["mtime_ns"] == 123 != stamp["mtime_ns"]


def test_a_rebuild_that_still_fails_raises(synthetic, monkeypatch):
    write_garbage(synthetic / "model.safetensors", 20, 40)
    monkeypatch.setattr(gemma3_convert, "convert_gguf", lambda target: None)  # a "rebuild" that changes nothing
    with pytest.warns(UserWarning, match="corrupt header"), pytest.raises(RuntimeError, match="still fails"):
        ac.load_gemma3()


@pytest.mark.slow  # one real conversion (~30 s): the scheduled run; the synthetic cases above run every push
def test_garbage_in_the_real_weights_is_rebuilt(tmp_path, monkeypatch):
    """The reviewer's case: 1 MiB of garbage in the middle of the real model.safetensors (same size) loaded
    silently with NaN logits. Now it is caught and the cache rebuilt (one real conversion), without pickle."""
    lm = ac.load_gemma3()
    warm = gemma3.cache_dir() / f"gemma3-270m-{gemma3.SHA256[:16]}"
    monkeypatch.setenv("ATTN_CORE_CACHE", str(tmp_path))
    folder = tmp_path / warm.name
    shutil.copytree(warm, folder)
    write_garbage(folder / "model.safetensors", (folder / "model.safetensors").stat().st_size // 2, 1 << 20)

    def no_pickle(*args, **kwargs):
        raise AssertionError("the cache must never be unpickled")

    monkeypatch.setattr(torch, "load", no_pickle)
    monkeypatch.setattr("pickle.load", no_pickle)
    monkeypatch.setattr("pickle.loads", no_pickle)
    with pytest.warns(UserWarning, match="model.safetensors changed since conversion"):
        rebuilt = ac.load_gemma3()
    assert all(torch.equal(a, b) for a, b in zip(lm.state_dict().values(), rebuilt.state_dict().values(), strict=True))
    del rebuilt
    names = sorted(p.name for p in tmp_path.rglob("*"))  # no staging folder left behind
    assert names == sorted([folder.name, "config.json", "model.safetensors", "tokenizer.json"])  # as before
    for path in folder.iterdir():
        with open(path, "rb") as file:
            assert file.read(1) != b"\x80", path  # a pickle starts with its protocol byte 0x80
    assert gemma3_cache.cache_problem(folder, gemma3.SHA256) is None


# --------------------------------------------------------------------------- query_pre_attn_scalar
GGUF_270M = {
    "gemma3.block_count": 18,
    "gemma3.embedding_length": 640,
    "gemma3.attention.head_count": 4,
    "gemma3.attention.key_length": 256,
}
GGUF_27B = {  # Gemma 3 27B: head_dim 128, but scores scaled by (5376 / 32) ** -0.5 = 168 ** -0.5
    "gemma3.block_count": 62,
    "gemma3.embedding_length": 5376,
    "gemma3.attention.head_count": 32,
    "gemma3.attention.key_length": 128,
}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (GGUF_270M, (256.0, "known value: head_dim")),
        (GGUF_27B, (168.0, "known value: hidden / num_heads (Gemma 3 27B)")),
        ({**GGUF_27B, "gemma3.attention.query_pre_attn_scalar": 144}, (144.0, "GGUF metadata")),
    ],
    ids=["270M", "27B", "in-metadata"],
)
def test_query_pre_attn_scalar_is_read_not_assumed(fields, expected):
    assert query_pre_attn_scalar(fields.__getitem__, fields.__contains__) == expected


def test_the_real_config_records_the_context_and_the_scalar():
    config = ac.load_gemma3().config
    assert (config.query_pre_attn_scalar, config.head_dim, config.context_length) == (256.0, 256, 32768)
