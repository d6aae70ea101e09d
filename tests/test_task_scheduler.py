"""StreamingScheduler on resume: a task with records starts from its best so far, so the raised budget goes where
the time is, not to a first batch of every task again; and `trials_per_task` counts those records too."""

from support import NO_MEASURE, script_json

_PICKS = """
import json, logging, random, sys, tempfile
logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.runner import LocalRunnerFuture, PyRunner
from workbench.hardware import detect, target_spec
from workbench.models.load import load_model
from workbench.plan.tasks import extract_tasks
from workbench.tuning.intrinsics import load_family
from workbench.tuning.task_scheduler.streaming import StreamingScheduler

load_family("cpu", sys.argv[1])  # as a client does: TVM's own import parses every family (tens of seconds)
target = target_spec("cpu", detect()).build()
tasks = extract_tasks(load_model("mlp-small").mod, target)

""" + NO_MEASURE + """
names = [t.task_name for t in tasks]
out = {"order": names}
first, second = names
for case, prior, done, cap, trials in (
        ("none", {}, {}, None, 4), ("second slower", {first: 1e-6, second: 1e-3}, {}, None, 4),
        ("first slower", {first: 1e-3, second: 1e-6}, {}, None, 4), ("second new", {first: 1e-3}, {}, None, 4),
        ("first slower, capped", {first: 1e-3, second: 1e-6}, {first: 8, second: 4}, 8, 4),
        ("first near its cap", {}, {first: 6}, 8, 16)):
    with tempfile.TemporaryDirectory() as wd:
        ctxs, w = ms.relax_integration.extracted_tasks_to_tune_contexts(tasks, wd, strategy="replay-trace",
                                                                        num_threads=1, seed=0)
        db = ms.database.MemoryDatabase()
        ms.tune_tasks(tasks=ctxs, task_weights=w, work_dir=wd, max_trials_global=trials, num_trials_per_iter=4,
                      max_trials_per_task=cap, builder=NoBuild(), runner=NoRun(), database=db, cost_model="random",
                      measure_callbacks=[ms.measure_callback.AddToDatabase()],
                      task_scheduler=StreamingScheduler(seed=0, prior=prior, done=done, cap=cap))
        out[case] = {c.task_name: len(db.get_top_k(db.commit_workload(c.mod), 100)) for c in ctxs
                     if db.has_workload(c.mod)}

@derived_object
class SomeBuild(PyBuilder):  # a quarter of the candidates fail to build: the cost model never learns those
    def build(self, inputs):
        return [BuilderResult(None, "failed") if i % 4 == 0 else BuilderResult("/nonexistent.so", None)
                for i, _ in enumerate(inputs)]

with tempfile.TemporaryDirectory() as wd:  # the scheduler's count of the samples its cost model holds
    ctxs, w = ms.relax_integration.extracted_tasks_to_tune_contexts(tasks, wd, strategy="replay-trace",
                                                                    num_threads=1, seed=0)
    model = ms.cost_model.CostModel.create("xgb", num_tuning_cores=1)
    scheduler = StreamingScheduler(seed=0, warmup=100, learned=5)
    ms.tune_tasks(tasks=ctxs, task_weights=w, work_dir=wd, max_trials_global=48, num_trials_per_iter=16,
                  builder=SomeBuild(), runner=NoRun(), database=ms.database.MemoryDatabase(), cost_model=model,
                  measure_callbacks=[ms.measure_callback.AddToDatabase(), ms.measure_callback.UpdateCostModel()],
                  task_scheduler=scheduler)
    out["samples"] = [scheduler.turns.samples, model.data_size]
print(json.dumps(out))
"""


def test_a_resumed_shard_spends_its_batch_where_the_time_is(tmp_path):
    got = script_json(_PICKS, str(tmp_path / "cache"))
    first, second = got["order"]
    assert got["none"] == {first: 4}, got  # no records: the plan's order (costliest first) for first batches
    assert got["second slower"] == {second: 4}, got  # records: the task with the most time to win
    assert got["first slower"] == {first: 4}, got
    assert got["second new"] == {second: 4}, got  # a task without records still gets its first batch first
    # trials_per_task=8 counts the trials a task had before the resume: TVM's own cap counts this session's only
    assert got["first slower, capped"] == {second: 4}, got  # first has its 8: the batch goes to second
    assert got["first near its cap"] == {first: 4, second: 8}, got  # 6 + one batch; second's 8 end the shard
    # the scheduler counts what its cost model learnt: the 5 taught before, then 12 built candidates a batch, for the
    # 2 batches it joined (TVM joins the last after the scheduler's loop); the model holds 3 x 12
    assert got["samples"] == [5 + 2 * 12, 3 * 12], got


