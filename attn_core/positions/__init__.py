"""Where a token is: rotary position embeddings and their long-context scalings (notebooks 06, 06b).

- ``rope``          apply_rope, rope_angles: rotate query/key pairs by position (half-split or interleaved pairs,
                    partial rotary)
- ``rope_scaling``  rope_frequencies: linear, NTK-aware, Llama 3 and YaRN frequencies and attention factors
"""
