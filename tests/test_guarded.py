"""A task whose search raises stops alone (`search_strategy.guarded`): the shard's other tasks go on."""

from support import NO_MEASURE, script_json

# The failure is injected: the one seen (a CUDA record MetaSchedule could not postprocess again) needs a GPU to tune.
# The task loop, the database and the strategies are TVM's, on this CPU.
_FAILING = """
import json, logging, random, sys, tempfile
logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.CRITICAL)
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.runner import LocalRunnerFuture, PyRunner
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy
from workbench.hardware import detect, target_spec
from workbench.models.load import load_model
from workbench.plan.tasks import extract_tasks
from workbench.tuning.intrinsics import load_family
from workbench.tuning.search_strategy import create
from workbench.tuning.task_scheduler.streaming import StreamingScheduler

load_family("cpu", sys.argv[1])  # as a client does: TVM's own import parses every family (tens of seconds)
target = target_spec("cpu", detect()).build()
tasks = extract_tasks(load_model("mlp-small").mod, target)
""" + NO_MEASURE + """

@derived_object
class FailsSecond(PySearchStrategy):  # TVM's ReplayTrace, whose second batch raises on the first task
    def __init__(self):
        self.inner, self.task, self.calls = ms.search_strategy.ReplayTrace(), "", 0
    def _initialize_with_tune_context(self, context):
        self.task = str(context.task_name)
        self.inner._initialize_with_tune_context(context)
    def pre_tuning(self, *args):
        self.inner.pre_tuning(*args)
    def generate_measure_candidates(self):
        self.calls += 1
        if self.task == tasks[0].task_name and self.calls == 2:
            raise RuntimeError("Check failed: injected\\nCannot find annotation key: meta_schedule.cooperative_fetch")
        return self.inner.generate_measure_candidates()
    def notify_runner_results(self, *args):
        self.inner.notify_runner_results(*args)
    def post_tuning(self):
        self.inner.post_tuning()
    def clone(self):
        return FailsSecond()

# The workbench's scheduler picks by time to win, and the runner's times are random: the other task's prior (1 ns,
# nothing left to win) makes the first task's second batch, the failing one, come before the other's later ones.
out = {"first": tasks[0].task_name}
for guarded in (True, False):
    failed = []
    with tempfile.TemporaryDirectory() as wd:
        strategy = create(FailsSecond(), on_failure=(lambda t, why: failed.append([t, why])) if guarded else None)
        ctxs, w = ms.relax_integration.extracted_tasks_to_tune_contexts(tasks, wd, strategy=strategy, num_threads=1,
                                                                        seed=0)
        db = ms.database.MemoryDatabase()
        try:
            ms.tune_tasks(tasks=ctxs, task_weights=w, work_dir=wd, max_trials_global=16, num_trials_per_iter=4,
                          builder=NoBuild(), runner=NoRun(), database=db, cost_model="random",
                          measure_callbacks=[ms.measure_callback.AddToDatabase()],
                          task_scheduler=StreamingScheduler(seed=0, prior={tasks[1].task_name: 1e-9}))
            raised = None
        except Exception as err:
            raised = str(err).strip().splitlines()[-1]
        out[str(guarded)] = {"raised": raised, "failed": failed,
                             "records": {c.task_name: len(db.get_top_k(db.commit_workload(c.mod), 100)) for c in ctxs
                                         if db.has_workload(c.mod)}}
print(json.dumps(out))
"""


def test_a_task_whose_search_raises_stops_alone_and_is_reported(tmp_path):
    got = script_json(_FAILING, str(tmp_path / "cache"))
    first, guarded, bare = got["first"], got["True"], got["False"]
    assert "cooperative_fetch" in (bare["raised"] or ""), bare  # unguarded, the failure ends every task's tuning
    assert guarded["raised"] is None, guarded
    assert guarded["failed"] == [[first, "Cannot find annotation key: meta_schedule.cooperative_fetch"]], guarded
    [second] = [t for t in guarded["records"] if t != first]
    # the failed task keeps its first batch; the other task measures the rest of the budget
    assert guarded["records"] == {first: 4, second: 12}, guarded


def test_a_failed_search_is_said_as_such():
    from workbench.runs.event_types import FAILURES, TaskSearchFailed
    from workbench.runs.events import as_dict, describe, parse

    e = TaskSearchFailed(t=1.0, shard=1, tuned_at=50, task="fused_conv2d", reason="Cannot find annotation key: x")
    assert parse(as_dict(e)) == e and TaskSearchFailed in FAILURES
    said = describe(e)
    assert "shard 1" in said and "fused_conv2d's search FAILED" in said and "the shard goes on" in said, said
