"""After a slice's tuning: merge the shard databases, keep per task the faster of tuned and default,
compile, verify against the untuned build, time both (a `--tracker` run: on one of its servers), and record the
stage's result."""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable

from workbench import diskspace
from workbench.hardware import TargetSpec
from workbench.noise import NO_TUNED_SCHEDULE, paired_verdict, verdict
from workbench.plan.tasks import Shard
from workbench.results.prebuild import Prebuild, build_references, clear_partial, references
from workbench.runs import memory, store
from workbench.runs.event_types import Compiled, DefaultsTimed, Merged, Timed, Verified
from workbench.runs.events import EventReader, EventWriter
from workbench.servers.slices import SliceHost
from workbench.spec import TuneSpec, parse_tracker


def repair_databases(run_dir: str) -> list[str]:
    """Cut the unfinished last record (a write cut short by a full disk or a stop) off every shard database, then
    the records whose workload a full disk lost; returns the files changed."""
    files = store.RunDir(run_dir).shard_db_files()
    changed = [path for path in files if diskspace.trim_torn_tail(path)]
    for path in files:
        if path.endswith(store.RECORDS_FILE):
            workloads = os.path.join(os.path.dirname(path), store.WORKLOADS_FILE)
            if diskspace.drop_dangling_records(workloads, path) and path not in changed:
                changed.append(path)
    return changed


def defaults_said(run_dir: str, tuned_at: int) -> list[DefaultsTimed]:
    """The stage's `defaults` events, in order."""
    return [e for e in EventReader(store.RunDir(run_dir).events_file).read_new()
            if isinstance(e, DefaultsTimed) and e.tuned_at == tuned_at]


def default_times(said: list[DefaultsTimed], remembered: bool = True) -> dict[str, float | None]:
    """Each task's default-schedule time (us) in `said` (the latest wins); `remembered`: with the times the clients
    took from the tuning memory (`DefaultsTimed.remembered`) instead of timing."""
    out: dict[str, float | None] = {}
    for e in said:
        if remembered or not e.remembered:
            out.update(e.defaults_us)
    return out


def measured_defaults(run_dir: str, tuned_at: int) -> dict[str, float | None]:
    """Each task's default-schedule time (us) as the stage's clients measured or took it (the latest wins)."""
    return default_times(defaults_said(run_dir, tuned_at))


def stage_verdict(tuned: dict, untuned: dict, uses_tuned_records: bool) -> tuple[str, str]:
    """(verdict, kept) of a stage from its timing rows: NO_TUNED_SCHEDULE and 'untuned' when the model uses no tuned
    record; else the paired test's 'faster', 'slower' or 'within noise' on interleaved timings (the IQR rule on
    timings taken apart), and 'untuned' kept only when the tuned build is slower."""
    if not uses_tuned_records:
        return NO_TUNED_SCHEDULE, "untuned"
    if tuned.get("interleaved") and untuned.get("interleaved"):
        said = paired_verdict(tuned["latency_ms"], untuned["latency_ms"]).verdict
    else:
        said = verdict(tuned["latency_ms_median"], tuned["latency_ms_iqr"], untuned["latency_ms_median"],
                       untuned["latency_ms_iqr"])
    return said, "untuned" if said == "slower" else "tuned"


def versus_baseline(model: dict, timed: dict | None, baseline: dict | None) -> dict:
    """The stage's model (the build it kept) against the baseline: `baseline` (its label), `baseline_ms` and
    `baseline_iqr_ms`, `vs_baseline` (the baseline's time over the model's: above 1, the model is faster) and
    `vs_baseline_verdict` by the paired test ('faster', 'slower', 'within noise'), and `baseline_note` (what to know
    of it: a twin's outputs are not compared; at fp16, the other fp16 way's time; on a CPU, the other thread count's;
    that it slowed during its rounds); or `baseline_note` saying why there is none."""
    if not baseline:
        return {"baseline": None, "baseline_note": "no baseline chosen for this model (the plan says why)"}
    if timed is None or "error" in timed or "latency_ms" not in timed:
        why = (timed or {}).get("error", "it was not timed")
        return {"baseline": baseline["label"], "baseline_ms": None, "baseline_note": why}
    said = paired_verdict(model["latency_ms"], timed["latency_ms"]).verdict if model.get("interleaved") else None
    return {"baseline": timed.get("label", baseline["label"]), "baseline_ms": timed["latency_ms_median"],
            "baseline_iqr_ms": timed["latency_ms_iqr"], "vs_baseline": timed["latency_ms_median"] /
            model["latency_ms_median"], "vs_baseline_verdict": said or "within noise",
            "baseline_match": timed.get("match"),
            "baseline_note": "; ".join(n for n in (timed.get("match_note"), timed.get("way_note")) if n)}


