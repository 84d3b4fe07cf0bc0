"""DeepSeek's attention: a small latent per token, then learned sparsity, then compression (notebooks 09, 09b).

- ``latent_attention``      MultiHeadLatentAttention: MLA (V2/V3), the cache holds one latent per token
- ``lightning_indexer``     LightningIndexer: V3.2's cheap scorer that picks each query's top-k keys
- ``sparse_attention``      sparse_attention: each query reads only its listed keys, gathered
- ``compressor``            V4's compressors: every m tokens pooled into one key/value entry
- ``compressed_cache``      CompressedKVCache: V4's decoding cache (window + compressed entries)
- ``compressed_attention``  CompressedAttention: V4's layer (sliding window, heavily and lightly compressed)
"""
