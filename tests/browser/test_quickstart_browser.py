"""Open the quickstart notebook in JupyterLab (headless Chromium), run all cells, and check that the panel and
its plotly figure render, that the run reaches 'done', and that the cells after it show their tables and export
the CSV files. Screenshots go to test-artifacts/. (This is the quickstart's one execution in the suite; notebooks
02 and 03 are executed headless by tests/test_notebooks.py, which checks their saved widget state.)"""
from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from lab import open_and_run

import workbench as wb
from workbench.runs import memory, store

pytestmark = [pytest.mark.browser, pytest.mark.slow]


STATUS = "() => { const s = document.querySelector('.wb-status'); return s ? s.innerText : ''; }"

CURVE_POINTS = """() => {
  const gd = document.querySelector('.wb-panel .js-plotly-plot');
  if (!gd || !gd.data) return -1;
  return gd.data.filter(t => t.meta)  // the best-latency traces; the telemetry traces have no meta
               .reduce((n, t) => n + (t.x ? t.x.length : 0), 0);
}"""


def test_quickstart_in_jupyterlab(request, require_browser: Callable[[], str], artifacts: Path,
                                  jupyter_lab: str, lab_root: Path, lab_home: Path) -> None:
    require_browser()
    # a first-time user's quickstart: nothing in the tuning memory. The browser tests before this one tune mlp-small
    # in the lab's home too, and their records would start its shards evolving from them (~20 s more on 2 cores).
    shutil.rmtree(memory.root(str(lab_home)), ignore_errors=True)
    page = request.getfixturevalue("page")
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    t0 = time.monotonic()
    open_and_run(page, jupyter_lab, "01_quickstart.ipynb")
    print(f"{time.monotonic() - t0:.0f} s: kernel ready, running all cells")

    panel = page.wait_for_selector(".wb-panel", timeout=120_000)
    assert panel.is_visible()
    page.wait_for_selector(".wb-panel .js-plotly-plot", state="attached", timeout=120_000)

    # mid-run: the status says running and the best-latency curves have points (or the run already ended)
    page.wait_for_function(f"() => {{ const s = ({STATUS})(); return (s.includes('running') && ({CURVE_POINTS})() > 0)"
                           " || s.includes('done') || s.includes('failed'); }", timeout=180_000, polling=250)
    if "running" in page.evaluate(STATUS):
        page.locator(".wb-panel button.wb-toggle-charts").click()  # folded until asked for: the live curves
        page.wait_for_timeout(1000)
        page.locator(".wb-panel").scroll_into_view_if_needed()
        page.locator(".wb-panel").screenshot(path=str(artifacts / "quickstart-running.png"))
    print(f"{time.monotonic() - t0:.0f} s: {page.evaluate(STATUS)}")

    page.wait_for_function(f"() => ({STATUS})().includes('done')", timeout=240_000, polling=500)
    status = page.evaluate(STATUS)
    assert "done" in status and "trials" in status, status
    assert page.evaluate(CURVE_POINTS) >= 2
    assert page.locator(".wb-panel .wb-progress .widget-hprogress, .wb-panel .wb-progress progress, "
                        ".wb-panel .wb-progress .progress").count() >= 2
    assert page.locator(".wb-panel .wb-tune button, .wb-panel button.wb-tune").count() >= 1
    assert page.locator(".wb-panel .wb-finish button, .wb-panel button.wb-finish").count() >= 1
    # the per-task table: both tasks of mlp-small, each with its default time and its tuned state
    rows = page.locator(".wb-panel .wb-tasks tbody tr")
    assert rows.count() == 2, page.locator(".wb-panel .wb-tasks").inner_text()
    assert all("tuned" in rows.nth(i).inner_text() for i in range(2)), page.locator(".wb-panel .wb-tasks").inner_text()
    started = wb.open_run(store.run_ids(str(lab_home))[-1], str(lab_home)).event_list("shard_started")
    assert started and not any(e.get("memory_records") for e in started), started  # tuned from nothing
    # the notebook went on after the run: results table and the %workbench runs table
    print(f"{time.monotonic() - t0:.0f} s: {status}")
    page.wait_for_function("() => document.querySelectorAll('.jp-OutputArea-output table.dataframe').length >= 3",
                           timeout=120_000, polling=500)
    page.wait_for_timeout(500)
    shown = page.locator(".jp-Notebook").inner_text()
    assert re.search(r"run \S+: done", shown), shown[-2000:]
    for header in ("speedup vs untuned", "trials_done", "mlp-small"):  # results_table, progress, %workbench runs
        assert header in shown, header
    deadline = time.monotonic() + 60  # the export cell comes after the tables
    while len(exported := sorted(os.listdir(lab_root / "export")) if (lab_root / "export").is_dir() else []) < 5 \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    assert len(exported) == 5 and any(x.endswith("-results.csv") for x in exported), exported
    page.locator(".wb-panel").scroll_into_view_if_needed()
    page.locator(".wb-panel").screenshot(path=str(artifacts / "quickstart.png"))
    print(f"quickstart in JupyterLab: {time.monotonic() - t0:.0f} s; status: {status}")
    widget_errors = [e for e in errors if "widget" in e.lower() or "plotly" in e.lower() or "anywidget" in e.lower()]
    assert not widget_errors, widget_errors