_WARM = """
import json, logging, os, random, sys, tempfile
logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.runner import LocalRunnerFuture, PyRunner
from workbench.tuning.cost_model import warm as warm_cost_model
from workbench.hardware import detect, target_spec
from workbench.tuning.intrinsics import load_family
from workbench.models.load import load_model
from workbench.plan.tasks import extract_tasks

load_family("cpu", sys.argv[1])  # as a client does: TVM's own import parses every family (tens of seconds)
target = target_spec("cpu", detect()).build()
tasks = extract_tasks(load_model("mlp-small").mod, target)
""" + NO_MEASURE + """
out = {}
with tempfile.TemporaryDirectory() as wd:
    ctxs, w = ms.relax_integration.extracted_tasks_to_tune_contexts(tasks, wd, strategy="replay-trace",
                                                                    num_threads=1, seed=0)
    db = ms.database.JSONDatabase(work_dir=wd)
    out["empty"] = warm_cost_model(ms.cost_model.CostModel.create("xgb", num_tuning_cores=1), db, ctxs, [wd])
    ms.tune_tasks(tasks=ctxs, task_weights=w, work_dir=wd, max_trials_global=48, num_trials_per_iter=16,
                  builder=NoBuild(), runner=NoRun(), database=db, cost_model="random",
                  measure_callbacks=[ms.measure_callback.AddToDatabase()])
    out["records"] = sum(len(db.get_top_k(db.commit_workload(c.mod), 100000)) for c in ctxs)
    model = ms.cost_model.CostModel.create("xgb", num_tuning_cores=1)
    out["learned"] = warm_cost_model(model, db, ctxs)
    out["data_size"] = model.data_size
    with tempfile.TemporaryDirectory() as own:  # a shard with no records of its own, beside this one's folder
        sibling = ms.cost_model.CostModel.create("xgb", num_tuning_cores=1)
        out["from_sibling"] = warm_cost_model(sibling, ms.database.JSONDatabase(work_dir=own), ctxs,
                                              [wd, os.path.join(own, "shard-9")])  # the second has no database
        out["sibling_data_size"] = sibling.data_size
print(json.dumps(out))
"""


def test_a_resumed_shard_cost_model_learns_its_records_before_the_first_batch(tmp_path):
    """TVM's XGBoost model scores candidates at random until it holds 100 samples, and `tune_tasks` starts it empty:
    a resumed shard teaches it every record of its database first, and those of its sibling shards (one unsharded
    tune's model would hold them all), so the raised budget's first batch is guided."""
    got = script_json(_WARM, str(tmp_path / "cache"))
    assert got["empty"] == [0, 0]  # nothing of its own, and its sibling's database is still empty
    assert got["records"] >= 48 and got["learned"] == [got["records"], 0] and got["data_size"] == got["records"], got
    assert got["from_sibling"] == [0, got["records"]] == [0, got["sibling_data_size"]], got


def test_a_task_whose_best_stalls_rests_and_gets_its_turns_back():
    """A stalled task sits out PATIENCE of the others' batches, then competes again; each further stalled batch
    doubles its rest, up to MAX_REST; a better best ends them. The case that asked for it (an H100 mlp run, seed 1):
    the matmul holding most of the model's time (61 % when it stalled) stood still 3 batches at 77.7 us; a rest
    without end gave every later batch to the other matmul (the model gained 4 %), though in seed 0 the same matmul
    stood still for 2 batches at 85.3 us, then reached 50.3 us."""
    import random

    from workbench.tuning.task_scheduler.streaming import MAX_REST, PATIENCE, Turns, pick, rest_after, stalled

    history = [[5e-4, 5e-4, 5e-4, 5e-4], [1e-4, 9e-5]]  # task 0: far more time, but no better best for 3 batches
    weights = [1.0, 1.0]
    assert pick([0, 1], history, [PATIENCE, 0], weights, 0.2, 3, random.Random(0)) == 1  # resting: the other goes
    assert pick([0, 1], history, [0, 0], weights, 0.2, 3, random.Random(0)) == 0  # rested: the gradient picks it
    assert pick([0, 1], history, [5, 2], weights, 0.2, 3, random.Random(0)) == 0  # all rest: the gradient, among all
    assert pick([0, 1], [[], [1e-4]], [0, 0], weights, 0.2, 3, random.Random(0)) == 0  # a first batch comes first
    assert stalled(1e-4, 1e-4) and stalled(1e-4, 0.99995e-4) and not stalled(1e-4, 0.9e-4)
    assert not stalled(float("inf"), 1e-4)
    assert [rest_after(k) for k in range(PATIENCE + 3)] == [0] * PATIENCE + [PATIENCE, 2 * PATIENCE, 4 * PATIENCE]
    assert rest_after(PATIENCE + 30) == MAX_REST  # never shut out for good

    # The run's case, from the two tasks' default times: task 0 never beats its first batch, task 1 gains 1 % a batch
    turns = Turns([[131.5e-6], [53.4e-6]], weights)
    best = [77.7e-6, 49.1e-6]
    order = []
    for _ in range(60):
        task = turns.pick([0, 1])
        order.append(task)
        best[task] = best[task] * (0.99 if task == 1 else 1.0)
        turns.joined(task, best[task])
    zeros = [k for k, t in enumerate(order) if t == 0]  # its first batch improves, the next PATIENCE do not
    gaps = [b - a for a, b in zip(zeros[PATIENCE:], zeros[PATIENCE + 1:])]  # from its first rest on
    # its turns come back, ever more rarely: after each rest of r of the others' batches, its own batch
    assert gaps[:4] == [rest_after(k) + 1 for k in range(PATIENCE, PATIENCE + 4)] == [4, 7, 13, 13], order
    assert order.count(1) > 3 * order.count(0), order  # the improving task still gets most of the shard

    # a rested task whose next batch finds a faster kernel is back in the race: its rests end
    turns = Turns([[1e-3], [1e-4]], weights)
    for best_s in (5e-4,) + (5e-4,) * PATIENCE:
        turns.joined(0, best_s)
    assert turns.resting[0] == PATIENCE
    turns.joined(0, 2e-4)
    assert turns.stale[0] == 0 and turns.resting[0] == 0


