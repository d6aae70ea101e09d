"""The friendly front: check a spec, plan its shards, start a detached supervisor, return a Run.

Everything that can be wrong with the input is found here, before any process starts.
"""
from __future__ import annotations

import dataclasses
import os
from . import diskspace, store
from .client import DEFAULT_BUILDER, DEFAULT_RUNNER
from .hardware import Hardware, detect, resolve_target, target_spec
from .models import check_model, load_model
from .placement import choose_gpus
from .run import Run
from .budget import plan_budget
from .control import start_supervisor
from .finisher import repair_databases
from .shards import extract_tasks, plan_shards, task_info
from .spec import SpecError, TuneSpec

RUNNERS = ("rpc-batch", "rpc", "local")  # rpc-batch (the default): one RPC session per server per batch
BUILDERS = ("persistent", "persistent-cut", "local")  # persistent-cut: no waiting for stragglers
SESSIONS = ("persistent", "spawn")
# A task's first batch: drawn at random, or TVM's evolution (stock). "auto" evolves on CUDA, where the
# H200 runs found random first batches markedly slower (bench/results/H200.md, session 4), and draws at
# random on CPUs, where quality matched and the draw is 2x faster (bench/results/cpu_first_round_ab.json).
FIRST_ROUNDS = ("auto", "random", "evolutionary")


def plan_run(spec: TuneSpec, hw: Hardware | None = None, runner: str = DEFAULT_RUNNER, builder: str = DEFAULT_BUILDER,
             sessions: str = "persistent", first_round: str = "auto") -> dict:
    """Resolve the target, extract the model's tasks and split them into shards (raises SpecError)."""
    if runner not in RUNNERS:
        raise SpecError("runner", f"must be one of {', '.join(RUNNERS)}, got {runner!r}")
    if builder not in BUILDERS:
        raise SpecError("builder", f"must be one of {', '.join(BUILDERS)}, got {builder!r}")
    if sessions not in SESSIONS:
        raise SpecError("sessions", f"must be one of {', '.join(SESSIONS)}, got {sessions!r}")
    if first_round not in FIRST_ROUNDS:
        raise SpecError("first_round", f"must be one of {', '.join(FIRST_ROUNDS)}, got {first_round!r}")
    if runner == "local" and (spec.servers != 1 or spec.tracker):
        raise SpecError("runner", "the local runner measures in the client itself: use servers=1 and no tracker")
    hw = hw or detect()
    check_model(spec.model, spec.input_shape)
    kind = resolve_target(spec.target, hw) if not spec.tracker or spec.target != "auto" else hw.default_target
    tspec = target_spec(kind, hw)
    if kind == "cuda" and not spec.tracker:
        gpus = list(choose_gpus(spec.gpus, len(hw.gpus)))
    elif spec.gpus is not None:
        raise SpecError("gpus", "GPU indices apply to --target cuda with local servers only")
    else:
        gpus = []
    model = load_model(spec.model, spec.input_shape)
    tasks = [task_info(t) for t in extract_tasks(model.mod, tspec.build())]
    if not tasks:
        raise SpecError("model", f"{spec.model} has no tunable operator for {kind}")
    budget = plan_budget(tasks, spec)
    by_name = {t.name: t for t in tasks}
    shards = plan_shards([by_name[n] for n in budget.tuned], spec.shards, budget.trials, per_task=budget.batch,
                         defaults=[by_name[n] for n in budget.default])
    if first_round == "auto":
        first_round = "evolutionary" if kind == "cuda" else "random"
    tuned = set(budget.tuned)
    rows = [{**dataclasses.asdict(t), "cost": t.cost, "plan": "tune" if t.name in tuned else "default"} for t in tasks]
    return {"target": tspec.to_dict(), "tasks": rows, "budget": budget.to_dict(),
            "shards": [s.to_dict() for s in shards], "runner": runner, "builder": builder,
            "sessions": sessions, "first_round": first_round, "gpus": gpus, "input_shape": list(model.input_shape), "dtype": model.dtype}


def tune(spec: TuneSpec | None = None, *, home: str | None = None, runner: str = DEFAULT_RUNNER,
         builder: str = DEFAULT_BUILDER, sessions: str = "persistent", first_round: str = "auto", **fields) -> Run:
    """Validate and plan `spec` (or TuneSpec(**fields)), start its run in the background, return the Run."""
    spec = spec.replace(**fields) if spec is not None and fields else spec or TuneSpec(**fields)
    plan = plan_run(spec, runner=runner, builder=builder, sessions=sessions, first_round=first_round)
    run_id, run_dir = store.new_run_dir(spec, home)
    store.write_json(os.path.join(run_dir, store.SPEC_FILE), dataclasses.asdict(spec))
    store.write_json(os.path.join(run_dir, store.PLAN_FILE), plan)
    start_supervisor(run_dir)
    return Run(run_dir)


def resume(run: str | Run, home: str | None = None) -> Run:
    """Continue a stopped, partial or crashed run from its shard databases; a done run is returned as it is."""
    r = run if isinstance(run, Run) else Run(store.find_run_dir(run, home))
    if r.status == "done":
        return r  # nothing left to tune: `resume` of a finished run changes nothing
    if r.status == "running":
        raise SpecError("run", f"run {r.id} is still running")
    diskspace.ensure_free_space(r.dir)
    repair_databases(r.dir)
    start_supervisor(r.dir, resume=True)
    return Run(r.dir)
