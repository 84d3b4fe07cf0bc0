"""Real pretrained weights running in attn_core's own layers.

- ``minilm``  all-MiniLM-L6-v2 (a BERT encoder) in our MultiHeadAttention, sha256-verified, offline
"""
