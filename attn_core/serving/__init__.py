"""A small serving engine on the real Gemma 3 (issue #26): continuous batching, chunked prefill, prefix caching
and preemption by recompute, mapped part by part to vLLM v1 and nano-vllm."""

from attn_core.serving.block_manager import BlockManager, chain_block_hashes
from attn_core.serving.engine import ServingEngine

__all__ = ["ServingEngine", "BlockManager", "chain_block_hashes"]
