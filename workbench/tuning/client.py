"""`python -m workbench.tuning.client SHARD_JSON`: tune one shard of a model and append its events.

The shard file (written by the supervisor) holds the spec, the target, the task names, the trial
budget, the tracker and the work folder. Tasks whose design space cannot be generated are skipped
and reported (one bad task must never kill a run); the others are tuned. A task whose search fails later stops
with what it measured, reported too (`search_strategy.guarded`); the others go on.

A switch for comparing search configurations, not a user option: with `WORKBENCH_BENCH_SAME_DRAWS=1` in its
environment a client searches on one thread and seeds numpy's global RNG (which the untrained XGB scores with) with
the job's seed just before tuning, so that a seeded tune proposes the same schedules whenever it is handed the same
measurements. Searching on one thread is slower; nothing else changes.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field

from workbench.errors import last_line
from workbench.hardware import TargetSpec
from workbench.options import EngineOptions, strategy_for
from workbench.runs import store
from workbench.runs.event_types import (
    DefaultsTimed,
    Error,
    IntrinsicsLoaded,
    ShardFinished,
    ShardStarted,
    TaskSearchFailed,
    TaskSkipped,
)
from workbench.runs.events import EventWriter
from workbench.spec import TuneSpec

PARENT_PID_ENV = "WB_CLIENT_PARENT_PID"  # set by a cluster task: the client dies with the worker that started it


SAME_DRAWS_ENV = "WORKBENCH_BENCH_SAME_DRAWS"


def same_draws() -> bool:
    """Whether the bench knob of the module docstring is set in this process's environment."""
    return os.environ.get(SAME_DRAWS_ENV) == "1"


def seed_draws(seed: int | None) -> None:
    """What the knob does just before tuning, beside the one search thread: seed numpy's global RNG."""
    import numpy as np

    np.random.seed(0 if seed is None else seed)


@dataclass(frozen=True)
class ShardJob:
    run_dir: str
    work_dir: str
    events_path: str
    shard: int
    tuned_at: int
    tasks: tuple[str, ...]
    trials: int
    spec: TuneSpec
    target: TargetSpec
    tracker: tuple[str, int, str]
    runner_workers: int
    builder_workers: int
    num_threads: int
    options: EngineOptions = EngineOptions()  # the plan's, resolved for the target (resolved again here if not)
    prewarm: bool = False  # start builder workers during client start-up (pays off with spare cores)
    replica: int = 0  # > 0: an extra search of tasks another shard also tunes, seeded differently
    measure: tuple[str, ...] = ()  # tasks left on their default schedule: only their defaults are timed here
    # The first stage of a run planned by estimate: time the defaults, then tune what the plan made again by the
    # measured times gives this shard (`await_plan`), not `tasks`/`trials` as given here.
    await_plan: bool = False
    memory: str = ""  # the tuning memory's library for this target and slice ("": none, or the run is --fresh)
    # The default times (µs by task) the memory holds for this shard's tasks (`Plan.known_defaults`): not timed again.
    known_defaults: dict[str, float] = field(default_factory=dict)

    @property
    def seed(self) -> int | None:
        return None if self.spec.seed is None else self.spec.seed + self.replica

    def to_json(self) -> str:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["spec"] = json.loads(self.spec.to_json())
        d["target"] = self.target.to_dict()
        d["options"] = self.options.to_dict()
        d["tasks"] = list(self.tasks)
        d["measure"] = list(self.measure)
        d["tracker"] = list(self.tracker)
        return json.dumps(d, indent=1)

    @classmethod
    def from_json(cls, text: str) -> ShardJob:
        d = json.loads(text)
        d["spec"] = TuneSpec.from_dict(d["spec"])
        d["target"] = TargetSpec.from_dict(d["target"])
        d["options"] = EngineOptions(**d["options"])
        d["tasks"] = tuple(d["tasks"])
        d["measure"] = tuple(d.get("measure", ()))
        d["tracker"] = (d["tracker"][0], int(d["tracker"][1]), d["tracker"][2])
        return cls(**d)


def from_memory(job: ShardJob, database, contexts, done: dict[str, int]) -> tuple[dict[str, int], str]:
    """The tuning memory's best records of the shard's tasks, put in its database when it starts fresh (kept in
    memory_seeded.json, so that a resumed shard does not count them as its trials); {task: records} and, where the
    memory could not be read, why."""
    from workbench.runs import memory

    path = os.path.join(job.work_dir, memory.SEEDED_FILE)
    if os.path.exists(path) or not job.memory or sum(done.values()):
        return memory.seeded(job.work_dir), ""
    try:
        seeded, note = memory.seed(job.memory, database, contexts), ""
    except Exception as err:  # noqa: BLE001 - a library being written, damaged or another TVM's: tune without it
        seeded, note = {}, f"the tuning memory could not be read ({last_line(err, 200)}): tuning from nothing"
    store.write_json(path, seeded)
    return seeded, note


