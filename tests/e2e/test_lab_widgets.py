"""End to end: every core notebook's explorer works in a real JupyterLab in a real browser.

For each notebook 01-05 the test opens it in Lab, runs all cells, finds the explorer, moves its
"tokens" slider with the keyboard and picks another option in one dropdown, and after each change
checks that the heatmap image changed, settled and is not blank, that the explanation line is
not "Not possible: ...", and that no cell shows an error. That is the bertviz failure mode
(a blank or frozen output) checked where it happens: in the browser.

The last tests check the checker: a deliberately broken explorer (frozen, blank) and a notebook
that raises must make the same driver fail, so a green run means something. Note that an exception
raised inside a widget callback never reaches the notebook's outputs (JupyterLab sends it to its Log
Console), so a broken explorer is caught by its image not changing, not by the error check.

Helpers raise AssertionError (never hang): every wait is a bounded poll.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Each core notebook and the explorer it shows first (its CSS class is attn-explorer-<name>).
CORE_NOTEBOOKS = {
    "01_scaled_dot_product_attention.ipynb": "temperature",
    "02_multi_head_attention.ipynb": "heads",
    "03_multi_query_attention.ipynb": "heads",
    "04_grouped_query_attention.ipynb": "gqa",
    "05_masks_and_dropout.ipynb": "masks",
    "06_rotary_position_embeddings.ipynb": "rope",
    "09_multi_head_latent_attention.ipynb": "mla_cache",
    "11b_gemma3_attention_maps.ipynb": "decoder",
    "12_backward_and_training.ipynb": "training",
}

OPEN_TIMEOUT_S = 120  # page load + kernel start; ~8 s on an idle 2-core machine
RUN_ALL_TIMEOUT_S = 240  # the longest notebook takes well under a minute here
CHANGE_TIMEOUT_S = 30  # one re-render measures 0.1-0.3 s here; generous because the CPUs are shared
QUIET_S = 0.5  # "settled": the same image src for this long while the kernel is idle
POLL_S = 0.1

EXPLORER = '[class*="attn-explorer-"]'
# JupyterLab 4 renders both stream stderr and error tracebacks with this mime type.
ERROR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
# A dropdown change that keeps each explorer's default setting possible: (label, option).
DROPDOWN_CHOICE = {
    "temperature": ("d_k", "16"),
    "heads": ("heads", "2"),
    "gqa": ("query heads", "4"),  # 4 query heads over the default 2 kv heads: groups of 2
    "masks": ("mask", "sliding window"),
}

# Runs in the page: records every src change of the explorer's image and the time of every
# keydown/change inside the explorer, on the browser's clock (no Python round trip in the numbers).
WATCH_JS = """root => {
  if (root.__attnWatch) return true;
  const img = root.querySelector('img');
  if (!img) return false;
  const watch = root.__attnWatch = {img, changes: [], actions: []};
  new MutationObserver(() => watch.changes.push({t: performance.now(), src: img.src}))
    .observe(img, {attributes: true, attributeFilter: ['src']});
  for (const type of ['keydown', 'change'])
    root.addEventListener(type, () => watch.actions.push(performance.now()), true);
  return true;
}"""

STATE_JS = """(root, since) => {
  const watch = root.__attnWatch, img = watch.img;
  const changes = watch.changes.filter(c => c.t >= since);
  return {now: performance.now(), changes: changes.length,
          first: changes.length ? changes[0].t : null, last: changes.length ? changes[changes.length - 1].t : null,
          loaded: img.complete && img.naturalWidth > 0, width: img.naturalWidth, height: img.naturalHeight};
}"""

ACTION_JS = "(root, after) => root.__attnWatch.actions.find(t => t >= after) ?? null"

# Counts distinct (quantized) colours of the image: a heatmap has dozens, a blank figure one or two.
COLOURS_JS = """root => {
  const img = root.__attnWatch.img;
  const canvas = document.createElement('canvas');
  const w = canvas.width = Math.min(img.naturalWidth, 600), h = canvas.height = Math.min(img.naturalHeight, 600);
  const ctx = canvas.getContext('2d');
  ctx.drawImage(img, 0, 0, w, h);
  const data = ctx.getImageData(0, 0, w, h).data, seen = new Set();
  for (let i = 0; i < data.length && seen.size < 64; i += 4)
    seen.add((data[i] >> 4) << 8 | (data[i + 1] >> 4) << 4 | data[i + 2] >> 4);
  return seen.size;
}"""

KERNEL_STATUS_JS = """() => [...document.querySelectorAll('.jp-Notebook-ExecutionIndicator[data-status]')]
  .map(e => e.getAttribute('data-status'))"""

# Set before clicking Run All: flips to true as soon as any cell shows [*] (queued or running), which
# a tiny notebook may do for only a moment: polling the prompts afterwards could miss it.
RUN_STARTED_JS = """() => {
  window.__attnRunStarted = false;
  const notebook = document.querySelector('.jp-NotebookPanel .jp-Notebook');
  const check = () => {
    const prompts = notebook.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt');
    if (![...prompts].some(e => e.textContent.includes('[*]'))) return;
    window.__attnRunStarted = true;
    observer.disconnect();
  };
  const observer = new MutationObserver(check);
  observer.observe(notebook, {subtree: true, childList: true, characterData: true});
}"""

PROMPTS_JS = """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]
  .map(e => e.textContent.trim())"""


# ------------------------------------------------------------------------------------ helpers


def poll(condition: Callable[[], object], timeout_s: float, message: Callable[[], str] | str) -> object:
    """Return condition()'s first truthy value; AssertionError after timeout_s (never an endless wait)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(message() if callable(message) else message)
        time.sleep(POLL_S)


