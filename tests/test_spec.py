"""Bad input is refused before anything starts, with a message naming the field and what is allowed."""
import json
import subprocess
import sys

import pytest

from workbench.plan.budget import plan_budget
from workbench.plan.plan import Plan
from workbench.plan.tasks import TaskInfo, plan_shards, split_budget
from workbench.spec import Slice, SpecError, TuneSpec, parse_cluster, parse_slices, parse_tracker

BAD_SPECS = [
    ({"slices": (0,)}, "slices", "1 to 100"),
    ({"slices": (101,)}, "slices", "1 to 100"),
    ({"slices": "50,50"}, "slices", "once"),
    ({"slices": "half"}, "slices", "1 to 100"),
    ({"sweep_slices": (0, 50)}, "sweep_slices", "1 to 100"),
    ({"servers": 0}, "servers", "1 to 64"),
    ({"shards": 0}, "shards", "1 to 64"),
    ({"trials": 0}, "trials", "1 to 100000"),
    ({"trials": 2, "shards": 3}, "trials", "at least the number of shards"),
    ({"trials_per_batch": 0}, "trials_per_batch", "1 to 512"),
    ({"target": "tpu"}, "target", "auto, cpu, cuda"),
    ({"cost_model": "mlp"}, "cost_model", "xgb, random"),
    ({"strategy": "grid"}, "strategy", "evolutionary"),
    ({"tracker": "localhost:9190"}, "tracker", "HOST:PORT:KEY"),
    ({"tracker": "h:99999:k"}, "tracker", "1 to 65535"),
    ({"host": "not-an-ip"}, "host", "127.0.0.1"),
    ({"pinned_mem_mb": 1}, "pinned_mem_mb", ">= 64"),
    ({"input_shape": "1,x,3"}, "input_shape", "positive integers"),
    ({"input_shape": (1, 0)}, "input_shape", "positive integers"),
    ({"model": ""}, "model", "sample model name"),
    ({"seed": -1}, "seed", "0 to"),
    ({"measure_timeout_s": 1}, "measure_timeout_s", "5 to 3600"),
    ({"cluster": "somewhere"}, "cluster", "local or a Dask scheduler address tcp://HOST:PORT"),
    ({"cluster": "tcp://10.0.0.5:0"}, "cluster", "tcp://HOST:PORT"),
    ({"cluster": "tcp://10.0.0.5:8786"}, "host", "give the address of this machine that they reach"),
    ({"cluster": "tcp://10.0.0.5:8786", "host": "0.0.0.0"}, "host", "reach at 0.0.0.0"),
]


@pytest.mark.parametrize("fields,field,allowed", BAD_SPECS)
def test_bad_spec_names_field_and_range(fields, field, allowed):
    with pytest.raises(SpecError) as err:
        TuneSpec(**fields)
    assert err.value.field == field
    assert allowed in str(err.value)


def test_spec_round_trips_through_json():
    spec = TuneSpec(model="resnet18-small", slices="25,50", sweep_slices=[10, 100], input_shape="1,3,16,16")
    again = TuneSpec.from_json(spec.to_json())
    assert again == spec and again.slices == (25, 50) and again.input_shape == (1, 3, 16, 16)
    with pytest.raises(SpecError) as err:
        TuneSpec.from_dict({**json.loads(spec.to_json()), "colour": "red"})
    assert err.value.field == "colour"


