"""Real pretrained weights running in attn_core's own layers, and the small models the notebooks train.

- ``minilm``   all-MiniLM-L6-v2 (a BERT encoder) in our MultiHeadAttention, sha256-verified, offline
- ``gemma3``   Gemma 3 270M from the packaged GGUF in our GroupedQueryAttention + KVCache (``gemma3_cache``,
  ``gemma3_convert``, ``gemma3_padding``, ``gemma3_reference``); ``generation`` (sampling), ``speculative``
  (prompt-lookup speculative decoding)
- ``tiny_lm``  TinyLM with a pluggable mixer per layer, a seeded torch.optim-free training loop, associative-recall
  and induction tasks, the two attention-sink measures
"""
