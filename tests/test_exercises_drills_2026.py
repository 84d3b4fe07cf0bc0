"""The interview gym's new hand-write drills (issue #38): each grader rejects plausible wrong answers with the right
diagnosis and accepts equivalent correct ones (numpy, other dtypes, other formulations).

One file for all the drills: each block is a wrong-answer table and a right-answer table of the same shape, and the
tables are the measurement the issue asks for, so they read best side by side."""

import numpy as np
import pytest
import torch

from attn_core.exercises.drills_speculative import check_speculative_verify


def _residual(p, q):
    excess = (p - q).clamp(min=0)
    return excess / excess.sum()


def right(p, q):
    return torch.clamp(p / q, max=1.0), _residual(p, q)


SPECULATIVE_WRONG = {
    "ratio not clipped": (lambda p, q: (p / q, _residual(p, q)), "exceeds 1"),
    "inverted ratio": (lambda p, q: (torch.clamp(q / p, max=1.0), _residual(p, q)), "inverted"),
    "accept = p": (lambda p, q: (p, _residual(p, q)), "is p(x) itself"),
    "always accept": (lambda p, q: (torch.ones_like(p), _residual(p, q)), "is 1 everywhere"),
    "accept = p - q": (lambda p, q: ((p - q).clamp(min=0), _residual(p, q)), "differs from min(1, p(x)/q(x))"),
    "residual = p": (lambda p, q: (right(p, q)[0], p), "resample from p"),
    "residual = q": (lambda p, q: (right(p, q)[0], q), "from the draft q"),
    "residual not normalised": (lambda p, q: (right(p, q)[0], (p - q).clamp(min=0)), "must be normalised"),
    "residual flipped": (lambda p, q: (right(p, q)[0], _residual(q, p)), "flipped"),
    "residual |p - q|": (lambda p, q: (right(p, q)[0], (p - q).abs() / (p - q).abs().sum()), "|p - q|"),
    "residual p - q unclamped": (lambda p, q: (right(p, q)[0], (p - q) / (p - q).sum()), "negative entries"),
    "one value returned": (lambda p, q: torch.clamp(p / q, max=1.0), "return a pair"),
    "wrong shape": (lambda p, q: (right(p, q)[0][None], right(p, q)[1]), "shape"),
    "stub": (lambda p, q: None, None),
}


@pytest.mark.parametrize("name", list(SPECULATIVE_WRONG))
def test_speculative_verify_rejects_with_the_diagnosis(name, capsys):
    fn, diagnosis = SPECULATIVE_WRONG[name]
    assert check_speculative_verify(fn) is False
    out = capsys.readouterr().out
    assert "❌" in out
    if diagnosis:
        assert diagnosis in out, out


SPECULATIVE_RIGHT = {
    "torch": right,
    "numpy": lambda p, q: (
        np.minimum(1.0, p.numpy() / np.where(q.numpy() > 0, q.numpy(), 1.0)),
        np.maximum(p.numpy() - q.numpy(), 0) / np.maximum(p.numpy() - q.numpy(), 0).sum(),
    ),
    "float32 and torch.where": lambda p, q: (
        torch.where(q > 0, torch.minimum(torch.ones_like(p), p / q), torch.zeros_like(p)).float(),
        _residual(p, q).float(),
    ),
    "lists, via 1 - min(p, q) total": lambda p, q: (
        [min(1.0, a / b) if b > 0 else 1.0 for a, b in zip(p.tolist(), q.tolist(), strict=True)],
        ((p - torch.minimum(p, q)) / (1 - torch.minimum(p, q).sum())).tolist(),
    ),
}


@pytest.mark.parametrize("name", list(SPECULATIVE_RIGHT))
def test_speculative_verify_accepts_correct_variants(name, capsys):
    assert check_speculative_verify(SPECULATIVE_RIGHT[name]) is True, capsys.readouterr().out


def test_speculative_verdicts_read_in_chinese(capsys):
    import attn_core as ac

    ac.set_language("zh")
    try:
        check_speculative_verify(SPECULATIVE_WRONG["residual flipped"][0])
        check_speculative_verify(right)
    finally:
        ac.set_language("en")
    out = capsys.readouterr().out
    assert "残差写反了" in out and "❌" in out and "✅" in out


from attn_core.exercises.drills_lse_merge import check_lse_merge  # noqa: E402


def _lse(lse_a, lse_b):
    return torch.logaddexp(lse_a, lse_b)


