"""Faults during a real run: what the user sees, and that measured records are kept."""
import json
import os
import signal
import time

import pytest

import workbench as wb
from workbench import store
from workbench.procs import group_alive


def _pid_of(run, name: str) -> int:
    procs = store.read_json(os.path.join(run.dir, store.PROCS_FILE))
    for pid in procs["groups"]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if name in cmd:
            return pid
    raise AssertionError(f"no live process of the run matching {name!r}")


def _records(path: str) -> int:
    try:
        with open(os.path.join(path, "database_tuning_record.json")) as f:
            return sum(1 for line in f if line.strip())
    except FileNotFoundError:
        return 0


def _wait_for(run, kind: str, timeout: float = 300, **match):
    for e in run.follow(timeout=timeout):
        if e["kind"] == kind and all(e.get(k) == v for k, v in match.items()):
            return e
    raise AssertionError(f"no {kind} {match} event; status {run.status}: {run.message}")


def test_killed_shard_leaves_a_partial_run_with_its_records(tmp_path):
    spec = wb.TuneSpec(model="mlp-small", shards=2, servers=1, trials=40, trials_per_batch=4)
    run = wb.tune(spec, home=str(tmp_path))
    _wait_for(run, "batch", shard=0)
    stage = os.path.join(run.dir, "stages", "100")
    job = json.load(open(os.path.join(stage, "shard-0.json")))
    os.killpg(_pid_of(run, os.path.join(stage, "shard-0.json")), signal.SIGKILL)
    kept = _records(job["work_dir"])
    assert kept >= 4
    assert run.wait(timeout=400) == "partial", run.message
    failed = run.event_list("shard_failed")
    assert [e["shard"] for e in failed] == [0] and failed[0]["exit_code"] != 0 and "log_tail" in failed[0]
    assert "shards failed: 100/0" in run.message
    assert run.progress().set_index("shard").loc[0, "state"] == "failed"
    merged = run.event_list("merged")[0]
    assert merged["records"] == _records(job["work_dir"]) + _records(os.path.join(stage, "shard-1"))
    assert _records(job["work_dir"]) >= kept
    assert len(run.results) == 1  # the model still compiled and was timed, shard 1's tuning included


def test_killed_tracker_fails_the_run_with_a_clear_message(tmp_path):
    spec = wb.TuneSpec(model="mlp-small", shards=1, servers=1, trials=40, trials_per_batch=4)
    run = wb.tune(spec, home=str(tmp_path))
    _wait_for(run, "batch")
    os.killpg(_pid_of(run, "tvm.exec.rpc_tracker"), signal.SIGKILL)
    t0 = time.monotonic()
    assert run.wait(timeout=120) == "failed"
    assert time.monotonic() - t0 < 60
    assert "tracker died" in run.message and "records are kept" in run.message
    assert _records(os.path.join(run.dir, "stages", "100", "shard-0")) >= 4
    procs = store.read_json(os.path.join(run.dir, store.PROCS_FILE))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(group_alive(p) for p in [procs["supervisor"], *procs["groups"]]):
        time.sleep(0.2)
    assert not any(group_alive(p) for p in [procs["supervisor"], *procs["groups"]])


def test_unwritable_home_is_refused_before_launch(tmp_path):
    home = tmp_path / "ro"
    home.mkdir()
    os.chmod(home, 0o500)
    if os.access(home, os.W_OK):  # root ignores permissions: use a path under a file instead
        home = tmp_path / "file"
        home.write_text("not a folder")
    with pytest.raises(wb.SpecError) as err:
        wb.tune(wb.TuneSpec(model="mlp-small"), home=str(home))
    assert err.value.field == "home" and "WORKBENCH_HOME" in str(err.value)


def test_run_folders_are_private(tmp_path):
    run_id, path = store.new_run_dir(wb.TuneSpec(), str(tmp_path))
    assert os.stat(path).st_mode & 0o077 == 0
    assert os.stat(os.path.join(path, "logs")).st_mode & 0o077 == 0
