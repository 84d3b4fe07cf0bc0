"""The notebook 12f checkers (Mamba-2 as attention) accept right answers written several ways and name the usual
wrong ones, each wrong answer written as a learner would write it (not through the graders' own variants)."""

import pytest
import torch
import torch.nn.functional as F
from learner_answers import JUNK, has_chinese_entry, one_red_line

from attn_core.exercises.ssd import check_segment_sums, check_ssd_chunk, check_ssd_step


def verdict(capsys, check, answer) -> tuple[bool, str]:
    ok = check(answer)
    return ok, capsys.readouterr().out


def future(size):
    return torch.ones(size, size, dtype=torch.bool).triu(1)  # (T, T) j > i


# --------------------------------------------------------------------------- exercise 1: segment sums


def segsum_masked_cumsum(a):
    size = a.shape[-1]
    below = torch.ones(size, size, dtype=torch.bool).tril(-1)
    sums = a[..., :, None].expand(*a.shape, size).masked_fill(~below, 0.0).cumsum(-2)
    return sums.masked_fill(future(size), float("-inf"))


def segsum_loops(a):
    size = a.shape[-1]
    out = torch.full((*a.shape, size), float("-inf"), dtype=a.dtype)
    for i in range(size):
        for j in range(i + 1):
            out[..., i, j] = a[..., j + 1 : i + 1].sum(-1)
    return out


def segsum_einsum(a):
    size = a.shape[-1]
    t, i, j = torch.arange(size)[:, None, None], torch.arange(size)[None, :, None], torch.arange(size)[None, None, :]
    between = ((j < t) & (t <= i)).to(a.dtype)  # (T, T, T): token t lies in segment (j, i]
    return torch.einsum("...t,tij->...ij", a, between).masked_fill(future(size), float("-inf"))


def segsum_float64(a):  # subtracting cumulative sums is fine once the sums are float64
    cum = a.double().cumsum(-1)
    return (cum[..., :, None] - cum[..., None, :]).masked_fill(future(a.shape[-1]), float("-inf"))


def segsum_cumsum_difference(a):
    cum = a.cumsum(-1)
    return (cum[..., :, None] - cum[..., None, :]).masked_fill(future(a.shape[-1]), float("-inf"))


def segsum_nan(a):  # −inf filled before the subtraction: −inf − (−inf) = NaN above the diagonal
    cum = a.double().cumsum(-1)
    rows = cum[..., :, None].expand(*a.shape, a.shape[-1]).masked_fill(future(a.shape[-1]), float("-inf"))
    cols = cum[..., None, :].expand(*a.shape, a.shape[-1]).masked_fill(future(a.shape[-1]), float("-inf"))
    return rows - cols


def segsum_zero_above(a):
    return segsum_loops(a).nan_to_num(neginf=0.0)


def segsum_inclusive(a):
    return segsum_loops(a) + a[..., None, :]


def segsum_shifted(a):
    size = a.shape[-1]
    out = torch.full((*a.shape, size), float("-inf"), dtype=a.dtype)
    for i in range(size):
        for j in range(i + 1):
            out[..., i, j] = a[..., j:i].sum(-1)
    return out


def segsum_strict(a):
    return segsum_loops(a).masked_fill(torch.eye(a.shape[-1], dtype=torch.bool), float("-inf"))


def segsum_exp(a):
    return segsum_loops(a).exp()


def segsum_from_start(a):
    cum = a.cumsum(-1)
    return cum[..., :, None].expand(*a.shape, a.shape[-1]).masked_fill(future(a.shape[-1]), float("-inf"))


# --------------------------------------------------------------------------- exercise 2: one step


def step_right(state, x, dt, A, B, C):
    state = (dt * A).exp()[..., None, None] * state + (dt[..., None] * x)[..., :, None] * B[..., None, :]
    return torch.einsum("bhpn,bhn->bhp", state, C), state


def step_outer(state, x, dt, A, B, C):
    decay = torch.exp(dt * A).unsqueeze(-1).unsqueeze(-1)
    new = decay * state + torch.einsum("bhp,bhn->bhpn", dt.unsqueeze(-1) * x, B)
    return (new @ C.unsqueeze(-1)).squeeze(-1), new


def step_loop(state, x, dt, A, B, C):
    new = torch.empty_like(state)
    y = torch.empty_like(x)
    for b in range(x.shape[0]):
        for h in range(x.shape[1]):
            new[b, h] = torch.exp(dt[b, h] * A[h]) * state[b, h] + dt[b, h] * torch.outer(x[b, h], B[b, h])
            y[b, h] = new[b, h] @ C[b, h]
    return y, new


def step_variant(state, x, dt, A, B, C, *, decay=None, write=None, read_from=None, y_scale=1.0, decay_last=False):
    decay = (dt * A).exp() if decay is None else decay
    write = dt[..., None] * x if write is None else write
    written = write[..., :, None] * B[..., None, :]
    new = decay[..., None, None] * (state + written) if decay_last else decay[..., None, None] * state + written
    read = new if read_from is None else read_from
    return y_scale * torch.einsum("bhpn,bhn->bhp", read, C), new


