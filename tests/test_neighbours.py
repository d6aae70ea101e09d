"""Neighbours: a neighbour differs from the best trace in one decision by one step (a tile's product kept, its
innermost factor within the rule's limit), and a search that alternates TVM's evolution with neighbour batches
measures its budget exactly, never one schedule twice, with neighbour batches among them."""

from support import NO_MEASURE, script_json

_SEARCH = """
import json, logging, math, random, sys, tempfile
logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
import tvm, tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.runner import LocalRunnerFuture, PyRunner
from workbench.hardware import detect, target_spec
from workbench.tuning.intrinsics import load_family
from workbench.models.load import load_model
from workbench.plan.tasks import extract_tasks
from workbench.tuning.task_scheduler.streaming import StreamingScheduler
from workbench.tuning.search_strategy import create as make_strategy
from workbench.tuning.search_strategy.neighbours import neighbour_traces

load_family("cpu", sys.argv[1])
target = target_spec("cpu", detect()).build()
task = extract_tasks(load_model("mlp-small").mod, target)[0]
random.seed(0)
batches = []
logging.getLogger("workbench.tuning.neighbours").setLevel(logging.INFO)
logging.getLogger("workbench.tuning.neighbours").addHandler(type("Count", (logging.Handler,), {
    "emit": lambda self, record: batches.append(record.getMessage())})())

""" + NO_MEASURE + """
out = {"steps": [], "limits_kept": True}
with tempfile.TemporaryDirectory() as wd:
    strategy = make_strategy("evolutionary-neighbours")
    ctxs, w = ms.relax_integration.extracted_tasks_to_tune_contexts([task], wd, strategy=strategy, num_threads=2,
                                                                    seed=0)
    trace = ctxs[0].space_generator.generate_design_space(ctxs[0].mod)[0].trace
    for n in neighbour_traces(trace):
        changed = [(i, trace.decisions[i], d) for i, d in n.decisions.items() if str(trace.decisions[i]) != str(d)]
        for inst, old, new in changed:
            if inst.kind.name == "SamplePerfectTile":
                old, new = [int(x) for x in old], [int(x) for x in new]
                limit = int(inst.attrs[1])
                out["limits_kept"] &= math.prod(old) == math.prod(new) and (limit <= 0 or new[-1] <= limit)
                ratio = sorted(a / b for a, b in zip(new, old) if a != b)
                out["steps"].append(["tile", len(changed), len(ratio), round(ratio[0] * ratio[1], 6)])
            else:
                out["steps"].append([inst.kind.name, len(changed), int(old) != int(new)])
    db = ms.database.MemoryDatabase()
    ms.tune_tasks(tasks=ctxs, task_weights=w, work_dir=wd, max_trials_global=48, num_trials_per_iter=8,
                  builder=NoBuild(), runner=NoRun(), database=db, cost_model="random",
                  measure_callbacks=[ms.measure_callback.AddToDatabase()], task_scheduler=StreamingScheduler(seed=0))
    hashes = []
    for r in db.get_all_tuning_records():
        sch = tvm.s_tir.Schedule(r.workload.mod)
        r.trace.apply_to_schedule(sch, remove_postproc=False)
        hashes.append(tvm_ffi.structural_hash(sch.mod))
    out |= {"records": len(hashes), "distinct": len(set(hashes)),
            "neighbour_batches": len(batches), "said": batches[:1]}
print(json.dumps(out))
"""


def test_neighbours_are_one_step_away_and_the_search_measures_each_schedule_once(tmp_path):
    out = script_json(_SEARCH, str(tmp_path / "cache"))
    steps = out["steps"]
    assert steps and out["limits_kept"], out
    tiles = [s for s in steps if s[0] == "tile"]
    assert tiles and all(s[1:] == ["tile", 1, 2, 1.0][1:] for s in tiles), tiles  # one decision, two factors, x p / p
    assert all(s[1] == 1 and s[2] for s in steps if s[0] != "tile"), steps
    assert out["records"] == 48 and out["distinct"] == 48, out
    assert out["neighbour_batches"] >= 1, out  # random times: some search batch stalls, a descent follows
