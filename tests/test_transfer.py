"""Schedules re-applied from elsewhere (`tuning.transfer.reapply`) must stay records MetaSchedule can evolve from."""

from support import script_json

# Run in a process of its own, as a client: registering the intrinsics from the cache stubs TVM's package for the
# process. A CUDA target needs no GPU to schedule and postprocess for; its postprocessors (cooperative fetch, the
# GPU code check) are the ones a re-applied record must pass twice.
REAPPLIED = """
import itertools, json, sys
from workbench.tuning.intrinsics import load_family
load_family("cuda", sys.argv[1])
from tvm.s_tir import Schedule
from tvm.s_tir import meta_schedule as ms
from tvm_ffi import structural_hash
from workbench.hardware import TargetSpec
from workbench.models.load import load_model
from workbench.plan.tasks import extract_tasks
from workbench.tuning.transfer import reapply

target = TargetSpec("cuda", "sm_90").build()
task = next(t for t in extract_tasks(load_model("mlp-small").mod, target) if "matmul" in t.task_name)
mod = task.dispatched[0]
generator = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply", search_strategy="replay-trace",
                           task_name=task.task_name, num_threads=1).space_generator
postprocs, spaces = list(generator.postprocs), generator.generate_design_space(mod)


def drawn(seed):  # a random schedule of the design space that passes the postprocessors, as MetaSchedule draws one
    sch = Schedule(mod, seed=seed)
    spaces[seed % len(spaces)].trace.apply_to_schedule(
        sch, remove_postproc=True,
        decision_provider=lambda inst, _i, _a, d: None if inst.kind.name.startswith("Sample") else d)
    sch.enter_postproc()
    return sch if all(p.apply(sch) for p in postprocs) else None


out = []
for found in itertools.islice((s for seed in range(1, 60) if (s := drawn(seed))), 2):
    sch = reapply(found.trace, mod, postprocs, seed=1)
    row = {"reapplied": sch is not None}
    if sch is not None:  # what the evolution does with the measured record: replay it unprocessed, process it again
        row["marked"] = "EnterPostproc" in [inst.kind.name for inst in sch.trace.insts]
        again = Schedule(mod)
        try:
            sch.trace.apply_to_schedule(again, remove_postproc=True)
            again.enter_postproc()
            row["again"] = all(p.apply(again) for p in postprocs)
            row["same"] = structural_hash(again.mod) == structural_hash(sch.mod)
        except Exception as err:
            row["again"] = str(err).strip().splitlines()[-1]
    out.append(row)

# A library an older workbench wrote: one schedule recorded with the mark, one re-applied without it (postprocessed
# straight after its replay). The memory keeps and seeds only the first.
import os
from tvm.s_tir.meta_schedule.arg_info import ArgInfo
from workbench.runs import memory

unmarked = Schedule(mod)
found.trace.apply_to_schedule(unmarked, remove_postproc=True)
assert all(p.apply(unmarked) for p in postprocs)
os.makedirs(os.path.join(sys.argv[2], "older")), os.makedirs(os.path.join(sys.argv[2], "shard"))
older = ms.database.JSONDatabase(work_dir=os.path.join(sys.argv[2], "older"))
for i, sch in enumerate((found, unmarked)):
    older.commit_tuning_record(ms.database.TuningRecord(sch.trace, older.commit_workload(mod), [1e-6 * (2 - i)],
                                                        target, ArgInfo.from_prim_func(mod["main"])))
library = os.path.join(sys.argv[2], "library")
added, _ = memory.remember(library, os.path.join(sys.argv[2], "older"), {"run": "older"})
shard = ms.database.JSONDatabase(work_dir=os.path.join(sys.argv[2], "shard"))
older_as_library = memory.seed(os.path.join(sys.argv[2], "older"), shard, [type("Ctx", (), {
    "mod": mod, "task_name": task.task_name, "target": target})])
os.makedirs(os.path.join(sys.argv[2], "compiled"))
compiled = ms.database.JSONDatabase(work_dir=os.path.join(sys.argv[2], "compiled"))  # the finisher's: never searched
memory.seed(os.path.join(sys.argv[2], "older"), compiled, [type("Ctx", (), {
    "mod": mod, "task_name": task.task_name, "target": target})], top_k=1, evolvable_only=False)
from workbench.tuning import transfer
print(json.dumps({"rows": out, "remembered": added, "seeded": older_as_library,
                  "seeded_marked": [memory.evolvable(r.trace) for r in shard.get_all_tuning_records()],
                  "compiled_marked": [memory.evolvable(r.trace) for r in compiled.get_all_tuning_records()],
                  "related": len(transfer._records(os.path.join(sys.argv[2], "older")))}))
"""


def test_a_reapplied_cuda_schedule_can_be_postprocessed_again(cuda_intrinsics, tmp_path):
    """The evolution replays a database record without its postprocessing, then postprocesses it again
    (`PickBestFromDatabase`). A re-applied schedule whose trace lost the mark where postprocessing starts replays its
    cooperative-fetch rewrite too; the second pass then failed, and with it the shard's whole search on the GPU."""
    got = script_json(REAPPLIED, cuda_intrinsics, str(tmp_path), timeout=400)
    rows = got["rows"]
    assert len(rows) == 2 and all(r == {"reapplied": True, "marked": True, "again": True, "same": True}
                                  for r in rows), rows
    # an older workbench's unmarked record, though the faster, is neither remembered nor seeded
    assert got["remembered"] == 1 and list(got["seeded"].values()) == [1] and got["seeded_marked"] == [True], got
    assert got["related"] == 1, got  # nor re-applied to another shape
    # the finisher, which only compiles, takes the faster one: compiling replays a record's whole trace
    assert got["compiled_marked"] == [False], got
