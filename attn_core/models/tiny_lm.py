"""A tiny decoder LM with a pluggable mixer, a seeded CPU training loop and synthetic tasks.

For notebooks that train the *same* small model with different attention-like mixers (softmax, learned sinks,
output gates, differential attention, linear attention, gated delta rule, hybrids) and compare them.

- ``TinyLM(vocab_size, hidden_dim, num_layers, mixer_factory, *, mlp_hidden=None)``: token embedding, then per
  layer ``x = x + mixer(norm(x))`` (and, with ``mlp_hidden``, ``x = x + mlp(norm(x))``), a final RMSNorm and a
  linear read-out. ``mixer_factory(layer_idx)`` returns an ``nn.Module`` whose ``forward(x, is_causal=True)``
  maps ``(B, L, hidden_dim)`` to ``(out (B, L, hidden_dim), weights (B, H, L, L) or None)``: every attention
  layer of ``attn_core`` fits (``lambda i: ac.GroupedQueryAttention(32, 2, 2, rope_base=10000.0)``); a mixer
  without a weight matrix (linear attention's recurrent form) returns None.
- ``Adam``: ``torch.optim.Adam``'s update written out (same arithmetic, same order). Importing ``torch.optim``
  imports ``torch._dynamo`` on the first optimizer, about half a second of CPU per process, which a notebook
  that must run in seconds pays on every run (notebook 12 measured it).
- ``train_lm(model, make_batch, *, steps, ...)`` -> ``TrainResult``: seeded Adam on fresh batches.
- ``lm_loss(logits, targets)``: cross-entropy over the targets that are not ``IGNORE`` (-100).
- Tasks, each ``(batch_size, generator) -> (inputs (B, L) long, targets (B, L) long, IGNORE where unscored)``:
  ``associative_recall_batch`` (multi-query associative recall, Zoology's MQAR) and
  ``repeated_sequence_batch`` (notebook 12's induction task). Bind the sizes with ``functools.partial``.
- ``first_token_share(weights)`` and ``residual_max(hidden)``: the two attention-sink measures (notebook 11's
  ``<bos>`` share; the largest absolute activation of the residual stream).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "IGNORE",
    "TinyLM",
    "Adam",
    "TrainResult",
    "train_lm",
    "lm_loss",
    "associative_recall_batch",
    "repeated_sequence_batch",
    "first_token_share",
    "residual_max",
]

IGNORE = -100  # a target that is not scored (F.cross_entropy's default ignore_index)


class TinyLM(nn.Module):
    """embedding -> num_layers × (RMSNorm -> mixer, added; optional RMSNorm -> MLP, added) -> RMSNorm -> logits.

    ``forward(tokens, *, return_hidden=False)``: tokens ``(B, L)`` long -> ``(logits (B, L, V), weights)`` where
    ``weights`` is a tuple with one entry per layer (the mixer's ``(B, H, L, L)`` or None); with
    ``return_hidden=True`` also ``hidden (num_layers + 1, B, L, hidden_dim)``: the residual stream after the
    embedding and after each layer (what ``residual_max`` measures).
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_dim: int,
        num_layers: int,
        mixer_factory: Callable[[int], nn.Module],
        *,
        mlp_hidden: int | None = None,
    ):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("hidden_dim", hidden_dim), ("num_layers", num_layers)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}.")
        if mlp_hidden is not None and (
            isinstance(mlp_hidden, bool) or not isinstance(mlp_hidden, int) or mlp_hidden < 1
        ):
            raise ValueError(f"mlp_hidden must be None (attention only) or a positive int, got {mlp_hidden!r}.")
        if not callable(mixer_factory):
            raise TypeError(
                f"mixer_factory must be a callable (layer_idx) -> nn.Module, got {type(mixer_factory).__name__}. "
                "For example: lambda i: ac.GroupedQueryAttention(32, 2, 2, rope_base=10000.0)."
            )
        self.vocab_size, self.hidden_dim, self.num_layers = vocab_size, hidden_dim, num_layers
        self.embed = nn.Embedding(vocab_size, hidden_dim)
        mixers = []
        for layer_idx in range(num_layers):
            mixer = mixer_factory(layer_idx)
            if not isinstance(mixer, nn.Module):
                raise TypeError(f"mixer_factory({layer_idx}) must return an nn.Module, got {type(mixer).__name__}.")
            mixers.append(mixer)
        self.mixers = nn.ModuleList(mixers)
        self.mixer_norms = nn.ModuleList(nn.RMSNorm(hidden_dim) for _ in range(num_layers))
        self.mlps = None
        if mlp_hidden is not None:  # a SiLU MLP per layer: where massive activations usually grow
            self.mlp_norms = nn.ModuleList(nn.RMSNorm(hidden_dim) for _ in range(num_layers))
            self.mlps = nn.ModuleList(
                nn.Sequential(nn.Linear(hidden_dim, mlp_hidden), nn.SiLU(), nn.Linear(mlp_hidden, hidden_dim))
                for _ in range(num_layers)
            )
        self.final_norm = nn.RMSNorm(hidden_dim)
        self.unembed = nn.Linear(hidden_dim, vocab_size)

    def forward(self, tokens: torch.Tensor, *, return_hidden: bool = False):
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.dtype != torch.long:
            shape = tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__
            raise ValueError(f"tokens must be a long tensor (batch, seq_len), got {shape}.")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.vocab_size):
            raise ValueError(
                f"token ids must lie in 0 .. {self.vocab_size - 1} (vocab_size={self.vocab_size}), "
                f"got {int(tokens.min())} .. {int(tokens.max())}."
            )
        x = self.embed(tokens)  # (B, L, E): the residual stream
        hidden, weights = [x], []
        for layer_idx, (norm, mixer) in enumerate(zip(self.mixer_norms, self.mixers, strict=True)):
            out, w = mixer(norm(x), is_causal=True)  # (B, L, E), (B, H, L, L) or None
            x = x + out  # (B, L, E): each layer adds what it read to the stream
            if self.mlps is not None:
                x = x + self.mlps[layer_idx](self.mlp_norms[layer_idx](x))  # (B, L, E)
            hidden.append(x)
            weights.append(w)
        logits = self.unembed(self.final_norm(x))  # (B, L, V)
        if return_hidden:
            return logits, tuple(weights), torch.stack(hidden)  # ..., (layers + 1, B, L, E)
        return logits, tuple(weights)


