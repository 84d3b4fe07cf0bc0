"""The interview gym's absorbed-MLA and paged-allocator drills (issue #38): each grader rejects plausible wrong answers,
written as a candidate would write them, with the right diagnosis, and accepts equivalent correct ones."""

from collections import Counter, deque

import numpy as np
import pytest
import torch

from attn_core.caches.paged_cache import OutOfBlocksError, PagedKVCache
from attn_core.exercises.drills_mla_absorb import check_mla_absorbed
from attn_core.exercises.drills_paged_allocator import SCRIPT, ReferenceAllocator, check_paged_allocator


def _causal(scores):
    q_len, total = scores.shape[-2:]
    allowed = torch.ones(q_len, total, dtype=torch.bool).tril(total - q_len)  # (Lq, T), bottom-right
    return scores.masked_fill(~allowed, float("-inf"))


def mla_right(q_nope, q_rope, latent, k_rope, w_uk, w_uv):
    scale = (q_nope.shape[-1] + q_rope.shape[-1]) ** -0.5
    q_latent = q_nope @ w_uk  # (H, Lq, rank)
    scores = (q_latent @ latent.T + q_rope @ k_rope.T) * scale  # (H, Lq, T)
    weights = _causal(scores).softmax(-1)  # (H, Lq, T)
    return q_latent, (weights @ latent) @ w_uv.mT  # (H, Lq, rank), (H, Lq, v)


def _mla(w_q=None, w_o=None, rope=True, scale=None, causal=_causal, dim=-1, up=True, q_out=None):
    """A candidate's absorbed MLA with one change (each argument replaces one line of ``mla_right``)."""

    def fn(q_nope, q_rope, latent, k_rope, w_uk, w_uv):
        s = scale(q_nope, q_rope, latent) if scale else (q_nope.shape[-1] + q_rope.shape[-1]) ** -0.5
        q_latent = q_nope @ (w_q(w_uk, w_uv) if w_q else w_uk)  # (H, Lq, rank)
        scores = q_latent @ latent.T + (q_rope @ k_rope.T if rope else 0)  # (H, Lq, T)
        weights = causal(scores * s).softmax(dim)  # (H, Lq, T)
        out_latent = weights @ latent  # (H, Lq, rank)
        out = out_latent @ (w_o(w_uk, w_uv) if w_o else w_uv.mT) if up else out_latent
        return (q_out(q_nope, q_latent, s) if q_out else q_latent), out

    return fn


MLA_WRONG = {
    "W_UV absorbed into the query": (_mla(w_q=lambda uk, uv: uv), "q_latent uses W_UV"),
    "W_UK and W_UV swapped": (_mla(w_q=lambda uk, uv: uv, w_o=lambda uk, uv: uk.mT), "swapped"),
    "W_UK on the output": (_mla(w_o=lambda uk, uv: uk.mT), "the output uses W_UK"),
    "W_UK transposed": (_mla(w_q=lambda uk, uv: uk.mT), "W_UK is transposed"),
    "W_UV not transposed": (_mla(w_o=lambda uk, uv: uv), "W_UV is transposed"),
    "head 0's W_UK for all": (_mla(w_q=lambda uk, uv: uk[0]), "head 0's W_UK"),
    "no rope part": (_mla(rope=False), "decoupled RoPE part is missing"),
    "scale of the absorbed dim": (
        _mla(scale=lambda qn, qr, c: (c.shape[-1] + qr.shape[-1]) ** -0.5),
        "1/√(rank + rope)",
    ),
    "scale 1/√nope": (_mla(scale=lambda qn, qr, c: qn.shape[-1] ** -0.5), "1/√nope"),
    "no scale": (_mla(scale=lambda qn, qr, c: 1.0), "not scaled"),
    "no causal mask": (_mla(causal=lambda s: s), "no causal mask"),
    "top-left mask": (
        _mla(causal=lambda s: s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), float("-inf"))),
        "top-left",
    ),
    "softmax over queries": (_mla(dim=-2), "dim=-2"),
    "no W_UV at the end": (_mla(up=False), "still in latent space"),
    "scaled q_latent returned": (_mla(q_out=lambda qn, ql, s: ql * s), "unscaled"),
    "naive keys, q_nope returned": (_mla(q_out=lambda qn, ql, s: qn), "q_latent is q_nope itself"),
    "one value returned": (lambda *a: mla_right(*a)[1], "return a pair"),
    "stub": (lambda *a: None, None),
}


