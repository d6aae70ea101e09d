"""Latency versus resource: time compiled models in worker processes, each under one slice."""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from workbench.hardware import TargetSpec, detect
from workbench.mps import start_daemons
from workbench.procs import Interrupted, ManagedProcess, ProcessError, python_argv, tail
from workbench.runs import store
from workbench.runs.event_types import Error, MpsStatus, SweepFinished, SweepPoint, SweepStarted
from workbench.runs.events import EventWriter
from workbench.servers.slices import SliceBinding, SliceHost, apply_slice, core_groups

INFER_TIMEOUT_S = 600.0
UNTUNED = "untuned"  # the untuned build's name among a sweep's libraries (the tuned ones are named by their slice)

# The least milliseconds one timing measurement lasts (TVM's min_repeat_ms: calls repeated until then, their mean is
# the measurement): 20 on a GPU, 50 on a CPU. This variable sets it for quick runs whose timings need not be precise
# (the test suite: 10); the rounds, their statistics and the verdict's test stay as they are.
MIN_REPEAT_ENV = "WORKBENCH_MIN_REPEAT_MS"


def min_repeat_ms(target_kind: str) -> int:
    """The least ms of one timing measurement of a model: `MIN_REPEAT_ENV` where it is set, else 20 on a GPU, 50 on a
    CPU."""
    given = os.environ.get(MIN_REPEAT_ENV, "").strip()
    if not given:
        return 20 if target_kind == "cuda" else 50
    if not given.isdigit() or int(given) < 1:
        raise ValueError(f"{MIN_REPEAT_ENV} must be a whole number of milliseconds, at least 1; got {given!r}")
    return int(given)


@dataclass
class WaitingTimer:
    """A timing worker started ahead of its job (`start_timer`): it imports TVM (and starts the baseline's process,
    which imports torch, for a PyTorch baseline) while the stage tunes, then waits for `job_path`. Those imports are
    most of a short stage's verifying phase."""

    proc: ManagedProcess
    job_path: str
    percent: int
    binding: SliceBinding
    torch: bool

    def usable(self, percent: int, torch: bool) -> bool:
        return self.percent == percent and self.torch == torch and self.proc.poll() is None


def _infer_folder(run_dir: str) -> str:
    """Where a run's timing workers' jobs and results go (made if missing)."""
    folder = os.path.join(run_dir, "infer")
    os.makedirs(folder, exist_ok=True)
    return folder


def _worker(run_dir: str, percent: int, target: TargetSpec, host: SliceHost | None, env: dict[str, str],
            tracker: tuple[str, int, str] | None, tag: str, argv: list[str]) -> tuple:
    """A timing worker at slice `percent` (not started) and its slice binding."""
    host = host or SliceHost(target.kind, tuple(sorted(os.sched_getaffinity(0))))
    binding = apply_slice(host, percent) if tracker is None else on_server(percent, tracker)
    proc = ManagedProcess(f"infer-{percent}", python_argv("workbench.results.infer", *argv), {**env, **binding.env},
                          store.RunDir(run_dir).log(f"infer-{tag}"), cpu_affinity=binding.cores or None)
    return proc, binding


def start_timer(run_dir: str, percent: int, target: TargetSpec, host: SliceHost | None, env: dict[str, str],
                tracker: tuple[str, int, str] | None = None, torch: bool = False) -> WaitingTimer:
    """Start the timing worker of stage `percent` now, for `infer_at(..., timer=)` to hand its job to later."""
    folder = _infer_folder(run_dir)
    job_path = os.path.join(folder, f"job-{percent}-stage.json")
    if os.path.exists(job_path):
        os.remove(job_path)
    argv = ["--wait", job_path, str(os.getpid()), *(["--torch"] if torch else [])]
    proc, binding = _worker(run_dir, percent, target, host, env, tracker, f"{percent}-stage", argv)
    proc.start()
    return WaitingTimer(proc, job_path, percent, binding, torch)


