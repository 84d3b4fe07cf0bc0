"""Attention with a fixed-size state: linear attention and the delta rule (notebook 12d).

- ``linear_attention``  linear_attention, gated_delta_rule: recurrent and chunked forms of one recurrence
- ``gated_deltanet``    GatedDeltaNet (Qwen3-Next / Qwen3.5's layer) and LinearAttentionCache
"""
