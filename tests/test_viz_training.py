"""The training explorer (notebook 12): the two head scores measure what they claim, the picture
draws the checkpoint, loss and scores it is given, the explanation names the heads above the
thresholds, and the explorer reacts to its step slider and head menu."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_core.viz import training as vt
from attn_core.viz.plotting import DPI
from attn_core.viz.textpaths import text_items

LENGTH = 12
PERIOD = 5
TOKENS = torch.tensor([i % PERIOD for i in range(LENGTH)])  # (L,) a segment of 5 distinct ids, repeated
CAUSAL = torch.ones(LENGTH, LENGTH, dtype=torch.bool).tril()  # (L, L) True = may attend


def uniform() -> torch.Tensor:
    return CAUSAL.double() / CAUSAL.sum(-1, keepdim=True)  # (L, L) every visible key alike


def previous_token_head() -> torch.Tensor:
    weights = torch.zeros(LENGTH, LENGTH, dtype=torch.float64)  # (L, L)
    weights[0, 0] = 1.0
    weights[torch.arange(1, LENGTH), torch.arange(LENGTH - 1)] = 1.0  # query i -> key i-1
    return weights


def induction_head() -> torch.Tensor:
    weights = uniform().clone()  # queries without an earlier occurrence: anything
    for i in range(PERIOD, LENGTH):
        weights[i] = 0.0
        weights[i, i - PERIOD + 1] = 1.0  # the token after the previous occurrence of token i
    return weights


def brute_force_induction(weights: torch.Tensor, tokens: torch.Tensor) -> float:
    """The definition, one query at a time: the mean over queries with an earlier occurrence of their
    token of the weight on keys j <= i whose previous token is the query's token."""
    shares = []
    for i in range(len(tokens)):
        keys = [j for j in range(1, i + 1) if tokens[j - 1] == tokens[i]]
        if keys:
            shares.append(sum(float(weights[i, j]) for j in keys))
    return sum(shares) / len(shares)


def test_previous_token_score():
    assert float(vt.previous_token_score(previous_token_head())) == pytest.approx(1.0)
    expected = np.mean([1 / (i + 1) for i in range(1, LENGTH)])  # uniform: 1 / (keys visible) on key i-1
    assert float(vt.previous_token_score(uniform())) == pytest.approx(expected, abs=1e-12)
    assert float(vt.previous_token_score(induction_head())) < 0.2
    stacked = torch.stack([uniform(), previous_token_head()])  # (2, L, L) -> (2,)
    assert vt.previous_token_score(stacked).tolist() == pytest.approx([expected, 1.0])


def test_induction_score_matches_the_definition():
    assert float(vt.induction_score(induction_head()[None], TOKENS)) == pytest.approx(1.0)
    assert float(vt.induction_score(previous_token_head()[None], TOKENS)) == pytest.approx(0.0)
    generator = torch.Generator().manual_seed(0)
    for _ in range(5):
        tokens = torch.randint(0, 4, (LENGTH,), generator=generator)  # (L,) repeats, not periodic
        scores = torch.randn(LENGTH, LENGTH, generator=generator, dtype=torch.float64)
        weights = scores.masked_fill(~CAUSAL, float("-inf")).softmax(-1)  # (L, L) causal
        got = float(vt.induction_score(weights[None, None], tokens[None]))  # (1, 1, L, L) -> (1,)
        assert got == pytest.approx(brute_force_induction(weights, tokens), abs=1e-12)


def test_induction_score_averages_over_the_batch_and_keeps_head_dims():
    weights = torch.stack([induction_head(), uniform()])[:, None, None]  # (B=2, 1, 1, L, L)
    tokens = torch.stack([TOKENS, TOKENS])  # (B, L)
    score = vt.induction_score(weights, tokens)  # (1, 1)
    assert score.shape == (1, 1)
    expected = (1.0 + brute_force_induction(uniform(), TOKENS)) / 2  # both rows have the same queries counted
    assert float(score) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("weights", "tokens", "message"),
    [
        (torch.ones(1, 4, 4), torch.arange(4), "no token repeats"),
        (torch.ones(2, 4, 4), torch.zeros(1, 4, dtype=torch.long), "B = 1"),
        (torch.ones(1, 5, 5), torch.zeros(4, dtype=torch.long), r"expected \(L, L\)"),
        (torch.ones(1, 4, 4), torch.zeros(4), "integer ids"),
    ],
)
def test_induction_score_rejects_bad_input(weights, tokens, message):
    with pytest.raises(ValueError, match=message):
        vt.induction_score(weights, tokens)


