"""attn_core.models.tiny_lm: the pluggable tiny LM, its Adam, the seeded loop and the synthetic tasks."""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

import attn_core as ac
from attn_core.models import tiny_lm
from attn_core.models.tiny_lm import IGNORE, Adam, TinyLM, train_lm


def gqa_factory(layer_idx: int) -> nn.Module:
    return ac.GroupedQueryAttention(16, 2, 1, rope_base=10000.0)


class NoWeights(nn.Module):
    """A mixer without a weight matrix (as linear attention's recurrent form): a causal running mean."""

    def __init__(self, hidden_dim: int):
        super().__init__()
        self.proj = nn.Linear(hidden_dim, hidden_dim)

    def forward(self, x, is_causal=True):
        counts = torch.arange(1, x.shape[1] + 1, dtype=x.dtype)[:, None]  # (L, 1)
        return self.proj(x.cumsum(1) / counts), None  # (B, L, E), no weights


def test_forward_shapes_and_hidden():
    torch.manual_seed(0)
    model = TinyLM(10, 16, 3, gqa_factory, mlp_hidden=32)
    tokens = torch.randint(0, 10, (2, 7))  # (B, L)
    logits, weights, hidden = model(tokens, return_hidden=True)
    assert logits.shape == (2, 7, 10)
    assert len(weights) == 3 and all(w.shape == (2, 2, 7, 7) for w in weights)
    assert hidden.shape == (4, 2, 7, 16)
    torch.testing.assert_close(hidden[0], model.embed(tokens))
    assert model(tokens)[0].shape == (2, 7, 10)


def test_causal_future_tokens_do_not_change_past_logits():
    torch.manual_seed(0)
    model = TinyLM(10, 16, 2, gqa_factory, mlp_hidden=16).double()
    tokens = torch.randint(0, 10, (2, 9))  # (B, L)
    changed = tokens.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 10
    torch.testing.assert_close(model(tokens)[0][:, :5], model(changed)[0][:, :5], rtol=0, atol=1e-12)


def test_mixer_without_weights_and_first_token_share_nan():
    torch.manual_seed(0)
    model = TinyLM(10, 16, 2, lambda i: NoWeights(16) if i == 0 else gqa_factory(i))
    logits, weights = model(torch.randint(0, 10, (3, 6)))
    assert weights[0] is None
    share = tiny_lm.first_token_share(weights)  # (layers, H)
    assert share.shape == (2, 2) and share[0].isnan().all() and not share[1].isnan().any()


def test_first_token_share_and_residual_max_values():
    weights = torch.zeros(2, 1, 3, 3)  # (B, H, L, L)
    weights[:, :, :, 0] = torch.tensor([1.0, 0.5, 0.25])  # query 0 is left out
    torch.testing.assert_close(tiny_lm.first_token_share(weights), torch.tensor([0.375]))
    hidden = torch.zeros(2, 1, 2, 2)
    hidden[1, 0, 1, 1] = -7.0
    torch.testing.assert_close(tiny_lm.residual_max(hidden), torch.tensor([0.0, 7.0]))


def test_adam_equals_torch_optim_adam_bitwise():
    torch.manual_seed(0)
    model = TinyLM(10, 16, 1, gqa_factory)
    twin = TinyLM(10, 16, 1, gqa_factory)
    twin.load_state_dict(model.state_dict())
    ours, theirs = Adam(model.parameters(), lr=1e-2), torch.optim.Adam(twin.parameters(), lr=1e-2)
    for step in range(3):
        tokens = torch.randint(0, 10, (4, 6), generator=torch.Generator().manual_seed(step))
        for m, opt in ((model, ours), (twin, theirs)):
            m(tokens)[0].square().mean().backward()
            opt.step()
        theirs.zero_grad()
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a, b)


def test_train_lm_is_seeded_and_learns_the_induction_task():
    task = functools.partial(tiny_lm.repeated_sequence_batch, seq_len=16, vocab_size=12)
    build = lambda: TinyLM(12, 16, 2, gqa_factory)  # noqa: E731
    first = train_lm(build, task, steps=150, batch_size=32, seed=3)
    second = train_lm(build, task, steps=150, batch_size=32, seed=3)
    assert first.losses == second.losses and len(first.losses) == 150
    # copying is learnable: the loss ends (mean of the last 10 batches) below half its start (ln 12 ≈ 2.5)
    assert sum(first.losses[-10:]) / 10 < 0.5 * first.losses[0]
    assert not first.model.training


