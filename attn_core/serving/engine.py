"""``ServingEngine``: continuous batching, chunked prefill, prefix caching and preemption on a real decoder
(vLLM's ``LLMEngine`` / ``LLM.generate``, nano-vllm's ``LLMEngine``), greedy and token for token equal to
``lm.generate``.

Parts, as in vLLM v1 and nano-vllm: :class:`~attn_core.serving.block_manager.BlockManager` (the KV cache manager:
one allocator for all layers, chained block hashes, refcounts, LRU of cached blocks),
:class:`~attn_core.serving.scheduler.Scheduler` (the step rules) and
:func:`~attn_core.serving.model_runner.run_step` (the model runner). This file is the front door:
``add_request`` / ``step`` / ``run`` and the statistics (TTFT and TPOT in steps and in seconds).
"""

from __future__ import annotations

import numbers
import time

import torch

from attn_core.caches.paged_cache import PagedKVCache
from attn_core.serving.block_manager import BlockManager
from attn_core.serving.model_runner import run_step
from attn_core.serving.scheduler import Request, Scheduler

__all__ = ["ServingEngine"]


def _check_size(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}.")


class ServingEngine:
    """Serve many greedy requests at once on ``lm`` (a Gemma 3 from ``ac.load_gemma3``).

    ``add_request(prompt_ids, max_new_tokens, *, request_id=None)`` queues a request; ``step()`` runs one
    iteration and returns the ``(request_id, token)`` pairs it emitted; ``run()`` steps until idle and returns
    every request's tokens. Each request gets exactly ``max_new_tokens`` tokens (no stop at ``<eos>``), the ones
    ``lm.generate`` gives it alone, whatever the batch, chunking, prefix hits and preemptions.
    """

    def __init__(
        self,
        lm,
        *,
        block_size: int = 16,
        num_blocks: int = 256,
        max_num_seqs: int = 8,
        max_num_batched_tokens: int = 256,
        prefix_caching: bool = True,
    ) -> None:
        for name, value in (
            ("block_size", block_size),
            ("num_blocks", num_blocks),
            ("max_num_seqs", max_num_seqs),
            ("max_num_batched_tokens", max_num_batched_tokens),
        ):
            _check_size(name, value)
        if not isinstance(prefix_caching, bool):
            raise ValueError(f"prefix_caching must be True or False, got {prefix_caching!r}.")
        if not (hasattr(lm, "layers") and hasattr(lm, "config") and hasattr(lm, "embed")):
            raise TypeError(f"lm must be a Gemma3 from ac.load_gemma3(...), got {type(lm).__name__}.")
        self.lm, self.block_size, self.num_blocks = lm, block_size, num_blocks
        self.blocks = BlockManager(num_blocks, block_size, prefix_caching=prefix_caching)
        self.caches = PagedKVCache.for_layers(len(lm.layers), block_size, num_blocks, allocator=self.blocks)
        self.scheduler = Scheduler(
            self.caches[0], self.blocks, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens
        )
        self.requests: dict[int | str, Request] = {}  # every request ever added, in arrival order
        self.steps = 0
        self.max_step_tokens = 0
        self.timeline: list[list[tuple[int | str, int]]] = []  # per step: (request, tokens computed)
        self._next_id = 0

    # ------------------------------------------------------------------ requests
    def add_request(self, prompt_ids, max_new_tokens: int, *, request_id: int | str | None = None) -> int | str:
        prompt = self._check_prompt(prompt_ids)
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}.")
        capacity = self.num_blocks * self.block_size
        if len(prompt) + max_new_tokens - 1 > capacity:
            raise ValueError(
                f"a prompt of {len(prompt)} tokens + max_new_tokens={max_new_tokens} needs keys for "
                f"{len(prompt) + max_new_tokens - 1} tokens, more than the pool's num_blocks * block_size = "
                f"{self.num_blocks} * {self.block_size} = {capacity}: it never fits, even alone. Shorten it or "
                "build the engine with more num_blocks."
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
        elif isinstance(request_id, bool) or not isinstance(request_id, int | str):
            raise ValueError(f"request_id must be None, an int or a str, got {request_id!r}.")
        if request_id in self.requests:
            raise ValueError(f"request_id {request_id!r} was already used by this engine; ids are unique for its life.")
        request = Request(request_id, prompt, max_new_tokens, arrival_step=self.steps)
        self.requests[request_id] = request
        self.scheduler.waiting.append(request)
        return request_id

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

    @torch.no_grad()
    def step(self) -> list[tuple[int | str, int]]:
        if not self.has_unfinished():
            return []  # idle: no step counted
        self.steps += 1
        scheduled = self.scheduler.schedule()
        work = [
            (r.rid, r.tokens[r.num_computed : r.num_computed + n], r.num_computed, r.num_computed + n == len(r.tokens))
            for r, n in scheduled
        ]
        next_tokens = run_step(self.lm, self.caches, work)
        self.timeline.append([(r.rid, n) for r, n in scheduled])
        self.max_step_tokens = max(self.max_step_tokens, sum(n for _, n in scheduled))
        emitted, now = [], time.perf_counter()
        for request, num_tokens in scheduled:
            self.scheduler.computed(request, num_tokens)
            if request.num_computed < len(request.tokens):
                continue  # a prefill chunk short of the last token: no logits wanted yet
            token = next_tokens[request.rid]
            request.output.append(token)
            emitted.append((request.rid, token))
            if request.first_token_step is None:
                request.first_token_step, request.first_token_time = self.steps, now
            if request.finished:
                request.finish_step, request.finish_time = self.steps, now
                self.scheduler.finish(request)
        return emitted

    def run(self) -> dict[int | str, list[int]]:
        while self.has_unfinished():
            self.step()
        return {rid: list(request.output) for rid, request in self.requests.items()}

    # ------------------------------------------------------------------ statistics
    def stats(self, request_id: int | str | None = None) -> dict:
        if request_id is None:
            reqs = self.requests.values()
            return {
                "steps": self.steps,
                "num_preemptions": self.scheduler.num_preemptions,
                "prefix_hit_tokens": sum(r.cached_tokens for r in reqs),
                "computed_tokens": sum(r.computed_tokens for r in reqs),
                "max_step_tokens": self.max_step_tokens,
                "blocks_used": self.scheduler.blocks_used(),
                "peak_blocks_used": self.scheduler.peak_blocks_used,
            }
        if isinstance(request_id, bool) or not isinstance(request_id, int | str) or request_id not in self.requests:
            raise ValueError(f"no request {request_id!r} in this engine (known: {list(self.requests)[:10]}).")
        r = self.requests[request_id]
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