def lse_right(out_a, lse_a, out_b, lse_b):
    lse = _lse(lse_a, lse_b)
    return torch.exp(lse_a - lse)[..., None] * out_a + torch.exp(lse_b - lse)[..., None] * out_b, lse


def _with_lse(out):
    return lambda oa, la, ob, lb: (out(oa, la, ob, lb), _lse(la, lb))


LSE_WRONG = {
    "average": (_with_lse(lambda oa, la, ob, lb: (oa + ob) / 2), "averaged"),
    "swapped weights": (
        _with_lse(
            lambda oa, la, ob, lb: (
                torch.exp(lb - _lse(la, lb))[..., None] * oa + torch.exp(la - _lse(la, lb))[..., None] * ob
            )
        ),
        "swapped",
    ),
    "base 2": (
        _with_lse(
            lambda oa, la, ob, lb: (
                torch.exp2(la - _lse(la, lb))[..., None] * oa + torch.exp2(lb - _lse(la, lb))[..., None] * ob
            )
        ),
        "natural logs",
    ),
    "lse = max": (lambda oa, la, ob, lb: (lse_right(oa, la, ob, lb)[0], torch.maximum(la, lb)), "not max"),
    "lse = sum": (lambda oa, la, ob, lb: (lse_right(oa, la, ob, lb)[0], la + lb), "multiplies the sums"),
    "naive exp overflows": (
        lambda oa, la, ob, lb: (
            (torch.exp(la)[..., None] * oa + torch.exp(lb)[..., None] * ob)
            / (torch.exp(la) + torch.exp(lb))[..., None],
            torch.log(torch.exp(la) + torch.exp(lb)),
        ),
        "NaN",
    ),
    "unnormalised": (
        _with_lse(lambda oa, la, ob, lb: torch.exp(la)[..., None] * oa + torch.exp(lb)[..., None] * ob),
        "not normalised",
    ),
    "weights from lse ratio": (
        _with_lse(lambda oa, la, ob, lb: (la / (la + lb))[..., None] * oa + (lb / (la + lb))[..., None] * ob),
        "NaN",
    ),
    "out a only": (_with_lse(lambda oa, la, ob, lb: oa), "differs from attention over all keys"),
    "out only": (lambda oa, la, ob, lb: lse_right(oa, la, ob, lb)[0], "return a pair"),
    "lse shape (H, Lq, 1)": (lambda oa, la, ob, lb: (lse_right(oa, la, ob, lb)[0], _lse(la, lb)[..., None]), "shape"),
    "stub": (lambda oa, la, ob, lb: ..., None),
}


@pytest.mark.parametrize("name", list(LSE_WRONG))
def test_lse_merge_rejects_with_the_diagnosis(name, capsys):
    fn, diagnosis = LSE_WRONG[name]
    assert check_lse_merge(fn) is False
    out = capsys.readouterr().out
    assert "❌" in out
    if diagnosis:
        assert diagnosis in out, out


def _max_subtracted(oa, la, ob, lb):
    m = torch.maximum(la, lb)  # (H, Lq)
    wa, wb = torch.exp(la - m), torch.exp(lb - m)
    return (wa[..., None] * oa + wb[..., None] * ob) / (wa + wb)[..., None], m + torch.log(wa + wb)


LSE_RIGHT = {
    "logaddexp": lse_right,
    "max subtracted": _max_subtracted,
    "logsumexp of a stack, float32": lambda oa, la, ob, lb: (
        (torch.softmax(torch.stack([la, lb]), dim=0)[..., None] * torch.stack([oa, ob])).sum(0).float(),
        torch.logsumexp(torch.stack([la, lb]), dim=0).float(),
    ),
    "numpy": lambda oa, la, ob, lb: tuple(
        np.asarray(x) for x in (lse_right(oa, la, ob, lb)[0].numpy(), np.logaddexp(la.numpy(), lb.numpy()))
    ),
    "attn_core": lambda oa, la, ob, lb: __import__("attn_core").merge_attention(oa, la, ob, lb),
}


@pytest.mark.parametrize("name", list(LSE_RIGHT))
def test_lse_merge_accepts_correct_variants(name, capsys):
    assert check_lse_merge(LSE_RIGHT[name]) is True, capsys.readouterr().out


from attn_core.exercises.drills_sinks import check_sink_softmax  # noqa: E402


