"""The friendly front: check a spec, plan its shards, start a detached supervisor, return a Run.

Everything that can be wrong with the input is found here, before any process starts.
"""
from __future__ import annotations

import dataclasses
import importlib.util

from workbench import diskspace
from workbench.hardware import (
    Hardware,
    check_sweep_here,
    detect,
    generic_cpu_note,
    host_cpu,
    resolve_target,
    target_spec,
)
from workbench.models.load import check_model, load_model
from workbench.models.torch_module import is_torch_model, save_torch_model
from workbench.options import EngineOptions, strategy_note
from workbench.plan import task_file
from workbench.plan.budget import cost_model_note, plan_budget
from workbench.plan.plan import Plan
from workbench.plan.replan import by_measured, rows, shard_plan, shards_for
from workbench.plan.tasks import extract_tasks, raised_shards, task_info
from workbench.results import baseline
from workbench.results.finish import repair_databases
from workbench.runs import memory, store
from workbench.runs.control import start_supervisor
from workbench.runs.run import Run
from workbench.servers.placement import choose_gpus
from workbench.servers.pool import answering_tracker, tracker_cuda_arch, tracker_servers
from workbench.servers.slices import slice_notes
from workbench.spec import SpecError, TuneSpec, parse_tracker, workbench_home


def ask_tracker(spec: TuneSpec, hw: Hardware) -> dict | None:
    """What a `--tracker` run's servers have (`tracker_servers`; None for other runs). Only a run that must compile
    for their GPU fails when they cannot be asked; any other gets {} (its stage then keeps the slice as given)."""
    if not spec.tracker:
        return None
    needs_arch = spec.target == "cuda" and not hw.gpus
    try:
        return tracker_servers(spec.tracker, timeout=60.0 if needs_arch else 20.0)
    except SpecError:
        if needs_arch:
            raise
        answering_tracker(*parse_tracker(spec.tracker)[:2])  # no tracker there: refused, whatever the run
        return {}


def tracker_slices(spec: TuneSpec, servers: dict | None) -> tuple[TuneSpec, list[str]]:
    """A `--tracker` run is tuned at the slice its servers serve (they say it over RPC): the spec with that slice,
    and the notes to show; refused, naming `slices`, when the user gave another (the default 100 % is relabelled,
    with a note: a given 100 cannot be told from it)."""
    if servers is None:
        return spec, []
    given = ", ".join(f"{p}" for p in spec.slices) + " %"
    served = servers.get("slice_percent")
    if served is None:
        return spec, [f"the tracker's servers do not say which slice they serve (not `workbench serve`'s, or none "
                      f"was free within 20 s): the run is labelled tuned at {given}, as given"]
    if tuple(spec.slices) == (served,):
        return spec, []
    host, port, key = parse_tracker(spec.tracker)
    if tuple(spec.slices) != DEFAULT_SLICES:
        raise SpecError("slices", f"the servers under key {key!r} at {host}:{port} serve a {served} % slice (set by "
                                  f"`workbench serve --slices`), so a run on them is tuned at {served} %: give "
                                  f"{served} or leave slices out; got {given}")
    return spec.replace(slices=(served,)), [f"tuned at {served} %, the slice the server asked under key {key!r} "
                                            "serves (servers of other slices under that key would mix in)"]


DEFAULT_SLICES = next(f.default for f in dataclasses.fields(TuneSpec) if f.name == "slices")


def plan_run(spec: TuneSpec, hw: Hardware | None = None, options: EngineOptions | None = None,
             servers: dict | None = None, home: str | None = None) -> Plan:
    """Resolve the target, extract the model's tasks and split them into shards (raises SpecError). `servers`: what
    a `--tracker` run's servers have (`ask_tracker`), where already read; `home`: whose tuning memory the plan
    reads (none: the default home's)."""
    return plan_with_tasks(spec, hw, options, servers, home)[0]