def kernel_status(page) -> str:
    """The notebook's kernel status as JupyterLab shows it ("idle", "busy", ...; "" before it exists)."""
    statuses = page.evaluate(KERNEL_STATUS_JS)
    return statuses[0] if statuses and len(set(statuses)) == 1 else ",".join(statuses)


def wait_idle(page, timeout_s: float = CHANGE_TIMEOUT_S, quiet_s: float = 0.0) -> None:
    """Wait until Lab shows the kernel idle (for quiet_s in a row: it is idle for an instant between cells)."""
    since = [None]

    def idle_long_enough() -> bool:
        if kernel_status(page) != "idle":
            since[0] = None
            return False
        since[0] = since[0] or time.monotonic()
        return time.monotonic() - since[0] >= quiet_s

    poll(idle_long_enough, timeout_s, lambda: f"kernel not idle after {timeout_s} s (status {kernel_status(page)!r})")


def open_notebook(page, lab, notebook: str) -> None:
    """Open notebooks/<notebook> in Lab and wait until it is loaded and its kernel idle.

    Both matter: a Run All clicked while the panel still shows its loading spinner does nothing,
    and the kernel can report idle before the notebook's cells are there.
    """
    timeout_ms = OPEN_TIMEOUT_S * 1000
    page.goto(lab.page_url(notebook), timeout=timeout_ms)
    page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(timeout=timeout_ms)
    page.locator(".jp-NotebookPanel .jp-Spinner").wait_for(state="detached", timeout=timeout_ms)
    # The page's indicator reads "idle" before the kernel exists. A Run All clicked then is lost when the kernel
    # connects: cells queued, then dropped, left at [ ] (seen on a loaded machine). Ask the server.
    poll(lambda: kernel_state(lab, notebook) == "idle", OPEN_TIMEOUT_S, f"no idle kernel for {notebook} on the server")
    wait_idle(page, OPEN_TIMEOUT_S)


def kernel_state(lab, notebook: str) -> str | None:
    """The server's execution state of the kernel of ``notebooks/<notebook>``'s session; None while there is none."""
    for session in lab.api("GET", "/api/sessions") or []:
        if session.get("path", "").endswith(f"notebooks/{notebook}") and session.get("kernel"):
            kernel = lab.api("GET", f"/api/kernels/{session['kernel']['id']}")
            return kernel.get("execution_state") if kernel else None
    return None


def click_run_all(page) -> None:
    """Menu Run → Run All Cells. Hover before clicking: Lumino can drop a click on a menu still opening."""
    page.get_by_role("menuitem", name="Run", exact=True).click()
    item = page.get_by_role("menuitem", name="Run All Cells", exact=True)
    item.wait_for(state="visible")
    item.hover()
    item.click()


