# Kept as the script that made this folder's results (moved here from bench/): evidence, not maintained; its paths and imports are as they were then, and it may need updating to run.
"""What each measured batch of 16 buys a task, over every committed H200 search: the data behind the budget's rule.

For each task search in the committed event logs (`bench/results/*h200*/*.jsonl.gz`, each run once: its longest log),
the task's default schedule time (the `defaults` event, timed by the same client) and its best candidate after each of
its batches (`batch` events). Per tuning slice and over all, for the searches that had at least k batches: how many
beat their default after 1..k batches, and the mean share of the task's time a search saved, where the model keeps
the default when the search lost (1 - min(default, best) / default). Writes `yields.json` beside its README.

    python bench/batch_yields.py --out bench/results/2026-12-02-h200-batch-yields/yields.json
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import statistics
from collections import defaultdict

from experiments import read_events

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def run_logs(results: str = RESULTS) -> list[str]:
    """The committed H200 event logs, one per run (a run copied into several folders: its longest log)."""
    best: dict[str, str] = {}
    for path in glob.glob(os.path.join(results, "*h200*", "*.jsonl.gz")):
        run = os.path.basename(path)
        if run not in best or os.path.getsize(path) > os.path.getsize(best[run]):
            best[run] = path
    return sorted(best.values())


def searches(path: str) -> list[dict]:
    """Each task search of one log: tuning slice, task, default (us) and the best (us) after each of its batches."""
    defaults: dict[tuple, float] = {}
    bests: dict[tuple, list[float]] = defaultdict(list)
    for e in read_events(path):
        if e["kind"] == "defaults":
            defaults.update({(e["tuned_at"], t): us for t, us in e["defaults_us"].items() if us})
        elif e["kind"] == "batch":
            times = [x for x in e.get("latest_us") or [] if x and x > 0]
            bests[(e["source"], e["tuned_at"], e["task"])].append(min(times, default=math.inf))
    out = []
    for (source, tuned_at, task), batch_bests in bests.items():
        default = defaults.get((tuned_at, task))  # a replica's task was timed by its first shard
        if default is None:
            continue
        best, after = math.inf, []
        for b in batch_bests:
            best = min(best, b)
            after.append(best)
        out.append({"run": os.path.basename(path).split(".")[0], "shard": source, "tuned_at": tuned_at, "task": task,
                    "default_us": default, "best_us_after_batch": after})
    return out


def yields(rows: list[dict], most: int = 4) -> list[dict]:
    """For k = 1..most: the searches with at least k batches, their wins and mean saving after each of batches 1..k."""
    out = []
    for k in range(1, most + 1):
        sub = [r for r in rows if len(r["best_us_after_batch"]) >= k]
        if len(sub) < 4:
            break
        saved = [[max(0.0, 1 - r["best_us_after_batch"][j] / r["default_us"]) for r in sub] for j in range(k)]
        out.append({"searches": len(sub), "batches": k,
                    "beat_default": [sum(x > 0 for x in s) for s in saved],
                    "mean_saved": [round(statistics.mean(s), 3) for s in saved]})
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    rows = [s for path in run_logs() for s in searches(path)]
    groups = {"all": rows, **{f"{at} %": [r for r in rows if r["tuned_at"] == at]
                              for at in sorted({r["tuned_at"] for r in rows})}}
    report = {"logs": len({r["run"] for r in rows}), "searches": len(rows),
              "by_slice": {name: yields(group) for name, group in groups.items()}}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"{report['searches']} task searches in {report['logs']} runs")
    for name, ys in report["by_slice"].items():
        for y in ys:
            print(f"{name:>6}: {y['searches']:3d} searches with >= {y['batches']} batches: beat default "
                  f"{y['beat_default']}, mean saved {y['mean_saved']}")


if __name__ == "__main__":
    main()
