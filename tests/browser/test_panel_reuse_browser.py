"""One panel reused in JupyterLab (headless Chromium), then the page reloaded (issue 17).

A notebook tunes mlp-small for real (8 trials), sweeps it, tunes again in the same panel and the test
presses Stop mid-run; then it saves and reloads the page. Checked: the result-first status line, one time
unit across the views, bars frozen and labelled "stopped" after Stop, the first run's sweep figure closed
(not kept hidden) once the second run is attached, and after the reload a rendered panel whose figure's
traces all have names, with no IndexSizeError / widget / plotly console error. A panel that has not rendered
60 s after the reload ("Loading widget...", or an error in its place) fails the test, saying what the widget
manager and the kernel hold. Screenshots go to test-artifacts/.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOK = "panel_reuse.ipynb"
CELLS = (
    "%load_ext workbench\nfrom widgets import Panel\n"
    "panel = Panel(model='mlp-small', shards=2, servers=1, trials=8, trials_per_batch=4, sweep_slices=[100],\n"
    "              cost_model='random', strategy='replay-trace')  # cheap batches: the panel is the subject\npanel",
    "run1 = panel.tune()\nprint('run1', await panel.wait())",
    "panel.sweep()\nprint('sweep', await panel.wait())",
    "run2 = panel.tune(trials=256)  # more than it measures before the test presses Stop",
)

RUN_CELL = """async ([i, seconds]) => {
  const app = window.jupyterapp;
  const nb = app.shell.currentWidget;
  await nb.context.ready;
  await nb.sessionContext.ready;
  nb.content.activeCellIndex = i;
  const late = new Promise((_, reject) => setTimeout(
    () => reject(new Error(`cell ${i} still running after ${seconds} s`)), seconds * 1000));
  await Promise.race([app.commands.execute('notebook:run-cell'), late]);
  return nb.content.widgets[i].outputArea.node.innerText;
}"""
STATUS = "() => { const s = document.querySelector('.wb-panel .wb-status'); return s ? s.innerText : ''; }"
BARS = ("() => Array.from(document.querySelectorAll('.wb-panel .wb-progress .widget-hbox'))"
        ".map(row => row.innerText.replace(/\\s+/g, ' ').trim())")
# every trace of every panel figure as plotly.js holds it: its name (null when unnamed), type, and points
TRACES = """() => Array.from(document.querySelectorAll('.wb-panel .js-plotly-plot')).map(gd => (gd.data || []).map(
  t => ({name: t.name === undefined ? null : t.name, type: t.type || 'scatter',
         n: t.type === 'heatmap' ? (t.z || []).length : (t.x || []).length})))"""
LEGEND = "() => Array.from(document.querySelectorAll('.wb-panel .legendtext')).map(e => e.textContent)"
# the latency unit each view states: axis and subplot titles, colour bar, bar labels and the task table
UNITS = r"""() => {
  const found = [];
  const add = (text) => { for (const m of (text || '').matchAll(/(?:\d\s?|\()(us|ms|µs)\b/g)) found.push(m[1]); };
  document.querySelectorAll('.wb-panel .js-plotly-plot').forEach(gd => {
    const L = gd.layout || {};
    add(((L.yaxis || {}).title || {}).text);
    (L.annotations || []).forEach(a => add(a.text));
    (gd.data || []).forEach(t => add(((t.colorbar || {}).title || {}).text ? '(' + t.colorbar.title.text : ''));
  });
  document.querySelectorAll('.wb-panel .wb-status, .wb-panel .wb-progress, .wb-panel .wb-tasks, .wb-panel .wb-results')
    .forEach(e => add(e.innerText));
  return found;
}"""
# Where the panel's output does not render: has the widget manager restored the kernel's models, how many of its
# model promises are still pending or failed, and is the output's own model among them (and live)
WIDGET_MANAGER = """async () => {
  const found = [];
  const walk = (w, depth) => {
    if (!w || depth > 8) return;
    if (w._manager && w._manager.promise) found.push(w);
    for (const c of (w.widgets || [])) walk(c, depth + 1);
  };
  const nb = window.jupyterapp.shell.currentWidget;
  walk(nb.content.widgets[0].outputArea, 0);
  if (!found.length) return 'no widget renderer in the first output';
  const mgr = await found[0]._manager.promise;
  const ids = Object.keys(mgr._models || {});
  const settled = (p) => Promise.race([p.then((m) => 'ok' + (m.comm_live ? ', comm live' : ''), (e) => 'failed: ' + e),
                                      new Promise((r) => setTimeout(() => r('pending'), 300))]);
  const states = await Promise.all(ids.map((k) => settled(mgr._models[k])));
  const view = nb.model.cells.get(0).outputs.get(0).data['application/vnd.jupyter.widget-view+json'];
  return {restored: mgr.restoredStatus, models: ids.length, pending: states.filter((x) => x === 'pending').length,
          failed: states.filter((x) => x.startsWith('failed')).slice(0, 3),
          panel: view ? (mgr._models[view.model_id] ? await settled(mgr._models[view.model_id]) : 'not known') : '-'};
}"""
# What the kernel answers a reloaded page with: its live widgets, and those whose state it cannot give (one
# such widget and the widget manager's restore never ends: issue 17 item 1)
KERNEL_WIDGETS = """async () => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const code = ['from ipywidgets.widgets.widget import _instances as _wb_live', '_wb_bad = []',
    'for _wb_w in list(_wb_live.values()):', '    try: _wb_w.get_state()',
    '    except Exception as e: _wb_bad.append(f"{type(_wb_w).__name__}: {e!r}")',
    'print(len(_wb_live), "live widgets; cannot give their state:", _wb_bad[:3])'].join('\\n');
  const out = [];
  const future = kernel.requestExecute({code, silent: false, store_history: false});
  future.onIOPub = (m) => { if (m.header.msg_type === 'stream') out.push(m.content.text); };
  await Promise.race([future.done, new Promise((r) => setTimeout(r, 20000))]);
  return out.join('').trim() || 'no answer in 20 s';
}"""
WIDGET_ERRORS = re.compile(r"IndexSizeError|createImageData|widget|plotly|anywidget", re.I)


def _shot(page, artifacts: Path, name: str) -> None:
    page.locator(".wb-panel").scroll_into_view_if_needed()
    page.locator(".wb-panel").screenshot(path=str(artifacts / f"panel-reuse-{name}.png"))


def test_panel_reused_stopped_and_reloaded(request, require_browser: Callable[[], str], artifacts: Path,
                                           jupyter_lab: str, lab_root: Path) -> None:
    require_browser()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(lab_root / NOTEBOOK))
    page = request.getfixturevalue("page")
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"{e.name}: {e.message}"))
    warnings: list[str] = []
    page.on("console", lambda m: warnings.append(m.text[:300]) if m.type == "warning" and "Plugin" not in m.text
            else None)
    t0 = time.monotonic()

    def log(what: str) -> None:
        print(f"{time.monotonic() - t0:5.0f} s: {what}", flush=True)

    page.goto(f"{jupyter_lab}/lab/tree/{NOTEBOOK}?reset", timeout=90_000)
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
    page.add_style_tag(content=".jp-toast-container, .Toastify { display: none !important; }")  # news pop-ups
    page.evaluate(RUN_CELL, [0, 120])
    page.wait_for_selector(".wb-panel .wb-status", timeout=60_000)
    for section in ("charts", "shards", "results", "sweep"):  # unfolded as a user does, to see every view
        page.click(f".wb-panel button.wb-toggle-{section}")

    # run 1 to the end: the headline above the status states the result, baseline first
    assert "run1 done" in page.evaluate(RUN_CELL, [1, 300])
    status = page.evaluate(STATUS)
    log(status)
    headline = page.inner_text(".wb-panel .wb-headline")
    assert re.match(r"mlp-small at 100 %: [\d.]+ (us|ms)", headline), headline
    assert "done" in status and "8/8 trials" in status, status
    spent = page.inner_text(".wb-panel .wb-time-spent")  # under the results: where the shards' tuning went
    assert re.match(r"Time spent tuning, at 100 %: search \d+ %( \(.*\))?, build \d+ %, .* "
                    r"of \d+ s of tuning in all clients$", spent), spent

    # sweep it: the heatmap and the lines, one unit with the other views
    assert "sweep done" in page.evaluate(RUN_CELL, [2, 180])
    page.wait_for_function("() => document.querySelectorAll('.wb-panel .js-plotly-plot').length >= 2", timeout=30_000)
    try:  # the figure's traces reach plotly.js after its div appears: on a busy box seconds later
        page.wait_for_function(f"() => ({TRACES})().some(f => f.some(t => t.type === 'heatmap' && t.n >= 1))",
                               timeout=30_000, polling=500)
    except Exception:  # noqa: BLE001 - the assertion below says what the figures hold
        pass
    heat = [t for fig in page.evaluate(TRACES) for t in fig if t["type"] == "heatmap"]
    assert heat and heat[0]["n"] >= 1, heat
    units = page.evaluate(UNITS)  # checked at the end, so that a failure here does not hide the reload's
    log(f"sweep done; units shown: {sorted(set(units))}")
    _shot(page, artifacts, "swept")

    # run 2 in the same panel; Stop (a real click) once it has measured a batch
    page.evaluate(RUN_CELL, [3, 120])
    page.wait_for_function(f"() => /running.* [1-9]\\d*\\/256 trials/.test(({STATUS})())", timeout=180_000, polling=250)
    assert not any("stopped" in b for b in page.evaluate(BARS)), page.evaluate(BARS)
    log(f"run 2 measuring: {page.evaluate(BARS)}")
    page.click(".wb-panel button.wb-stop")
    page.wait_for_function(f"() => ({STATUS})().includes('stopped')", timeout=60_000, polling=250)
    page.wait_for_timeout(300)
    bars = page.evaluate(BARS)
    log(f"stopped: {bars}")
    # the whole run's bar, then one per shard: every one says stopped and gives no ETA
    assert len(bars) == 3 and bars[0].startswith("whole run"), bars
    assert all("stopped" in b and "ETA" not in b for b in bars), bars
    page.wait_for_timeout(2500)
    assert page.evaluate(BARS) == bars, "the bars of a stopped run still count"
    figures_run2 = len(page.evaluate(TRACES))  # checked at the end too
    _shot(page, artifacts, "stopped")

    # save, reload: the panel renders again, every trace named, no widget or plotly error
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
    before, warned = len(errors), len(warnings)
    page.reload(timeout=90_000)
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
    page.add_style_tag(content=".jp-toast-container, .Toastify { display: none !important; }")
    log("reloading")
    rendered = ("() => !!document.querySelector('.wb-panel .wb-status') && "
                "document.querySelectorAll('.wb-panel .js-plotly-plot').length >= 1 && "
                "!document.querySelector('.jp-Notebook').innerText.includes('Loading widget')")
    def upstream_race() -> bool:
        """The renderer gave up on a model the manager restored and holds (ipywidgets 8.1.9 waits 2 s and does not
        retry once restored: jupyter-widgets/ipywidgets#4026), as opposed to a restore that never ends."""
        manager, shown = page.evaluate(WIDGET_MANAGER), page.locator(".jp-Notebook").inner_text()[:300]
        return ("model not found" in shown and isinstance(manager, dict) and bool(manager["restored"])
                and str(manager["panel"]).startswith("ok"))

    for attempt in (1, 2):
        deadline = time.monotonic() + 60
        while not page.evaluate(rendered) and time.monotonic() < deadline:
            page.wait_for_timeout(500)
        if page.evaluate(rendered) or attempt == 2 or not upstream_race():
            break
        log("reload met ipywidgets#4026 (restored, not rendered): reloading once more, as a user would")
        page.reload(timeout=90_000)
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
        page.add_style_tag(content=".jp-toast-container, .Toastify { display: none !important; }")
    page.wait_for_timeout(2000)  # plotly draws after the widget views attach
    log(f"reloaded: {page.evaluate(STATUS)}")
    page.screenshot(path=str(artifacts / "panel-reuse-reloaded.png"), full_page=True)
    if not page.evaluate(rendered):
        manager, shown = page.evaluate(WIDGET_MANAGER), page.locator(".jp-Notebook").inner_text()[:300]
        if upstream_race():  # twice in a row: the upstream bug, said as such; a restore that hangs still fails
            pytest.xfail(f"ipywidgets#4026 on two reloads in a row (the widget manager restored every model; "
                         f"the renderer gave up after 2 s): {shown}; widget manager: {manager}")
        pytest.fail(f"the panel did not render within 60 s of the reload: {shown}; widget manager: {manager}; "
                    f"kernel: {page.evaluate(KERNEL_WIDGETS)}; errors: {errors[before:]}; "
                    f"warnings: {warnings[warned:][:5]}")
    assert "stopped" in page.evaluate(STATUS)
    figures = page.evaluate(TRACES)
    unnamed = [t for fig in figures for t in fig if not t["name"] or re.fullmatch(r"trace \d+", t["name"])]
    assert not unnamed, f"traces without a name after the reload: {unnamed} in {figures}"
    legend = page.evaluate(LEGEND)
    assert legend and not [x for x in legend if re.fullmatch(r"trace \d+", x)], legend
    bad = [e for e in errors if WIDGET_ERRORS.search(e)]
    assert not bad, f"console errors ({len(errors) - before} after the reload): {bad}"
    assert len(set(units)) == 1, f"the views state different units: {units}"
    assert figures_run2 == 1, "the first run's sweep figure was kept (hidden) for the second run"
    log("panel reuse in JupyterLab: done")
