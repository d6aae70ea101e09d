"""Compile one run's merged records (and none) for generic x86-64 and for this CPU; time each side by side."""
import glob, os, sys, time, statistics
import numpy as np
import tvm
from tvm import relax
from workbench.models.load import load_model
from workbench.results.compile import compile_with_database

run_dir, model_name = sys.argv[1], sys.argv[2]
cpu = tvm.target.codegen.llvm_get_system_cpu() if hasattr(tvm.target.codegen, "llvm_get_system_cpu") else "native"
print("system cpu", cpu)
m = load_model(model_name)
merged = sorted(glob.glob(os.path.join(run_dir, "**", "merged*"), recursive=True))
print("merged", merged)
db = merged[0] if merged else None
x = np.random.default_rng(0).standard_normal(m.input_shape).astype("float32")
libs = {}
for label, tgt in [("generic", {"kind": "llvm", "num-cores": 2}), (cpu, {"kind": "llvm", "mcpu": cpu, "num-cores": 2})]:
    for dbl, d in [("untuned", None), ("tuned", db)]:
        t0 = time.time()
        path = compile_with_database(m.mod, tvm.target.Target(tgt), d, f"/tmp/isa/{label}-{dbl}.so")
        print(label, dbl, "compiled in", round(time.time() - t0, 1), "s", flush=True)
        vm = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
        libs[(label, dbl)] = vm
dev = tvm.cpu()
inp = tvm.runtime.tensor(x, dev) if hasattr(tvm.runtime, "tensor") else tvm.nd.array(x, dev)
outs = {k: vm["main"](inp) for k, vm in libs.items()}
def arr(o):
    o = o[0] if isinstance(o, (list, tuple)) or hasattr(o, "__len__") and not hasattr(o, "numpy") else o
    return o.numpy()
ref = arr(outs[("generic", "untuned")])
for k, o in outs.items():
    print(k, "max abs diff vs generic untuned", float(np.abs(arr(o) - ref).max()))
rounds = {k: [] for k in libs}
for r in range(7):
    for k, vm in libs.items():
        f = vm.time_evaluator("main", dev, number=3 if "untuned" in k else 10, repeat=1, min_repeat_ms=200)
        rounds[k].append(f(inp).mean * 1e3)
for k, v in rounds.items():
    print(k, "median ms", round(statistics.median(v), 3), [round(a, 3) for a in v])
for dbl in ("untuned", "tuned"):
    g, c = rounds[("generic", dbl)], rounds[(cpu, dbl)]
    won = sum(b < a for a, b in zip(g, c))
    print(dbl, "generic/this-cpu ratio", round(statistics.median(g) / statistics.median(c), 3), "won", won, "of", len(g))
