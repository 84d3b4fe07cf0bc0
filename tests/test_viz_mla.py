"""The MLA cache explorer (notebook 09): the figure draws the bytes it claims, the numbers are the
published configs', the explorer reacts to every control, impossible settings give a message, and the
figure is readable (≥ 110 dpi, ≥ 9 pt)."""

from __future__ import annotations

import numpy as np
import pytest

from attn_core.viz import mla as vm
from attn_core.viz.plotting import DPI
from attn_core.viz.textpaths import text_items


def test_deepseek_v3_and_real_configs():
    v3 = vm.cache_bytes_per_token()  # defaults: DeepSeek-V3
    assert v3["MLA"] == 61 * (512 + 64) * 2 == 70_272
    assert v3["MHA"] == 61 * 2 * 128 * 128 * 2
    v2_lite = vm.cache_bytes_per_token(num_layers=27, num_heads=16, num_kv_heads=16)
    assert v2_lite["MLA"] == 27 * 576 * 2 and v2_lite["MHA"] == v2_lite["GQA"] == 27 * 2 * 16 * 128 * 2
    llama70 = vm.cache_bytes_per_token(num_layers=80, num_heads=64, num_kv_heads=8)
    assert llama70["GQA"] == 80 * 2 * 8 * 128 * 2 == 327_680


@pytest.mark.parametrize("params", [{}, dict(num_layers=3, num_heads=4, num_kv_heads=2, kv_lora_rank=64)])
def test_bars_and_lines_draw_the_numbers(params):
    fig = vm.render_mla_cache(**params)
    expected = vm.cache_bytes_per_token(**params)
    bars_ax, lines_ax = fig.axes
    bars = {p.get_gid(): p for p in bars_ax.patches}
    lines = {line.get_gid(): line for line in lines_ax.lines}
    for kind in vm.KINDS:
        assert bars[f"bar-{kind}"].get_height() == pytest.approx(expected[kind] / 1024)
        xs, ys = lines[f"line-{kind}"].get_data()
        np.testing.assert_allclose(ys, np.asarray(xs) * expected[kind] / 2**30)
    assert fig.mla_cache["per_token"] == expected


def test_mla_is_smallest_for_deepseek_and_ordering():
    b = vm.cache_bytes_per_token()
    assert b["MLA"] < b["MQA"] * 2.5 and b["MHA"] > b["GQA"] > b["MQA"]
    assert b["MHA"] / b["MLA"] == pytest.approx(2 * 128 * 128 / 576)


def test_figure_is_readable():
    # every string is drawn as glyph outlines (viz.textpaths): text_items lists them with their role and size
    fig = vm.render_mla_cache(values=True)
    assert fig.dpi == DPI >= 110
    items = text_items(fig)
    roles = {role for role, _, _ in items}
    assert {"title", "xtick", "ytick", "xlabel", "ylabel", "legend", "value"} <= roles
    assert all(label.size >= 9 for _, label, _ in items)
    assert "68.6 KiB" in {label.text for role, label, _ in items if role == "value"}
    assert {label.text for role, label, _ in items if role == "legend"} == set(vm.KINDS)
    assert not [label for role, label, _ in text_items(vm.render_mla_cache(values=False)) if role == "value"]


def test_context_lengths():
    assert vm.context_lengths(8).tolist() == [1, 2, 4, 8]
    assert vm.context_lengths(10).tolist() == [1, 2, 4, 8, 10]


def test_explanation_gives_the_numbers():
    text = vm.explain_mla_cache()
    assert "70,272 B per token" in text
    assert f"{2 * 128 * 128 / 576:.3g}× for MHA" in text


def test_explanation_shows_the_arithmetic_behind_the_mha_ratio():
    # Notebook 09 gives two "MHA" numbers for DeepSeek-V3 (56.9× for head_dim-wide K and V, 71× for V3's own
    # 192-wide keys): the line must say which one its bar is, with the products that make 56.9×.
    text = vm.explain_mla_cache()
    assert "MHA 2·128·128 = 32,768" in text and "MLA 512 + 64 = 576 numbers" in text
    assert "GQA 2·8·128 = 2,048" in text and "MQA 2·128 = 256" in text
    assert "head_dim 128 for K and for V" in text
    assert 32_768 / 576 == pytest.approx(56.9, abs=0.05)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (dict(num_kv_heads=3), "must divide num_heads"),
        (dict(num_layers=0), "num_layers must be a positive int"),
        (dict(qk_rope_head_dim=-1), "qk_rope_head_dim"),
        (dict(max_context=1), "max_context"),
    ],
)
def test_impossible_settings_raise_value_error(params, message):
    with pytest.raises(ValueError, match=message):
        vm.render_mla_cache(**params)


def test_unknown_parameter():
    with pytest.raises(TypeError, match="unknown parameter"):
        vm.cache_bytes_per_token(seq_len=3)


def test_explorer_builds_and_every_control_changes_the_picture():
    explorer = vm.mla_cache_explorer()
    assert explorer.error is None and bytes(explorer.image.value).startswith(b"\x89PNG")
    assert "attn-explorer-mla_cache" in explorer.widget._dom_classes
    changes = dict(
        kv_lora_rank=256,
        qk_rope_head_dim=32,
        num_heads=64,
        num_kv_heads=4,
        num_layers=27,
        head_dim=64,
        bytes_per_element=4,
        panel_size=3.5,
        font_scale=1.3,
        values=False,
    )
    assert set(changes) == set(explorer.controls)
    for name, value in changes.items():
        before = bytes(explorer.image.value)
        explorer.controls[name].value = value
        assert explorer.error is None, (name, explorer.error)
        assert bytes(explorer.image.value) != before, name
    explorer.controls["num_kv_heads"].value = 16
    explorer.controls["num_heads"].value = 8
    assert "must divide" in explorer.error
