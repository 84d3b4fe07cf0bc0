"""A small serving engine on the real Gemma 3: continuous batching, chunked prefill, prefix caching (blocks released
tail first), preemption by recompute, sliding-window layers that keep only their window (``kv_groups``), stop
tokens, per-request sampling, abort and a transactional step, mapped part by part to vLLM v1 and nano-vllm."""

from attn_core.serving.block_manager import BlockManager, chain_block_hashes
from attn_core.serving.engine import ServingEngine

__all__ = ["ServingEngine", "BlockManager", "chain_block_hashes"]