def test_train_lm_on_step_sees_every_checkpoint():
    seen = []
    train_lm(
        lambda: TinyLM(16, 16, 1, gqa_factory),
        tiny_lm.repeated_sequence_batch,
        steps=3,
        batch_size=2,
        on_step=lambda step, model: seen.append((step, model.training, torch.is_grad_enabled())),
    )
    assert seen == [(0, False, False), (1, False, False), (2, False, False), (3, False, False)]


def test_associative_recall_batch_layout():
    inputs, targets = tiny_lm.associative_recall_batch(
        5, torch.Generator().manual_seed(0), num_pairs=4, num_queries=2, vocab_size=20
    )
    assert inputs.shape == targets.shape == (5, 11)
    sequence = torch.cat([inputs, targets[:, -1:]], dim=1)  # (B, 12): the last target is the last token
    for row, target_row in zip(sequence, targets, strict=True):
        pairs = dict(zip(row[0:8:2].tolist(), row[1:8:2].tolist(), strict=True))
        assert len(pairs) == 4 and all(k < 10 <= v < 20 for k, v in pairs.items())
        scored = (target_row != IGNORE).nonzero().flatten().tolist()
        assert scored == [8, 10]  # the values after the two queried keys
        for position in scored:
            assert target_row[position] == pairs[int(row[position])]


def test_repeated_sequence_batch_targets_are_predictable():
    inputs, targets = tiny_lm.repeated_sequence_batch(6, torch.Generator().manual_seed(1), seq_len=12, vocab_size=8)
    assert inputs.shape == targets.shape == (6, 12)
    for row, target_row in zip(inputs, targets, strict=True):
        scored = (target_row != IGNORE).nonzero().flatten()
        period = int(scored[0]) + 1
        for position in scored.tolist():
            assert target_row[position] == row[position + 1 - period]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"vocab_size": 0}, ValueError, "vocab_size must be a positive int"),
        ({"num_layers": True}, ValueError, "num_layers must be a positive int"),
        ({"mlp_hidden": 0}, ValueError, "mlp_hidden must be None"),
        ({"mixer_factory": "gqa"}, TypeError, "mixer_factory must be a callable"),
        ({"mixer_factory": lambda i: None}, TypeError, r"mixer_factory\(0\) must return an nn.Module"),
    ],
)
def test_tiny_lm_bad_construction(kwargs, error, match):
    arguments = {"vocab_size": 10, "hidden_dim": 16, "num_layers": 1, "mixer_factory": gqa_factory} | kwargs
    with pytest.raises(error, match=match):
        TinyLM(**arguments)


def test_tiny_lm_bad_tokens():
    model = TinyLM(10, 16, 1, gqa_factory)
    with pytest.raises(ValueError, match="long tensor"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"0 \.\. 9"):
        model(torch.tensor([[3, 10]]))


def test_bad_task_and_training_arguments():
    with pytest.raises(ValueError, match="num_queries"):
        tiny_lm.associative_recall_batch(2, torch.Generator(), num_pairs=2, num_queries=3)
    with pytest.raises(ValueError, match="min_period"):
        tiny_lm.repeated_sequence_batch(2, torch.Generator(), seq_len=10, min_period=6)
    with pytest.raises(ValueError, match="steps must be an int"):
        train_lm(TinyLM(10, 16, 1, gqa_factory), tiny_lm.repeated_sequence_batch, steps=-1)
    with pytest.raises(TypeError, match="zero-argument builder"):
        train_lm("model", tiny_lm.repeated_sequence_batch, steps=1)
    with pytest.raises(ValueError, match="disagree"):
        tiny_lm.lm_loss(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))


def test_associative_recall_with_bos_prefix():
    inputs, targets = tiny_lm.associative_recall_batch(
        3, torch.Generator().manual_seed(0), num_pairs=4, num_queries=2, vocab_size=20, bos=20
    )
    plain_inputs, plain_targets = tiny_lm.associative_recall_batch(
        3, torch.Generator().manual_seed(0), num_pairs=4, num_queries=2, vocab_size=20
    )
    assert inputs.shape == (3, 12) and (inputs[:, 0] == 20).all() and (targets[:, 0] == IGNORE).all()
    assert torch.equal(inputs[:, 1:], plain_inputs) and torch.equal(targets[:, 1:], plain_targets)
    with pytest.raises(ValueError, match="bos must be None or a token id >= vocab_size"):
        tiny_lm.associative_recall_batch(2, torch.Generator(), vocab_size=20, bos=3)
