"""The Dask worker's side of a cluster run: run one shard's client and relay what it writes, as it writes it.

`run_shard` is the task. In a worker-local copy of the run folder (under the worker's workbench home, so that
the intrinsics cache is that host's) it writes the shard database received so far and the job, runs `python -m
workbench.tuning.client` as its child (own session, dying with the worker), and sends every complete new line of the
client's events, log and database files to the supervisor through a Dask queue. It stops the client when the
supervisor asks (a control variable), when the supervisor's heartbeat stops, or when the scheduler is gone.
The worker process itself never imports TVM; nothing is left on the worker afterwards but the cache.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import glob
import importlib
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

from workbench.procs import stop_group, without_torch
from workbench.runs.store import PLAN_FILE, RECORDS_FILE, write_json
from workbench.spec import workbench_home
from workbench.tuning.client import PARENT_PID_ENV, ShardJob

OWNER_FILE = "owner"  # in an attempt's folder: "<host> <worker pid>"
TICK_S = 0.25  # how often new lines are relayed
CONTROL_S = 0.5  # how often the supervisor's control variable is read
LEASE_S = 20.0  # no new heartbeat for this long: the supervisor is gone, stop the client
SCHEDULER_LOST_S = 10.0  # the scheduler unreachable for this long: stop the client


@dataclass(frozen=True)
class ShardTask:
    """What a shard's task needs besides the model file: names on the scheduler, the job, the records so far."""

    attempt: str  # unique per submission; every message carries it
    queue: str  # the run's distributed.Queue of messages to the supervisor
    control: str  # the run's distributed.Variable: {"beat": n, "stop": [attempt, ...], "plan": plan.json's content}
    job_json: str  # the ShardJob, its paths in the supervisor's run folder
    log_rel: str  # the client's log, relative to the run folder
    files: tuple[tuple[str, str], ...] = ()  # (path relative to the run folder, text): the shard database so far
    model_name: str = ""  # the basename of an ONNX model sent with the task ('' for a sample model)


def worker_home() -> str:
    """This host's workbench home: attempts run under worker-runs/, the intrinsics cache is cache/ beside runs/."""
    return os.path.join(workbench_home(), "worker-runs")


def sweep_stale(home: str) -> None:
    """Remove the attempt folders a killed worker of this host left (their owner process is gone)."""
    import psutil

    for path in glob.glob(os.path.join(home, "*", OWNER_FILE)):
        try:
            with open(path) as f:
                host, pid = f.read().split()
        except (OSError, ValueError):
            continue
        if host == socket.gethostname() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def worker_job(job: ShardJob, root: str, nthreads: int, model_path: str | None = None) -> ShardJob:
    """`job` moved into the local copy `root` of its run folder, searching and building on this worker's threads."""
    def moved(path: str) -> str:
        return os.path.join(root, os.path.relpath(path, job.run_dir))

    spec = job.spec.replace(model=model_path) if model_path else job.spec
    return dataclasses.replace(job, run_dir=root, work_dir=moved(job.work_dir), events_path=moved(job.events_path),
                               spec=spec, num_threads=nthreads, builder_workers=spec.builder_workers or nthreads,
                               prewarm=nthreads >= 4)


class Tailer:
    """The complete new lines of files under `root`: given files and every file below given folders."""

    def __init__(self, root: str, files: list[str], folders: list[str], start: dict[str, int] | None = None) -> None:
        self.root = root
        self.files = files
        self.folders = folders
        self.offsets: dict[str, int] = dict(start or {})

    def _paths(self) -> list[str]:
        paths = list(self.files)
        for folder in self.folders:
            for base, _, names in os.walk(os.path.join(self.root, folder)):
                paths += [os.path.relpath(os.path.join(base, n), self.root) for n in sorted(names)]
        return paths

    def read(self, final: bool = False) -> list[tuple[str, str]]:
        """(path, text) for each file that grew; `final`: a last line without its newline too. Record files are
        read first and sent last: every workload their records point at is then read and sent before them."""
        chunks = []
        for rel in sorted(self._paths(), key=lambda p: not p.endswith(RECORDS_FILE)):
            try:
                with open(os.path.join(self.root, rel), "rb") as f:
                    f.seek(self.offsets.get(rel, 0))
                    data = f.read()
            except FileNotFoundError:
                continue
            if not final:
                data = data[:data.rfind(b"\n") + 1]  # a line still being written waits for the next read
            if data:
                self.offsets[rel] = self.offsets.get(rel, 0) + len(data)
                chunks.append((rel, data.decode("utf-8", "replace")))
        return sorted(chunks, key=lambda c: c[0].endswith(RECORDS_FILE))


