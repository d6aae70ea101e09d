"""Shard clients on a real dask.distributed cluster on 127.0.0.1 (issue 18): what a cluster run writes is what a
local run writes; a worker killed mid-run costs no record; Stop leaves nothing on the workers and resume goes on;
a lost scheduler fails the run within seconds; a worker without TVM is refused before tuning."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

import workbench as wb
from workbench.hardware import TargetSpec, host_cpu
from workbench.orchestrate.cluster import local_size
from workbench.orchestrate.cluster_task import Tailer, client_env, worker_job
from workbench.procs import WITHOUT_TORCH, group_alive, stop_group
from workbench.tuning.client import PARENT_PID_ENV, ShardJob

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = dict(model="mlp-small", shards=2, servers=1, trials=4, trials_per_batch=2)
RECORDS, WORKLOADS = "database_tuning_record.json", "database_workload.json"


# -- the pure parts -------------------------------------------------------------------------------------

def test_tailer_relays_whole_lines_and_workloads_before_the_records_that_point_at_them(tmp_path):
    db = tmp_path / "stages" / "100" / "shard-0"
    db.mkdir(parents=True)
    (db / WORKLOADS).write_text('["w0"]\n')
    (db / RECORDS).write_text("[0, 1]\n[0, 2")  # the second record is still being written
    (tmp_path / "events.jsonl").write_text('{"t":1}\n')
    tail = Tailer(str(tmp_path), ["events.jsonl", "logs/client.log"], ["stages/100/shard-0"],
                  {f"stages/100/shard-0/{WORKLOADS}": 0})
    chunks = tail.read()
    names = [os.path.basename(rel) for rel, _ in chunks]
    assert names.index(WORKLOADS) < names.index(RECORDS)  # a reader never sees a record before its workload
    assert dict(chunks)[f"stages/100/shard-0/{RECORDS}"] == "[0, 1]\n"
    assert tail.read() == []  # nothing new
    with open(db / RECORDS, "a") as f:
        f.write("]\n")
    assert tail.read() == [(f"stages/100/shard-0/{RECORDS}", "[0, 2]\n")]
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "client.log").write_text("last words")  # no newline: only a final read takes it
    assert tail.read() == []
    assert tail.read(final=True) == [("logs/client.log", "last words")]
    seeded = Tailer(str(tmp_path), [], ["stages/100/shard-0"], {f"stages/100/shard-0/{RECORDS}": 7})
    assert dict(seeded.read())[f"stages/100/shard-0/{RECORDS}"] == "[0, 2]\n"  # what was sent with the task is not


def test_a_job_moves_to_the_worker_and_uses_its_threads(tmp_path):
    run_dir = "/home/u/.workbench/runs/r1"
    job = ShardJob(run_dir=run_dir, work_dir=f"{run_dir}/stages/50/shard-1", events_path=f"{run_dir}/events.jsonl",
                   shard=1, tuned_at=50, tasks=("a",), trials=4, spec=wb.TuneSpec(cluster="local"),
                   target=TargetSpec("cpu"), tracker=("127.0.0.1", 9190, "k"), runner_workers=1, builder_workers=1,
                   num_threads=1)
    moved = worker_job(ShardJob.from_json(job.to_json()), str(tmp_path), nthreads=6, model_path="/w/m.onnx")
    assert moved.work_dir == f"{tmp_path}/stages/50/shard-1" and moved.events_path == f"{tmp_path}/events.jsonl"
    assert (moved.run_dir, moved.num_threads, moved.builder_workers, moved.prewarm) == (str(tmp_path), 6, 6, True)
    assert moved.spec.model == "/w/m.onnx" and moved.tracker == job.tracker
    assert local_size(2, 2) == (2, 1) and local_size(16, 4) == (4, 4) and local_size(2, 5) == (2, 1)


def test_the_client_does_not_inherit_what_a_nanny_set_for_its_worker(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")  # a nanny's pre-spawn settings for the worker process
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")  # not the nanny's value: the user's own, kept
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", "/tmp/x")
    env = client_env()
    assert "MALLOC_TRIM_THRESHOLD_" not in env and "OMP_NUM_THREADS" not in env and "CUDA_MPS_PIPE_DIRECTORY" not in env
    assert env["OPENBLAS_NUM_THREADS"] == "3" and env[PARENT_PID_ENV] == str(os.getpid())
    assert env["PYTHONPATH"].split(os.pathsep)[0] == WITHOUT_TORCH  # TVM in the client imports no torch, as locally


def test_a_cluster_run_needs_the_rpc_runner():
    from workbench.options import EngineOptions

    with pytest.raises(wb.SpecError) as err:
        wb.plan_run(wb.TuneSpec(cluster="local"), options=EngineOptions(runner="local"))
    assert err.value.field == "cluster" and "RPC runner" in err.value.message


# -- a real cluster -----------------------------------------------------------------------------------

def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
            "PYTHONUNBUFFERED": "1", **extra}


def _spawn(argv: list[str], log: str, env: dict[str, str]) -> subprocess.Popen:
    with open(log, "ab") as f:
        return subprocess.Popen([sys.executable, "-m", *argv], env=env, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


class Cluster:
    """A `dask scheduler` and `dask worker`s (resources tune=1, no nanny) on 127.0.0.1, each in its own session."""

    def __init__(self, folder) -> None:
        self.folder = folder
        self.home = str(folder / "worker-home")
        self.file = str(folder / "scheduler.json")
        self.scheduler = _spawn(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                                 "--no-dashboard", "--scheduler-file", self.file], str(folder / "scheduler.log"),
                                _env())
        self.workers: dict[str, subprocess.Popen] = {}
        deadline = time.monotonic() + 60
        while not os.path.exists(self.file) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.address = json.load(open(self.file))["address"]

    def add_worker(self, name: str, **env: str) -> subprocess.Popen:
        self.workers[name] = _spawn(["distributed.cli.dask_worker", self.address, "--name", name, "--nthreads", "1",
                                     "--resources", "tune=1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1"],
                                    str(self.folder / f"worker-{name}.log"), _env(WORKBENCH_HOME=self.home, **env))
        return self.workers[name]

    def wait_workers(self, names: list[str], timeout: float = 60) -> dict[str, str]:
        """Worker name -> address once all `names` joined."""
        from distributed import Client

        with Client(self.address, timeout=30) as client:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                by_name = {w["name"]: a for a, w in client.scheduler_info(n_workers=-1)["workers"].items()}
                if set(names) <= set(by_name):
                    return by_name
                time.sleep(0.3)
        raise AssertionError(f"workers {names} did not join {self.address}")

    def stop_worker(self, name: str) -> None:
        proc = self.workers.pop(name)
        stop_group(proc.pid)
        proc.wait(timeout=10)

    def close(self) -> None:
        for proc in [*self.workers.values(), self.scheduler]:
            stop_group(proc.pid)
            proc.wait(timeout=10)  # reaped: a failed test must leave no zombie for the next one to find


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    yield c
    c.close()


def _wait_for(run, kind: str, timeout: float = 240, after: int = 0, **match) -> dict:
    """The first `kind` event matching `match` among the run's events after the first `after`."""
    for i, e in enumerate(run.follow(timeout=timeout)):
        if i >= after and e["kind"] == kind and all(e.get(k) == v for k, v in match.items()):
            return e
    raise AssertionError(f"no {kind} {match} event; status {run.status}: {run.message}")