def test_slice_cores_and_parsers():
    assert [Slice(p).cores(2) for p in (10, 50, 100)] == [1, 1, 2]
    assert [Slice(p).cores(16) for p in (10, 25, 50, 100)] == [2, 4, 8, 16]
    assert parse_slices("25%, 50") == (25, 50)
    assert parse_slices("50,") == (50,)  # one trailing comma, as a form field has it while typing
    for text, message in (("150", "150 is not a percentage from 1 to 100"),
                          ("abc", "abc is not a percentage from 1 to 100"),
                          ("", "give at least one percentage from 1 to 100, e.g. 25,50,100"),
                          ("50,,100", "an empty entry is not a percentage from 1 to 100"),
                          ([50, 50], "each percentage may appear once, got 50,50")):
        with pytest.raises(SpecError) as err:
            parse_slices(text, "sweep_slices")
        assert (err.value.field, err.value.message) == ("sweep_slices", message)
    assert parse_tracker("10.0.0.5:9190:h200") == ("10.0.0.5", 9190, "h200")
    assert TuneSpec(host="0.0.0.0").exposed and not TuneSpec().exposed
    assert parse_cluster("local") is None and parse_cluster("tcp://10.0.0.5:8786") == ("10.0.0.5", 8786)
    remote = TuneSpec(cluster="tcp://10.0.0.5:8786", host="10.0.0.2")  # its workers reach the tracker there
    assert TuneSpec.from_json(remote.to_json()) == remote
    assert TuneSpec(cluster="tcp://127.0.0.1:8786").host == "127.0.0.1"  # a scheduler on this machine
    assert TuneSpec(cluster="tcp://10.0.0.5:8786", tracker="10.0.0.7:9190:h200")  # the user's tracker


def test_sharding_balances_cost_and_splits_budget():
    tasks = [TaskInfo("big", 1, 1000.0, 0), TaskInfo("mid", 1, 600.0, 0), TaskInfo("small", 2, 200.0, 0),
             TaskInfo("copy", 1, 0.0, 400.0)]
    shards = plan_shards(tasks, 2, 100)
    assert sorted(t for s in shards for t in s.tasks) == ["big", "copy", "mid", "small"]
    assert sum(s.trials for s in shards) == 100
    costs = [s.cost for s in shards]
    assert max(costs) / min(costs) < 1.25
    with pytest.raises(SpecError) as err:
        plan_shards(tasks, 5, 100, per_task=32)  # a replica needs a batch of its own: 100 // 32 = 3 < 5
    assert err.value.field == "shards" and "from 1 to 4" in str(err.value) and "(4)" in str(err.value)
    assert split_budget(10, [1.0, 0.0, 0.0], [1, 1, 1]) == [8, 1, 1]
    # every tuned task gets at least one batch, however small its cost share (ResNet-18 in 8 shards left 6
    # untuned); a budget without a batch for every task tunes the costliest and leaves the rest on their
    # default schedule, instead of growing past what the user set (80 trials, not 88)
    many = ([TaskInfo(f"big{i}", 1, 1000.0, 0) for i in range(3)]
            + [TaskInfo(f"tiny{i}", 1, 1.0 + i, 0) for i in range(8)])
    budget = plan_budget(many, TuneSpec(trials=80, trials_per_batch=8, shards=4))
    assert budget.default == ("tiny0",) and len(budget.tuned) == 10 and budget.trials == 80
    by_name = {t.name: t for t in many}
    planned = plan_shards([by_name[n] for n in budget.tuned], 4, 80, per_task=8, defaults=[by_name["tiny0"]])
    assert all(s.trials >= 8 * len(s.tasks) for s in planned) and sum(s.trials for s in planned) == 80
    assert all(s.trials % 8 == 0 for s in planned) and sum(len(s.measure) for s in planned) == 1
    with pytest.raises(SpecError) as err:
        plan_shards(many, 4, 80, per_task=8)  # 11 tasks cannot each have a batch of 8 in 80 trials
    assert err.value.field == "trials"
    assert sum(split_budget(7, [0.3, 0.3, 0.4], [1, 1, 1])) == 7


