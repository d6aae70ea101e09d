"""Shard clients on a Dask cluster (`TuneSpec.cluster`): the supervisor's side.

`DaskLauncher` (a `shard_launch.ShardLauncher`) connects to a scheduler, or starts a `distributed.LocalCluster`
for `local`, and refuses workers that cannot run the clients (no `tune` resource, no TVM, another TVM version)
before tuning. Each shard is one task (`cluster_task.run_shard`) needing the resource tune=1, so a worker runs one
client at a time. A thread of the launcher appends what the tasks relay (events, logs, database lines) to the run
folder, beats the heartbeat the tasks watch, and restarts a shard whose worker was lost from the records received
so far (a `worker_lost` event). Measurement still goes through the run's RPC tracker.
"""
from __future__ import annotations

import glob
import importlib.util
import json
import logging
import os
import threading
import time

from workbench.orchestrate.cluster_task import ShardTask, probe_worker, run_shard
from workbench.orchestrate.shard_launch import ShardLaunch
from workbench.plan.task_file import tvm_version
from workbench.procs import ProcessError
from workbench.runs.event_types import ClusterReady, ShardPlaced, WorkerLost
from workbench.runs.events import EventWriter, append_lines
from workbench.runs.store import RECORDS_FILE, RunDir
from workbench.spec import LOCAL_CLUSTER, TuneSpec

TUNE_RESOURCE = "tune"  # each worker offers 1: one shard client at a time per worker
CONNECT_TIMEOUT_S = 30.0
POLL_S = 0.25  # relayed lines are appended this often
WORKERS_S = 1.0  # the heartbeat and the scheduler's worker list, this often
SCHEDULER_LOST_S = 5.0  # the scheduler unreachable this long: the run fails
STOP_WAIT_S = 8.0  # how long stop() waits for the tasks to report their clients gone
MAX_ATTEMPTS = 4  # a shard's client starts at most this often (one more per lost worker)

log = logging.getLogger(__name__)


