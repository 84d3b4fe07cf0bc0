"""What decoding keeps between steps: the KV cache and its paged form (notebooks 07, 13, 13b).

- ``kv_cache``         KVCache: one layer's keys and values, grown by doubling; ``window=`` / ``num_sinks=`` make it
                       a bounded ring buffer
- ``paged_cache``      PagedKVCache: sequences in fixed-size blocks of one shared pool, prefixes shared copy-on-write
- ``block_allocator``  the free list, reference counts and block tables behind PagedKVCache
"""
