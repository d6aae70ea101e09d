"""`Run`: a run's folder seen as DataFrames, followed live, stopped, resumed.

Everything comes from the run's files (spec, plan, events.jsonl, results.json, sweep.csv), so a
Run can be re-opened from any process: after a kernel restart, from the CLI, from another notebook.
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

import pandas as pd

from workbench.plan.plan import Plan
from workbench.procs import group_alive
from workbench.readable import readable
from workbench.runs import store
from workbench.runs.cluster_view import ClusterView, cluster_view
from workbench.runs.curves import best_curve, phase_table, telemetry_table
from workbench.runs.event_types import (
    FAILURES,
    TERMINAL,
    Event,
    FinishRequested,
    Launched,
    RunFinished,
    RunStarted,
    ServerReady,
)
from workbench.runs.events import EventReader, as_dict
from workbench.runs.headline import Headline, headline, model_label, model_ms
from workbench.runs.model import Signature, TensorSpec, TunedModel, output_specs
from workbench.runs.progress import Overall, overall, shard_progress
from workbench.runs.sweep_table import slice_matrix, sweep_table, untuned_table
from workbench.runs.tables import budget_history, events_table, results_table, time_spent
from workbench.runs.waiting import KINDS as WAITING_KINDS
from workbench.runs.waiting import waiting_for
from workbench.spec import SpecError, TuneSpec


class Run:
    def __init__(self, run_dir: str) -> None:
        self.dir = os.path.abspath(run_dir)
        self.id = os.path.basename(self.dir)
        self.folder = store.RunDir(self.dir)
        spec = self.folder.read(store.SPEC_FILE)
        if not isinstance(spec, dict):
            raise SpecError("run", f"{self.dir} holds no readable {store.SPEC_FILE}: not a workbench run folder")
        self.spec = TuneSpec.from_dict(spec)
        self._reader = EventReader(self.folder.events_file)
        self._held = 0  # > 0 inside consistent(): tables do not read new events
        self._events: list[Event] = []

    # -- events ----------------------------------------------------------------------------------
    @property
    def plan(self) -> Plan | None:
        """What the run will do (`workbench.Plan`); None while it is being launched."""
        return self.folder.read_plan()

    def poll_events(self) -> list[Event]:
        """Events appended since the last call (all of them on the first call)."""
        new = self._reader.read_new()
        self._events.extend(new)
        return new

    @property
    def event_count(self) -> int:
        """How many events have been read so far (polls first): a cheap 'did anything change' cursor."""
        self._poll()
        return len(self._events)

    @contextlib.contextmanager
    def consistent(self) -> Iterator[Run]:
        """Tables computed inside see one set of events: one read at entry, none until the exit."""
        self.poll_events()
        self._held += 1
        try:
            yield self
        finally:
            self._held -= 1

    def _poll(self) -> None:
        if not self._held:
            self.poll_events()

    def _all(self, *types: type[Event]) -> list[Any]:
        self._poll()
        return self._events if not types else [e for e in self._events if isinstance(e, types)]

    def typed_events(self, *types: type[Event]) -> list[Any]:
        """The events so far (of these event_types classes, or all), as dataclasses."""
        return list(self._all(*types))

    @property
    def events(self) -> pd.DataFrame:
        """Every event so far, one row each: `time` (local datetime), `since_start_s`, kind, source, its fields
        (`event_list()` has the raw unix seconds `t`)."""
        return events_table([as_dict(e) for e in self._all()])

    def event_list(self, kind: str | None = None) -> list[dict[str, Any]]:
        """All events so far as plain dicts, in today's field names (optionally of one kind)."""
        return [as_dict(e) for e in self._all() if kind is None or e.kind == kind]

    def follow(self, timeout: float | None = None, poll: float = 0.25) -> Iterator[dict[str, Any]]:
        """Yield events (plain dicts, as `event_list`) as they arrive, from the start, until the run finishes
        (or `timeout`)."""
        for event in list(self._all()):
            yield as_dict(event)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._finished_event():
            new = self.poll_events()
            yield from map(as_dict, new)
            if not new:
                if not self.supervisor_alive():
                    yield from map(as_dict, self.poll_events())
                    return
                if deadline is not None and time.monotonic() > deadline:
                    return
                time.sleep(poll)

    def wait(self, timeout: float | None = None) -> str:
        for _ in self.follow(timeout=timeout):
            pass
        return self.status

    # -- state -----------------------------------------------------------------------------------
    def _finished_event(self) -> RunFinished | None:
        """The end of the run's latest launch: its supervisor's run_finished; or, when the user asked it to stop and
        it was stopped by force before it could write one, a run_finished made here (nothing is written)."""
        done = [e for e in self._events if isinstance(e, RunFinished)]
        started = [e for e in self._events if isinstance(e, (Launched, RunStarted))]
        if done and (not started or done[-1].t >= started[-1].t):
            return done[-1]
        asked = self.folder.requests().get("stop")
        if asked is not None and (not started or asked >= started[-1].t) and not self.supervisor_alive():
            return RunFinished(t=float(asked), source="run", status="stopped",
                               message="stopped (supervisor did not finish on its own)")
        return None

    @property
    def finish_requested(self) -> bool:
        """Whether Finish was asked for since the run (or its resume) last started."""
        asked = self._all(FinishRequested)
        starts = self._all(Launched, RunStarted)
        return bool(asked) and (not starts or asked[-1].t >= max(e.t for e in starts))

    def _procs(self) -> dict:
        return self.folder.procs()

    def supervisor_alive(self) -> bool:
        pid = self._procs().get("supervisor")
        return bool(pid) and group_alive(pid)

    @property
    def status(self) -> str:
        """running, done, partial, failed, stopped; or `crashed` when the supervisor vanished."""
        self._poll()
        fin = self._finished_event()
        if fin is not None:
            return fin.status
        if not self._procs():
            return "starting"
        if self.supervisor_alive():
            return "running"
        self.poll_events()  # it may have finished since the events were read (inside consistent())
        fin = self._finished_event()
        return fin.status if fin is not None else "crashed"

    @property
    def finished(self) -> bool:
        return self.status in (*TERMINAL, "crashed")

    @property
    def message(self) -> str:
        fin = self._finished_event()
        return fin.message if fin else ""

    @property
    def sweeping(self) -> bool:
        """True while a background sweep (Run.start_sweep) is running."""
        pid = self._procs().get("sweeper")
        return bool(pid) and group_alive(pid)

    def start_sweep(self, slices: list[int] | tuple[int, ...]) -> None:
        """Time this run's tuned models at `slices` in a detached process; sweep_point events follow."""
        from workbench.runs.control import start_sweep

        start_sweep(self, list(slices))

    def stop(self, timeout: float = 5.0) -> str:
        """Ask the supervisor to stop everything; force-kill whatever is left after `timeout`."""
        from workbench.runs.control import stop_run

        stop_run(self.dir, timeout)
        self.poll_events()
        return self.status

    def finish(self) -> str:
        """End tuning now and get the best model so far, compiled, verified and timed (the run then ends
        `done`; Stop, by contrast, stops at once and can be resumed). Returns the status; `wait()` for the end."""
        from workbench.runs.control import request_finish

        pid = self._procs().get("supervisor")
        if not pid or not group_alive(pid) or self._finished_event() is not None:
            raise SpecError("run", f"run {self.id} is not tuning ({self.status}); there is nothing to finish")
        request_finish(self.dir, pid)
        return self.status

    # -- tables ----------------------------------------------------------------------------------
    def tasks(self, tuned_at: int | None = None) -> pd.DataFrame:
        """One row per (tuning slice, task): state (planned, tuning, tuned, default: outside the budget,
        skipped: error), weight, share of the model's default run time (measured defaults x weight), the
        default's and the best tuned record's microseconds, trials measured, and `kept`: what the compiled
        model runs for the task ("tuned" or "default"). Costliest share first."""
        from workbench.runs.task_table import task_table

        df = task_table(self.plan, self._all(), self.spec.slices)
        # shown as people read it (share as %, one time unit per column); the numbers stay as they are
        return readable(df if tuned_at is None else df[df.tuned_at == tuned_at].reset_index(drop=True))

    def progress(self) -> pd.DataFrame:
        """One row per (tuned_at, shard): trials done and budgeted, tasks (measured), the shard's best estimate
        `est_shard_us` (sum over its measured tasks of weight x best latency so far), state (planned, running,
        finished, failed, or stopped: the run ended before the shard did), `started` / `last_batch` (local
        datetimes), `elapsed_s`, and the ETA while running (see `run_progress.shard_progress`)."""
        return readable(shard_progress(self._all(), self._finished_event() is not None))

    def overall(self, now: float | None = None) -> Overall:
        """The whole run in one figure: trials done of a total fixed at the start (trials per slice x tuning
        slices), finishing steps, trials/s, an ETA that includes finishing (merge, compile, verify, time) and the
        run's sweep, the phase, and a note saying how the ETA was made (see `run_progress.Overall`). `now`: the
        clock (default time.time())."""
        status = self.status
        return overall(self._all(), self.plan, self.spec, status, now)

    def waiting_for(self, now: float | None = None) -> str:
        """What the current stage is waiting for before its first measured batch, and for how long ('timing the
        default schedules (8 s)'); '' once it has measured one (`runs.waiting`)."""
        return waiting_for(self._all(*WAITING_KINDS), time.time() if now is None else now)

    def best_curve(self) -> pd.DataFrame:
        """Per batch: trials so far (whole stage) and the model's estimated latency.

        The estimate sums, over the tasks measured so far, weight x the best latency any shard found
        (search replicas of one task count once). `complete` is False until every shard of the stage
        has reported a batch (the estimate is partial)."""
        return best_curve(self._all())

    def telemetry(self) -> pd.DataFrame:
        return telemetry_table(self._all())

    def phases(self) -> pd.DataFrame:
        return phase_table(self._all())

    def servers(self) -> pd.DataFrame:
        return pd.DataFrame([as_dict(e) for e in self._all(ServerReady)])

    def cluster(self) -> ClusterView | None:
        """The Dask cluster the shard clients ran on (workers, cores, which shard runs where, the dashboard);
        None when they ran as local subprocesses."""
        return cluster_view(self._all())

    def errors(self) -> pd.DataFrame:
        return pd.DataFrame([as_dict(e) for e in self._all(*FAILURES)])

    @property
    def results(self) -> pd.DataFrame:
        """One row per tuning slice, results.json's fields as they are (tuned_ms, untuned_ms, speedup, ...);
        `results_table()` is the same under readable headers."""
        return pd.DataFrame(self.folder.read_results())

    def model(self, tuned_at: int | None = None) -> TunedModel:
        """The compiled model of the slice `tuned_at` (None: the fastest of the run's stages) as a callable on numpy
        arrays or torch tensors; `.export(folder)` writes it with its signature and a loader that needs only TVM.
        It is what the stage kept: the untuned build where no tuned schedule beat the defaults or tuning was
        slower (its `signature.verdict` says which)."""
        row = self._stage_row(tuned_at)
        plan = self.plan
        library = self.folder.tuned_lib(int(row["tuned_at"]))
        if plan is None or not os.path.exists(library):
            raise SpecError("tuned_at", f"run {self.id} has no compiled model at {row['tuned_at']} %")
        device = "cuda" if plan.target.kind == "cuda" else "cpu"
        inputs = (TensorSpec("input", tuple(plan.input_shape), plan.dtype),)
        kept_untuned = row.get("kept") == "untuned"  # its library is the untuned build: it times as that did
        target = plan.target.to_dict()
        signature = Signature(inputs, output_specs(library, device, inputs, target), device, target,
                              model_label(self.spec.model), self.id,
                              int(row["tuned_at"]), str(row.get("verdict", "")),
                              row.get("untuned_ms") if kept_untuned else row.get("tuned_ms"), row.get("untuned_ms"),
                              kept=str(row.get("kept", "tuned")))
        return TunedModel(library, signature)

    def database(self, tuned_at: int | None = None) -> Any:
        """The records the slice's compiled model uses (per task its best, where that beat the default), as a stock
        MetaSchedule JSONDatabase, for compiling the model yourself with `ms.relax_integration.compile_relax`."""
        from tvm.s_tir import meta_schedule as ms

        from workbench.tuning.intrinsics import load_family

        path = self.folder.best_db(int(self._stage_row(tuned_at)["tuned_at"]))
        if self.plan is not None:  # TVM replays each record's trace as it reads it: a tensorized one needs these
            load_family(self.plan.target.kind, store.cache_dir(self.dir))
        return ms.database.JSONDatabase(work_dir=path, allow_missing=False)

    def _stage_row(self, tuned_at: int | None) -> dict[str, Any]:
        rows = self.folder.read_results()
        if not rows:
            raise SpecError("run", f"run {self.id} has no compiled model yet ({self.status})")
        if tuned_at is None:  # the fastest model a stage kept: the untuned build where it kept that one
            return min(rows, key=lambda r: model_ms(r) or float("inf"))
        for row in rows:
            if int(row["tuned_at"]) == int(tuned_at):
                return row
        have = ", ".join(str(r["tuned_at"]) for r in rows)
        raise SpecError("tuned_at", f"must be a slice the run was tuned and compiled at ({have}); got {tuned_at!r}")

    def headline(self) -> Headline:
        """The run's result in one line, baseline first: "mlp-small at 100 %: 74.0 us → 3.79 us, 19.5x faster than
        PyTorch eager fp32; 1.21x faster than TVM untuned"; its text is empty before a stage is timed."""
        return headline(self.results, self.spec.model)

    def results_table(self) -> pd.DataFrame:
        """The results as people read them: "tuned at (%)", "latency (median ± IQR)", "speedup vs untuned", ..."""
        return results_table(self.folder.read_results())

    def budgets(self) -> pd.DataFrame:
        """The model each budget ended with per tuning slice (the first, then each `resume --trials` raise), with
        each raise's gain over the budget before it and whether that gain is beyond the timing noise."""
        return budget_history(self.event_list())

    def time_spent(self) -> pd.DataFrame:
        """Where each tuning slice's shards spent their tuning, by phase (search, build, measure, ...), in seconds
        summed over its shards and as a share: on a GPU the search on the CPU, not the GPU, usually sets the pace."""
        return time_spent(self.event_list())

    @property
    def sweep(self) -> pd.DataFrame:
        """Latency per (tuned_at, inferred_at) from the sweep_point events, live; the latest point wins, also over
        an older one at a slice that a later point stands for (`stands_for`: a CPU's slices of one core count).
        Points from before the run's budget was last raised (`resume --trials`) timed models that are gone: left out."""
        return sweep_table(self._all(), self.folder)

    def sweep_untuned(self) -> pd.DataFrame:
        """The run's untuned build timed at each swept slice (sweep_untuned.csv: model, inferred_at, latency_ms_median,
        latency_ms_iqr, ...); empty before a sweep."""
        return untuned_table(self.folder)

    def slice_matrix(self) -> pd.DataFrame:
        """tuned_at x inferred_at table of median latency (ms)."""
        return slice_matrix(self.sweep)

    def to_csv(self, folder: str) -> list[str]:
        """Write events, progress, results and sweep tables as CSV files; returns their paths."""
        os.makedirs(folder, exist_ok=True)
        paths = []
        for name, df in (("events", self.events), ("progress", self.progress()), ("results", self.results),
                         ("sweep", self.sweep), ("telemetry", self.telemetry())):
            path = os.path.join(folder, f"{self.id}-{name}.csv")
            df.to_csv(path, index=False)
            paths.append(path)
        return paths

    def summary(self) -> dict[str, Any]:
        started = self._all(RunStarted)
        fin = self._finished_event()
        plan = self.plan
        return {"id": self.id, "model": self.spec.model, "target": plan.target.kind if plan else None,
                "slices": ",".join(map(str, self.spec.slices)), "servers": self.spec.servers,
                "shards": self.spec.shards, "trials": plan.trials if plan else self.spec.trials,
                "status": self.status,
                "started": pd.Timestamp.fromtimestamp(int(started[0].t)) if started else None,  # local, as run ids
                "wall_s": round(fin.t - started[0].t, 1) if fin and started else None}

    def __repr__(self) -> str:
        said = self.headline().text
        return f"<Run {self.id} {self.spec.model} status={self.status}>" + (f"\n{said}" if said else "")


def list_runs(home: str | None = None) -> pd.DataFrame:
    rows = []
    for run_id in store.run_ids(home):
        try:
            rows.append(Run(os.path.join(store.runs_root(home), run_id)).summary())
        except Exception as err:  # noqa: BLE001 - a damaged folder is listed, not fatal
            rows.append({"id": run_id, "status": f"unreadable: {err}"})
    return pd.DataFrame(rows)


def open_run(run: str, home: str | None = None) -> Run:
    return Run(store.find_run_dir(run, home))