def sinks_right(scores, sinks):
    column = sinks[:, None, None].expand(*scores.shape[:-1], 1)  # (H, Lq, 1)
    return torch.softmax(torch.cat([scores, column], dim=-1), dim=-1)[..., :-1]


def _unstable(scores, sinks):
    e = torch.exp(scores)
    return e / (e.sum(-1, keepdim=True) + torch.exp(sinks)[:, None, None])


def _sink_not_shifted(scores, sinks):
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    return e / (e.sum(-1, keepdim=True) + torch.exp(sinks)[:, None, None])


def _max_over_scores_only(scores, sinks):
    m = scores.amax(-1, keepdim=True)
    e = torch.exp(scores - m)
    return e / (e.sum(-1, keepdim=True) + torch.exp(sinks[:, None, None] - m))


SINKS_WRONG = {
    "plain softmax": (lambda s, k: torch.softmax(s, dim=-1), "never took its share"),
    "sink added to scores": (lambda s, k: torch.softmax(s + k[:, None, None], dim=-1), "never took its share"),
    "sink column kept": (
        lambda s, k: torch.softmax(torch.cat([s, k[:, None, None].expand(*s.shape[:-1], 1)], -1), -1),
        "drop the sink's column",
    ),
    "renormalised over real keys": (
        lambda s, k: sinks_right(s, k) / sinks_right(s, k).sum(-1, keepdim=True),
        "never took its share",
    ),
    "exp of the sink": (lambda s, k: sinks_right(s, torch.exp(k)), "is a logit"),
    "sign flipped": (lambda s, k: sinks_right(s, -k), "sign is flipped"),
    "no max subtracted": (_unstable, "NaN"),
    "sink not shifted": (_sink_not_shifted, "not from the sink"),
    "max over scores only": (_max_over_scores_only, "fully masked row"),
    "sigmoid gate instead": (lambda s, k: torch.softmax(s, -1) * torch.sigmoid(-k)[:, None, None], "differ"),
    "transposed": (lambda s, k: sinks_right(s, k).transpose(-1, -2), "shape"),
    "stub": (lambda s, k: None, None),
}


@pytest.mark.parametrize("name", list(SINKS_WRONG))
def test_sink_softmax_rejects_with_the_diagnosis(name, capsys):
    fn, diagnosis = SINKS_WRONG[name]
    assert check_sink_softmax(fn) is False
    out = capsys.readouterr().out
    assert "❌" in out
    if diagnosis:
        assert diagnosis in out, out


def _max_over_both(scores, sinks):
    m = torch.maximum(scores.amax(-1, keepdim=True), sinks[:, None, None])  # (H, Lq, 1)
    e = torch.exp(scores - m)
    return e / (e.sum(-1, keepdim=True) + torch.exp(sinks[:, None, None] - m))


SINKS_RIGHT = {
    "softmax with the sink appended": sinks_right,
    "max over scores and sink": _max_over_both,
    "logsumexp, float32": lambda s, k: torch.exp(
        s - torch.logaddexp(torch.logsumexp(s, -1, keepdim=True), k[:, None, None])
    ).float(),
    "numpy": lambda s, k: np.asarray(sinks_right(s, k).numpy()),
}


@pytest.mark.parametrize("name", list(SINKS_RIGHT))
def test_sink_softmax_accepts_correct_variants(name, capsys):
    assert check_sink_softmax(SINKS_RIGHT[name]) is True, capsys.readouterr().out


from attn_core.exercises.drills_kv_quant import check_kv_quantize  # noqa: E402


def _quant(x, dim, denominator=127, rounding=torch.round, dtype=torch.int8):
    scale = x.abs().amax(dim, keepdim=True) / denominator
    return rounding(x / scale).clamp(-127, 127).to(dtype), scale


def kv_right(k, v):
    return (*_quant(k, 0), *_quant(v, 1))