class Adam:
    """``torch.optim.Adam`` (no weight decay, no amsgrad) written out; the losses match it bit for bit."""

    def __init__(self, params, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params = [p for p in params if p.requires_grad]
        self.lr, (self.beta1, self.beta2), self.eps, self.steps = lr, betas, eps, 0
        self.avg = [torch.zeros_like(p) for p in self.params]  # m: running mean of each gradient
        self.avg_sq = [torch.zeros_like(p) for p in self.params]  # v: running mean of its square

    @torch.no_grad()
    def step(self) -> None:
        self.steps += 1
        correction1, correction2 = 1 - self.beta1**self.steps, 1 - self.beta2**self.steps  # m, v start at 0
        for p, m, v in zip(self.params, self.avg, self.avg_sq, strict=True):
            if p.grad is None:  # a parameter this loss did not reach (torch.optim skips it too)
                continue
            m.lerp_(p.grad, 1 - self.beta1)  # m = β1·m + (1 − β1)·g
            v.mul_(self.beta2).addcmul_(p.grad, p.grad, value=1 - self.beta2)  # v = β2·v + (1 − β2)·g²
            denom = (v.sqrt() / correction2**0.5).add_(self.eps)  # √v̂ + ε, p's shape
            p.addcdiv_(m, denom, value=-self.lr / correction1)  # p -= lr · m̂ / (√v̂ + ε)
            p.grad = None  # the next backward starts from no gradient


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits (B, L, V)`` against ``targets (B, L)`` over the targets that are not IGNORE."""
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits (B, L, V) and targets (B, L) disagree: {tuple(logits.shape)} vs {tuple(targets.shape)}."
        )
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)  # scalar


@dataclass(frozen=True)
class TrainResult:
    """What ``train_lm`` returns: the trained model, the loss before each update, wall-clock seconds."""

    model: nn.Module
    losses: tuple[float, ...]
    seconds: float  # varies from run to run: never print it into a stored output


def train_lm(
    model: nn.Module | Callable[[], nn.Module],
    make_batch: Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]],
    *,
    steps: int,
    lr: float = 1e-2,
    batch_size: int = 32,
    seed: int = 0,
    max_grad_norm: float | None = 1.0,
    on_step: Callable[[int, nn.Module], None] | None = None,
) -> TrainResult:
    """Train ``model`` with ``Adam`` on ``steps`` fresh batches of ``make_batch(batch_size, generator)``.

    Seeded: pass a zero-argument builder (``lambda: TinyLM(...)``) and the initial weights come from
    ``torch.manual_seed(seed)``; the batches always come from ``torch.Generator().manual_seed(seed + 1)``. Two calls
    with the same arguments give the same losses on one machine. ``max_grad_norm`` clips the global gradient norm
    (None: no clipping). ``on_step(step, model)`` runs before each update and once after the last (step = steps),
    in ``torch.no_grad()`` and eval mode, for checkpoints.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}.")
    if not isinstance(model, nn.Module):
        if not callable(model):
            raise TypeError(f"model must be an nn.Module or a zero-argument builder, got {type(model).__name__}.")
        torch.manual_seed(seed)  # the initial weights
        model = model()
    optimizer = Adam(model.parameters(), lr=lr)
    data = torch.Generator().manual_seed(seed + 1)  # the batches
    losses = []
    start = time.perf_counter()
    for step in range(steps + 1):
        if on_step is not None:
            model.eval()
            with torch.no_grad():
                on_step(step, model)
        if step == steps:
            break
        model.train()
        inputs, targets = make_batch(batch_size, data)  # (B, L), (B, L)
        logits = model(inputs)[0]  # (B, L, V)
        loss = lm_loss(logits, targets)
        losses.append(loss.item())
        loss.backward()
        if max_grad_norm is not None:
            params = [p for p in model.parameters() if p.grad is not None]
            total = torch.sqrt(sum(p.grad.pow(2).sum() for p in params))  # scalar: the global gradient norm
            factor = (max_grad_norm / (total + 1e-6)).clamp(max=1.0)  # scalar, <= 1
            for p in params:
                p.grad.mul_(factor)
        optimizer.step()
    model.eval()
    return TrainResult(model=model, losses=tuple(losses), seconds=time.perf_counter() - start)


