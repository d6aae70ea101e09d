"""The tuning memory: a finished stage's records join the home's library; the next run of a model that shares its
tasks says so in its plan, starts those tasks from their best known schedules (its model is as good as the memory
after one trial) and counts only its own trials; --fresh ignores it; `workbench memory` lists, exports and imports."""
import base64
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tarfile

import pandas as pd
import pytest
from conftest import ROOT

import workbench as wb
from workbench.models.load import load_model
from workbench.orchestrate.launch import plan_run
from workbench.plan.plan import Plan
from workbench.plan.tasks import extract_tasks
from workbench.runs import memory, memory_share, store
from workbench.runs.event_types import DefaultsTimed, Replanned, ShardStarted

FAST = dict(model="mlp-small", slices=(100,), cost_model="random", strategy="replay-trace")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = str(tmp_path_factory.mktemp("memory-home"))
    first = wb.tune(wb.TuneSpec(trials=16, **FAST), home=home)
    assert first.wait(timeout=480) == "done", first.message
    return home, first


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_a_later_run_starts_from_what_an_earlier_one_found(home):
    home, first = home
    [row] = memory_share.listing(home)
    assert row["runs"] == 1 and row["models"] == ["mlp-small"] and row["records"] > 0, row
    assert first.results.iloc[0]["memory_added"] == row["records"]
    # a trial per task: which task a single trial goes to follows their measured default times, a coin toss here
    second = wb.tune(wb.TuneSpec(trials=2, trials_per_batch=1, **FAST), home=home)
    assert second.wait(timeout=480) == "done", second.message
    said = [n for n in second.plan.notes if "tuning memory" in n]
    searched = first.tasks()["best_us"].notna().sum()  # the tasks the first run has records of
    assert said and f"run {first.id}" in said[0] and said[0].startswith(f"{searched} of 2 tasks known"), said
    [started] = second.typed_events(ShardStarted)
    assert started.memory_records and not started.memory_note, started
    assert set(started.memory_records) <= set(started.tasks)
    result = second.results.iloc[0]
    assert result["trials_measured"] == 2  # the memory's records are not its trials
    # two trials, yet every task the first run searched has its best schedule: the memory's (whether it beats the
    # default is the finisher's call, on this run's timings of both)
    first_best = first.tasks().set_index("task")["best_us"].dropna()
    best = second.tasks().set_index("task")["best_us"]
    assert len(first_best) and all(best[task] <= us * 1.0001 for task, us in first_best.items()), (best, first_best)
    reasons = second.tasks().set_index("task")["reason"]
    assert all("tuning memory" in reasons[task] for task in started.memory_records), reasons  # the table says why
    assert result["memory_added"] <= 2  # what it held already is not added again


def test_a_known_task_outside_the_budget_runs_the_memorys_best(home):
    """One trial for two tasks the memory knows (the runs above searched both): the task the budget leaves out still
    runs its best known schedule, not its default, and the task table says so."""
    home, first = home
    earlier = [wb.open_run(r, home).tasks() for r in store.run_ids(home)]  # what the memory learnt, by task
    known = pd.concat(earlier).dropna(subset=["best_us"]).groupby("task")["best_us"].min()
    assert len(known) == 2, known
    run = wb.tune(wb.TuneSpec(trials=1, trials_per_batch=1, **FAST), home=home)
    assert run.wait(timeout=480) == "done", run.message
    # the plan ranked each task by the time it runs at: the memory's best where that beats its default
    for t in run.plan.tasks:
        assert t.known_us == pytest.approx(known[t.name], rel=1e-3), (t, known)
        assert t.default_us is not None and t.cost == pytest.approx(t.weight * min(t.default_us, t.known_us)), t
    tasks = run.tasks().set_index("task")
    [left_out] = [t for t in tasks.index if tasks.loc[t, "trials"] == 0]
    [compiled] = run.event_list("compiled")
    assert set(compiled["from_memory"]) == {left_out}, compiled["from_memory"]
    choice = {c["task"]: c for c in compiled["choices"]}[left_out]
    assert choice["best_us"] is not None and choice["best_us"] <= known[left_out] * 1.0001, (choice, known)
    if choice["kept"] == "tuned":  # faster than its default as this run timed it
        assert tasks.loc[left_out, "reason"] == "runs the tuning memory's best schedule", tasks
        assert tasks.loc[left_out, "state"] == "tuned"
    assert run.results.iloc[0]["trials_measured"] == 1  # the memory's record is not the run's trial


