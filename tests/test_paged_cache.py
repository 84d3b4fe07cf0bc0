"""PagedKVCache: paged == contiguous per sequence, prefix sharing with copy-on-write, block reuse without
stale data, out-of-blocks errors that change nothing, a hypothesis property over random operations, errors."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import event, given
from hypothesis import strategies as st

import attn_core as ac
from attn_core.caches.paged_cache import OutOfBlocksError

F64 = torch.float64
HEADS, DIM, VDIM = 2, 3, 5  # kv heads, key dim, value dim (Dv != D on purpose)


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def kv(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n tokens of keys (1, HEADS, n, DIM) and values (1, HEADS, n, VDIM)."""
    return randn(1, HEADS, n, DIM, seed=2 * seed), randn(1, HEADS, n, VDIM, seed=2 * seed + 1)


def state(paged: ac.PagedKVCache) -> tuple:
    """Everything an append could change: tables, lengths, free blocks, reference counts, the pools' contents."""
    tables = {i: paged.block_table(i) for i in paged.seq_ids}
    lengths = {i: len(paged.sequence(i)) for i in paged.seq_ids}
    pools = () if paged._key_pool is None else (paged._key_pool.clone(), paged._value_pool.clone())
    return tables, lengths, sorted(paged._free), list(paged._ref_counts), pools


def assert_same_state(before: tuple, after: tuple) -> None:
    assert before[:4] == after[:4]
    for old, new in zip(before[4], after[4], strict=True):
        assert torch.equal(old, new)


def block_bytes(block_size: int, element_size: int = 8) -> int:
    return HEADS * block_size * (DIM + VDIM) * element_size


# --------------------------------------------------------------------------- paged == contiguous

# (seq_id, tokens) appends, interleaved across sequences: prefill chunks, then decode steps.
SCHEDULE = [(0, 5), (1, 2), (2, 9), (0, 1), (1, 1), (2, 1), (1, 4), (0, 1), (0, 1), (2, 3), (1, 1), (0, 6)]


@pytest.mark.parametrize("block_size", [1, 3, 4, 16])
def test_update_returns_the_contiguous_cache(block_size):
    """Several sequences of different lengths, appends interleaved: each sequence's keys/values returned by
    update equal a separate KVCache's, bit for bit (the gather copies, nothing is computed)."""
    paged = ac.PagedKVCache(block_size, num_blocks=40)
    contiguous = {seq_id: ac.KVCache() for seq_id, _ in SCHEDULE}
    for step, (seq_id, n) in enumerate(SCHEDULE):
        k, v = kv(n, seed=step)
        paged_k, paged_v = paged.sequence(seq_id).update(k, v)
        ref_k, ref_v = contiguous[seq_id].update(k, v)
        assert torch.equal(paged_k, ref_k) and torch.equal(paged_v, ref_v)
        assert len(paged.sequence(seq_id)) == len(contiguous[seq_id])
        assert len(paged.block_table(seq_id)) == math.ceil(len(contiguous[seq_id]) / block_size)
    used = sum(len(paged.block_table(i)) for i in paged.seq_ids)
    assert paged.num_free_blocks == 40 - used and paged.nbytes == used * block_bytes(block_size)
    assert paged.seq_ids == [0, 1, 2] and paged.sequence(2).key_positions is None


LAYERS = {
    "mha": lambda: ac.MultiHeadAttention(12, 3),
    "gqa-rope": lambda: ac.GroupedQueryAttention(12, 4, 2, head_dim=4, rope_base=10000.0),
    "mqa": lambda: ac.MultiQueryAttention(12, 3),
    "gqa-rope-window": lambda: ac.GroupedQueryAttention(12, 4, 2, head_dim=4, rope_base=100.0, sliding_window=3),
}


