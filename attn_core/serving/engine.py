"""``ServingEngine``: continuous batching, chunked prefill, prefix caching and preemption on a real decoder
(vLLM's ``LLMEngine`` / ``LLM.generate``, nano-vllm's ``LLMEngine``), token for token equal to ``lm.generate``.

Parts, as in vLLM v1 and nano-vllm: :class:`~attn_core.serving.kv_groups.KVGroup` s (the KV cache manager: a
block pool for the global layers and one for the sliding-window layers, chained block hashes, refcounts, LRU of
cached blocks), :class:`~attn_core.serving.scheduler.Scheduler` (the step rules) and
:func:`~attn_core.serving.model_runner.run_step` (the model runner). This file is the front door:
``add_request`` / ``abort_request`` / ``step`` / ``run``, sampling, and the statistics (TTFT and TPOT in steps
and seconds).

A step is a transaction: if anything raises inside it (a bug, an out-of-memory error, the notebook's stop button's
``KeyboardInterrupt``), every cache, block table, request and counter goes back to the step's start before the
exception propagates, so the next ``step()`` recomputes it (vLLM instead declares the engine dead).

One piece: the engine's scheduler loop (admit, prefill in chunks, decode, preempt) reads and writes one shared
state.
"""

from __future__ import annotations

import numbers
import time

import numpy as np
import torch

from attn_core.models.generation import check_sampling, sample_next
from attn_core.serving.kv_groups import KVGroup
from attn_core.serving.model_runner import run_step
from attn_core.serving.scheduler import Request, Scheduler

__all__ = ["ServingEngine"]