def finish_stage(run_dir: str, spec: TuneSpec, target: TargetSpec, tuned_at: int, shards: list[Shard],
                 events: EventWriter, phase, host: SliceHost | None, env: dict[str, str],
                 trials_asked: int, early: bool = False, baseline: dict | None = None, timer=None,
                 prebuild: Prebuild | None = None, should_stop: Callable[[], bool] = lambda: False) -> dict:
    """Merge, floor, compile, verify and time one stage; returns its results row (also in results.json).

    `phase(name)` announces each step (and raises when the run was asked to stop); `timer`: the stage's timing
    worker, started ahead (`sweep.start_timer`); `prebuild`: the worker building the references ahead
    (`prebuild.start_prebuild`), waited for until `should_stop()`."""
    from workbench.models.load import in_precision, load_model
    from workbench.plan import task_file
    from workbench.plan.tasks import extract_tasks
    from workbench.results.compile import compile_with_database, floored_database, merge_databases
    from workbench.results.sweep import infer_at
    from workbench.tuning.intrinsics import load_family, pass_config

    folder = store.RunDir(run_dir)
    # A record that tensorizes (an fp16 matmul on tensor cores) names the intrinsics its trace applies, and TVM
    # replays every trace as it reads a database: they must be registered here too, as in the clients that found it.
    load_family(target.kind, store.cache_dir(run_dir))
    phase("merging", tuned_at=tuned_at)
    merged = merge_databases([folder.shard_db(tuned_at, s.index) for s in shards], folder.merged_db(tuned_at))
    events.emit(Merged(tuned_at=tuned_at, records=merged.records, workloads=merged.workloads, path=merged.path))
    phase("compiling", tuned_at=tuned_at)
    as_given = load_model(spec.model, spec.input_shape)
    model = in_precision(as_given, spec.precision)
    tvm_target = target.build()
    t0 = time.time()
    steps: dict[str, float] = {}
    tasks, _ = task_file.load(run_dir, tvm_target)  # the launcher's extraction; a run folder without it extracts
    how = "tasks_loaded" if tasks is not None else "tasks_extracted"
    tasks = tasks if tasks is not None else extract_tasks(model.mod, tvm_target)
    steps[how] = round(time.time() - t0, 2)
    remembered = {} if spec.fresh else from_memory(run_dir, target, tuned_at, merged.path, tasks, tvm_target)
    timings = defaults_said(run_dir, tuned_at)
    defaults = default_times(timings)  # the floor: the memory's where it held them, as the plan did
    choices = floored_database(merged.path, folder.best_db(tuned_at), tasks, tvm_target, defaults)
    ahead_note = ""
    if prebuild is not None:  # it alone writes the references while it runs: wait, then build what it left
        t1 = time.time()
        said = prebuild.wait(should_stop)
        if said is None:
            phase("compiling", tuned_at=tuned_at)  # raises: the run was asked to stop
        ahead_note = said or ""
        steps["waited_for_references"] = round(time.time() - t1, 2)
    clear_partial(folder, spec)  # no writer runs now: a temporary file is one killed mid-write
    ready = sorted(name for name, path in references(folder, spec).items() if os.path.exists(path))
    steps |= build_references(run_dir, spec, target, as_given, model)
    untuned_path = folder.untuned_lib
    config = pass_config(target.kind, spec.precision)  # as the clients built the candidates and defaults
    reference, tolerance = untuned_path, None
    if spec.precision != "fp32":  # checked against the float32 model, at the tolerances of its precision
        reference, tolerance = folder.float32_lib, "float16"
    kept_tuned = [c.task for c in choices if c.kept == "tuned"]
    tuned = folder.tuned_lib(tuned_at)
    if kept_tuned:
        t1 = time.time()
        compile_with_database(model.mod, tvm_target, folder.best_db(tuned_at), tuned, tir_config=config)
        steps["tuned"] = round(time.time() - t1, 2)
    else:  # no tuned record beat its task's default: the stage's model is the untuned build, byte for byte
        store.write_atomic(tuned, lambda tmp: shutil.copyfile(untuned_path, tmp))
    kept_default = [c.task for c in choices if c.kept == "default" and c.best_us is not None]
    events.emit(Compiled(tuned_at=tuned_at, path=tuned, seconds=round(time.time() - t0, 2),
                         tasks_tuned=sum(c.best_us is not None for c in choices), tasks_total=len(choices),
                         untuned_tasks=[c.task for c in choices if c.best_us is None], kept_tuned=kept_tuned,
                         kept_default=kept_default, choices=[c.to_dict() for c in choices], from_memory=remembered,
                         steps_s=steps, references_ready=ready, references_note=ahead_note))
    phase("verifying", tuned_at=tuned_at)
    libs = {"tuned": tuned, "untuned": untuned_path} if kept_tuned else {"untuned": untuned_path}
    rows = infer_at(run_dir, tuned_at, libs, model, target, host, env, reference=reference,
                    tracker=parse_tracker(spec.tracker) if spec.tracker else None, interleave=True,
                    baseline=baseline, tolerance=tolerance, timer=timer)
    by = {r["name"]: r for r in rows}
    u = by["untuned"]
    t = by.get("tuned", u)  # no tuned schedule: one binary, timed once
    b = by.get("baseline")
    checked_against = "float32 build at float16 tolerances" if tolerance else "untuned build"
    events.emit(Verified(tuned_at=tuned_at, against=checked_against, match=t.get("match"),
                         max_abs_err=t.get("max_abs_err"), rel_err=t.get("rel_err"), finite=t.get("finite"),
                         input=t.get("input", ""),
                         output_range=t.get("output_range", []), match_note=t.get("match_note", "")))
    said, kept = stage_verdict(t, u, bool(kept_tuned))
    busy = max((r["busy_cores"] for r in (t, u, b or {}) if r.get("busy_cores") is not None), default=None)
    against = versus_baseline(u if kept == "untuned" else t, b, baseline)
    if said == "slower":  # never ship a model slower than the default build: the stage keeps the untuned one
        store.write_atomic(tuned, lambda tmp: shutil.copyfile(untuned_path, tmp))
    events.emit(Timed(tuned_at=tuned_at, tuned_ms=t["latency_ms_median"], tuned_iqr_ms=t["latency_ms_iqr"],
                      untuned_ms=u["latency_ms_median"], untuned_iqr_ms=u["latency_ms_iqr"],
                      speedup=u["latency_ms_median"] / t["latency_ms_median"], verdict=said, kept=kept,
                      sm_count=t.get("sm_count"), records=merged.records, tuned_repeats=t.get("repeats"),
                      untuned_repeats=u.get("repeats"), busy_cores=busy, server=t.get("server") or "",
                      **against))
    # the memory's records a shard started from are in the merged database, but they are not this run's trials
    seeded = sum(sum(memory.seeded(folder.shard_db(tuned_at, s.index)).values()) for s in shards)
    row = {"tuned_at": tuned_at, "model": spec.model, "target": target.kind,
           "tuned_ms": t["latency_ms_median"], "tuned_iqr_ms": t["latency_ms_iqr"],
           "untuned_ms": u["latency_ms_median"], "untuned_iqr_ms": u["latency_ms_iqr"],
           "speedup": u["latency_ms_median"] / t["latency_ms_median"], "verdict": said, "kept": kept,
           "match": t.get("match"), "match_note": t.get("match_note", ""), "max_abs_err": t.get("max_abs_err"),
           "records": merged.records, "busy_cores": busy, "timed_on": t.get("server") or "this host",
           "trials_measured": merged.records - seeded, "trials_asked": trials_asked, "finished_early": early,
           "tasks_tuned": sum(c.best_us is not None for c in choices), "kept_default": len(kept_default),
           "tasks_total": len(choices), **against,
           "library": tuned}
    timed_here = default_times(timings, remembered=False)  # the memory learns only new timings
    default_us = {memory.workload_hash(t.dispatched[0]): us for t in tasks
                  if (us := timed_here.get(t.task_name)) is not None}
    row.update(remember_stage(run_dir, spec, target, tuned_at, merged.path, model.input_shape, default_us))
    results = [r for r in folder.read_results() if r.get("tuned_at") != tuned_at]
    folder.write(store.RESULTS_FILE, results + [row])
    return row


