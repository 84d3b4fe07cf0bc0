"""In a live JupyterLab: the explorer's stored fallback stays out of sight, and ``ac.set_figure_scale`` shows
every figure larger (explorers and plain ``plot_attention`` figures alike).

The fallback (Explorer.fallback_bundle) is an output of its own next to the widget, holding a widget view of no
model: ipywidgets' Lab renderer hides it, so a reader with a kernel sees one figure, not two. Harness, skip/fail
policy and helpers: tests/e2e/conftest.py and test_lab_widgets.py.
"""

from __future__ import annotations

from test_lab_widgets import assert_no_errors, explorer, open_notebook, run_all, screenshot_on_failure, write_notebook

# Widths (CSS px) of the images a code cell's output area shows on screen, in order.
SHOWN_IMAGES_JS = """cell => [...cell.querySelectorAll('.jp-OutputArea img')]
  .filter(img => img.getClientRects().length && img.getBoundingClientRect().width > 0)
  .map(img => img.getBoundingClientRect().width)"""

PLAIN = "ac.plot_attention(torch.full((4, 4), 0.25))"
EXPLORER = "widgets.temperature_explorer(panel_size=1.5)"


def test_fallback_hidden_live_and_figure_scale_enlarges_every_figure(page, lab, screenshot_dir):
    notebook = write_notebook(
        lab.notebooks / "e2e_figure_scale.ipynb",
        f"%matplotlib inline\nimport torch\nimport attn_core as ac\nfrom attn_core.viz import widgets\n{EXPLORER}",
        PLAIN,
        f"ac.set_figure_scale(1.5)\n{EXPLORER}",
        PLAIN,
        "%matplotlib inline",  # matplotlib-inline puts its own PNG printer back: the scale must survive it
        PLAIN,
    )
    with screenshot_on_failure(page, screenshot_dir, "figure-scale"):
        open_notebook(page, lab, notebook)
        run_all(page)
        assert_no_errors(page)
        explorer(page, "temperature")
        cells = page.locator(".jp-Notebook .jp-CodeCell")
        shown = [cells.nth(i).evaluate(SHOWN_IMAGES_JS) for i in range(6)]
        # one figure per cell: the explorer's live image, not also its fallback
        assert [len(widths) for widths in shown] == [1, 1, 1, 1, 0, 1], shown
        (explorer_1,), (plain_1,), (explorer_15,), (plain_15,), _, (plain_again,) = shown
        assert abs(plain_again - plain_15) <= 1, f"after %matplotlib inline: {plain_again:.0f} px, not {plain_15:.0f}"
        assert abs(explorer_15 - 1.5 * explorer_1) <= 3, f"explorer {explorer_1:.0f} -> {explorer_15:.0f} px"
        assert abs(plain_15 - 1.5 * plain_1) <= 3, f"plot_attention {plain_1:.0f} -> {plain_15:.0f} px"
