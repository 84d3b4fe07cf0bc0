"""What users of a serving engine expect (issue #32 §2), on Gemma 3 in float64 (a tiny random one by default, the
real 270M under ``-m slow``: tests/serving_models.py), each against ``lm.generate``:
a step interrupted mid-way (a layer raising, KeyboardInterrupt) leaves no trace; a finished request's blocks are
released tail first so a shared head survives one eviction; stop tokens; per-request sampling equal to
``generate`` with the request's seed whatever the batch; abort; numpy integers; results handed out once; and the
sliding-window layers keeping only their window (the review's shrunken-window workloads)."""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest
import torch
from serving_models import MODELS, serving_lm

import attn_core as ac
from attn_core.serving import ServingEngine
from attn_core.serving.block_manager import NO_BLOCK
from attn_core.serving.kv_groups import kv_cache_bytes

SYSTEM = [2, 818, 5279, 529, 506, 2195, 236764, 1217, 2173, 236787, 506, 3710, 563]
REQUESTS = [
    (SYSTEM + [1437, 3165], 6),
    (SYSTEM + [9894, 236764, 496, 1722, 1217, 2669], 5),
    ([2, 651, 6037, 529, 9405], 7),
    ([2], 4),
]


@pytest.fixture(scope="module", params=MODELS)
def lm64(request):
    return serving_lm(request.param)


def generate(lm, prompt, n, **sampling) -> list[int]:
    return lm.generate(torch.tensor([prompt]), n, **sampling)[0, len(prompt) :].tolist()


@pytest.fixture(scope="module")
def expected(lm64):
    return [generate(lm64, p, n) for p, n in REQUESTS]


def lengths(engine, rid) -> list[int]:
    return [cache._lengths.get(rid) for cache in engine.caches]


# ---------------------------------------------------------------------------------------------- faults
class RaiseOnce:
    """Patch ``lm.layers[layer].forward`` to raise ``error`` on the call number ``at`` (0 = the next one)."""

    def __init__(self, lm, layer: int, error: BaseException, at: int = 0):
        self.block, self.error, self.at = lm.layers[layer], error, at
        self.original = self.block.forward

    def __enter__(self):
        def forward(*args, **kwargs):
            if self.at == 0:
                self.at = -1
                raise self.error
            self.at -= 1
            return self.original(*args, **kwargs)

        self.block.forward = forward
        return self

    def __exit__(self, *exc):
        del self.block.forward  # back to the class's method


@pytest.mark.parametrize(
    ("layer", "error", "steps_before", "at"),
    [
        (3, KeyboardInterrupt(), 1, 0),  # the review's reproduction (a middle layer): a decode step, the stop button
        (3, RuntimeError("out of memory"), 2, 1),  # step 3: request 1's prefill chunk went through, then the decode
        (-1, ValueError("bug"), 3, 0),  # the last layer: every earlier layer appended already
    ],
)
def test_an_exception_inside_a_step_rolls_everything_back(lm64, expected, layer, error, steps_before, at):
    engine = ServingEngine(lm64, block_size=4, num_blocks=12, max_num_seqs=3, max_num_batched_tokens=7)
    rids = [engine.add_request(p, n) for p, n in REQUESTS]
    for _ in range(steps_before):
        engine.step()
    before = (
        {rid: lengths(engine, rid) for rid in rids},
        [g.blocks.state()[:3] for g in engine.groups],
        [(r.rid, r.num_computed, list(r.output)) for r in engine.requests.values()],
        engine.stats(),
        len(engine.timeline),
    )
    with RaiseOnce(lm64, layer, error, at), pytest.raises(type(error)):
        engine.step()
    after = (
        {rid: lengths(engine, rid) for rid in rids},
        [g.blocks.state()[:3] for g in engine.groups],
        [(r.rid, r.num_computed, list(r.output)) for r in engine.requests.values()],
        engine.stats(),
        len(engine.timeline),
    )
    assert after == before  # every layer, table, refcount, request and counter as at the step's start
    results = engine.run()
    assert [results[rid] for rid in rids] == expected


# ---------------------------------------------------------------------------------------------- eviction order
def test_a_finished_request_is_released_tail_first_so_its_head_survives_an_eviction(lm64):
    prompt = [2, *range(1000, 1015)]  # 16 tokens: 4 full blocks of 4
    engine = ServingEngine(lm64, block_size=4, num_blocks=5, num_window_blocks=5)
    engine.add_request(prompt, 2)  # 17 keys: 5 blocks, the 5th (not full) goes back to the free list
    engine.run()
    again = prompt + [7]
    hashes = ac.serving.chain_block_hashes(again, 4)
    assert len(engine.blocks.lookup(again, hashes)) == 4  # all four cached
    engine.blocks.allocate()  # the free block
    engine.blocks.allocate()  # one eviction: the least recently released cached block
    assert engine.blocks.num_evictions == 1
    assert len(engine.blocks.lookup(again, hashes)) == 3  # the tail went first: 3 blocks still reachable
    # released head first, the head would have gone and every other block would be unreachable (0 hits)


