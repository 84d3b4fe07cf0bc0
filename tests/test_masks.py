"""Mask factories (True = may attend), their composition, and the convention converters."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attn_core as ac


def bool_tensor(rows: list) -> torch.Tensor:
    """A boolean tensor from a 0/1 nested list (1 = may attend)."""
    return torch.tensor(rows, dtype=torch.bool)


# --------------------------------------------------------------------------- causal


CAUSAL_CASES = {
    "lq<lk": (
        2,
        4,
        [
            [1, 1, 1, 0],
            [1, 1, 1, 1],
        ],
    ),
    "lq==lk": (
        3,
        3,
        [
            [1, 0, 0],
            [1, 1, 0],
            [1, 1, 1],
        ],
    ),
    "lq>lk": (
        4,
        2,
        [
            [0, 0],
            [0, 0],
            [1, 0],
            [1, 1],
        ],
    ),
    "single-query": (1, 3, [[1, 1, 1]]),
}


@pytest.mark.parametrize(("q_len", "k_len", "expected"), CAUSAL_CASES.values(), ids=CAUSAL_CASES.keys())
def test_causal_mask_is_bottom_right_aligned(q_len, k_len, expected):
    """causal_mask(Lq, Lk): query i sees keys 0 .. i + (Lk - Lq); the last query sees every key."""
    mask = ac.causal_mask(q_len, k_len)
    assert mask.dtype == torch.bool
    assert torch.equal(mask, bool_tensor(expected))


def test_causal_mask_defaults_to_square_lower_triangle():
    """causal_mask(L) is the lower triangle (L, L), equal to torch.tril."""
    assert torch.equal(ac.causal_mask(5), torch.ones(5, 5, dtype=torch.bool).tril())


# --------------------------------------------------------------------------- sliding window


def test_sliding_window_of_one_is_the_diagonal():
    """window=1: each query sees only itself."""
    assert torch.equal(ac.sliding_window_mask(5, 1), torch.eye(5, dtype=torch.bool))


def test_sliding_window_of_two_explicit():
    """window=2: each query sees itself and the key just before it."""
    expected = bool_tensor(
        [
            [1, 0, 0, 0],
            [1, 1, 0, 0],
            [0, 1, 1, 0],
            [0, 0, 1, 1],
        ]
    )
    assert torch.equal(ac.sliding_window_mask(4, 2), expected)


def test_sliding_window_rectangular_is_bottom_right_aligned():
    """With k_len > q_len the window ends at each query's own position in the key sequence."""
    expected = bool_tensor(
        [
            [0, 1, 1, 0, 0],
            [0, 0, 1, 1, 0],
            [0, 0, 0, 1, 1],
        ]
    )
    assert torch.equal(ac.sliding_window_mask(3, 2, 5), expected)


@pytest.mark.parametrize(("q_len", "k_len"), [(4, 4), (2, 5), (5, 3)])
@pytest.mark.parametrize("extra", [0, 1, 10])
def test_sliding_window_at_least_k_len_is_causal(q_len, k_len, extra):
    """window >= k_len removes no causal key: the mask equals causal_mask."""
    mask = ac.sliding_window_mask(q_len, k_len + extra, k_len)
    assert torch.equal(mask, ac.causal_mask(q_len, k_len))


# --------------------------------------------------------------------------- prefix LM


def test_prefix_lm_mask_explicit():
    """The prefix attends both ways; later tokens are causal and see the whole prefix."""
    expected = bool_tensor(
        [
            [1, 1, 0, 0, 0],
            [1, 1, 0, 0, 0],
            [1, 1, 1, 0, 0],
            [1, 1, 1, 1, 0],
            [1, 1, 1, 1, 1],
        ]
    )
    assert torch.equal(ac.prefix_lm_mask(5, 2), expected)