def infer_at(run_dir: str, percent: int, libs: dict[str, str], model, target: TargetSpec,
             host: SliceHost | None, env: dict[str, str], reference: str | None = None,
             timeout: float = INFER_TIMEOUT_S, should_stop: Callable[[], bool] = lambda: False,
             tracker: tuple[str, int, str] | None = None, interleave: bool = False,
             baseline: dict | None = None, tolerance: str | None = None,
             timer: WaitingTimer | None = None) -> list[dict]:
    """Run `workbench.results.infer` under slice `percent` of `host` (its first GPU's daemon and the run's
    pinned-memory limit, as its servers had them; None: this process's cores, no MPS) on `libs`; return
    one result dict per library. With `tracker` (HOST, PORT, KEY) the worker times them on a server under that
    key instead, at the slice that server has (`percent` is then only the stage's name). `interleave`: time the
    libraries in turn, round by round, for a paired comparison (`noise.paired_verdict`); `baseline`: a
    `results.baseline.Baseline` (as a dict) to time among them, in a process that may import torch; `tolerance`: the
    dtype whose tolerances the outputs are checked at against `reference` (None: the reference's own); `timer`: a
    worker started ahead at this slice (`start_timer`), used while it waits, else one is started here.

    The worker dies with its caller (Linux) and is stopped as soon as `should_stop()` (Interrupted)."""
    folder = _infer_folder(run_dir)
    tag = f"{percent}-{'-'.join(sorted(libs))}"
    out = os.path.join(folder, f"result-{tag}.json")
    torch = bool(baseline and baseline.get("kind") == "torch")
    job = {"device": target.device_type, "libs": libs, "reference": reference, "input_shape": list(model.input_shape),
           "dtype": model.dtype, "slice_percent": percent, "out": out,
           "min_repeat_ms": min_repeat_ms(target.kind), "parent_pid": os.getpid(),
           "rpc": list(tracker) if tracker else None, "server": server_name(tracker) if tracker else None,
           "interleave": interleave, "baseline": baseline, "tolerance": tolerance}
    if os.path.exists(out):
        os.remove(out)
    if timer is not None and timer.usable(percent, torch):
        proc, binding = timer.proc, timer.binding
        store.write_json(timer.job_path, job)  # atomically: the waiting worker reads it whole
    else:
        if timer is not None:
            timer.proc.stop()
        job_path = os.path.join(folder, f"job-{tag}.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        proc, binding = _worker(run_dir, percent, target, host, env, tracker, tag, [job_path])
        proc.start()
    try:
        code = proc.wait_unless(timeout, should_stop)
    finally:
        proc.stop()
    if code is None:
        raise ProcessError(f"inference at {percent}% took longer than {timeout:.0f} s; killed")
    if code != 0 or not os.path.exists(out):
        raise ProcessError(f"inference at {percent}% failed (exit {code}):\n{tail(proc.log_path)}")
    with open(out) as f:
        rows = json.load(f)
    for row in rows:
        row.update(binding.to_dict())
    return rows


def server_name(tracker: tuple[str, int, str]) -> str:
    host, port, key = tracker
    return f"key {key} at {host}:{port}"


def on_server(percent: int, tracker: tuple[str, int, str]) -> SliceBinding:
    """What timing on a tracker's server is: no slice applied here; the server's own, whoever started it."""
    return SliceBinding(percent, "server", False, f"timed on a server under {server_name(tracker)}, at the slice "
                                                  "that server was started with")


def sweep_points(slices: list[int], host: SliceHost) -> list[tuple[int, tuple[int, ...]]]:
    """(percent timed, the requested percents it stands for) in the order timed. On a CPU the slices that come
    to the same number of cores are timed once (`slices.core_groups`); on a GPU every slice is its own."""
    if host.target == "cuda":
        return [(p, (p,)) for p in slices]
    return [(g.percent, g.percents) for g in core_groups(slices, len(host.cores))]


def covered(df: pd.DataFrame) -> set[tuple[int, int]]:
    """(tuned_at, percent) of every requested slice that a sweep table's rows stand for."""
    out = set()
    for row in df.to_dict("records"):
        stands = row.get("stands_for")
        stands = stands if isinstance(stands, (list, tuple)) and stands else [row["inferred_at"]]
        out.update((int(row["tuned_at"]), int(p)) for p in stands)
    return out


def standalone_host(target: TargetSpec, gpus: tuple[int, ...], mps_root: str, slices: list[int], events: EventWriter,
                    pinned_mem_mb: int | None = None) -> SliceHost:
    """A SliceHost of this process's cores and, on a GPU with a slice under 100 %, an MPS daemon of its own on
    the first of `gpus` (under `mps_root`; its status an `mps_status` event): the caller stops `host.daemons`."""
    daemons = {}
    if target.kind == "cuda" and any(p < 100 for p in slices):
        uuids = {g: info.uuid for g, info in enumerate(detect().gpus) if g == gpus[0]}
        daemons = start_daemons({gpus[0]: mps_root}, uuids, lambda g, d: events.emit(
            MpsStatus(gpu=g, started=d.started, reason=d.reason, pipe_dir=d.pipe_dir)))
    return SliceHost(target.kind, tuple(sorted(os.sched_getaffinity(0))), gpus, daemons, pinned_mem_mb=pinned_mem_mb)


def sweep_run(run_dir: str, slices: list[int], host: SliceHost | None = None, events: EventWriter | None = None,
              should_stop: Callable[[], bool] = lambda: False) -> pd.DataFrame:
    """Time every tuned model of a run, and its untuned build, at every slice (on a CPU, each distinct core count
    once: `sweep_points`); write sweep.csv and `sweep_point` events for the tuned models, sweep_untuned.csv for
    the untuned build (kept apart, so that sweep.csv and its readers mean what they did).

    `host`: the supervisor's (its MPS daemons); None for a sweep of its own, which starts a daemon on the
    run's first GPU when a slice needs one and quits it at the end."""
    from workbench.models.load import load_model

    folder = store.RunDir(run_dir)
    spec, plan = folder.read_spec(), folder.read_plan()
    target = plan.target
    events = events or EventWriter(folder.events_file, "sweep")
    libs = {str(p): folder.tuned_lib(p) for p in spec.slices}
    libs = {k: v for k, v in libs.items() if os.path.exists(v)}
    if not libs:
        raise ProcessError(f"run {os.path.basename(run_dir)} has no tuned model yet; nothing to sweep")
    timed_libs = {**libs, UNTUNED: folder.untuned_lib} if os.path.exists(folder.untuned_lib) else libs
    own_daemons = {}
    if host is None:
        gpus = plan.gpus or (0,)
        host = standalone_host(target, gpus, folder.mps_root(gpus[0], "sweep"), slices, events, spec.pinned_mem_mb)
        own_daemons = dict(host.daemons)
    model = load_model(spec.model, spec.input_shape, spec.precision)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}
    rows, untuned = [], []
    try:
        for percent, stands_for in sweep_points(slices, host):
            if should_stop():
                break
            try:
                timed = infer_at(run_dir, percent, timed_libs, model, target, host, env, should_stop=should_stop)
            except Interrupted:
                break
            for r in timed:
                if r["name"] == UNTUNED:
                    untuned.append({"model": spec.model, "inferred_at": percent,
                                    **{k: r.get(k) for k in store.UNTUNED_COLUMNS[2:-1]},
                                    "stands_for": list(stands_for)})
                    continue
                row = {"model": spec.model, "tuned_at": int(r["name"]), "inferred_at": percent,
                       "latency_ms_median": r["latency_ms_median"], "latency_ms_iqr": r["latency_ms_iqr"],
                       "latency_ms_q1": r.get("latency_ms_q1"), "latency_ms_q3": r.get("latency_ms_q3"),
                       "sm_count": r.get("sm_count"), "cores": r.get("cores"),
                       "slice_applied": r["slice_applied"], "slicing": r["slicing"], "reason": r["reason"],
                       "stands_for": list(stands_for), "busy_cores": r.get("busy_cores")}
                rows.append(row)
                events.emit(SweepPoint(**row))
    finally:
        for daemon in own_daemons.values():
            daemon.stop()
    _merge_write(folder.file(store.SWEEP_UNTUNED_FILE), pd.DataFrame(untuned).assign(tuned_at=0) if untuned
                 else pd.DataFrame(), drop=("tuned_at",))
    return _merge_write(folder.file(store.SWEEP_FILE), pd.DataFrame(rows))


