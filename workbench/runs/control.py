"""Acting on a run's background processes: starting its supervisor and sweeps detached from the caller,
asking it to finish, stopping everything it registered.

The read model (`Run`) calls in here; nothing here imports it, so the two stay apart.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from workbench import diskspace
from workbench.hardware import check_sweep_here, detect
from workbench.mps import MpsDaemon
from workbench.procs import ProcessError, child_env, group_alive, stop_group, tail
from workbench.runs import store
from workbench.runs.event_types import FinishRequested, Launched
from workbench.runs.events import EventReader
from workbench.spec import SpecError, parse_slices

LAUNCH_TIMEOUT_S = 60.0  # a supervisor writes its first event before it imports TVM: well under a second


def spawn_detached(argv: list[str], log_path: str, env: dict[str, str] | None = None) -> int:
    """Start `argv` in its own session, re-parented away from us (no zombie in the caller); its pid."""
    helper = ("import subprocess, sys\n"
              "log = open(sys.argv[1], 'ab')\n"
              "p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,"
              " start_new_session=True)\n"
              "print(p.pid)\n")
    out = subprocess.run([sys.executable, "-c", helper, log_path, *argv], capture_output=True, text=True,
                         env=env, timeout=30, check=True)
    return int(out.stdout.strip())


def _record_pid(run_dir: str, role: str, pid: int) -> int:
    store.RunDir(run_dir).record_procs(**{role: pid})
    return pid


def start_supervisor(run_dir: str, resume: bool = False, trials: int | None = None,
                     timeout: float = LAUNCH_TIMEOUT_S) -> int:
    """Start `python -m workbench.orchestrate.supervisor RUN_DIR` detached; its pid is kept in procs.json. `trials`:
    the budget per tuning slice a resume raised the run to (the plan already says it; the event tells the log).

    Returns once the supervisor has written its `launched` event, so that a Run opened now never reads an older
    run_finished as its end; ProcessError with its log's tail when it dies or stays silent for `timeout` s."""
    folder = store.RunDir(run_dir)
    diskspace.reserve_space(run_dir)  # the supervisor frees it at the end: room for its last events on a full disk
    env = child_env()
    argv = [sys.executable, "-m", "workbench.orchestrate.supervisor", run_dir]
    argv += (["--resume"] if resume else []) + (["--trials", str(trials)] if trials is not None else [])
    pid = _record_pid(run_dir, "supervisor", spawn_detached(argv, folder.log("supervisor"), env))
    got = _await_event(EventReader(folder.events_file), lambda e: isinstance(e, Launched) and e.pid == pid, pid,
                       timeout)
    if got != "seen":
        why = "exited" if got == "exited" else f"wrote nothing in {timeout:.0f} s"
        raise ProcessError(f"the run's supervisor (pid {pid}) {why}; its log ends: {tail(folder.log('supervisor'), 5)}")
    return pid


def _await_event(reader: EventReader, wanted: Callable[[Any], bool], pid: int, timeout: float) -> str:
    """Poll `reader` until an event satisfies `wanted` ("seen"), process group `pid` is gone ("exited") or `timeout`
    seconds have passed ("timeout")."""
    deadline = time.monotonic() + timeout
    while not any(wanted(e) for e in reader.read_new()):
        if not group_alive(pid):
            return "exited"
        if time.monotonic() > deadline:
            return "timeout"
        time.sleep(0.05)
    return "seen"


def start_sweep(run, slices: list[int]) -> int:
    """Start `python -m workbench.results.sweep RUN_DIR SLICES` for `run` (a Run) detached; its pid is kept in
    procs.json."""
    slices = list(parse_slices(slices, "sweep_slices"))
    if run.status in ("running", "starting"):
        raise SpecError("sweep_slices", f"run {run.id} is still tuning; sweep it when it has finished")
    if run.sweeping:
        raise SpecError("sweep_slices", f"a sweep of run {run.id} is already running")
    if not len(run.results):
        raise SpecError("run", f"run {run.id} has no tuned model to sweep")
    if run.spec.tracker:
        check_sweep_here(run.plan.target.kind, detect(), run.spec.tracker)
    argv = [sys.executable, "-m", "workbench.results.sweep", run.dir, ",".join(map(str, slices))]
    return _record_pid(run.dir, "sweeper", spawn_detached(argv, store.RunDir(run.dir).log("sweep"), child_env()))


def stop_run(run_dir: str, timeout: float = 5.0) -> None:
    """Ask the supervisor to stop everything (SIGTERM); after `timeout`, stop by force every process group and
    MPS daemon the run's registry names. The request is recorded (requests.json): a supervisor stopped by force
    cannot write its own end, and the run then reads as stopped, not crashed."""
    folder = store.RunDir(run_dir)
    folder.record_request("stop")
    pid = folder.procs().get("supervisor")
    if pid and group_alive(pid):
        # The supervisor alone: it stops its children in order (a LocalCluster's workers share its group).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and group_alive(pid):
            time.sleep(0.1)
    procs = folder.procs()
    for pgid in [pid, procs.get("sweeper"), *procs.get("groups", [])]:
        if pgid and group_alive(pgid):
            stop_group(pgid, term_timeout=0.5, kill_timeout=1.0)
    for d in procs.get("mps_daemons") or []:
        MpsDaemon.from_dict(d).stop()
    diskspace.release_space(run_dir)  # a supervisor stopped by force leaves its reserve behind


def request_finish(run_dir: str, pid: int, timeout: float = 5.0) -> None:
    """Ask supervisor `pid` to end tuning now and finish the stage with the best records so far; returns once it
    has recorded the request (its `finish_requested` event), or after `timeout` s."""
    reader = EventReader(store.RunDir(run_dir).events_file)
    reader.read_new()  # only a request recorded from now on counts
    os.kill(pid, signal.SIGUSR1)  # the supervisor alone: it stops its clients and finishes the stage
    _await_event(reader, lambda e: isinstance(e, FinishRequested), pid, timeout)