@pytest.mark.parametrize(("prefix_len", "expected"), [(0, "causal"), (1, "causal"), (4, "full")])
def test_prefix_lm_mask_extremes(prefix_len, expected):
    """prefix 0 or 1 is plain causal; a prefix covering the sequence is full attention."""
    mask = ac.prefix_lm_mask(4, prefix_len)
    reference = ac.causal_mask(4) if expected == "causal" else torch.ones(4, 4, dtype=torch.bool)
    assert torch.equal(mask, reference)


def test_prefix_lm_longer_than_sequence_is_rejected():
    """prefix_len > seq_len raises ValueError naming both numbers."""
    with pytest.raises(ValueError, match=r"prefix_len \(5\) cannot exceed seq_len \(3\)"):
        ac.prefix_lm_mask(3, 5)


# --------------------------------------------------------------------------- padding


def test_padding_mask_shape_and_values():
    """padding_mask(lengths) is (B, 1, 1, max(lengths)), True on real tokens."""
    mask = ac.padding_mask([3, 1, 4])
    assert mask.shape == (3, 1, 1, 4) and mask.dtype == torch.bool
    expected = bool_tensor(
        [
            [1, 1, 1, 0],
            [1, 0, 0, 0],
            [1, 1, 1, 1],
        ]
    )
    assert torch.equal(mask[:, 0, 0], expected)


def test_padding_mask_with_max_len_and_tensor_lengths():
    """max_len pads the key axis further; a tensor of lengths works like a list."""
    mask = ac.padding_mask(torch.tensor([2, 0]), max_len=5)
    assert mask.shape == (2, 1, 1, 5)
    assert torch.equal(mask[:, 0, 0], bool_tensor([[1, 1, 0, 0, 0], [0, 0, 0, 0, 0]]))


@pytest.mark.parametrize(
    ("lengths", "max_len", "match"),
    [
        ([3, 5], 4, r"a length \(5\) exceeds max_len \(4\)"),
        ([2, -1], None, r"lengths must be >= 0, got \[2, -1\]"),
        ([[1, 2]], None, r"1-D sequence of ints"),
        ([1.5, 2.0], None, r"1-D sequence of ints"),
    ],
)
def test_padding_mask_rejects_bad_lengths(lengths, max_len, match):
    """Lengths that are negative, too long, non-integer or not 1-D raise ValueError."""
    with pytest.raises(ValueError, match=match):
        ac.padding_mask(lengths, max_len=max_len)


def test_padding_mask_applies_per_sequence_in_attention():
    """Keys beyond a sequence's length get zero weight; real keys share all the weight."""
    lengths = [2, 4]
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 4, 8, generator=generator, dtype=torch.float64) for _ in range(3))
    _, weights = ac.scaled_dot_product_attention(q, k, v, ac.padding_mask(lengths))
    assert torch.equal(weights[0, :, :, 2:], torch.zeros(3, 4, 2, dtype=torch.float64))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 4, dtype=torch.float64))


# --------------------------------------------------------------------------- composition


def test_padding_and_causal_compose_with_and():
    """padding & causal broadcasts to (B, 1, L, L) and blocks what either blocks."""
    combined = ac.padding_mask([2, 3]) & ac.causal_mask(3)
    assert combined.shape == (2, 1, 3, 3)
    expected_first = bool_tensor([[1, 0, 0], [1, 1, 0], [1, 1, 0]])
    assert torch.equal(combined[0, 0], expected_first)
    assert torch.equal(combined[1, 0], ac.causal_mask(3))


def test_sliding_window_is_causal_and_a_band():
    """sliding_window_mask == causal & (key > query - window), checked with & and |."""
    causal = ac.causal_mask(6)
    window = ac.sliding_window_mask(6, 3)
    assert torch.equal(window & causal, window)  # the window lies inside causal
    assert torch.equal(window | causal, causal)
    band = torch.ones(6, 6, dtype=torch.bool).triu(-2)
    assert torch.equal(causal & band, window)


def test_prefix_lm_is_causal_or_prefix_columns():
    """prefix_lm_mask == causal | key_in_prefix."""
    key_in_prefix = torch.arange(6) < 3
    assert torch.equal(ac.prefix_lm_mask(6, 3), ac.causal_mask(6) | key_in_prefix)