def test_stalls_count_only_once_the_cost_model_has_learnt():
    """Batches chosen while the cost model still scores at random (fewer than `warmup` samples, TVM's XGB: 100) do not
    count as stalls: the case (an H100 mlp run, seed 1) is the matmul holding 71 % of the time, still at its default
    (131 us) after 3 random batches, rested for 3 of the other matmul's batches, which found nothing either; the
    model stood at 0.180 ms (untuned 0.191) until 158 s of a 274 s run."""
    from workbench.tuning.task_scheduler.streaming import PATIENCE, Turns

    def replay(warmup: int, samples: int = 0) -> list[int]:
        """The run's defaults (s); task 0's batches stay at 158.4 us (its default kept), task 1's first reaches 42.5
        us; nothing improves until the 7th batch (96 samples before it), then every batch gains 10 %."""
        turns = Turns([[131.0e-6], [53.6e-6]], [1.0, 1.0], warmup=warmup, samples=samples)
        best, order = [158.4e-6, 42.5e-6], []
        for k in range(10):
            task = turns.pick([0, 1])
            order.append(task)
            if k >= 6:
                best[task] *= 0.9
            turns.joined(task, best[task], 16)
        return order

    blind = replay(warmup=0)  # every stall counts: the costly task rests after its 3 random batches
    assert blind[:7] == [0, 0, 1, 0, 1, 1, 1], blind
    learnt = replay(warmup=100)  # the first 7 batches (0-96 samples before each) do not count
    assert learnt[:7] == [0, 0, 1, 0, 0, 0, 0] and learnt.count(0) > blind.count(0), learnt
    assert replay(warmup=100, samples=100) == blind  # a model taught 100 records before the first batch has learnt

    # past the warm-up, a stall counts from the batch chosen by a model that had learnt: PATIENCE of them rest a task
    turns = Turns([[1e-3], [1e-4]], [1.0, 1.0], warmup=32)
    for _ in range(2):
        turns.joined(0, 5e-4, 16)  # chosen with 0 and 16 samples: at random
    assert turns.stale[0] == 0 and turns.resting[0] == 0
    for k in range(PATIENCE):
        turns.joined(0, 5e-4, 16)
        assert turns.stale[0] == k + 1
    assert turns.resting[0] == PATIENCE


def test_on_a_gpu_a_costly_tasks_next_batch_comes_before_a_cheap_tasks_first():
    """Where the plan spends batches by worth (CUDA), each task's history starts from its default schedule's measured
    time, so the gradient rule sends a costly task's second batch before a cheap task's first, as the plan line says;
    elsewhere, and for a task whose default was not timed, first batches come first."""
    import random

    from workbench.plan.budget import batches_by_worth
    from workbench.tuning.task_scheduler.streaming import Turns, pick, stalled, starting_points

    assert batches_by_worth("cuda") and not batches_by_worth("cpu")
    defaults = {"big": 1e-3, "mid": 3e-4, "small": 1e-4}
    assert starting_points({"mid": 2e-4}, defaults, by_worth=False) == {"mid": 2e-4}  # a resumed best only
    start = starting_points({"mid": 2e-4, "big": 2e-3}, defaults, by_worth=True)
    assert start == {"big": 1e-3, "mid": 2e-4, "small": 1e-4}  # the faster of record and default

    names = ["big", "mid", "small"]
    turns = Turns([[start[n]] for n in names], [1.0, 1.0, 1.0])
    order = []
    for _ in range(6):  # each batch halves the task's best: the costly task keeps the lead longer
        i = turns.pick([0, 1, 2])
        order.append(names[i])
        turns.joined(i, turns.history[i][-1] / 2)
    assert order[:2] == ["big", "big"] and order.index("small") > order.index("mid") > 1, order
    # the same tasks without a timed default: every first batch first, in the plan's order
    assert pick([0, 1, 2], [[1e-3, 5e-4], [], []], [0, 0, 0], [1.0] * 3, 0.2, 3, random.Random(0)) == 1
    # a first batch that does not beat the default leaves the task's best there, and counts as no improvement
    assert stalled(1e-4, min(1e-4, 4e-4))
