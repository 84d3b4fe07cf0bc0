"""State-space duality (SSD, Mamba-2, Dao & Gu 2024): a selective SSM *is* masked linear attention.

Per head, with a scalar decay ``a_t = exp(dt_t · A)`` (``A < 0``, ``dt_t > 0``), state ``h (P, N)``:
``h_t = a_t h_{t−1} + dt_t x_t B_tᵀ`` and ``y_t = h_t C_t``. Unrolled,
``y_i = Σ_{j ≤ i} (C_i · B_j) · exp(Σ_{j<t≤i} dt_t A) · dt_j · x_j``: attention with scores ``C Bᵀ`` (C the query,
B the key, x the value), no softmax, times a 1-semiseparable causal decay mask. ``ssd_as_attention`` returns that
``(L, L)`` matrix; ``ssd`` computes the same thing as a recurrence or chunk by chunk (quadratic inside a chunk, a
scan over chunk states between them, Mamba-2's algorithm), every decay the ``exp`` of a directly summed segment of
``dt · A`` (never a difference of cumulative sums), in at least float32.

Shapes, head-first: x ``(batch, H, L, P)``, dt ``(batch, H, L)`` (positive, after softplus), A ``(H,)`` (negative),
B and C ``(batch, G, L, N)`` with ``H % G == 0`` (head h reads group ``h // (H // G)``), state ``(batch, H, P, N)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["ssd", "ssd_as_attention", "ssd_decay_mask"]


def _check(x, dt, A, B, C, initial_state=None, chunk_size=None) -> None:
    for name, t in (("x", x), ("dt", dt), ("A", A), ("B", B), ("C", C)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point torch.Tensor, got {getattr(t, 'dtype', type(t))}.")
    if x.dim() != 4:
        raise ValueError(f"x must be (batch, H, L, P), got {tuple(x.shape)}.")
    batch, heads, length, head_dim = x.shape
    if tuple(dt.shape) != (batch, heads, length):
        raise ValueError(f"dt must be (batch, H, L) = {(batch, heads, length)}, got {tuple(dt.shape)}.")
    if tuple(A.shape) != (heads,):
        raise ValueError(f"A must be (H,) = ({heads},), one decay rate per head; got {tuple(A.shape)}.")
    if bool((A > 0).any()) or bool((dt < 0).any()):
        raise ValueError("A must be <= 0 and dt >= 0 (the decay exp(dt · A) is in (0, 1]); A = -exp(A_log).")
    if B.dim() != 4 or B.shape != C.shape or B.shape[0] != batch or B.shape[2] != length or heads % B.shape[1]:
        raise ValueError(
            f"B and C must be (batch, G, L, N) with batch={batch}, L={length} and H={heads} a multiple of G; "
            f"got B {tuple(B.shape)}, C {tuple(C.shape)}."
        )
    if initial_state is not None and tuple(initial_state.shape) != (batch, heads, head_dim, B.shape[-1]):
        raise ValueError(
            f"initial_state must be (batch, H, P, N) = {(batch, heads, head_dim, B.shape[-1])}, "
            f"got {tuple(initial_state.shape)}."
        )
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size must be None (recurrence) or an int >= 1, got {chunk_size!r}.")


def _per_head(t: torch.Tensor, heads: int) -> torch.Tensor:
    """(batch, G, L, N) -> (batch, H, L, N): head h reads group h // (H // G)."""
    return t.repeat_interleave(heads // t.shape[1], dim=1) if t.shape[1] != heads else t


def _segment_sums(a: torch.Tensor) -> torch.Tensor:
    """``a (..., T)`` -> ``(..., T, T)``: ``[i, j] = a_{j+1} + ... + a_i`` for ``j <= i``, ``-inf`` above."""
    size = a.shape[-1]
    ones = torch.ones(size, size, dtype=torch.bool, device=a.device)  # (T, T)
    sums = a[..., :, None].expand(*a.shape, size).masked_fill(~ones.tril(-1), 0.0).cumsum(-2)  # (..., T, T)
    return sums.masked_fill(~ones.tril(), float("-inf"))  # (..., T, T)


def ssd_decay_mask(dt, A):
    """The 1-semiseparable causal mask ``(batch, H, L, L)``: ``[i, j] = exp(Σ_{j<t≤i} dt_t A)`` for ``j <= i``,
    else 0."""
    return _segment_sums(dt * A[:, None]).exp()  # (batch, H, L, L)


def ssd_as_attention(dt, A, B, C):
    """The matrix ``M (batch, H, L, L)`` with ``y = M @ x`` equal to the SSM from a zero state:
    ``M[i, j] = (C_i · B_j) · exp(Σ_{j<t≤i} dt_t A) · dt_j`` — attention scores ``C Bᵀ`` times the decay mask
    (``ssd_decay_mask``) times the step size of the key token; zero above the diagonal (causal)."""
    x_like = torch.empty(dt.shape[0], dt.shape[1], dt.shape[2], 1, dtype=dt.dtype, device=dt.device)
    _check(x_like, dt, A, B, C)
    heads = dt.shape[1]
    scores = _per_head(C, heads) @ _per_head(B, heads).transpose(-1, -2)  # (batch, H, L, L) C_i · B_j
    return scores * ssd_decay_mask(dt, A) * dt[:, :, None, :]  # (batch, H, L, L)


def _recurrent(x, dt, A, B, C, state):
    outputs = []
    for t in range(x.shape[2]):
        decay = (dt[:, :, t] * A).exp()[..., None, None]  # (batch, H, 1, 1)
        write = (dt[:, :, t, None] * x[:, :, t])[..., :, None] * B[:, :, t, None, :]  # (batch, H, P, N)
        state = decay * state + write  # (batch, H, P, N)
        outputs.append(state @ C[:, :, t, :, None])  # (batch, H, P, 1)
    if not outputs:
        return x.new_zeros(x.shape), state
    return torch.cat(outputs, dim=-1).transpose(-1, -2), state  # (batch, H, L, P)


def _chunked(x, dt, A, B, C, state, chunk_size):
    batch, heads, length, head_dim = x.shape
    pad = (-length) % chunk_size  # padding tokens: dt = 0 (no decay, no write), outputs dropped
    x, B, C = (F.pad(t, (0, 0, 0, pad)) for t in (x, B, C))  # (batch, H, L + pad, D)
    dt = F.pad(dt, (0, pad))  # (batch, H, L + pad)
    n = (length + pad) // chunk_size
    x, B, C = (t.reshape(batch, heads, n, chunk_size, t.shape[-1]) for t in (x, B, C))  # (batch, H, n, c, D)
    dt = dt.reshape(batch, heads, n, chunk_size)  # (batch, H, n, c)
    log_decay = dt * A[:, None, None]  # (batch, H, n, c)
    seg = _segment_sums(log_decay)  # (batch, H, n, c, c)
    values = x * dt[..., None]  # (batch, H, n, c, P): dt_j x_j
    within = (C @ B.transpose(-1, -2)) * seg.exp()  # (batch, H, n, c, c) the masked-attention block
    from_start = seg[..., :, 0].exp() * log_decay[..., 0].exp()[..., None]  # (batch, H, n, c) decay since entry
    to_end = seg[..., -1, :].exp()  # (batch, H, n, c) decay from token j to the chunk's end
    chunk_decay = from_start[..., -1]  # (batch, H, n)
    outputs = []
    for i in range(n):
        # y = within-chunk attention + the entering state read through C, decayed to token r
        entering = (C[:, :, i] @ state.transpose(-1, -2)) * from_start[:, :, i, :, None]  # (batch, H, c, P)
        outputs.append(within[:, :, i] @ values[:, :, i] + entering)  # (batch, H, c, P)
        written = (values[:, :, i] * to_end[:, :, i, :, None]).transpose(-1, -2) @ B[:, :, i]  # (batch, H, P, N)
        state = chunk_decay[:, :, i, None, None] * state + written  # (batch, H, P, N)
    if not outputs:
        return x.new_zeros(batch, heads, 0, head_dim), state
    return torch.cat(outputs, dim=2)[:, :, :length], state


def ssd(x, dt, A, B, C, *, chunk_size=None, initial_state=None):
    """The Mamba-2 SSM (no D skip, no gate: those belong to the layer). Returns ``(y (batch, H, L, P), state
    (batch, H, P, N))`` in x's dtype. chunk_size None = the recurrence in x's dtype; an int = the chunked SSD form in
    at least float32, equal up to rounding."""
    _check(x, dt, A, B, C, initial_state, chunk_size)
    dtype = x.dtype if chunk_size is None else torch.promote_types(x.dtype, torch.float32)
    batch, heads, _, head_dim = x.shape
    B, C = _per_head(B, heads).to(dtype), _per_head(C, heads).to(dtype)  # (batch, H, L, N)
    if initial_state is None:
        state = torch.zeros(batch, heads, head_dim, B.shape[-1], dtype=dtype, device=x.device)  # (batch, H, P, N)
    else:
        state = initial_state.to(dtype)
    args = (x.to(dtype), dt.to(dtype), A.to(dtype), B, C, state)
    y, state = _recurrent(*args) if chunk_size is None else _chunked(*args, chunk_size)
    return y.to(x.dtype), state.to(x.dtype)
