"""Soak: many short real runs from one process (standing in for a notebook kernel) leak nothing.

4 runs back to back, then 2 at once. After them the test process has its threads, file descriptors
and children back where they were, no listening port of a run is left, and its memory is flat
over the last 3 back-to-back runs. The back-to-back runs are the cheapest real run the engine has (one
trial, random cost model, the client measuring in-process: ~12 s each on 2 idle cores); the two
at once measure through a tracker and an RPC server each. `WB_SOAK_RUNS` sets the back-to-back count: 20, as
issue 5 asked, took ~5 min here, so CI runs 4 (the suite must stay under ~25 minutes on 2 cores).

Why 4 and 2 suffice: the first run is the warm-up (it imports TVM and builds the caches; threads, fds and RSS
are compared against it), and RSS was flat to 0.2 MiB from run 1 to run 6 here (773.0, 773.1 after 3, 773.2
after 6), so the 3 runs after it give the same leak window the 6 gave (runs 3 to 6): a leak of 0.5 MiB a run
is 1.5 MiB over them, above the 1.2 MiB slack; a leaked thread, fd, child or listener shows after one run. Two
runs at once are what concurrency adds (their trackers, servers and folders side by side); a third added
more contention on 2 cores, not another kind of check, for a third more of that phase's time.
"""
from __future__ import annotations

import gc
import os
import threading
import time

import psutil
import pytest

import workbench as wb
from workbench.procs import group_alive
from workbench.runs import store

pytestmark = pytest.mark.slow
RUNS = max(4, int(os.environ.get("WB_SOAK_RUNS", "4")))  # 20, then 14, 8, 6: CI took 30 min with 6
MID = RUNS - 3  # RSS is compared over the last 3 runs, whatever RUNS is
CHEAPEST = dict(model="mlp-small", shards=1, servers=1, trials=1, trials_per_batch=1, cost_model="random",
                strategy="replay-trace")
RSS_SLACK_MIB = 1.2  # over 3 runs: a leak of 0.5 MiB a run shows (flat to 0.1 MiB in CI and here)
AT_ONCE = 2


def _snapshot(home: str) -> dict:
    """What this process holds now: threads, fds, RSS, children, and the listening sockets of ours."""
    gc.collect()
    me = psutil.Process()
    return {"threads": threading.active_count(), "fds": len(os.listdir("/proc/self/fd")),
            "rss_mib": round(me.memory_info().rss / 2**20, 1),
            "children": sorted(c.pid for c in me.children(recursive=True)),
            "listening": _our_listeners(home)}


def _run_groups(home: str) -> set[int]:
    """The process groups of every run under `home` (supervisor, tracker, servers, clients)."""
    groups: set[int] = set()
    for run_id in store.run_ids(home):
        procs = store.read_json(os.path.join(store.runs_root(home), run_id, store.PROCS_FILE), {}) or {}
        groups.update(p for p in [procs.get("supervisor"), *procs.get("groups", [])] if p)
    return groups


def _ours(pid: int | None, home: str, groups: set[int]) -> bool:
    """The test process, one of its descendants, a process of a run's group, or one naming `home`."""
    if pid is None:
        return False
    try:
        proc = psutil.Process(pid)
        return pid == os.getpid() or os.getpid() in [p.pid for p in proc.parents()] or \
            os.getpgid(pid) in groups or any(home in part for part in proc.cmdline())
    except (psutil.Error, OSError):
        return False


def _our_listeners(home: str) -> list[tuple[str, int, int | None]]:
    groups = _run_groups(home)
    return sorted((c.laddr.ip, c.laddr.port, c.pid) for c in psutil.net_connections(kind="inet")
                  if c.status == psutil.CONN_LISTEN and _ours(c.pid, home, groups))


def _leader_cmd(pid: int) -> str:
    """The command line of the leader of `pid`'s group; empty while that group is ending (leader gone or a zombie)."""
    try:
        return " ".join(psutil.Process(os.getpgid(pid)).cmdline())
    except (psutil.Error, OSError):
        return ""


def _first(run: wb.Run, kind: str, timeout: float = 300) -> dict:
    for event in run.follow(timeout=timeout):
        if event["kind"] == kind:
            return event
    raise AssertionError(f"{run.id}: no {kind} event; status {run.status}: {run.message}")


def _finish(run: wb.Run, timeout: float = 300) -> None:
    """Wait for `run` to end `done` and for every process of it to be gone."""
    status = run.wait(timeout=timeout)
    assert status == "done", (run.id, status, run.message)
    procs = store.read_json(os.path.join(run.dir, store.PROCS_FILE))
    groups = [procs["supervisor"], *procs["groups"]]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(group_alive(p) for p in groups):
        time.sleep(0.1)
    assert not [p for p in groups if group_alive(p)], run.id


def test_soak_many_runs_from_one_process_leak_nothing(tmp_path, capsys):
    home = str(tmp_path)
    before = _snapshot(home)
    marks: dict[str, dict] = {}
    walls = []
    for i in range(1, RUNS + 1):
        t0 = time.monotonic()
        _finish(wb.tune(wb.TuneSpec(**CHEAPEST, seed=i), home=home, runner="local"))
        walls.append(round(time.monotonic() - t0, 1))
        if i in (1, MID, RUNS):
            marks[f"after {i}"] = _snapshot(home)
    t0 = time.monotonic()
    at_once = [wb.tune(wb.TuneSpec(**CHEAPEST, seed=100 + i), home=home) for i in range(AT_ONCE)]
    ready = _first(at_once[0], "server_ready")  # its server listens until its client has measured
    during = _our_listeners(home)  # the check does see a live run's server and tracker
    assert ready["port"] in [port for _, port, _ in during], (ready, during)
    leaders = [_leader_cmd(pid) for _, _, pid in during]  # the other run at once may be ending now
    assert any("rpc_tracker" in cmd for cmd in leaders), leaders  # the tracker listens from its group
    for run in at_once:
        _finish(run)
    concurrent_s = round(time.monotonic() - t0, 1)
    after = marks[f"after {AT_ONCE} at once"] = _snapshot(home)
    warm = marks["after 1"]  # the first run imports TVM and builds its caches: the baseline
    report = (f"soak: {RUNS} runs back to back {sum(walls):.0f} s (each {min(walls)}-{max(walls)} s), {AT_ONCE} "
              f"at once {concurrent_s} s; before {before}; " + "; ".join(f"{k} {v}" for k, v in marks.items()))
    with capsys.disabled():
        print("\n" + report)
    assert after["children"] == [] and after["listening"] == [], report
    assert after["threads"] == warm["threads"] == before["threads"], report
    assert after["fds"] == warm["fds"], report
    rss_mid, rss_end = marks[f"after {MID}"]["rss_mib"], marks[f"after {RUNS}"]["rss_mib"]
    assert abs(rss_end - rss_mid) <= RSS_SLACK_MIB, report
    leftovers = [p.info for p in psutil.process_iter(["pid", "cmdline"])
                 if any(home in part for part in (p.info["cmdline"] or []))]
    assert leftovers == [], report