def step_in_place(state, x, dt, A, B, C):
    state.mul_((dt * A).exp()[..., None, None])
    state += (dt[..., None] * x)[..., :, None] * B[..., None, :]
    return torch.einsum("bhpn,bhn->bhp", state, C), state


def step_read_before(state, x, dt, A, B, C):
    y = torch.einsum("bhpn,bhn->bhp", state, C)
    return y, step_right(state, x, dt, A, B, C)[1]


# --------------------------------------------------------------------------- exercise 3: one chunk


def segsum(a):
    return segsum_masked_cumsum(a)


def chunk_right(x, dt, A, B, C, state):
    log_decay = dt * A[:, None]  # (b, H, c)
    mask = segsum(log_decay).exp()  # (b, H, c, c)
    values = x * dt[..., None]  # (b, H, c, P)
    y = (C @ B.transpose(-1, -2) * mask) @ values  # (b, H, c, P)
    entry = log_decay.cumsum(-1)  # (b, H, c)
    y = y + (C @ state.transpose(-1, -2)) * entry.exp()[..., None]
    to_end = (entry[..., -1:] - entry).exp()  # (b, H, c)
    new = entry[..., -1, None, None].exp() * state + (values * to_end[..., None]).transpose(-1, -2) @ B
    return y, new


def chunk_by_recurrence(x, dt, A, B, C, state):
    ys = []
    for t in range(x.shape[2]):
        y, state = step_right(state, x[:, :, t], dt[:, :, t], A, B[:, :, t], C[:, :, t])
        ys.append(y)
    return torch.stack(ys, dim=2), state


def chunk_as_attention(x, dt, A, B, C, state):
    # The whole chunk as attention over [entering state, tokens]: the state's read is an extra "key".
    log_decay = dt * A[:, None]
    matrix = C @ B.transpose(-1, -2) * segsum(log_decay).exp() * dt[..., None, :]  # (b, H, c, c)
    entry = log_decay.cumsum(-1)
    y = matrix @ x + torch.einsum("bhcn,bhpn->bhcp", C, state) * entry.exp()[..., None]
    new = state * entry[..., -1].exp()[..., None, None]
    for j in range(x.shape[2]):
        weight = (entry[..., -1] - entry[..., j]).exp() * dt[..., j]  # (b, H)
        new = new + weight[..., None, None] * x[:, :, j, :, None] * B[:, :, j, None, :]
    return y, new


def chunk_variant(x, dt, A, B, C, state, **change):
    log_decay = dt * A[:, None]
    seg = segsum(log_decay)
    if change.get("inclusive"):
        seg = seg + log_decay[..., None, :]
    values = x if change.get("no_dt") else x * dt[..., None]
    scores = B @ C.transpose(-1, -2) if change.get("swap") else C @ B.transpose(-1, -2)
    mask = torch.ones_like(seg).tril() if change.get("no_mask") else seg.exp()
    y = (scores * mask) @ values
    entry = log_decay.cumsum(-1)
    read_decay = {"none": torch.zeros_like(entry), "exclusive": entry - log_decay}.get(change.get("entry"), entry)
    if change.get("entry") != "missing":
        y = y + (C @ state.transpose(-1, -2)) * read_decay.exp()[..., None]
    to_end = torch.ones_like(entry) if change.get("no_to_end") else (entry[..., -1:] - entry).exp()
    carried = 1.0 if change.get("no_carry_decay") else entry[..., -1, None, None].exp()
    keys = C if change.get("write_C") else B
    new = carried * state + (values * to_end[..., None]).transpose(-1, -2) @ keys
    return y, state.clone() if change.get("unchanged") else new


RIGHT = {
    check_segment_sums: [segsum_masked_cumsum, segsum_loops, segsum_einsum, segsum_float64],
    check_ssd_step: [step_right, step_outer, step_loop],
    check_ssd_chunk: [chunk_right, chunk_by_recurrence, chunk_as_attention],
}


@pytest.mark.parametrize(
    "check, answer", [(c, a) for c, answers in RIGHT.items() for a in answers], ids=lambda x: x.__name__
)
def test_right_answers_pass(capsys, check, answer):
    ok, out = verdict(capsys, check, answer)
    assert ok and out.startswith("✅"), out


@pytest.mark.parametrize("check", RIGHT, ids=lambda c: c.__name__)
def test_stub_is_not_attempted(capsys, check):
    ok, out = verdict(capsys, check, lambda *args: ...)
    assert not ok and "not attempted" in out


@pytest.mark.parametrize("check", RIGHT, ids=lambda c: c.__name__)
@pytest.mark.parametrize("junk", range(len(JUNK)))
def test_junk_gets_one_red_line(capsys, check, junk):
    ok, out = verdict(capsys, check, lambda *args: JUNK[junk])
    assert not ok and one_red_line(out), out