def plan_with_tasks(spec: TuneSpec, hw: Hardware | None = None, options: EngineOptions | None = None,
                    servers: dict | None = None, home: str | None = None) -> tuple[Plan, list]:
    """`plan_run`'s plan, and the model's extracted tasks it was made from (for the run folder's task file)."""
    options = options or EngineOptions()
    if options.local_runner and (spec.servers != 1 or spec.tracker):
        raise SpecError("runner", "the local runner measures in the client itself: use servers=1 and no tracker")
    if spec.cluster:
        if options.local_runner:
            raise SpecError("cluster", "the local runner measures inside each client: a cluster needs the RPC runner")
        if importlib.util.find_spec("distributed") is None:
            raise SpecError("cluster", "needs Dask's distributed: pip install -e '.[cluster]'")
    hw = hw or detect()
    check_model(spec.model, spec.input_shape)
    elsewhere = ""  # why a CPU run compiles for the generic CPU: its candidates run on other hosts' CPUs
    if spec.tracker and spec.target == "cuda" and not hw.gpus:  # GPU servers elsewhere: compile for their GPU
        kind, tspec = "cuda", target_spec("cuda", hw, arch=tracker_cuda_arch(spec.tracker, servers=servers))
    else:
        kind = resolve_target(spec.target, hw) if not spec.tracker or spec.target != "auto" else hw.default_target
        if kind == "cpu" and spec.tracker:  # a cluster's workers only build: LLVM compiles for any CPU there
            elsewhere = f"the servers behind {spec.tracker} may run on other CPUs"
        tspec = target_spec(kind, hw, arch="" if elsewhere else None)
    if spec.sweep_slices:
        check_sweep_here(kind, hw, spec.tracker)
    if kind == "cuda" and not spec.tracker:
        gpus = list(choose_gpus(spec.gpus, len(hw.gpus)))
    elif spec.gpus is not None:
        raise SpecError("gpus", "GPU indices apply to --target cuda with local servers only")
    else:
        gpus = []
    model = load_model(spec.model, spec.input_shape, spec.precision)
    extracted = extract_tasks(model.mod, tspec.build())
    tasks = [task_info(t) for t in extracted]
    if not tasks:
        raise SpecError("model", f"{spec.model} has no tunable operator for {kind}")
    budget, shards = shard_plan(tasks, spec, kind)  # by estimate: the supervisor plans again by measured time
    notes = [] if spec.tracker else slice_notes(spec.slices, spec.sweep_slices, kind, tspec.num_cores)
    notes += [model.note] if model.note else []
    if tspec.kind == "cpu" and not tspec.arch:
        notes.append(generic_cpu_note(elsewhere or host_cpu()[1]))
    chosen, no_baseline = baseline.choose(spec.model, kind, spec.precision)
    if kind != "cuda":
        notes.append("on a CPU, TVM's untuned build is a naive loop nest, so a speedup over it means little: "
                     + (f"the tuned model is compared with {chosen.label} first" if chosen else no_baseline))
    elif no_baseline:
        notes.append(no_baseline)
    cost_note = cost_model_note(spec, [s.trials for s in shards])
    notes += [cost_note] if cost_note else []
    search_note = strategy_note(spec.strategy, kind, spec.precision)
    notes += [search_note] if search_note else []
    remembered: dict[str, float] = {}
    known: dict[int, dict[str, float]] = {}
    if not spec.fresh:  # where the memory already knows a task, the run starts from its best known schedule
        library = memory.library(home or workbench_home(), memory.key(tspec, spec.slices[0]))
        refused = memory.unreadable(library)
        hashes = {t.task_name: memory.workload_hash(t.dispatched[0]) for t in extracted}
        found = {} if refused else memory.known(library, hashes)
        like = {} if refused else memory.similar(library, {t.task_name: (hashes[t.task_name],
                                                                          memory.signature(t.dispatched[0]))
                                                           for t in extracted})
        notes += [memory.refused_note(library, refused)] if refused else []
        notes += [memory.known_note(found, len(tasks))] if found else []
        notes += [memory.similar_note(like)] if like else []
        best = memory.best_known_us(found, hashes)
        tasks = [dataclasses.replace(t, known_us=best.get(t.name)) for t in tasks]  # ranked by it once timed
        by_slice = {s: memory.library(home or workbench_home(), memory.key(tspec, s)) for s in spec.slices}
        known = {s: memory.known_defaults(lib, hashes, spec.precision) for s, lib in by_slice.items()
                 if not (refused if lib == library else memory.unreadable(lib))}
        known = {s: d for s, d in known.items() if d}
        remembered = known.get(spec.slices[0], {})
    plan = Plan(target=tspec, tasks=rows(tasks, budget), budget=budget,
                shards=tuple(shards), options=options.resolved(kind), gpus=tuple(gpus),
                input_shape=tuple(model.input_shape), dtype=model.dtype, notes=tuple(notes),
                tracker_servers=servers or None, baseline=chosen.to_dict() if chosen else None,
                known_defaults=known)
    if remembered and len(remembered) == len(tasks):  # every default timed before: planned by them now
        note = (f"the tuning memory holds the default schedule's time of all {len(tasks)} tasks at {spec.slices[0]} "
                "%: planned by measured time at once, and those defaults are not timed again")
        plan = by_measured(plan.replace(notes=(*plan.notes, note)), spec, remembered).plan
    return plan, extracted


