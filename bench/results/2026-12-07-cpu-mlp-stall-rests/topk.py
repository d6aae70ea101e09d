"""Each task's top-k records (by the tuner's figure) built alone and timed again as the tuner times them (3 calls,
at least 10 ms), 7 rounds: does re-timing the finalists pick another kernel?

    TVM_NUM_THREADS=2 python topk.py <home>/runs/<run> 5     # on the 2-core box, after the run
"""
import sys

import numpy as np
import tvm
from records import built, merged

run, k = sys.argv[1], int(sys.argv[2])
db, target = merged(run)
dev = tvm.cpu()
seen = {}
for rec in db.get_all_tuning_records():
    seen.setdefault(rec.workload.mod.script(), rec.workload)
for wl in seen.values():
    for i, rec in enumerate(db.get_top_k(wl, k)):
        mod, name, args = built(rec, target, dev)
        f = mod.time_evaluator(name, dev, number=3, repeat=1, min_repeat_ms=10)
        rounds = [round(float(np.median(f(*args).results)) * 1e3, 2) for _ in range(7)]
        tuner = float(np.mean([float(x) for x in rec.run_secs])) * 1e3
        print(name, "rank", i, "tuner", round(tuner, 2), "ms; retimed", rounds, "median",
              round(float(np.median(rounds)), 2), flush=True)