def _each_started(run, after: int, shards: int, timeout: float = 240) -> list[dict]:
    """The first `shard_started` event of each of `shards` shards among the run's events after the first `after`."""
    found: dict[int, dict] = {}
    for i, e in enumerate(run.follow(timeout=timeout)):
        if i >= after and e["kind"] == "shard_started":
            found.setdefault(e["shard"], e)
            if len(found) == shards:
                return list(found.values())
    raise AssertionError(f"{len(found)} of {shards} shards started; status {run.status}: {run.message}")


def _lines(path: str) -> list[str]:
    try:
        with open(path) as f:
            return [line for line in f if line.strip()]
    except FileNotFoundError:
        return []


def _layout(run_dir: str) -> set[str]:
    """The run folder's files, the supervisor's pid taken out of the server key and the shard out of a task's log
    (the plan by measured time may give two tasks of near-equal default time to either shard)."""
    out = set()
    for base, _, names in os.walk(run_dir):
        for n in names:
            rel = re.sub(r"wb-\d+-", "wb-PID-", os.path.relpath(os.path.join(base, n), run_dir))
            rel = re.sub(r"shard-\d+/logs/(.*task_)", r"shard-K/logs/\1", rel)
            out.add(re.sub(r"-tuned-untuned\b", "-untuned", rel))  # a stage whose model kept no tuned schedule
    return out


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _with_home(home) -> list[int]:
    """Live processes started with WORKBENCH_HOME=`home`: a LocalCluster's workers (and their clients) carry it."""
    out = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and p.environ().get("WORKBENCH_HOME") == str(home):
                out.append(p.info["pid"])
        except (psutil.Error, OSError):
            continue
    return out


