"""The round-3 bad-input table (issue #32 §3, D3-D5 and D7), for the block allocator, the paged cache, sparse
attention, ``flex_variants.reference`` and the gated delta rule: inputs that used to be accepted silently, or refused
with an internal error, now raise a typed error that names the value and the fix; legal empty inputs work.

D1 (the chunked rule's gates) is in tests/test_core_linear_round3.py; the serving ``BlockManager`` has its own tests.
One file past 300 lines: the table is read as one list, row by row against the review's.
"""

from __future__ import annotations

import math

import pytest
import torch
from reference import randn

import attn_core as ac
from attn_core.caches.block_allocator import BlockAllocator, OutOfBlocksError
from attn_core.variants import flex_variants as fv


def allocator_after(*steps: str) -> BlockAllocator:
    """A 3-block allocator after ``steps``: "a" allocates, "r0" releases block 0."""
    pool = BlockAllocator(3)
    for step in steps:
        pool.allocate() if step == "a" else pool.release(int(step[1:]))
    return pool


def full_allocator() -> BlockAllocator:
    pool = BlockAllocator(2)
    pool.allocate(), pool.allocate()
    return pool


def qkv(batch=1, heads=2, q_len=3, k_len=3, dim=4):
    return (
        randn(batch, heads, q_len, dim, seed=1),
        randn(batch, heads, k_len, dim, seed=2),
        randn(batch, heads, k_len, dim, seed=3),
    )  # (B, H, L, D) each


def delta_inputs(beta_value: float = 0.5):
    q, k, v = qkv()
    g = torch.zeros(1, 2, 3, dtype=q.dtype)  # (B, H, L)
    return q, k, v, g, torch.full_like(g, beta_value)


