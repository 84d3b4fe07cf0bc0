"""Notebook 13b's admission grader: its reference agrees with attn_core's own Scheduler, right answers pass, each
usual mistake gets its own diagnosis (a phrase only it contains, with a Chinese entry), junk gets one ❌ line."""

import random

import numpy as np
import pytest
import torch
from learner_answers import JUNK, has_chinese_entry, one_red_line, stub, verdict

from attn_core.exercises import serving_admission as ex
from attn_core.serving.kv_groups import KVGroup
from attn_core.serving.scheduler import Request, Scheduler


def scheduler_admits(waiting, num_running, free_blocks, budget_left, block_size, max_num_seqs):
    """What attn_core's Scheduler admits in that situation: ``num_running`` requests already computed (they take
    no budget this step); the first holds the cached blocks; exactly ``free_blocks`` blocks are free."""
    system_blocks = max(k for _, _, _, k in waiting)
    assert num_running >= 1 or system_blocks == 0, "cached blocks are held by a running request"
    holders = [list(range(1, max(system_blocks, 1) * block_size + 1))]  # request h0: the shared prefix
    holders += [[500 + j] * block_size for j in range(1, num_running)]  # one block each
    used = sum(len(tokens) // block_size for tokens in holders[:num_running])
    num_blocks = used + free_blocks + 1  # + 1: a block held outside the scheduler (a pool has >= 1 block)
    group = KVGroup([0], None, num_blocks, block_size, prefix_caching=True)  # one global layer's pool
    manager = group.blocks
    manager.allocate()
    scheduler = Scheduler([group], max_num_seqs=max(num_running, 1), max_num_batched_tokens=10_000)
    scheduler.waiting.extend(Request(f"h{j}", tokens, 1, 0) for j, tokens in enumerate(holders[:num_running]))
    for request, num_tokens in scheduler.schedule():
        scheduler.computed(request, num_tokens)  # full blocks are published to the prefix cache
    assert manager.num_free_blocks == free_blocks
    for i, (rid, prompt_tokens, max_new_tokens, cached_blocks) in enumerate(waiting):
        own = [10_000 + 100 * i + j for j in range(prompt_tokens - cached_blocks * block_size)]  # breaks the chain
        scheduler.waiting.append(Request(rid, holders[0][: cached_blocks * block_size] + own, max_new_tokens, 0))
    scheduler.max_num_seqs, scheduler.max_num_batched_tokens = max_num_seqs, budget_left
    return [(request.rid, num_tokens) for request, num_tokens in scheduler.schedule()]  # holders: nothing left


def random_cases(n, seed=0):
    rng = random.Random(seed)
    for _ in range(n):
        block_size, num_running = rng.choice([2, 4]), rng.randint(0, 2)
        waiting = []
        for i in range(rng.randint(1, 4)):
            prompt_tokens = rng.randint(1, 20)
            cached = rng.randint(0, prompt_tokens // block_size) if num_running else 0
            waiting.append((f"r{i}", prompt_tokens, rng.randint(1, 8), cached))
        yield (waiting, num_running, rng.randint(0, 8), rng.randint(1, 24), block_size, rng.randint(1, 4))


@pytest.mark.parametrize("case", ex._CASES + list(random_cases(200)), ids=str)
def test_reference_agrees_with_the_scheduler(case):
    assert ex.admitted(*case) == scheduler_admits(*case)


def learner(*, fcfs=True, reserve="chunk", hits=True, cap_hits=True, seats=True, budget=True, cap_chunk=True):
    """A learner's admit(), right by default; each flag off (or reserve changed) is one usual mistake."""

    def admit(waiting, num_running, free_blocks, budget_left, block_size, max_num_seqs):
        out = []
        for rid, prompt_tokens, max_new_tokens, cached_blocks in waiting:
            if (seats and num_running + len(out) == max_num_seqs) or (budget and budget_left <= 0):
                break
            hit = cached_blocks if hits else 0
            if cap_hits:
                hit = min(hit, (prompt_tokens - 1) // block_size)
            left = prompt_tokens - hit * block_size
            chunk = max(0, min(left, budget_left)) if cap_chunk else left
            tokens = {"chunk": chunk, "prompt": left, "answer": left + max_new_tokens}[reserve]
            need = (tokens + block_size - 1) // block_size
            if need > free_blocks:
                if fcfs:
                    break
                continue
            out.append((rid, chunk))
            free_blocks, budget_left = free_blocks - need, budget_left - chunk
        return out

    return admit


def test_stub_fails_reference_passes(capsys):
    ok, out = verdict(ex.check_admission, stub, capsys)
    assert not ok and "not attempted" in out
    assert ex.check_admission(ex.admitted) and "✅" in capsys.readouterr().out
    assert ex.check_admission(learner()) and "✅" in capsys.readouterr().out


@pytest.mark.parametrize("junk", JUNK + [["A"], [("A", 1.5)], [(1, 2)], {"A": 10}], ids=range(len(JUNK) + 4))
def test_junk_gets_one_red_line(junk, capsys):
    assert not ex.check_admission(lambda *args: junk)
    assert one_red_line(capsys.readouterr().out)


WRONG = [
    (learner(fcfs=False), "first come, first served and stops"),
    (learner(reserve="prompt"), "blocks for the whole prompt"),
    (learner(reserve="answer"), "for the answer too"),
    (learner(hits=False), "ignored the prefix-cache hits"),
    (learner(cap_hits=False), "last token as a hit"),
    (learner(seats=False), "max_num_seqs"),
    (learner(budget=False), "no budget left"),
    (learner(cap_chunk=False), "bigger than the budget left"),
    (lambda *args: [], "expected"),
    (lambda w, *args: [rid for rid, *_ in w], "each item must be a (request_id, first-chunk tokens) pair"),
    (lambda w, *args: [(i, p) for i, (_, p, _, _) in enumerate(w)], "the request_id from waiting"),
    (lambda w, *args: [(w[0][0], torch.ones(2, 2))], "a first chunk is a whole number of tokens"),
    (lambda *args: {"A": 10}, "return a list of"),
    (lambda w, *args: [(rid, p) for rid, p, _, _ in w], "you returned"),
]


@pytest.mark.parametrize("wrong, phrase", WRONG, ids=[w[1] for w in WRONG])
def test_each_mistake_is_named(wrong, phrase, capsys):
    ok, out = verdict(ex.check_admission, wrong, capsys)
    assert not ok and one_red_line(out) and phrase in out, out
    assert has_chinese_entry(out)  # every diagnosis has its Chinese entry


def test_right_answers_written_differently_pass():
    right = learner()
    assert ex.check_admission(lambda *args: [[rid, np.int64(n)] for rid, n in right(*args)])  # lists, numpy ints
    assert ex.check_admission(lambda *args: tuple(right(*args)))
