"""The notebook-05 checkers accept right answers and diagnose the usual wrong ones."""

import pytest
import torch

import attn_core as ac
from attn_core.exercises import masks_dropout as ex


def _verdict(capsys) -> str:
    return capsys.readouterr().out


# ----- exercise 1: sliding window ---------------------------------------------------------------


def sliding_right(seq_len, window):
    query = torch.arange(seq_len).unsqueeze(-1)  # (L, 1)
    key = torch.arange(seq_len)  # (L,)
    return (key <= query) & (query - key < window)  # (L, L)


def test_sliding_window_accepts_scratch_and_library(capsys):
    assert ex.check_sliding_window_mask(sliding_right)
    assert "✅" in _verdict(capsys)
    assert ex.check_sliding_window_mask(ac.sliding_window_mask)


@pytest.mark.parametrize(
    ("wrong", "diagnosis"),
    [
        (lambda L, w: ~sliding_right(L, w), "flipped convention"),
        (lambda L, w: sliding_right(L, w + 1), "one too wide"),
        (lambda L, w: sliding_right(L, w).float(), "dtype torch.float32"),
        (lambda L, w: (torch.arange(L)[:, None] - torch.arange(L)).abs() < w, "forgot the causal half"),
        (lambda L, w: sliding_right(L, w)[None], "wrong shape"),
    ],
)
def test_sliding_window_diagnoses(capsys, wrong, diagnosis):
    assert ex.check_sliding_window_mask(wrong) is False
    assert diagnosis in _verdict(capsys)


@pytest.mark.parametrize("stub", [None, ..., lambda L, w: ...])
def test_sliding_window_not_done(capsys, stub):
    assert ex.check_sliding_window_mask(stub) is False
    assert "not attempted" in _verdict(capsys)


def test_sliding_window_not_implemented_and_crash(capsys):
    def raises(seq_len, window):
        raise NotImplementedError

    assert ex.check_sliding_window_mask(raises) is False
    assert "not attempted" in _verdict(capsys)
    assert ex.check_sliding_window_mask(lambda L, w: 1 / 0) is False
    assert "raised ZeroDivisionError" in _verdict(capsys)


# ----- exercise 2: causal + padding ---------------------------------------------------------------


def causal_padding_right(lengths, seq_len):
    return ac.padding_mask(lengths, seq_len) & ac.causal_mask(seq_len)  # (B, 1, L, L)


def test_causal_padding_accepts(capsys):
    assert ex.check_causal_padding_mask(causal_padding_right)
    assert "✅" in _verdict(capsys)


@pytest.mark.parametrize(
    ("wrong", "diagnosis"),
    [
        (lambda lengths, L: causal_padding_right(lengths, L)[:, 0], "HEAD axis"),
        (lambda lengths, L: ac.causal_mask(L).expand(len(lengths), 1, L, L), "forgot the padding"),
        (lambda lengths, L: ac.padding_mask(lengths, L), "only the padding part"),
        (lambda lengths, L: ac.padding_mask(lengths, L) | ac.causal_mask(L), "combined with |"),
        (lambda lengths, L: ~causal_padding_right(lengths, L), "flipped convention"),
        (
            lambda lengths, L: causal_padding_right(lengths, L) & ac.padding_mask(lengths, L).transpose(-1, -2),
            "padded QUERIES",
        ),
    ],
)
def test_causal_padding_diagnoses(capsys, wrong, diagnosis):
    assert ex.check_causal_padding_mask(wrong) is False
    assert diagnosis in _verdict(capsys)


# ----- exercise 3: nn.MultiheadAttention masks -----------------------------------------------------


def from_mha_right(attn_mask, key_padding_mask):
    return ac.mask_from_blocked(attn_mask) & ac.mask_from_blocked(key_padding_mask)[:, None, None, :]


def test_from_mha_accepts(capsys):
    assert ex.check_mask_from_mha(from_mha_right)
    assert "✅" in _verdict(capsys)
    assert ex.check_mask_from_mha(lambda a, k: ~(a | k[:, None, None, :]))  # De Morgan form


@pytest.mark.parametrize(
    ("wrong", "diagnosis"),
    [
        (lambda a, k: a & k[:, None, None, :], "kept nn.MultiheadAttention's convention"),
        (lambda a, k: ~a & k[:, None, None, :], "inverted attn_mask but not key_padding_mask"),
        (lambda a, k: ~a & ~k[:, None, :], "HEAD axis"),
        (lambda a, k: ~a | ~k[:, None, None, :], "combined with |"),
        (lambda a, k: (~a).expand(k.shape[0], 1, *a.shape), "forgot key_padding_mask"),
        (lambda a, k: a | k[:, None, None, :], "flipped convention"),
    ],
)
def test_from_mha_diagnoses(capsys, wrong, diagnosis):
    assert ex.check_mask_from_mha(wrong) is False
    assert diagnosis in _verdict(capsys)


# ----- exercise 4: expected row sums --------------------------------------------------------------


def test_row_sums_accepts_exact_and_sampled(capsys):
    setting = ex.ROW_SUM_SETTING
    real = ac.padding_mask(setting["lengths"], setting["seq_len"])  # (B, 1, 1, L)
    assert ex.check_expected_row_sums(real[:, 0, 0, :].float())
    assert "✅" in _verdict(capsys)

    # An estimate from attn_core itself, averaged over seeds, passes too.
    mask = real & real.transpose(-1, -2)  # (B, 1, L, L)
    q = k = v = torch.randn(2, 1, 4, 8, generator=torch.Generator().manual_seed(0))  # (B, H, L, D)
    torch.manual_seed(0)
    sums = torch.stack(
        [ac.scaled_dot_product_attention(q, k, v, mask, dropout_p=0.25)[1].sum(-1)[:, 0] for _ in range(2000)]
    )  # (N, B, L)
    assert ex.check_expected_row_sums(sums.mean(0))


@pytest.mark.parametrize(
    ("wrong", "diagnosis"),
    [
        ([[0.75, 0.75, 0, 0], [0.75] * 4], "without the 1/(1 - p) rescale"),
        ([[4 / 3, 4 / 3, 0, 0], [4 / 3] * 4], "only compensates the zeros"),
        ([[1.0] * 4, [1.0] * 4], "zero weights"),
        ([[1.0, 1.0, 0.0, 0.0]], "wrong shape"),
        ([[1.0, 1.0, 0.5, 0.0], [1.0] * 4], "entry (0, 2)"),
    ],
)
def test_row_sums_diagnoses(capsys, wrong, diagnosis):
    assert ex.check_expected_row_sums(wrong) is False
    assert diagnosis in _verdict(capsys)


def test_row_sums_not_done(capsys):
    assert ex.check_expected_row_sums(...) is False
    assert "not attempted" in _verdict(capsys)
    assert ex.check_expected_row_sums("one") is False
    assert "expected a (B, L) tensor" in _verdict(capsys)
