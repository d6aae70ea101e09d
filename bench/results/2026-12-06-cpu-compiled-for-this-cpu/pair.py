"""Time two runs' kept CPU models side by side in one process: interleaved rounds, each the median of calls."""
import glob, json, statistics, sys, time
import numpy as np, tvm
from tvm import relax

a_dir, b_dir = sys.argv[1], sys.argv[2]
def vm_of(d):
    so = glob.glob(f"{d}/runs/*/stages/100/tuned.so")[0]
    return so, relax.VirtualMachine(tvm.runtime.load_module(so), tvm.cpu())
(a_so, a), (b_so, b) = vm_of(a_dir), vm_of(b_dir)
shape = json.load(open(glob.glob(f"{a_dir}/runs/*/plan.json")[0]))["input_shape"]
x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal(shape).astype("float32"))
ya, yb = a["main"](x), b["main"](x)
ya = (ya if hasattr(ya, "numpy") else ya[0]).numpy(); yb = (yb if hasattr(yb, "numpy") else yb[0]).numpy()
print("max abs diff", float(np.abs(ya - yb).max()), "of", float(np.abs(ya).max()))
def one(vm):
    ts = []
    t_end = time.perf_counter() + 0.5
    while len(ts) < 3 or (time.perf_counter() < t_end and len(ts) < 100):
        t = time.perf_counter(); vm["main"](x); ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)
for vm in (a, b): one(vm)
ra, rb = [], []
for _ in range(9):
    ra.append(one(a)); rb.append(one(b))
print(json.dumps({"a": a_so, "b": b_so, "a_ms": statistics.median(ra), "b_ms": statistics.median(rb),
                  "a_over_b": statistics.median(ra) / statistics.median(rb), "b_won": sum(y < x for x, y in zip(ra, rb)),
                  "rounds_a": [round(v, 3) for v in ra], "rounds_b": [round(v, 3) for v in rb]}))
