"""DeepSeek-V3.2's lightning indexer: a cheap scorer that picks the top-k keys each query will attend to.

MLA (notebook 09) shrank the KV cache, but every query still reads every cached token: prefill is O(L²) and
each decode step reads the whole cache. DeepSeek Sparse Attention puts a small scorer in front of MLA:

    score[b, i, j] = Σ_h w[b, i, h] · relu(q[b, h, i] · k[b, j]) / sqrt(head_dim)

with few heads (64 × 128 in V3.2), one key per token shared by the heads (``k = LayerNorm(wk(x))``, cached:
``head_dim`` more numbers per token) and per-query head weights ``w = weights_proj(x) / sqrt(num_heads)``.
Only the ranking matters, so there is no softmax (and the head weights may be negative); ReLU keeps a head
that does not care about a key from voting against it, and is cheap in FP8 (DeepSeek's production kernel).
The queries reuse MLA's query latent ``q_latent = q_a_layernorm(q_a_proj(x))``.

RoPE: the indexer rotates the FIRST ``qk_rope_head_dim`` features of q and k in rotate-half pairs
``(i, i + r/2)`` (not interleaved), while MLA rotates the LAST ones interleaved, with the same frequencies.
Parameter names follow Hugging Face's ``DeepseekV32Indexer`` (``state_dict`` loads as is). Hugging Face scores
in float32, returns int32 indices and may pick a hidden (-inf) key, relying on the attention mask to drop it;
here scores stay in x's dtype, indices are int64 and a hidden pick is ``-1``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attn_core.attention import check_flag
from attn_core.masks import causal_mask, check_mask
from attn_core.positions.rope import _as_token_positions, _check_base, apply_rope

__all__ = ["LightningIndexer", "make_indexer", "scatter_weights", "top_k_picks", "visible_keys"]


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


class LightningIndexer(nn.Module):
    """DeepSeek-V3.2's indexer (see the module docstring).

    ``indices, scores = indexer(x, q_latent, mask=None, *, is_causal=False, positions=None)``: x
    ``(B, L, hidden_dim)``, q_latent ``(B, L, q_lora_rank)``; mask boolean (True = may attend) broadcastable to
    ``(B, 1, Lq, Lk)``; ``is_causal`` bottom-right aligned; positions ``(L,)`` or ``(B, L)`` (default
    ``0 .. L-1``). Returns indices ``(B, Lq, min(topk, Lk))`` int64 best first (``-1`` = a hidden key: a query that
    sees n < topk keys gets its n keys, then -1s) and scores ``(B, Lq, Lk)`` in x's dtype, ``-inf`` where hidden.
    """

    def __init__(
        self,
        hidden_dim: int,
        q_lora_rank: int,
        *,
        num_heads: int,
        head_dim: int,
        qk_rope_head_dim: int,
        topk: int,
        rope_base: float = 10000.0,
    ):
        super().__init__()
        for name, value in (
            ("hidden_dim", hidden_dim),
            ("q_lora_rank", q_lora_rank),
            ("num_heads", num_heads),
            ("head_dim", head_dim),
            ("qk_rope_head_dim", qk_rope_head_dim),
            ("topk", topk),
        ):
            _positive_int(name, value)
        if qk_rope_head_dim % 2 or qk_rope_head_dim > head_dim:
            raise ValueError(
                f"qk_rope_head_dim must be even (RoPE rotates pairs) and at most head_dim={head_dim} (it rotates the "
                f"first qk_rope_head_dim features of each indexer head), got {qk_rope_head_dim}."
            )
        self.hidden_dim, self.q_lora_rank, self.num_heads, self.head_dim = hidden_dim, q_lora_rank, num_heads, head_dim
        self.qk_rope_head_dim, self.topk = qk_rope_head_dim, topk
        self.rope_base = _check_base(rope_base)
        self.rope_scaling = None  # an MLA layer with rope_scaling= sets its own here: one rotation for both
        self.wq_b = nn.Linear(q_lora_rank, num_heads * head_dim, bias=False)  # q_lora_rank -> H * D
        self.wk = nn.Linear(hidden_dim, head_dim, bias=False)  # hidden -> D: one key per token, all heads
        self.k_norm = nn.LayerNorm(head_dim, eps=1e-6)  # with weight and bias, as DeepSeek's
        self.weights_proj = nn.Linear(hidden_dim, num_heads, bias=False)  # hidden -> H: per-query head weights

    def extra_repr(self) -> str:
        return (
            f"hidden_dim={self.hidden_dim}, q_lora_rank={self.q_lora_rank}, num_heads={self.num_heads}, "
            f"head_dim={self.head_dim}, qk_rope_head_dim={self.qk_rope_head_dim}, topk={self.topk}, "
            f"rope_base={self.rope_base}"
        )

    def _rotate_first(self, t: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """RoPE on the first qk_rope_head_dim features, rotate-half pairs; the rest pass through."""
        rope = self.qk_rope_head_dim
        kwargs = {"base": self.rope_base, "interleaved": False, "scaling": self.rope_scaling}
        rotated = apply_rope(t[..., :rope], positions, **kwargs)  # (..., L, rope)
        return torch.cat([rotated, t[..., rope:]], dim=-1)  # (..., L, D)

    def index_keys(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The rotated index key of every token: ``(B, L, head_dim)``; positions ``(L,)`` or ``(B, L)``."""
        keys = self.k_norm(self.wk(x))  # (B, L, D)
        return self._rotate_first(keys, positions)  # (B, L, D)

    def score(
        self, x: torch.Tensor, q_latent: torch.Tensor, keys: torch.Tensor, visible: torch.Tensor, positions
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores of queries ``x (B, Lq, hidden)`` against ``keys (B, Lk, D)`` and their top-k.

        ``visible`` boolean broadcastable to ``(B, Lq, Lk)``; ``positions`` the queries' ``(Lq,)`` or ``(B, Lq)``.
        Used by :meth:`pick` (an MLA layer, whose keys come from its cache) and by :meth:`forward`."""
        batch, q_len, _ = x.shape
        q = self.wq_b(q_latent).view(batch, q_len, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, Lq, D)
        q_positions = positions if positions.ndim == 1 else positions[:, None]  # (Lq,) or (B, 1, Lq)
        q = self._rotate_first(q, q_positions)  # (B, H, Lq, D)
        per_head = torch.relu(q @ keys.unsqueeze(1).transpose(-2, -1))  # (B, H, Lq, Lk): one key for all heads
        head_weights = self.weights_proj(x) / math.sqrt(self.num_heads)  # (B, Lq, H): no softmax
        scores = torch.einsum("bqh,bhqk->bqk", head_weights, per_head) / math.sqrt(self.head_dim)  # (B, Lq, Lk)
        scores = scores.masked_fill(~visible, -math.inf)  # (B, Lq, Lk)
        return top_k_picks(scores, self.topk), scores  # (B, Lq, k) int64, (B, Lq, Lk)

    def forward(
        self,
        x: torch.Tensor,
        q_latent: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        is_causal: bool = False,
        positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != self.hidden_dim:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must have shape (B, L, hidden_dim={self.hidden_dim}), got {shape}.")
        batch, length, _ = x.shape
        if not isinstance(q_latent, torch.Tensor) or q_latent.shape != (batch, length, self.q_lora_rank):
            shape = tuple(q_latent.shape) if isinstance(q_latent, torch.Tensor) else type(q_latent).__name__
            raise ValueError(
                f"q_latent must have shape (B, L, q_lora_rank) = ({batch}, {length}, {self.q_lora_rank}) "
                f"(MLA's q_a_layernorm(q_a_proj(x))), got {shape}."
            )
        check_flag("is_causal", is_causal)
        if positions is None:
            positions = torch.arange(length, device=x.device)  # (L,)
        else:
            positions = _as_token_positions(positions, x.device)  # (L,) or (B, L)
            if positions.shape not in ((length,), (batch, length), (1, length)):
                raise ValueError(
                    f"positions must have shape (L,) = ({length},) or (B, L) = ({batch}, {length}), "
                    f"got {tuple(positions.shape)}."
                )
        visible = visible_keys(mask, is_causal, (batch, 1, length, length), x.device)  # (B or 1, Lq, Lk)
        keys = self.index_keys(x, positions)  # (B, Lk, D)
        return self.score(x, q_latent, keys, visible, positions)  # (B, Lq, k) int64, (B, Lq, Lk)

    def pick(
        self, x: torch.Tensor, q_latent: torch.Tensor, keys: torch.Tensor, mask, is_causal: bool, positions, heads: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """For an attention layer with ``heads`` heads over ``keys (B, Lk, D)`` (its cache): the top-k indices
        ``(B, Lq, k)`` and the boolean mask ``(B, 1, Lq, Lk)`` of the picked keys (True = may attend).

        ``mask`` is the layer's (broadcastable to ``(B, heads, Lq, Lk)``, but one for all heads: the picks are
        shared by every head); ``positions`` the queries' ``(Lq,)`` or ``(B, Lq)``."""
        batch, q_len, k_len = x.shape[0], x.shape[1], keys.shape[1]
        visible = visible_keys(mask, is_causal, (batch, heads, q_len, k_len), x.device)  # (B or 1, Lq, Lk)
        indices, _ = self.score(x, q_latent, keys, visible, positions)  # (B, Lq, k)
        picked = torch.zeros(batch, q_len, k_len + 1, dtype=torch.bool, device=x.device)  # (B, Lq, Lk + 1)
        picked.scatter_(-1, torch.where(indices < 0, k_len, indices), True)  # slot Lk takes the empty picks
        return indices, picked[..., :k_len].unsqueeze(1)  # (B, Lq, k), (B, 1, Lq, Lk)


