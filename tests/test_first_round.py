"""RandomFirstRound: the evolution after the random batch never measures a schedule twice (as TVM's alone);
the lean evolution neither, and it searches in less time than TVM's."""

from support import NO_MEASURE, script_json

_SEARCH = """
import json, logging, random, sys, tempfile, time
logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
import numpy as np, tvm, tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.cost_model import PyCostModel
from tvm.s_tir.meta_schedule.runner import LocalRunnerFuture, PyRunner
from workbench.hardware import detect, target_spec
from workbench.tuning.intrinsics import load_family
from workbench.models.load import load_model
from workbench.plan.tasks import extract_tasks
from workbench.tuning.task_scheduler.streaming import StreamingScheduler
from workbench.tuning.search_strategy import create as make_strategy
from workbench.tuning.search_strategy.random_first_round import RandomFirstRound

load_family("cpu", sys.argv[1])
target = target_spec("cpu", detect()).build()
task = extract_tasks(load_model("mlp-small").mod, target)[0]

""" + NO_MEASURE + """
@derived_object
class LikesWhatItMeasured(PyCostModel):
    # A trained model's view: the measured best score high. Here every measured schedule scores 1.
    def __init__(self):
        self.known = set()
    def load(self, path): pass
    def save(self, path): pass
    def update(self, context, candidates, results):
        self.known |= {tvm_ffi.structural_hash(c.sch.mod) for c in candidates}
    def predict(self, context, candidates):
        return np.array([1.0 if tvm_ffi.structural_hash(c.sch.mod) in self.known else random.uniform(0, .5)
                         for c in candidates])

out = {}
for name, strategy in (("evolutionary", "evolutionary"), ("random", RandomFirstRound()),
                       ("lean", make_strategy("evolutionary-lean", "evolutionary"))):
    with tempfile.TemporaryDirectory() as wd:
        ctxs, w = ms.relax_integration.extracted_tasks_to_tune_contexts([task], wd, strategy=strategy,
                                                                        num_threads=2, seed=0)
        db = ms.database.MemoryDatabase()
        t0 = time.process_time()
        ms.tune_tasks(tasks=ctxs, task_weights=w, work_dir=wd, max_trials_global=16, num_trials_per_iter=8,
                      builder=NoBuild(), runner=NoRun(), database=db, cost_model=LikesWhatItMeasured(),
                      measure_callbacks=[ms.measure_callback.AddToDatabase(), ms.measure_callback.UpdateCostModel()],
                      task_scheduler=StreamingScheduler(seed=0))
        cpu_s = time.process_time() - t0
        hashes = []
        for r in db.get_all_tuning_records():
            sch = tvm.s_tir.Schedule(r.workload.mod)
            r.trace.apply_to_schedule(sch, remove_postproc=False)
            hashes.append(tvm_ffi.structural_hash(sch.mod))
        out[name] = {"records": len(hashes), "distinct": len(set(hashes)), "cpu_s": cpu_s}
print(json.dumps(out))
"""


def test_the_evolution_does_not_remeasure_the_random_batch(tmp_path):
    got = script_json(_SEARCH, str(tmp_path / "cache"))
    # TVM's evolution alone keeps every measured schedule out of later batches (the control)
    assert got["evolutionary"]["distinct"] == got["evolutionary"]["records"] == 16, got
    # with the random first batch it must too: that batch's schedules are not in the evolution's measured set
    assert got["random"]["distinct"] == got["random"]["records"], got
    # the lean evolution: every schedule once, and its search (all there is to time here) costs less CPU
    assert got["lean"]["distinct"] == got["lean"]["records"] == 16, got
    assert got["lean"]["cpu_s"] < 0.7 * got["evolutionary"]["cpu_s"], got
    print(got)