def dt_softplus_again(state, x, dt, A, B, C):
    return step_right(state, x, F.softplus(dt), A, B, C)


WRONG = [
    (check_segment_sums, segsum_cumsum_difference, "subtracted cumulative sums"),
    (check_segment_sums, segsum_nan, "NaN above the diagonal"),
    (check_segment_sums, segsum_zero_above, "you put 0"),
    (check_segment_sums, lambda a: segsum_loops(a).transpose(-1, -2), "transposed"),
    (check_segment_sums, segsum_inclusive, "starts at j + 1"),
    (check_segment_sums, segsum_shifted, "includes a_i"),
    (check_segment_sums, segsum_strict, "diagonal must be 0"),
    (check_segment_sums, lambda a: -segsum_loops(a), "sign is flipped"),
    (check_segment_sums, segsum_exp, "exp of the sums"),
    (check_segment_sums, segsum_from_start, "since the sequence start"),
    (check_segment_sums, lambda a: segsum_loops(a)[..., -1, :], "must have shape"),
    (check_ssd_step, lambda s, x, dt, A, B, C: step_variant(s, x, dt, A, B, C, write=x), "write is missing dt"),
    (
        check_ssd_step,
        lambda s, x, dt, A, B, C: step_variant(s, x, dt, A, B, C, decay=A.exp() + 0 * dt),
        "decay is missing dt",
    ),  # fmt: skip
    (check_ssd_step, lambda s, x, dt, A, B, C: step_variant(s, x, dt, A, B, C, decay=dt * A), "dt·A itself"),
    (check_ssd_step, lambda s, x, dt, A, B, C: step_variant(s, x, dt, A, B, C, decay=torch.exp(-dt * A)), "grow"),
    (check_ssd_step, step_read_before, "before this token's write"),
    (check_ssd_step, lambda s, x, dt, A, B, C: step_right(s, x, dt, A, C, B), "B and C are swapped"),
    (check_ssd_step, lambda s, x, dt, A, B, C: step_variant(s, x, dt, A, B, C, decay_last=True), "decayed after"),
    (
        check_ssd_step,
        lambda s, x, dt, A, B, C: step_variant(s, x, dt, A, B, C, write=x, y_scale=dt[..., None]),
        "not the read",
    ),  # fmt: skip
    (check_ssd_step, dt_softplus_again, "softplus again"),
    (check_ssd_step, lambda s, x, dt, A, B, C: step_right(0 * s, x, dt, A, B, C), "ignores the carried state"),
    (check_ssd_step, step_in_place, "in place"),
    (check_ssd_step, lambda s, x, dt, A, B, C: step_right(s, x, dt, A, B, C)[::-1], "(new_state, y)"),
    (check_ssd_step, lambda *args: (step_right(*args)[0], step_right(*args)[1].transpose(-1, -2)), "transposed"),
    (check_ssd_step, lambda *args: step_right(*args)[0], "return a pair"),
    (check_ssd_chunk, lambda *args: chunk_variant(*args, entry="missing"), "misses the entering state"),
    (check_ssd_chunk, lambda *args: chunk_variant(*args, entry="none"), "read without its decay"),
    (check_ssd_chunk, lambda *args: chunk_variant(*args, entry="exclusive"), "entering state's decay"),
    (check_ssd_chunk, lambda *args: chunk_variant(*args, no_to_end=True), "decay to the chunk's end"),
    (check_ssd_chunk, lambda *args: chunk_variant(*args, no_carry_decay=True), "not decayed across the chunk"),
    (check_ssd_chunk, lambda *args: chunk_variant(*args, no_dt=True), "values are missing dt"),
    (check_ssd_chunk, lambda *args: chunk_variant(*args, no_mask=True), "plain causal linear attention"),
    (check_ssd_chunk, lambda *args: chunk_variant(*args, swap=True), "the scores are B Cᵀ"),
    (check_ssd_chunk, lambda *args: chunk_variant(*args, write_C=True), "written with C"),
    (check_ssd_chunk, lambda *args: chunk_variant(*args, unchanged=True), "entering state unchanged"),
    (check_ssd_chunk, lambda *args: chunk_variant(*args, inclusive=True), "in the decay mask"),
    (check_ssd_chunk, lambda *args: chunk_right(*args)[::-1], "(new_state, y)"),
]


@pytest.mark.parametrize("check, answer, named", WRONG, ids=[f"{c.__name__}-{m}" for c, _, m in WRONG])
def test_wrong_answers_are_named(capsys, check, answer, named):
    ok, out = verdict(capsys, check, answer)
    assert not ok and one_red_line(out) and named in out, out
    assert has_chinese_entry(out), f"no Chinese catalog entry for: {out}"


@pytest.mark.parametrize("check", RIGHT, ids=lambda c: c.__name__)
def test_every_checker_has_ten_named_mistakes(check):
    assert sum(1 for c, _, _ in WRONG if c is check) >= 10