async def probe_worker(with_tvm: bool = True) -> dict:
    """This worker's host, pid and (in a subprocess, as the client would import it) TVM's version or import error."""
    out = {"host": socket.gethostname(), "pid": os.getpid(), "python": sys.version.split()[0]}
    if not with_tvm:
        return out
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "import tvm; print(tvm.__version__)",
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                                                env=client_env())
    try:
        text, _ = await asyncio.wait_for(proc.communicate(), 120)
    except asyncio.TimeoutError:
        proc.kill()
        return {**out, "tvm": None, "error": "`import tvm` did not finish within 120 s"}
    lines = text.decode("utf-8", "replace").strip().splitlines() or [""]
    if proc.returncode:
        return {**out, "tvm": None, "error": lines[-1][:300]}
    return {**out, "tvm": lines[-1].strip()}


def client_env() -> dict[str, str]:
    """The worker's environment for its client, less what a Dask nanny put there for the worker process alone
    (OMP_NUM_THREADS=1, MALLOC_TRIM_THRESHOLD_=65536, ...: the client sizes its own threads, as a local one does;
    with them a LocalCluster's clients tuned ~1.6x slower), and without torch, as a local client (`procs.child_env`):
    TVM would import it wherever it is installed, seconds in the client and in each of its builders."""
    import dask

    importlib.import_module("distributed")  # its configuration's defaults (a worker has them already)
    nanny = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}),
             **dask.config.get("distributed.nanny.environ", {})}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CUDA_MPS_") and not (k in nanny and v == str(nanny[k]))}
    env.update(PYTHONUNBUFFERED="1", **{PARENT_PID_ENV: str(os.getpid())})
    env.setdefault("TVM_LOG_DEBUG", "0")
    return without_torch(env)


class _Relay:
    """Messages to the supervisor, in order; kept and retried while the scheduler does not answer."""

    def __init__(self, queue, attempt: str) -> None:
        self.queue = queue
        self.base = {"attempt": attempt, "token": uuid.uuid4().hex}
        self.pending: list[dict] = []
        self.failing_since: float | None = None

    def send(self, kind: str, **fields) -> None:
        self.pending.append({**self.base, "kind": kind, **fields})
        self.flush()

    def flush(self) -> None:
        while self.pending:
            try:
                self.queue.put(self.pending[0], timeout=5, callback_timeout=6)
            except Exception:  # noqa: BLE001 - the scheduler busy or gone: retried until SCHEDULER_LOST_S
                self.failing_since = self.failing_since or time.monotonic()
                return
            self.pending.pop(0)
            self.failing_since = None

    @property
    def lost(self) -> bool:
        return self.failing_since is not None and time.monotonic() - self.failing_since > SCHEDULER_LOST_S


