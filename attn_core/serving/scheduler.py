"""The scheduler (vLLM's ``Scheduler``, nano-vllm's ``Scheduler``): which requests run in a step, how many tokens
each, who is admitted, who is preempted.

Iteration-level (continuous) batching: the batch is decided again at every step, so a finished request's seat
goes to a waiting one at the next step instead of when the whole batch ends (static batching). Every step has a
token budget (``max_num_batched_tokens``) shared by prefill chunks and decode tokens: a long prompt is cut into
chunks (chunked prefill), so running decodes are not stalled behind it. Memory is blocks: a request that needs a
block when none is free preempts the most recently admitted running request, whose blocks are freed; it waits
at the front of the queue and recomputes its tokens when readmitted (vLLM's preemption by recompute).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from attn_core.caches.paged_cache import PagedKVCache
from attn_core.serving.block_manager import BlockManager, chain_block_hashes

__all__ = ["Request", "Scheduler"]


@dataclass
class Request:
    """One request's state (vLLM's ``Request``): its tokens so far, how many have keys/values, its counters."""

    rid: int | str
    prompt: list[int]
    max_new_tokens: int
    arrival_step: int
    arrival_time: float = field(default_factory=time.perf_counter)
    output: list[int] = field(default_factory=list)
    num_computed: int = 0  # leading tokens whose keys/values sit in this request's blocks now
    block_hashes: list[int] = field(default_factory=list)  # chained hashes of tokens' full blocks
    num_registered: int = 0  # leading blocks published to the prefix cache in this admission
    cached_tokens: int = 0
    computed_tokens: int = 0
    num_preemptions: int = 0
    first_token_step: int | None = None
    finish_step: int | None = None
    first_token_time: float | None = None
    finish_time: float | None = None

    @property
    def tokens(self) -> list[int]:
        return self.prompt + self.output  # a preempted request recomputes its generated tokens too

    @property
    def finished(self) -> bool:
        return len(self.output) == self.max_new_tokens


class Scheduler:
    """Step rules: running requests first (oldest admitted first), then admissions from the waiting queue (FCFS)."""

    def __init__(self, paged: PagedKVCache, blocks: BlockManager, *, max_num_seqs: int, max_num_batched_tokens: int):
        self.paged, self.blocks = paged, blocks  # paged: layer 0's cache; its free/attach act on every layer
        self.block_size = blocks.block_size
        self.max_num_seqs, self.max_num_batched_tokens = max_num_seqs, max_num_batched_tokens
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []  # in admission order: the last one is preempted first
        self.num_preemptions = 0
        self.peak_blocks_used = 0

    def blocks_used(self) -> int:
        return len({b for r in self.running for b in self.blocks.tables.get(r.rid, [])})

    def _blocks_short(self, request: Request, num_tokens: int) -> int:
        """Blocks ``request`` must still take to hold ``num_computed + num_tokens`` tokens."""
        held = len(self.blocks.tables.get(request.rid, []))
        return -(-(request.num_computed + num_tokens) // self.block_size) - held

    def _grow(self, request: Request, num_tokens: int) -> None:
        table = self.blocks.tables[request.rid]
        for _ in range(self._blocks_short(request, num_tokens)):
            table.append(self.blocks.allocate())  # one id for every layer: the layers' appends find it there
        self.peak_blocks_used = max(self.peak_blocks_used, self.blocks_used())

    def preempt(self, victim: Request) -> None:
        """Free the victim's blocks (full computed ones stay cached), keep its output, queue it first."""
        self.running.remove(victim)
        self.paged.free(victim.rid)
        victim.num_computed, victim.num_registered = 0, 0
        victim.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(victim)

    def schedule(self) -> list[tuple[Request, int]]:
        """This step's ``(request, tokens to compute)`` pairs, with their blocks allocated."""
        budget, scheduled = self.max_num_batched_tokens, []
        for request in list(self.running):  # 1. running, oldest admitted first
            if request not in self.running:
                continue  # preempted earlier in this step
            num_tokens = min(len(request.tokens) - request.num_computed, budget)  # 1 when decoding
            if num_tokens == 0:
                continue  # the budget is spent: it waits for the next step, keeping its blocks
            while self._blocks_short(request, num_tokens) > self.blocks.num_free_blocks:
                self.preempt(self.running[-1])  # the most recently admitted (maybe this one)
                if request not in self.running:
                    break
            if request in self.running:
                self._grow(request, num_tokens)
                scheduled.append((request, num_tokens))
                budget -= num_tokens
        while self.waiting and len(self.running) < self.max_num_seqs and budget > 0:  # 2. admit, FCFS
            request = self.waiting[0]
            tokens = request.tokens
            request.block_hashes = chain_block_hashes(tokens, self.block_size, start=request.block_hashes)
            hits = self.blocks.lookup(tokens, request.block_hashes)
            hit_tokens = len(hits) * self.block_size
            num_tokens = min(len(tokens) - hit_tokens, budget)
            need = -(-(hit_tokens + num_tokens) // self.block_size) - len(hits)
            idle_hits = sum(self.blocks.ref_counts[b] == 0 for b in hits)  # counted as free, but taken by the hit
            if need > self.blocks.num_free_blocks - idle_hits:
                break  # the first that does not fit stops admission (no overtaking)
            self.waiting.popleft()
            self.paged.attach(request.rid, hits, hit_tokens)
            request.num_computed, request.num_registered = hit_tokens, len(hits)
            request.cached_tokens += hit_tokens
            self.running.append(request)
            self._grow(request, num_tokens)
            scheduled.append((request, num_tokens))
            budget -= num_tokens
        return scheduled

    def computed(self, request: Request, num_tokens: int) -> None:
        """``num_tokens`` more of ``request``'s tokens have keys/values: publish its newly full blocks."""
        request.num_computed += num_tokens
        request.computed_tokens += num_tokens
        tokens, table = request.tokens, self.blocks.tables[request.rid]
        full = request.num_computed // self.block_size
        request.block_hashes = chain_block_hashes(tokens, self.block_size, start=request.block_hashes)
        for i in range(request.num_registered, full):
            parent = request.block_hashes[i - 1] if i else None
            self.blocks.register(table[i], parent, tokens[i * self.block_size : (i + 1) * self.block_size])
        request.num_registered = max(request.num_registered, full)

    def finish(self, request: Request) -> None:
        self.running.remove(request)
        self.paged.free(request.rid)  # its full blocks stay in the prefix cache at refcount 0