def top_k_picks(scores: torch.Tensor, topk: int) -> torch.Tensor:
    """The ``min(topk, Lk)`` best keys of each row of ``scores (..., Lk)``, best first, ``-1`` for a hidden
    (``-inf``) key. ``torch.topk``, as Hugging Face and DeepSeek: so the picks are theirs. Among EQUAL scores
    its choice is implementation-defined and depends on the row's length (a decode step's row is shorter than
    the full pass's), and ReLU scores do tie (0 when no head fires for two keys): a tie across the k-th place
    can then pick differently in decoding than in one pass, in Hugging Face as here. With many heads (64 in
    V3.2 and V4) such ties practically never happen."""
    best, indices = scores.topk(min(topk, scores.shape[-1]), dim=-1)  # (..., k) each, best first
    return indices.masked_fill(best == -math.inf, -1)  # (..., k): a hidden key is no pick


def visible_keys(mask, is_causal: bool, weights_shape: tuple[int, int, int, int], device) -> torch.Tensor:
    """``mask`` (broadcastable to ``weights_shape`` = (B, H, Lq, Lk), the same for every head) AND the
    bottom-right causal mask when ``is_causal``: boolean ``(B or 1, Lq, Lk)``, what the indexer may pick."""
    q_len, k_len = weights_shape[-2:]
    visible = torch.ones(1, q_len, k_len, dtype=torch.bool, device=device)  # (1, Lq, Lk)
    if mask is not None:
        check_mask(mask, weights_shape, device=device)
        if mask.ndim >= 3 and mask.shape[-3] != 1:
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} varies over heads, but the indexer picks one set of keys per "
                "query for all heads: pass a mask of shape (B, 1, Lq, Lk) or (Lq, Lk)."
            )
        visible = visible & (mask if mask.ndim < 3 else mask.squeeze(-3))  # (B or 1, Lq, Lk)
    if is_causal:
        visible = visible & causal_mask(q_len, k_len, device=device)  # (B or 1, Lq, Lk), bottom-right
    return visible