def test_previous_token_score_rejects_bad_input():
    with pytest.raises(ValueError, match=r"\(\.\.\., L, L\)"):
        vt.previous_token_score(torch.ones(3, 4))
    with pytest.raises(ValueError, match="at least 2 tokens"):
        vt.previous_token_score(torch.ones(1, 1))


def make_history(num_checkpoints: int = 7, every: int = 5) -> vt.TrainingHistory:
    """A fake training run: L0 H1 becomes a previous-token head and L1 H0 an induction head."""
    steps = tuple(range(0, num_checkpoints * every, every))
    weights = torch.empty(num_checkpoints, 2, 2, LENGTH, LENGTH, dtype=torch.float64)
    for c in range(num_checkpoints):
        t = c / (num_checkpoints - 1)  # 0 -> 1 over training
        weights[c, 0, 0] = weights[c, 1, 1] = uniform()
        weights[c, 0, 1] = (1 - t) * uniform() + t * previous_token_head()
        weights[c, 1, 0] = (1 - t) * uniform() + t * induction_head()
    batch = weights.permute(0, 1, 2, 3, 4)[None]  # (B=1, C, layers, heads, L, L)
    return vt.TrainingHistory(
        steps=steps,
        loss=tuple(2.5 * 0.9**s for s in range(steps[-1] + 1)),
        tokens=tuple("ABCDE"[int(t)] for t in TOKENS),
        weights=weights,
        previous_token=vt.previous_token_score(weights),
        induction=vt.induction_score(batch, TOKENS[None]),
    )


def test_history_index_and_validation():
    history = make_history()
    assert history.index(0) == 0 and history.index(7) == 1 and history.index(30) == 6
    with pytest.raises(ValueError, match="outside training"):
        history.index(31)
    good = dict(steps=(0, 5), loss=(1.0,) * 6, tokens=("A",) * 3, weights=torch.zeros(2, 1, 1, 3, 3))
    scores = dict(previous_token=torch.zeros(2, 1, 1), induction=torch.zeros(2, 1, 1))
    vt.TrainingHistory(**good, **scores)
    with pytest.raises(ValueError, match="increasing"):
        vt.TrainingHistory(**{**good, "steps": (5, 0)}, **scores)
    with pytest.raises(ValueError, match="has no loss"):
        vt.TrainingHistory(**{**good, "loss": (1.0,) * 5}, **scores)
    with pytest.raises(ValueError, match="weights must be"):
        vt.TrainingHistory(**{**good, "weights": torch.zeros(2, 1, 3, 3)}, **scores)
    with pytest.raises(ValueError, match="induction must be"):
        vt.TrainingHistory(**good, previous_token=torch.zeros(2, 1, 1), induction=torch.zeros(2, 1))


def _image(figure, gid):
    found = [image for image in figure.axes[0].images if image.get_gid() == gid]
    assert len(found) == 1, gid
    return found[0]


def _line(figure, gid):
    found = [line for line in figure.axes[0].lines if line.get_gid() == gid]
    assert len(found) == 1, gid
    return found[0]


def test_the_heatmaps_are_the_checkpoint_weights_on_a_fixed_scale():
    history = make_history()
    figure = vt.render_training(history, step=12)  # checkpoint at step 10
    for layer in range(2):
        for head in range(2):
            image = _image(figure, f"heatmap-L{layer}-H{head}")
            np.testing.assert_array_equal(np.asarray(image.get_array()), history.weights[2, layer, head].numpy())
            assert image.norm.vmin == 0 and image.norm.vmax == 1
    relative = vt.render_training(history, step=12, fixed_scale=False)  # query 0 (always 1.0) left out
    assert _image(relative, "heatmap-L0-H0").norm.vmax == pytest.approx(float(history.weights[2, :, :, 1:].max()))
    one = vt.render_training(history, head="L1 H0")
    assert [image.get_gid() for image in one.axes[0].images if image.get_gid()] == ["heatmap-L1-H0"]


