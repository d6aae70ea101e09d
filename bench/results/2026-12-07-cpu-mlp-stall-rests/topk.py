"""Each task's top-k records (by the tuner's figure) built alone and timed again as the tuner times them (3 calls,
at least 10 ms), 7 rounds: does re-timing the finalists pick another kernel?

    TVM_NUM_THREADS=2 python topk.py <home>/runs/<run> 5     # on the 2-core box, after the run
"""
import json, sys
import numpy as np
import tvm
from tvm.s_tir import Schedule
from tvm.s_tir import meta_schedule as ms
from workbench.hardware import TargetSpec

run, k = sys.argv[1], int(sys.argv[2])
target = TargetSpec.from_dict(json.load(open(f"{run}/plan.json"))["target"]).build()
m = f"{run}/stages/100/merged"
db = ms.database.JSONDatabase(f"{m}/database_workload.json", f"{m}/database_tuning_record.json", allow_missing=False)
dev = tvm.cpu()
seen = {}
for rec in db.get_all_tuning_records():
    seen.setdefault(rec.workload.mod.script(), rec.workload)
for wl in seen.values():
    recs = db.get_top_k(wl, k)
    for i, rec in enumerate(recs):
        sch = Schedule(wl.mod)
        rec.trace.apply_to_schedule(sch, remove_postproc=False)
        lib = tvm.compile(sch.mod, target=target)
        name = sch.mod.get_global_vars()[0].name_hint
        args = [tvm.runtime.tensor(np.random.default_rng(0).standard_normal([int(d) for d in a.shape]).astype(str(a.dtype)), dev)
                for a in ms.arg_info.ArgInfo.from_prim_func(sch.mod[name])]
        f = lib.mod.time_evaluator(name, dev, number=3, repeat=1, min_repeat_ms=10)
        rounds = [round(float(np.median(f(*args).results)) * 1e3, 2) for _ in range(7)]
        tuner = float(np.mean([float(x) for x in rec.run_secs])) * 1e3
        print(name, "rank", i, "tuner", round(tuner, 2), "ms; retimed", rounds, "median", round(float(np.median(rounds)), 2), flush=True)