def test_on_cuda_a_costly_tasks_later_batch_goes_before_a_cheap_tasks_first():
    """The measured worth of a task's k-th batch (bench/results/2026-12-02-h200-batch-yields): 1, 0.55, 0.4, 0.25,
    then 1 / k. A second batch of a 100-cost task (55) outbids a 45-cost task's first; a third (40) does not."""
    from workbench.plan.budget import batch_worth, describe, tasks_worth_a_batch

    assert [batch_worth(k) for k in (1, 2, 3, 4, 5, 8)] == [1.0, 0.55, 0.4, 0.25, 0.2, 0.125]
    ranked = [TaskInfo("a", 1, 100.0, 0), TaskInfo("b", 1, 100.0, 0), TaskInfo("c", 1, 45.0, 0),
              TaskInfo("d", 1, 10.0, 0)]
    assert [tasks_worth_a_batch(ranked, b) for b in (1, 2, 3, 4, 5, 7, 8)] == [1, 2, 2, 2, 3, 3, 3]
    assert tasks_worth_a_batch(ranked, 8, most_each=2) == 4  # a and b capped at two batches: c, then d
    # ResNet-18's shape of costs: 5 big convolutions, 4 of half, 3 of a quarter, 6 small
    resnet = ([TaskInfo(f"big{i}", 2, 100.0, 0) for i in range(5)]
              + [TaskInfo(f"half{i}", 1, 100.0, 0) for i in range(4)]
              + [TaskInfo(f"quarter{i}", 1, 49.0, 0) for i in range(3)]
              + [TaskInfo(f"small{i}", 1, 1.0, 0) for i in range(6)])
    spec = TuneSpec(trials=160, trials_per_batch=16, shards=4)
    everywhere, cuda = plan_budget(resnet, spec), plan_budget(resnet, spec, target="cuda")
    assert len(everywhere.tuned) == 10 and everywhere.later_batches is None
    # a big one's second batch (0.55 x 200 = 110) outbids a half's first (100): ten batches, two for each big one
    assert cuda.tuned == tuple(sorted(f"big{i}" for i in range(5)))
    assert cuda.trials == 160 and cuda.to_dict()["later_batches"] == [1.0, 0.55, 0.4, 0.25]
    assert "(the costliest tasks' later batches before the cheapest tasks' first)" in describe(cuda.to_dict())
    assert "later batches" not in describe(everywhere.to_dict())
    # the big ones' 2nd to 4th batches (110, 80, 50) and the halves' 2nd (55) outbid a quarter's first (49): 28
    # batches tune 9 tasks; a big one's 5th (40) does not, so the next three batches are the quarters' first
    assert len(plan_budget(resnet, spec.replace(trials=28 * 16), target="cuda").tuned) == 9
    assert len(plan_budget(resnet, spec.replace(trials=31 * 16), target="cuda").tuned) == 12
    # at least a task per shard, and a raised run's tuned tasks stay tuned (they hold records)
    assert len(plan_budget(resnet, spec.replace(trials=64, shards=4), target="cuda").tuned) == 4
    assert len(plan_budget(resnet, spec.replace(trials=320), target="cuda", keep=15).tuned) == 15
    assert len(plan_budget(resnet, spec.replace(trials=320), target="cuda", keep=30).tuned) == 18
    # trials_per_task still holds: each task's 2 batches, every task tuned
    capped = plan_budget(resnet, TuneSpec(trials_per_task=32, trials_per_batch=16, shards=2), target="cuda")
    assert capped.trials == 18 * 32 and len(capped.tuned) == 18


def test_the_plan_says_when_shards_measure_too_few_trials_for_their_cost_model():
    """TVM's XGBoost model scores at random until its client has measured 100 trials; each shard is a client."""
    from workbench.plan.budget import cost_model_note

    note = cost_model_note(TuneSpec(), [48, 48, 32, 32])
    assert note.startswith("4 of 4 shards measure fewer than 100 trials (32-48 each): TVM's XGBoost cost model "
                           "scores candidates at random")
    assert cost_model_note(TuneSpec(), [128, 96]).startswith("1 of 2 shards measure fewer than 100 trials (96):")
    alone = cost_model_note(TuneSpec(shards=1), [32])
    assert alone.startswith("the shard measures fewer than 100 trials (32):") and alone.endswith("(more trials would "
                                                                                                 "let it guide)")
    assert cost_model_note(TuneSpec(), [100, 160]) is None
    assert cost_model_note(TuneSpec(cost_model="random"), [16]) is None  # no model to guide
    assert cost_model_note(TuneSpec(strategy="replay-trace"), [16]) is None  # a search that asks no model
    # a raise says it again for its own shards, or no longer
    from workbench.orchestrate.launch import more_trials
    from workbench.plan.tasks import plan_shards

    tasks = [TaskInfo(f"t{i}", 1, float(100 - i), 0) for i in range(10)]
    spec = TuneSpec(model="mlp-small", trials=160, trials_per_batch=16, shards=4)
    budget = plan_budget(tasks, spec, target="cuda")
    shards = plan_shards(list(tasks[:len(budget.tuned)]), 4, 160, per_task=16)
    plan = Plan.from_dict({"tasks": [{**t.__dict__, "cost": t.cost} for t in tasks], "budget": budget.to_dict(),
                           "target": {"kind": "cuda"}, "shards": [x.to_dict() for x in shards],
                           "notes": ["a slice note", cost_model_note(spec, [x.trials for x in shards])]})
    _, raised = more_trials(spec, plan, 320)
    assert raised.notes[0] == "a slice note" and len(raised.notes) == 2 and raised.notes[1] != plan.notes[1]
    assert more_trials(spec, plan, 800)[1].notes == ("a slice note",)  # 200 trials a shard: guided


