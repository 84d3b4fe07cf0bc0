"""Attention with a fixed-size state: linear attention and the delta rule (notebook 12d).

- ``linear_attention``  linear_attention, gated_delta_rule: recurrent and chunked forms of one recurrence
- ``gated_deltanet``    GatedDeltaNet (Qwen3-Next / Qwen3.5's layer) and LinearAttentionCache
- ``kda``               kda_rule, KimiDeltaAttention: the delta rule with a per-channel decay (Kimi Linear)
- ``ssd``, ``mamba2``   ssd, ssd_as_attention, ssd_decay_mask, Mamba2Mixer: Mamba-2's SSM as masked attention
- ``lightning``         lightning_attention, LightningAttention: MiniMax's block-wise decayed linear attention
"""