def from_memory(run_dir: str, target: TargetSpec, tuned_at: int, merged_dir: str, tasks: list,
                tvm_target) -> dict[str, int]:
    """Give each task the stage measured no record of (one outside the budget, or one whose every trial failed) the
    tuning memory's best record of it, in the stage's merged database: a task the memory knows runs its best known
    schedule whether or not the budget reached it, and the floor still keeps its default where that is faster
    (`floored_database`, on this run's timing of the default). {task: records added}; a memory that cannot be read
    adds nothing."""
    from types import SimpleNamespace

    from workbench.results.compile import load_database

    library = memory.library(store.home_of(run_dir), memory.key(target, tuned_at))
    if memory.unreadable(library):
        return {}
    db = load_database(merged_dir)
    missing = [SimpleNamespace(mod=t.dispatched[0], task_name=t.task_name, target=tvm_target) for t in tasks
               if db.query_tuning_record(t.dispatched[0], tvm_target, workload_name="main") is None]  # as the floor
    try:
        return memory.seed(library, db, missing, top_k=1, evolvable_only=False) if missing else {}
    except Exception:  # noqa: BLE001 - a library being written or another TVM's: the stage is made without it
        return {}


def remember_stage(run_dir: str, spec: TuneSpec, target: TargetSpec, tuned_at: int, db_path: str,
                   input_shape, default_us: dict[str, float]) -> dict:
    """Add the stage's records and its tasks' default times (`default_us`: {workload hash: µs}) to the home's tuning
    memory (`runs.memory`); the results row's memory fields. A memory that cannot be written costs the run nothing
    but the note."""
    source = {"run": os.path.basename(run_dir), "model": os.path.basename(spec.model),
              "input_shape": list(input_shape), "precision": spec.precision, "tuned_at": tuned_at,
              "default_us": default_us}
    try:
        added, note = memory.remember(memory.library(store.home_of(run_dir), memory.key(target, tuned_at)), db_path,
                                      source)
    except Exception as err:  # noqa: BLE001 - a full disk, say: the stage's model is made regardless
        return {"memory_added": 0, "memory_note": f"not remembered: {type(err).__name__}: {err}"[:300]}
    return {"memory_added": added, "memory_note": note}