def associative_recall_batch(
    batch_size: int,
    generator: torch.Generator,
    *,
    num_pairs: int = 8,
    num_queries: int = 4,
    vocab_size: int = 64,
    bos: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-query associative recall (Arora et al. 2023, Zoology's MQAR), one batch.

    Each row lists ``num_pairs`` key-value pairs ``k1 v1 k2 v2 …`` (distinct keys from the lower half of the
    vocabulary, values from the upper half), then ``num_queries`` of those keys, each followed by its value.
    Scored targets: the value after each queried key (``IGNORE`` elsewhere). Returns ``inputs (B, L)`` and
    ``targets (B, L)`` with ``L = 2·(num_pairs + num_queries) - 1`` (inputs drop the last token, targets the first).
    ``bos``: a token id put first in every row (one more position, never a target), as a real model's ``<bos>``:
    a fixed key that carries no information, where attention sinks form. It lies outside the task's tokens
    (``bos >= vocab_size``; give the model ``vocab_size + 1`` embeddings for ``bos = vocab_size``).
    """
    if bos is not None and (isinstance(bos, bool) or not isinstance(bos, int) or bos < vocab_size):
        raise ValueError(
            f"bos must be None or a token id >= vocab_size ({vocab_size}), outside the keys and values, got {bos!r}."
        )
    half = vocab_size // 2
    if num_pairs > half or num_queries > num_pairs or min(num_pairs, num_queries) < 1:
        raise ValueError(
            f"need 1 <= num_queries ({num_queries}) <= num_pairs ({num_pairs}) <= vocab_size // 2 ({half}): "
            "keys are distinct tokens of the lower half of the vocabulary."
        )
    keys = torch.rand(batch_size, half, generator=generator).argsort(-1)[:, :num_pairs]  # (B, P) distinct
    values = half + torch.randint(0, vocab_size - half, (batch_size, num_pairs), generator=generator)  # (B, P)
    asked = torch.rand(batch_size, num_pairs, generator=generator).argsort(-1)[:, :num_queries]  # (B, Q)
    context = torch.stack([keys, values], dim=-1).flatten(1)  # (B, 2P): k1 v1 k2 v2 ...
    queries = torch.stack([keys.gather(1, asked), values.gather(1, asked)], dim=-1).flatten(1)  # (B, 2Q)
    sequence = torch.cat([context, queries], dim=1)  # (B, 2P + 2Q)
    targets = torch.full_like(sequence, IGNORE)  # (B, 2P + 2Q)
    targets[:, 2 * num_pairs + 1 :: 2] = sequence[:, 2 * num_pairs + 1 :: 2]  # the queried values
    if bos is not None:
        sequence = torch.cat([torch.full((batch_size, 1), bos), sequence], dim=1)  # (B, 1 + 2P + 2Q)
        targets = torch.cat([torch.full((batch_size, 1), IGNORE), targets], dim=1)  # (B, 1 + 2P + 2Q)
    return sequence[:, :-1], targets[:, 1:]  # (B, L), (B, L)


def repeated_sequence_batch(
    batch_size: int, generator: torch.Generator, *, seq_len: int = 24, vocab_size: int = 16, min_period: int = 4
) -> tuple[torch.Tensor, torch.Tensor]:
    """Notebook 12's induction task: ``period`` distinct random tokens repeated (period drawn per row in
    ``min_period .. seq_len // 2``). Scored: the targets after the first period (predictable by copying)."""
    if not 2 <= min_period <= seq_len // 2 or seq_len // 2 > vocab_size:
        raise ValueError(
            f"need 2 <= min_period ({min_period}) <= seq_len // 2 ({seq_len // 2}) <= vocab_size ({vocab_size})."
        )
    periods = torch.randint(min_period, seq_len // 2 + 1, (batch_size,), generator=generator)  # (B,)
    shuffled = torch.rand(batch_size, vocab_size, generator=generator).argsort(dim=-1)  # (B, V)
    position = torch.arange(seq_len + 1)  # (L + 1,)
    sequence = shuffled.gather(1, position % periods[:, None])  # (B, L + 1)
    predictable = torch.arange(1, seq_len + 1) >= periods[:, None]  # (B, L): seen one period ago
    targets = sequence[:, 1:].masked_fill(~predictable, IGNORE)  # (B, L)
    return sequence[:, :-1], targets  # (B, L), (B, L)


def first_token_share(weights: torch.Tensor | Sequence[torch.Tensor | None]) -> torch.Tensor:
    """Mean weight on key 0 over queries ``1 .. L-1`` (query 0 can only see key 0), averaged over the batch.

    ``weights (B, H, L, L)`` -> ``(H,)``; a sequence of per-layer weights (``TinyLM``'s) -> ``(layers, H)``
    (a layer whose mixer returned None gives a row of NaN: it has no weights to measure).
    """
    if isinstance(weights, torch.Tensor):
        if weights.ndim != 4 or weights.shape[-1] < 2:
            raise ValueError(f"weights must be (B, H, L, L) with L >= 2, got {tuple(weights.shape)}.")
        return weights[:, :, 1:, 0].mean(dim=(0, 2))  # (H,)
    heads = max((w.shape[1] for w in weights if w is not None), default=1)
    return torch.stack(
        [first_token_share(w) if w is not None else torch.full((heads,), float("nan")) for w in weights]
    )  # (layers, H)


def residual_max(hidden: torch.Tensor) -> torch.Tensor:
    """Largest absolute activation of the residual stream per layer: ``(layers + 1, B, L, E)`` -> ``(layers + 1,)``."""
    return hidden.abs().flatten(1).max(dim=1).values  # (layers + 1,)
