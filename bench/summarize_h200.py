"""Summarise the H200 throughput runs: bench/results/h200/*.bench.json + their event logs.

    python bench/summarize_h200.py

Recomputes every time-based metric from the committed event logs with one definition (wall clock
from the run's start, servers and clients starting included, to its last tuning client's end), takes
latencies from the bench files (measured on the device), and writes bench/results/h200_summary.json
and bench/results/H200.md. Nothing here is measured anew.
"""
from __future__ import annotations

import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tuning_throughput import steady_rate, tuning_window  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "results", "h200")
TOLERANCE = 1.03


def load_events(run_id: str) -> list[dict]:
    with open(os.path.join(SRC, "events", f"{run_id}.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def metrics(row: dict, call: str) -> dict:
    ev = load_events(row["run"])
    t0, t1 = tuning_window(ev)
    batches = sorted((e["t"], e["batch_size"]) for e in ev if e["kind"] == "batch")
    steady = steady_rate(ev)
    tel = [e for e in ev if e["kind"] == "telemetry" and t0 <= e["t"] <= t1]
    cpu = [e["cpu_percent"] for e in tel]
    gpu = [g["sm_util"] for e in tel for g in e.get("gpus", []) if g.get("sm_util") is not None]
    # Latency reached by the end of each batch: from checkpoints where they exist, else the final value.
    tuning_start = min(e["t"] for e in ev if e["kind"] == "phase" and e["phase"] == "tuning")
    cps = []
    for cp in row.get("checkpoints") or []:
        if cp.get("latency_ms") is None:
            continue
        # call 5/6 checkpoints were timed from the tuning phase; call 8 from the run start
        offset = (tuning_start - t0) if call in ("call5_stock", "call6_workbench") else 0.0
        cps.append({"t_s": round(cp["t_s"] + offset, 1), "latency_ms": cp["latency_ms"]})
    return {"config": row["name"], "call": call, "run": row["run"], "trials": row["trials"],
            "wall_s": round(t1 - t0, 1), "first_batch_s": round(batches[0][0] - t0, 1),
            "trials_per_s": round(row["trials"] / (t1 - t0), 4),
            "steady_trials_per_s": round(steady, 4) if steady else None,
            "final_latency_ms": round(row["final_latency_ms"], 5), "server_sm_counts": row.get("server_sm_counts"),
            "cpu_util_mean": round(sum(cpu) / len(cpu), 1) if cpu else None,
            "gpu_sm_util_mean": round(sum(gpu) / len(gpu), 2) if gpu else None, "checkpoints": cps,
            "phases_s": row.get("phases_s")}


ANALYSIS = """## Where the time goes (from the event logs above)

- The GPU is idle in every configuration: mean SM utilisation (NVML GPM) 0.2-0.4 % while tuning;
  tuning is bound by the CPU-side work and by fixed start-up costs, not by measurement.
- Stock spends 200 s before its first measured batch (one client importing TVM's tensor intrinsics,
  then fresh `LocalBuilder` workers per batch, each re-importing them); afterwards it runs 0.26 trials/s.
- The workbench (call 6) reaches its first batch after 116-129 s: ~30 s tracker and servers, ~28 s
  client start-up, then a warm-up round whose builder workers start (and import) once. Afterwards it
  runs 0.57-1.04 trials/s, up to 4.0x stock. With only 48 trials the fixed start-up dominates, so the
  whole-run ratio is 1.8-2.2x: **the remaining bottleneck is the ~120 s before the first batch**.
- Call 8 overlapped server and client start-up and pre-started the builder workers: 2x2@50 reached its
  first batch 33 s sooner (84 s), but 1x1@100 got slower (144 s) with a 50 s stretch of idle CPU in its
  first round that is not explained yet.
- Sliced servers (25 %, 50 %) measure candidates on fewer SMs; with 48 trials the models they chose are
  1.45-1.57x slower on the whole GPU than stock's, so only 1x1@100 reached stock's latency (0.84x).
- Not yet tried: a budget of hundreds of trials (where the steady-state ratio shows), a model with many
  tasks (ResNet-18: 18 tasks) so that 4-8 shards have work, explaining the idle stretch.
""".splitlines() + [""]


def slice_matrix() -> list[str]:
    """h200_slice_matrix.csv from every committed sweep (so far: the smoke run, tuned at 50% only)."""
    import csv

    rows = []
    for path in sorted(glob.glob(os.path.join(SRC, "*", "sweep.csv"))):
        with open(path) as f:
            rows += list(csv.DictReader(f))
    cols = ["model", "tuned_at", "inferred_at", "latency_ms_median", "latency_ms_iqr"]
    with open(os.path.join(HERE, "results", "h200_slice_matrix.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    out = ["## Latency versus slice (h200_slice_matrix.csv)", "",
           "Only the smoke run's sweep so far: `mlp` tuned at 50% (2 shards x 2 servers, 32 trials), timed under "
           "MPS at each inference slice (the process reported its SM count). The full tuned-at 25/50/100 x "
           "inferred-at 10..100 table for two models is still to be measured.", "",
           "| model | tuned at % | inferred at % | SMs | median ms | IQR ms |", "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['model']} | {r['tuned_at']} | {r['inferred_at']} | {r.get('sm_count', '')} | "
                   f"{float(r['latency_ms_median']):.4f} | {float(r['latency_ms_iqr']):.5f} |")
    return out + [""]


def main() -> None:
    rows = []
    for path in sorted(glob.glob(os.path.join(SRC, "*.bench.json"))):
        call = os.path.basename(path).split(".")[0]
        with open(path) as f:
            data = json.load(f)
        rows += [metrics(r, call) for r in data["configs"] if r.get("status") == "done"]
    stock = next(r for r in rows if r["config"] == "stock")
    ref = stock["final_latency_ms"]
    for r in rows:
        r["trials_per_s_ratio"] = round(r["trials_per_s"] / stock["trials_per_s"], 3)
        r["steady_ratio"] = round(r["steady_trials_per_s"] / stock["steady_trials_per_s"], 3)
        r["final_latency_ratio"] = round(r["final_latency_ms"] / ref, 3)
        reached = [cp["t_s"] for cp in r["checkpoints"] if cp["latency_ms"] <= ref * TOLERANCE]
        r["time_to_stock_latency_s"] = min(reached) if reached else None
        r["time_to_same_latency_reduction"] = (round(1 - r["time_to_stock_latency_s"] / stock["wall_s"], 3)
                                               if reached else None)
    candidates = [r for r in rows if r["config"] != "stock" and r["time_to_same_latency_reduction"] is not None]
    best = max(candidates, key=lambda r: r["time_to_same_latency_reduction"])
    summary = {"model": "mlp", "model_shapes": "BERT-base FFN: 128x768 -> 3072 -> 768 (2 tasks)",
               "machine": "NVIDIA H200 (lent, Firecracker), 16 cores, driver 580.159.04",
               "tvm": "0.27.0.post1", "date": "2026-11-29", "trials": 48, "batch": 16,
               "best_config": best["config"], "trials_per_s_ratio": best["trials_per_s_ratio"],
               "time_to_same_latency_reduction": best["time_to_same_latency_reduction"],
               "final_latency_ratio": best["final_latency_ratio"],
               "max_trials_per_s_ratio": max(r["trials_per_s_ratio"] for r in rows),
               "max_steady_trials_per_s_ratio": max(r["steady_ratio"] for r in rows),
               "goal": {"trials_per_s_ratio": 5.0, "time_to_same_latency_reduction": 0.75,
                        "final_latency_ratio_max": 1.03},
               "goal_met": False, "note": ("stock and workbench configs ran in separate device calls "
                                           "(calls 5, 6 and 8 of one session, same machine kind)"),
               "runs": rows}
    summary["goal_met"] = (best["trials_per_s_ratio"] >= 5 and best["time_to_same_latency_reduction"] >= 0.75
                           and best["final_latency_ratio"] <= 1.03)
    with open(os.path.join(HERE, "results", "h200_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    lines = ["# H200 tuning throughput (measured)", "",
             f"{summary['date']}, {summary['machine']}, TVM {summary['tvm']}; model `mlp` "
             f"({summary['model_shapes']}); {summary['trials']} trials in batches of {summary['batch']}; "
             "xgb cost model, evolutionary search, seed 0. Wall = run start (servers and clients starting) "
             "to the last measured trial. Latency = the tuned model on the whole GPU. "
             "Produced by `bench/tuning_throughput.py`, summarised by `bench/summarize_h200.py`.", "",
             "| config | call | wall s | first batch s | trials/s | x stock | steady trials/s | x stock | "
             "final latency ms | x stock | time to stock latency s | CPU % | GPU SM % | server SMs |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['config']} | {r['call']} | {r['wall_s']} | {r['first_batch_s']} | {r['trials_per_s']} | "
                     f"{r['trials_per_s_ratio']} | {r['steady_trials_per_s']} | {r['steady_ratio']} | "
                     f"{r['final_latency_ms']} | {r['final_latency_ratio']} | {r['time_to_stock_latency_s']} | "
                     f"{r['cpu_util_mean']} | {r['gpu_sm_util_mean']} | {r['server_sm_counts']} |")
    lines += ["", f"Best by time to the stock run's latency: **{best['config']}** "
              f"({best['trials_per_s_ratio']}x trials/s, {best['time_to_same_latency_reduction']:.0%} less time, "
              f"latency {best['final_latency_ratio']}x stock). Goal (5x, 75% less, within 3%): "
              f"{'met' if summary['goal_met'] else 'NOT met'}.", ""]
    lines += ANALYSIS + slice_matrix()
    with open(os.path.join(HERE, "results", "H200.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