def run_all(page) -> None:
    """Run → Run All Cells through the menu, as a learner does, and wait until every cell has run.

    Started means some cell showed ``[*]``; if none did within 5 s the menu click was lost and is
    repeated (at most three times). Done means no cell prompt shows ``[*]`` (running or queued)
    and the kernel has been idle for a second; the kernel alone is not enough, it goes idle for
    an instant between cells.
    """
    page.evaluate(RUN_STARTED_JS)
    for attempt in range(3):
        click_run_all(page)
        try:
            poll(lambda: page.evaluate("window.__attnRunStarted"), 5, "Run All did not start: no cell was queued")
            break
        except AssertionError:
            if attempt == 2:
                raise
            page.keyboard.press("Escape")  # close the menu if it is still open, then try again
    deadline = time.monotonic() + RUN_ALL_TIMEOUT_S
    while True:
        poll(
            lambda: "[*]:" not in page.evaluate(PROMPTS_JS),
            max(deadline - time.monotonic(), 0),
            lambda: f"Run All not finished after {RUN_ALL_TIMEOUT_S} s: prompts {page.evaluate(PROMPTS_JS)}",
        )
        wait_idle(page, max(deadline - time.monotonic(), 1), quiet_s=1.0)
        if "[*]:" not in page.evaluate(PROMPTS_JS):
            return


def assert_no_errors(page) -> None:
    """No output area shows a traceback or stderr text, and every code cell ran (none left at ``[ ]``)."""
    errors = [text.strip()[-600:] for text in page.locator(ERROR_OUTPUT).all_inner_texts()]
    assert not errors, f"{len(errors)} error output(s) in the notebook:\n" + "\n---\n".join(errors)
    prompts = page.evaluate(PROMPTS_JS)
    not_run = [i for i, prompt in enumerate(prompts) if not re.fullmatch(r"\[\d+\]:", prompt)]
    assert not not_run, f"code cells {not_run} (of {len(prompts)}) did not run: prompts {prompts}"


def explorer(page, name: str | None = None):
    """The first explorer on the page (or the one called ``name``), scrolled into view and watched."""
    selector = f".attn-explorer-{name}" if name else EXPLORER
    found = page.locator(selector).first
    try:
        found.wait_for(state="attached", timeout=CHANGE_TIMEOUT_S * 1000)
    except Exception as err:
        last = [text[:200] for text in page.locator(".jp-OutputArea-output").all_inner_texts()[-3:]]
        raise AssertionError(
            f"no explorer ({selector}) rendered: the widget output is missing or blank (last outputs: {last})"
        ) from err
    found.scroll_into_view_if_needed()
    img = found.locator("img").first
    poll(
        lambda: img.count() and img.evaluate("i => i.complete && i.naturalWidth > 0"),
        CHANGE_TIMEOUT_S,
        f"the explorer {selector} shows no image",
    )
    assert found.evaluate(WATCH_JS), "explorer has no img to watch"
    return found


def explorer_name(box) -> str:
    """``gqa`` for a box with class ``attn-explorer-gqa``."""
    return re.search(r"attn-explorer-(\S+)", box.get_attribute("class")).group(1)


def explanation(box) -> str:
    """The explanation line under the figure (the explorer's own HTML child, not the save status)."""
    return box.evaluate("r => ([...r.children].find(c => c.classList.contains('widget-html')) || {}).innerText || ''")


def browser_now(page) -> float:
    return page.evaluate("performance.now()")


def labelled(box, label: str):
    """Locator for a widget label reading exactly ``label`` (for ``filter(has=...)``)."""
    return box.page.locator(".widget-label", has_text=re.compile(rf"^{re.escape(label)}$"))


def change_slider(page, box, label: str = "tokens") -> str:
    """Move the slider called ``label`` (else the first enabled one) one step with the keyboard.

    Keyboard rather than a drag: a drag fires many intermediate values, one key press exactly one.
    Returns a description such as ``tokens 6→7``.
    """
    sliders = box.locator(".widget-slider:not(.mod-disabled)")
    named = sliders.filter(has=labelled(box, label))
    slider = named.first if named.count() else sliders.first
    name = slider.locator(".widget-label").first.inner_text()
    handle = slider.locator(".noUi-handle").first
    before, text = handle.get_attribute("aria-valuenow"), handle.get_attribute("aria-valuetext")
    key = "ArrowLeft" if before == handle.get_attribute("aria-valuemax") else "ArrowRight"
    handle.focus()
    handle.press(key)
    poll(
        lambda: handle.get_attribute("aria-valuenow") != before,
        5,
        f"slider {name!r} did not move on {key} (still {text})",
    )
    return f"{name} {text}→{handle.get_attribute('aria-valuetext')}"