def _gone(pid: int, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_a_cluster_run_writes_what_a_local_run_writes(tmp_path):
    from tvm.s_tir import meta_schedule as ms  # the merged databases load as stock MetaSchedule loads them

    runs = {how: wb.tune(wb.TuneSpec(**SMALL, cluster=cluster), home=str(tmp_path / how))
            for how, cluster in (("local", None), ("cluster", "local"))}  # at once: the 2 cores take turns
    for how, run in runs.items():
        assert run.wait(timeout=300) == "done", (how, run.message, run.errors().to_dict("records"))
    local, remote = runs["local"], runs["cluster"]
    assert _layout(remote.dir) == _layout(local.dir)
    # the workers build candidates that this host's servers run: compiled for this CPU, as a local run's are
    assert remote.plan.target == local.plan.target and local.plan.target.arch == host_cpu()[0]
    kinds = {how: [e["kind"] for e in run.event_list() if e["kind"] != "telemetry"] for how, run in runs.items()}
    assert set(kinds["cluster"]) == set(kinds["local"]) | {"cluster", "shard_placed"}
    for kind in ("batch", "shard_started", "shard_finished", "defaults", "merged", "timed"):
        assert kinds["cluster"].count(kind) == kinds["local"].count(kind), kind
    (ready,) = remote.event_list("cluster")
    assert ready["local"] and len(ready["workers"]) == 2 and "2 worker processes" in ready["chosen"]
    assert sorted(e["shard"] for e in remote.event_list("shard_placed")) == [0, 1]
    sources = {e["source"] for e in remote.event_list("batch")}
    assert sources == {"shard-0@100", "shard-1@100"}  # the clients' own lines, relayed as written
    assert list(remote.progress().state) == ["finished", "finished"]
    assert remote.progress().trials_done.sum() == SMALL["trials"]
    shapes = {}
    for how, run in runs.items():
        stage = os.path.join(run.dir, "stages", "100")
        for shard in (0, 1):
            workloads = _lines(os.path.join(stage, f"shard-{shard}", WORKLOADS))
            records = [json.loads(line) for line in _lines(os.path.join(stage, f"shard-{shard}", RECORDS))]
            assert len(records) == SMALL["trials"] // 2 and all(0 <= r[0] < len(workloads) for r in records)
        merged = ms.database.JSONDatabase(work_dir=os.path.join(stage, "merged"), allow_missing=False)
        assert len(merged) == SMALL["trials"]
        shapes[how] = {(len(r), len(r[1])) for r in map(json.loads, _lines(os.path.join(stage, "merged", RECORDS)))}
    assert shapes["cluster"] == shapes["local"]  # a record is [workload, [trace, run_secs, target, args]] both ways
    assert _lines(os.path.join(remote.dir, "logs", "client-100-0.log")) or \
        not _lines(os.path.join(local.dir, "logs", "client-100-0.log"))
    assert os.listdir(tmp_path / "cluster" / "worker-runs") == []  # nothing left in the workers' own folders
    view = remote.cluster()
    assert local.cluster() is None and view.local and view.cores == sum(w["nthreads"] for w in ready["workers"])
    assert sorted(", ".join(view.workers.ran).split(", ")) == ["0 @100 %", "1 @100 %"]
    assert (view.workers.running == "").all() and not view.workers.lost.any()
    from widgets import Panel  # the notebook's view of it: the cluster next to the servers
    shown = Panel(remote)._servers.value
    assert "servers: 100% server" in shown and f"LocalCluster on this machine at {ready['address']}: 2 workers" in shown
    for e in remote.event_list("shard_placed"):
        assert re.search(re.escape(e["worker"]) + r" on \S+ \(\d+ threads?\): ran shard " + str(e["shard"]), shown)
    assert ("Dask dashboard" in shown) == bool(ready["dashboard"])
    assert _with_home(tmp_path / "cluster") == [] and not _listening(int(ready["address"].rsplit(":", 1)[1]))


@pytest.mark.slow
def test_a_worker_killed_mid_run_costs_no_record(tmp_path):
    # replay-trace and a random cost model: a resumed task's batch is drawn, not evolved (45 s here, loaded)
    spec = wb.TuneSpec(model="mlp-small", shards=2, servers=1, trials=6, trials_per_batch=2, cluster="local",
                       strategy="replay-trace", cost_model="random")
    run = wb.tune(spec, home=str(tmp_path))
    batch = _wait_for(run, "batch", shard=0)
    placed = [e for e in run.event_list("shard_placed") if e["shard"] == 0][-1]
    (ready,) = run.event_list("cluster")
    worker_pid = {w["worker"]: w["pid"] for w in ready["workers"]}[placed["worker"]]
    db = os.path.join(run.dir, "stages", "100", "shard-0")
    kept = _lines(os.path.join(db, RECORDS))
    assert len(kept) >= batch["batch_size"]
    os.kill(worker_pid, signal.SIGKILL)
    assert _gone(placed["pid"])  # the worker's client died with it
    assert run.wait(timeout=300) == "done", (run.message, run.errors().to_dict("records"))
    (lost,) = run.event_list("worker_lost")
    assert (lost["shard"], lost["worker"], lost["restarted"]) == (0, placed["worker"], True)
    assert lost["records_kept"] >= len(kept)
    again = [e for e in run.event_list("shard_placed") if e["shard"] == 0][-1]
    assert again["attempt"] == 1 and again["pid"] != placed["pid"]
    restarted = [e for e in run.event_list("shard_started") if e["shard"] == 0][-1]
    assert restarted["shard_trials_resumed"] >= len(kept)
    final = _lines(os.path.join(db, RECORDS))
    planned = [e for e in run.event_list("shard_planned") if e["shard"] == 0][-1]  # the plan by measured time
    assert final[:len(kept)] == kept and len(final) == planned["shard_trial_budget"]  # every record received kept
    assert len(_lines(os.path.join(run.dir, "stages", "100", "merged", RECORDS))) == spec.trials
    assert "worker_lost" in set(run.errors().kind)
    workers = run.cluster().workers.set_index("worker")
    assert workers.lost[placed["worker"]] and "0 @100 %" in workers.ran[again["worker"]]
    assert run.progress().trials_done.sum() == spec.trials  # Run reads the restarted shard's events as one shard
    assert os.listdir(tmp_path / "worker-runs") == []  # the killed worker's folder went when the shard restarted
    assert _with_home(tmp_path) == []  # the LocalCluster (its restarted worker too) closed with the run


@pytest.mark.slow
def test_stop_leaves_nothing_on_the_workers_resume_goes_on_and_a_lost_scheduler_fails_the_run(cluster, tmp_path):
    """One run on a `dask scheduler` with 2 workers: stopped, resumed on the same cluster, then its scheduler
    killed (in one test: each part needs a run that is tuning, and starting one costs most of the time)."""
    workers = {cluster.add_worker(f"w{i}").pid for i in range(2)}
    cluster.wait_workers(["w0", "w1"])
    spec = wb.TuneSpec(model="mlp-small", shards=2, servers=1, trials=400, trials_per_batch=2,
                       cluster=cluster.address, strategy="replay-trace", cost_model="random")  # quick resumed batches
    run = wb.tune(spec, home=str(tmp_path / "home"))
    batch = _wait_for(run, "batch")
    clients = [e["pid"] for e in run.event_list("shard_placed")]
    assert len(clients) == 2 and {psutil.Process(p).ppid() for p in clients} == workers
    ports = [e["port"] for e in run.event_list("server_ready")]
    ports.append(json.load(open(os.path.join(run.dir, "stages", "100", "shard-0.json")))["tracker"][1])
    t0 = time.monotonic()
    assert run.stop() == "stopped", run.message
    assert time.monotonic() - t0 < 10
    assert all(_gone(p, timeout=5) for p in clients)
    for pid in workers:  # the workers live on, with no child
        assert psutil.Process(pid).is_running() and psutil.Process(pid).children(recursive=True) == []
    assert not [p for p in ports if _listening(p)]
    from distributed import Client

    with Client(cluster.address, timeout=30) as client:  # the workers themselves never imported TVM
        assert set(client.run(lambda: "tvm" in sys.modules).values()) == {False}
    procs = json.load(open(os.path.join(run.dir, "procs.json")))
    assert not [g for g in [procs["supervisor"], *procs["groups"]] if group_alive(g)]
    assert os.listdir(os.path.join(cluster.home, "worker-runs")) == []
    db = os.path.join(run.dir, "stages", "100", "shard-{}", RECORDS)
    kept = {k: _lines(db.format(k)) for k in (0, 1)}
    assert len(kept[batch["shard"]]) >= batch["shard_trials"]  # what was measured came home

    seen = run.event_count
    again = wb.resume(run.id, home=str(tmp_path / "home"))  # on the same cluster, from the records kept
    batch = _wait_for(again, "batch", after=seen)
    resumed = {e["shard"]: e["shard_trials_resumed"] for e in _each_started(again, seen, 2)}  # a shard may batch
    assert all(resumed[k] >= len(kept[k]) for k in (0, 1)), (resumed, kept)  # before the other starts
    placed = [e["pid"] for e in again.event_list("shard_placed")[-2:]]
    stop_group(cluster.scheduler.pid, term_timeout=0.1)  # SIGTERM, then SIGKILL: the scheduler is gone
    t0 = time.monotonic()
    assert again.wait(timeout=60) == "failed"
    assert time.monotonic() - t0 < 20, time.monotonic() - t0
    assert "Dask scheduler" in again.message and "resume" in again.message, again.message
    assert all(_lines(db.format(k))[:len(kept[k])] == kept[k] for k in (0, 1))  # records kept
    assert len(_lines(db.format(batch["shard"]))) >= batch["shard_trials"]
    assert all(_gone(p, timeout=30) for p in placed)  # each worker stops its client once the scheduler stays away


@pytest.mark.slow
def test_workers_without_tvm_or_with_another_tvm_are_refused_before_tuning(cluster, tmp_path):
    no_tvm = tmp_path / "no-tvm"
    no_tvm.mkdir()
    (no_tvm / "sitecustomize.py").write_text("import sys\nsys.modules['tvm'] = None  # `import tvm` fails\n")
    old_tvm = tmp_path / "old-tvm"
    old_tvm.mkdir()
    (old_tvm / "sitecustomize.py").write_text("import sys, types\nsys.modules['tvm'] = types.ModuleType('tvm')\n"
                                              "sys.modules['tvm'].__version__ = '0.26.0'  # another release\n")
    cluster.add_worker("good")
    cluster.add_worker("bare", PYTHONPATH=os.pathsep.join([str(no_tvm), ROOT]))
    cluster.add_worker("old", PYTHONPATH=os.pathsep.join([str(old_tvm), ROOT]))
    addresses = cluster.wait_workers(["good", "bare", "old"])
    t0 = time.monotonic()
    run = wb.tune(wb.TuneSpec(**SMALL, cluster=cluster.address), home=str(tmp_path / "home"))
    assert run.wait(timeout=120) == "failed"
    import tvm

    message = run.message
    assert f"worker {addresses['bare']} (bare)" in message and "no TVM" in message, message
    assert f"worker {addresses['old']} (old) on {socket.gethostname()} has TVM 0.26.0" in message, message
    assert tvm.__version__ in message and addresses["good"] not in message, message
    assert not run.event_list("shard_planned") and not run.event_list("batch")  # refused before tuning
    assert time.monotonic() - t0 < 60
