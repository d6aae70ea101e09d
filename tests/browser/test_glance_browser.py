"""The panel at a glance, in JupyterLab (headless Chromium), as a user meets it: one screen until a section is opened,
a headline that names the baseline first with its ratio, the wording of a run whose budget cannot beat the defaults,
and a sweep whose chart has no negative axis, with its progress at the Sweep button.

The run tunes mlp-small at 100 % (the cheap search) and Finish is pressed as soon as tuning starts, before its first
batch lands: no trial is measured, so no tuned schedule can beat the defaults the untuned build already has, and the
headline must say so rather than call anything tuned or faster than TVM untuned. Screenshots of the panel before and
after the run, and of the sweep, go to test-artifacts/ (glance-*.png; the README shows copies from docs/).
"""
from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from lab import IN_KERNEL, open_and_run

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(900)]

NOTEBOOK = "glance.ipynb"
PANEL = ".wb-panel"
HEADLINE = f"{PANEL} .wb-headline"
STATUS = f"{PANEL} .wb-status"
ONE_SCREEN_PX = 900
# the form as the run wants it: one batch of 16 (Finish comes before it lands); a cheap search
FORM = ("import widgets\np = widgets.current_panel()\n"
        "p.set(model='mlp-small', slices=[100], servers=1, shards=1, trials=16, trials_per_batch=16, "
        "cost_model='random', strategy='replay-trace', sweep_slices=[25, 50, 100])\nprint(p.errors)")
RESULT = ("import json, workbench, widgets\nr = widgets.current_panel().run.results.iloc[0]\n"
          "print(json.dumps({'verdict': r['verdict'], 'baseline': r['baseline'], "
          "'versus': workbench.versus(r['vs_baseline'], r['vs_baseline_verdict'], r['baseline'])}))")
TRIALS = "import widgets\nprint(widgets.current_panel().run.overall())"
# the sweep chart's left axis and its points' lowest reach (median less the lower error arm), from plotly's own state
SWEEP_AXIS = """() => {
  const gd = document.querySelector('.wb-panel .wb-section-sweep .js-plotly-plot');
  if (!gd || !gd._fullLayout || !gd.data) return null;
  const lows = [];
  const symbols = [];
  for (const t of gd.data) {
    if (t.type !== 'scatter' || !t.y) continue;
    const minus = (t.error_y && t.error_y.arrayminus) || [];
    t.y.forEach((y, i) => lows.push(y - (minus[i] || 0)));
    symbols.push(...[].concat(t.marker && t.marker.symbol || []));
  }
  return {range: gd._fullLayout.yaxis.range, lows, symbols, points: lows.length};
}"""