def test_the_curves_are_the_loss_and_scores_and_the_marker_is_the_step():
    history = make_history()
    figure = vt.render_training(history, step=20, head="L1 H0")
    geometry = figure.training_geometry
    px, py, pw, ph = geometry["loss_box"]
    xs, ys = _line(figure, "loss").get_data()
    np.testing.assert_allclose((np.asarray(xs) - px) / pw * geometry["last_step"], np.arange(31), atol=1e-9)
    np.testing.assert_allclose((np.asarray(ys) - py) / ph * geometry["loss_top"], history.loss, atol=1e-9)
    marker_x = _line(figure, "step-marker-loss").get_data()[0][0]
    assert (marker_x - px) / pw * geometry["last_step"] == pytest.approx(20)
    sx, sy, sw, sh = geometry["score_box"]
    for kind, scores in (("induction", history.induction), ("previous", history.previous_token)):
        xs, ys = _line(figure, f"score-{kind}").get_data()
        np.testing.assert_allclose((np.asarray(xs) - sx) / sw * 30, history.steps, atol=1e-9)
        np.testing.assert_allclose((np.asarray(ys) - sy) / sh, scores[:, 1, 0].numpy(), atol=1e-9)
    # "all": the curves are the best head of each kind at the end of training.
    best = vt.render_training(history)
    _, sy, _, sh = best.training_geometry["score_box"]
    for kind, scores in (("previous", history.previous_token[:, 0, 1]), ("induction", history.induction[:, 1, 0])):
        np.testing.assert_allclose((np.asarray(_line(best, f"score-{kind}").get_data()[1]) - sy) / sh, scores.numpy())


def test_figure_is_readable_and_labelled():
    history = make_history()
    for head, values in (("all", False), ("L0 H1", True)):
        figure = vt.render_training(history, step=10, head=head, values=values)
        assert figure.dpi == DPI >= 110
        items = [label for _, label, _ in text_items(figure)]
        assert items and all(label.size >= 9 for label in items)
        shown = {label.text for label in items}
        assert {"query", "key", "training step", "loss", "score", "loss 0.872 at step 10"} <= shown
    assert "1.0" in shown  # L0 H1 at step 10 puts 1/3 + 2/3 on key i-1 ... and 1.0 on query 0's only key


def test_explanation_names_the_heads_above_the_thresholds():
    history = make_history()
    start, end = vt.explain_training(history, 0), vt.explain_training(history)
    assert (
        "Previous-token heads (score > 0.5): none yet" in start and "Induction heads (score > 0.5): none yet" in start
    )
    assert "Previous-token heads (score > 0.5): L0 H1 (1.00)" in end
    assert "Induction heads (score > 0.5): L1 H0 (1.00)" in end
    one = vt.explain_training(history, 30, "L1 H0")
    assert "induction score 1.00" in one and "an induction head" in one
    assert "neither pattern yet" in vt.explain_training(history, 30, "L0 H0")


@pytest.mark.parametrize(("params", "message"), [(dict(step=99), "outside training"), (dict(head="L5 H0"), "does not")])
def test_impossible_settings_raise_value_error(params, message):
    with pytest.raises(ValueError, match=message):
        vt.render_training(make_history(), **params)


def test_explorer_builds_and_every_control_changes_the_picture():
    history = make_history()
    explorer = vt.training_explorer(history)
    assert explorer.error is None and bytes(explorer.image.value).startswith(b"\x89PNG")
    assert "attn-explorer-training" in explorer.widget._dom_classes
    step = explorer.controls["step"]
    assert (step.min, step.max, step.step, step.value) == (0, 30, 5, 30)
    assert explorer.controls["head"].options == ("all", "L0 H0", "L0 H1", "L1 H0", "L1 H1")
    changes = {"step": 10, "head": "L1 H0", "panel_size": 3.0, "font_scale": 1.3, "values": True, "fixed_scale": False}
    assert set(changes) == set(explorer.controls)
    for name, value in changes.items():
        before = bytes(explorer.image.value)
        explorer.controls[name].value = value
        assert explorer.error is None, (name, explorer.error)
        assert bytes(explorer.image.value) != before, f"moving {name!r} did not change the figure"
    assert "step 10" in explorer.explanation.value and "L1 H0" in explorer.explanation.value
    assert explorer.play.max == 30 and explorer.play.step == 5
