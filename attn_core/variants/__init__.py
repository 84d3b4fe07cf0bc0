"""Softmax attention, changed in one place (notebook 12c).

- ``differential_attention``  DifferentialAttention: DiffLlama's two softmax maps subtracted per head pair
- ``flex_variants``           soft-capping, ALiBi, document masks... as FlexAttention score_mod / mask_mod functions
"""