def test_more_shards_than_tasks_make_seeded_search_replicas():
    tasks = [TaskInfo("a", 1, 1000.0, 0), TaskInfo("b", 1, 1000.0, 0), TaskInfo("c", 1, 100.0, 0)]
    planned = plan_shards(tasks, 5, 80, per_task=16)
    # replicas go to the costliest tasks first; every shard is one task with a batch of its own
    assert sorted((s.tasks[0], s.replica) for s in planned) == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("c", 0)]
    assert sum(s.trials for s in planned) == 80 and all(s.trials >= 16 for s in planned)
    assert [s.index for s in planned] == list(range(5))
    assert all(type(s).from_dict(s.to_dict()) == s for s in planned)
    assert [s.tasks[0] for s in plan_shards(tasks, 9, 1000, per_task=8)] == ["a"] * 4 + ["b"] * 4 + ["c"]
    with pytest.raises(SpecError) as err:
        plan_shards(tasks, 25, 10000)  # at most 8 replicas per task
    assert "from 1 to 24" in str(err.value)


def test_unknown_model_and_k_above_task_count_refused_before_launch(tmp_path):
    from workbench.orchestrate import launch

    with pytest.raises(SpecError) as err:
        launch.plan_run(TuneSpec(model="no-such-model"))
    assert err.value.field == "model" and "mlp-small" in str(err.value)
    with pytest.raises(SpecError) as err:
        launch.tune(TuneSpec(model="mlp-small", shards=17, trials=64), home=str(tmp_path))  # 2 tasks x 8 replicas
    assert err.value.field == "shards"
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def _cli(*args, home):
    return subprocess.run([sys.executable, "-m", "workbench", "--home", str(home), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args,needle", [
    (["tune", "--slices", "0"], "slices"),
    (["tune", "--slices", "101"], "slices"),
    (["tune", "--shards", "0"], "shards"),
    (["tune", "--trials", "0"], "trials"),
    (["tune", "--trials", "many"], "--trials: must be a whole number"),
    (["tune", "--model", "nope"], "model"),
    (["tune", "--model", "/nonexistent/model.onnx"], "model"),
    (["tune", "--shards", "17", "--trials", "64"], "shards"),
    (["tune", "--target", "cuda"], "target"),
    (["tune", "--first-round", "greedy"], "first_round: must be one of auto, random, evolutionary"),
    (["tune", "--cluster", "10.0.0.5"], "cluster: must be local or a Dask scheduler address"),
    (["show", "no-such-run"], "run"),
    (["frobnicate"], "invalid choice"),
])
def test_cli_bad_input_exits_2_with_one_line(tmp_path, args, needle):
    proc = _cli(*args, home=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr


def test_cli_models_lists_samples(tmp_path):
    proc = _cli("models", home=tmp_path)
    assert proc.returncode == 0
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert {"mlp", "mlp-small", "resnet18", "mobilenetv2", "bert-layer"} <= set(names)


def test_import_is_light():
    code = ("import sys, workbench; workbench.list_models(); "
            "bad = [m for m in ('tvm', 'ipywidgets', 'plotly', 'pandas') if m in sys.modules]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_folder_without_a_spec_is_not_taken_for_a_run(tmp_path):
    """'last' and id prefixes skip a folder that holds no spec.json (a run still being created, or a stray
    folder); opening one by path says what is wrong instead of failing on a None."""
    from fake_engine import make_run

    import workbench as wb

    run_id = make_run(str(tmp_path))
    stray = tmp_path / "runs" / "zzz-not-a-run"
    stray.mkdir()
    assert wb.open_run("last", str(tmp_path)).id == run_id
    with pytest.raises(SpecError, match="^run: no run 'zzz'"):
        wb.open_run("zzz", str(tmp_path))
    with pytest.raises(SpecError, match="no readable spec.json"):
        wb.Run(str(stray))


def test_the_cli_ends_quietly_when_its_reader_closes_the_pipe():
    """`workbench models | head -1`: the reader has what it wanted; no BrokenPipeError traceback, exit 0."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "workbench", "models"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and "Traceback" not in err, err


def test_cpu_slices_of_one_core_count_are_swept_once():
    """On 2 cores 10, 20, 30, 50 and 70 % are all 1 core: one timing stands for them all (the one nearest the
    share it gets, 50 %), where before each was swept as a slice of its own. A GPU's MPS slices stay apart."""
    from workbench.results.sweep import sweep_points
    from workbench.servers.slices import SliceHost

    two = SliceHost("cpu", (0, 1))
    assert sweep_points([10, 20, 30, 50, 70, 100], two) == [(50, (10, 20, 30, 50, 70)), (100, (100,))]
    assert sweep_points([100, 10, 30], two) == [(30, (10, 30)), (100, (100,))]
    assert sweep_points([10, 50, 100], SliceHost("cuda", (0, 1))) == [(10, (10,)), (50, (50,)), (100, (100,))]
    sixteen = SliceHost("cpu", tuple(range(16)))
    assert [p for p, _ in sweep_points([10, 20, 30, 50, 70, 100], sixteen)] == [10, 20, 30, 50, 70, 100]


def test_the_plan_says_before_the_run_when_slices_share_their_cores(tmp_path):
    from workbench.hardware import Hardware
    from workbench.orchestrate import launch

    spec = TuneSpec(model="mlp-small", target="cpu", slices=(25, 50, 100), sweep_slices=(10, 30, 100))
    notes = launch.plan_run(spec, hw=Hardware(2), home=str(tmp_path)).notes  # an empty memory: planned by estimate
    assert len(notes) == 4
    assert notes[0].startswith("tuning slices 25, 50 % are both 1 of 2 cores: each is tuned, on the same number of "
                               "cores"), notes
    assert notes[1].startswith("sweep slices 10, 30 % are both 1 of 2 cores: timed once, as 30 %"), notes
    assert notes[2].startswith("on a CPU, TVM's untuned build is a naive loop nest, so a speedup over it means "
                               "little: "), notes
    assert notes[3].startswith("the shard measures fewer than 100 trials (32): TVM's XGBoost cost model"), notes
    quiet = launch.plan_run(spec.replace(slices=(50, 100), sweep_slices=(), trials=100), hw=Hardware(2),
                            home=str(tmp_path)).notes
    assert len(quiet) == 1 and quiet[0].startswith("on a CPU, TVM's untuned build is a naive loop nest")


def test_a_later_sweep_point_replaces_those_it_stands_for(tmp_path):
    """A sweep of 10 % (before merging) then one of 10-70 % timed once as 50 %: the table keeps the later point."""
    from fake_engine import make_run

    import workbench as wb
    from workbench.runs import event_types as ev
    from workbench.runs.events import EventWriter

    run_id = make_run(str(tmp_path))
    writer = EventWriter(str(tmp_path / "runs" / run_id / "events.jsonl"), "sweep")
    writer.emit(ev.SweepPoint(tuned_at=50, inferred_at=10, latency_ms_median=109.0))
    writer.emit(ev.SweepPoint(tuned_at=50, inferred_at=100, latency_ms_median=20.0))
    writer.emit(ev.SweepPoint(tuned_at=50, inferred_at=50, latency_ms_median=33.4, stands_for=[10, 20, 30, 50, 70]))
    sweep = wb.open_run(run_id, str(tmp_path)).sweep
    assert sweep[["inferred_at", "latency_ms_median"]].values.tolist() == [[50, 33.4], [100, 20.0]]


def test_a_raise_gives_every_shard_new_trials_by_cost_on_top_of_what_it_had():
    """resnet18:16's 100 % run at 320 trials (2026-12-02): the shard holding the six smallest tasks beside a costly
    convolution had 144 trials for their first batches. Split anew, 640 trials gave it 160: one new batch. A raise
    keeps each shard's budget and splits the new trials by cost."""
    from workbench.orchestrate.launch import more_trials

    tasks = ([TaskInfo(f"big{i}", 2, 100.0, 0) for i in range(5)]
             + [TaskInfo(f"half{i}", 1, 100.0, 0) for i in range(4)]
             + [TaskInfo(f"quarter{i}", 1, 49.0, 0) for i in range(3)]
             + [TaskInfo(f"small{i}", 1, 1.0, 0) for i in range(6)])
    spec = TuneSpec(model="mlp-small", trials=320, trials_per_batch=16, shards=4)
    budget = plan_budget(tasks, spec)  # the rule of 2026-12-02's plans: every task a batch
    shards = plan_shards(tasks, 4, 320, per_task=16)
    plan = Plan.from_dict({"tasks": [{**t.__dict__, "cost": t.cost} for t in tasks], "target": {"kind": "cuda"},
                           "budget": budget.to_dict(), "shards": [s.to_dict() for s in shards], "notes": []})
    crowded = max(shards, key=lambda s: len(s.tasks))
    assert len(crowded.tasks) >= 7 and crowded.trials >= 128
    _, raised = more_trials(spec, plan, 640)
    new = {s.index: s.trials - shards[s.index].trials for s in raised.shards}
    assert sum(s.trials for s in raised.shards) == 640 and sum(new.values()) == 320
    assert all(64 <= n <= 96 for n in new.values()), new  # the four shards' costs are about equal
    assert [set(s.tasks) for s in raised.shards] == [set(s.tasks) for s in shards]


def test_auto_strategy_is_a_lean_evolution_on_a_gpu_only() -> None:
    from workbench.options import strategy_for, strategy_note

    assert TuneSpec().strategy == "auto"
    assert strategy_for("auto", "cuda", "fp16") == "evolutionary-lean"
    assert strategy_for("auto", "cuda", "fp32") == "evolutionary-lean-few"
    assert strategy_for("auto", "llvm", "fp32") == strategy_for("auto", "llvm", "fp16") == "evolutionary"
    assert strategy_for("evolutionary", "cuda", "fp16") == "evolutionary"  # what the user set is what happens
    assert strategy_for("replay-trace", "llvm", "fp32") == "replay-trace"
    for precision in ("fp16", "fp32"):
        assert "--strategy evolutionary" in strategy_note("auto", "cuda", precision)
    assert "16 valid random schedules" in strategy_note("auto", "cuda", "fp32")
    assert strategy_note("auto", "llvm", "fp32") is None and strategy_note("evolutionary", "cuda", "fp16") is None


def test_auto_engine_options_cut_straggling_builds_on_cuda_only() -> None:
    from workbench.options import EngineOptions

    cuda, cpu = EngineOptions().resolved("cuda"), EngineOptions().resolved("llvm")
    assert (cuda.builder, cuda.first_round) == ("persistent-cut", "evolutionary")
    assert (cpu.builder, cpu.first_round) == ("persistent", "random")
    asked = EngineOptions.given(builder="persistent", first_round="random").resolved("cuda")
    assert (asked.builder, asked.first_round) == ("persistent", "random")  # what the user set is what happens
    with pytest.raises(SpecError) as err:
        EngineOptions(builder="fast")
    assert err.value.field == "builder" and "auto, persistent, persistent-cut, local" in str(err.value)
