"""Hidden test cases for the course's autograder cells (``### BEGIN HIDDEN TESTS``): students never see them.

Every graded cell re-runs its checker from a different global random state (an answer must not pass only because
of the notebook's seed, e.g. by drawing its own random inputs or weights). Where a grader's own cases leave room, a
second, unseen set follows: other shapes (Lq != Lk, d_v != d_k, no batch dimension, odd sizes), both float
precisions, and the edges learners get wrong (window 1, a row with every key padded). Tolerances: float32 answers
are compared as the graders do (rtol 5e-5, derived in attn_core/exercises/sdpa.py), float64 ones to 1e-10.
"""

from __future__ import annotations

RESEED = (
    "torch.manual_seed(20_260)  # a fresh global random state: the answer must not pass only by the notebook's seed\n"
)

SPECIFIC = {
    "check_attention": """
for _dtype in (torch.float64, torch.float32):
    _g = torch.Generator().manual_seed(35)
    _q = torch.randn(2, 3, 5, 7, generator=_g, dtype=torch.float64)  # (B, H, Lq, d_k)
    _k = torch.randn(2, 3, 6, 7, generator=_g, dtype=torch.float64)  # (B, H, Lk, d_k)
    _v = torch.randn(2, 3, 6, 4, generator=_g, dtype=torch.float64)  # (B, H, Lk, d_v)
    _out, _weights = {answer}(_q.to(_dtype), _k.to(_dtype), _v.to(_dtype))
    _expected = F.scaled_dot_product_attention(_q, _k, _v)  # (B, H, Lq, d_v)
    assert tuple(_out.shape) == (2, 3, 5, 4) and tuple(_weights.shape) == (2, 3, 5, 6)
    assert torch.allclose(_out.double(), _expected, rtol=5e-5, atol=1e-6)
    assert torch.allclose(_weights.double().sum(-1), torch.ones(2, 3, 5, dtype=torch.float64), atol=1e-5)
_ones = torch.ones(3, dtype=torch.float64)  # (d_k,)
_out, _ = {answer}(_ones.expand(1, 3), _ones.expand(2, 3), torch.eye(2, dtype=torch.float64))
assert torch.allclose(_out.double(), torch.full((1, 2), 0.5, dtype=torch.float64))  # no batch dimension
""",
    "check_score_variance": """
for _d_k, _std in ((64, 0.5), (3, 2.0), (1, 1.0)):
    assert abs(float({answer}(_d_k, _std, False)) - _d_k * _std**4) <= 1e-9 * _d_k * _std**4
    assert abs(float({answer}(_d_k, _std, True)) - _std**4) <= 1e-9 * _std**4
""",
    "check_split_heads": """
_x = torch.arange(2 * 3 * 12, dtype=torch.float64).reshape(2, 3, 12)  # (B, L, hidden)
for _heads in (1, 4, 12):
    _expected = _x.reshape(2, 3, _heads, 12 // _heads).transpose(1, 2)  # (B, H, L, head_dim)
    assert torch.equal({answer}(_x, _heads).double(), _expected)
""",
    "check_merge_heads": """
_t = torch.arange(2 * 4 * 3 * 5, dtype=torch.float64).reshape(2, 4, 3, 5)  # (B, H, L, head_dim)
assert torch.equal({answer}(_t).double(), _t.transpose(1, 2).reshape(2, 3, 20))  # (B, L, hidden)
""",
    "check_param_count": """
for _hidden, _heads in ((12, 3), (768, 12), (5, 1)):
    assert int({answer}(_hidden, _heads)) == 4 * _hidden * _hidden + 4 * _hidden
    assert int({answer}(_hidden, _heads, bias=False)) == 4 * _hidden * _hidden
""",
    "check_sliding_window_mask": """
for _length, _window in ((1, 1), (5, 1), (6, 2), (4, 9)):
    _i = torch.arange(_length)
    _expected = (_i[None, :] <= _i[:, None]) & (_i[:, None] - _i[None, :] < _window)  # (L, L)
    _mask = {answer}(_length, _window)
    assert _mask.dtype == torch.bool and torch.equal(_mask, _expected)
""",
    "check_causal_padding_mask": """
_mask = {answer}([3, 1, 2], 3)
_i = torch.arange(3)
_expected = (_i[None, :] < torch.tensor([3, 1, 2])[:, None])[:, None, None, :] & (_i[None, :] <= _i[:, None])
assert _mask.dtype == torch.bool and torch.equal(_mask.expand(3, 1, 3, 3), _expected)
""",
}


def hidden_cases(checker: str, answer: str) -> str:
    """The hidden part of one test cell (Python source) for ``checker`` graded on the name ``answer``."""
    extra = SPECIFIC.get(checker, "").format(answer=answer)
    return (RESEED + f"assert {checker}({answer})\n" + extra.lstrip("\n")).rstrip("\n")