class _Control:
    """Whether the supervisor wants this attempt to go on: asked to stop, heartbeat stopped, scheduler gone."""

    def __init__(self, variable, attempt: str, root: str) -> None:
        self.variable = variable
        self.attempt = attempt
        self.root = root  # the attempt's copy of the run folder: the plan by measured time goes there
        self.planned = False
        self.beat, self.beat_at = None, time.monotonic()
        self.failing_since: float | None = None
        self.checked = 0.0

    def why_stop(self) -> str | None:
        now = time.monotonic()
        if now - self.checked < CONTROL_S:
            return None
        self.checked = now
        try:
            value = self.variable.get(timeout=2, callback_timeout=4)
            self.failing_since = None
        except Exception:  # noqa: BLE001 - unset yet, or the scheduler busy or gone
            self.failing_since = self.failing_since or now
            if now - self.failing_since > SCHEDULER_LOST_S:
                return "the Dask scheduler does not answer"
            return None
        if self.attempt in value.get("stop", ()):
            return "stopped by the supervisor"
        if value.get("plan") and not self.planned:  # the client waits for it (ShardJob.await_plan)
            write_json(os.path.join(self.root, PLAN_FILE), value["plan"])
            self.planned = True
        if value.get("beat") != self.beat:
            self.beat, self.beat_at = value.get("beat"), now
        elif now - self.beat_at > LEASE_S:
            return f"no heartbeat from the supervisor for {LEASE_S:.0f} s"
        return None


def run_shard(task: ShardTask, model: bytes | None = None) -> int:
    """The Dask task: tune one shard in a child process, relaying its lines; its exit code."""
    from distributed import Queue, Variable, get_client, get_worker

    worker, client = get_worker(), get_client()
    queue = Queue(task.queue, client=client)
    relay = _Relay(queue, task.attempt)
    root = os.path.join(worker_home(), task.attempt)
    control = _Control(Variable(task.control, client=client), task.attempt, root)
    sweep_stale(worker_home())
    try:
        os.makedirs(root, exist_ok=True)
        with open(os.path.join(root, OWNER_FILE), "w") as f:
            f.write(f"{socket.gethostname()} {os.getpid()}")
        for rel, text in task.files:
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        model_path = None
        if model is not None:
            model_path = os.path.join(root, "model", task.model_name)
            os.makedirs(os.path.dirname(model_path), exist_ok=True)
            with open(model_path, "wb") as f:
                f.write(model)
        job = ShardJob.from_json(task.job_json)
        local = worker_job(job, root, worker.state.nthreads, model_path)
        job_path = os.path.join(root, "job.json")
        with open(job_path, "w") as f:
            f.write(local.to_json())
        tail = Tailer(root, [os.path.relpath(local.events_path, root), task.log_rel],
                      [os.path.relpath(local.work_dir, root)], {rel: len(text.encode()) for rel, text in task.files})
        return _supervise(job_path, os.path.join(root, task.log_rel), tail, relay, control, worker.address)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        with contextlib.suppress(Exception):
            queue.close()  # this task's reference to the queue; the supervisor holds its own


def _supervise(job_path: str, log_path: str, tail: Tailer, relay: _Relay, control: _Control, address: str) -> int:
    """Start the client, relay its lines until it exits or must stop, then say how it ended."""
    why = control.why_stop()
    if why:  # stopped before it started (an attempt the scheduler re-ran after its worker was lost)
        relay.send("exited", code=-15, why=why)
        return -15
    env = client_env()
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "ab") as log:
        child = subprocess.Popen([sys.executable, "-m", "workbench.tuning.client", job_path], env=env,
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    relay.send("started", worker=address, host=socket.gethostname(), pid=child.pid)
    code = None
    try:
        while code is None:
            time.sleep(TICK_S)
            code = child.poll()
            chunks = tail.read()
            if chunks:
                relay.send("lines", chunks=chunks)
            else:
                relay.flush()
            why = why or control.why_stop() or ("the Dask scheduler does not answer" if relay.lost else None)
            if why and code is None:
                stop_group(child.pid)
                code = child.wait(timeout=5)
    finally:
        if code is None:  # an exception above: never leave the client behind
            stop_group(child.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = child.wait(timeout=5)
    chunks = tail.read(final=True)
    if chunks:
        relay.send("lines", chunks=chunks)
    code = code if code is not None else -9
    relay.send("exited", code=code, why=why or "")
    deadline = time.monotonic() + 5
    while relay.pending and not relay.lost and time.monotonic() < deadline:  # the last lines matter most
        time.sleep(TICK_S)
        relay.flush()
    return code