KV_WRONG = {
    "K per token": (lambda k, v: (*_quant(k, 1), *_quant(v, 1)), "K is quantised per token"),
    "V per channel": (lambda k, v: (*_quant(k, 0), *_quant(v, 0)), "V is quantised per channel"),
    "per tensor": (
        lambda k, v: (torch.round(k / (k.abs().max() / 127)).to(torch.int8), k.abs().max() / 127, *_quant(v, 1)),
        "one scale for the whole tensor",
    ),
    "range 255": (lambda k, v: (*_quant(k, 0, 255), *_quant(v, 1)), "±127"),
    "range 128": (lambda k, v: (*_quant(k, 0, 128), *_quant(v, 1)), "±127"),
    "inverse scale": (lambda k, v: (_quant(k, 0)[0], 1 / _quant(k, 0)[1], *_quant(v, 1)), "the scale is the step"),
    "truncation": (lambda k, v: (*_quant(k, 0, rounding=torch.trunc), *_quant(v, 1)), "round, don't truncate"),
    "float codes": (lambda k, v: (*_quant(k, 0, dtype=torch.float32), *_quant(v, 1)), "integer codes"),
    "no clamp, int16": (
        lambda k, v: (torch.round(k / (k.abs().amax(0) / 130)).to(torch.int16), k.abs().amax(0) / 127, *_quant(v, 1)),
        "outside [-127, 127]",
    ),
    "scale from mean |x|": (
        lambda k, v: (
            *_quant(k, 0),
            torch.round(v / (v.abs().mean(1, keepdim=True) / 127)).clamp(-127, 127).to(torch.int8),
            v.abs().mean(1, keepdim=True) / 127,
        ),
        "max|x| / 127",
    ),
    "three things": (lambda k, v: kv_right(k, v)[:3], "return four things"),
    "stub": (lambda k, v: ..., None),
}


@pytest.mark.parametrize("name", list(KV_WRONG))
def test_kv_quantize_rejects_with_the_diagnosis(name, capsys):
    fn, diagnosis = KV_WRONG[name]
    assert check_kv_quantize(fn) is False
    out = capsys.readouterr().out
    assert "❌" in out
    if diagnosis:
        assert diagnosis in out, out


KV_RIGHT = {
    "torch int8, keepdim": kv_right,
    "flat scales (d,) and (T,), int32": lambda k, v: (
        _quant(k, 0, dtype=torch.int32)[0],
        _quant(k, 0)[1].flatten(),
        _quant(v, 1, dtype=torch.int32)[0],
        _quant(v, 1)[1].flatten(),
    ),
    "numpy int8": lambda k, v: tuple(np.asarray(t.numpy()) for t in kv_right(k, v)),
    "float32 scales": lambda k, v: tuple(t.float() if t.is_floating_point() else t for t in kv_right(k, v)),
}


@pytest.mark.parametrize("name", list(KV_RIGHT))
def test_kv_quantize_accepts_correct_variants(name, capsys):
    assert check_kv_quantize(KV_RIGHT[name]) is True, capsys.readouterr().out


from attn_core.exercises.drills_indexer_topk import check_indexer_topk  # noqa: E402


def _bottom_right(scores):
    q_len, k_len = scores.shape
    return torch.arange(k_len) <= torch.arange(q_len)[:, None] + (k_len - q_len)


def _select(scores, k, allowed, largest=True):
    masked = scores.masked_fill(~allowed, float("-inf") if largest else float("inf"))
    index = masked.topk(min(k, scores.shape[-1]), dim=-1, largest=largest).indices
    return torch.zeros_like(allowed).scatter(-1, index, True) & allowed


def topk_right(scores, k):
    return _select(scores, k, _bottom_right(scores))


TOPK_WRONG = {
    "top-k before the mask": (lambda s, k: _select(s, k, torch.ones_like(_bottom_right(s))), "before masking"),
    "mask after top-k": (
        lambda s, k: _select(s, k, torch.ones_like(_bottom_right(s))) & _bottom_right(s),
        "mask before the top-k",
    ),
    "top-left": (lambda s, k: _select(s, k, torch.ones(s.shape, dtype=torch.bool).tril()), "top-left"),
    "lowest scores": (lambda s, k: _select(s, k, _bottom_right(s), largest=False), "lowest"),
    "diagonal excluded": (
        lambda s, k: _select(
            s,
            k,
            _bottom_right(s)
            & ~(torch.arange(s.shape[1]) == torch.arange(s.shape[0])[:, None] + s.shape[1] - s.shape[0]),
        ),
        "diagonal",
    ),
    "k + 1 keys": (lambda s, k: _select(s, k + 1, _bottom_right(s)), "at most"),
    "indices": (
        lambda s, k: s.masked_fill(~_bottom_right(s), float("-inf")).topk(min(k, s.shape[1]), -1).indices,
        "indices",
    ),
    "scores returned": (lambda s, k: s.masked_fill(~topk_right(s, k), 0.0), "not scores"),
    "transposed": (lambda s, k: topk_right(s, k).T, "future"),
    "random": (lambda s, k: torch.rand(s.shape) < 0.5, None),
    "stub": (lambda s, k: None, None),
}