def make_indexer(layer: nn.Module, topk: object, num_heads: object, head_dim: object) -> LightningIndexer:
    """The indexer of an MLA layer (DeepSeek-V3.2's ``DeepseekV32Attention`` = V3's MLA + this), sharing its
    query latent, rotary width, base and scaling."""
    if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
        raise ValueError(f"index_topk must be a positive int (keys each query keeps; 2048 in V3.2), got {topk!r}.")
    if layer.q_lora_rank is None:
        raise ValueError(
            "index_topk needs q_lora_rank: the indexer's queries are made from MLA's query latent "
            "q_a_layernorm(q_a_proj(x)) (q_lora_rank=1536 in V3.2)."
        )
    _positive_int("index_n_heads", num_heads)
    _positive_int("index_head_dim", head_dim)
    if head_dim < layer.qk_rope_head_dim:
        raise ValueError(
            f"index_head_dim ({head_dim}) must be at least qk_rope_head_dim ({layer.qk_rope_head_dim}): the indexer "
            "rotates the first qk_rope_head_dim features of its heads."
        )
    indexer = LightningIndexer(
        layer.hidden_dim,
        layer.q_lora_rank,
        num_heads=num_heads,
        head_dim=head_dim,
        qk_rope_head_dim=layer.qk_rope_head_dim,
        topk=topk,
        rope_base=layer.rope_base,
    )
    indexer.rope_scaling = layer.rope_scaling
    return indexer


def scatter_weights(picked_weights: torch.Tensor, indices: torch.Tensor, k_len: int) -> torch.Tensor:
    """Sparse weights ``(B, H, Lq, k)`` back in place: ``(B, H, Lq, Lk)``, 0 off the picks (``-1`` adds 0)."""
    slots = indices.clamp(min=0)[:, None].expand(-1, picked_weights.shape[1], -1, -1)  # (B, H, Lq, k)
    dense = picked_weights.new_zeros(*picked_weights.shape[:-1], k_len)  # (B, H, Lq, Lk)
    return dense.scatter_add(-1, slots, picked_weights)  # an empty pick has weight 0: adding it changes nothing