def related_sources(job: ShardJob) -> tuple[list[str], list[str]]:
    """Where the first batch of a shard's new tasks may come from (`tuning.transfer`): databases holding the same
    workloads at other slices (the run's earlier stages, merged; the memory's libraries of this target at other
    slices), and those holding similar workloads at this slice (the memory's library). --fresh: the earlier stages
    only."""
    from workbench.runs import memory

    folder = store.RunDir(job.run_dir)
    earlier = [folder.merged_db(s) for s in job.spec.slices
               if s != job.tuned_at and os.path.exists(os.path.join(folder.merged_db(s), store.RECORDS_FILE))]
    if not job.memory:
        return earlier, []
    return earlier + memory.other_slices(job.memory), [job.memory]


def previous_progress(database, contexts) -> tuple[dict[str, int], dict[str, float]]:
    """Trials already in the shard database and the best latency per task (for resume)."""
    trials, best = {}, {}
    for ctx in contexts:
        if not database.has_workload(ctx.mod):
            continue
        wkl = database.commit_workload(ctx.mod)
        records = database.get_top_k(wkl, 100000)
        trials[ctx.task_name] = len(records)
        costs = [sum(float(s) for s in r.run_secs) / len(r.run_secs) for r in records if r.run_secs]
        if costs:
            best[ctx.task_name] = min(costs)
    return trials, best


PLAN_WAIT_S = 1800.0  # the slowest shard's defaults on a CPU's naive loop nests can take minutes


def await_plan(job: ShardJob, timeout: float = PLAN_WAIT_S) -> ShardJob | None:
    """The job as the plan made again by measured time gives it (see `ShardJob.await_plan`), once the supervisor
    has written it; None when the supervisor is gone (this client's parent changed) or the plan names no such
    shard. TimeoutError after `timeout` seconds."""
    import dataclasses

    folder, parent = store.RunDir(job.run_dir), os.getppid()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        plan = folder.read_plan()
        if plan is not None and plan.timed:
            shard = next((s for s in plan.shards if s.index == job.shard), None)
            return None if shard is None else dataclasses.replace(
                job, tasks=shard.tasks, trials=shard.trials, measure=shard.measure, replica=shard.replica,
                await_plan=False)
        if os.getppid() != parent and not os.environ.get(PARENT_PID_ENV):
            return None
        time.sleep(0.25)
    raise TimeoutError(f"no plan by measured time within {timeout:.0f} s")


def wait_for_servers(job: ShardJob, timeout: float = 300.0) -> None:
    """Block until the tracker lists the job's servers (a key with no server would hang tuning)."""
    from workbench.servers.pool import count_servers, tracker_summary

    host, port, key = job.tracker
    deadline = time.monotonic() + timeout
    have = 0
    while time.monotonic() < deadline:
        try:
            have = count_servers(tracker_summary(host, port), key)
        except Exception:  # noqa: BLE001 - the tracker may still be starting
            have = 0
        if have >= job.runner_workers:
            return
        time.sleep(0.5)
    raise TimeoutError(f"only {have} of {job.runner_workers} RPC servers registered under key {key!r} at "
                       f"{host}:{port} within {timeout:.0f} s")


class StartupClock:
    """Seconds of the client's start-up by phase, from the process's own start (interpreter included)."""

    def __init__(self) -> None:
        import psutil

        self.last = psutil.Process().create_time()
        self.marks: dict[str, float] = {}

    def mark(self, phase: str) -> None:
        now = time.time()
        self.marks[phase] = round(now - self.last, 2)
        self.last = now

    def phases(self) -> dict[str, float]:
        return {**self.marks, "total": round(sum(self.marks.values()), 2)}


def _all_found(job: ShardJob, by_name: dict, events: EventWriter) -> bool:
    """Whether every task the job names is one of the model's (else an error event says which are not)."""
    missing = [n for n in (*job.tasks, *job.measure) if n not in by_name]
    if missing:
        events.emit(Error(where=f"shard {job.shard}", message=f"tasks not found in the model: {missing}"))
    return not missing