def test_a_shared_system_prompt_survives_lru_after_its_requests_finish(lm64):
    """Interview answer 4 of 13b: an unrelated request that evicts one block between two requests with the same
    system prompt takes the first request's own tail, not the shared head."""
    engine = ServingEngine(lm64, block_size=4, num_blocks=6, num_window_blocks=6, max_num_seqs=1)
    system = SYSTEM[:12]  # 3 full blocks
    engine.add_request(system + [3000, 3001, 3002, 3003, 3004], 2)  # 18 keys: 5 blocks, 4 stay cached
    engine.run()
    engine.add_request([2, 4000, 4001, 4002, 4003, 4004, 4005, 4006, 4007], 2)  # 3 blocks: 2 free + 1 evicted
    engine.run()
    assert engine.blocks.num_evictions == 1
    rid = engine.add_request(system + [5000, 5001, 5002, 5003, 5004], 2)
    engine.run()
    assert engine.stats(rid)["cached_tokens"] == 12  # released head first: the head is evicted, 0 hits


# ---------------------------------------------------------------------------------------------- the contract
def test_stop_tokens_end_a_request_after_the_stop_token(lm64, expected):
    engine = ServingEngine(lm64, block_size=4, num_blocks=16, max_num_seqs=3, max_num_batched_tokens=7)
    stop = expected[0][2]  # request 0's third token
    rids = [engine.add_request(p, n, stop_token_ids=[stop] if i == 0 else None) for i, (p, n) in enumerate(REQUESTS)]
    results = engine.run()
    cut = expected[0][: expected[0].index(stop) + 1]
    assert results[rids[0]] == cut and results[rids[0]][-1] == stop  # the stop token is its last
    assert [results[rid] for rid in rids[1:]] == expected[1:]  # the others run to max_new_tokens (None: never stop)
    assert engine.stats()["blocks_used"] == 0


SAMPLING = [
    {"temperature": 0.9, "top_k": 40, "top_p": 0.95, "seed": 7},
    {"temperature": 0.0},
    {"temperature": 1.3, "seed": 11},
    {"temperature": 0.7, "top_p": 0.8, "seed": 3},
]


@pytest.mark.parametrize(("num_blocks", "budget"), [(12, 7), (7, 5)], ids=["chunks", "preempts"])
def test_sampling_equals_generate_with_the_requests_seed_whatever_the_batch(lm64, num_blocks, budget):
    engine = ServingEngine(lm64, block_size=4, num_blocks=num_blocks, max_num_seqs=4, max_num_batched_tokens=budget)
    rids = [engine.add_request(p, n, **s) for (p, n), s in zip(REQUESTS, SAMPLING, strict=True)]
    results = engine.run()
    for rid, (prompt, n), sampling in zip(rids, REQUESTS, SAMPLING, strict=True):
        sampling = dict(sampling)  # SAMPLING is shared by both parametrizations
        seed = sampling.pop("seed", None)
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        assert results[rid] == generate(lm64, prompt, n, generator=generator, **sampling)
    if num_blocks == 7:
        assert engine.stats()["num_preemptions"] > 0


def test_abort_frees_blocks_at_once_and_run_never_returns_it(lm64, expected):
    engine = ServingEngine(lm64, block_size=4, num_blocks=16, max_num_seqs=2, max_num_batched_tokens=7)
    rids = [engine.add_request(p, n) for p, n in REQUESTS]
    engine.step()
    engine.step()
    running, waiting = engine.scheduler.running[0].rid, engine.scheduler.waiting[-1].rid
    free = [g.blocks.num_free_blocks for g in engine.groups]
    held = len(engine.blocks.tables[running])
    engine.abort_request(running)
    assert engine.blocks.num_free_blocks == free[0] + held  # at once, not at the end of the run
    assert all(running not in g.blocks.tables for g in engine.groups)
    assert lengths(engine, running) == [None] * len(lm64.layers)
    engine.abort_request(np.int64(waiting))  # a waiting one: numpy integers name requests too
    results = engine.run()
    assert set(results) == set(rids) - {running, waiting}
    assert all(results[rid] == expected[rids.index(rid)] for rid in results)
    for gone in (running, waiting, "never-added"):
        with pytest.raises(ValueError, match="no request"):
            engine.abort_request(gone)
    assert all(g.blocks.num_free_blocks == g.blocks.num_blocks for g in engine.groups)


def test_numpy_integers_are_accepted_wherever_ints_are(lm64, expected):
    engine = ServingEngine(lm64, block_size=np.int64(4), num_blocks=np.int32(16), max_num_seqs=np.int64(2))
    prompt, n = REQUESTS[2]
    rid = engine.add_request(
        np.array(prompt), np.int64(n), request_id=np.int64(5), stop_token_ids=np.array([7]), top_k=np.int64(3)
    )
    sampled = engine.add_request(prompt, np.int64(2), temperature=np.float64(0.5), seed=np.int64(1))
    results = engine.run()
    assert rid == 5 and type(rid) is int and results[5] == expected[2]
    assert results[sampled] == generate(lm64, prompt, 2, temperature=0.5, generator=torch.Generator().manual_seed(1))