@pytest.mark.parametrize("block_size", [1, 3, 4, 16])
@pytest.mark.parametrize("make_layer", LAYERS.values(), ids=LAYERS.keys())
def test_layer_with_paged_cache_equals_layer_with_kv_cache(make_layer, block_size):
    """layer(x, cache=paged, seq_id=i) gives each sequence the outputs and weights of its own KVCache, with
    prefill chunks and decode steps of 3 sequences interleaved (RoPE continues from len(sequence))."""
    torch.manual_seed(0)
    layer = make_layer().double().eval()
    tokens = {i: randn(1, 14, 12, seed=10 + i) for i in range(3)}  # (1, L, hidden) per sequence
    paged, contiguous = ac.PagedKVCache(block_size, num_blocks=48), {i: ac.KVCache() for i in range(3)}
    outputs = {i: [] for i in range(3)}
    for seq_id, n in SCHEDULE:
        start = len(contiguous[seq_id])
        x = tokens[seq_id][:, start : start + n]  # (1, n, hidden)
        paged_out, paged_weights = layer(x, is_causal=True, cache=paged, seq_id=seq_id)
        ref_out, ref_weights = layer(x, is_causal=True, cache=contiguous[seq_id])
        torch.testing.assert_close(paged_out, ref_out, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(paged_weights, ref_weights, rtol=1e-12, atol=1e-12)
        outputs[seq_id].append(paged_out)
    for seq_id, chunks in outputs.items():  # and each sequence's cached decode equals one causal pass
        length = len(paged.sequence(seq_id))
        full_out, _ = layer(tokens[seq_id][:, :length], is_causal=True)  # (1, T, hidden)
        torch.testing.assert_close(torch.cat(chunks, dim=1), full_out, rtol=1e-12, atol=1e-12)


def test_layer_rejects_a_batch_for_one_seq_id():
    layer = ac.GroupedQueryAttention(12, 4, 2)
    with pytest.raises(ValueError, match=r"one sequence per call \(batch size 1\), got keys \(2, 2, 3, 3\)"):
        layer(randn(2, 3, 12, dtype=torch.float32), cache=ac.PagedKVCache(4, 8), seq_id=0)


def test_gradients_through_forked_sequences_equal_full_passes():
    """The pool is written in place, but each gather is a fresh copy, so autograd sees every token once:
    backward through a prompt, a fork and two continuations gives the gradients of two full causal passes."""
    torch.manual_seed(0)
    layer = ac.GroupedQueryAttention(12, 4, 2, head_dim=4, rope_base=10000.0).double()
    prompt, branch_a, branch_b = randn(1, 5, 12, seed=1), randn(1, 3, 12, seed=2), randn(1, 4, 12, seed=3)
    full_loss = sum(
        layer(torch.cat([prompt, branch], dim=1), is_causal=True)[0][:, 5:].square().sum()
        for branch in (branch_a, branch_b)
    )
    full_grads = torch.autograd.grad(full_loss, list(layer.parameters()))
    paged = ac.PagedKVCache(block_size=2, num_blocks=12)
    layer(prompt, is_causal=True, cache=paged, seq_id="a")
    paged.fork("a", "b")  # the prompt's last block (1 of 2 slots used) is shared: the first append copies it
    out_a = torch.cat([layer(branch_a[:, t : t + 1], is_causal=True, cache=paged, seq_id="a")[0] for t in range(3)], 1)
    out_b = torch.cat(
        [
            layer(branch_b[:, :2], is_causal=True, cache=paged, seq_id="b")[0],
            layer(branch_b[:, 2:], is_causal=True, cache=paged, seq_id="b")[0],
        ],
        1,
    )
    paged_grads = torch.autograd.grad(out_a.square().sum() + out_b.square().sum(), list(layer.parameters()))
    for paged_grad, full_grad in zip(paged_grads, full_grads, strict=True):
        torch.testing.assert_close(paged_grad, full_grad, rtol=1e-12, atol=1e-12)


def test_blocks_are_handed_out_lowest_first_and_interleave():
    """Block tables are the blocks taken in order; sequences growing in turn interleave in the pool."""
    paged = ac.PagedKVCache(block_size=2, num_blocks=8)
    paged.sequence("a").update(*kv(3, seed=0))  # blocks 0, 1
    paged.sequence("b").update(*kv(1, seed=1))  # block 2
    paged.sequence("a").update(*kv(2, seed=2))  # fills block 1, then block 3
    assert paged.block_table("a") == [0, 1, 3] and paged.block_table("b") == [2]
    assert 4 * block_bytes(2) == 1024  # 4 blocks x 2 kv heads x 2 slots x (3 + 5) features x 8 bytes
    expected = "PagedKVCache(block_size=2, blocks_used=4/8, tokens={'a': 5, 'b': 1}, nbytes=1024, dtype=torch.float64)"
    assert repr(paged) == expected
    assert repr(paged.sequence("b")) == "PagedSequence(seq_id='b', tokens=1, blocks=[2])"


# --------------------------------------------------------------------------- prefix sharing


def test_fork_shares_the_prompt_and_copies_on_write():
    """A prompt of 10 tokens in blocks of 4 (the last one half full), forked: the child shares all 3 blocks.
    Each branch then continues differently; both equal separate contiguous caches, the shared partly filled
    block is copied by the first writer, and the parent's blocks are never modified by the child."""
    paged = ac.PagedKVCache(block_size=4, num_blocks=16)
    prompt = kv(10, seed=0)
    paged.sequence(0).update(*prompt)
    child = paged.fork(0, 1)
    assert paged.block_table(1) == paged.block_table(0) == [0, 1, 2] and paged.num_free_blocks == 13
    assert len(child) == 10 and torch.equal(child.keys, prompt[0])
    parent_blocks = paged._key_pool[[0, 1, 2]].clone(), paged._value_pool[[0, 1, 2]].clone()

    child_tokens, parent_tokens = kv(7, seed=1), kv(2, seed=2)
    child_k, child_v = child.update(*child_tokens)  # copies block 2 (shared, 2 of 4 slots used) before writing
    assert paged.block_table(0) == [0, 1, 2] and paged.block_table(1) == [0, 1, 3, 4, 5]
    assert torch.equal(paged._key_pool[[0, 1, 2]], parent_blocks[0])  # the child wrote into its own copy
    assert torch.equal(paged._value_pool[[0, 1, 2]], parent_blocks[1])
    parent_k, parent_v = paged.sequence(0).update(*parent_tokens)  # block 2 is its own again: no copy
    assert paged.block_table(0) == [0, 1, 2]

    for (got_k, got_v), continuation in ((child_k, child_v), child_tokens), ((parent_k, parent_v), parent_tokens):
        reference = ac.KVCache()
        reference.update(*prompt)
        ref_k, ref_v = reference.update(*continuation)
        assert torch.equal(got_k, ref_k) and torch.equal(got_v, ref_v)
    # Memory: 6 blocks for 17 + 12 tokens; two separate caches would need 5 + 3 = 8 (the prompt's 2 full blocks twice).
    separate = math.ceil(17 / 4) + math.ceil(12 / 4)
    assert paged.nbytes == 6 * block_bytes(4) and paged.nbytes < separate * block_bytes(4) < 2 * paged.nbytes
    assert (separate - 6) * block_bytes(4) == 2 * block_bytes(4)  # bytes saved: the shared full blocks


def test_many_branches_share_a_long_prompt():
    """Beam-search-like: 4 branches of a 32-token prompt (blocks of 8, all full) each decode 3 tokens.
    Shared: 4 prompt blocks + 4 own blocks = 8, against 4 x 5 = 20 separately; every branch is exact."""
    paged = ac.PagedKVCache(block_size=8, num_blocks=20)
    prompt = kv(32, seed=0)
    paged.sequence("prompt").update(*prompt)
    for branch in range(4):
        paged.fork("prompt", branch)
    paged.free("prompt")  # the branches still hold the prompt's blocks
    assert paged.num_free_blocks == 16
    for step in range(3):
        for branch in range(4):
            token = kv(1, seed=100 * branch + step)
            all_k, _ = paged.sequence(branch).update(*token)
            assert torch.equal(all_k[:, :, :32], prompt[0]) and torch.equal(all_k[:, :, -1:], token[0])
    assert paged.nbytes == 8 * block_bytes(8) and 20 * block_bytes(8) / paged.nbytes == 2.5


def test_free_of_a_shared_block_keeps_it_for_the_other_sequence():
    """Freeing the parent releases only blocks nobody else holds; the child reads the prompt unchanged."""
    paged = ac.PagedKVCache(block_size=3, num_blocks=6)
    prompt = kv(4, seed=0)
    paged.sequence(0).update(*prompt)
    paged.fork(0, 1)
    paged.sequence(0).update(*kv(3, seed=1))  # parent: copy of block 1 (shared, partly filled) + a new block
    assert paged.block_table(0) == [0, 2, 3] and paged.block_table(1) == [0, 1]
    paged.free(0)
    assert paged.num_free_blocks == 4 and paged.block_table(1) == [0, 1]
    assert torch.equal(paged.sequence(1).keys, prompt[0]) and torch.equal(paged.sequence(1).values, prompt[1])


# --------------------------------------------------------------------------- eviction and reuse


def test_freed_blocks_are_reused_without_stale_data():
    """A freed sequence's blocks go back to the pool; filled with NaN (garbage nobody may read), they are
    reused by a new sequence whose keys/values are exact and NaN-free. Slots past a truncation likewise."""
    paged = ac.PagedKVCache(block_size=4, num_blocks=4)
    paged.sequence(0).update(*kv(11, seed=0))
    freed = paged.block_table(0)
    paged.free(0)
    assert paged.num_free_blocks == 4 and paged.nbytes == 0 and paged.seq_ids == []
    paged._key_pool[freed] = float("nan")
    paged._value_pool[freed] = float("nan")

    reference, handle = ac.KVCache(), paged.sequence(1)
    for step, n in enumerate([6, 1, 1]):
        k, v = kv(n, seed=10 + step)
        got_k, got_v = handle.update(k, v)
        ref_k, ref_v = reference.update(k, v)
        assert torch.equal(got_k, ref_k) and torch.equal(got_v, ref_v)
    assert sorted(paged.block_table(1)) == sorted(freed[:2])  # the same physical blocks, reused

    paged.truncate(1, 5)  # speculative-decoding rollback: 3 draft tokens rejected, slots 5..7 now stale
    assert paged.block_table(1) == freed[:2] and paged.num_free_blocks == 2
    paged._key_pool[freed[1], :, 1:] = float("nan")
    paged._value_pool[freed[1], :, 1:] = float("nan")
    reference.truncate(5)
    k, v = kv(4, seed=20)
    got_k, got_v = handle.update(k, v)
    ref_k, ref_v = reference.update(k, v)
    assert torch.equal(got_k, ref_k) and torch.equal(got_v, ref_v) and not got_v.isnan().any()
    handle.truncate(0)  # the handle's truncate, as KVCache.truncate
    assert paged.num_free_blocks == 4 and len(handle) == 0 and handle.keys.shape == (1, HEADS, 0, DIM)


# --------------------------------------------------------------------------- out of blocks


def test_out_of_blocks_raises_and_changes_nothing():
    """An append that needs more blocks than are free raises before writing anything; freeing makes room."""
    paged = ac.PagedKVCache(block_size=2, num_blocks=3)
    paged.sequence(0).update(*kv(4, seed=0))  # blocks 0, 1
    paged.sequence(1).update(*kv(1, seed=1))  # block 2, half full
    before = state(paged)
    message = (
        r"out of blocks: appending 4 tokens to sequence 1 \(now 1 tokens\) needs 2 free block\(s\), 0 of 3 are free"
    )
    with pytest.raises(OutOfBlocksError, match=message + r".*paged.free\(seq_id\)"):
        paged.sequence(1).update(*kv(4, seed=2))
    assert_same_state(before, state(paged))
    paged.free(0)
    k, v = kv(4, seed=2)
    all_k, _ = paged.sequence(1).update(k, v)
    assert torch.equal(all_k[:, :, 1:], k) and paged.block_table(1) == [2, 0, 1]


def test_out_of_blocks_counts_the_copy_on_write_block():
    """Appending into a shared, half-full last block needs one block for the copy even if the token fits."""
    paged = ac.PagedKVCache(block_size=4, num_blocks=1)
    paged.sequence(0).update(*kv(2, seed=0))
    paged.fork(0, 1)
    before = state(paged)
    with pytest.raises(
        OutOfBlocksError, match=r"needs 1 free block\(s\) \(1 to copy a shared block\), 0 of 1 are free"
    ):
        paged.sequence(1).update(*kv(1, seed=1))
    assert_same_state(before, state(paged))
    paged.free(0)  # the block is the child's alone now: it appends in place
    paged.sequence(1).update(*kv(2, seed=1))
    assert paged.block_table(1) == [0] and len(paged.sequence(1)) == 4


# --------------------------------------------------------------------------- hypothesis: random operations

SEQ_IDS = st.integers(0, 2)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), SEQ_IDS, st.integers(0, 5)),
        st.tuples(st.just("append"), SEQ_IDS, st.just(1)),  # decode steps: often into a shared, part-full block
        st.tuples(st.just("fork"), SEQ_IDS, SEQ_IDS),
        st.tuples(st.just("fork"), SEQ_IDS, SEQ_IDS),  # twice: sharing is what can go wrong
        st.tuples(st.just("free"), SEQ_IDS, st.just(0)),
        st.tuples(st.just("truncate"), SEQ_IDS, st.integers(0, 6)),
    ),
    max_size=30,
)


