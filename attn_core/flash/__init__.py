"""FlashAttention: attention in tiles, never storing the (Lq, Lk) weights (notebooks 08, 12, 12b).

- ``tiled``           tiled_attention: the forward pass with a running max and sum (online softmax)
- ``tiled_backward``  its hand-written backward, recomputing tiles from the saved log-sum-exp
- ``merge``           merge_attention: results over disjoint keys combined through their log-sum-exps
- ``fa4_tricks``      FlashAttention-4's conditional rescaling and software exp2, counted
- ``kernels/``        the same algorithm as Triton kernels (the optional ``triton`` extra)
"""
