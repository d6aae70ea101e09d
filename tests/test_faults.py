"""Faults during a real run: what the user sees, and that measured records are kept."""
import errno
import json
import os
import shutil
import signal
import subprocess
import time

import psutil
import pytest
from support import CHEAP_SEARCH, copy_run

import workbench as wb
from workbench import diskspace
from workbench.procs import group_alive
from workbench.runs import store


def _pids_of(run, name: str) -> list[int]:
    """Live processes of the run's groups whose command line contains `name`."""
    procs = store.read_json(os.path.join(run.dir, store.PROCS_FILE))
    out = []
    for pid in procs["groups"]:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if name in f.read().replace(b"\0", b" ").decode():
                    out.append(pid)
        except OSError:
            continue
    return out


def _pid_of(run, name: str) -> int:
    pids = _pids_of(run, name)
    if not pids:
        raise AssertionError(f"no live process of the run matching {name!r}")
    return pids[0]


def _records(path: str) -> int:
    try:
        with open(os.path.join(path, "database_tuning_record.json")) as f:
            return sum(1 for line in f if line.endswith("\n") and line.strip())  # a line being written is no record
    except FileNotFoundError:
        return 0


def _wait_for(run, kind: str, timeout: float = 300, **match):
    for e in run.follow(timeout=timeout):
        if e["kind"] == kind and all(e.get(k) == v for k, v in match.items()):
            return e
    raise AssertionError(f"no {kind} {match} event; status {run.status}: {run.message}")


def test_killed_shard_leaves_a_partial_run_with_its_records(tmp_path):
    spec = wb.TuneSpec(model="mlp-small", shards=2, servers=1, trials=40, trials_per_batch=4, **CHEAP_SEARCH)
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
    spec = wb.TuneSpec(model="mlp-small", shards=1, servers=1, trials=40, trials_per_batch=4, **CHEAP_SEARCH)
    run = wb.tune(spec, home=str(tmp_path))
    _wait_for(run, "batch")
    timer = _pid_of(run, "workbench.results.infer")  # the stage's timing worker, started ahead, waits for its job
    os.killpg(_pid_of(run, "workbench.servers.rpc_tracker"), signal.SIGKILL)
    t0 = time.monotonic()
    assert run.wait(timeout=120) == "failed"
    assert time.monotonic() - t0 < 60
    assert "tracker died" in run.message and "records are kept" in run.message
    assert _records(os.path.join(run.dir, "stages", "100", "shard-0")) >= 4
    procs = store.read_json(os.path.join(run.dir, store.PROCS_FILE))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(group_alive(p) for p in [procs["supervisor"], *procs["groups"]]):
        time.sleep(0.2)
    assert not any(group_alive(p) for p in [procs["supervisor"], *procs["groups"], timer])


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


def _assert_nothing_left(run, timeout: float = 10.0) -> None:
    """No process group of the run and no process naming the run's folder is left."""
    procs = store.read_json(os.path.join(run.dir, store.PROCS_FILE))
    groups = [procs["supervisor"], *procs["groups"], *([procs["sweeper"]] if procs.get("sweeper") else [])]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(group_alive(p) for p in groups):
        time.sleep(0.2)
    assert not [p for p in groups if group_alive(p)]
    leftovers = [p.info for p in psutil.process_iter(["pid", "cmdline", "status"])
                 if any(run.dir in part for part in (p.info["cmdline"] or []))]
    assert leftovers == []


