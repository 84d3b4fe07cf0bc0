"""Mask helpers at their edges: non-boolean input to the to_* converters, empty batches, lists, messages; and
the window-or-sink rule every layer applies to a KVCache (cache_window_mask) against a brute force."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import attn_core as ac
from attn_core.caches.kv_cache import EMPTY
from attn_core.masks import cache_window_mask, check_mask


@pytest.mark.parametrize("converter", [ac.mask_to_blocked, ac.mask_to_additive], ids=["to_blocked", "to_additive"])
@pytest.mark.parametrize(
    "mask",
    [torch.tensor([1, 0]), torch.tensor([1.0, 0.0]), torch.tensor([1, 0], dtype=torch.uint8)],
    ids=["int64", "float32", "uint8"],
)
def test_to_converters_reject_non_boolean_masks(converter, mask):
    """On an int tensor ~ is bitwise not (~1 == -2): mask_to_blocked([1, 0]) returned [-2, -1].
    Both to_* converters now raise TypeError naming themselves, the dtype and the from_* fix."""
    with pytest.raises(TypeError, match=rf"{converter.__name__} takes one of our boolean masks.*{mask.dtype}"):
        converter(mask)


def test_to_converters_accept_a_list_of_bools():
    """A nested list of Python bools is a boolean mask once converted."""
    assert torch.equal(ac.mask_to_blocked([[True, False]]), torch.tensor([[False, True]]))
    additive = ac.mask_to_additive([True, False], dtype=torch.float64)
    assert torch.equal(additive, torch.tensor([0.0, float("-inf")], dtype=torch.float64))


@pytest.mark.parametrize("lengths", [[], torch.tensor([], dtype=torch.long), ()], ids=["list", "tensor", "tuple"])
def test_padding_mask_of_an_empty_batch(lengths):
    """No sequences: shape (0, 1, 1, 0) (an empty list used to be read as float32 and refused)."""
    mask = ac.padding_mask(lengths)
    assert mask.shape == (0, 1, 1, 0) and mask.dtype == torch.bool
    assert ac.padding_mask(lengths, max_len=3).shape == (0, 1, 1, 3)


def test_padding_mask_still_rejects_an_empty_float_tensor():
    """An explicit float tensor of lengths is refused even when empty (only [] is ambiguous)."""
    with pytest.raises(ValueError, match="1-D sequence of ints"):
        ac.padding_mask(torch.tensor([]))


def test_check_mask_accepts_a_list_as_weights_shape():
    """weights_shape is any Sequence[int]: a list works like a tuple, and still rejects what does not broadcast."""
    mask = torch.ones(5, 6, dtype=torch.bool)
    check_mask(mask, [2, 4, 5, 6])
    with pytest.raises(ValueError, match=r"mask of shape \(5, 6\) does not broadcast .*\(2, 4, 5, 7\)"):
        check_mask(mask, [2, 4, 5, 7])


def test_check_mask_device_argument():
    """device= names the device q, k, v are on; a mask elsewhere raises ValueError naming both."""
    mask = torch.ones(2, 3, dtype=torch.bool)
    check_mask(mask, (2, 3), device=torch.device("cpu"))
    check_mask(mask, (2, 3), device="cpu")
    with pytest.raises(ValueError, match=r"mask is on cpu but q, k, v are on meta"):
        check_mask(mask, (2, 3), device="meta")


def test_mask_type_error_names_real_apis_only():
    """The non-boolean TypeError points to real conventions (Hugging Face, Keras, nn.MultiheadAttention,
    the TensorFlow tutorial) and the converters."""
    with pytest.raises(TypeError) as info:
        check_mask(torch.ones(2, 3), (2, 3))
    message = str(info.value)
    for name in (
        "Hugging Face",
        "Keras",
        "nn.MultiheadAttention",
        "TensorFlow",
        "mask_from_float",
        "mask_from_blocked",
    ):
        assert name in message
    assert "seed" not in message.lower()


def test_mask_from_additive_accepts_a_list():
    """A plain list of additive values is converted like a tensor."""
    assert torch.equal(ac.mask_from_additive([0.0, -1e9, float("-inf")]), torch.tensor([True, False, False]))
    with pytest.raises(ValueError, match="positive"):
        ac.mask_from_additive([0.0, 2.0])


def test_prefix_lm_mask_names_seq_len_when_it_is_negative():
    """A negative seq_len is reported as seq_len (not as the q_len of the causal mask it builds)."""
    with pytest.raises(ValueError, match=r"seq_len must be an int >= 0, got -1"):
        ac.prefix_lm_mask(-1, 0)


# --------------------------------------------------------------------------- cache_window_mask


def ring(window, num_sinks=0, max_rollback=0, key_positions=None):
    """A stand-in for a KVCache after an update: only the attributes cache_window_mask reads."""
    return SimpleNamespace(window=window, num_sinks=num_sinks, max_rollback=max_rollback, key_positions=key_positions)


def brute_force(query_positions, key_positions, window, num_sinks):
    """Query q sees key k iff k <= q and (q - k < window or k < num_sinks)."""
    return torch.tensor(
        [[k <= q and (q - k < window or k < num_sinks) for k in key_positions] for q in query_positions]
    )


@pytest.mark.parametrize("sliding_window", [None, 2, 3, 9])
@pytest.mark.parametrize(("window", "num_sinks"), [(None, 0), (3, 0), (3, 2), (9, 1)])
def test_cache_window_mask_equals_brute_force(window, num_sinks, sliding_window):
    """Keys in order (key_positions None) and out of order (a wrapped ring with an emptied slot)."""
    cache = None if window is None else ring(window, num_sinks)
    effective = min(w for w in (window, sliding_window, 10**9) if w is not None)
    mask = cache_window_mask(cache, 4, 3, 7, sliding_window=sliding_window)  # queries 4..6 over keys 0..6
    if window is None and sliding_window is None:
        assert mask is None
    else:
        assert torch.equal(mask, brute_force(range(4, 7), range(7), effective, num_sinks if window else 0))
    if window is not None:
        slots = torch.tensor([0, 1, 6, EMPTY, 4, 5])  # (Lk,) a ring's slots; slot 3 emptied by a truncate
        cache = ring(window, num_sinks, max_rollback=1, key_positions=slots)
        mask = cache_window_mask(cache, 6, 1, 6, sliding_window=sliding_window)  # one query at position 6
        assert torch.equal(mask, brute_force([6], slots.tolist(), effective, num_sinks))
        assert not mask[:, 3].any()  # an emptied slot sits in the future


def test_cache_window_mask_decode_shortcuts():
    """A decode step that sees every key it was given needs no mask; sinks or rollback slots always need one."""
    assert cache_window_mask(ring(4), 3, 1, 4) is None  # 4 keys in order, window 4
    assert cache_window_mask(ring(4, key_positions=torch.tensor([4, 5, 2, 3])), 5, 1, 4) is None  # a full ring
    assert cache_window_mask(ring(4, max_rollback=1, key_positions=torch.tensor([5, 1, 2, 3, 4])), 5, 1, 5) is not None
    assert cache_window_mask(ring(4, num_sinks=1), 3, 1, 4) is not None
    assert cache_window_mask(ring(4), 3, 1, 4, sliding_window=2) is not None  # the layer's window is smaller