def change_dropdown(page, box, label: str | None = None, option: str | None = None) -> str:
    """Pick ``option`` in the dropdown called ``label``; default: the first dropdown's next option.

    The choice must keep the setting possible (an impossible one shows "Not possible" and, by
    design, no new image), which is why the per-explorer choice lives in DROPDOWN_CHOICE.
    """
    dropdowns = box.locator(".widget-dropdown")
    if label is not None:
        dropdowns = dropdowns.filter(has=labelled(box, label))
    assert dropdowns.count(), f"explorer has no dropdown {label!r}"
    dropdown = dropdowns.first
    name = dropdown.locator(".widget-label").first.inner_text()
    select = dropdown.locator("select")
    before = select.input_value()
    if option is None:
        options = select.locator("option").evaluate_all("os => os.map(o => o.value)")
        option = next(value for value in options if value != before)
    select.select_option(option)
    return f"{name} {before}→{option}"


def wait_image_settled(page, box, since: float, timeout_s: float = CHANGE_TIMEOUT_S) -> dict:
    """Wait until the image changed after ``since`` and then kept one src for QUIET_S while idle.

    A slider re-renders per value and the kernel may still send an earlier frame, so the first
    new src is not the answer; the settled one is. Also checks the settled image is not blank.
    Returns the timings in ms from the control change (browser clock).
    """
    state: dict = {}

    def settled() -> bool:
        state.update(box.evaluate(STATE_JS, since))
        return (
            state["changes"] > 0
            and state["loaded"]
            and state["now"] - state["last"] >= QUIET_S * 1000
            and kernel_status(page) == "idle"
        )

    def why() -> str:
        if not state.get("changes"):
            return (
                f"the explorer image did not change within {timeout_s} s of the control change"
                f" (kernel {kernel_status(page)!r}; explanation: {explanation(box)[:200]!r}); an exception"
                " in a widget callback is shown only in JupyterLab's Log Console, not in the notebook"
            )
        return f"the explorer image did not settle within {timeout_s} s: {state}"

    poll(settled, timeout_s, why)
    colours = box.evaluate(COLOURS_JS)
    assert colours >= 8, f"the explorer image is blank ({colours} colour(s), {state['width']}x{state['height']} px)"
    return {
        "first_change_ms": round(state["first"] - since, 1),
        "settled_ms": round(state["last"] - since, 1),
        "confirmed_ms": round(state["now"] - since, 1),
        "frames": state["changes"],
    }


def measured_change(page, box, change: Callable[[], str], timeout_s: float) -> tuple[str, dict]:
    """Apply ``change`` to the explorer and time it from its input event to the settled image."""
    after = browser_now(page)
    what = change()
    since = poll(lambda: box.evaluate(ACTION_JS, after), 5, f"no input event reached the explorer for {what}")
    return what, wait_image_settled(page, box, since, timeout_s)


def check_explorer(
    page, box, notebook: str, log: list | None = None, change_timeout_s: float = CHANGE_TIMEOUT_S
) -> None:
    """Two slider steps and one dropdown pick; each must re-render a non-blank image, possible, error-free."""
    name = explorer_name(box)
    label, option = DROPDOWN_CHOICE.get(name, (None, None))
    changes = [
        ("slider", lambda: change_slider(page, box)),
        ("slider", lambda: change_slider(page, box)),
        ("dropdown", lambda: change_dropdown(page, box, label, option)),
    ]
    for kind, change in changes:
        what, timings = measured_change(page, box, change, change_timeout_s)
        text = explanation(box)
        assert not text.startswith("Not possible"), f"{what} gave an impossible setting: {text}"
        assert_no_errors(page)
        if log is not None:
            log.append({"notebook": notebook, "explorer": name, "kind": kind, "change": what, **timings})


def check_notebook(
    page,
    lab,
    notebook: str,
    log: list | None = None,
    name: str | None = None,
    change_timeout_s: float = CHANGE_TIMEOUT_S,
) -> str:
    """The whole learner path: open, Run All, no errors, then the (first) explorer reacts to its controls.

    ``name`` picks the explorer with class ``attn-explorer-<name>`` instead of the first one.
    Returns the name of the explorer checked (from that class).
    """
    open_notebook(page, lab, notebook)
    run_all(page)
    assert_no_errors(page)
    box = explorer(page, name)
    check_explorer(page, box, notebook, log, change_timeout_s)
    return explorer_name(box)


