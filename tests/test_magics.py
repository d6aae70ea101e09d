"""The IPython extension against a private InteractiveShell: load/unload, %workbench and %tune."""
from __future__ import annotations

import asyncio
import subprocess

import pandas as pd
import pytest
from fake_engine import make_run
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

import workbench
from widgets import current_panel, live_panels


@pytest.fixture(scope="module")
def shell():
    c = Config()
    c.HistoryAccessor.enabled = False  # no sqlite history ("too many open files" in long test sessions)
    ip = InteractiveShell.instance(config=c)
    yield ip
    InteractiveShell.clear_instance()


@pytest.fixture
def ip(shell, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path))
    assert shell.run_line_magic("load_ext", "workbench") is None
    yield shell
    shell.run_line_magic("unload_ext", "workbench")
    for panel in live_panels():
        panel.close()


def test_load_unload_round_trip(ip) -> None:
    line = ip.magics_manager.magics["line"]
    assert "workbench" in line and "tune" in line
    assert ip.extension_manager.load_extension("workbench") == "already loaded"
    assert ip.run_line_magic("unload_ext", "workbench") is None
    assert "workbench" not in line and "tune" not in line
    assert not any(type(c).__name__ == "WorkbenchMagics" for c in ip.configurables)
    assert ip.run_line_magic("load_ext", "workbench") is None
    assert "tune" in ip.magics_manager.magics["line"]
    ip.run_line_magic("config", "WorkbenchMagics.refresh_hz = 2")
    from widgets.magics import _LOADED

    assert _LOADED[-1].refresh_hz == 2.0
    assert "--trials-per-batch" in ip.find_line_magic("tune").__doc__


def test_runs_returns_a_dataframe(ip, tmp_path) -> None:
    empty = ip.run_line_magic("workbench", "runs")
    assert isinstance(empty, pd.DataFrame) and len(empty) == 0
    run_id = make_run(str(tmp_path))
    runs = ip.run_line_magic("workbench", "runs")
    assert isinstance(runs, pd.DataFrame) and runs.id.tolist() == [run_id] and runs.status.tolist() == ["done"]


@pytest.mark.parametrize("line, field", [
    ("--shards 0", "shards"),
    ("--shards two", "shards"),
    ("--servers 100", "servers"),
    ("--trials 1 --shards 2", "trials"),
    ("--slices 0,50", "slices"),
    ("--cost-model bogus", "cost_model"),
    ("--target tpu", "target"),
    ("--seed -1", "seed"),
    ("--sweep 10,200", "sweep_slices"),
    ("--input-shape 1,x", "input_shape"),
    ("--model no_such_model", "model"),
    ("--host nowhere", "host"),
    ("--tracker nope", "tracker"),
    ("--gpus 0,0", "gpus"),
    ("--trials-per-batch many", "trials_per_batch"),
    ("--shards", "shards"),
    ("--measure-timeout soon", "measure_timeout_s"),  # parse errors and TuneSpec errors name the same field
    ("--measure-timeout 0", "measure_timeout_s"),
])
def test_tune_rejects_bad_values_naming_the_field(ip, tmp_path, line, field) -> None:
    with pytest.raises(UsageError, match=rf"^{field}: "):
        ip.run_line_magic("tune", line)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_usage_errors(ip) -> None:
    with pytest.raises(UsageError, match="action"):
        ip.run_line_magic("workbench", "explode")
    with pytest.raises(UsageError, match="^run: "):
        ip.run_line_magic("workbench", "attach")
    with pytest.raises(UsageError, match="^run: no run 'nope'"):
        ip.run_line_magic("workbench", "attach nope")
    with pytest.raises(UsageError, match="unrecognized"):
        ip.run_line_magic("tune", "--bogus 3")


def test_tune_help_comes_from_the_cli_options(ip, capsys) -> None:
    doc = ip.find_line_magic("tune").__doc__
    assert doc.startswith("Start a tuning run") and "usage: %tune" in doc
    assert all(option in doc for option in ("--tracker", "--host", "--gpus", "--no-panel"))
    assert ip.run_line_magic("tune", "-h") is None  # prints the help; no SystemExit
    assert "--trials-per-batch" in capsys.readouterr().out


def test_attach_finished_run(ip, tmp_path) -> None:
    run_id = make_run(str(tmp_path), sweep=True)
    assert ip.run_line_magic("workbench", f"attach {run_id[:12]}") is None
    panel = current_panel()
    assert panel is not None and panel.run.id == run_id
    snap = panel.snapshot()
    assert snap["run_status"] == "done" and snap["results_rows"] == 2 and snap["recommended"] == 50
    assert ip.run_line_magic("workbench", "") is None
    assert current_panel() is not panel and current_panel().run is None


def test_unload_stops_panel_updates_but_not_the_run(ip, tmp_path) -> None:
    # a run that looks alive: its "supervisor" is a sleeping process group of our own
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        run_id = make_run(str(tmp_path), finished=False, live_pid=sleeper.pid)

        async def scenario() -> None:
            ip.run_line_magic("workbench", f"attach {run_id}")
            panel = current_panel()
            assert panel.snapshot()["run_status"] == "running"
            task = panel._task
            assert task is not None and not task.done()
            await asyncio.sleep(0.3)  # the driver refreshes a few times
            ip.run_line_magic("unload_ext", "workbench")
            await asyncio.sleep(0.05)
            assert task.done()

        asyncio.run(scenario())
        assert sleeper.poll() is None  # the run itself keeps going
        assert workbench.open_run(run_id).status == "running"
        ip.run_line_magic("load_ext", "workbench")  # for the fixture's teardown
    finally:
        sleeper.kill()
        sleeper.wait()


def test_tune_starts_a_run_with_a_panel(ip) -> None:
    """One real (tiny) launch through the magic; stopped at once."""
    run = ip.run_line_magic("tune", "--model mlp-small --trials 2 --trials-per-batch 2 --seed 3")
    try:
        assert isinstance(run, workbench.Run)
        assert run.spec.trials == 2 and run.spec.seed == 3 and run.spec.model == "mlp-small"
        panel = current_panel()
        assert panel is not None and panel.run.id == run.id
        assert panel.controls["trials"].value == 2
        quiet = ip.run_line_magic("tune", "--model mlp-small --trials 2 --no-panel")
        assert current_panel() is panel
        assert quiet.stop() in ("stopped", "done", "failed")
    finally:
        assert run.stop() in ("stopped", "done", "failed")
