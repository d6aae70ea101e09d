"""End to end on the CPU: real tuning, 2 shards x 2 core-sliced RPC servers on loopback."""
import dataclasses
import json
import os
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import psutil
import pytest
from support import CHEAP_SEARCH, tvm_env

import workbench as wb
from workbench.plan.plan import Plan
from workbench.procs import group_alive
from workbench.results.recommend import tuned_vs_untuned
from workbench.runs import store
from workbench.runs.events import parse as ev_parse
from workbench.runs.model import TunedModel

SPEC = dict(model="mlp-small", shards=2, servers=2, slices=(50,), trials=8, trials_per_batch=4,
            sweep_slices=(50, 100))


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    run = wb.tune(wb.TuneSpec(**SPEC), home=str(home))
    status = run.wait(timeout=480)
    assert status == "done", (status, run.message, run.errors().to_dict("records"))
    return run


def _kinds(run):
    return [e["kind"] for e in run.event_list()]


def test_event_log_is_complete(finished_run):
    run = finished_run
    kinds = _kinds(run)
    for kind in ("run_started", "hardware", "server_ready", "shard_planned", "replanned", "shard_started", "batch",
                 "shard_finished", "merged", "compiled", "verified", "timed", "sweep_point", "run_finished"):
        assert kind in kinds, kind
    assert kinds.count("server_ready") == 2 and kinds.count("shard_finished") == 2
    for started in run.event_list("shard_started"):  # the client's start-up, by phase, from its process start
        phases = started["startup_s"]
        # the first stage's clients time the defaults, then wait for the plan by measured time
        assert list(phases) == ["import", "builder", "tasks", "intrinsics", "defaults", "plan", "design_spaces",
                                "total"], phases
        assert phases["import"] > 0 and abs(sum(phases.values()) - 2 * phases["total"]) < 0.05, phases
    for chunk in run.event_list("defaults"):  # where each chunk of default schedules spent its time
        steps = chunk["steps_s"]
        assert set(steps) == {"schedule", "build", "measure"} and steps["build"] > 0 and steps["measure"] > 0, steps
        assert abs(sum(steps.values()) - chunk["seconds"]) < 0.05, chunk
    timed = run.event_list("timed")[-1]
    assert 5 <= timed["untuned_repeats"] <= 15 and 5 <= timed["tuned_repeats"] <= 15
    # the stage's timing worker imported TVM while the stage tuned, then took its job (sweep.start_timer)
    with open(store.RunDir(run.dir).log("infer-50-stage")) as f:
        said = f.read()
    assert "waiting for" in said and "job-50-stage.json" in said and said.index("waiting for") < said.index(
        "started for"), said[:500]
    batches = run.event_list("batch")
    for e in batches:
        for field in ("t", "shard", "task", "task_trials", "shard_trial_budget", "latest_us", "best_us",
                      "build_errors", "run_errors", "est_shard_us", "search_s", "build_s", "measure_s"):
            assert field in e, field
    for shard in (0, 1):  # a batch's search, build and measuring fill the time since the shard's last batch
        mine = [e for e in batches if e["shard"] == shard]
        for before, e in zip(mine, mine[1:]):
            steps = e["search_s"] + e["build_s"] + e["measure_s"]
            assert min(e["search_s"], e["build_s"], e["measure_s"]) >= 0 and e["search_s"] > 0, e
            assert abs((e["t"] - before["t"]) - steps) < 0.5, (e["t"] - before["t"], steps)
    progress = run.progress()
    assert list(progress.state) == ["finished", "finished"]
    assert progress.trials_done.sum() == SPEC["trials"] == progress.trials_budget.sum()
    curve = run.best_curve()
    assert curve.est_model_us.iloc[-1] > 0 and curve.trials.iloc[-1] == SPEC["trials"]