def test_a_later_run_takes_the_default_times_the_memory_holds(home, tmp_path):
    """The defaults an earlier run timed here are not timed again: the plan is made by them at launch (no wait for a
    re-plan) and the clients say them as the memory's; --fresh times them, and another TVM's times are not taken."""
    shutil.copytree(home[0], str(tmp_path / "home"))  # its run would add to the library the other tests count on
    home = str(tmp_path / "home")
    [row] = memory_share.listing(home)
    library = memory.library(home, row["library"])
    plan = plan_run(wb.TuneSpec(trials=2, **FAST), home=home)
    hashes = {t.task_name: memory.workload_hash(t.dispatched[0])
              for t in extract_tasks(load_model("mlp-small").mod, plan.target.build())}
    remembered = memory.known_defaults(library, hashes, "fp32")
    assert set(remembered) == {t.name for t in plan.tasks} and all(us > 0 for us in remembered.values()), remembered
    assert plan.timed and any("default schedule's time of all 2 tasks" in n for n in plan.notes), plan.notes
    assert {t.name: t.default_us for t in plan.tasks} == remembered == plan.known_defaults[100]
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))).known_defaults == {100: remembered}  # plan.json
    assert memory.known_defaults(library, hashes, "fp16") == {}  # an fp16 run builds its defaults otherwise
    assert not plan_run(wb.TuneSpec(trials=2, fresh=True, **FAST), home=home).timed
    run = wb.tune(wb.TuneSpec(trials=2, **FAST), home=home)
    assert run.wait(timeout=480) == "done", run.message
    said = run.typed_events(DefaultsTimed)
    assert said and all(e.remembered for e in said), said  # nothing timed again
    assert {t: us for e in said for t, us in e.defaults_us.items()} == remembered
    assert not run.typed_events(Replanned)  # planned by measured time before it started
    newest = max(json.load(open(os.path.join(library, memory.SOURCES)))["runs"], key=lambda r: r["t"])
    assert newest["run"] == run.id and newest["default_us"] == {}  # what it took from the memory is not new
    # a library entry written by another TVM: its default schedules may differ, so its times are not taken
    other = str(tmp_path / "other")
    shutil.copytree(library, other)
    sources = json.load(open(os.path.join(other, memory.SOURCES)))
    for r in sources["runs"]:
        r["tvm"] = "0.0"
    json.dump(sources, open(os.path.join(other, memory.SOURCES), "w"))
    assert memory.known_defaults(other, hashes, "fp32") == {}


def test_fresh_ignores_the_memory(home):
    home, _ = home
    plan = plan_run(wb.TuneSpec(trials=4, fresh=True, **FAST), home=home)
    assert not [n for n in plan.notes if "tuning memory" in n]
    plan = plan_run(wb.TuneSpec(trials=4, **FAST), home=home)
    assert [n for n in plan.notes if "tuning memory" in n]
    from widgets.form import TuneForm

    form = TuneForm()
    assert "fresh" not in form.values()  # unchecked: the memory is used
    form.set(fresh=True)  # the panel's checkbox
    assert wb.TuneSpec(**form.values()).fresh is True
    proc = _cli("tune", "--fresh", "--model", "nope")  # the switch parses; the bad model is what is refused
    assert proc.returncode == 2 and proc.stderr.startswith("workbench: error: model"), proc.stderr


def test_memory_exports_and_imports_between_homes(home, tmp_path):
    home, _ = home
    archive = str(tmp_path / "memory.tar.gz")
    listed = _cli("--home", home, "memory", "list")
    assert listed.returncode == 0 and "records from" in listed.stdout and "mlp-small" in listed.stdout, listed
    assert _cli("--home", home, "memory", "export", archive).returncode == 0
    other = str(tmp_path / "other-home")
    got = _cli("--home", other, "memory", "import", archive)
    assert got.returncode == 0, got.stderr
    [(name, added)] = [line.split(": ") for line in got.stdout.strip().splitlines()]
    [mine] = memory_share.listing(home)
    assert name == mine["library"] and added == f"{mine['records']} new records"
    runs = json.load(open(os.path.join(memory.library(home, name), memory.SOURCES)))["runs"]
    hashes = {h: h for r in runs for h in r.get("default_us") or {}}
    assert memory.known_defaults(memory.library(home, name), hashes, "fp32")  # timed here: this host's to take,
    assert memory.known_defaults(memory.library(other, name), hashes, "fp32") == {}  # not the importing host's
    again = _cli("--home", other, "memory", "import", archive)
    assert again.stdout.strip().endswith(": 0 new records"), again.stdout  # a record held is not added again
    empty = _cli("--home", str(tmp_path / "empty"), "memory", "export", archive)
    assert empty.returncode == 2 and "memory: the tuning memory" in empty.stderr