def local_size(ncores: int, shards: int) -> tuple[int, int]:
    """Workers x threads of a LocalCluster: a worker per shard, as far as the cores go, the cores split evenly."""
    workers = max(1, min(shards, ncores))
    return workers, max(1, ncores // workers)


class DaskShard:
    """A shard's client on the cluster, as the supervisor sees it (a `ShardHandle`); its state is the launcher's."""

    pid = None  # never a process of this host

    def __init__(self, launcher: DaskLauncher, launch: ShardLaunch) -> None:
        self.launcher = launcher
        self.launch = launch
        self.name = launch.name
        self.log_path = launch.log_path
        self.attempts = 0
        self.attempt = ""  # the current attempt's key; lines of any other attempt are ignored
        self.future = None
        self.token: str | None = None  # the copy of the attempt that started first (the scheduler may re-run it)
        self.worker: str | None = None
        self.code: int | None = None

    def poll(self) -> int | None:
        return self.code

    def stop(self) -> None:
        self.launcher.stop([self])


class DaskLauncher:
    """Shard clients as Dask tasks, their lines relayed into the run folder (see the module's docstring).

    Connecting (a LocalCluster's start, the workers' TVM probes) runs in a thread from construction on, so that
    it overlaps the tracker's and the servers' start-up; `check()` and `start()` wait for it."""

    def __init__(self, spec: TuneSpec, folder: RunDir, events: EventWriter, ncores: int) -> None:
        self.spec, self.folder, self.events, self.ncores = spec, folder, events, ncores
        self.address = spec.cluster or ""
        self.client = self.cluster = self.queue = self.control = None
        self.prefix = f"wb-{os.path.basename(folder.path)}-{os.getpid()}"
        self.beat = 0
        self.stopped: set[str] = set()  # attempts asked to stop
        self.shards: dict[str, DaskShard] = {}  # by attempt, every attempt ever submitted
        self.lock = threading.RLock()
        self.lost: str | None = None  # why the scheduler is gone
        self.failure: BaseException | None = None  # why it could not start, or what broke the relay (a full disk)
        self.model_name, self.model = "", None
        self.plan: dict | None = None  # the plan by measured time, for the clients in workers' copies of the folder
        self.closing = threading.Event()
        self.pump = threading.Thread(target=self._pump, name="dask-relay", daemon=True)
        self.setup = threading.Thread(target=self._setup, name="dask-connect", daemon=True)
        self.setup.start()

    def _setup(self) -> None:
        """Start a LocalCluster (`local`) or connect to the scheduler, check its workers, say what it is."""
        import dask
        from distributed import Client, LocalCluster, Queue, Variable

        spec, chosen = self.spec, ""
        try:
            if spec.cluster == LOCAL_CLUSTER:
                workers, threads = local_size(self.ncores, spec.shards)
                waits = "; the other shards wait for a free worker" if spec.shards > workers else ""
                chosen = (f"LocalCluster of {workers} worker processes x {threads} thread{'s' if threads > 1 else ''}"
                          f" ({self.ncores} cores, {spec.shards} shards{waits})")
                home = os.path.dirname(os.path.dirname(self.folder.path))  # the run's home: its cache serves them too
                # Without the workers' 10 ms stack sampler: it took 4 % of a core per worker next to 1.8 % without,
                # and their only task waits on its client.
                with dask.config.set({"distributed.worker.profile.enabled": False}):
                    self.cluster = LocalCluster(
                        n_workers=workers, threads_per_worker=threads, processes=True, host="127.0.0.1",
                        dashboard_address="127.0.0.1:0" if _has_bokeh() else None, worker_dashboard_address=None,
                        resources={TUNE_RESOURCE: 1}, memory_limit=0, silence_logs=logging.WARNING,
                        env={"WORKBENCH_HOME": home})
                self.client = Client(self.cluster, timeout=CONNECT_TIMEOUT_S)
            else:
                try:
                    self.client = Client(spec.cluster, timeout=CONNECT_TIMEOUT_S)
                except OSError as err:
                    raise ProcessError(f"cannot reach the Dask scheduler at {spec.cluster} within "
                                       f"{CONNECT_TIMEOUT_S:.0f} s ({err}); "
                                       "is `dask scheduler` running there?") from None
            # A LocalCluster's workers are this interpreter with this environment: their TVM is ours.
            found = check_workers(self.client, self.address, probe_tvm=self.cluster is None)
            self.queue = Queue(f"{self.prefix}-relay", client=self.client)
            self.control = Variable(f"{self.prefix}-control", client=self.client)
            self.control.set({"beat": 0, "stop": []})
            model = os.path.expanduser(spec.model)
            if os.path.isfile(model):  # an ONNX file travels to the workers once, not with every task
                self.model_name = os.path.basename(model)
                with open(model, "rb") as f:
                    self.model = self.client.scatter(f.read(), broadcast=False)
            info = self.client.scheduler_info(n_workers=-1)
            dashboard = self.client.dashboard_link if _has_bokeh() and "dashboard" in info.get("services", {}) else ""
            self.events.emit(ClusterReady(address=info.get("address", self.address), local=self.cluster is not None,
                                          dashboard=dashboard, workers=found, chosen=chosen))
            self.pump.start()
        except Exception as err:  # noqa: BLE001 - check() raises it in the supervisor
            self.failure = err if isinstance(err, ProcessError) else ProcessError(
                f"the Dask cluster {self.address} could not be used: {type(err).__name__}: {err}")

    # -- the ShardLauncher contract ------------------------------------------------------------------
    def start(self, launch: ShardLaunch) -> DaskShard:
        self.check()
        os.makedirs(os.path.dirname(launch.log_path), exist_ok=True)
        open(launch.log_path, "a").close()  # there from the start, as a local client's is
        shard = DaskShard(self, launch)
        self._submit(shard)
        return shard

    def check(self) -> None:
        """Wait until connected; raise ProcessError when the cluster cannot serve (refused, scheduler lost)."""
        self.setup.join()
        if self.lost:
            raise ProcessError(self.lost)
        if self.failure is not None:
            raise self.failure

    def stop(self, shards: list[DaskShard]) -> None:
        """Ask the shards' tasks to stop their clients; wait until they say so (or STOP_WAIT_S), then cancel."""
        with self.lock:
            running = [s for s in shards if s.code is None]
            self.stopped.update(s.attempt for s in running)
            for shard in running:
                if shard.token is None:  # still waiting for a worker: it would stop at once if it started now
                    shard.code = -15
        if not running:
            return
        if not self.lost:
            try:
                self._set_control()
            except Exception:  # noqa: BLE001 - the scheduler gone: its workers stop their clients themselves
                pass
        deadline = time.monotonic() + STOP_WAIT_S
        while any(s.code is None for s in running) and time.monotonic() < deadline and not self.lost:
            time.sleep(POLL_S)
        with self.lock:
            for shard in running:
                if shard.code is None:
                    shard.code = -15
                    why = ("the scheduler is lost" if self.lost else
                           f"its task did not report its client stopped within {STOP_WAIT_S:.0f} s")
                    self._note(shard, f"{why}; the worker stops the client itself once the scheduler or the "
                                      f"supervisor's heartbeat stays away")
        self._cancel([s.future for s in running])

    def close(self) -> None:
        """Stop every shard, stop relaying, release the queue and the variable, close the client (and the cluster)."""
        if self.closing.is_set():
            return
        self.setup.join()
        self.stop(list(self.shards.values()))
        self.closing.set()
        if self.pump.is_alive():
            self.pump.join(timeout=10)
        try:
            if self.queue is not None and not self.lost:
                self.queue.close()
                self.control.delete()
            if self.client is not None:
                self.client.close(timeout=10)
        except Exception as err:  # noqa: BLE001 - closing must not fail the run's clean-up
            log.warning("closing the Dask client: %s", err)
        if self.cluster is not None:
            try:
                self.cluster.close(timeout=20)
            except Exception as err:  # noqa: BLE001 - closing must not fail the run's clean-up
                log.warning("closing the LocalCluster: %s", err)

    # -- submitting -----------------------------------------------------------------------------
    def _submit(self, shard: DaskShard) -> None:
        """Submit the shard's next attempt, with the shard's database as the run folder has it now."""
        launch = shard.launch
        attempt = f"{self.prefix}-{launch.tuned_at}-{launch.shard}-{shard.attempts}"
        task = ShardTask(attempt=attempt, queue=self.queue.name, control=self.control.name, job_json=launch.job_json,
                         log_rel=os.path.relpath(launch.log_path, self.folder.path), files=self._database(launch),
                         model_name=self.model_name)
        with self.lock:
            shard.attempts += 1
            shard.attempt, shard.token, shard.worker, shard.future = attempt, None, None, None
            self.shards[attempt] = shard
        shard.future = self.client.submit(run_shard, task, self.model, key=attempt, pure=False,
                                          resources={TUNE_RESOURCE: 1})

    def _database(self, launch: ShardLaunch) -> tuple[tuple[str, str], ...]:
        """The shard database's files (whole lines only), relative to the run folder."""
        work_dir = json.loads(launch.job_json)["work_dir"]
        out = []
        for path in sorted(glob.glob(os.path.join(work_dir, "database_*.json"))):
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            out.append((os.path.relpath(path, self.folder.path), text[:text.rfind("\n") + 1]))
        return tuple(out)

    def _cancel(self, futures: list) -> None:
        try:
            if not self.lost:
                self.client.cancel([f for f in futures if f is not None], reason="stopped by the workbench")
        except Exception:  # noqa: BLE001 - the scheduler gone: nothing to cancel there
            pass

    # -- the relay thread -------------------------------------------------------------------------
    def _set_control(self) -> None:
        self.beat += 1
        value = {"beat": self.beat, "stop": sorted(self.stopped), **({"plan": self.plan} if self.plan else {})}
        self.control.set(value, callback_timeout=5)

    def publish_plan(self, plan: dict) -> None:
        """With the next heartbeat (within WORKERS_S), the tasks write it into their copies of the run folder."""
        self.plan = plan

    def _pump(self) -> None:
        failing_since, last_workers = None, 0.0
        while not self.closing.is_set():
            try:
                if self.client.status != "running":  # its connection to the scheduler broke: it is reconnecting
                    raise ConnectionError(f"the Dask client is {self.client.status}")
                with self.lock:
                    finished = {a: s.future.status for a, s in self.shards.items()
                                if a == s.attempt and s.code is None and s.future is not None}
                messages = self.queue.get(batch=True, callback_timeout=5)
                workers = None
                if time.monotonic() - last_workers >= WORKERS_S:
                    last_workers = time.monotonic()
                    self._set_control()
                    info = self.client.sync(self.client.scheduler.identity, n_workers=-1, callback_timeout=5)
                    workers = set(info["workers"])
                failing_since = None
            except Exception as err:  # noqa: BLE001 - the scheduler busy, or gone
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > SCHEDULER_LOST_S:
                    self.lost = (f"the Dask scheduler at {self.address} was lost ({type(err).__name__}: {err}); "
                                 f"measured records are kept in the shard databases; to continue: workbench resume "
                                 f"{os.path.basename(self.folder.path)}")
                    return
                self.closing.wait(POLL_S)
                continue
            try:
                with self.lock:
                    for message in messages:
                        self._receive(message)
                    self._watch(finished, workers)
            except BaseException as err:  # noqa: BLE001 - e.g. a full disk: the supervisor's check() raises it
                self.failure = err
                return
            self.closing.wait(POLL_S)

    def _receive(self, m: dict) -> None:
        shard = self.shards.get(m.get("attempt", ""))
        if shard is None or shard.attempt != m["attempt"] or shard.code is not None:
            return  # an attempt given up, or a shard already ended
        if shard.token is None and m["kind"] == "started":
            shard.token, shard.worker = m["token"], m["worker"]
            self.events.emit(ShardPlaced(shard=shard.launch.shard, tuned_at=shard.launch.tuned_at, worker=m["worker"],
                                         host=m.get("host", ""), pid=m.get("pid"), attempt=shard.attempts - 1))
            return
        if m["token"] != shard.token:  # the scheduler re-ran the attempt: the worker that ran it first was lost
            self._lost(shard, shard.worker or "?")
            return
        if m["kind"] == "lines":
            for rel, text in m["chunks"]:
                path = self.folder.inside(rel)
                if os.path.basename(path) == os.path.basename(self.events.path):
                    append_lines(path, text)
                else:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    with open(path, "a", encoding="utf-8") as f:
                        f.write(text)
        elif m["kind"] == "exited":
            shard.code = int(m["code"])
            if m.get("why"):
                self._note(shard, f"client stopped on worker {shard.worker}: {m['why']}")

    def _watch(self, finished: dict[str, str], workers: set[str] | None) -> None:
        """Restart shards whose worker left the cluster; end those whose task ended without saying so."""
        for attempt, status in finished.items():
            shard = self.shards[attempt]
            if shard.attempt != attempt or shard.code is not None:
                continue
            if (workers is not None and shard.worker and shard.worker not in workers) or status == "lost":
                self._lost(shard, shard.worker or "?")
            elif status == "error":
                err = shard.future.exception(timeout=5)
                if type(err).__name__ == "KilledWorker":
                    self._lost(shard, shard.worker or "?")
                else:
                    self._note(shard, f"its task failed on worker {shard.worker}: {type(err).__name__}: {err}")
                    shard.code = 1
            elif status in ("finished", "cancelled"):  # ended, yet its last message never came
                shard.code = shard.future.result(timeout=5) if status == "finished" else -15

    def _lost(self, shard: DaskShard, worker: str) -> None:
        """The worker running `shard` is gone: give its attempt up and start the next from the records received."""
        self.stopped.add(shard.attempt)
        self._cancel([shard.future])
        lost = shard.attempts - 1
        records = sum(text.count("\n") for rel, text in self._database(shard.launch)
                      if rel.endswith(RECORDS_FILE))
        restart = shard.attempts < MAX_ATTEMPTS
        message = "" if restart else f"its client was started {MAX_ATTEMPTS} times"
        self.events.emit(WorkerLost(shard=shard.launch.shard, tuned_at=shard.launch.tuned_at, worker=worker,
                                    attempt=lost, records_kept=records, restarted=restart, message=message))
        self._note(shard, f"worker {worker} lost (attempt {lost}); {records} records kept; "
                          + ("restarting on another worker" if restart else message))
        if restart:
            self._submit(shard)
        else:
            shard.code = -9

    def _note(self, shard: DaskShard, line: str) -> None:
        """A line of the workbench's own in the shard's client log (where `workbench show` reads a failure)."""
        os.makedirs(os.path.dirname(shard.log_path), exist_ok=True)
        with open(shard.log_path, "a") as f:
            f.write(f"[workbench] {line}\n")


def check_workers(client, address: str, probe_tvm: bool = True) -> list[dict]:
    """The workers offering the `tune` resource, each {worker, name, host, nthreads, pid, tvm (None: not probed)};
    ProcessError naming every worker that cannot run the clients (no TVM, another version than ours) and the
    versions."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    tune = {a: w for a, w in workers.items() if (w.get("resources") or {}).get(TUNE_RESOURCE, 0) >= 1}
    if not tune:
        raise ProcessError(f"no worker of the Dask cluster at {address} offers the resource {TUNE_RESOURCE} "
                           f"({len(workers)} workers); start them with: dask worker {address} --resources "
                           f"{TUNE_RESOURCE}=1 --nthreads N")
    ours: dict[str, str] = {}
    importing = threading.Thread(target=lambda: ours.update(tvm=tvm_version()) if probe_tvm else None)
    importing.start()  # TVM's import here overlaps the workers'
    probes = client.run(probe_worker, probe_tvm, workers=list(tune), on_error="return")
    importing.join()
    here = ours.get("tvm")
    bad = []
    for addr in sorted(tune):
        named = f"worker {addr}" + (f" ({tune[addr]['name']})" if str(tune[addr].get("name")) != addr else "")
        probe = probes.get(addr)
        if not isinstance(probe, dict):
            bad.append(f"{named} cannot run the workbench's task ({type(probe).__name__}: {probe}); install the "
                       "workbench there")
        elif probe_tvm and probe.get("tvm") != here:
            has = f"TVM {probe['tvm']}" if probe.get("tvm") else f"no TVM ({probe.get('error')})"
            bad.append(f"{named} on {probe['host']} has {has}")
    if bad:
        raise ProcessError(f"refused before tuning: {'; '.join(bad)}; this machine has TVM {here}: give every worker "
                           f"the same (pip install apache-tvm=={here})")
    return [{"worker": a, "name": str(tune[a].get("name")), "host": probes[a]["host"], "nthreads": tune[a]["nthreads"],
             "pid": probes[a]["pid"], "tvm": probes[a].get("tvm")} for a in sorted(tune)]


def _has_bokeh() -> bool:
    """Dask's dashboard needs bokeh; without it the cluster runs without one."""
    return importlib.util.find_spec("bokeh") is not None