def run(job: ShardJob) -> int:
    startup = StartupClock()
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    said = logging.getLogger("workbench.tuning")  # what our search plug-ins say goes to this client's log
    said.setLevel(logging.INFO)
    said.addHandler(logging.StreamHandler())
    from tvm.s_tir import meta_schedule as ms

    from workbench.models.load import load_model
    from workbench.plan import task_file
    from workbench.plan.budget import XGB_WARMUP, batches_by_worth
    from workbench.plan.tasks import extract_tasks
    from workbench.runs import memory
    from workbench.tuning import builder as builders
    from workbench.tuning import cost_model as cost_models
    from workbench.tuning import runner as runners
    from workbench.tuning import search_strategy as strategies
    from workbench.tuning import transfer
    from workbench.tuning.default_schedules import defaults_event, time_defaults
    from workbench.tuning.intrinsics import pass_config
    from workbench.tuning.measure_callback.progress import ProgressCallback
    from workbench.tuning.search_strategy.budgeted import ShardBudget
    from workbench.tuning.task_scheduler.streaming import StreamingScheduler, starting_points

    startup.mark("import")
    events = EventWriter(job.events_path, f"shard-{job.shard}@{job.tuned_at}")
    os.makedirs(job.work_dir, exist_ok=True)
    options = job.options.resolved(job.target.kind)
    builder = builders.create(options.builder, job.builder_workers, timeout_sec=max(30, job.spec.measure_timeout_s),
                              config=pass_config(job.target.kind, job.spec.precision))
    if hasattr(builder, "prewarm") and job.prewarm:
        builder.prewarm()
    startup.mark("builder")
    try:
        target = job.target.build()
        tasks, tasks_note = task_file.load(job.run_dir, target)
        if tasks is None:
            tasks = extract_tasks(load_model(job.spec.model, job.spec.input_shape, job.spec.precision).mod, target)
        by_name = {t.task_name: t for t in tasks}
        startup.mark("tasks")
        if not _all_found(job, by_name, events):
            return 3
        if options.builder != "local":  # the stock configuration keeps TVM's own (full) import
            from workbench.tuning.intrinsics import load_family

            report = load_family(job.target.kind, store.cache_dir(job.run_dir))
            events.emit(IntrinsicsLoaded(shard=job.shard, tuned_at=job.tuned_at, loaded_from=report.pop("source"),
                                         **report))
            startup.mark("intrinsics")
        runner = runners.create(options.runner, job.target.kind, tracker=job.tracker, servers=job.runner_workers,
                                batch=job.spec.trials_per_batch, timeout_s=job.spec.measure_timeout_s,
                                wait_for_servers=None if options.runner == "local"
                                else lambda: wait_for_servers(job))
        defaults_s: dict[str, float] = {}  # each task's default schedule's time, where this client timed it
        if job.replica == 0:  # replicas of a task share its default: the first one times it
            own = [by_name[n] for n in job.tasks] + [by_name[n] for n in job.measure]
            known = dict(job.known_defaults)  # of `own` only: stage_plan gives a shard its own tasks' times
            left = len(own) - len(known)
            if known:  # timed by an earlier run of this TVM here: said first, not timed again
                defaults_s.update((task, us * 1e-6) for task, us in known.items())
                events.emit(DefaultsTimed(shard=job.shard, tuned_at=job.tuned_at, left=left, defaults_us=dict(known),
                                          remembered=True))
            own = [t for t in own if t.task_name not in known]
            for chunk in time_defaults(own, target, builder, runner, job.spec.trials_per_batch):
                left -= len(chunk.times)
                defaults_s.update((d.task, d.us * 1e-6) for d in chunk.times if d.us is not None)
                events.emit(DefaultsTimed(shard=job.shard, tuned_at=job.tuned_at, left=left, **defaults_event(chunk)))
            startup.mark("defaults")
        if job.await_plan:
            planned = await_plan(job)
            if planned is None:
                return 3
            job = planned
            startup.mark("plan")
            if not _all_found(job, by_name, events):
                return 3
        budget = ShardBudget()  # the shard's trials, held exactly across its tasks once `remaining` is known
        failed: dict[str, str] = {}

        def failed_search(task: str, why: str) -> None:
            failed[task] = why
            events.emit(TaskSearchFailed(shard=job.shard, tuned_at=job.tuned_at, task=task, reason=why))
        related = transfer.related_traces([by_name[n] for n in job.tasks], *related_sources(job),
                                          per_task=transfer.OFFERED_PER_TASK * job.spec.trials_per_batch)
        if related:
            startup.mark("related")
        contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
            [by_name[n] for n in job.tasks], work_dir=job.work_dir, space="post-order-apply",
            strategy=strategies.create(strategy_for(job.spec.strategy, job.target.kind, job.spec.precision),
                                       options.first_round,
                                       {memory.workload_hash(by_name[t].dispatched[0]): traces
                                        for t, traces in related.items()}, budget, failed_search),
            num_threads=1 if same_draws() else job.num_threads, seed=job.seed)
        good_ctx, good_w = [], []
        for ctx, w in zip(contexts, weights):
            try:
                ctx.generate_design_space()
            except Exception as err:  # noqa: BLE001 - e.g. ScheduleError in a schedule rule
                events.emit(TaskSkipped(shard=job.shard, tuned_at=job.tuned_at, task=ctx.task_name,
                                        reason=last_line(err)))
                continue
            good_ctx.append(ctx)
            good_w.append(w)
        if not good_ctx:
            events.emit(ShardFinished(shard=job.shard, tuned_at=job.tuned_at, shard_trials=0, exit_code=0,
                                      note="no tunable task in this shard"))
            return 0
        database = ms.database.JSONDatabase(work_dir=job.work_dir)
        done, best = previous_progress(database, good_ctx)
        seeded, memory_note = from_memory(job, database, good_ctx, done)
        if seeded and not sum(done.values()):  # just seeded: the known records are the tasks' bests so far
            done, best = previous_progress(database, good_ctx)
        done = {task: max(0, n - seeded.get(task, 0)) for task, n in done.items()}  # trials are this run's only
        remaining = max(0, job.trials - sum(done.values()))
        budget.left = remaining
        progress = ProgressCallback(events.emit, job.shard, job.tuned_at, job.trials, done, best, builder,
                                    getattr(runner, "inner", runner))
        progress.weights.update({c.task_name: float(w) for c, w in zip(good_ctx, good_w)})
        startup.mark("design_spaces")
        xgb = job.spec.cost_model == "xgb"
        cost_model = cost_models.create(job.spec.cost_model, job.num_threads)
        siblings = [d for d in store.RunDir(job.run_dir).shard_dbs(job.tuned_at)
                    if os.path.abspath(d) != os.path.abspath(job.work_dir)]
        siblings += [job.memory] if job.memory and not memory_note else []  # the memory's records of this target
        learned, from_siblings = cost_models.warm(cost_model, database, good_ctx, siblings) if xgb and remaining \
            else (0, 0)
        if learned or from_siblings:
            startup.mark("cost_model")
        events.emit(ShardStarted(shard=job.shard, tuned_at=job.tuned_at, pid=os.getpid(), seed=job.seed,
                                 replica=job.replica, startup_s=startup.phases(), tasks=[c.task_name for c in good_ctx],
                                 shard_trial_budget=job.trials, shard_trials_resumed=sum(done.values()),
                                 cost_model_records=learned, cost_model_sibling_records=from_siblings,
                                 memory_records=seeded, memory_note=memory_note,
                                 tasks_extracted=tasks_note, related_traces={t: len(v) for t, v in related.items()},
                                 same_draws=same_draws()))
        if remaining == 0:
            events.emit(ShardFinished(shard=job.shard, tuned_at=job.tuned_at, shard_trials=sum(done.values()),
                                      exit_code=0, note="budget already spent (resumed)"))
            return 0
        callbacks = list(ms.measure_callback.MeasureCallback.create("default")) + [progress]
        seed = -1 if job.seed is None else job.seed
        start = starting_points(best, defaults_s, batches_by_worth(job.target.kind))
        if same_draws():
            seed_draws(job.seed)
        progress.last = time.time()  # a first batch's search_s starts here
        with ms.Profiler() as profiler:
            ms.tune_tasks(tasks=good_ctx, task_weights=good_w, work_dir=job.work_dir, max_trials_global=remaining,
                          max_trials_per_task=job.spec.trials_per_task,
                          num_trials_per_iter=job.spec.trials_per_batch, builder=builder, runner=runner,
                          database=database, cost_model=cost_model, measure_callbacks=callbacks,
                          task_scheduler=StreamingScheduler(seed=seed, prior=start, done=done,
                                                            cap=job.spec.trials_per_task,
                                                            warmup=XGB_WARMUP if xgb else 0,
                                                            learned=learned + from_siblings))
        if failed and set(failed) >= {c.task_name for c in good_ctx}:  # not one task's fault: the shard failed
            raise RuntimeError(f"the search of every task of this shard failed; the last: {list(failed.values())[-1]}")
    finally:
        if hasattr(builder, "shutdown"):
            builder.shutdown()
    phases = {k: round(float(v), 3) for k, v in profiler.get().items()}
    events.emit(ShardFinished(shard=job.shard, tuned_at=job.tuned_at, shard_trials=sum(progress.trials.values()),
                              exit_code=0, profile_s=phases))
    return 0


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        sys.exit("usage: python -m workbench.tuning.client SHARD_JSON")
    if os.environ.get(PARENT_PID_ENV):  # a Dask worker's task started us: die with it, never outlive it
        from workbench.procs import die_with_parent

        die_with_parent(int(os.environ[PARENT_PID_ENV]))
    with open(argv[0]) as f:
        job = ShardJob.from_json(f.read())
    sys.exit(run(job))


if __name__ == "__main__":
    main()
