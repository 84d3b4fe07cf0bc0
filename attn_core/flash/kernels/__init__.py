"""Attention kernels in Triton (the optional ``triton`` extra: ``pip install -e ".[triton]"``).

- ``triton_attention``  FlashAttention-2, forward (``flash_forward``) and backward (``flash_backward``).
  Which tiles each program visits is drawn by ``attn_core.viz.kernel_schedule`` (notebook 12b; no triton).

Importing this package never imports triton: the kernels are defined on the first call, after the
``TRITON_INTERPRET`` check (the interpreter must be switched on before triton is imported).
"""

from attn_core.flash.kernels.triton_attention import triton_attention

__all__ = ["triton_attention"]
