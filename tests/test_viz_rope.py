"""The RoPE explorer (notebook 06): the picture draws the angles and curves it claims, the explorer
reacts to every control, impossible settings give a message instead of a traceback, and a redraw
stays within the series' 50 ms budget."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attn_core as ac
from attn_core.viz import rope as vr
from attn_core.viz.plotting import DPI
from attn_core.viz.textpaths import text_items


def _line(figure, gid):
    found = [line for line in figure.axes[0].lines if line.get_gid() == gid]
    assert len(found) == 1, gid
    return found[0]


def _drawn_angle(figure, gid) -> float:
    """Angle of a vector drawn from the circle's centre, read back from the figure."""
    xs, ys = _line(figure, gid).get_data()
    cx, cy = figure.rope_geometry["center"]
    assert (xs[0], ys[0]) == pytest.approx((cx, cy))
    assert math.hypot(xs[1] - cx, ys[1] - cy) == pytest.approx(figure.rope_geometry["radius"])  # on the circle
    return math.atan2(ys[1] - cy, xs[1] - cx)


def _turn(after: float, before: float) -> float:
    """after - before, wrapped to (-π, π]."""
    return math.atan2(math.sin(after - before), math.cos(after - before))


@pytest.mark.parametrize(
    "params",
    [
        {},
        dict(q_position=7, k_position=0, pair=1, base=100.0, head_dim=8),
        dict(q_position=100, k_position=37, pair=5, base=500000.0, head_dim=64, seed=3),
        dict(q_position=3, k_position=3, pair=0),
    ],
)
def test_the_angles_drawn_are_position_times_theta(params):
    figure = vr.render_rope(**params)
    p = {**vr.ROPE_DEFAULTS, **params}
    theta = p["base"] ** (-2 * p["pair"] / p["head_dim"])
    for name, position in (("q", p["q_position"]), ("k", p["k_position"])):
        turned = _turn(_drawn_angle(figure, f"{name}-rotated"), _drawn_angle(figure, f"{name}-original"))
        assert turned == pytest.approx(_turn(position * theta, 0.0), abs=1e-9), name
    # The angle between q and k changed by (m - n)·θ, whatever m and n are.
    between = _turn(_drawn_angle(figure, "q-rotated"), _drawn_angle(figure, "k-rotated"))
    before = _turn(_drawn_angle(figure, "q-original"), _drawn_angle(figure, "k-original"))
    assert _turn(between, before) == pytest.approx(_turn((p["q_position"] - p["k_position"]) * theta, 0), abs=1e-9)


def test_the_drawn_pair_is_the_rotate_half_pair_of_ac_apply_rope():
    """The rotated q of the picture is pair i, features (i, i + D/2), of ac.apply_rope's output."""
    params = dict(q_position=9, k_position=4, pair=2, base=1000.0, head_dim=16, seed=1)
    q, k = vr.rope_demo_vectors(16, seed=1)  # (D,) each
    figure = vr.render_rope(**params)
    for name, vector, position in (("q", q, 9), ("k", k, 4)):
        rotated = ac.apply_rope(torch.from_numpy(vector)[None], [position], base=1000.0)[0]  # (D,)
        expected = math.atan2(float(rotated[2 + 8]), float(rotated[2]))
        assert _turn(_drawn_angle(figure, f"{name}-rotated"), expected) == pytest.approx(0, abs=1e-9)


def test_the_curves_are_the_scores_of_ac_apply_rope():
    params = dict(q_position=20, k_position=0, head_dim=16, base=10000.0, max_distance=20, seed=2)
    curves = vr.distance_curves(**params)
    q, k = (torch.from_numpy(v) for v in vr.rope_demo_vectors(16, seed=2))  # (D,) each
    distances = torch.arange(21)  # (N,)
    q_rot = ac.apply_rope(q.expand(21, 16), distances)  # (N, D): q at position d
    k_rot = ac.apply_rope(k[None], [0])  # (1, D): k at position 0
    cosine = (q_rot @ k_rot[0]) / (q.norm() * k.norm())  # (N,)
    np.testing.assert_allclose(curves["this"], cosine.numpy(), rtol=0, atol=1e-12)
    # The average over random q of <R_m q, R_n q> / E|q|^2 = (2/D) Σ cos(d θ_i): 1 at 0, then it decays.
    thetas = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)  # (D/2,)
    expected = torch.cos(distances.double()[:, None] * thetas).mean(-1)  # (N,)
    np.testing.assert_allclose(curves["average"], expected.numpy(), rtol=0, atol=1e-12)
    assert curves["average"][0] == pytest.approx(1.0)
    np.testing.assert_allclose(curves["pair"], np.cos(np.arange(21) * 1.0), atol=1e-12)  # pair 0: θ = 1
    # And the picture draws exactly these curves, in the panel's coordinates.
    figure = vr.render_rope(**params)
    px, py, pw, ph = figure.rope_geometry["box"]
    for key in ("average", "pair", "this"):
        xs, ys = _line(figure, f"curve-{key}").get_data()
        np.testing.assert_allclose((np.asarray(xs) - px) / pw * 20, curves["distance"], atol=1e-9)
        np.testing.assert_allclose((np.asarray(ys) - py) / ph * 2 - 1, curves[key], atol=1e-9)
    xs, _ = _line(figure, "distance-marker").get_data()
    assert (xs[0] - px) / pw * 20 == pytest.approx(20)