# --------------------------------------------------------------------------- converters


def test_mask_from_float_treats_nonzero_as_attend():
    """A 0/1 float or int mask (1 = attend, Hugging Face style) becomes ours with != 0."""
    for m in (torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[1, 0], [0, 1]])):
        assert torch.equal(ac.mask_from_float(m), bool_tensor([[1, 0], [0, 1]]))


def test_mask_from_blocked_inverts():
    """A True/1 = blocked mask (nn.MultiheadAttention, TF tutorial) is inverted into ours."""
    assert torch.equal(ac.mask_from_blocked(bool_tensor([1, 0, 1])), bool_tensor([0, 1, 0]))
    assert torch.equal(ac.mask_from_blocked(torch.tensor([1.0, 0.0])), bool_tensor([0, 1]))


def test_mask_from_additive_accepts_minus_inf_and_large_negatives():
    """0 = attend; -inf or -1e9 = blocked; positive values are rejected."""
    additive = torch.tensor([0.0, float("-inf"), -1e9, 0.0])
    assert torch.equal(ac.mask_from_additive(additive), bool_tensor([1, 0, 0, 1]))
    with pytest.raises(ValueError, match="positive"):
        ac.mask_from_additive(torch.tensor([0.0, 1.0]))


def test_mask_to_additive_values_and_dtype():
    """Ours -> 0 where attending, -inf where blocked, in the requested dtype."""
    additive = ac.mask_to_additive(bool_tensor([1, 0]), dtype=torch.float64)
    assert additive.dtype == torch.float64
    assert additive[0].item() == 0.0 and additive[1].item() == float("-inf")
    assert ac.mask_to_additive(bool_tensor([1])).dtype == torch.float32


MASKS = {
    "causal": lambda: ac.causal_mask(4, 6),
    "window": lambda: ac.sliding_window_mask(5, 2),
    "prefix": lambda: ac.prefix_lm_mask(5, 2),
    "padding": lambda: ac.padding_mask([1, 3, 2]),
    "random": lambda: torch.rand(2, 3, 4, 5, generator=torch.Generator().manual_seed(0)) < 0.5,
}


@pytest.mark.parametrize("make_mask", MASKS.values(), ids=MASKS.keys())
def test_converters_round_trip(make_mask):
    """to_blocked/from_blocked, to_additive/from_additive and bool->float->bool are identities."""
    mask = make_mask()
    assert torch.equal(ac.mask_from_blocked(ac.mask_to_blocked(mask)), mask)
    assert torch.equal(ac.mask_to_blocked(mask), ~mask)
    for dtype in (torch.float16, torch.float32, torch.float64):
        assert torch.equal(ac.mask_from_additive(ac.mask_to_additive(mask, dtype=dtype)), mask)
    assert torch.equal(ac.mask_from_float(mask.float()), mask)


def test_additive_mask_in_torch_sdpa_equals_our_bool_mask():
    """mask_to_additive(m) used as F.sdpa's float attn_mask matches our attention with m."""
    generator = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 4, 5, generator=generator, dtype=torch.float64) for _ in range(3))
    mask = ac.padding_mask([4, 2]) & ac.causal_mask(4)
    out, _ = ac.scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=ac.mask_to_additive(mask, dtype=torch.float64))
    torch.testing.assert_close(out, expected, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize(
    ("factory", "match"),
    [
        (lambda: ac.causal_mask(-1), r"q_len must be an int >= 0, got -1"),
        (lambda: ac.causal_mask(2, 2.5), r"k_len must be an int >= 0, got 2.5"),
        (lambda: ac.sliding_window_mask(4, 0), r"window must be an int >= 1, got 0"),
        (lambda: ac.prefix_lm_mask(4, -2), r"prefix_len must be an int >= 0, got -2"),
    ],
)
def test_factories_reject_bad_lengths(factory, match):
    """Negative or non-int lengths raise ValueError naming the argument and value."""
    with pytest.raises(ValueError, match=match):
        factory()