def test_killed_server_fails_over_to_the_remaining_one(tmp_path):
    spec = wb.TuneSpec(model="mlp-small", shards=1, servers=2, trials=16, trials_per_batch=4, **CHEAP_SEARCH)
    run = wb.tune(spec, home=str(tmp_path))
    _wait_for(run, "batch")
    servers = _pids_of(run, "workbench.servers.rpc_server")
    assert len(servers) == 2
    os.kill(servers[0], signal.SIGKILL)  # the server process only: its session worker is orphaned
    killed_at = time.time()
    t0 = time.monotonic()
    assert run.wait(timeout=300) == "done", run.message
    assert time.monotonic() - t0 < 240
    lost = run.event_list("server_lost")
    assert len(lost) == 1 and lost[0]["server"] == "server-0" and lost[0]["servers_left"] == 1
    assert "server_lost" in run.errors().kind.tolist()  # what the panel lists under errors
    from workbench.cli.main import format_event
    assert "server-0 DIED" in format_event(lost[0]) and "on 1 server(s)" in format_event(lost[0])
    later = [e for e in run.event_list("batch") if e["t"] > killed_at]
    assert later and any(us is not None for e in later for us in e["latest_us"])  # measured on server-1
    assert run.progress().trials_done.iloc[0] == spec.trials
    _assert_nothing_left(run)


def test_all_servers_killed_fails_the_run_with_a_clear_message(tmp_path):
    spec = wb.TuneSpec(model="mlp-small", shards=1, servers=2, trials=40, trials_per_batch=4, **CHEAP_SEARCH)
    run = wb.tune(spec, home=str(tmp_path))
    _wait_for(run, "batch")
    for pid in _pids_of(run, "workbench.servers.rpc_server"):
        os.killpg(pid, signal.SIGKILL)
    t0 = time.monotonic()
    assert run.wait(timeout=120) == "failed"
    assert time.monotonic() - t0 < 30
    assert "all RPC servers died" in run.message and "records are kept" in run.message
    assert _records(os.path.join(run.dir, "stages", "100", "shard-0")) >= 4
    _assert_nothing_left(run)