def _as_an_older_tvm_wrote_it(folder) -> None:
    """Rewrite a library's workloads as TVM releases before the `tirx` namespace wrote them (`tir.PrimFunc`, ...):
    JSON inside base64, behind its length in 8 bytes."""
    path = os.path.join(folder, store.WORKLOADS_FILE)
    lines = []
    for line in open(path):
        shash, blob = json.loads(line)
        text = base64.b64decode(blob)[8:].decode()
        text = text.replace('"tirx.', '"tir.').replace('"s_tir.SBlock', '"tir.Block').encode()
        lines.append(json.dumps([shash, base64.b64encode(struct.pack("<Q", len(text)) + text).decode()]))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def test_a_library_this_tvm_cannot_read_is_refused_and_kept(home, tmp_path):
    home, first = home
    other = str(tmp_path / "home")
    shutil.copytree(memory.root(home), memory.root(other))
    [name] = [row["library"] for row in memory_share.listing(other)]
    folder = memory.library(other, name)
    _as_an_older_tvm_wrote_it(folder)
    files = {f: open(os.path.join(folder, f), "rb").read() for f in os.listdir(folder)}
    assert "does not load" in memory.unreadable(folder) and "tir.PrimFunc" in memory.unreadable(folder)
    plan = plan_run(wb.TuneSpec(trials=4, **FAST), home=other)
    [said] = [n for n in plan.notes if "tuning memory" in n]
    assert said.startswith(f"the tuning memory {name} cannot be read by this TVM") and "tunes from nothing" in said
    # the next writer (a stage's finisher; here the first run's shard database) moves it aside, as it was
    added, note = memory.remember(folder, store.RunDir(first.dir).shard_db(100, 0), {"run": "r", "model": "mlp-small"})
    assert added > 0 and f"moved aside, as it was, to {name}{memory.SET_ASIDE}1" in note, note
    aside = folder + memory.SET_ASIDE + "1"
    assert {f: open(os.path.join(aside, f), "rb").read() for f in os.listdir(aside)} == files  # nothing lost
    assert memory.unreadable(folder) == ""  # the new library under the key
    listed = _cli("--home", other, "memory", "list")
    assert listed.returncode == 0 and f"{name}{memory.SET_ASIDE}1: " in listed.stdout and "set aside" in listed.stdout
    # a library whose sources.json is damaged is refused by the clients as by the plan: no shard seeds from it
    with open(os.path.join(folder, memory.SOURCES), "w") as f:
        f.write("[]")
    assert memory.unreadable(folder) == f"its {memory.SOURCES} is not a tuning memory's"
    with pytest.raises(ValueError, match="not a tuning memory's"):
        memory.seed(folder, None, [])
    archive = str(tmp_path / "old.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:  # an older host's export: refused by import, with the reason
        tar.add(aside, arcname=name)
    got = _cli("--home", str(tmp_path / "third"), "memory", "import", archive)
    assert got.returncode == 0 and f"{name}: 0 new records; not imported: this TVM cannot read it" in got.stdout, got


def _decisions(path: str) -> dict[int, list[list]]:
    """{workload: each of its records' sampling decisions, in the order they were measured}."""
    out: dict[int, list[list]] = {}
    for line in open(os.path.join(path, store.RECORDS_FILE)):
        workload, ((insts, decisions), *_) = json.loads(line)
        out.setdefault(workload, []).append([(insts[i][0], d) for i, d in decisions])
    return out


def _fits(new: list, old: list) -> bool:
    """Whether a schedule's decisions are another's, but for tile sizes the new shape refitted."""
    refitted = lambda a, b: a[0] == "SamplePerfectTile" and math.prod(a[1]) != math.prod(b[1])  # noqa: E731
    return len(new) == len(old) and all(a[0] == b[0] and (a[1] == b[1] or refitted(a, b)) for a, b in zip(new, old))


def test_a_new_shape_and_a_later_slice_start_from_related_schedules(home):
    """At another input shape, the tasks the memory knows at the old one (same blocks, other shapes) measure its best
    schedules first, their tile sizes refitted; the run's later slice measures its earlier slice's best first."""
    home, first = home
    spec = wb.TuneSpec(**{**FAST, "slices": (100, 50)}, input_shape=(16, 32), trials=8, trials_per_batch=4)
    [said] = [n for n in plan_run(spec, home=home).notes if "like ones the tuning memory holds" in n]
    assert f"run {first.id}" in said and "their first batch measures those schedules, refitted" in said, said
    run = wb.tune(spec, home=home)
    assert run.wait(timeout=600) == "done", run.message
    started = {s.tuned_at: s for s in run.typed_events(ShardStarted)}
    assert started[100].related_traces and not started[100].memory_records, started[100]  # similar, not the same
    known = [d for lib in memory_share.listing(home) for ds in _decisions(memory.library(home, lib["library"])).values()
             for d in ds]
    folder = store.RunDir(run.dir)
    at_100 = _decisions(folder.shard_db(100, 0))
    # the related task's first batch is the memory's schedules, refitted (replay-trace alone draws every tile afresh)
    assert any(len(ds) >= 4 and all(any(_fits(n, o) for o in known) for n in ds[:4]) for ds in at_100.values()), at_100
    assert started[50].related_traces, started[50]
    earlier = [d for ds in _decisions(folder.merged_db(100)).values() for d in ds]
    at_50 = _decisions(folder.shard_db(50, 0))
    assert at_50 and all(n in earlier for ds in at_50.values() for n in ds[:4])  # the same schedules, measured again
    # a task with fewer related schedules than a batch (the second run measured one of each) measures a shorter first
    # batch; the shard still measures what was asked, not a batch more (budgeted.py)
    assert run.results.set_index("tuned_at")["trials_measured"].to_dict() == {100: 8, 50: 8}