def test_servers_were_sliced_to_disjoint_cores(finished_run):
    servers = finished_run.event_list("server_ready")
    assert all(s["slice_applied"] and s["slicing"] == "cores" for s in servers)
    ncores = len(os.sched_getaffinity(0))
    if ncores >= 2:
        cores = [tuple(s["affinity"]) for s in servers]
        assert all(len(c) == max(1, ncores // 2) for c in cores)
        assert set(cores[0]).isdisjoint(cores[1])
    assert all(s["host"] == "127.0.0.1" for s in servers)


def test_merged_database_loads_in_stock_tvm_and_compiles(finished_run, tmp_path):
    merged = os.path.join(finished_run.dir, "stages", "50", "merged")
    code = f"""
import numpy as np, tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms
from workbench.models.load import load_model
from workbench.plan.tasks import extract_tasks
db = ms.database.JSONDatabase(work_dir={merged!r}, allow_missing=False)
assert len(db) == {SPEC['trials']}, len(db)
m = load_model("mlp-small")
target = tvm.target.Target({{"kind": "llvm", "num-cores": 1}})
for t in extract_tasks(m.mod, target):
    assert db.query_tuning_record(t.dispatched[0], target, workload_name="main") is not None, t.task_name
ex = ms.relax_integration.compile_relax(db, m.mod, target, params=None)
vm = relax.VirtualMachine(ex, tvm.cpu())
x = np.random.default_rng(1).standard_normal(m.input_shape).astype("float32")
ref = relax.VirtualMachine(tvm.compile(m.mod, target), tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
out = vm["main"](tvm.runtime.tensor(x)).numpy()
assert np.allclose(out, ref, rtol=1e-4, atol=1e-4), abs(out - ref).max()
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=tvm_env())
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_results_and_sweep(finished_run):
    res = finished_run.results
    assert len(res) == 1 and bool(res.match.iloc[0]) and res.tuned_at.iloc[0] == 50
    assert res.tasks_tuned.iloc[0] == res.tasks_total.iloc[0] == 2
    assert np.isfinite(res.tuned_ms.iloc[0]) and res.tuned_ms.iloc[0] > 0
    verified = finished_run.event_list("verified")[0]
    assert verified["match"] and verified["max_abs_err"] < 1e-3
    sweep = finished_run.sweep
    assert sorted(sweep.inferred_at) == [50, 100] and (sweep.latency_ms_median > 0).all()
    assert list(finished_run.slice_matrix().columns) == [50, 100]
    assert "untuned" not in set(sweep.columns) | {str(t) for t in sweep.tuned_at}  # tuned rows only, as before


def test_sweep_times_the_untuned_build_apart_from_the_tuned_rows(finished_run):
    """sweep_untuned.csv: the untuned build at each swept slice, timed in the same worker as the tuned models;
    its own-slice row sits beside the finisher's timing of the same build, and the comparison reads both tables."""
    untuned = finished_run.sweep_untuned()
    assert sorted(untuned.inferred_at) == [50, 100] and (untuned.latency_ms_median > 0).all()
    assert list(untuned.columns) == list(store.UNTUNED_COLUMNS)
    assert (pd.read_csv(finished_run.folder.file(store.SWEEP_FILE)).tuned_at == 50).all()
    table = tuned_vs_untuned(finished_run.sweep, untuned)
    assert list(table.tuned_at) == [50]
    row = table.iloc[0]
    assert row.untuned_ms == untuned.set_index("inferred_at").latency_ms_median[50]
    assert row.verdict in ("faster", "slower", "within noise") and row.speedup == row.untuned_ms / row.tuned_ms


def test_nothing_left_running_or_listening(finished_run):
    procs = store.read_json(os.path.join(finished_run.dir, store.PROCS_FILE))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(group_alive(p) for p in [procs["supervisor"], *procs["groups"]]):
        time.sleep(0.2)
    assert not any(group_alive(p) for p in [procs["supervisor"], *procs["groups"]])
    for e in finished_run.event_list("server_ready"):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is fine, a listener is not
            s.bind(("127.0.0.1", e["port"]))
    leftovers = [p.info for p in psutil.process_iter(["pid", "cmdline"])
                 if any(finished_run.dir in part for part in (p.info["cmdline"] or []))]
    assert leftovers == []


def test_list_show_and_csv(finished_run, tmp_path):
    home = os.path.dirname(os.path.dirname(finished_run.dir))
    runs = wb.list_runs(home)
    row = runs.set_index("id").loc[finished_run.id]
    assert row["status"] == "done"
    started = row["started"]  # local time to the second, as the run id (made a moment before) has it
    assert started.nanosecond == started.microsecond == 0
    assert 0 <= (started - pd.to_datetime(finished_run.id[:15], format="%Y%m%d-%H%M%S")).total_seconds() < 120
    out = subprocess.run([sys.executable, "-m", "workbench", "--home", home, "show", finished_run.id[:15]],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "done" in out.stdout and "shards:" in out.stdout, out.stderr
    # where the shards' tuning went, from TVM's profiler: every second of its total in one phase or "other"
    assert re.search(r"time spent tuning, at 50 %: search \d+ %( \(.*\))?, build \d+ %, "
                     r"measure \d+ %, cost model update \d+ %, other \d+ % of \d+ s of tuning in all clients",
                     out.stdout), \
        out.stdout
    spent = finished_run.time_spent()
    totals = [e["profile_s"]["Total"] for e in finished_run.event_list("shard_finished")]
    assert len(totals) == 2 and list(spent["tuned_at"].unique()) == [50]
    assert spent["seconds"].sum() == pytest.approx(sum(totals), abs=0.05) and spent["share"].sum() == pytest.approx(1)
    assert spent.set_index("phase").loc["build", "seconds"] > 0 and (spent["seconds"] >= 0).all()
    paths = finished_run.to_csv(str(tmp_path))
    assert all(os.path.getsize(p) > 0 for p in paths)


def test_stop_then_resume_keeps_records_and_finishes_budget(tmp_path):
    spec = wb.TuneSpec(model="mlp-small", shards=1, servers=1, slices=(100,), trials=12, trials_per_batch=4,
                       **CHEAP_SEARCH)
    run = wb.tune(spec, home=str(tmp_path))
    for event in run.follow(timeout=300):
        if event["kind"] == "batch":
            break
    t0 = time.monotonic()
    assert run.stop() == "stopped"
    assert time.monotonic() - t0 < 8
    procs = store.read_json(os.path.join(run.dir, store.PROCS_FILE))
    assert not any(group_alive(p) for p in [procs["supervisor"], *procs["groups"]])
    db_dir = os.path.join(run.dir, "stages", "100", "shard-0")
    with open(os.path.join(db_dir, "database_tuning_record.json")) as f:
        kept = sum(1 for line in f if line.strip())
    assert kept >= 4
    again = wb.resume(run.id, home=str(tmp_path), trials=spec.trials)  # its own budget: no raise, it goes on
    assert again.wait(timeout=400) == "done", again.message
    assert again.event_list("launched")[-1]["trials"] is None and again.spec.trials == spec.trials
    started = again.event_list("shard_started")[-1]
    assert started["shard_trials_resumed"] == kept
    with open(os.path.join(db_dir, "database_tuning_record.json")) as f:
        total = sum(1 for line in f if line.strip())
    assert kept <= total <= spec.trials + spec.trials_per_batch
    assert again.progress().trials_done.iloc[-1] == total


def test_resume_with_more_trials_tunes_a_done_run_on_to_the_raised_budget(tmp_path, request, cheap_done_run):
    """`workbench resume RUN --trials N`: a done run tunes on from its records (its untuned task too, in the same
    shard), then is finished again; a budget that is no raise is refused in one line naming trials. The run folder
    was moved to another home without its libraries first, as a study carries runs from one machine to the next."""
    import glob
    import shutil

    from support import copy_run, set_aside

    # a real done run (tuned once for the session, copied here): replayed traces, the cost model only taught
    first = copy_run(cheap_done_run, str(tmp_path / "first"))
    spec = first.spec
    assert first.status == "done", first.message
    assert (spec.shards, spec.servers, spec.slices, spec.trials, spec.trials_per_batch, spec.cost_model,
            spec.strategy) == (1, 1, (100,), 4, 4, "xgb", "replay-trace"), spec
    assert first.plan.budget.tasks_tuned == 1  # mlp-small has 2 tasks: 4 trials (one batch) tune the costlier
    first.start_sweep([50])  # swept after tuning, outside the spec: swept again after the raise
    deadline = time.monotonic() + 200
    while (first.sweeping or not len(first.sweep)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert list(first.sweep.inferred_at) == [50] and not first.sweeping
    home = str(tmp_path / "second")
    shutil.move(first.dir, os.path.join(home, "runs", first.id))
    for lib in glob.glob(os.path.join(home, "runs", first.id, "**", "*.so"), recursive=True):
        os.remove(lib)
    # the folder the copy came from is gone too while it tunes on (restored when the test ends)
    request.addfinalizer(set_aside(cheap_done_run))
    run = wb.open_run(first.id, home)
    db = os.path.join(run.dir, "stages", "100", "shard-0", "database_tuning_record.json")
    with open(db) as f:
        kept = sum(1 for line in f if line.strip())
    cli = [sys.executable, "-m", "workbench", "--home", home, "resume", run.id, "--trials"]
    bad = subprocess.run(cli + ["4"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "trials: must be a whole number above the " \
        "run's 4 trials per tuning slice" in bad.stderr, bad.stderr
    out = subprocess.run(cli + ["12"], capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-2000:]
    again = wb.open_run(run.id, home)
    assert again.status == "done", again.message
    assert again.spec.trials == 12 and again.plan.trials == 12 and again.plan.budget.tasks_tuned == 2
    raised = again.event_list("launched")[-1]
    assert raised["trials"] == 12 and again.spec.sweep_slices == (50,)
    points = again.event_list("sweep_point")
    assert len(points) == 2 and points[-1]["t"] > raised["t"] > points[0]["t"]  # the model before the raise, and now
    assert len(again.sweep) == 1 and again.sweep.latency_ms_median.iloc[0] == points[-1]["latency_ms_median"]
    started = again.event_list("shard_started")[-1]
    assert started["shard_trial_budget"] == 12 and started["shard_trials_resumed"] == kept
    assert started["cost_model_records"] == kept  # the resumed shard's cost model learned its records first
    with open(db) as f:
        total = sum(1 for line in f if line.strip())
    assert 12 <= total <= 12 + spec.trials_per_batch
    res = again.results
    assert list(res.tuned_at) == [100] and bool(res.match.iloc[0])
    assert res.trials_asked.iloc[0] == 12 and res.records.iloc[0] == total and res.tasks_tuned.iloc[0] == 2
    # what the raise gained is shown: each budget's model, timed at its slice, and the last raise's gain
    budgets = again.budgets()
    assert list(budgets.trials) == [4, 12] and list(budgets.tuned_at) == [100, 100]
    assert budgets.tuned_ms.iloc[-1] == res.tuned_ms.iloc[0] and budgets.gain_verdict.iloc[-1] in (
        "faster", "slower", "within noise")
    assert re.search(r"Tuned on, at 100 %: 4 -> 12 trials, .* the last raise (made it \d\.\d\dx (faster|slower)|"
                     r"changed it within the timing noise)", out.stdout), out.stdout[-1500:]


@pytest.mark.parametrize("costs", [(10, 9, 8, 1), (10, 6, 5, 4), (50, 3, 2, 1, 1, 1), (7, 7, 7)])
@pytest.mark.parametrize("shards", [1, 2, 3, 5])
@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_a_raised_budget_keeps_each_shards_tasks_in_that_shard(costs, shards, target):
    """`more_trials` replans: each shard database must go on holding its own tasks' records (tasks may join)."""
    from workbench.orchestrate.launch import more_trials
    from workbench.plan.budget import plan_budget
    from workbench.plan.tasks import TaskInfo, plan_shards

    tasks = [TaskInfo(f"t{i}", 1, float(c), 0.0) for i, c in enumerate(costs)]
    spec = wb.TuneSpec(model="mlp-small", shards=shards, trials=4 * shards, trials_per_batch=4)
    budget = plan_budget(tasks, spec, target=target)
    by_name = {t.name: t for t in tasks}
    planned = plan_shards([by_name[n] for n in budget.tuned], shards, budget.trials, per_task=budget.batch,
                          defaults=[by_name[n] for n in budget.default])
    plan = Plan.from_dict({"tasks": [{**t.__dict__, "cost": t.cost} for t in tasks], "budget": budget.to_dict(),
                           "target": {"kind": target}, "shards": [s.to_dict() for s in planned]})
    for more in range(spec.trials + 1, spec.trials + 4 * len(tasks) + 2):
        raised, replanned = more_trials(spec, plan, more)
        assert raised.trials == more == replanned.budget.trials
        assert len(replanned.shards) == len(plan.shards)
        for old, new in zip(plan.shards, replanned.shards):
            assert set(old.tasks) <= set(new.tasks) and old.replica == new.replica, (more, old, new)
        assert sum(s.trials for s in replanned.shards) >= more
    with pytest.raises(wb.SpecError, match="above the run's") as err:
        more_trials(spec, plan, spec.trials)
    assert err.value.field == "trials"


def test_a_raise_that_would_untune_a_task_is_refused():
    """A budget below a batch per shard plans small batches over many tasks; a raise to whole batches would tune
    fewer tasks and strand their records: refused, naming trials."""
    from workbench.orchestrate.launch import more_trials
    from workbench.plan.budget import plan_budget
    from workbench.plan.tasks import TaskInfo, plan_shards

    tasks = [TaskInfo(f"t{i}", 1, float(10 - i), 0.0) for i in range(6)]
    spec = wb.TuneSpec(model="mlp-small", shards=3, trials=5, trials_per_batch=16)
    budget = plan_budget(tasks, spec)
    assert budget.batch == 1 and len(budget.tuned) == 5
    plan = Plan.from_dict({"tasks": [{**t.__dict__, "cost": t.cost} for t in tasks], "budget": budget.to_dict(),
                           "target": {"kind": "cpu"},
                           "shards": [s.to_dict() for s in plan_shards(list(tasks[:5]), 3, 5, per_task=1,
                                                                       defaults=[tasks[5]])]})
    with pytest.raises(wb.SpecError, match="batches of 1 .* would plan batches of 16 and tune 3 of its 5") as err:
        more_trials(spec, plan, 48)
    assert err.value.field == "trials"


def test_plan_records_target_and_shards(finished_run):
    plan = finished_run.plan
    assert plan.target.kind == "cpu" and len(plan.shards) == 2
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


def test_views_inside_consistent_read_one_set_of_events(finished_run, tmp_path):
    """The panel draws every view of a refresh inside Run.consistent(): an event appended meanwhile
    (a batch landing between progress() and best_curve()) waits for the next refresh."""
    import shutil

    from workbench.runs.event_types import Phase
    from workbench.runs.events import EventWriter

    copy = tmp_path / "run"
    shutil.copytree(finished_run.dir, copy)
    run = wb.Run(str(copy))
    before = run.event_count
    with run.consistent():
        EventWriter(str(copy / "events.jsonl"), "test").emit(Phase(phase="sweeping"))
        assert run.event_count == before and len(run.event_list()) == before and run.status == "done"
    assert run.event_count == before + 1


def test_finish_keeps_what_was_found_and_resume_of_a_done_run_does_nothing(tmp_path):
    spec = wb.TuneSpec(model="mlp-small", shards=1, servers=1, slices=(100, 50), trials=400, trials_per_batch=4,
                       **CHEAP_SEARCH)
    run = wb.tune(spec, home=str(tmp_path))
    seen = 0
    for event in run.follow(timeout=300):
        seen += event["kind"] == "batch"
        if seen == 2:
            break
    assert run.finish() == "running"
    assert run.wait(timeout=300) == "done", run.message
    assert "finished early" in run.message
    res = run.results
    assert list(res.tuned_at) == [100] and bool(res.match.iloc[0]) and bool(res.finished_early.iloc[0])
    assert 2 * spec.trials_per_batch <= res.trials_measured.iloc[0] < spec.trials
    assert os.path.exists(os.path.join(run.dir, "stages", "100", "tuned.so"))
    assert [e["tuned_at"] for e in run.event_list("stage_skipped")] == [50]
    assert run.progress().state.tolist() == ["finished"]
    with pytest.raises(wb.SpecError):
        run.finish()  # nothing left to finish
    before = run.event_count
    again = wb.resume(run.id, home=str(tmp_path))
    time.sleep(1.0)
    assert again.status == "done" and again.event_count == before
    out = subprocess.run([sys.executable, "-m", "workbench", "--home", str(tmp_path), "resume", run.id],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "already done" in out.stdout and "nothing to resume" in out.stdout, out.stderr
    assert wb.open_run(run.id, str(tmp_path)).event_count == before


def test_the_tuned_model_goes_out_and_loads_where_the_workbench_is_not(finished_run, tmp_path):
    """`run.model()` is a callable on numpy arrays; its export (library, signature.json, load.py) loads in a fresh
    Python that has TVM and numpy but not the workbench (site-packages on the path, its .pth files not run, so the
    editable workbench is not importable there) and gives the same outputs."""
    run = finished_run
    model = run.model()
    rows = {int(r["tuned_at"]): r for r in run.results.to_dict("records")}
    # the fastest model a stage kept (the untuned build's time where a stage kept that)
    best = min(rows.values(), key=lambda r: r["untuned_ms"] if r["kept"] == "untuned" else r["tuned_ms"])
    assert model.signature.tuned_at == best["tuned_at"] and model.signature.kept == best["kept"]
    assert model.signature.inputs[0].shape == tuple(run.plan.input_shape)
    x = np.random.default_rng(1).standard_normal(run.plan.input_shape).astype("float32")
    y = model(x)
    assert y.shape == model.signature.outputs[0].shape and np.isfinite(y).all()
    with pytest.raises(wb.SpecError, match="inputs"):
        model(x[:1])
    folder = model.export(str(tmp_path / "export"))
    np.save(tmp_path / "x.npy", x)
    import tvm

    packages = sorted({os.path.dirname(os.path.dirname(m.__file__)) for m in (tvm, np)})  # where TVM and numpy are
    code = (f"import sys; sys.path += {packages!r}; sys.path.insert(0, {folder!r})\n"
            "try:\n    import workbench\n    print('WORKBENCH')\nexcept ImportError:\n    pass\n"
            f"import numpy as np, load\nx = np.load({str(tmp_path / 'x.npy')!r})\n"
            f"np.save({str(tmp_path / 'y.npy')!r}, load.load()(x))\n")
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=str(tmp_path), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "WORKBENCH" not in out.stdout, out.stdout + out.stderr[-2000:]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), y)
    assert len(run.database(best["tuned_at"])) >= 0  # a stock JSONDatabase of the records it uses
    with pytest.raises(wb.SpecError, match="tuned_at"):
        run.model(tuned_at=37)


def test_a_cpu_model_is_compiled_for_this_cpu_and_refused_by_one_that_lacks_its_instructions(finished_run, tmp_path):
    """A CPU run compiles for this host's CPU (its vector units), and says so in the signature; a model compiled for a
    CPU with instructions this one lacks is refused with one line, in the workbench and in the exported loader,
    instead of stopping the process at its first such instruction."""
    import tvm
    from tvm.target import codegen

    from workbench.hardware import host_cpu

    cpu, why = host_cpu()
    assert finished_run.plan.target.arch == cpu, why
    assert finished_run.model().signature.target["arch"] == cpu

    def vector_isa(arch: str) -> set[str]:
        features = codegen.llvm_get_cpu_features(tvm.target.Target({"kind": "llvm", "mcpu": arch}))
        return {str(f) for f in features if str(f).startswith(("avx", "amx"))}

    here = vector_isa(cpu or "x86-64")
    richer = next((str(a) for a in codegen.llvm_get_cpu_archlist(tvm.target.Target("llvm"))
                   if vector_isa(str(a)) - here), None)
    assert richer is not None, "LLVM knows no CPU with instructions this one lacks"
    folder = finished_run.model().export(str(tmp_path / "m"))
    sig_path = os.path.join(folder, "signature.json")
    sig = json.load(open(sig_path))
    sig["target"]["arch"] = str(richer)
    json.dump(sig, open(sig_path, "w"))
    out = subprocess.run([sys.executable, os.path.join(folder, "load.py")], capture_output=True, text=True,
                         timeout=300, env=tvm_env())
    assert out.returncode == 1 and f"compiled for a {richer} CPU and uses" in out.stderr, out.stderr[-2000:]
    assert "which this CPU lacks: tune it again on this machine" in out.stderr
    moved = TunedModel(finished_run.model().library, dataclasses.replace(
        finished_run.model().signature, target=sig["target"]))
    with pytest.raises(RuntimeError, match=f"compiled for a {richer} CPU"):
        moved(np.zeros(finished_run.plan.input_shape, "float32"))
    # a run folder opened on such a host (a home shared between machines): refused before its library first runs
    import shutil

    copy = tmp_path / "home" / "runs" / os.path.basename(finished_run.dir)
    shutil.copytree(finished_run.dir, copy)
    plan = json.load(open(copy / "plan.json"))
    plan["target"]["arch"] = richer
    json.dump(plan, open(copy / "plan.json", "w"))
    with pytest.raises(RuntimeError, match=f"compiled for a {richer} CPU"):
        wb.open_run(finished_run.id, str(tmp_path / "home")).model()


def test_workbench_export_writes_the_model_a_user_takes_away(finished_run, tmp_path):
    home = os.path.dirname(os.path.dirname(finished_run.dir))
    out = subprocess.run([sys.executable, "-m", "workbench", "--home", home,
                          "export", finished_run.id, "--tuned-at", "50", "-o", str(tmp_path / "m")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "tuned at 50 %" in out.stdout or "untuned build" in out.stdout
    assert sorted(os.listdir(tmp_path / "m")) == ["load.py", "model.so", "signature.json"]
    assert json.load(open(tmp_path / "m" / "signature.json"))["tuned_at"] == 50


def test_every_result_row_carries_its_baseline_and_the_ratio(finished_run):
    """What the user would run instead comes first: the sample model's PyTorch twin, timed interleaved with the two
    builds under the same slice, with the paired test's verdict; its outputs are not compared (other weights)."""
    pytest.importorskip("torch")
    for row in finished_run.results.to_dict("records"):
        assert row["baseline"].startswith("PyTorch eager fp32 (a PyTorch twin of mlp-small)"), row
        model_ms = row["untuned_ms"] if row["kept"] == "untuned" else row["tuned_ms"]
        assert row["baseline_ms"] > 0 and row["vs_baseline"] == pytest.approx(row["baseline_ms"] / model_ms)
        assert row["vs_baseline_verdict"] in ("faster", "slower", "within noise")
        assert row["baseline_match"] is None and "twin" in row["baseline_note"]
    table = finished_run.results_table()
    assert list(table.columns[:5]) == ["tuned at (%)", "latency (median ± IQR)", "vs baseline", "baseline",
                                       "baseline latency (median ± IQR)"]
    timed = finished_run.event_list("timed")[0]
    line = wb.describe_event(ev_parse(timed))
    assert "than PyTorch eager fp32 (a PyTorch twin of mlp-small)" in line or "as fast as PyTorch" in line, line
    assert line.index("PyTorch") < line.index("TVM"), line  # the baseline first, TVM's untuned build second


def test_an_onnx_model_with_computed_shapes_is_folded_tuned_and_timed_against_onnxruntime(tmp_path):
    pytest.importorskip("onnxruntime")
    from test_models import computed_shape_onnx, save

    path = save(computed_shape_onnx("reshape"), tmp_path / "computed.onnx")
    run = wb.tune(wb.TuneSpec(model=path, input_shape=(2, 3, 8, 8), trials=4, trials_per_batch=4, **CHEAP_SEARCH),
                  home=str(tmp_path / "home"))
    assert run.plan.notes[0] == ("folded for input 2x3x8x8: 11 nodes to 3 (onnx shape inference, onnxruntime "
                                 "constant folding)")
    assert run.wait(timeout=480) == "done", (run.message, run.errors().to_dict("records"))
    row = run.results.iloc[0]
    assert row.baseline.startswith("onnxruntime ") and row.baseline_ms > 0 and bool(row.baseline_match), row.to_dict()
    assert row.vs_baseline_verdict in ("faster", "slower", "within noise") and bool(row.match)