@contextlib.contextmanager
def screenshot_on_failure(page, directory: Path, stem: str) -> Iterator[None]:
    """Turn any failure into an AssertionError naming a screenshot of the page at that moment."""
    try:
        yield
    except Exception as err:
        path = directory / f"{stem}.png"
        try:
            page.screenshot(path=str(path), timeout=15_000)
            where = f"screenshot: {path}"
        except Exception as shot_error:  # the page may be gone; the original error matters more
            where = f"(no screenshot: {shot_error})"
        raise AssertionError(f"{err}\n{where}") from err


def write_notebook(path: Path, *sources: str) -> str:
    """Write a notebook of code cells (python3 kernel) and return its name for open_notebook."""
    cells = [
        {"cell_type": "code", "execution_count": None, "id": f"cell-{i}", "metadata": {}, "outputs": [], "source": src}
        for i, src in enumerate(sources)
    ]
    kernelspec = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    notebook = {"cells": cells, "metadata": {"kernelspec": kernelspec}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(notebook, indent=1))
    return path.name


# -------------------------------------------------------------------------------------- tests


# every push opens three (a plain figure, a head grid, the mask explorer's disabled controls); the scheduled run all
EVERY_PUSH = {"01_scaled_dot_product_attention.ipynb", "04_grouped_query_attention.ipynb", "05_masks_and_dropout.ipynb"}


@pytest.mark.parametrize(
    "notebook",
    [pytest.param(nb, id=nb[:2], marks=() if nb in EVERY_PUSH else pytest.mark.slow) for nb in CORE_NOTEBOOKS],
)
def test_explorer_works_in_jupyterlab(page, lab, notebook, latency_log, screenshot_dir):
    """Run All, then the notebook's explorer redraws for slider steps and a dropdown pick."""
    assert (lab.notebooks / notebook).is_file(), f"core notebook notebooks/{notebook} does not exist"
    with screenshot_on_failure(page, screenshot_dir, Path(notebook).stem):
        name = check_notebook(page, lab, notebook, latency_log)
    expected = CORE_NOTEBOOKS[notebook]
    assert name == expected, f"the first explorer has class attn-explorer-{name}, expected attn-explorer-{expected}"


BROKEN_EXPLORERS = '''\
import ipywidgets as w
from matplotlib.figure import Figure

from attn_core.viz import widgets as W


class RaisingExplorer(W.Explorer):
    """Draws once, then every control change raises: a regression in the render path."""

    def update(self, change=None):
        if change is not None:
            raise RuntimeError("deliberately broken explorer")
        super().update(change)


class BlankExplorer(W.Explorer):
    """Draws once, then shows an empty white figure: the classic blank-output complaint."""

    def update(self, change=None):
        super().update(change)
        if change is not None:
            self.image.value = W.figure_png(Figure(figsize=(4, 3)))


def controls():
    return {
        "seq_len": w.IntSlider(description="tokens", value=6, min=2, max=24),
        "num_heads": w.Dropdown(description="query heads", options=[4, 8], value=8),
    }'''


def test_checker_fails_on_broken_explorers(page, lab, screenshot_dir):
    """Test of the test: the driver the real tests use must fail on a frozen and on a blank explorer."""
    notebook = write_notebook(
        lab.notebooks / "e2e_broken_explorer.ipynb",
        BROKEN_EXPLORERS,
        'RaisingExplorer("broken-raises", controls(), {"num_kv_heads": 2})',
        'BlankExplorer("broken-blank", controls(), {"num_kv_heads": 2})',
    )
    log: list = []
    with pytest.raises(AssertionError, match="image did not change") as frozen:
        with screenshot_on_failure(page, screenshot_dir, "broken-raises"):
            check_notebook(page, lab, notebook, log, change_timeout_s=8)
    assert "screenshot: " in str(frozen.value) and Path(str(frozen.value).rsplit("screenshot: ", 1)[1]).is_file()
    with pytest.raises(AssertionError, match="image is blank"):
        check_explorer(page, explorer(page, "broken-blank"), notebook, log, change_timeout_s=8)
    assert not log, "a failed change must not be reported as a latency"


def test_checker_fails_on_error_outputs(page, lab):
    """Test of the test: ERROR_OUTPUT really matches JupyterLab 4's traceback and stderr outputs."""
    notebook = write_notebook(
        lab.notebooks / "e2e_raises.ipynb",
        'import sys\nprint("warning on stderr", file=sys.stderr)',
        'raise RuntimeError("deliberate error")',
        "from attn_core.viz import widgets\nwidgets.gqa_explorer()",
    )
    with pytest.raises(AssertionError, match="2 error output") as failure:
        check_notebook(page, lab, notebook)
    assert "RuntimeError: deliberate error" in str(failure.value)
    assert "warning on stderr" in str(failure.value)


