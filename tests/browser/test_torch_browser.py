"""A notebook's PyTorch model tuned from the panel in JupyterLab (headless Chromium), as a user does it.

The notebook defines a small CNN (`cnn`, also held under a private name, beside a tensor) and shows `%workbench`;
the dropdown offers the module beside the samples (not the private name, not the tensor); the test picks
"cnn (PyTorch SmallCNN)" in the model dropdown, types its input shape, makes the run cheap (4 trials, random cost
model, replay-trace), presses Tune, waits for 'done', checks the results table names the PyTorch eager baseline,
presses Export model and checks in the kernel that the export folder holds the library, its signature and its
loader (and nothing else), and that the message names that folder. (tests/test_torch_model.py had the same run
driven without a browser; its checks are here, where the run is driven as a user drives it.) Screenshots go to
test-artifacts/ (torch-form.png, torch-running.png, torch-done.png).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from lab import IN_KERNEL, open_and_run

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(1200)]

NOTEBOOK = "torch_check.ipynb"
CELLS = [
    "import torch\n\n\n"
    "class SmallCNN(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)\n"
    "        self.bn = torch.nn.BatchNorm2d(8)\n"
    "        self.fc = torch.nn.Linear(8, 4)\n\n"
    "    def forward(self, x):\n"
    "        x = torch.relu(self.bn(self.conv(x)))\n"
    "        return self.fc(x.mean(dim=(2, 3)))\n\n\n"
    "torch.manual_seed(0)\n"
    "cnn = SmallCNN().eval()\n"
    "_hidden = cnn  # a private name: not offered\n"
    "x = torch.randn(1, 3, 16, 16)  # a tensor is no model: not offered",
    "%load_ext workbench\n%workbench",
]
OPTION = "cnn (PyTorch SmallCNN)"
SHAPE = "1,3,16,16"


READ_FORM = ("import json, widgets\np = widgets.current_panel()\n"
             "print(json.dumps({'values': p.values(), 'errors': p.errors}))")
# the dropdown's options as the kernel holds them: value -> label
READ_OPTIONS = ("import json, widgets\np = widgets.current_panel()\n"
                "print(json.dumps({'options': {v: k for k, v in p.controls['model'].options}}))")
READ_EXPORT = ("import json, os, widgets\np = widgets.current_panel()\n"
               "d = os.path.join(p.controls['csv_folder'].value.strip() or 'workbench-export', p.run.id + '-model')\n"
               "print(json.dumps({'run': p.run.id, 'status': p.run.status, 'folder': os.path.abspath(d),"
               " 'model': p.run.spec.model, 'message': p._export_msg.value,"
               " 'files': sorted(os.listdir(d)) if os.path.isdir(d) else None}))")

PANEL = ".wb-panel"
MODEL = f"{PANEL} .wb-field-model select"
SHAPE_FIELD = f"{PANEL} .wb-field-input-shape"
ONNX_FIELD = f"{PANEL} .wb-field-onnx-path"
TUNE = f"{PANEL} button.wb-tune"
EXPORT_MODEL = f"{PANEL} button.wb-export-model"
EXPORT_MSG = f"{PANEL} .wb-export-model-msg"
RESULTS = f"{PANEL} .wb-results"

STATUS = "() => { const s = document.querySelector('.wb-panel .wb-status'); return s ? s.innerText : ''; }"
# the run's state as the status line shows it: its bold words (run id, state, the result line)
STATE_IS = """(states) => {
  const s = document.querySelector('.wb-panel .wb-status');
  if (!s) return false;
  const words = [...s.querySelectorAll('b')].map(b => b.innerText.trim());
  return words.some(w => states.includes(w));
}"""
CURVE_POINTS = """() => {
  const gd = document.querySelector('.wb-panel .js-plotly-plot');
  if (!gd || !gd.data) return -1;
  return gd.data.filter(t => t.meta).reduce((n, t) => n + (t.x ? t.x.length : 0), 0);
}"""
ENDED = ["done", "failed", "crashed", "stopped", "partial"]


def _write_notebook(path: Path) -> None:
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
              "source": src} for i, src in enumerate(CELLS)]
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {
        "display_name": "Python 3", "language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}))


def _kernel_json(page, code: str) -> dict:
    out = page.evaluate(IN_KERNEL, code).strip()
    last = out.splitlines()[-1] if out else ""
    return json.loads(last) if last.startswith("{") else {"output": out}


def _wait_kernel(page, code: str, ok: Callable[[dict], bool], timeout_s: float = 30.0) -> dict:
    """Ask the kernel until `ok(answer)` (widget values reach it a moment after the browser has them)."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = _kernel_json(page, code)
        if ok(got) or time.monotonic() > deadline:
            return got
        page.wait_for_timeout(300)


def _type_into(page, field: str, text: str) -> None:
    """Replace a text field's value as a user does: click it, select its text, type key by key, then Enter."""
    box = page.locator(f"{field} input")
    box.click()
    box.press("Control+a")
    box.press("Backspace")
    box.press_sequentially(text, delay=30)
    box.press("Enter")


def _shot(page, name: str, artifacts: Path) -> None:
    panel = page.locator(PANEL)
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(artifacts / name))