@pytest.fixture
def small_disk(tmp_path):
    """A real file system of a given size (tmpfs) at a fresh folder; unmounted afterwards."""
    mounted = []

    def mount(mb: int) -> str:
        path = tmp_path / f"disk{len(mounted)}"
        path.mkdir()
        out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mb}m,mode=700", "tmpfs", str(path)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            pytest.skip(f"cannot mount a {mb} MiB tmpfs here (needs root or CAP_SYS_ADMIN): {out.stderr.strip()}")
        mounted.append(path)
        return str(path)

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(folder: str) -> str:
    """Write a file until the file system has no space left (real ENOSPC); its path."""
    path = os.path.join(folder, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    chunk = b"\0" * (1 << 20)
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError as err:
                assert err.errno == errno.ENOSPC, err
                if len(chunk) == 1:
                    return path
                chunk = chunk[: len(chunk) // 16 or 1]
    finally:
        os.close(fd)


def test_too_little_free_space_is_refused_before_launch(small_disk):
    home = small_disk(diskspace.MIN_FREE_MB // 4)
    with pytest.raises(wb.SpecError) as err:
        wb.tune(wb.TuneSpec(model="mlp-small"), home=home)
    message = str(err.value)
    assert err.value.field == "home" and "MiB free" in message and f"at least {diskspace.MIN_FREE_MB} MiB" in message
    assert store.run_ids(home) == []


def test_full_disk_stops_the_run_cleanly_and_keeps_its_records(small_disk):
    home = small_disk(diskspace.MIN_FREE_MB + 16)
    spec = wb.TuneSpec(model="mlp-small", shards=1, servers=1, trials=24, trials_per_batch=4, **CHEAP_SEARCH)
    run = wb.tune(spec, home=home)
    _wait_for(run, "batch")
    db_dir = os.path.join(run.dir, "stages", "100", "shard-0")
    kept = _records(db_dir)
    filler = _fill(home)
    assert shutil.disk_usage(home).free == 0
    t0 = time.monotonic()
    assert run.wait(timeout=120) == "failed", run.message
    assert time.monotonic() - t0 < 60
    assert "disk full" in run.message and "ENOSPC" in run.message and run.dir in run.message
    assert any("ENOSPC" in e["message"] for e in run.event_list("error"))
    _assert_nothing_left(run)
    assert _records(db_dir) >= kept >= 4
    os.remove(filler)  # space again: the run resumes from the records it kept
    again = wb.resume(run.id, home=home)
    assert again.wait(timeout=300) == "done", again.message
    assert again.event_list("shard_started")[-1]["shard_trials_resumed"] >= kept
    assert again.progress().trials_done.iloc[-1] >= spec.trials
    _assert_nothing_left(again)


def _infer_workers(run) -> list[psutil.Process]:
    """Live `workbench.results.infer` processes working for `run` (their job file is in the run folder)."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = p.info["cmdline"] or []
        if "workbench.results.infer" in cmd and any(run.dir in part for part in cmd) \
                and p.info["status"] != psutil.STATUS_ZOMBIE:
            out.append(p)
    return out


def _text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _await_infer_worker(run, timeout: float = 120.0) -> psutil.Process:
    """The run's inference worker, once it has started (its log says so: it is bound to its parent then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for worker in _infer_workers(run):
            job = os.path.basename(worker.info["cmdline"][-1])  # job-<tag>.json; its log is infer-<tag>.log
            log = os.path.join(run.dir, "logs", "infer-" + job[len("job-"):-len(".json")] + ".log")
            if f"workbench.results.infer {worker.pid} started" in _text(log):
                return worker
        time.sleep(0.05)
    raise AssertionError(f"no inference worker of {run.id} appeared; status {run.status}: {run.message}")


def _assert_worker_gone(worker: psutil.Process, timeout: float = 5.0) -> None:
    try:
        worker.wait(timeout)
    except psutil.TimeoutExpired:
        raise AssertionError(f"inference worker {worker.pid} outlived the stop: {worker.cmdline()}") from None


def test_repair_drops_a_record_whose_workload_a_full_disk_lost(tmp_path, cheap_done_run):
    """A full disk can lose a workload line while a later record's write gets through (the space a stopping run
    frees); TVM then refuses the whole database. repair_databases drops that record and keeps the others."""
    from tvm.s_tir import meta_schedule as ms

    from workbench.results.finish import repair_databases

    run = copy_run(cheap_done_run, str(tmp_path))  # a real finished run's databases, edited in a copy
    assert run.status == "done", run.message
    db_dir = os.path.join(run.dir, "stages", "100", "shard-0")
    records = os.path.join(db_dir, "database_tuning_record.json")
    with open(records) as f:
        lines = f.readlines()
    with open(os.path.join(db_dir, "database_workload.json")) as f:
        workloads = sum(1 for line in f if line.strip())
    dangling = f"[{workloads}," + lines[0].split(",", 1)[1]  # a complete record of a workload never written
    with open(records, "a") as f:
        f.write(dangling)
    with pytest.raises(Exception, match="workload_index"):
        ms.database.JSONDatabase(work_dir=db_dir)
    assert repair_databases(run.dir) == [records]
    assert len(ms.database.JSONDatabase(work_dir=db_dir)) == len(lines)
    assert repair_databases(run.dir) == []


def test_stopping_a_sweep_leaves_no_inference_worker(tmp_path):
    """Stop during the run's sweeping phase, then stop a background sweep (Run.start_sweep): each time
    with its inference worker hung, which must not outlive the stop."""
    sweep = (10, 20, 30, 50, 70, 100)
    spec = wb.TuneSpec(model="mlp-small", shards=1, servers=1, trials=4, trials_per_batch=4, sweep_slices=sweep)
    run = wb.tune(spec, home=str(tmp_path))
    _wait_for(run, "phase", phase="sweeping")  # the supervisor's own sweep, after tuning
    worker = _await_infer_worker(run)
    worker.suspend()  # a hung worker (SIGSTOP): it would never finish on its own
    t0 = time.monotonic()
    assert run.stop() == "stopped", run.message
    assert time.monotonic() - t0 < 10
    _assert_worker_gone(worker)
    _assert_nothing_left(run)
    assert len(run.results) == 1 and len(run.sweep) < len(sweep)

    run.start_sweep(list(sweep))  # a background sweep of the tuned model (Run.start_sweep)
    worker = _await_infer_worker(run)
    worker.suspend()
    assert run.sweeping
    t0 = time.monotonic()
    run.stop()
    assert time.monotonic() - t0 < 10 and not run.sweeping
    _assert_worker_gone(worker)
    _assert_nothing_left(run)
