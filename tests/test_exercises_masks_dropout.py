"""The notebook-05 checkers accept right answers and diagnose the usual wrong ones."""

import pytest
import torch
from learner_answers import JUNK, one_red_line

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

    # An estimate from attn_core itself, averaged over many dropout draws, passes too.
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


# ----- the ARENA-style tables ----------------------------------------------------------------------
# For each checker: the stub fails, the reference passes, correct answers written differently pass,
# and each usual mistake gets its own diagnosis (a phrase that only that diagnosis contains).


def sliding_loops(seq_len, window):
    mask = torch.zeros(seq_len, seq_len, dtype=torch.bool)  # (L, L)
    for i in range(seq_len):
        mask[i, max(0, i - window + 1) : i + 1] = True  # keys i - window + 1 .. i
    return mask


def sliding_band(seq_len, window):
    ones = torch.ones(seq_len, seq_len, dtype=torch.bool)  # (L, L)
    return ones.tril() & ones.triu(-(window - 1))  # the band below the diagonal, window wide


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (lambda L, w: ..., False, "not attempted"),
        (sliding_right, True, "✅"),
        (ac.sliding_window_mask, True, "✅"),
        (sliding_loops, True, "✅"),
        (sliding_band, True, "✅"),
        (lambda L, w: sliding_right(L, w).T, False, "looks at keys after the query (key > query), the future"),
        (lambda L, w: ac.causal_mask(L).T, False, "the causal mask transposed"),
        (
            lambda L, w: sliding_right(L, w) | (torch.arange(L) == torch.arange(L)[:, None] + 1),
            False,
            "your mask lets a query see keys after the query (the future), first at index (0, 1)",
        ),
        (lambda L, w: sliding_right(L, w + 1), False, "one too wide"),
        (lambda L, w: sliding_right(L, w).float(), False, "dtype torch.float32"),
    ],
)
def test_sliding_window_table(capsys, answer, passes, phrase):
    assert ex.check_sliding_window_mask(answer) is passes
    out = _verdict(capsys)
    assert phrase in out, out


def causal_padding_compare(lengths, seq_len):
    position = torch.arange(seq_len)  # (L,)
    real_key = position < torch.tensor(lengths)[:, None]  # (B, L)
    return (position[None, :] <= position[:, None]) & real_key[:, None, None, :]  # (B, 1, L, L)


def causal_padding_loops(lengths, seq_len):
    mask = torch.zeros(len(lengths), 1, seq_len, seq_len, dtype=torch.bool)  # (B, 1, L, L)
    for b, length in enumerate(lengths):
        for i in range(seq_len):
            mask[b, 0, i, : min(i + 1, length)] = True
    return mask


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (lambda lengths, L: ..., False, "not attempted"),
        (causal_padding_right, True, "✅"),
        (causal_padding_compare, True, "✅"),
        (causal_padding_loops, True, "✅"),
        (lambda lengths, L: (ac.padding_mask(lengths, L) & ac.causal_mask(L)).contiguous(), True, "✅"),
        (lambda lengths, L: causal_padding_right(lengths, L)[:, 0], False, "HEAD axis"),
        (lambda lengths, L: ac.padding_mask(lengths, L) | ac.causal_mask(L), False, "combined with |"),
        (lambda lengths, L: ac.causal_mask(L).expand(len(lengths), 1, L, L), False, "forgot the padding"),
    ],
)
def test_causal_padding_table(capsys, answer, passes, phrase):
    assert ex.check_causal_padding_mask(answer) is passes
    assert phrase in _verdict(capsys)


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (lambda a, k: ..., False, "not attempted"),
        (from_mha_right, True, "✅"),
        (lambda a, k: ~(a | k[:, None, None, :]), True, "✅"),
        (lambda a, k: (~a).unsqueeze(0).unsqueeze(0) & (~k).view(k.shape[0], 1, 1, -1), True, "✅"),
        (lambda a, k: torch.logical_and(a.logical_not(), k.logical_not()[:, None, None]), True, "✅"),
        (lambda a, k: ~a & ~k[:, None, :, None], False, "you put key_padding_mask on the QUERY axis"),
        (lambda a, k: ~a & k[:, None, None, :], False, "inverted attn_mask but not key_padding_mask"),
        (lambda a, k: a & k[:, None, None, :], False, "kept nn.MultiheadAttention's convention"),
    ],
)
def test_from_mha_table(capsys, answer, passes, phrase):
    assert ex.check_mask_from_mha(answer) is passes
    out = _verdict(capsys)
    assert phrase in out, out


REAL = [[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]  # lengths [2, 4]: real queries sum to 1, padded to 0


@pytest.mark.parametrize(
    ("answer", "passes", "phrase"),
    [
        (..., False, "not attempted"),
        (torch.tensor(REAL), True, "✅"),
        (REAL, True, "✅"),
        (__import__("numpy").array(REAL), True, "✅"),
        (torch.tensor(REAL) + 0.015, True, "✅"),  # a sampled estimate within 0.02
        ([[0.75, 0.75, 0, 0], [0.75] * 4], False, "without the 1/(1 - p) rescale"),
        ([[4 / 3, 4 / 3, 0, 0], [4 / 3] * 4], False, "only compensates the zeros"),
        ([[1.0] * 4, [1.0] * 4], False, "their expected sum is 0"),
    ],
)
def test_row_sums_table(capsys, answer, passes, phrase):
    assert ex.check_expected_row_sums(answer) is passes
    assert phrase in _verdict(capsys)


# ----- never raises: whatever the learner returns, a check prints one ❌ line and returns False -----


@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_checks_never_raise(junk, capsys):
    for check in (ex.check_sliding_window_mask, ex.check_causal_padding_mask, ex.check_mask_from_mha):
        assert check(lambda *args, **kwargs: junk) is False
        assert one_red_line(_verdict(capsys))
        assert check(junk) is False  # the value itself instead of a function
        assert one_red_line(_verdict(capsys))
    assert ex.check_expected_row_sums(junk) is False
    assert one_red_line(_verdict(capsys))
