#!/usr/bin/env bash
# The engine's smoke run on the lent H200 (device tool): 2 shards x 2 servers at 50 %, then a sweep.
# Run from the repo root after `source .device/rest/unpack.sh`. Copies the run's files to $OUT.
set -u
export PYTHONUNBUFFERED=1 WORKBENCH_HOME=/tmp/wbhome
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv
  nproc; python3 --version
  # Does a process that imported TVM (no CUDA call) fork children that can use CUDA?
  python3 - <<'PY'
import multiprocessing as mp, time
t=time.time(); import tvm; print("import tvm", round(time.time()-t,2), "s")
def child(q):
    import tvm
    d = tvm.cuda(0); q.put((d.exist, d.multi_processor_count))
for method in ("fork", "forkserver"):
    ctx = mp.get_context(method)
    if method == "forkserver": ctx.set_forkserver_preload(["tvm"])
    q = ctx.Queue(); p = ctx.Process(target=child, args=(q,)); t=time.time(); p.start(); p.join(60)
    print(method, "exit", p.exitcode, q.get() if p.exitcode == 0 else None, round(time.time()-t,2), "s")
PY
} 2>&1 | tee "$OUT/probe.log"
python3 -m workbench tune --target cuda --model "${MODEL:-mlp}" --shards 2 --servers 2 --slices 50 \
  --trials "${TRIALS:-32}" --trials-per-batch 8 --sweep 25,50,100 2>&1 | tee "$OUT/smoke.log"
run=$(ls -d $WORKBENCH_HOME/runs/* | tail -1)
cp "$run/events.jsonl" "$run/results.json" "$run/plan.json" "$OUT/" 2>/dev/null
cp "$run/sweep.csv" "$OUT/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$run" logs
ps aux | grep -E "workbench|tvm.exec|mps" | grep -v grep > "$OUT/leftover.txt" || true
