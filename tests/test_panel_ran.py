"""The panel shows what the run it shows did ("ran: ..." from that run's plan, spec and sweep, not the form's
values), what a CPU's merged sweep slices stand for, busy-machine warnings, and a recommendation that says
when there is nothing to choose."""
from __future__ import annotations

import json
import os

import pytest
from fake_engine import make_run

from widgets import Panel
from workbench.runs import event_types as ev
from workbench.runs.events import EventWriter


@pytest.fixture
def home(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    return str(tmp_path)


def _sweep(home: str, run_id: str, points: list[ev.SweepPoint]) -> None:
    writer = EventWriter(os.path.join(home, "runs", run_id, "events.jsonl"), "sweep")
    for p in points:
        writer.emit(p)


def test_the_panel_says_what_ran_not_what_the_form_holds(home) -> None:
    """The form may say 4 trials and sweep 10-100 %: the line says the run's 8 trials per slice, and that its
    one timing on 1 of 2 cores stood for 10-70 %."""
    run_id = make_run(home)
    _sweep(home, run_id, [
        ev.SweepPoint(tuned_at=t, inferred_at=at, latency_ms_median=ms, latency_ms_iqr=0.01, cores=cores,
                      stands_for=stands)
        for t in (50, 100) for at, ms, cores, stands in ((50, 0.55 if t == 50 else 0.60, [0], [10, 20, 30, 50, 70]),
                                                         (100, 0.30 if t == 50 else 0.36, [0, 1], [100]))])
    panel = Panel(home=home)
    panel.set(trials=4, sweep_slices=[10, 20, 30, 50, 70, 100])
    panel.attach(run_id)
    panel.set(trials=4)  # the form changed after attaching: the line still says what ran
    panel.refresh(force=True)
    plan = panel.snapshot()["plan"]
    assert "ran: 8 trials per slice, 2 shards, 1 server per slice, tuned at 50, 100 %" in plan, plan
    assert "swept at 50, 100 % (50 % (1 of 2 cores) stands for 10, 20, 30, 50, 70 %)" in plan, plan
    assert panel.snapshot()["recommended"] == 50 and "Recommended tuning slice: 50%" in panel._recommendation.value
    panel.close()


def test_one_tuning_slice_is_not_recommended_and_a_busy_timing_is_named(home) -> None:
    run_id = make_run(home, slices=(100,))
    path = os.path.join(home, "runs", run_id, "results.json")
    with open(path) as f:
        results = json.load(f)
    results[0]["busy_cores"] = 1.3
    with open(path, "w") as f:
        json.dump(results, f)
    _sweep(home, run_id, [ev.SweepPoint(tuned_at=100, inferred_at=at, latency_ms_median=ms, latency_ms_iqr=0.01)
                          for at, ms in ((50, 0.6), (100, 0.3))])
    panel = Panel(run_id, home=home)
    value = panel._recommendation.value
    assert "Only one tuning slice: nothing to choose" in value and "Recommended" not in value
    assert "1.00x" not in value
    assert ("slice 100 %: machine busy while timing: other processes used 1.3 cores; numbers may be noisy"
            in panel.snapshot()["plan"])
    assert "other processes' cores while timing" in panel._results.value  # the results table has the reading too
    panel.close()
