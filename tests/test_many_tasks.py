"""A many-task model nobody hand-wrote as a sample (tests/onnx_standin.py, 22 tasks), tuned through the
CLI as a user would with a budget far below tasks x batch: real tuning, real servers, no mocks."""
import json
import os
import re
import subprocess
import sys

import pytest
from onnx_standin import INPUT_SHAPE, save

import workbench as wb

TRIALS, BATCH = 16, 4


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    pytest.importorskip("onnx")
    return str(save(tmp_path_factory.mktemp("model") / "standin.onnx"))


@pytest.fixture(scope="module")
def cli_run(standin, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    out = subprocess.run([sys.executable, "-m", "workbench", "--home", str(home), "tune", "--model", standin,
                          "--input-shape", ",".join(map(str, INPUT_SHAPE)), "--trials", str(TRIALS),
                          "--trials-per-batch", str(BATCH), "--shards", "2", "--servers", "1"],
                         capture_output=True, text=True, timeout=540)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return wb.open_run("last", str(home)), out.stdout, home


def test_the_plan_is_said_before_anything_starts_and_recorded(cli_run):
    run, stdout, _ = cli_run
    budget = run.plan.budget
    assert budget.tasks_total == 22 and budget.trials == TRIALS and budget.batch == BATCH
    assert budget.tasks_tuned == TRIALS // BATCH and budget.tasks_default == 22 - TRIALS // BATCH
    lines = stdout.splitlines()
    plan_line = next(i for i, line in enumerate(lines) if line.startswith("plan: "))
    first_event = next(i for i, line in enumerate(lines) if line.startswith("run ") and "started" in line)
    assert plan_line < first_event
    assert re.search(rf"tuning 4 of 22 tasks \(\d+% of the estimated cost\) with {TRIALS} trials", lines[plan_line])
    assert "18 keep their default" in lines[plan_line]
    # then, once every default is timed and before any trial, the plan by measured time, said as it is made
    replanned = next(i for i, line in enumerate(lines) if "planned by measured time: tuning 4 of 22 tasks (" in line)
    first_batch = next(i for i, line in enumerate(lines) if re.search(r"shard \d +\d+/\d+ ", line))
    assert first_event < replanned < first_batch and "of the measured time" in lines[replanned]
    # 8 trials a shard: its cost model never leaves TVM's random warm-up, and the user is told so before it starts
    note = next(i for i, line in enumerate(lines) if line.startswith("note: 2 of 2 shards measure fewer than 100"))
    # (the plan by measured time says it again for its own shares)
    assert note < first_event and any("fewer than 100 trials" in n for n in run.plan.notes)
    assert run.summary()["trials"] == TRIALS


def test_measured_trials_stay_within_the_budget_and_every_task_has_a_state(cli_run):
    run, _, home = cli_run
    assert run.status == "done", run.message
    merged = os.path.join(run.dir, "stages", "100", "merged", "database_tuning_record.json")
    with open(merged) as f:
        measured = sum(1 for line in f if line.strip())
    assert TRIALS <= measured <= TRIALS + BATCH
    assert int(run.results.trials_measured.iloc[0]) == measured
    tasks = run.tasks()
    assert len(tasks) == 22 and set(tasks.state) <= {"tuned", "default", "skipped"}
    tuned = set(tasks[tasks.state == "tuned"].task)
    assert tuned == set(run.plan.tuned) and (tasks[tasks.state == "tuned"].trials >= BATCH).all()
    assert (tasks[tasks.state == "default"].trials == 0).all()
    assert tasks.default_us.notna().all(), "every task's default schedule is timed once"
    assert abs(tasks.share.sum() - 1.0) < 0.01
    out = subprocess.run([sys.executable, "-m", "workbench", "--home", str(home), "show", run.id, "--all-tasks"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for row in tasks.itertuples():
        line = next(line for line in out.stdout.splitlines() if line.strip().startswith(row.task))
        assert row.state in line.split()


def test_no_record_slower_than_its_default_reaches_the_compiled_model(cli_run):
    from tvm.s_tir import meta_schedule as ms

    run, _, _ = cli_run
    defaults = {}
    for e in run.event_list("defaults"):
        defaults.update(e["defaults_us"])
    best_db = ms.database.JSONDatabase(work_dir=os.path.join(run.dir, "stages", "100", "best"), allow_missing=False)
    records = best_db.get_all_tuning_records()
    compiled = run.event_list("compiled")[-1]
    assert len(records) == len(compiled["kept_tuned"])
    by_task = {c["task"]: c for c in compiled["choices"]}
    for c in by_task.values():
        if c["kept"] == "tuned":
            assert c["best_us"] < c["default_us"], c
        elif c["best_us"] is not None:
            assert c["best_us"] >= c["default_us"], c
    for rec in records:
        us = sum(float(s) for s in rec.run_secs) / len(rec.run_secs) * 1e6
        assert any(abs(us - c["best_us"]) < 1e-2 and us < c["default_us"] for c in by_task.values()
                   if c["kept"] == "tuned"), us
    row = run.results.iloc[0]
    assert row.verdict in ("faster", "within noise") and row.kept == "tuned" and bool(row.match), row.to_dict()


def test_each_batch_is_reported_before_the_next_task_is_searched(cli_run):
    """TVM's gradient scheduler sends every task's first batch before joining any, so a shard's first two
    batch events land together; here the second task is searched and built only after the first's event."""
    run, _, _ = cli_run
    checked = 0  # the measured plan may give a shard one task, whose batches are all of it
    for shard in (0, 1):
        batches = [e for e in run.event_list("batch") if e["shard"] == shard]
        if len(batches) < 2 or batches[0]["task"] == batches[1]["task"]:
            continue
        checked += 1
        gap = batches[1]["t"] - batches[0]["t"]
        assert gap >= batches[1]["build_s"] > 0, (gap, batches[1]["build_s"])
    assert checked, "no shard searched two tasks"


def test_a_budget_too_small_is_refused_naming_the_smallest_useful_one(standin, tmp_path):
    out = subprocess.run([sys.executable, "-m", "workbench", "--home", str(tmp_path), "tune", "--model", standin,
                          "--input-shape", "1,3,32,32", "--trials", "2", "--trials-per-batch", "4", "--shards", "3"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "trials:" in out.stderr and "smallest useful budget is one trial per shard" in out.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_a_budget_below_a_batch_per_shard_measures_smaller_batches_and_says_so(standin, tmp_path):
    plan = wb.plan_run(wb.TuneSpec(model=standin, input_shape=INPUT_SHAPE, trials=8, trials_per_batch=4, shards=4),
                       home=str(tmp_path))
    budget = plan.budget
    assert budget.batch == 2 and budget.batch_asked == 4 and budget.tasks_tuned == 4
    assert sum(s.trials for s in plan.shards) == 8
    from workbench.plan.budget import describe

    assert "in batches of 2 (not 4: the budget is below a batch per shard)" in describe(budget)


def test_trials_per_task_tunes_every_task_with_that_many(standin, tmp_path):
    plan = wb.plan_run(wb.TuneSpec(model=standin, input_shape=INPUT_SHAPE, trials_per_task=8, trials_per_batch=4,
                                   shards=2), home=str(tmp_path))
    assert plan.budget.tasks_tuned == 22 and plan.trials == 22 * 8
    assert sum(s.trials for s in plan.shards) == 22 * 8
    assert wb.Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