def test_average_over_random_queries_matches_sampling():
    """The 'average' curve is E<R_m q, R_n q>/E|q|² for q with i.i.d. entries: check by sampling."""
    curves = vr.distance_curves(head_dim=16, max_distance=32, q_position=32, k_position=0)
    q = torch.randn(20_000, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))  # (N, D)
    distance = 12
    score = (ac.apply_rope(q, [distance]) * q).sum(-1).mean() / (q * q).sum(-1).mean()  # rotated at 12 vs at 0
    # Each sample's normalised score lies in [-1, 1]: the mean of 20,000 has standard error <= 1/sqrt(20,000) ≈ 0.007.
    assert float(score) == pytest.approx(curves["average"][distance], abs=0.03)


def test_figure_is_readable_and_names_what_it_shows():
    figure = vr.render_rope(values=True)
    assert figure.dpi == DPI >= 110
    items = [label for _, label, _ in text_items(figure)]
    assert items and all(label.size >= 9 for label in items)
    shown = {label.text for label in items}
    assert {"q at 6 (" + f"{math.degrees(vr.pair_angles()['q_rotated']):.0f}°)", "distance m − n (tokens)"} <= shown
    assert "pair 0: θ = 1 rad/token" in shown
    assert {"average over random q", "pair 0 alone", "this q, k"} <= shown


def test_explanation_gives_the_numbers():
    text = vr.explain_rope(q_position=9, k_position=4, pair=1, head_dim=8, base=100.0)
    theta = 100.0 ** (-2 / 8)
    assert f"{theta:.3g} rad per token" in text
    assert f"(m − n)·θ = {5 * theta:.3g} rad" in text


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (dict(k_position=9, q_position=3), "comes after the query"),
        (dict(pair=8, head_dim=16), "pair 8 does not exist"),
        (dict(head_dim=7), "even int"),
        (dict(base=1.0), "base must be a number > 1"),
        (dict(max_distance=0), "max_distance"),
    ],
)
def test_impossible_settings_raise_value_error(params, message):
    with pytest.raises(ValueError, match=message):
        vr.render_rope(**params)


def test_unknown_parameter_is_rejected():
    with pytest.raises(TypeError, match="unknown RoPE explorer parameter"):
        vr.render_rope(seq_len=8)


def test_explorer_builds_and_every_control_changes_the_picture():
    explorer = vr.rope_explorer()
    assert explorer.error is None and bytes(explorer.image.value).startswith(b"\x89PNG")
    assert "attn-explorer-rope" in explorer.widget._dom_classes
    changes = {
        "q_position": 20,
        "k_position": 5,
        "pair": 3,
        "base": 500000.0,
        "head_dim": 64,
        "max_distance": 256,
        "values": True,
        "panel_size": 3.5,
        "font_scale": 1.4,
    }
    assert set(changes) == set(explorer.controls)
    for name, value in changes.items():
        before = bytes(explorer.image.value)
        explorer.controls[name].value = value
        assert explorer.error is None, (name, explorer.error)
        assert bytes(explorer.image.value) != before, f"moving {name!r} did not change the figure"
    assert "pair 3 of 32" in explorer.explanation.value


def test_explorer_shows_a_message_for_a_key_after_the_query_and_recovers():
    explorer = vr.rope_explorer()
    explorer.controls["k_position"].value = 50  # the query is at 6
    assert explorer.error is not None and "comes after the query" in explorer.error
    assert "Not possible" in explorer.explanation.value
    explorer.controls["q_position"].value = 60
    assert explorer.error is None and "Not possible" not in explorer.explanation.value


def test_pair_slider_follows_head_dim():
    explorer = vr.rope_explorer(head_dim=64, pair=20)
    assert explorer.controls["pair"].max == 31 and explorer.controls["pair"].value == 20
    explorer.controls["head_dim"].value = 8  # 4 pairs: the slider clamps to 3
    assert explorer.controls["pair"].max == 3 and explorer.controls["pair"].value == 3
    assert explorer.error is None