CASES = {
    # D3: the block allocator (the paged cache's free list and reference counts)
    "allocator double release": (
        lambda: allocator_after("a", "r0", "r0"),
        ValueError,
        r"block 0 is not held by any table: it was released already \(double release\)",
    ),
    "allocator release of a never allocated block": (
        lambda: allocator_after("r1"),
        ValueError,
        r"block 1 is not held by any table",
    ),
    "allocator release(-1)": (
        lambda: BlockAllocator(3).release(-1),
        ValueError,
        r"cannot release block -1: block ids are ints in \[0, 3\)",
    ),
    "allocator release(3) past the pool": (
        lambda: BlockAllocator(3).release(3),
        ValueError,
        r"cannot release block 3: block ids are ints in \[0, 3\)",
    ),
    "allocator release(0.0)": (lambda: allocator_after("a").release(0.0), ValueError, r"cannot release block 0.0"),
    "allocator retain(7) past the pool": (
        lambda: allocator_after("a").retain(7),
        ValueError,
        r"cannot retain block 7: block ids are ints in \[0, 3\)",
    ),
    "allocator retain(-1)": (lambda: allocator_after("a", "a", "a").retain(-1), ValueError, r"cannot retain block -1"),
    "allocator allocate on an empty pool": (
        lambda: full_allocator().allocate(),
        OutOfBlocksError,
        r"all 2 blocks are held: none is free.*more num_blocks",
    ),
    "allocator num_blocks=-1": (
        lambda: BlockAllocator(-1),
        ValueError,
        r"num_blocks must be an int >= 1 .*got -1",
    ),
    "allocator num_blocks=2.5": (lambda: BlockAllocator(2.5), ValueError, r"num_blocks must be an int >= 1.*got 2.5"),
    "allocator num_blocks=True": (lambda: BlockAllocator(True), ValueError, r"num_blocks must be an int >= 1"),
    # D3 through the paged cache's public API (refused before too; kept as rows)
    "paged free twice": (
        lambda: [paged := ac.PagedKVCache(2, 3), paged.sequence(0), paged.free(0), paged.free(0)],
        ValueError,
        r"no sequence 0 in this PagedKVCache",
    ),
    "paged attach block -1": (
        lambda: ac.PagedKVCache(2, 3).attach(0, [-1], 2),
        ValueError,
        r"blocks must be distinct block ids in \[0, 3\)",
    ),
    # D5: flex_variants.reference
    "reference sinks of the wrong count": (
        lambda: fv.reference(*qkv(), score_mod=fv.softcap(5.0), sinks=torch.zeros(3, dtype=torch.float64)),
        ValueError,
        r"sinks must be a tensor \(H,\) = \(2,\), one learned logit per head; got \(3,\)",
    ),
    "reference sinks of the wrong count, no score_mod": (
        lambda: fv.reference(*qkv(), sinks=torch.zeros(1, 3, dtype=torch.float64)),
        ValueError,
        r"sinks must be a tensor \(H,\) = \(2,\)",
    ),
    "flex_attention_with_sinks sinks of the wrong count": (
        lambda: fv.flex_attention_with_sinks(*qkv(), torch.zeros(3, dtype=torch.float64)),
        ValueError,
        r"sinks must be a tensor \(H,\), one learned logit per head of q \(B, H, Lq, D\); got \(3,\)",
    ),
    "reference ALiBi slopes for fewer heads": (
        lambda: fv.reference(*qkv(heads=4), score_mod=fv.alibi(fv.alibi_slopes(2))),
        ValueError,
        r"alibi\(slopes\) has one slope per head: it was built for 2 heads, but q has H=4",
    ),
    "alibi slopes not a tensor": (
        lambda: fv.alibi([0.5, 0.25]),
        ValueError,
        r"slopes must be a floating-point tensor \(H,\).*got list",
    ),
    "reference doc_ids of 4 tokens on 6": (
        lambda: fv.reference(*qkv(q_len=6, k_len=6), mask_mod=fv.document(torch.tensor([0, 0, 1, 1]))),
        ValueError,
        r"document\(doc_ids\) has one document id per token: it was built for 4 tokens, but q has Lq=6 and k has "
        r"Lk=6",
    ),
    "reference doc_ids of 6 tokens on 4, inside and_masks": (
        lambda: fv.reference(
            *qkv(q_len=4, k_len=4), mask_mod=fv.and_masks(fv.causal, fv.document(torch.tensor([0, 0, 1, 1, 2, 2])))
        ),
        ValueError,
        r"built for 6 tokens, but q has Lq=4",
    ),
    "reference doc_ids rows for another batch": (
        lambda: fv.reference(*qkv(batch=3), mask_mod=fv.document(torch.tensor([[0, 0, 1], [0, 1, 1]]))),
        ValueError,
        r"one row of doc_ids per sequence: it has 2 rows, but q has B=3",
    ),
    "reference 3-D q": (
        lambda: fv.reference(torch.zeros(2, 3, 4), *qkv()[1:], score_mod=fv.softcap(5.0)),
        ValueError,
        r"q must be a 4-D tensor \(B, H, L, D\), got \(2, 3, 4\)",
    ),
    "reference k of other heads": (
        lambda: fv.reference(*qkv()[:1], *qkv(heads=1)[1:], score_mod=fv.softcap(5.0)),
        ValueError,
        r"must share B and H",
    ),
    # D7: the gated delta rule's arguments
    "gated_delta_rule scale='x'": (
        lambda: ac.gated_delta_rule(*delta_inputs(), scale="x"),
        TypeError,
        r"scale must be a number that multiplies Q Kᵀ.*got 'x' of type str",
    ),
    "gated_delta_rule beta=1.5": (
        lambda: ac.gated_delta_rule(*delta_inputs(1.5)),
        ValueError,
        r"beta is the write strength.*Got beta from 1.5 to 1.5",
    ),
    "gated_delta_rule beta=5": (
        lambda: ac.gated_delta_rule(*delta_inputs(5.0)),
        ValueError,
        r"beta is the write strength.*Got beta from 5 to 5",
    ),
    "gated_delta_rule beta=-0.5": (
        lambda: ac.gated_delta_rule(*delta_inputs(-0.5), chunk_size=2),
        ValueError,
        r"a learning rate in \[0, 1\].*Got beta from -0.5 to -0.5",
    ),
    "linear_attention(q, k, v, g, beta)": (
        lambda: ac.linear_attention(*delta_inputs()),
        TypeError,
        r"linear_attention\(q, k, v, g=None\) takes no beta",
    ),
    "GatedDeltaNet integer x": (
        lambda: ac.GatedDeltaNet(8, num_k_heads=1, num_v_heads=1, head_k_dim=4, head_v_dim=4)(
            torch.ones(1, 2, 8, dtype=torch.long)
        ),
        TypeError,
        r"x must be a floating-point tensor",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_raises_a_clear_error(case):
    call, error, match = CASES[case]
    with pytest.raises(error, match=match):
        call()


def test_out_of_blocks_is_the_allocators_error_type():
    """Code that catches OutOfBlocksError (a RuntimeError, like running out of GPU memory) sees the empty pool."""
    assert issubclass(OutOfBlocksError, RuntimeError)
    pool = full_allocator()
    with pytest.raises(RuntimeError):
        pool.allocate()
    assert pool.ref_counts == [1, 1] and pool.free == []  # the refused call changed nothing


def test_a_refused_release_changes_nothing():
    """The double release used to leave a count of -1 with the block in the free heap: ``retain`` then accepted
    it and the next ``allocate`` handed it to a second table."""
    pool = allocator_after("a", "a", "r0")  # block 0 free, block 1 held
    with pytest.raises(ValueError):
        pool.release(0)
    assert pool.ref_counts == [0, 1, 0] and sorted(pool.free) == [0, 2]
    with pytest.raises(ValueError, match=r"block 0 is free"):
        pool.retain(0)
    assert pool.allocate() == 0 and pool.allocate() == 2  # each block handed out once
    with pytest.raises(OutOfBlocksError):
        pool.allocate()


def test_paged_cache_and_allocator_legal_neighbours():
    """Sharing, then releasing every holder once, frees the block; a freed block can be allocated again."""
    pool = BlockAllocator(1)
    block = pool.allocate()
    pool.retain(block)
    pool.release(block)
    pool.release(block)
    assert pool.free == [0] and pool.allocate() == 0
    paged = ac.PagedKVCache(2, 2)
    seq = paged.sequence("a")
    seq.update(torch.zeros(1, 1, 3, 4), torch.zeros(1, 1, 3, 4))  # 2 blocks
    paged.fork("a", "b")
    paged.free("a")
    paged.free("b")
    assert paged.num_free_blocks == 2


# ---------------------------------------------------------------- D4: legal empty inputs
@pytest.mark.parametrize(("q_len", "k_len", "picks"), [(3, 0, 2), (3, 0, 0), (0, 4, 2), (0, 0, 0), (3, 4, 0)])
def test_sparse_attention_empty_inputs_are_legal(q_len, k_len, picks):
    """Lk = 0 (every pick -1) used to raise IndexError from the gather; a query with nothing listed gets zeros."""
    q, k, v = randn(2, 4, q_len, 8, seed=0), randn(2, 2, k_len, 8, seed=1), randn(2, 2, k_len, 6, seed=2)
    indices = torch.full((2, q_len, picks), -1, dtype=torch.long)  # (B, Lq, n): nothing listed
    out, weights = ac.sparse_attention(q, k, v, indices)
    assert out.shape == (2, 4, q_len, 6) and weights.shape == (2, 4, q_len, picks)
    assert out.dtype == weights.dtype == q.dtype
    assert not out.any() and not weights.any()
    nothing_listed = torch.zeros(q_len, k_len, dtype=torch.bool)  # (Lq, Lk): the dense form of these indices
    expected, _ = ac.scaled_dot_product_attention(q, k, v, nothing_listed)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)  # sdpa with every key masked: zeros too


# ---------------------------------------------------------------- D5: NaN is not hidden; legal doc_ids stay legal
def test_reference_propagates_nan_inputs_as_sdpa_does():
    q, k, v = qkv()
    q[0, 1, 2, 0] = math.nan
    out, weights = fv.reference(q, k, v, score_mod=fv.softcap(5.0), mask_mod=fv.causal)
    expected, _ = ac.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out[0, 1, 2].isnan().all() and expected[0, 1, 2].isnan().all()  # was 0.0: NaN hidden by nan_to_num
    assert weights[0, 1, 2].isnan().all()
    finite = ~out.isnan()
    torch.testing.assert_close(
        out[finite], fv.reference(q.nan_to_num(), k, v, score_mod=fv.softcap(5.0), mask_mod=fv.causal)[0][finite]
    )


def test_reference_fully_masked_rows_still_give_zeros():
    """The one case the old nan_to_num was for: a row whose every logit is -inf (no sink) gives zeros."""
    q, k, v = qkv()
    nobody = fv.and_masks(fv.causal, lambda b, h, q_idx, kv_idx: kv_idx > q_idx)  # every key hidden
    out, weights = fv.reference(q, k, v, score_mod=fv.softcap(5.0), mask_mod=nobody)
    assert not out.any() and not weights.any()
    sinks = torch.zeros(2, dtype=torch.float64)  # (H,): a finite sink logit: not blind, all weight on the sink
    out, weights = fv.reference(q, k, v, score_mod=fv.softcap(5.0), mask_mod=nobody, sinks=sinks)
    assert not out.any() and not weights.any()


def test_reference_document_with_matching_doc_ids_is_legal():
    q, k, v = qkv(batch=2, q_len=4, k_len=4)
    doc_ids = torch.tensor([[0, 0, 1, 1], [0, 1, 1, 1]])  # (B, L)
    same = doc_ids[:, :, None] == doc_ids[:, None, :]  # (B, L, L)
    out, _ = fv.reference(q, k, v, score_mod=fv.softcap(50.0), mask_mod=fv.and_masks(fv.causal, fv.document(doc_ids)))
    capped = fv.reference(q, k, v, score_mod=fv.softcap(50.0))[0]
    assert out.shape == capped.shape
    expected_mask = same[:, None] & torch.ones(4, 4, dtype=torch.bool).tril()  # (B, 1, L, L)
    scores = 50.0 * torch.tanh(q @ k.transpose(-2, -1) / 2.0 / 50.0)  # (B, H, L, L): scale 1/sqrt(4)
    expected = torch.softmax(scores.masked_fill(~expected_mask, -math.inf), dim=-1) @ v  # (B, H, L, D)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


def indexed_mla() -> ac.MultiHeadLatentAttention:
    torch.manual_seed(0)
    return ac.MultiHeadLatentAttention(
        8, 2, kv_lora_rank=4, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2, q_lora_rank=4, index_topk=2,
        index_n_heads=2, index_head_dim=4,
    )  # fmt: skip


EMPTY = {  # legal empty inputs elsewhere in these modules: each gives the empty (or all-zero) answer
    "gated_delta_rule L=0 chunked": (
        lambda: ac.gated_delta_rule(
            *(randn(1, 2, 0, 4, seed=s) for s in range(3)), -torch.ones(1, 2, 0), torch.ones(1, 2, 0) / 2, chunk_size=4
        )[0],  # fmt: skip
        (1, 2, 0, 4),
    ),
    "linear_attention B=0": (
        lambda: ac.linear_attention(*(randn(0, 2, 3, 4, seed=s) for s in range(3)))[0],
        (0, 2, 3, 4),
    ),
    "MLA with the indexer, L=0": (lambda: indexed_mla()(torch.zeros(1, 0, 8))[0], (1, 0, 8)),
    "MLA with the indexer, L=0 after a cached prefix": (
        lambda: (
            [mla := indexed_mla(), cache := ac.KVCache(), mla(torch.ones(1, 3, 8), cache=cache)]
            and mla(torch.zeros(1, 0, 8), cache=cache)[1]
        ),
        (1, 2, 0, 3),
    ),
    "DifferentialAttention L=0 with a cache": (
        lambda: ac.DifferentialAttention(8, 2, 2, rope_base=1e4)(torch.zeros(1, 0, 8), cache=ac.KVCache())[0],
        (1, 0, 8),
    ),
    "tiled_attention Lk=0": (lambda: ac.tiled_attention(*qkv(k_len=0)), (1, 2, 3, 4)),
    "reference Lk=0 with a score_mod": (
        lambda: fv.reference(*qkv(k_len=0), score_mod=fv.softcap(5.0))[0],
        (1, 2, 3, 4),
    ),
    "sparse_attention B=0": (
        lambda: ac.sparse_attention(*qkv(batch=0), torch.zeros(0, 3, 1, dtype=torch.long))[0],
        (0, 2, 3, 4),
    ),
}


@pytest.mark.parametrize("case", EMPTY)
def test_legal_empty_inputs(case):
    call, shape = EMPTY[case]
    out = call()
    assert tuple(out.shape) == shape and not out.isnan().any()
