"""A run's best record per task, built alone and timed as the tuner times it (3 calls, at least 10 ms), with a CPU
cache flush before each measurement and before each call; the run's final tuned model timed beside them.

    TVM_NUM_THREADS=2 python kernels.py <home>/runs/<run>     # on the 2-core box, after the run
"""
import json
import sys

import numpy as np
import tvm
from tvm import relax
from tvm.s_tir import Schedule
from tvm.s_tir import meta_schedule as ms

from workbench.hardware import TargetSpec

FLUSH = "cache_flush_cpu_non_first_arg"
WAYS = {"warm 3x": {"number": 3, "repeat": 1, "min_repeat_ms": 10},
        "flush 3x": {"number": 3, "repeat": 1, "min_repeat_ms": 10, "f_preproc": FLUSH},
        "flush each": {"number": 1, "repeat": 10, "f_preproc": FLUSH}}

run = sys.argv[1]
target = TargetSpec.from_dict(json.load(open(f"{run}/plan.json"))["target"]).build()
merged = f"{run}/stages/100/merged"
db = ms.database.JSONDatabase(f"{merged}/database_workload.json", f"{merged}/database_tuning_record.json",
                              allow_missing=False)
dev = tvm.cpu()
best: dict[str, tuple[float, object]] = {}
for rec in db.get_all_tuning_records():
    key = rec.workload.mod.script()
    t = float(np.mean([float(x) for x in rec.run_secs])) if rec.run_secs else np.inf
    if key not in best or t < best[key][0]:
        best[key] = (t, rec)
for t, rec in best.values():
    sch = Schedule(rec.workload.mod)
    rec.trace.apply_to_schedule(sch, remove_postproc=False)
    lib = tvm.compile(sch.mod, target=target)
    name = sch.mod.get_global_vars()[0].name_hint
    args = [tvm.runtime.tensor(np.random.default_rng(0).standard_normal([int(d) for d in a.shape]).astype(str(a.dtype)),
                               dev) for a in ms.arg_info.ArgInfo.from_prim_func(sch.mod[name])]
    timed = {way: [round(float(np.median(getattr(lib, "mod", lib).time_evaluator(name, dev, **kw)(*args).results))
                         * 1e3, 2) for _ in range(5)] for way, kw in WAYS.items()}
    print("kernel: tuner", round(t * 1e3, 2), "ms;", timed, flush=True)
x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal((128, 768)).astype("float32"), dev)
vm = relax.VirtualMachine(tvm.runtime.load_module(f"{run}/stages/100/tuned.so"), dev)
model = vm.time_evaluator("main", dev, number=5, repeat=3)
print("model", [round(float(np.median(model(x).results)) * 1e3, 2) for _ in range(5)])