@given(block_size=st.integers(1, 4), num_blocks=st.integers(1, 8), ops=operations)
def test_property_random_operations_equal_independent_tensors(block_size, num_blocks, ops):
    """Any interleaving of append / fork / free / truncate over 3 sequence ids in a small pool: every live
    sequence reads exactly the tokens a reference of independent contiguous tensors holds; reference counts
    equal the tables' holdings; free blocks are exactly the unreferenced ones; out-of-blocks changes nothing."""
    paged = ac.PagedKVCache(block_size, num_blocks)
    reference: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # seq_id -> keys (1, H, T, D), values
    counter = 0
    for op, seq_id, arg in ops:
        if op == "append":
            # Distinct values per token: any token read from the wrong block or slot shows up.
            k = torch.arange(counter, counter + HEADS * arg * DIM, dtype=F64).view(1, HEADS, arg, DIM)
            v = -torch.arange(counter, counter + HEADS * arg * VDIM, dtype=F64).view(1, HEADS, arg, VDIM)
            counter += HEADS * arg * VDIM
            handle = paged.sequence(seq_id)  # created empty on first use, as the layer does
            old_k, old_v = reference.setdefault(seq_id, (k[:, :, :0], v[:, :, :0]))
            before = state(paged)
            try:
                handle.update(k, v)
            except OutOfBlocksError:
                event("an append ran out of blocks")
                assert_same_state(before, state(paged))
                continue
            reference[seq_id] = (torch.cat([old_k, k], dim=2), torch.cat([old_v, v], dim=2))
            old_table = before[0][seq_id]
            if old_table and paged.block_table(seq_id)[len(old_table) - 1] != old_table[-1]:
                event("an append copied a shared block")
        elif op == "fork" and seq_id in reference and arg not in reference:
            paged.fork(seq_id, arg)
            reference[arg] = reference[seq_id]
        elif op == "free" and seq_id in reference:
            paged.free(seq_id)
            del reference[seq_id]
        elif op == "truncate" and seq_id in reference:
            length = min(arg, reference[seq_id][0].shape[2])
            paged.truncate(seq_id, length)
            reference[seq_id] = tuple(t[:, :, :length] for t in reference[seq_id])
        assert sorted(paged.seq_ids) == sorted(reference)
        holders = [0] * num_blocks
        for table in (paged.block_table(i) for i in paged.seq_ids):
            for block in table:
                holders[block] += 1
        assert holders == paged._ref_counts
        assert sorted(paged._free) == [b for b in range(num_blocks) if holders[b] == 0]
        for i, (ref_k, ref_v) in reference.items():
            assert len(paged.sequence(i)) == ref_k.shape[2]
            assert len(paged.block_table(i)) == math.ceil(ref_k.shape[2] / block_size)  # no block kept for nothing
            if paged._key_pool is not None:
                assert torch.equal(paged.sequence(i).keys, ref_k) and torch.equal(paged.sequence(i).values, ref_v)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("name", ["block_size", "num_blocks"])