# Runs in the page: every part of an explorer (figure, controls, explanation) whose right edge sticks out of
# the notebook's output area, i.e. is cut off or needs a horizontal scroll to be seen.
OVERFLOW_JS = """box => {
  const area = (box.closest('.jp-OutputArea-output') || box.parentElement).getBoundingClientRect();
  const parts = box.querySelectorAll('img, .widget-slider, .widget-dropdown, .widget-html, .widget-button, button');
  return [...parts].filter(el => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.right > area.right + 1;
  }).map(el => `${el.className.split(' ')[0] || el.tagName}: right edge ${Math.round(el.getBoundingClientRect().right)}`
             + ` px > output area's ${Math.round(area.right)} px`);
}"""


@pytest.mark.parametrize("page", ["narrow", "wide"], indirect=True)
def test_explorer_fits_narrow_and_wide_windows(page, lab, screenshot_dir, request):
    """An explorer works and nothing of it is cut off in a 420 px window (a phone, or a VS Code notebook squeezed
    beside its side bars) and in a 1920 px one. VS Code's notebook renderer cannot be driven offline; its narrow,
    resizable output column is what this stands in for (with the outputs test in tests/test_notebook_outputs.py)."""
    notebook = "04_grouped_query_attention.ipynb"
    viewport = request.node.callspec.params["page"]
    with screenshot_on_failure(page, screenshot_dir, f"04-{viewport}"):
        open_notebook(page, lab, notebook)
        if viewport == "narrow":  # as a learner would: close the file browser, which takes 250 of the 420 px
            page.keyboard.press("Control+b")
            poll(lambda: not page.locator("#jp-left-stack").is_visible(), 5, "Ctrl+B did not close the left side bar")
        run_all(page)
        assert_no_errors(page)
        check_explorer(page, explorer(page, "gqa"), notebook)
        box = explorer(page, "gqa")
        overflowing = box.evaluate(OVERFLOW_JS)
        assert not overflowing, f"in a {viewport} window the explorer does not fit its output area: {overflowing}"
        image = box.locator("img").first.bounding_box()
        assert image["width"] >= 150, f"in a {viewport} window the explorer's figure shrank to {image['width']:.0f} px"


# Runs in the page: the explorer's figure as shown (CSS px), its own pixel width, and the output area's width.
SHOWN_JS = """box => {
  const img = box.querySelector('img'), column = img.parentElement, style = getComputedStyle(column);
  const room = column.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return {shown: img.getBoundingClientRect().width, natural: img.naturalWidth / window.devicePixelRatio, area: room};
}"""


@pytest.mark.parametrize("page", ["wide"], indirect=True)
def test_size_slider_enlarges_the_figure(page, lab, screenshot_dir):
    """``size`` makes the figure larger on screen (text keeps its size) until it fills the output area, and a
    small figure is shown at its own size, never stretched to the output width (it was: a flex column stretches
    its children, so every figure was as wide as the output and a larger size meant smaller letters)."""
    notebook = write_notebook(
        lab.notebooks / "e2e_size.ipynb",
        "from attn_core.viz import widgets\nwidgets.temperature_explorer(panel_size=1.5)",
    )
    with screenshot_on_failure(page, screenshot_dir, "size-slider"):
        open_notebook(page, lab, notebook)
        run_all(page)
        assert_no_errors(page)
        box = explorer(page, "temperature")
        box.evaluate(WATCH_JS)
        widths = []
        for _ in range(6):
            size = box.evaluate(SHOWN_JS)
            assert size["shown"] <= size["natural"] + 1, f"the figure is stretched beyond its own size: {size}"
            assert abs(size["shown"] - min(size["natural"], size["area"])) <= 2, size
            widths.append(size["shown"])
            since = browser_now(page)
            for _ in range(5):  # size +0.5
                change_slider(page, box, "size")
            wait_image_settled(page, box, since)
        area = box.evaluate(SHOWN_JS)["area"]
        growing = [b > a for a, b in zip(widths, widths[1:], strict=False) if a < area - 2]
        assert all(growing), f"a larger size must show a larger figure until it fills the {area:.0f} px: {widths}"
        assert widths[-1] > 1.5 * widths[0], f"size 1.5 -> 4.0 should show the figure much larger: {widths}"
