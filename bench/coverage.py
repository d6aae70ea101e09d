"""How much of a model's measured time the plan tunes at a small budget: issue 37's coverage goal (the tuned tasks
cover at least 60 % of the measured default time at a budget of 4 batches per shard).

    python -m bench.coverage --model standin --target cuda --shards 4 --batches 4 --out bench/results/cov.json

One run of the model from nothing (`fresh`) with `shards` x `batches` x `trials_per_batch` trials; the row is read
from the run's `replanned` event (the plan made again once every default was timed, before any trial): the tasks it
tunes, the share of the measured default time they hold, and the share the estimate's plan would have tuned. The run
is then finished as asked (`--stop` stops it once the plan is known). The rows are appended to `--out` by
(model, target, shards, batches).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import workbench as wb
from bench.h200_vs_pytorch import model_to_tune
from workbench.runs.event_types import Replanned


def coverage(name: str, target: str, shards: int, batches: int, batch: int, home: str, folder: Path,
             stop: bool) -> dict:
    model, shape = model_to_tune(name, folder)
    spec = wb.TuneSpec(model=model, input_shape=shape, target=target, shards=shards, trials_per_batch=batch,
                       trials=shards * batches * batch, fresh=True)
    t0 = time.time()
    run = wb.tune(spec, home=home)
    replanned: list[Replanned] = []
    while not replanned and run.status == "running":
        time.sleep(1.0)
        replanned = run.typed_events(Replanned)
    hw = wb.detect_hardware()
    row: dict = {"machine": hw.describe(run.plan.target.kind), "model": name, "target": target, "shards": shards,
                 "batches_per_shard": batches,
                 "trials_per_batch": batch, "trials": spec.trials, "run": run.id}
    if replanned:
        r = replanned[-1]
        tasks = run.plan.tasks
        row |= {"tasks": len(tasks), "tuned": len(r.tuned), "tuned_share": r.tuned_share,
                "estimate_share": r.estimate_share, "plan_line": r.plan_line,
                "replanned_after_s": round(time.time() - t0, 1)}
    if stop:
        run.stop()
        status = run.wait(timeout=120)
    else:
        status = run.wait(timeout=3600)
        rows = run.results.to_dict("records")
        if rows:
            row |= {"tuned_ms": rows[-1].get("tuned_ms"), "untuned_ms": rows[-1].get("untuned_ms"),
                    "kept": rows[-1].get("kept"), "verdict": rows[-1].get("verdict")}
    row |= {"status": status, "wall_s": round(time.time() - t0, 1)}
    if not replanned:
        row["message"] = run.message
    return row


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.coverage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="standin")
    parser.add_argument("--target", default="cuda")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--batches", type=int, default=4, help="batches per shard")
    parser.add_argument("--trials-per-batch", type=int, default=16)
    parser.add_argument("--home", default="/tmp/coverage-home")
    parser.add_argument("--stop", action="store_true", help="stop the run once the plan is known")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    row = coverage(args.model, args.target, args.shards, args.batches, args.trials_per_batch, args.home, out.parent,
                   args.stop)
    rows = json.loads(out.read_text())["rows"] if out.exists() else []
    same = ("model", "target", "shards", "batches_per_shard")
    rows = [r for r in rows if tuple(r[k] for k in same) != tuple(row[k] for k in same)] + [row]
    out.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