def test_finished_requests_are_handed_out_once_and_forgotten(lm64, expected):
    engine = ServingEngine(lm64, block_size=4, num_blocks=16)
    rids = [engine.add_request(p, n) for p, n in REQUESTS[:2]]
    first = engine.run()
    assert [first[rid] for rid in rids] == expected[:2] and engine.requests == {} and engine.finished == {}
    assert engine.stats(rids[0])["output_tokens"] == len(expected[0])  # stats of what the last run() returned
    hits = engine.stats()["prefix_hit_tokens"]
    assert engine.run() == {}  # nothing twice
    again = engine.add_request(*REQUESTS[0], request_id=rids[0])  # a handed-out id may be used again
    assert engine.run() == {again: expected[0]} and engine.stats()["prefix_hit_tokens"] > hits


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"stop_token_ids": [2, -1]}, "stop_token_ids"),
        ({"stop_token_ids": "eos"}, "stop_token_ids"),
        ({"temperature": -1.0}, "temperature"),
        ({"top_k": 0}, "top_k"),
        ({"top_p": 1.5}, "top_p"),
        ({"seed": -3}, "seed"),
        ({"seed": 1.5}, "seed"),
    ],
)
def test_bad_sampling_parameters_add_nothing(lm64, kwargs, match):
    engine = ServingEngine(lm64, block_size=4, num_blocks=8)
    with pytest.raises(ValueError, match=match):
        engine.add_request([2, 3], 1, **kwargs)
    assert engine.requests == {} and not engine.has_unfinished()


# ---------------------------------------------------------------------------------------------- sliding windows
@contextlib.contextmanager
def shrunken_window(lm, window: int):
    """The review's trick: the local layers get a ``window``-token window (engine and generate share them)."""
    saved = lm.config
    locals_ = [block for block in lm.layers if not block.is_global]
    for block in locals_:
        block.attention.sliding_window = window
    lm.config = dataclasses.replace(saved, sliding_window=window)
    try:
        yield
    finally:
        for block in locals_:
            block.attention.sliding_window = saved.sliding_window
        lm.config = saved


WINDOWED = [  # window, block_size, num_blocks, num_window_blocks, max_num_seqs, budget, prefix caching
    (3, 2, 40, 40, 3, 7, True),
    (5, 4, 12, 7, 3, 5, True),  # a small local pool: preemptions driven by it too
    (9, 3, 30, 30, 4, 256, False),
    (4, 1, 60, 20, 2, 3, True),
]


@pytest.mark.parametrize("config", WINDOWED, ids=[f"window{c[0]}-bs{c[1]}" for c in WINDOWED])
def test_window_layers_keep_only_their_window_and_equal_generate(lm64, expected, config):
    window, block_size, num_blocks, num_window_blocks, max_num_seqs, budget, prefix = config
    with shrunken_window(lm64, window):
        oracle = [generate(lm64, p, n) for p, n in REQUESTS]
        engine = ServingEngine(
            lm64,
            block_size=block_size,
            num_blocks=num_blocks,
            num_window_blocks=num_window_blocks,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=budget,
            prefix_caching=prefix,
        )
        rids, peak_per_request = [], {}
        for p, n in REQUESTS:
            rids.append(engine.add_request(p, n))
            engine.step()
            local = engine.groups[1].blocks.tables
            for rid in local:
                held = sum(b != NO_BLOCK for b in local[rid])
                peak_per_request[rid] = max(peak_per_request.get(rid, 0), held)
        results = engine.run()
    assert oracle != expected  # the shrunken window changes the tokens: the windows are crossed
    assert [results[rid] for rid in rids] == oracle
    stats = engine.stats()
    assert stats["peak_window_blocks_used"] < stats["peak_blocks_used"]
    chunk = min(budget, max(len(p) for p, _ in REQUESTS))
    assert max(peak_per_request.values()) <= -(-(window - 1 + chunk) // block_size) + 1  # the window, not the text
    assert all(g.blocks.num_free_blocks == g.blocks.num_blocks for g in engine.groups)


def test_memory_budget_with_and_without_the_window():
    """The review's arithmetic with the real config: 8k-token sequences of Gemma 3 270M in bf16 on 80 GB."""
    lm = ac.load_gemma3()  # float32, no forward pass: its config and parameter count
    config, weights = lm.config, 2 * sum(p.numel() for p in lm.parameters())  # bf16 weights
    every_token = kv_cache_bytes(config, 8192, keep_window=False)
    windowed = kv_cache_bytes(config, 8192)
    assert every_token == 18 * 8192 * 1024  # 18 layers x 1 KiB (1 KV head of 256, K and V, 2 bytes)
    assert windowed == (3 * 8192 + 15 * 512) * 1024  # local layers: the 512-token window, in whole blocks of 16
    assert (80e9 - weights) // every_token == 526
    assert 2380 <= (80e9 - weights) // windowed <= 2420
