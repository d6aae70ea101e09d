"""Hand-made run folders, in the engine's on-disk format, for UI tests that need no tuning.

`make_run(home, ...)` writes spec.json, plan.json, events.jsonl (the engine's event types), results.json and
optionally sweep.csv under <home>/runs/<id>/ so that `workbench.open_run` reads it like a real run. With
`live_pid` the run looks like it is still running (its 'supervisor' is that process group).
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable

import pandas as pd

from workbench.runs import event_types as ev
from workbench.runs.events import as_dict
from workbench.spec import TuneSpec

SWEEP = pd.DataFrame({
    "model": ["mlp-small"] * 6,
    "tuned_at": [50, 50, 50, 100, 100, 100],
    "inferred_at": [25, 50, 100, 25, 50, 100],
    "latency_ms_median": [1.10, 0.55, 0.36, 1.50, 0.58, 0.30],
    "latency_ms_iqr": [0.02, 0.01, 0.01, 0.03, 0.01, 0.01],
})


TWO_TASKS = ("fused_matmul_add_relu", "fused_matmul1_add1")
FINISH_S = 3.0  # a finished slice's merge -> timed, in the fake log
# each shard's TVM profile (seconds by profiler scope), in the form a real client reports it
PROFILE_S = {"Total": 10.0, "EvoSearch/SampleInitPopulation": 2.0, "EvoSearch/Evolve/Mutation": 3.0,
             "SendToBuilder": 2.5, "JoinRunnerFutures": 1.0, "MeasureCallback/UpdateCostModel": 0.5}


@dataclasses.dataclass(frozen=True)
class FakeTask:
    name: str
    weight: int
    default_us: float | None  # the default schedule's time (None: measuring it failed)
    best_us: float  # best tuned time after the first batch (halved by the second)
    tuned: bool  # inside the budget (else it keeps its default schedule)
    skipped: bool = False

    @property
    def kept(self) -> str:
        return "default" if self.default_us is not None and self.default_us < self.best_us / 2 else "tuned"


def fake_tasks(n: int = 2, tuned: int | None = None) -> list[FakeTask]:
    """`n` tasks, costliest first; `tuned` of them in the budget (default all). With n=2: the classic pair.

    Every fifth task (the 2nd, 7th, ...) has a default schedule faster than its best tuned record; with more
    than 2 tasks the last one of the budget is skipped (its design space fails) and its default is not measured.
    """
    tuned = n if tuned is None else tuned
    out = []
    for i in range(n):
        if n == 2:
            name, weight, best = TWO_TASKS[i], 1, (5.0, 1.0)[i]
        else:
            name = (f"fused_conv2d{i}_add{i}_relu{i}" if i % 2 else
                    f"fused_reshape_transpose_matmul_add_multiply_{i}")
            weight, best = 1 + i % 3, round(4000.0 * 0.85 ** i, 3)
        skipped = n > 2 and i == tuned - 1
        default = None if skipped else round(best * (0.4 if i % 5 == 1 else 1.5), 3)
        out.append(FakeTask(name, weight, default, best, i < tuned and not skipped, skipped))
    return out


def _shard_tasks(tasks: list[FakeTask], shard: int) -> list[FakeTask]:
    return [t for t in tasks if t.tuned][shard::2]


def _events(t0: float, slices: tuple[int, ...], finished: bool, tasks: list[FakeTask],
            finish_requested: bool = False) -> list[ev.Event]:
    out: list[ev.Event] = [
        ev.RunStarted(t=t0, source="supervisor", run_id="x", target={"kind": "cpu"}, pid=1),
        ev.Phase(t=t0, source="supervisor", phase="servers"),
        ev.HardwareFound(t=t0 + 0.1, source="supervisor", target="cpu", device="CPU, 2 cores", gpu_note="no GPU"),
    ]
    t = t0 + 1
    for stage in slices:
        last = stage == slices[-1]
        out.append(ev.Phase(t=t, source="supervisor", phase="tuning", tuned_at=stage))
        out.append(ev.ServerReady(t=t, source="supervisor", server=0, tuned_at=stage, slice_percent=stage,
                                  slice_applied=True, reason="1 of 2 cores", port=1))
        for shard in (0, 1):
            names = [x.name for x in _shard_tasks(tasks, shard)]
            out.append(ev.ShardPlanned(t=t, source="supervisor", shard=shard, tuned_at=stage, tasks=names,
                                       shard_trial_budget=4 * len(names), cost=1.0))
            out.append(ev.ShardStarted(t=t, source=f"shard{shard}", shard=shard, tuned_at=stage, pid=1, tasks=names,
                                       shard_trial_budget=4 * len(names)))
        for task in tasks:
            if task.skipped:
                out.append(ev.TaskSkipped(t=t, source="shard1", shard=1, tuned_at=stage, task=task.name,
                                          reason="no design space: unsupported layout"))
        for shard in (0, 1):  # each shard times the default schedules of its share of all tasks
            share = tasks[shard::2]
            out.append(ev.DefaultsTimed(t=t + 0.5, source=f"shard{shard}", shard=shard, tuned_at=stage,
                                        defaults_us={x.name: x.default_us for x in share},
                                        errors={x.name: "build failed" for x in share if x.default_us is None},
                                        seconds=0.4))
        done = {0: 0, 1: 0}
        for batch in (1, 2):
            t += 1
            for shard in (0, 1):
                mine = _shard_tasks(tasks, shard)
                for tid, task in enumerate(mine):
                    best = task.best_us / batch
                    done[shard] += 2
                    out.append(ev.Batch(t=t, source=f"shard{shard}", shard=shard, tuned_at=stage, task=task.name,
                                        task_id=tid, weight=task.weight, flop=1000, batch_size=2, task_trials=2 * batch,
                                        shard_trial_budget=4 * len(mine), shard_trials=done[shard], latest_us=[best],
                                        best_us=best, best_gflops=1.0, build_errors=0, run_errors=0, est_shard_us=best,
                                        shard_tasks_measured=tid + 1 if batch == 1 else len(mine),
                                        shard_tasks=len(mine)))
            out.append(ev.Telemetry(t=t, source="telemetry", cpu_percent=90.0 + batch, mem_percent=5.0, gpus=[],
                                    gpu_note="CPU target: GPU not sampled"))
        if last and not finished:  # a live run: still tuning its last slice
            if finish_requested:
                out.append(ev.FinishRequested(t=t + 0.5, source="supervisor"))
            break
        t += 1
        for shard in (0, 1):
            out.append(ev.ShardFinished(t=t, source="supervisor", shard=shard, tuned_at=stage, exit_code=0,
                                        shard_trials=done[shard], profile_s=PROFILE_S))
        out.append(ev.Phase(t=t, source="supervisor", phase="merging", tuned_at=stage))
        kept = [x for x in tasks if x.tuned]
        out.append(ev.Merged(t=t, source="supervisor", tuned_at=stage, records=8, workloads=len(kept), path="merged"))
        out.append(ev.Phase(t=t + 0.5, source="supervisor", phase="compiling", tuned_at=stage))
        out.append(ev.Compiled(t=t + 1, source="supervisor", tuned_at=stage, path="tuned.so", seconds=0.5,
                               tasks_tuned=len(kept), tasks_total=len(tasks),
                               untuned_tasks=[x.name for x in tasks if not x.tuned],
                               kept_tuned=[x.name for x in kept if x.kept == "tuned"],
                               kept_default=[x.name for x in kept if x.kept == "default"],
                               choices=[{"task": x.name, "kept": x.kept, "default_us": x.default_us,
                                         "best_us": x.best_us / 2} for x in kept]))
        out.append(ev.Phase(t=t + 1, source="supervisor", phase="verifying", tuned_at=stage))
        out.append(ev.Verified(t=t + 2, source="supervisor", tuned_at=stage, match=True, max_abs_err=0.0,
                               input="seed 0"))
        out.append(ev.Timed(t=t + FINISH_S, source="supervisor", tuned_at=stage, tuned_ms=0.002, untuned_ms=0.003,
                            speedup=1.5, verdict="faster", kept="tuned", records=8))
        t += FINISH_S + 1
    if finished:
        out.append(ev.RunFinished(t=t, source="supervisor", status="done", message=""))
    return out


def _plan(tasks: list[FakeTask], spec: TuneSpec) -> dict:
    tuned = [x for x in tasks if x.tuned or x.skipped]
    budget = {"trials": 4 * len(tuned), "batch": spec.trials_per_batch,
              "trials_per_task": None, "tasks_total": len(tasks), "tasks_tuned": len(tuned),
              "tasks_default": len(tasks) - len(tuned), "selection": "estimated cost (FLOPs x weight)",
              "tuned": [x.name for x in tuned], "default": [x.name for x in tasks if x not in tuned]}
    shards = [{"index": s, "tasks": [x.name for x in _shard_tasks(tasks, s)], "trials": 4 * len(_shard_tasks(tasks, s)),
               "cost": 1.0, "replica": 0} for s in (0, 1)]
    return {"target": {"kind": "cpu", "arch": "", "num_cores": 2}, "budget": budget, "shards": shards,
            "tasks": [{"name": x.name, "weight": x.weight, "flops": 1000.0, "bytes": 0.0,
                       "plan": "tune" if x in tuned else "default"} for x in tasks]}


def make_run(home: str, *, slices: tuple[int, ...] = (50, 100), finished: bool = True, sweep: bool = False,
             live_pid: int | None = None, run_id: str | None = None, tasks: int = 2, tuned: int | None = None,
             finish_requested: bool = False) -> str:
    """Write a fake run folder under `home`; returns its id.

    `tasks` tasks (`tuned` of them in the budget, see `fake_tasks`), split over two shards. A run that is not
    `finished` is still tuning its last slice (with `finish_requested`, Finish was asked for).
    """
    spec = TuneSpec(model="mlp-small", slices=slices, servers=1, shards=2, trials=8, trials_per_batch=2)
    task_list = fake_tasks(tasks, tuned)
    if run_id is None:  # two runs made within one second get distinct ids, as the engine's own do
        stamp, n = time.strftime('%Y%m%d-%H%M%S'), 1
        run_id = f"{stamp}-mlp-small-fake"
        while os.path.exists(os.path.join(home, "runs", run_id)):
            n += 1
            run_id = f"{stamp}-mlp-small-fake{n}"
    d = os.path.join(home, "runs", run_id)
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    with open(os.path.join(d, "spec.json"), "w") as f:
        json.dump(dataclasses.asdict(spec), f)
    with open(os.path.join(d, "plan.json"), "w") as f:
        json.dump(_plan(task_list, spec), f)
    with open(os.path.join(d, "procs.json"), "w") as f:
        json.dump({"supervisor": live_pid, "groups": []} if live_pid else {"supervisor": None, "groups": []}, f)
    t0 = time.time() - 60
    with open(os.path.join(d, "events.jsonl"), "w") as f:
        for e in _events(t0, slices, finished, task_list, finish_requested):
            f.write(json.dumps(as_dict(e)) + "\n")
    if finished:
        n_kept_default = sum(1 for x in task_list if x.tuned and x.kept == "default")
        results = [{"tuned_at": s, "model": "mlp-small", "target": "cpu", "tuned_ms": 0.002, "untuned_ms": 0.003,
                    "speedup": 1.5, "match": True, "max_abs_err": 0.0, "records": 8,
                    "tasks_tuned": sum(1 for x in task_list if x.tuned), "tasks_total": len(task_list),
                    "kept_default": n_kept_default} for s in slices]
        with open(os.path.join(d, "results.json"), "w") as f:
            json.dump(results, f)
    if sweep:
        SWEEP[SWEEP.tuned_at.isin(slices)].to_csv(os.path.join(d, "sweep.csv"), index=False)
    return run_id



def hold_back_slice(home: str, run_id: str, tuned_at: int) -> Callable[[], None]:
    """Cut the run's events.jsonl just before slice `tuned_at` starts tuning; returns what appends the rest."""
    path = os.path.join(home, "runs", run_id, "events.jsonl")
    with open(path) as f:
        lines = f.readlines()
    cut = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "phase"
               and json.loads(line).get("phase") == "tuning" and json.loads(line).get("tuned_at") == tuned_at)
    with open(path, "w") as f:
        f.writelines(lines[:cut])

    def release() -> None:
        with open(path, "a") as f:
            f.writelines(lines[cut:])
    return release
