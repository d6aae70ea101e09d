"""Replay HopelessCut's rule on batch events: the seconds of kernel calls spent timing each run's candidates.

    python bench/results/2026-12-06-cpu-mlp-hopeless-cut/replay.py FILE.events.jsonl[.gz] ...

Per batch, in measuring order (one server: the chunk is the batch), a candidate after the first fully timed one is
cut where the runner's own rule says (`HopelessCut().at`: 10 x the best fully timed before it, at least 50 ms). Calls, in seconds of kernel time:
timed fully = a warm-up and 3 calls (4 x latency); with the cut, the first candidate 4 x, a cut one 1 x (its probe),
any other 5 x (its probe, then the evaluator's warm-up and 3). RPC round trips are left out. `timed_once` is what
the runner itself counted (0 for runs that timed fully)."""
import gzip
import json
import math
import sys

from workbench.tuning.runner.batch import HopelessCut


def replay(path: str) -> dict:
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        events = [json.loads(line) for line in f]
    batches = [e for e in events if e["kind"] == "batch" and e.get("latest_us")]
    full = with_cut = 0.0
    cut = 0
    rule = HopelessCut()
    for e in batches:
        best = math.inf
        for us in e["latest_us"]:
            if us is None:
                continue
            s = us / 1e6
            full += 4 * s
            if not math.isfinite(best):
                with_cut += 4 * s
                best = s
            elif s > rule.at(best):
                with_cut += s
                cut += 1
            else:
                with_cut += 5 * s
                best = min(best, s)
    return {"run": path.rsplit("/", 1)[-1].split(".")[0], "batches": len(batches), "cut_by_rule": cut,
            "timed_once": sum(e.get("timed_once") or 0 for e in batches), "calls_s_full": round(full, 1),
            "calls_s_with_cut": round(with_cut, 1)}


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(json.dumps(replay(p)))