def test_torch_model_tuned_from_the_panel(request, require_browser: Callable[[], str], artifacts: Path,
                                          jupyter_lab: str, lab_root: Path) -> None:
    require_browser()
    _write_notebook(lab_root / NOTEBOOK)
    page = request.getfixturevalue("page")
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    t0 = time.monotonic()
    open_and_run(page, jupyter_lab, NOTEBOOK)
    page.wait_for_selector(MODEL, timeout=180_000)  # importing torch, then the panel
    t_panel = time.monotonic()
    print(f"{t_panel - t0:.0f} s: panel shown")

    # the notebook's module is offered in the model dropdown; choose it as a user does
    # (ipywidgets shows a label's spaces as non-breaking ones; an option's value is the label itself)
    labels = [t.replace("\xa0", " ") for t in page.locator(f"{MODEL} option").all_text_contents()]
    assert OPTION in labels, labels
    # the namespace's modules beside the samples: a private name and a tensor are not offered
    options = _kernel_json(page, READ_OPTIONS).get("options", {})
    assert options.get("torch:cnn") == OPTION and "torch:_hidden" not in options, options
    assert "torch:x" not in options and "mlp-small" in options, options
    assert not page.locator(SHAPE_FIELD).is_visible()  # a sample model is chosen: no shape row yet
    page.locator(MODEL).select_option(value=OPTION)
    page.wait_for_selector(f"{SHAPE_FIELD} input", state="visible", timeout=15_000)
    assert not page.locator(ONNX_FIELD).is_visible()  # the ONNX path row stays hidden for a PyTorch model
    assert "PyTorch model from this notebook" in page.locator(PANEL).inner_text()

    _type_into(page, SHAPE_FIELD, SHAPE)
    _type_into(page, f"{PANEL} .wb-field-trials", "4")
    _type_into(page, f"{PANEL} .wb-field-trials-per-batch", "4")
    page.locator(f"{PANEL} .wb-field-cost-model select").select_option(value="random")
    page.locator(f"{PANEL} .wb-field-strategy select").select_option(value="replay-trace")

    want = {"model": "torch:cnn", "input_shape": SHAPE, "trials": 4, "trials_per_batch": 4, "cost_model": "random",
            "strategy": "replay-trace"}
    form = _wait_kernel(page, READ_FORM, lambda f: {k: f.get("values", {}).get(k) for k in want} == want)
    assert {k: form.get("values", {}).get(k) for k in want} == want, form
    assert form["errors"] == {}, form
    page.wait_for_function(f"() => !document.querySelector('{TUNE}').disabled", timeout=15_000)
    _shot(page, "torch-form.png", artifacts)

    # Tune: exported through torch.export, then tuned in the background
    page.locator(TUNE).click()
    page.wait_for_function(
        f"() => {{ const s = ({STATUS})(); return (s.includes('running') && ({CURVE_POINTS})() > 0)"
        f" || ({STATE_IS})({json.dumps(ENDED)}); }}", timeout=300_000, polling=500)
    t_running = time.monotonic()
    print(f"{t_running - t0:.0f} s: {page.evaluate(STATUS)}")
    if page.evaluate(STATE_IS, ["running"]):
        _shot(page, "torch-running.png", artifacts)

    page.wait_for_function(STATE_IS, arg=ENDED, timeout=420_000, polling=1000)
    t_done = time.monotonic()
    status = page.evaluate(STATUS)
    print(f"{t_done - t0:.0f} s: {status}")
    assert page.evaluate(STATE_IS, ["done"]), status
    assert "4/4 trials" in status, status

    # the results table (its section opened as a user opens it): one row (tuned at 100 %) with the PyTorch eager
    # baseline beside the tuned model; the headline above names that baseline first
    assert "PyTorch eager" in page.locator(f"{PANEL} .wb-headline").inner_text()
    page.locator(f"{PANEL} button.wb-toggle-results").click()
    page.wait_for_selector(f"{RESULTS} table", timeout=60_000)
    results = page.locator(RESULTS).inner_text()
    assert "baseline" in results and "PyTorch eager" in results, results
    assert "speedup vs untuned" in results, results
    assert page.locator(f"{RESULTS} table tbody tr").count() == 1, results

    # Export model: the run's model goes to <export folder>/<run id>-model/ under the kernel's cwd
    page.locator(f"{PANEL} button.wb-toggle-export").click()
    page.locator(EXPORT_MODEL).click(timeout=60_000)  # waits for the button to be enabled
    page.wait_for_function(f"() => {{ const m = document.querySelector('{EXPORT_MSG}');"
                           " return m && m.innerText.trim().startsWith('exported'); }", timeout=120_000, polling=500)
    message = page.locator(EXPORT_MSG).inner_text()
    exported = _kernel_json(page, READ_EXPORT)
    assert exported.get("status") == "done", exported
    assert exported["model"].endswith("cnn.relax.json"), exported  # Tune exported the module, named for its name
    assert exported["files"] == ["load.py", "model.so", "signature.json"], exported
    assert "exported" in exported["message"] and exported["folder"] in exported["message"], exported
    expected = lab_root / "workbench-export" / f"{exported['run']}-model"
    assert Path(exported["folder"]).resolve() == expected.resolve(), exported
    assert str(expected) in message or f"{exported['run']}-model" in message, message
    signature = json.loads((expected / "signature.json").read_text())
    assert [list(t["shape"]) for t in signature["inputs"]] == [[1, 3, 16, 16]], signature
    assert [list(t["shape"]) for t in signature["outputs"]] == [[1, 4]], signature
    _shot(page, "torch-done.png", artifacts)

    widget_errors = [e for e in errors if "widget" in e.lower() or "plotly" in e.lower() or "anywidget" in e.lower()]
    assert not widget_errors, widget_errors
    print(f"torch in JupyterLab: panel {t_panel - t0:.0f} s, running {t_running - t_panel:.0f} s later, "
          f"done {t_done - t_panel:.0f} s after the panel, all {time.monotonic() - t0:.0f} s")
