"""Hand-made run folders, in the engine's on-disk format, for UI tests that need no tuning.

`make_run(home, ...)` writes spec.json, plan.json, events.jsonl, results.json and optionally sweep.csv
under <home>/runs/<id>/ so that `workbench.open_run` reads it like a real run. With `live_pid` the run
looks like it is still running (its 'supervisor' is that process group).
"""
from __future__ import annotations

import dataclasses
import json
import os
import time

import pandas as pd

from workbench.spec import TuneSpec

SWEEP = pd.DataFrame({
    "model": ["mlp-small"] * 6,
    "tuned_at": [50, 50, 50, 100, 100, 100],
    "inferred_at": [25, 50, 100, 25, 50, 100],
    "latency_ms_median": [1.10, 0.55, 0.36, 1.50, 0.58, 0.30],
    "latency_ms_iqr": [0.02, 0.01, 0.01, 0.03, 0.01, 0.01],
})


def _events(t0: float, slices: tuple[int, ...], finished: bool) -> list[dict]:
    ev: list[dict] = [
        {"t": t0, "kind": "run_started", "source": "supervisor", "run_id": "x", "target": {"kind": "cpu"}, "pid": 1},
        {"t": t0, "kind": "phase", "source": "supervisor", "phase": "servers"},
        {"t": t0 + 0.1, "kind": "hardware", "source": "supervisor", "target": "cpu", "device": "CPU, 2 cores",
         "gpu_note": "no GPU"},
    ]
    t = t0 + 1
    for stage in slices:
        ev.append({"t": t, "kind": "phase", "source": "supervisor", "phase": "tuning", "tuned_at": stage})
        ev.append({"t": t, "kind": "server_ready", "source": "supervisor", "server": 0, "tuned_at": stage,
                   "slice_percent": stage, "slice_applied": True, "reason": "1 of 2 cores", "port": 1})
        for shard, task in enumerate(("fused_matmul_add_relu", "fused_matmul1_add1")):
            ev.append({"t": t, "kind": "shard_planned", "source": "supervisor", "shard": shard, "tuned_at": stage,
                       "tasks": [task], "trials_budget": 4, "cost": 1.0})
            ev.append({"t": t, "kind": "shard_started", "source": f"shard{shard}", "shard": shard,
                       "tuned_at": stage, "pid": 1, "tasks": [task], "trials_budget": 4})
        for batch in (1, 2):
            t += 1
            for shard, task in enumerate(("fused_matmul_add_relu", "fused_matmul1_add1")):
                best = (5.0 if shard == 0 else 1.0) / batch
                ev.append({"t": t, "kind": "batch", "source": f"shard{shard}", "shard": shard, "tuned_at": stage,
                           "task": task, "task_id": shard, "weight": 1, "flop": 1000, "batch_size": 2,
                           "trials_done": 2 * batch, "trials_budget": 4, "shard_trials_done": 2 * batch,
                           "latest_us": [best], "best_us": best, "best_gflops": 1.0, "build_errors": 0,
                           "run_errors": 0, "est_shard_us": best, "shard_tasks_measured": 1, "shard_tasks": 1})
            ev.append({"t": t, "kind": "telemetry", "source": "telemetry", "cpu_percent": 90.0 + batch,
                       "mem_percent": 5.0, "gpus": [], "gpu_note": "CPU target: GPU not sampled"})
        t += 1
        for shard in (0, 1):
            ev.append({"t": t, "kind": "shard_finished", "source": "supervisor", "shard": shard, "tuned_at": stage,
                       "exit_code": 0, "trials_done": 4})
        ev.append({"t": t, "kind": "phase", "source": "supervisor", "phase": "merging", "tuned_at": stage})
        t += 1
    if finished:
        ev.append({"t": t, "kind": "phase", "source": "supervisor", "phase": "done"})
        ev.append({"t": t, "kind": "run_finished", "source": "supervisor", "status": "done", "message": ""})
    return ev


def make_run(home: str, *, slices: tuple[int, ...] = (50, 100), finished: bool = True, sweep: bool = False,
             live_pid: int | None = None, run_id: str | None = None) -> str:
    """Write a fake run folder under `home`; returns its id."""
    spec = TuneSpec(model="mlp-small", slices=slices, servers=1, shards=2, trials=8, trials_per_batch=2)
    run_id = run_id or f"{time.strftime('%Y%m%d-%H%M%S')}-mlp-small-fake"
    d = os.path.join(home, "runs", run_id)
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    with open(os.path.join(d, "spec.json"), "w") as f:
        json.dump(dataclasses.asdict(spec), f)
    with open(os.path.join(d, "plan.json"), "w") as f:
        json.dump({"target": {"kind": "cpu", "arch": "", "num_cores": 2}, "tasks": [], "shards": []}, f)
    with open(os.path.join(d, "procs.json"), "w") as f:
        json.dump({"supervisor": live_pid, "groups": []} if live_pid else {"supervisor": None, "groups": []}, f)
    t0 = time.time() - 60
    with open(os.path.join(d, "events.jsonl"), "w") as f:
        for e in _events(t0, slices, finished):
            f.write(json.dumps(e) + "\n")
    if finished:
        results = [{"tuned_at": s, "model": "mlp-small", "target": "cpu", "tuned_ms": 0.002, "untuned_ms": 0.003,
                    "speedup": 1.5, "match": True, "max_abs_err": 0.0, "records": 8, "tasks_tuned": 2,
                    "tasks_total": 2} for s in slices]
        with open(os.path.join(d, "results.json"), "w") as f:
            json.dump(results, f)
    if sweep:
        SWEEP[SWEEP.tuned_at.isin(slices)].to_csv(os.path.join(d, "sweep.csv"), index=False)
    return run_id