def _merge_write(path: str, df: pd.DataFrame, drop: tuple[str, ...] = ()) -> pd.DataFrame:
    """`df` over the table at `path`: new points replace the old ones at the slices they stand for."""
    if os.path.exists(path) and len(df):
        prev = pd.read_csv(path).assign(**{c: 0 for c in drop})
        done = covered(df) | set(zip(df.tuned_at, df.inferred_at))
        keep = [(int(t), int(i)) not in done for t, i in zip(prev.tuned_at, prev.inferred_at)]
        order = list(df.columns) + [c for c in prev.columns if c not in df.columns]
        df = pd.concat([prev[keep], df], ignore_index=True)[order]
    if len(df):
        df = df.sort_values(["tuned_at", "inferred_at"]).drop(columns=list(drop)).reset_index(drop=True)
        store.write_atomic(path, lambda tmp: df.to_csv(tmp, index=False))
    return df


def main(argv: list[str] | None = None) -> None:
    """`python -m workbench.results.sweep RUN_DIR 10,30,100`: a background sweep with start/finish events."""
    import signal
    import sys
    import traceback

    from workbench.spec import parse_slices

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        sys.exit("usage: python -m workbench.results.sweep RUN_DIR SLICES")
    run_dir, slices = os.path.abspath(argv[0]), list(parse_slices(argv[1], "sweep_slices"))
    events = EventWriter(store.RunDir(run_dir).events_file, "sweep")
    stop = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(flag=True))
    events.emit(SweepStarted(slices=slices, pid=os.getpid()))
    status, message = "done", ""
    try:
        sweep_run(run_dir, slices, events=events, should_stop=lambda: stop["flag"])
        if stop["flag"]:
            status = "stopped"
    except Exception as err:  # noqa: BLE001 - becomes an event
        status, message = "failed", f"{type(err).__name__}: {err}"
        events.emit(Error(where="sweep", message=message, traceback=traceback.format_exc()[-2000:]))
    events.emit(SweepFinished(status=status, message=message))
    sys.exit(0 if status != "failed" else 1)


if __name__ == "__main__":
    main()
