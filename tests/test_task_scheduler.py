"""StreamingScheduler on resume: a task with records starts from its best so far, so the raised budget goes where
the time is, not to a first batch of every task again."""
import json
import subprocess
import sys

from conftest import ROOT
from support import NO_MEASURE

_PICKS = """
import json, logging, random, sys, tempfile
logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.runner import LocalRunnerFuture, PyRunner
from workbench.hardware import detect, target_spec
from workbench.models import load_model
from workbench.shards import extract_tasks
from workbench.task_scheduler import StreamingScheduler

target = target_spec("cpu", detect()).build()
tasks = extract_tasks(load_model("mlp-small").mod, target)

""" + NO_MEASURE + """
names = [t.task_name for t in tasks]
out = {"order": names}
for case, prior in (("none", {}), ("second slower", {names[0]: 1e-6, names[1]: 1e-3}),
                    ("first slower", {names[0]: 1e-3, names[1]: 1e-6}), ("second new", {names[0]: 1e-3})):
    with tempfile.TemporaryDirectory() as wd:
        ctxs, w = ms.relax_integration.extracted_tasks_to_tune_contexts(tasks, wd, strategy="replay-trace",
                                                                        num_threads=1, seed=0)
        db = ms.database.MemoryDatabase()
        ms.tune_tasks(tasks=ctxs, task_weights=w, work_dir=wd, max_trials_global=4, num_trials_per_iter=4,
                      builder=NoBuild(), runner=NoRun(), database=db, cost_model="random",
                      measure_callbacks=[ms.measure_callback.AddToDatabase()],
                      task_scheduler=StreamingScheduler(seed=0, prior=prior))
        measured = {c.task_name for c in ctxs if db.has_workload(c.mod) and
                    len(db.get_top_k(db.commit_workload(c.mod), 100))}
        out[case] = sorted(measured)
print(json.dumps(out))
"""


def test_a_resumed_shard_spends_its_batch_where_the_time_is():
    proc = subprocess.run([sys.executable, "-c", _PICKS], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    first, second = got["order"]
    assert got["none"] == [first], got  # no records: the plan's order (costliest first) for first batches
    assert got["second slower"] == [second], got  # records: the task with the most time to win
    assert got["first slower"] == [first], got
    assert got["second new"] == [second], got  # a task without records still gets its first batch first
