"""Attention kernels in Triton (the optional ``triton`` extra: ``pip install -e ".[triton]"``).

- ``triton_attention``  FlashAttention-2, forward (``flash_forward``) and backward (``flash_backward``).
- ``schedule``  which tiles each program of those kernels visits: notebook 12b's figure and explorer (no triton).

Importing this package never imports triton: the kernels are defined on the first call, after the
``TRITON_INTERPRET`` check (the interpreter must be switched on before triton is imported).
"""

from attn_core.kernels.triton_attention import triton_attention

__all__ = ["triton_attention"]