@pytest.mark.parametrize("name", list(TOPK_WRONG))
def test_indexer_topk_rejects_with_the_diagnosis(name, capsys):
    fn, diagnosis = TOPK_WRONG[name]
    assert check_indexer_topk(fn) is False
    out = capsys.readouterr().out
    assert "❌" in out
    if diagnosis:
        assert diagnosis in out, out


def _numpy_argsort(scores, k):
    s = scores.numpy().copy()
    allowed = _bottom_right(scores).numpy()
    s[~allowed] = -np.inf
    chosen = np.zeros_like(allowed)
    for row in range(s.shape[0]):
        for j in np.argsort(-s[row])[: min(k, int(allowed[row].sum()))]:
            chosen[row, j] = True
    return chosen.astype(np.int64)


TOPK_RIGHT = {
    "torch topk": topk_right,
    "numpy argsort, int 0/1": _numpy_argsort,
    "python loop": lambda s, k: [
        [
            j in sorted(range(i + s.shape[1] - s.shape[0] + 1), key=lambda c: -s[i, c].item())[:k]
            for j in range(s.shape[1])
        ]
        for i in range(s.shape[0])
    ],
}


@pytest.mark.parametrize("name", list(TOPK_RIGHT))
def test_indexer_topk_accepts_correct_variants(name, capsys):
    assert check_indexer_topk(TOPK_RIGHT[name]) is True, capsys.readouterr().out


from attn_core.exercises import drills_gated_delta  # noqa: E402
from attn_core.exercises.drills_gated_delta import check_gated_delta_chunk  # noqa: E402


def _variant(**options):
    return lambda *inputs: drills_gated_delta._run(*inputs, **options)


def _wy_chunk(state, q, k, v, alpha, beta):
    """The same chunk computed with cumulative decays folded per token, a second formulation (still a loop)."""
    outs = []
    for t in range(k.shape[0]):
        read = k[t] @ state  # (d_v,): what the key reads before the update
        state = alpha[t] * (state - beta[t] * torch.outer(k[t], read)) + beta[t] * torch.outer(k[t], v[t])
        outs.append(q[t] @ state)
    return torch.stack(outs), state


DELTA_WRONG = {
    "no gate": (_variant(gate=False), "alpha is missing"),
    "no erase": (_variant(erase=False), "no erase term"),
    "erase without beta": (_variant(keep_beta=False), "needs beta too"),
    "gate on the write": (_variant(gate_after=True), "scaled the new write"),
    "read before write": (_variant(read_before=True), "before token t's update"),
    "zero state": (lambda s, *rest: drills_gated_delta._run(torch.zeros_like(s), *rest), "zero state"),
    "stale state returned": (lambda *inputs: (drills_gated_delta._run(*inputs)[0], inputs[0]), "returned state"),
    "out only": (lambda *inputs: drills_gated_delta._run(*inputs)[0], "return a pair"),
    "beta and alpha swapped": (lambda s, q, k, v, a, b: drills_gated_delta._run(s, q, k, v, b, a), "outputs differ"),
    "keys not used for erase, q instead": (
        lambda s, q, k, v, a, b: _wy_chunk(s, q, q, v, a, b),
        "outputs differ",
    ),
    "stub": (lambda *inputs: None, None),
}


@pytest.mark.parametrize("name", list(DELTA_WRONG))
def test_gated_delta_chunk_rejects_with_the_diagnosis(name, capsys):
    fn, diagnosis = DELTA_WRONG[name]
    assert check_gated_delta_chunk(fn) is False
    out = capsys.readouterr().out
    assert "❌" in out
    if diagnosis:
        assert diagnosis in out, out


DELTA_RIGHT = {
    "reference loop": _variant(),
    "read-then-write form": _wy_chunk,
    "float32": lambda *inputs: tuple(t.float() for t in _wy_chunk(*(x.float() for x in inputs))),
    "numpy": lambda *inputs: tuple(np.asarray(t.numpy()) for t in _wy_chunk(*inputs)),
}


@pytest.mark.parametrize("name", list(DELTA_RIGHT))
def test_gated_delta_chunk_accepts_correct_variants(name, capsys):
    assert check_gated_delta_chunk(DELTA_RIGHT[name]) is True, capsys.readouterr().out
