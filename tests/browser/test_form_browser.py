"""The tuning form in JupyterLab (headless Chromium), no tuning: a bad slices value typed as a user types it
shows a red message at the field and turns Tune off; a good one clears both and reaches the kernel, on
Enter or on a comma. Screenshots go to test-artifacts/."""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from lab import IN_KERNEL, open_and_run

pytestmark = [pytest.mark.browser]

NOTEBOOK = "form_check.ipynb"
CELLS = ["%load_ext workbench\n%workbench"]


READ_FORM = ("import json, widgets\np = widgets.current_panel()\n"
             "print(json.dumps({'slices': p.values()['slices'], 'errors': p.errors}))")

FIELD = ".wb-panel .wb-field-slices"
SLICES = f"{FIELD} input"
ERROR = ".wb-panel .wb-err-slices"
TUNE = ".wb-panel button.wb-tune"
STATUS = ".wb-panel .wb-status"


def _write_notebook(path: Path) -> None:
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
              "source": src} for i, src in enumerate(CELLS)]
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {
        "display_name": "Python 3", "language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}))


def _kernel_form(page) -> dict:
    out = page.evaluate(IN_KERNEL, READ_FORM)
    return json.loads(out.strip().splitlines()[-1]) if out.strip().startswith("{") else {"output": out}


def _retype(page, text: str, enter: bool = True) -> None:
    """Replace the slices text as a user does: click the field, select its text, type key by key, then Enter."""
    page.locator(FIELD).click()
    box = page.locator(SLICES)
    box.press("Control+a")
    box.press("Backspace")
    box.press_sequentially(text, delay=30)
    if enter:
        box.press("Enter")


def test_slices_field_in_jupyterlab(request, require_browser: Callable[[], str], artifacts: Path,
                                    jupyter_lab: str, lab_root: Path) -> None:
    require_browser()
    _write_notebook(lab_root / NOTEBOOK)
    page = request.getfixturevalue("page")
    t0 = time.monotonic()
    open_and_run(page, jupyter_lab, NOTEBOOK)
    page.wait_for_selector(FIELD, timeout=90_000)
    t_panel = time.monotonic()
    assert page.locator(TUNE).is_enabled() and not page.locator(ERROR).is_visible()

    # "150" + Enter: the kernel refuses it, at the field and by turning Tune off; the status says why
    _retype(page, "150")
    page.wait_for_selector(f"{ERROR} >> text=slices: 150 is not a percentage from 1 to 100", state="visible",
                           timeout=15_000)
    page.wait_for_function(f"() => document.querySelector('{TUNE}').disabled", timeout=10_000)
    assert "to tune, fix slices: 150 is not a percentage from 1 to 100" in page.locator(STATUS).inner_text()
    assert page.locator(SLICES).input_value() == "150"
    page.locator(".wb-panel").screenshot(path=str(artifacts / "form-bad-slices.png"))
    assert _kernel_form(page) == {"slices": "150", "errors": {"slices": "150 is not a percentage from 1 to 100"}}

    # "50,100" + Enter: message gone, Tune on, and the kernel has the value
    _retype(page, "50,100")
    page.wait_for_selector(ERROR, state="hidden", timeout=15_000)
    page.wait_for_function(f"() => !document.querySelector('{TUNE}').disabled", timeout=10_000)
    assert _kernel_form(page) == {"slices": [50, 100], "errors": {}}
    assert "fill in the form and press Tune" in page.locator(STATUS).inner_text()

    # a comma commits too: no Enter, no leaving the field
    _retype(page, "abc", enter=False)
    page.wait_for_selector(f"{ERROR} >> text=slices: abc is not a percentage", state="visible", timeout=15_000)
    _retype(page, "30,", enter=False)
    page.wait_for_selector(ERROR, state="hidden", timeout=15_000)
    assert _kernel_form(page) == {"slices": [30], "errors": {}}
    assert page.locator(TUNE).is_enabled()
    page.locator(".wb-panel").screenshot(path=str(artifacts / "form-good-slices.png"))
    print(f"form in JupyterLab: panel after {t_panel - t0:.1f} s, form checks {time.monotonic() - t_panel:.1f} s")