def _as_int(name: str, value, minimum: int) -> int:
    """``value`` as a Python int (numpy integers too), or ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}.")
    return int(value)


class ServingEngine:
    """Serve many requests at once on ``lm`` (a Gemma 3 from ``ac.load_gemma3``).

    ``add_request(prompt_ids, max_new_tokens, *, request_id=None, stop_token_ids=None, temperature=0.0,
    top_k=None, top_p=None, seed=None)`` queues a request (vLLM's ``SamplingParams``: ``max_tokens``,
    ``stop_token_ids``, ``temperature``, ``top_k``, ``top_p``, ``seed``); ``abort_request(request_id)`` drops one
    and frees its blocks at once; ``step()`` runs one iteration and returns the ``(request_id, token)`` pairs it
    emitted; ``run()`` steps until idle and hands out every finished request's tokens.

    A request gets ``max_new_tokens`` tokens, or fewer when it emits one of ``stop_token_ids`` (that token is the
    last of its output; None: never stop early, vLLM's ``ignore_eos=True``). Its tokens are the ones
    ``lm.generate(prompt alone, max_new_tokens, temperature=..., top_k=..., top_p=...,
    generator=torch.Generator().manual_seed(seed))`` gives it (cut after a stop token), whatever the batch,
    chunking, prefix hits and preemptions: each request samples with its own generator.

    Results are handed out once: ``run()`` returns ``{request_id: tokens}`` for the requests finished since the
    last ``run()`` and the engine forgets them (their ids may be used again); ``stats(request_id)`` answers for
    the requests it holds and for those the last ``run()`` returned. A long-lived server calls ``run()`` (or
    reads ``step()``'s tokens and calls ``run()`` now and then), so finished requests never pile up.

    Sliding-window layers (Gemma 3: 15 of 18) keep only their window: they get their own block pool of
    ``num_window_blocks`` blocks (default ``num_blocks``), whose blocks behind the window are recycled.
    """

    def __init__(
        self,
        lm,
        *,
        block_size: int = 16,
        num_blocks: int = 256,
        num_window_blocks: int | None = None,
        max_num_seqs: int = 8,
        max_num_batched_tokens: int = 256,
        prefix_caching: bool = True,
    ) -> None:
        block_size = _as_int("block_size", block_size, 1)
        num_blocks = _as_int("num_blocks", num_blocks, 1)
        num_window_blocks = (
            num_blocks if num_window_blocks is None else _as_int("num_window_blocks", num_window_blocks, 1)
        )
        max_num_seqs = _as_int("max_num_seqs", max_num_seqs, 1)
        max_num_batched_tokens = _as_int("max_num_batched_tokens", max_num_batched_tokens, 1)
        if not isinstance(prefix_caching, bool):
            raise ValueError(f"prefix_caching must be True or False, got {prefix_caching!r}.")
        if not (hasattr(lm, "layers") and hasattr(lm, "config") and hasattr(lm, "embed")):
            raise TypeError(f"lm must be a Gemma3 from ac.load_gemma3(...), got {type(lm).__name__}.")
        self.lm, self.block_size, self.num_blocks = lm, block_size, num_blocks
        self.num_window_blocks = num_blocks if num_window_blocks is None else num_window_blocks
        windows = [getattr(block.attention, "sliding_window", None) for block in lm.layers]
        self.groups: list[KVGroup] = []
        for window in sorted(set(windows), key=lambda w: (w is not None, w or 0)):  # global layers first
            layers = [i for i, w in enumerate(windows) if w == window]
            pool = num_blocks if window is None else self.num_window_blocks
            self.groups.append(KVGroup(layers, window, pool, block_size, prefix_caching))
        self.caches = [None] * len(lm.layers)  # layer i's cache, on its group's pool
        for group in self.groups:
            for i, cache in zip(group.layers, group.caches, strict=True):
                self.caches[i] = cache
        self.blocks = self.groups[0].blocks  # the global layers' block manager
        self.scheduler = Scheduler(
            self.groups, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens
        )
        self.requests: dict[int | str, Request] = {}  # requests this engine holds (not yet handed out by run())
        self.finished: dict[int | str, Request] = {}  # finished since the last run(), in finishing order
        self._handed_out: dict[int | str, Request] = {}  # what the last run() returned (for stats)
        self._totals = {"prefix_hit_tokens": 0, "computed_tokens": 0}  # of requests already forgotten
        self.steps = 0
        self.max_step_tokens = 0
        self.timeline: list[list[tuple[int | str, int]]] = []  # per step: (request, tokens computed)
        self._next_id = 0

    # ------------------------------------------------------------------ requests
    def _blocks_alone(self, group: KVGroup, num_tokens: int) -> int:
        """Blocks of ``group`` a request of ``num_tokens`` keys needs at its peak when alone."""
        full = -(-num_tokens // self.block_size)
        if group.window is None:
            return full
        chunk = min(self.scheduler.max_num_batched_tokens, num_tokens)  # the widest step it takes
        return min(full, -(-(group.window - 1 + chunk) // self.block_size) + 1)

    def add_request(
        self,
        prompt_ids,
        max_new_tokens: int,
        *,
        request_id: int | str | None = None,
        stop_token_ids=None,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> int | str:
        prompt = self._check_prompt(prompt_ids)
        max_new_tokens = _as_int("max_new_tokens", max_new_tokens, 1)
        stops = self._check_stop_tokens(stop_token_ids)
        temperature, top_k, top_p = check_sampling(temperature, top_k, top_p)
        if seed is not None:
            seed = _as_int("seed", seed, 0)
        needed = len(prompt) + max_new_tokens - 1  # the last token is never fed back
        for group in self.groups:
            pool = group.blocks.num_blocks
            if self._blocks_alone(group, needed) > pool:
                raise ValueError(
                    f"a prompt of {len(prompt)} tokens + max_new_tokens={max_new_tokens} needs keys for {needed} "
                    f"tokens: {self._blocks_alone(group, needed)} blocks of {self.block_size} in the pool of the "
                    f"{'global' if group.window is None else 'sliding-window'} layers, which has {pool} "
                    "(num_blocks * block_size tokens): it never fits, even alone. Shorten it or build the engine "
                    "with more num_blocks."
                )
        context = self.lm.config.context_length
        if len(prompt) + max_new_tokens > context:
            raise ValueError(
                f"prompt ({len(prompt)}) + max_new_tokens ({max_new_tokens}) exceeds the context length {context}."
            )
        if request_id is None:
            while self._next_id in self.requests:
                self._next_id += 1
            request_id = self._next_id
            self._next_id += 1
        elif isinstance(request_id, numbers.Integral) and not isinstance(request_id, bool):
            request_id = int(request_id)
        elif not isinstance(request_id, str):
            raise ValueError(f"request_id must be None, an int or a str, got {request_id!r}.")
        if request_id in self.requests:
            raise ValueError(
                f"request_id {request_id!r} is already in use (waiting, running, or finished and not yet handed "
                "out by run()); ids are unique among the requests an engine holds."
            )
        generator = None
        if temperature > 0 and seed is not None:
            generator = torch.Generator(device=self.lm.embed.weight.device).manual_seed(seed)
        request = Request(
            request_id,
            prompt,
            max_new_tokens,
            arrival_step=self.steps,
            stop_token_ids=stops,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            generator=generator,
        )
        self.requests[request_id] = request
        self.scheduler.waiting.append(request)
        return request_id

    def abort_request(self, request_id: int | str) -> None:
        """Drop a request now (a client went away): its blocks go back at once, and ``run()`` never returns it
        (vLLM's ``abort_request``). An id the engine does not hold: ValueError."""
        request = self._held(request_id)
        scheduler = self.scheduler
        if request in scheduler.running:
            scheduler.running.remove(request)
            scheduler.release(request)
        elif request in scheduler.waiting:
            scheduler.waiting.remove(request)
        self.finished.pop(request.rid, None)
        self._forget(request)

    def _held(self, request_id) -> Request:
        if isinstance(request_id, numbers.Integral) and not isinstance(request_id, bool):
            request_id = int(request_id)
        if isinstance(request_id, bool) or not isinstance(request_id, int | str) or request_id not in self.requests:
            raise ValueError(
                f"no request {request_id!r} in this engine (held: {list(self.requests)[:10]}); run() hands a "
                "finished request out once and then forgets it."
            )
        return self.requests[request_id]

    def _forget(self, request: Request) -> None:
        del self.requests[request.rid]
        self._totals["prefix_hit_tokens"] += request.cached_tokens
        self._totals["computed_tokens"] += request.computed_tokens

    def _check_stop_tokens(self, stop_token_ids) -> frozenset[int]:
        if stop_token_ids is None:
            return frozenset()
        if isinstance(stop_token_ids, torch.Tensor | np.ndarray):
            stop_token_ids = stop_token_ids.tolist()
        if isinstance(stop_token_ids, numbers.Integral) and not isinstance(stop_token_ids, bool):
            stop_token_ids = [stop_token_ids]
        vocab = self.lm.config.vocab_size
        if not isinstance(stop_token_ids, list | tuple | set | frozenset) or any(
            isinstance(t, bool) or not isinstance(t, numbers.Integral) or not 0 <= t < vocab for t in stop_token_ids
        ):
            raise ValueError(
                f"stop_token_ids must be None or token ids in [0, {vocab}) (e.g. [lm.config.eos_token_id]), "
                f"got {stop_token_ids!r:.80}."
            )
        return frozenset(int(t) for t in stop_token_ids)

    def _check_prompt(self, prompt_ids) -> list[int]:
        if isinstance(prompt_ids, torch.Tensor):
            if (
                prompt_ids.ndim != 1
                or prompt_ids.dtype.is_floating_point
                or prompt_ids.dtype in (torch.bool, torch.complex64, torch.complex128)
            ):
                raise ValueError(
                    f"prompt_ids must be a 1-D integer tensor or a list of ints, got a tensor of shape "
                    f"{tuple(prompt_ids.shape)} and dtype {prompt_ids.dtype}; for a batch, add one request per row."
                )
            prompt = prompt_ids.tolist()
        elif isinstance(prompt_ids, np.ndarray):
            if prompt_ids.ndim != 1 or prompt_ids.dtype.kind not in "iu":
                raise ValueError(
                    f"prompt_ids must be a 1-D integer array or a list of ints, got an array of shape "
                    f"{prompt_ids.shape} and dtype {prompt_ids.dtype}; for a batch, add one request per row."
                )
            prompt = [int(t) for t in prompt_ids]
        elif isinstance(prompt_ids, list | tuple):
            prompt = list(prompt_ids)
            if any(isinstance(t, bool) or not isinstance(t, numbers.Integral) for t in prompt):
                raise ValueError(f"prompt_ids must hold ints (token ids), got {prompt_ids!r:.80}.")
            prompt = [int(t) for t in prompt]  # numpy integers too
        else:
            raise ValueError(f"prompt_ids must be a list of ints or a 1-D tensor, got {type(prompt_ids).__name__}.")
        if not prompt:
            raise ValueError("prompt_ids is empty: a request needs at least one token (e.g. <bos>).")
        vocab = self.lm.config.vocab_size
        if not all(0 <= t < vocab for t in prompt):
            raise ValueError(f"token ids must be in [0, {vocab}), got {min(prompt)}..{max(prompt)}.")
        return prompt

    # ------------------------------------------------------------------ stepping
    def has_unfinished(self) -> bool:
        return bool(self.scheduler.running or self.scheduler.waiting)

    def _snapshot(self) -> tuple:
        """What a step may change (not the pools' tensors: a step writes only slots past every length)."""
        s = self.scheduler
        requests = {
            r.rid: {**vars(r), "output": list(r.output), "block_hashes": list(r.block_hashes)}
            for r in self.requests.values()
        }
        generators = {r.rid: r.generator.get_state() for r in s.running + list(s.waiting) if r.generator is not None}
        groups = [(g.blocks.state(), g.peak_blocks_used, [dict(c._lengths) for c in g.caches]) for g in self.groups]
        engine = (self.steps, self.max_step_tokens, len(self.timeline), dict(self.finished))
        return requests, generators, groups, (list(s.waiting), list(s.running), s.num_preemptions), engine

    def _restore(self, snapshot: tuple) -> None:
        requests, generators, groups, (waiting, running, num_preemptions), engine = snapshot
        for rid, fields in requests.items():
            vars(self.requests[rid]).update(fields)
        for rid, state in generators.items():
            self.requests[rid].generator.set_state(state)
        for group, (blocks, peak, lengths) in zip(self.groups, groups, strict=True):
            group.blocks.restore(blocks)
            group.peak_blocks_used = peak
            for cache, saved in zip(group.caches, lengths, strict=True):
                cache._lengths.clear()
                cache._lengths.update(saved)
        s = self.scheduler
        s.waiting.clear()
        s.waiting.extend(waiting)
        s.running[:], s.num_preemptions = running, num_preemptions
        self.steps, self.max_step_tokens, timeline_length, self.finished = engine
        del self.timeline[timeline_length:]

    @torch.no_grad()
    def step(self) -> list[tuple[int | str, int]]:
        """One iteration; returns the ``(request_id, token)`` pairs emitted. Transactional: on any exception
        (``KeyboardInterrupt`` included) the engine is put back as it was before the step, then it re-raises."""
        if not self.has_unfinished():
            return []  # idle: no step counted
        snapshot = self._snapshot()
        try:
            return self._step()
        except BaseException:
            self._restore(snapshot)
            raise

    def _step(self) -> list[tuple[int | str, int]]:
        self.steps += 1
        scheduled = self.scheduler.schedule()
        work = [
            (r.rid, r.tokens[r.num_computed : r.num_computed + n], r.num_computed, r.num_computed + n == len(r.tokens))
            for r, n in scheduled
        ]
        logits = run_step(self.lm, self.caches, work)
        self.timeline.append([(r.rid, n) for r, n in scheduled])
        self.max_step_tokens = max(self.max_step_tokens, sum(n for _, n in scheduled))
        emitted, now = [], time.perf_counter()
        for request, num_tokens in scheduled:
            self.scheduler.computed(request, num_tokens)
            if request.num_computed < len(request.tokens):
                continue  # a prefill chunk short of the last token: no logits wanted yet
            token = self._sample(request, logits[request.rid])
            request.output.append(token)
            emitted.append((request.rid, token))
            if request.first_token_step is None:
                request.first_token_step, request.first_token_time = self.steps, now
            if request.finished:
                request.finish_step, request.finish_time = self.steps, now
                self.scheduler.finish(request)
                self.finished[request.rid] = request
        return emitted

    @staticmethod
    def _sample(request: Request, logits: torch.Tensor) -> int:
        """The request's next token from its logits ``(vocab,)``, as ``lm.generate`` draws it alone."""
        token = sample_next(
            logits[None],  # (1, vocab): the shape generate samples from, so the generator draws alike
            temperature=request.temperature,
            top_k=request.top_k,
            top_p=request.top_p,
            generator=request.generator,
        )
        return int(token[0])

    def run(self) -> dict[int | str, list[int]]:
        """Step until idle; return ``{request_id: tokens}`` of every request finished since the last ``run()``
        (in finishing order) and forget them: each result is handed out once."""
        while self.has_unfinished():
            self.step()
        done, self.finished = self.finished, {}
        for request in done.values():
            self._forget(request)
        self._handed_out = done
        return {rid: list(request.output) for rid, request in done.items()}

    # ------------------------------------------------------------------ statistics
    def stats(self, request_id: int | str | None = None) -> dict:
        """``stats()``: the engine's counters (over every request it has served); ``stats(request_id)``: one
        request's, for a request the engine holds or the last ``run()`` handed out."""
        if request_id is None:
            reqs = self.requests.values()
            window = [g for g in self.groups if g.window is not None]
            return {
                "steps": self.steps,
                "num_preemptions": self.scheduler.num_preemptions,
                "prefix_hit_tokens": self._totals["prefix_hit_tokens"] + sum(r.cached_tokens for r in reqs),
                "computed_tokens": self._totals["computed_tokens"] + sum(r.computed_tokens for r in reqs),
                "max_step_tokens": self.max_step_tokens,
                "blocks_used": self.scheduler.blocks_used(),
                "peak_blocks_used": self.scheduler.peak_blocks_used,
                "window_blocks_used": sum(g.blocks_used() for g in window),
                "peak_window_blocks_used": max((g.peak_blocks_used for g in window), default=0),
            }
        if isinstance(request_id, numbers.Integral) and not isinstance(request_id, bool):
            request_id = int(request_id)
        known = {**self._handed_out, **self.requests}
        if isinstance(request_id, bool) or not isinstance(request_id, int | str) or request_id not in known:
            raise ValueError(f"no request {request_id!r} in this engine (held or last handed out: {list(known)[:10]}).")
        r = known[request_id]
        tpot_steps = tpot_s = ttft_steps = ttft_s = None
        if r.first_token_step is not None:
            ttft_steps, ttft_s = r.first_token_step - r.arrival_step, r.first_token_time - r.arrival_time
        if r.finish_step is not None and len(r.output) > 1:
            tpot_steps = (r.finish_step - r.first_token_step) / (len(r.output) - 1)
            tpot_s = (r.finish_time - r.first_token_time) / (len(r.output) - 1)
        return {
            "prompt_tokens": len(r.prompt),
            "output_tokens": len(r.output),
            "finished": r.finished,
            "cached_tokens": r.cached_tokens,
            "computed_tokens": r.computed_tokens,
            "num_preemptions": r.num_preemptions,
            "arrival_step": r.arrival_step,
            "first_token_step": r.first_token_step,
            "finish_step": r.finish_step,
            "ttft_steps": ttft_steps,
            "tpot_steps": tpot_steps,
            "ttft_s": ttft_s,
            "tpot_s": tpot_s,
        }

    def __repr__(self) -> str:
        s = self.scheduler
        return (
            f"ServingEngine(block_size={self.block_size}, num_blocks={self.num_blocks}, running={len(s.running)}, "
            f"waiting={len(s.waiting)}, steps={self.steps}, blocks_used={s.blocks_used()})"
        )