@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "4"])
def test_bad_sizes_raise(name, bad):
    sizes = {"block_size": 4, "num_blocks": 8, name: bad}
    with pytest.raises(ValueError, match=rf"{name} must be an int >= 1, got {bad!r}"):
        ac.PagedKVCache(**sizes)


def test_unknown_or_freed_seq_id_raises():
    """free / fork / block_table / truncate of a sequence that does not exist, or a handle used after free."""
    paged = ac.PagedKVCache(2, 4)
    handle = paged.sequence(0)
    handle.update(*kv(1, seed=0))
    paged.free(0)
    for call in (lambda: paged.free(0), lambda: paged.block_table(7), lambda: paged.fork(7, 8)):
        with pytest.raises(ValueError, match=r"no sequence \d in this PagedKVCache \(live: \[\]\).*paged.sequence"):
            call()
    with pytest.raises(ValueError, match="no sequence 0"):
        paged.truncate(0, 0)
    with pytest.raises(ValueError, match="no sequence 0"):
        len(handle)
    with pytest.raises(ValueError, match="no sequence 0"):
        handle.update(*kv(1, seed=1))
    with pytest.raises(TypeError, match=r"seq_id must be an int or a str, got 1.5 of type float"):
        paged.sequence(1.5)
    paged.sequence(1)
    with pytest.raises(ValueError, match="sequence 1 already exists; free it first"):
        paged.fork(1, 1)


