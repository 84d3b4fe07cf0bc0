"""ServingEngine on Gemma 3 in float64 (a tiny random one by default, the real 270M under ``-m slow``:
tests/serving_models.py): ``run()[rid] == lm.generate(prompt, n)`` token for token whatever
the arrivals, block size, token budget (chunked prefill), prefix hits and preemptions; the step rules and the
statistics' identities; every error path (nothing added)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from serving_models import MODELS, serving_lm

from attn_core.serving import ServingEngine

SYSTEM = [2, 818, 5279, 529, 506, 2195, 236764, 1217, 2173, 236787, 506, 3710, 563]  # 13 shared leading tokens
# (prompt, max_new_tokens): four share SYSTEM (full blocks of it are prefix hits), one stands alone, one is a
# single token; lengths mix so chunks, decodes and admissions interleave.
REQUESTS = [
    (SYSTEM + [1437, 3165], 4),
    (SYSTEM + [9894, 236764, 496, 1722, 1217, 2669], 3),
    ([2, 651, 6037, 529, 9405], 5),
    (SYSTEM + [1437], 1),
    ([2], 3),
    (SYSTEM + [1437, 3165, 7001], 2),
]


@pytest.fixture(scope="module", params=MODELS)
def lm64(request):
    return serving_lm(request.param)


@pytest.fixture(scope="module")
def expected(lm64):
    """What each request gets alone: lm.generate, greedy, exactly n tokens (the oracle)."""
    return [lm64.generate(torch.tensor([p]), n)[0, len(p) :].tolist() for p, n in REQUESTS]


def serve(engine: ServingEngine, arrive_every: int) -> tuple[list, dict, list]:
    """Add the requests ``arrive_every`` steps apart (0: all at once), collecting every step's emissions."""
    rids, emitted, pending = [], {}, list(REQUESTS)
    per_step = []
    while pending or engine.has_unfinished():
        for _ in range(1 if arrive_every else len(pending)):
            if pending:
                prompt, n = pending.pop(0)
                rids.append(engine.add_request(prompt if len(rids) % 2 else torch.tensor(prompt), n))
        for _ in range(max(arrive_every, 1)):
            step = engine.step()
            per_step.append(step)
            for rid, token in step:
                emitted.setdefault(rid, []).append(token)
    return rids, emitted, per_step


# block_size, num_blocks, max_num_seqs, max_num_batched_tokens, prefix_caching, arrive_every
CONFIGS = {
    "tight-pool-preempts": (4, 9, 4, 7, True, 1),
    "chunks-of-5-no-prefix-cache": (3, 40, 3, 5, False, 0),
    "default-sizes-arrivals": (16, 256, 8, 256, True, 2),
}


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_engine_equals_generate(lm64, expected, config):
    *sizes, prefix_caching, arrive_every = config
    block_size, num_blocks, max_num_seqs, budget = sizes
    engine = ServingEngine(
        lm64,
        block_size=block_size,
        num_blocks=num_blocks,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=budget,
        prefix_caching=prefix_caching,
    )
    rids, emitted, per_step = serve(engine, arrive_every)
    results = engine.run()
    assert [results[rid] for rid in rids] == expected
    assert [emitted[rid] for rid in rids] == expected  # step() emits exactly these tokens, as Python ints
    assert all(type(token) is int for step in per_step for _, token in step)
    assert all(len({rid for rid, _ in step}) == len(step) for step in per_step)  # at most one per request
    total, per_request = engine.stats(), [engine.stats(rid) for rid in rids]
    for key in ("num_preemptions", "computed_tokens"):
        assert total[key] == sum(s[key] for s in per_request)
    assert total["prefix_hit_tokens"] == sum(s["cached_tokens"] for s in per_request)
    assert total["blocks_used"] == 0 and 0 < total["peak_blocks_used"] <= num_blocks
    assert total["max_step_tokens"] <= budget
    assert total["steps"] == sum(1 for step in engine.timeline)
    for (prompt, n), s in zip(REQUESTS, per_request, strict=True):
        assert s["finished"] and s["prompt_tokens"] == len(prompt) and s["output_tokens"] == n
        assert s["cached_tokens"] % block_size == 0
        if s["num_preemptions"] == 0:
            assert s["computed_tokens"] == s["prompt_tokens"] - s["cached_tokens"] + n - 1
        assert s["ttft_steps"] == s["first_token_step"] - s["arrival_step"] >= 1
        if n == 1:
            assert s["tpot_steps"] is None and s["tpot_s"] is None and s["finish_step"] == s["first_token_step"]
        else:
            assert s["tpot_steps"] == (s["finish_step"] - s["first_token_step"]) / (n - 1)
            assert s["tpot_s"] >= 0
        assert s["ttft_s"] > 0
    if not prefix_caching:
        assert total["prefix_hit_tokens"] == 0
    if num_blocks == 9:
        assert total["num_preemptions"] > 0 and total["prefix_hit_tokens"] > 0
    if budget == 5:
        assert total["max_step_tokens"] == 5  # prompts were cut into chunks