def _write_notebook(path: Path) -> None:
    cells = [{"cell_type": "code", "execution_count": None, "id": "c0", "metadata": {}, "outputs": [],
              "source": "%load_ext workbench\n%workbench"}]
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {
        "display_name": "Python 3", "language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}))


def _height(page) -> float:
    return page.locator(PANEL).bounding_box()["height"]


def _shot(page, artifacts: Path, name: str, selector: str = PANEL) -> None:
    page.locator(selector).scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    page.locator(selector).screenshot(path=str(artifacts / f"glance-{name}.png"))


def test_the_panel_at_a_glance(request, require_browser: Callable[[], str], artifacts: Path, jupyter_lab: str,
                               lab_root: Path) -> None:
    require_browser()
    page = request.getfixturevalue("page")
    _write_notebook(lab_root / NOTEBOOK)
    t0 = time.monotonic()
    open_and_run(page, jupyter_lab, NOTEBOOK)
    page.wait_for_selector(f"{PANEL} button.wb-tune", timeout=120_000)
    assert page.evaluate(IN_KERNEL, FORM).strip() == "{}"
    page.wait_for_timeout(500)
    # before a run: the form, the buttons and the folded sections fit one screen
    idle = _height(page)
    assert idle <= ONE_SCREEN_PX, f"the idle panel is {idle:.0f} px high"
    for name in ("stop", "finish"):  # disabled: drawn plain, not in a strong red or orange
        button = page.locator(f"{PANEL} button.wb-{name}")
        assert button.is_disabled() and "mod-danger" not in button.get_attribute("class") \
            and "mod-warning" not in button.get_attribute("class")
    _shot(page, artifacts, "idle")

    page.locator(f"{PANEL} button.wb-tune").click()
    finish = page.locator(f"{PANEL} button.wb-finish")
    finish.wait_for(state="visible")
    page.wait_for_function(f"() => !document.querySelector('{PANEL} button.wb-finish').disabled", timeout=120_000,
                           polling=100)  # tuning has started: Finish is on, in its colour
    assert "mod-warning" in finish.get_attribute("class")
    finish.click()  # before the first batch: the clients time the defaults first (seconds on this box)
    running = _height(page)
    assert running <= ONE_SCREEN_PX, f"the running panel is {running:.0f} px high"
    print(f"{time.monotonic() - t0:.0f} s: {page.inner_text(STATUS)}")

    page.wait_for_function(f"() => {{ const s = document.querySelector('{STATUS}'); "
                           "return s && /\\b(done|failed|crashed|partial)\\b/.test(s.innerText); }",
                           timeout=300_000, polling=500)
    status = page.inner_text(STATUS)
    assert re.search(r"\bdone\b", status), status
    page.wait_for_function(f"() => document.querySelector('{HEADLINE}').innerText.includes('→')", timeout=30_000)
    headline = page.inner_text(HEADLINE).strip()
    result = json.loads(page.evaluate(IN_KERNEL, RESULT))
    # the baseline first, with the paired test's ratio, as the kernel's results say it
    assert result["baseline"].startswith("PyTorch eager"), result
    assert re.match(r"mlp-small at 100 %: [\d.]+ (us|ms) → [\d.]+ (us|ms), ", headline), headline
    assert headline.split(", ", 1)[1].startswith(result["versus"]), (headline, result)
    assert re.search(r"(\d+(\.\d+)?x (faster|slower) than|within the timing noise \(\d+(\.\d+)?x\))", headline)
    # no trial measured before Finish: the model is the untuned build, and the headline says so
    assert result["verdict"] == "no tuned schedule", (result, page.evaluate(IN_KERNEL, TRIALS))
    assert headline.endswith("no tuned schedule beat the defaults, so the model is TVM's untuned build"), headline
    assert "faster than TVM untuned" not in headline
    done = _height(page)
    assert done <= ONE_SCREEN_PX, f"the finished panel is {done:.0f} px high"
    _shot(page, artifacts, "done")

    # the sweep: opened by its toggle, started by a real click, its progress beside the button while it runs
    page.locator(f"{PANEL} button.wb-toggle-sweep").click()
    # unfolded: the sweep section is drawn now (the front end redraws a moment after the click)
    page.wait_for_function(f"() => document.querySelector('{PANEL}').getBoundingClientRect().height > {done}",
                           timeout=10_000, polling=100)
    page.locator(f"{PANEL} button.wb-sweep").click()
    page.wait_for_function(f"() => /sweeping/.test(document.querySelector('{PANEL} .wb-sweep-progress').innerText)",
                           timeout=60_000, polling=100)
    page.wait_for_function(f"() => {{ const s = document.querySelector('{STATUS}').innerText; "
                           "return !/sweeping/.test(s); }", timeout=300_000, polling=500)
    page.wait_for_function(f"() => {{ const a = ({SWEEP_AXIS})(); return a && a.points >= 3; }}", timeout=60_000)
    axis = page.evaluate(SWEEP_AXIS)
    assert axis["range"][0] >= 0, axis  # no negative latency axis
    assert min(axis["lows"]) >= 0, axis  # no error bar below zero
    note = page.inner_text(f"{PANEL} .wb-section-sweep")
    if "circle-open" in axis["symbols"]:  # slices that share cores on this host: said above the chart
        assert "share their cores" in note, note
    # gone once the sweep ended (its widget message may trail the status line's by a moment)
    page.wait_for_function(f"() => document.querySelector('{PANEL} .wb-sweep-progress').innerText.trim() === ''",
                           timeout=10_000, polling=100)
    _shot(page, artifacts, "sweep")
    print(f"the panel at a glance: {time.monotonic() - t0:.0f} s; {headline}")