@pytest.mark.parametrize("name", list(MLA_WRONG))
def test_mla_absorbed_rejects_with_the_diagnosis(name, capsys):
    fn, diagnosis = MLA_WRONG[name]
    assert check_mla_absorbed(fn) is False
    out = capsys.readouterr().out
    assert "❌" in out
    if diagnosis:
        assert diagnosis in out, out


def _mla_naive_then_absorbed_query(q_nope, q_rope, latent, k_rope, w_uk, w_uv):
    """The non-absorbed computation (per-head keys and values), returning the absorbed query too."""
    k_nope = torch.einsum("tr,hnr->htn", latent, w_uk)  # (H, T, nope)
    v = torch.einsum("tr,hvr->htv", latent, w_uv)  # (H, T, v)
    k = torch.cat([k_nope, k_rope.expand(k_nope.shape[0], -1, -1)], -1)  # (H, T, nope + rope)
    out = torch.nn.functional.scaled_dot_product_attention(
        torch.cat([q_nope, q_rope], -1),
        k,
        v,
        attn_mask=torch.isfinite(_causal(torch.zeros(q_nope.shape[1], k.shape[1]))),
    )  # (H, Lq, v)
    return torch.einsum("hln,hnr->hlr", q_nope, w_uk), out


def _mla_numpy(q_nope, q_rope, latent, k_rope, w_uk, w_uv):
    qn, qr, c, kr, uk, uv = (t.numpy() for t in (q_nope, q_rope, latent, k_rope, w_uk, w_uv))
    q_latent = np.einsum("hln,hnr->hlr", qn, uk)  # (H, Lq, rank)
    scores = (q_latent @ c.T + qr @ kr.T) / np.sqrt(qn.shape[-1] + qr.shape[-1])  # (H, Lq, T)
    q_len, total = scores.shape[-2:]
    scores = np.where(np.arange(total) <= np.arange(q_len)[:, None] + total - q_len, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return q_latent, np.einsum("hlr,hvr->hlv", weights @ c, uv)


MLA_RIGHT = {
    "matmul": mla_right,
    "float32": lambda *a: tuple(t.float() for t in mla_right(*(x.float() for x in a))),
    "naive keys and values with the absorbed query": _mla_naive_then_absorbed_query,
    "numpy einsum": _mla_numpy,
}


@pytest.mark.parametrize("name", list(MLA_RIGHT))
def test_mla_absorbed_accepts_correct_variants(name, capsys):
    assert check_mla_absorbed(MLA_RIGHT[name]) is True, capsys.readouterr().out


class Allocator:
    """A candidate's allocator: a deque free queue, a list of counts, a dict of tables and lengths."""

    def __init__(self, num_blocks, block_size):
        self.block_size, self.queue, self.counts = block_size, deque(range(num_blocks)), [0] * num_blocks
        self.tables, self.lengths = {}, {}

    def take(self):
        block = self.queue.popleft()
        self.counts[block] = 1
        return block

    def release(self, block):
        self.counts[block] -= 1
        if self.counts[block] == 0:
            self.queue.append(block)

    def needed(self, length, num_tokens, table):
        return -(-(length + num_tokens) // self.block_size) - len(table)

    def must_copy(self, length, table):
        return length % self.block_size != 0 and self.counts[table[-1]] > 1

    def append(self, seq_id, num_tokens):
        table, length = self.tables.setdefault(seq_id, []), self.lengths.setdefault(seq_id, 0)
        fresh, copy = self.needed(length, num_tokens, table), self.must_copy(length, table)
        if fresh + copy > len(self.queue):
            raise MemoryError("out of blocks")
        copies = []
        if copy:
            copies.append(self.cow(table))
        table += [self.take() for _ in range(fresh)]
        self.lengths[seq_id] = length + num_tokens
        return copies

    def cow(self, table):
        shared, own = table[-1], self.take()
        self.release(shared)
        table[-1] = own
        return shared, own

    def fork(self, parent_id, child_id):
        self.tables[child_id], self.lengths[child_id] = list(self.tables[parent_id]), self.lengths[parent_id]
        for block in self.tables[child_id]:
            self.counts[block] += 1

    def free(self, seq_id):
        for block in reversed(self.tables.pop(seq_id)):
            self.release(block)
        del self.lengths[seq_id]

    def block_table(self, seq_id):
        return self.tables[seq_id]

    def ref_count(self, block):
        return self.counts[block]


def _wrong(**methods):
    return type("Wrong", (Allocator,), methods)


def _cow_no_release(self, table):
    shared, own = table[-1], self.take()
    table[-1] = own
    return shared, own


def _append_partial(self, seq_id, num_tokens):
    table, length = self.tables.setdefault(seq_id, []), self.lengths.setdefault(seq_id, 0)
    copies = [self.cow(table)] if self.must_copy(length, table) else []
    for _ in range(self.needed(length, num_tokens, table)):
        if not self.queue:  # found out one block too late: the blocks taken so far stay taken
            raise MemoryError("out of blocks")
        table.append(self.take())
    self.lengths[seq_id] = length + num_tokens
    return copies


def _append_silent(self, seq_id, num_tokens):
    try:
        return Allocator.append(self, seq_id, num_tokens)
    except MemoryError:
        return []


def _fork_copy(self, parent_id, child_id):
    self.tables[child_id] = [self.take() for _ in self.tables[parent_id]]
    self.lengths[child_id] = self.lengths[parent_id]


def _fork_no_retain(self, parent_id, child_id):
    self.tables[child_id], self.lengths[child_id] = list(self.tables[parent_id]), self.lengths[parent_id]


def _free_head_first(self, seq_id):
    for block in self.tables.pop(seq_id):
        self.release(block)


def _free_zero(self, seq_id):
    for block in reversed(self.tables.pop(seq_id)):
        self.counts[block] = 0
        self.queue.append(block)


def _release_leak(self, block):
    self.counts[block] -= 1


def _take_back(self):
    block = self.queue.pop()
    self.counts[block] = 1
    return block


PAGED_WRONG = {
    "fork copies": (_wrong(fork=_fork_copy), "fork copied the parent's blocks"),
    "fork without retain": (_wrong(fork=_fork_no_retain), "did not add a reference"),
    "no copy-on-write": (_wrong(must_copy=lambda self, length, table: False), "no copy-on-write"),
    "copy-on-write always": (
        _wrong(must_copy=lambda self, length, table: bool(table) and length % self.block_size != 0),
        "nobody shares",
    ),
    "copy-on-write of full blocks": (
        _wrong(must_copy=lambda self, length, table: bool(table) and self.counts[table[-1]] > 1),
        "copy-on-write of a full block",
    ),
    "copies as (dst, src)": (
        _wrong(cow=lambda self, table: Allocator.cow(self, table)[::-1]),
        "the copies are reversed",
    ),
    "copy-on-write keeps the reference": (_wrong(cow=_cow_no_release), "kept this sequence's reference"),
    "free head first": (_wrong(free=_free_head_first), "tail first"),
    "free zeroes the count": (_wrong(free=_free_zero), "set ref_count to 0"),
    "released blocks leak": (_wrong(release=_release_leak), "never went back to the free queue"),
    "floor block count": (
        _wrong(needed=lambda self, length, n, table: (length + n) // self.block_size - len(table)),
        "ceil(tokens / block_size)",
    ),
    "a fresh block per append": (
        _wrong(needed=lambda self, length, n, table: -(-n // self.block_size)),
        "fill the last block's free slots first",
    ),
    "LIFO free queue": (_wrong(take=_take_back), "from the front"),
    "partial allocation before refusing": (_wrong(append=_append_partial), "took some before refusing"),
    "never refuses": (_wrong(append=_append_silent), "must raise"),
    "missing ref_count": (_wrong(ref_count=None), "needs the methods ref_count"),
    "empty class": (type("Empty", (), {"__init__": lambda self, n, b: None}), "not attempted yet"),
    "stub": (lambda n, b: None, None),
}


@pytest.mark.parametrize("name", list(PAGED_WRONG))
def test_paged_allocator_rejects_with_the_diagnosis(name, capsys):
    cls, diagnosis = PAGED_WRONG[name]
    assert check_paged_allocator(cls) is False
    out = capsys.readouterr().out
    assert "❌" in out
    if diagnosis:
        assert diagnosis in out, out


class ListAllocator:
    """Counts in a Counter, the queue a list (pop(0)), tables returned as numpy int arrays, copies as lists."""

    def __init__(self, num_blocks, block_size):
        self.size, self.queue, self.counts, self.tables, self.lengths = (
            block_size,
            list(range(num_blocks)),
            Counter(),
            {},
            {},
        )

    def append(self, seq_id, num_tokens):
        table = self.tables.setdefault(seq_id, [])
        length = self.lengths.get(seq_id, 0)
        blocks_after = (length + num_tokens + self.size - 1) // self.size
        shared_partial = length % self.size > 0 and self.counts[table[-1]] >= 2
        if blocks_after - len(table) + shared_partial > len(self.queue):
            raise RuntimeError("out of blocks")
        copies = []
        if shared_partial:
            fresh = self.queue.pop(0)
            self.counts[fresh] += 1
            self.counts[table[-1]] -= 1  # still >= 1: someone else holds it
            copies.append([table[-1], fresh])
            table[-1] = fresh
        while len(table) < blocks_after:
            table.append(self.queue.pop(0))
            self.counts[table[-1]] += 1
        self.lengths[seq_id] = length + num_tokens
        return copies

    def fork(self, parent_id, child_id):
        self.tables[child_id] = self.tables[parent_id][:]
        self.lengths[child_id] = self.lengths[parent_id]
        self.counts.update(self.tables[child_id])

    def free(self, seq_id):
        self.lengths.pop(seq_id)
        for block in self.tables.pop(seq_id)[::-1]:
            self.counts[block] -= 1
            if not self.counts[block]:
                self.queue.append(block)

    def block_table(self, seq_id):
        return np.array(self.tables[seq_id], dtype=np.int64)

    def ref_count(self, block):
        return np.int32(self.counts[block])


PAGED_RIGHT = {
    "deque and list of counts": Allocator,
    "Counter, list queue, numpy tables": ListAllocator,
    "the grader's reference": ReferenceAllocator,
    "tensor counts": type(
        "TensorCounts", (Allocator,), {"ref_count": lambda self, block: torch.tensor(self.counts)[block]}
    ),
}


@pytest.mark.parametrize("name", list(PAGED_RIGHT))
def test_paged_allocator_accepts_correct_variants(name, capsys):
    assert check_paged_allocator(PAGED_RIGHT[name]) is True, capsys.readouterr().out


def _refused(call, *args) -> bool:
    try:
        call(*args)
    except (RuntimeError, OutOfBlocksError):
        return True
    return False


def test_the_drills_rules_are_paged_kv_caches():
    """The drill's script on attn_core's PagedKVCache (a min-heap free list, so other block ids): the same table
    lengths, the same multiset of reference counts and the same refusal at every step."""
    drill = ReferenceAllocator(8, 4)
    paged = PagedKVCache(block_size=4, num_blocks=8)
    live = []
    for operation, args in SCRIPT:
        if operation == "append":
            seq_id, n = args
            keys = torch.zeros(1, 1, n, 2)  # (1, Hkv, n, D)
            sequence = paged.sequence(seq_id)
            assert _refused(drill.append, seq_id, n) == _refused(sequence.update, keys, keys), (operation, args)
            live += [seq_id] if seq_id not in live else []
        elif operation == "fork":
            drill.fork(*args)
            paged.fork(*args)
            live.append(args[1])
        else:
            drill.free(*args)
            paged.free(*args)
            live.remove(args[0])
        assert [len(drill.block_table(s)) for s in live] == [len(paged.block_table(s)) for s in live]
        assert sorted(drill.counts) == sorted(paged.allocator.ref_counts), (operation, args)


def test_new_drills_read_in_chinese(capsys):
    import attn_core as ac

    ac.set_language("zh")
    try:
        check_mla_absorbed(MLA_WRONG["no rope part"][0])
        check_paged_allocator(PAGED_WRONG["free head first"][0])
        check_paged_allocator(Allocator)
    finally:
        ac.set_language("en")
    out = capsys.readouterr().out
    assert "缺少解耦的 RoPE 部分" in out and "从尾部开始释放" in out and "✅" in out
