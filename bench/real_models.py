"""A model tuned as a user runs it (the CLI), then what the user got and when.

    python -m bench.real_models --model resnet18 --out bench/results/DATE-h200-real-models/resnet18.json \
        -- --target cuda --shards 4 --servers 2 --slices 50 --trials 160

Runs `workbench tune MODEL ARGS`, keeps its printed lines, and reports from the run folder: seconds
from the first server being ready to the first result (a task's default timed) and to the first
tuned batch; trials asked, planned and measured; tasks tuned, left on their default, and kept on the
default because it was faster; the run's own final tuned and untuned latency (timed at the tuning
slice, median and IQR). Then, at `--checkpoints` evenly spaced batch times, the model the product would
have built from the records committed by then (merged, floored by the measured defaults, compiled) is
timed beside the untuned build on the whole device, which gives the seconds until the model first beat
the untuned build. Writes the JSON, the CLI log and the compressed event log beside it.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import workbench as wb
from bench.tuning_throughput import checkpoint_dbs, tuning_window, utilisation
from workbench.results.finish import measured_defaults
from workbench.results.sweep import infer_at
from workbench.runs.events import EVENTS_FILE


def first_times(events: list[dict]) -> dict:
    """Seconds from the first registered server to the first default timed and the first tuned batch."""
    started = min(e["t"] for e in events if e["kind"] == "run_started")
    ready = [e["t"] for e in events if e["kind"] == "server_ready"]
    first = lambda kind: min((e["t"] for e in events if e["kind"] == kind), default=None)  # noqa: E731
    r = min(ready) if ready else None
    rel = lambda t: None if t is None or r is None else round(t - r, 1)  # noqa: E731
    return {"servers_ready_s": None if r is None else round(r - started, 1),
            "first_default_after_ready_s": rel(first("defaults")), "first_batch_after_ready_s": rel(first("batch"))}


def checkpoints(run: wb.Run, n: int, work: str) -> list[dict]:
    """The floored model at n evenly spaced batch times, timed with the untuned build on the whole device."""
    from workbench.models.load import load_model
    from workbench.plan.tasks import extract_tasks
    from workbench.results.compile import compile_with_database, floored_database, merge_databases

    events = run.event_list()
    t0, _ = tuning_window(events)
    stage = run.spec.slices[0]
    batch_times = sorted({e["t"] for e in events if e["kind"] == "batch" and e["tuned_at"] == stage})
    picks = sorted({round((len(batch_times) - 1) * (i + 1) / n) for i in range(n)}) if batch_times else []
    times = [batch_times[i] + 0.01 for i in picks]
    target = run.plan.target
    model = load_model(run.spec.model, run.spec.input_shape)
    tvm_target = target.build()
    tasks = extract_tasks(model.mod, tvm_target)
    defaults = measured_defaults(run.dir, stage)
    libs = {"untuned": os.path.join(run.dir, "untuned.so")}
    for i, shard_dirs in enumerate(checkpoint_dbs(run, stage, times, work)):
        merged = merge_databases(shard_dirs, os.path.join(work, f"cp{i}", "merged"))
        best = os.path.join(work, f"cp{i}", "best")
        floored_database(merged.path, best, tasks, tvm_target, defaults)
        libs[str(i)] = compile_with_database(model.mod, tvm_target, best, os.path.join(work, f"cp{i}.so"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}
    by = {r["name"]: r for r in infer_at(work, 100, libs, model, target, None, env, reference=libs["untuned"])}
    rows = [{"t_s": round(times[i] - t0, 1), "trials": sum(max([e["shard_trials"] for e in events
             if e["kind"] == "batch" and e["shard"] == s and e["tuned_at"] == stage and e["t"] <= times[i]], default=0)
             for s in {e["shard"] for e in events if e["kind"] == "shard_planned" and e["tuned_at"] == stage}),
             "latency_ms": by[str(i)]["latency_ms_median"], "iqr_ms": by[str(i)]["latency_ms_iqr"],
             "match": by[str(i)].get("match")} for i in range(len(times))]
    untuned = by["untuned"]
    return [{"untuned_ms": untuned["latency_ms_median"], "untuned_iqr_ms": untuned["latency_ms_iqr"]}] + rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True, help="result JSON path (its folder gets the logs)")
    ap.add_argument("--checkpoints", type=int, default=4)
    ap.add_argument("--home", help="workbench home to run in (default: a fresh one, so its intrinsics cache is "
                                   "empty, as on a user's first run on a machine)")
    ap.add_argument("cli", nargs=argparse.REMAINDER, help="-- then the options of `workbench tune`")
    args = ap.parse_args()
    cli = [a for a in args.cli if a != "--"]
    home = args.home or tempfile.mkdtemp(prefix="wb-real-")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    stem = os.path.splitext(args.out)[0]
    argv = [sys.executable, "-m", "workbench", "--home", home, "tune", "--model", args.model, *cli]
    t0 = time.time()
    with open(stem + ".cli.log", "w") as log:
        code = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=3000).returncode
    wall = round(time.time() - t0, 1)
    run = wb.open_run("last", home)
    events = run.event_list()
    with open(os.path.join(run.dir, EVENTS_FILE), "rb") as f, gzip.open(stem + ".events.jsonl.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    res = run.results.to_dict("records")
    tasks = run.tasks()
    budget = run.plan.budget.to_dict()
    t_start, t_end = tuning_window(events)
    out = {"model": args.model, "command": "workbench tune --model " + args.model + " " + " ".join(cli),
           "date": time.strftime("%Y-%m-%d"), "exit_code": code, "status": run.status, "wall_s": wall,
           "host_cores": os.cpu_count(), **first_times(events),
           "trials_asked": run.spec.trials, "trials_planned": budget["trials"], "batch": budget["batch"],
           "trials_measured": sum(r["trials_measured"] for r in res),
           "tasks_total": budget["tasks_total"], "tasks_tuned": budget["tasks_tuned"],
           "tasks_default": budget["tasks_default"], "kept_default": sum(r["kept_default"] for r in res),
           "tuning_s": round(t_end - t_start, 1), **utilisation(events, t_start, t_end),
           "results": [{k: r[k] for k in ("tuned_at", "tuned_ms", "tuned_iqr_ms", "untuned_ms", "untuned_iqr_ms",
                                          "speedup", "verdict", "kept", "match")} for r in res],
           "tasks": tasks.drop(columns=["reason"]).to_dict("records")}
    if res and args.checkpoints:
        cps = checkpoints(run, args.checkpoints, os.path.join(home, "checkpoints"))
        out["checkpoints_whole_device"] = cps
        beat = [c for c in cps[1:] if c["latency_ms"] < cps[0]["untuned_ms"] - cps[0]["untuned_iqr_ms"]]
        out["first_beats_untuned_s"] = beat[0]["t_s"] if beat else None
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, default=str)
    print(json.dumps({k: v for k, v in out.items() if k not in ("tasks",)}, indent=1, default=str))


if __name__ == "__main__":
    main()
