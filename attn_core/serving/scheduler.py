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

import torch

from attn_core.serving.block_manager import chain_block_hashes
from attn_core.serving.kv_groups import KVGroup

__all__ = ["Request", "Scheduler"]


@dataclass
class Request:
    """One request's state (vLLM's ``Request``): its tokens so far, how many have keys/values, its counters, and
    its sampling parameters (vLLM's ``SamplingParams``)."""

    rid: int | str
    prompt: list[int]
    max_new_tokens: int
    arrival_step: int
    arrival_time: float = field(default_factory=time.perf_counter)
    stop_token_ids: frozenset[int] = frozenset()
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    generator: torch.Generator | None = None  # its own: a draw never depends on the rest of the batch
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
    def stopped(self) -> bool:
        """Its last token is one of its stop tokens (it is the last of its output)."""
        return bool(self.output) and self.output[-1] in self.stop_token_ids

    @property
    def finished(self) -> bool:
        return len(self.output) == self.max_new_tokens or self.stopped


class Scheduler:
    """Step rules: running requests first (oldest admitted first), then admissions from the waiting queue (FCFS).

    ``groups``: the engine's :class:`~attn_core.serving.kv_groups.KVGroup` s (global layers, window layers); a
    request holds one block table in each, and a step's blocks must fit in every one of them."""

    def __init__(self, groups: list[KVGroup], *, max_num_seqs: int, max_num_batched_tokens: int):
        self.groups = groups
        self.block_size = groups[0].block_size
        self.max_num_seqs, self.max_num_batched_tokens = max_num_seqs, max_num_batched_tokens
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []  # in admission order: the last one is preempted first
        self.num_preemptions = 0

    @property
    def peak_blocks_used(self) -> int:
        return self.groups[0].peak_blocks_used

    def blocks_used(self) -> int:
        """Blocks the running requests hold in the first group (the global layers' pool)."""
        return self.groups[0].blocks_used()

    def _short(self, request: Request, num_tokens: int) -> bool:
        """True when some group lacks the blocks ``request`` needs to hold ``num_computed + num_tokens`` tokens."""
        total = request.num_computed + num_tokens
        return any(g.blocks_short(request.rid, total) > g.blocks.num_free_blocks for g in self.groups)

    def _grow(self, request: Request, num_tokens: int) -> None:
        for group in self.groups:
            group.grow(request.rid, request.num_computed + num_tokens)

    def release(self, request: Request) -> None:
        """Give back ``request``'s blocks in every group, tail first (full computed ones stay cached)."""
        for group in self.groups:
            group.free(request.rid)

    def preempt(self, victim: Request) -> None:
        """Free the victim's blocks (full computed ones stay cached), keep its output, queue it first."""
        self.running.remove(victim)
        self.release(victim)
        victim.num_computed, victim.num_registered = 0, 0
        victim.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(victim)

    def _prefix_hits(self, tokens: list[int], hashes: list[int]) -> tuple[int, list[list[int]]]:
        """The longest prefix hit every group can serve: (blocks, each group's table for it)."""
        first = self.groups[0].blocks
        if not first.prefix_caching:
            return 0, [[] for _ in self.groups]
        longest = (len(tokens) - 1) // self.block_size  # never the block holding the last token
        if self.groups[0].window is None:
            longest = len(first.lookup(tokens, hashes))
        for num_blocks in range(min(longest, len(hashes)), 0, -1):
            tables = [g.hits(tokens, hashes, num_blocks) for g in self.groups]
            if all(t is not None for t in tables):
                return num_blocks, tables
        return 0, [[] for _ in self.groups]

    def schedule(self) -> list[tuple[Request, int]]:
        """This step's ``(request, tokens to compute)`` pairs, with their blocks allocated."""
        budget, scheduled = self.max_num_batched_tokens, []
        for request in self.running:  # blocks behind a window: no query of this step can see them
            for group in self.groups:
                group.drop_behind_window(request.rid, request.num_computed)
        for request in list(self.running):  # 1. running, oldest admitted first
            if request not in self.running:
                continue  # preempted earlier in this step
            num_tokens = min(len(request.tokens) - request.num_computed, budget)  # 1 when decoding
            if num_tokens == 0:
                continue  # the budget is spent: it waits for the next step, keeping its blocks
            while self._short(request, num_tokens):
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
            num_hits, tables = self._prefix_hits(tokens, request.block_hashes)
            hit_tokens = num_hits * self.block_size
            num_tokens = min(len(tokens) - hit_tokens, budget)
            need = -(-(hit_tokens + num_tokens) // self.block_size) - num_hits
            fits = all(
                # a cached block nobody holds counts as free, but the hit takes it
                need <= g.blocks.num_free_blocks - sum(b >= 0 and g.blocks.ref_counts[b] == 0 for b in table)
                for g, table in zip(self.groups, tables, strict=True)
            )
            if not fits:
                break  # the first that does not fit stops admission (no overtaking)
            self.waiting.popleft()
            for group, table in zip(self.groups, tables, strict=True):
                group.caches[0].attach(request.rid, table, hit_tokens)
            request.num_computed, request.num_registered = hit_tokens, num_hits
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
        tokens = request.tokens
        full = request.num_computed // self.block_size
        request.block_hashes = chain_block_hashes(tokens, self.block_size, start=request.block_hashes)
        for group in self.groups:
            table = group.blocks.tables[request.rid]
            for i in range(request.num_registered, full):
                if table[i] >= 0:  # a window's dropped block: nothing to publish
                    parent = request.block_hashes[i - 1] if i else None
                    group.blocks.register(table[i], parent, tokens[i * self.block_size : (i + 1) * self.block_size])
        request.num_registered = max(request.num_registered, full)

    def finish(self, request: Request) -> None:
        self.running.remove(request)
        self.release(request)  # its full blocks stay in the prefix cache at refcount 0, the head evicted last
