"""A run's best record per task, built alone and timed as the tuner times it (3 calls, at least 10 ms), with a CPU
cache flush before each measurement and before each call; the run's final tuned model timed beside them.

    TVM_NUM_THREADS=2 python kernels.py <home>/runs/<run>     # on the 2-core box, after the run
"""
import sys

import numpy as np
import tvm
from records import built, merged
from tvm import relax

FLUSH = "cache_flush_cpu_non_first_arg"
WAYS = {"warm 3x": {"number": 3, "repeat": 1, "min_repeat_ms": 10},
        "flush 3x": {"number": 3, "repeat": 1, "min_repeat_ms": 10, "f_preproc": FLUSH},
        "flush each": {"number": 1, "repeat": 10, "f_preproc": FLUSH}}

run = sys.argv[1]
db, target = merged(run)
dev = tvm.cpu()
best: dict[str, tuple[float, object]] = {}
for rec in db.get_all_tuning_records():
    key = rec.workload.mod.script()
    t = float(np.mean([float(x) for x in rec.run_secs])) if rec.run_secs else np.inf
    if key not in best or t < best[key][0]:
        best[key] = (t, rec)
for t, rec in best.values():
    mod, name, args = built(rec, target, dev)
    timed = {way: [round(float(np.median(mod.time_evaluator(name, dev, **kw)(*args).results)) * 1e3, 2)
                   for _ in range(5)] for way, kw in WAYS.items()}
    print("kernel: tuner", round(t * 1e3, 2), "ms;", timed, flush=True)
x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal((128, 768)).astype("float32"), dev)
vm = relax.VirtualMachine(tvm.runtime.load_module(f"{run}/stages/100/tuned.so"), dev)
model = vm.time_evaluator("main", dev, number=5, repeat=3)
print("model", [round(float(np.median(model(x).results)) * 1e3, 2) for _ in range(5)])