def tune(spec: TuneSpec | None = None, *, home: str | None = None, runner: str | None = None,
         builder: str | None = None, sessions: str | None = None, first_round: str | None = None,
         example_inputs: tuple | None = None, model_name: str | None = None, **fields) -> Run:
    """Validate and plan `spec` (or TuneSpec(**fields)), start its run in the background, return the Run.

    `model` (in `fields`) may be a torch.nn.Module, traced with `example_inputs` (or, without them, a random tensor of
    `input_shape`), or an ExportedProgram: it is exported and converted here, once (`models.torch_module`), and
    named `model_name` (default: its class's name).
    runner, builder, sessions, first_round: the EngineOptions (None: their defaults)."""
    if is_torch_model(fields.get("model")):
        fields["model"] = save_torch_model(fields.pop("model"), example_inputs, name=model_name, home=home,
                                           input_shape=fields.pop("input_shape", None))  # then the saved model's own
    spec = spec.replace(**fields) if spec is not None and fields else spec or TuneSpec(**fields)
    options = EngineOptions.given(runner=runner, builder=builder, sessions=sessions, first_round=first_round)
    hw = detect()
    servers = ask_tracker(spec, hw)
    spec, notes = tracker_slices(spec, servers)
    plan, extracted = plan_with_tasks(spec, hw, options=options, servers=servers, home=home)
    plan = plan.replace(notes=(*notes, *plan.notes))
    run_id, run_dir = store.new_run_dir(spec, home)
    folder = store.RunDir(run_dir)
    folder.write_spec(spec)
    folder.write_plan(plan)
    task_file.save(run_dir, extracted, plan.target.build())  # the clients load these instead of extracting again
    start_supervisor(run_dir)
    return Run(run_dir)


def resume(run: str | Run, home: str | None = None, trials: int | None = None) -> Run:
    """Continue a stopped, partial or crashed run from its shard databases; a done run is returned as it is.

    `trials`: raise the run's budget per tuning slice to this many (done runs too): every stage goes on tuning
    from its records to the new budget, then is compiled, verified, timed and swept again. The budget an unfinished
    run already has continues it as it is."""
    r = run if isinstance(run, Run) else Run(store.find_run_dir(run, home))
    if r.status == "running":
        raise SpecError("run", f"run {r.id} is still running")
    if trials is not None and r.status != "done" and trials == r.plan.trials:
        trials = None  # the budget it was stopped on (a raise cut short, say): go on to it
    if trials is None and r.status == "done":
        return r  # nothing left to tune: `resume` of a finished run changes nothing
    if r.sweeping:
        raise SpecError("run", f"a sweep of run {r.id} is running; resume the run when it has finished")
    folder = store.RunDir(r.dir)
    if trials is not None:  # every slice swept so far is swept again: those points timed the models before the raise
        swept = {int(p) for p in r.sweep.inferred_at} if len(r.sweep) else set()
        spec, plan = more_trials(folder.read_spec(), folder.read_plan(), trials, swept)
    diskspace.ensure_free_space(r.dir)
    repair_databases(r.dir)
    if trials is not None:
        folder.write_spec(spec)
        folder.write_plan(plan)
    start_supervisor(r.dir, resume=True, trials=plan.trials if trials is not None else None)
    return Run(r.dir)


def more_trials(spec: TuneSpec, plan: Plan, trials: int, swept: set[int] | frozenset[int] = frozenset()
                ) -> tuple[TuneSpec, Plan]:
    """The spec and plan of a run whose budget per tuning slice is raised to `trials`, sweeping `swept` (the slices
    swept so far) again with its own sweep slices. SpecError, naming `trials`, when that is no raise or would leave
    a tuned task untuned."""
    had = plan.trials
    if isinstance(trials, bool) or not isinstance(trials, int) or trials <= had:
        raise SpecError("trials", f"must be a whole number above the run's {had} trials per tuning slice (the budget "
                                  f"it already has); got {trials!r}")
    spec = spec.replace(trials=trials, sweep_slices=tuple(sorted(set(spec.sweep_slices) | set(swept))))
    tasks = [t.info for t in plan.tasks]  # ranked as the run was: by measured time once its defaults were timed
    budget = plan_budget(tasks, spec, target=plan.target.kind, keep=len(plan.tuned))
    if budget.trials <= had:
        raise SpecError("trials", f"trials_per_task={spec.trials_per_task} caps the budget at {budget.trials} trials "
                                  f"per tuning slice, which the run already has; got {trials}")
    if not set(plan.tuned) <= set(budget.tuned):  # the old budget was below a batch per shard
        raise SpecError("trials", f"the run was planned in batches of {plan.budget.batch} (below a batch per "
                                  f"shard); {trials} trials would plan batches of {budget.batch} and tune "
                                  f"{len(budget.tuned)} of its {plan.budget.tasks_tuned} tuned tasks: start a "
                                  "new run with that budget")
    shards = shards_for(budget, tasks, spec)
    # The tuned tasks are a cost-ranked prefix and shards are filled costliest task first, so a larger budget that
    # keeps every tuned task only adds tasks to shards: every shard database still holds its own tasks' records.
    old = list(plan.shards)
    shards = raised_shards(old, shards, max(0, budget.trials - sum(s.trials for s in old)), budget.batch)
    tuned = set(budget.tuned)
    planned = tuple(dataclasses.replace(t, plan="tune" if t.name in tuned else "default") for t in plan.tasks)
    was = cost_model_note(spec, [s.trials for s in plan.shards])
    now = cost_model_note(spec, [s.trials for s in shards])
    notes = tuple(n for n in plan.notes if n != was) + ((now,) if now else ())
    return spec, plan.replace(tasks=planned, budget=budget, shards=tuple(shards), notes=notes)
