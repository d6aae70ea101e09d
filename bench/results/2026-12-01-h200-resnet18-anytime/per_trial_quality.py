# Kept as the script that made this folder's per_trial_quality.json and 2026-12-01-h200-mlp-anytime's (moved here from bench/): evidence, not maintained; its paths and imports are as they were then, and it may need updating to run.
"""Per-trial model quality and what bounds a run, from the committed H200 `mlp` event logs (issue 16).

For every single-shard `mlp` run on CUDA under bench/results/*h200*/ (stock: no server of its own;
workbench: a tuning server), the shard's estimated model time (`est_shard_us`: each task's best
measured time x its weight, summed, once every task has a result) after 32, 48 and 64 trials, and a
rank test of stock against the workbench at each count. For the runs of `--anytime FOLDER` it adds
what bounds them: seconds to the first batch, batch wall times, build seconds per trial and the
host's busy CPU seconds per trial (telemetry's system-wide CPU percent, integrated over tuning).

    python bench/per_trial_quality.py --out bench/results/2026-12-01-h200-mlp-anytime/per_trial_quality.json
    python bench/per_trial_quality.py --anytime 2026-12-01-h200-resnet18-anytime \
        --out bench/results/2026-12-01-h200-resnet18-anytime/per_trial_quality.json
"""
from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import statistics

from experiments import read_events

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
COUNTS = (32, 48, 64)


def run_row(path: str, events: list[dict]) -> dict | None:
    """One run's kind, seed and estimated model time (µs) at COUNTS trials; None when not a 1-shard mlp run."""
    started = [e for e in events if e["kind"] == "run_started"]
    batches = [e for e in events if e["kind"] == "batch"]
    if not started or started[0]["spec"]["model"] != "mlp" or started[0]["target"].get("kind") != "cuda":
        return None
    if not batches or len({(e["tuned_at"], e["shard"]) for e in batches}) > 1:
        return None
    complete = {e["shard_trials"]: e["est_shard_us"] for e in batches
                if e.get("shard_tasks_measured") == e.get("shard_tasks")}
    return {"experiment": os.path.basename(os.path.dirname(path)), "run": started[0]["run_id"],
            "kind": "workbench" if any(e["kind"] == "server_ready" for e in events) else "stock",
            "seed": started[0]["spec"].get("seed"), **{f"est_us_at_{n}": complete.get(n) for n in COUNTS}}


def rank_test(stock: list[float], wb: list[float]) -> dict:
    """Mann-Whitney U: how many (stock, workbench) pairs have the workbench lower (ties half), with its exact
    one-sided p-value, P[U <= observed] over every split of the pooled values into groups of these sizes."""
    def u_of(a: list[float], b: list[float]) -> float:
        return sum((y < x) + 0.5 * (y == x) for x in a for y in b)

    u = u_of(stock, wb)
    pooled = stock + wb
    splits = [u_of([v for i, v in enumerate(pooled) if i not in chosen], [pooled[i] for i in chosen])
              for chosen in map(set, itertools.combinations(range(len(pooled)), len(wb)))]
    p = sum(s <= u for s in splits) / len(splits)
    return {"u_workbench_below_stock": u, "pairs": len(stock) * len(wb), "p_one_sided": round(p, 4)}


def bounds(events: list[dict]) -> dict:
    """What one run spent per trial while tuning: start-up, batch wall, build and busy CPU seconds."""
    t0 = min(e["t"] for e in events if e["kind"] == "run_started")
    batches = [e for e in events if e["kind"] == "batch"]
    started = next(e for e in events if e["kind"] == "shard_started")
    hardware = next(e for e in events if e["kind"] == "hardware")
    tele = [e for e in events if e["kind"] == "telemetry" and started["t"] <= e["t"] <= batches[-1]["t"]]
    span = batches[-1]["t"] - started["t"]
    trials = batches[-1]["shard_trials"]
    busy_core_s = sum(e["cpu_percent"] for e in tele) / 100 * hardware["ncores"] * span / max(1, len(tele))
    walls = [b["t"] - a["t"] for a, b in zip(batches, batches[1:])]
    builds = [s for e in batches for s in (e.get("build_each_s") or []) if s is not None]
    return {"shard_started_s": round(started["t"] - t0, 1), "first_batch_s": round(batches[0]["t"] - t0, 1),
            "startup_s": started.get("startup_s"), "trials": trials, "tuning_span_s": round(span, 1),
            "trials_per_s": round(trials / span, 3) if span else None,
            "batch_wall_s_median": round(statistics.median(walls), 2) if walls else None,
            "build_cpu_s_per_trial": round(statistics.mean(builds), 2) if builds else None,
            "busy_cpu_s_per_trial": round(busy_core_s / trials, 2), "ncores": hardware["ncores"],
            "cpu_util_mean": round(statistics.mean(e["cpu_percent"] for e in tele), 1) if tele else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--anytime", default="2026-12-01-h200-mlp-anytime")
    p.add_argument("--out", default=os.path.join(RESULTS, "2026-12-01-h200-mlp-anytime", "per_trial_quality.json"))
    args = p.parse_args()
    rows, bound = [], {}
    for path in sorted(glob.glob(os.path.join(RESULTS, "*h200*", "*.jsonl.gz"))):
        events = read_events(path)
        if os.path.basename(os.path.dirname(path)) == args.anytime:  # any model: what bounded these runs
            started = next(e for e in events if e["kind"] == "run_started")
            bound[started["run_id"]] = {"model": started["spec"]["model"], "seed": started["spec"].get("seed"),
                                        "kind": "workbench" if any(e["kind"] == "server_ready" for e in events)
                                        else "stock", **bounds(events)}
        row = run_row(path, events)
        if row is not None:
            rows.append(row)
    summary = {}
    for n in COUNTS:
        key = f"est_us_at_{n}"
        stock = [r[key] for r in rows if r["kind"] == "stock" and r[key]]
        wb = [r[key] for r in rows if r["kind"] == "workbench" and r[key]]
        summary[key] = {"stock_runs": len(stock), "workbench_runs": len(wb),
                        "stock_median": round(statistics.median(stock), 1),
                        "workbench_median": round(statistics.median(wb), 1),
                        "ratio_of_medians": round(statistics.median(wb) / statistics.median(stock), 3),
                        **rank_test(stock, wb)}
    doc = {"what": "estimated model time (sum of weighted per-task bests, µs) at equal trials, stock vs the "
                   "workbench's single-shard runs of mlp on the H200, from every committed event log; and what "
                   "bounded the anytime runs", "summary": summary, "runs": rows, "bounds": bound}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps(summary, indent=1))
    for run, b in bound.items():
        print(run, b)
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