def test_idle_step_counts_nothing(lm64):
    engine = ServingEngine(lm64, block_size=4, num_blocks=8)
    assert engine.step() == [] and engine.stats()["steps"] == 0 and engine.run() == {}
    rid = engine.add_request([2, 651], 1, request_id="a")
    assert engine.stats(rid)["first_token_step"] is None and engine.stats(rid)["ttft_steps"] is None
    assert engine.step() == [("a", engine.run()["a"][0])]
    assert engine.step() == [] and engine.stats()["steps"] == 1 and not engine.has_unfinished()
    assert engine.stats("a")["arrival_step"] == 0 and engine.stats("a")["first_token_step"] == 1


@pytest.mark.parametrize(
    "kwargs",
    [{"block_size": 0}, {"num_blocks": True}, {"max_num_seqs": 2.0}, {"max_num_batched_tokens": -1}],
)
def test_bad_sizes(lm64, kwargs):
    with pytest.raises(ValueError, match="must be an int >= 1"):
        ServingEngine(lm64, **kwargs)


@pytest.mark.parametrize(
    ("prompt", "n", "request_id", "match"),
    [
        ([], 1, None, "empty"),
        (torch.tensor([[2, 3]]), 1, None, "1-D"),
        (torch.tensor([2.0, 3.0]), 1, None, "1-D integer tensor"),
        (torch.tensor([True, False]), 1, None, "1-D integer tensor"),
        ("2 3", 1, None, "list of ints or a 1-D tensor"),
        ([2, 3], 1, 1.5, "request_id must be None, an int or a str"),
        ([2, 300_000], 1, None, r"in \[0, 262144\)"),
        ([2, -1], 1, None, r"in \[0, 262144\)"),
        ([2, 3.0], 1, None, "hold ints"),
        ([2, 3], 0, None, "max_new_tokens must be an int >= 1"),
        ([2, 3], True, None, "max_new_tokens must be an int >= 1"),
        (list(range(2, 20)), 16, None, "never fits, even alone"),  # 18 + 16 - 1 = 33 > 8 * 4
        ([2, 3], 1, "taken", "already in use"),
        ([2, 3], 1, 0, "already in use"),  # the None request took 0
    ],
)
def test_bad_requests_add_nothing(lm64, prompt, n, request_id, match):
    engine = ServingEngine(lm64, block_size=4, num_blocks=8)
    assert engine.add_request([2], 1) == 0 and engine.add_request([2], 1, request_id="taken") == "taken"
    with pytest.raises(ValueError, match=match):
        engine.add_request(prompt, n, request_id=request_id)
    assert list(engine.requests) == [0, "taken"] and len(engine.scheduler.waiting) == 2
    assert engine.add_request(list(range(2, 19)), 16) == 1  # 17 + 16 - 1 = 32 tokens: fits exactly
    assert engine.add_request(np.array([2, 3], dtype=np.int64).tolist() + [np.int64(4)], 1) == 2  # numpy ints too
    with pytest.raises(ValueError, match="no request 'nope'"):
        engine.stats("nope")