def test_batch_of_several_sequences_raises():
    """One seq_id per call: keys with batch 2 raise, naming the fix."""
    with pytest.raises(
        ValueError, match=r"batch size 1\), got keys \(2, 2, 1, 3\).*x\[i : i \+ 1\], cache=paged, seq_id=i"
    ):
        ac.PagedKVCache(2, 4).sequence(0).update(randn(2, 2, 1, 3), randn(2, 2, 1, 3))


@pytest.mark.parametrize(
    ("keys", "values", "error", "match"),
    [
        ([[1.0]], kv(1, 0)[1], TypeError, r"takes tensors, got keys of type list"),
        (randn(1, 2, 1), randn(1, 2, 1), ValueError, r"matching first three dims, got keys \(1, 2, 1\)"),
        (
            randn(1, 3, 1, DIM),
            randn(1, 3, 1, VDIM),
            ValueError,
            r"holds keys \(1, 2, 'n', 3\); got keys \(1, 3, 1, 3\)",
        ),
        (randn(1, 2, 1, 4), kv(1, 0)[1], ValueError, r"holds keys \(1, 2, 'n', 3\); got keys \(1, 2, 1, 4\)"),
        (kv(1, 0)[0], randn(1, 2, 1, 4), ValueError, r"holds values \(1, 2, 'n', 5\); got values \(1, 2, 1, 4\)"),
        (
            kv(1, 0)[0].float(),
            kv(1, 0)[1],
            ValueError,
            r"holds keys of torch.float64 on cpu; got keys of torch.float32",
        ),
        (
            kv(1, 0)[0],
            torch.empty(1, 2, 1, VDIM, dtype=F64, device="meta"),
            ValueError,
            r"got values of torch.float64 on meta",
        ),
    ],
    ids=["list", "3d", "kv-heads", "key-dim", "value-dim", "dtype", "device"],
)
def test_mismatched_appends_raise_and_change_nothing(keys, values, error, match):
    paged = ac.PagedKVCache(2, 4)
    paged.sequence(0).update(*kv(3, seed=0))
    before = state(paged)
    with pytest.raises(error, match=match):
        paged.sequence(0).update(keys, values)
    assert_same_state(before, state(paged))


def test_bad_truncate_and_empty_reads_raise():
    paged = ac.PagedKVCache(2, 4)
    with pytest.raises(ValueError, match=r"the cache is empty: run the layer with cache=..., seq_id=..."):
        _ = paged.sequence(0).keys
    paged.sequence(0).update(*kv(3, seed=0))
    for bad in (-1, 4, 2.0, True):
        with pytest.raises(ValueError, match=r"length must be an int in \[0, 3\] \(tokens of sequence 0\)"):
            paged.truncate(0, bad)


def test_one_pool_one_layer():
    """Binding through any sequence binds the pool: a second layer raises like KVCache.bind."""
    first, second = ac.MultiHeadAttention(8, 2), ac.MultiQueryAttention(8, 2)
    paged = ac.PagedKVCache(2, 4)
    paged.sequence(0).bind(first)
    paged.sequence(1).bind(first)
    message = r"another layer \(first used by a MultiHeadAttention, now called by a MultiQueryAttention\); give every"
    with pytest.raises(ValueError, match=message):
        paged.sequence(1).bind(second)
