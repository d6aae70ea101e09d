# Kept as the script that made this folder's results (moved here from bench/): evidence, not maintained; its paths and imports are as they were then, and it may need updating to run.
"""Does the one-client pipeline change which schedules the search proposes? Identical draws, three runs (issue 16).

    python bench/same_draws.py --model mlp-small --target cpu --seeds 0,1 --trials 48 --batch 8 \
        --out bench/results/2026-12-01-cpu-mlp-small-same-draws/same_draws.json

Per seed, three runs through the workbench (`workbench.tune`, one client, the bench's configs of
bench/tuning_throughput.py) with draws made reproducible by the bench knob `WORKBENCH_BENCH_SAME_DRAWS=1`
(workbench/client.py: the evolution on one thread, numpy's global RNG seeded before tuning):
  a: `stock` (TVM's LocalBuilder and LocalRunner inside the client),
  b: `1x1@100+evo+batch` (the workbench's pipeline: PersistentBuilder pool, one RPC session per batch on a
     workbench rpc_server; `+evo` so that CPUs evolve the first batch as stock does; CUDA's `auto` does),
  c: `stock` again, the control.
The same model, budget, batch size, strategy (`--strategy`, default the cheap `evolutionary-lean`), XGB,
seed and measuring timeout for all three. Each run's measured batches (task, structural hash and run_secs
of every schedule, in order) are read from its database (`draw_replay.run_sequence`).

Then every run is replayed (`draw_replay.replay`): the same search, fed that run's own measurements, in a
fresh process. A replay that proposes every batch its run measured shows that the run's proposals were a
function of its measurements alone, whatever pipeline measured them. Run a is also replayed through the
pipeline (`workbench-live`: its client's intrinsics loading, its PersistentBuilder and its batch runner on
an rpc_server really building and measuring every batch, the search handed a's numbers): the same
measurements into both pipelines' search.
`draw_sequences.compare` reports, for a vs c and a vs b, the first batch at which the proposals part, the
fraction of shared schedules per batch, and what the search read differently first (a flipped order of
two times within `--noise` of each other, a larger gap, a failure in one run only, or nothing measured).

The JSON is written after every run and every replay (a cut-off call keeps what it measured); `--runs`
and `--merge` split the work over several calls (e.g. `--runs a` then `--runs b,c --merge`), `--replay-only`
replays and compares the runs already in `--out` (a replay other than `workbench-live` builds and measures
nothing, so it needs no GPU: `--replay-envs stock` replays a CUDA run's JSON on any machine).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import workbench as wb  # noqa: E402
from workbench.tuning.client import SAME_DRAWS_ENV  # noqa: E402

import draw_sequences as ds  # noqa: E402
from tuning_throughput import parse_config, tuning_window  # noqa: E402

CONFIGS = {"a": "stock", "b": "1x1@100+evo+batch", "c": "stock"}
# Each run's own measurements replayed into stock's search; a's also into the pipeline, really building and
# measuring (draw_replay.ENVS): the same measurements into both pipelines' search.
REPLAYS = {"a": ("stock", "workbench-live"), "b": ("stock",), "c": ("stock",)}


def parents(strategy: str) -> int:
    """How many of a task's best records the evolution starts from: population_size x init_measured_ratio."""
    import inspect

    from tvm.s_tir import meta_schedule as ms

    from workbench.tuning.plugins import LEAN_SEARCH

    defaults = inspect.signature(ms.search_strategy.EvolutionarySearch).parameters
    population = LEAN_SEARCH["population_size"] if strategy == "evolutionary-lean" else \
        defaults["population_size"].default
    return int(population * defaults["init_measured_ratio"].default)  # C++ truncates the product too


def est_by_trials(events: list[dict]) -> dict[str, float]:
    """The shard's estimated model time (µs, weighted per-task bests) after each batch once every task ran."""
    return {str(e["shard_trials"]): e["est_shard_us"] for e in events
            if e["kind"] == "batch" and e.get("shard_tasks_measured") == e.get("shard_tasks")}


def tune_one(label: str, seed: int, args, home: str) -> dict:
    """One run of config `label` with the knob set; its record (sequence included)."""
    from draw_replay import run_sequence

    cfg = parse_config(CONFIGS[label])
    spec = wb.TuneSpec(model=args.model, target=args.target, slices=(100,), servers=1, shards=1, trials=args.trials,
                       trials_per_batch=args.batch, seed=seed, strategy=args.strategy, cost_model="xgb",
                       measure_timeout_s=args.measure_timeout)
    load = os.getloadavg()[0]
    t0 = time.time()
    run = wb.tune(spec, home=home, runner=cfg["runner"], builder=cfg["builder"], first_round="evolutionary")
    status = run.wait(timeout=args.run_timeout)
    if status in ("running", "starting"):  # keep what it measured: stop it and read its database
        run.stop()
        status = f"cut off after {args.run_timeout:.0f} s"
    events = run.event_list()
    started = next((e for e in events if e["kind"] == "shard_started"), {})
    results = run.folder.read_results()
    rec = {"name": f"{label}-seed{seed}", "label": label, "config": cfg["name"], "seed": seed, "run": run.id,
           "status": status, "date": time.strftime("%Y-%m-%d %H:%M"), "load_at_start": round(load, 2),
           "load_at_end": round(os.getloadavg()[0], 2), "launch_to_end_s": round(time.time() - t0, 1),
           "same_draws": started.get("same_draws"),
           "skipped": [e["task"] for e in events if e["kind"] == "task_skipped"],
           "weights": {e["task"]: e["weight"] for e in events if e["kind"] == "batch"},
           "est_us_by_trials": est_by_trials(events),
           "tuned_ms": next((r.get("tuned_ms") for r in results if r.get("tuned_at") == 100), None)}
    try:
        t_start, t_end = tuning_window(events)
        rec["tuning_s"] = round(t_end - t_start, 1)
    except ValueError:
        rec["tuning_s"] = None
    job_path = os.path.join(run.dir, "stages", "100", "shard-0.json")
    db = os.path.join(run.dir, "stages", "100", "shard-0", "database_tuning_record.json")
    rec["job"] = None
    if os.path.exists(job_path):
        with open(job_path) as f:
            rec["job"] = json.load(f)
    rec["sequence"] = run_sequence(run.dir) if os.path.exists(db) else []
    return rec


def replay_one(out: str, name: str, env: str, timeout: float) -> dict:
    """`draw_replay.py` in a fresh process (its own RNG state, as the run's client had)."""
    t0 = time.time()
    proc = subprocess.run([sys.executable, os.path.join(HERE, "draw_replay.py"), out, name, "--env", env],
                          capture_output=True, text=True, timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode or not lines:
        return {"env": env, "error": f"exit {proc.returncode}: {proc.stderr.strip()[-500:]}",
                "seconds": round(time.time() - t0, 1), "proposed": []}
    return json.loads(lines[-1])


def gradient():
    from workbench.tuning.task_scheduler import gradient as g

    return g


def analyse(doc: dict) -> dict:
    """Comparisons per seed, replays' reach, and the rates over seeds."""
    runs = {r["name"]: r for r in doc["runs"]}
    par = parents(doc["strategy"])
    per_seed, pairs = {}, {"a_vs_c": [], "a_vs_b": []}
    for seed in doc["seeds"]:
        got = {lab: runs.get(f"{lab}-seed{seed}") for lab in CONFIGS}
        entry = {}
        for pair, (x, y) in (("a_vs_c", ("a", "c")), ("a_vs_b", ("a", "b"))):
            if got[x] and got[y]:
                weights = {**got[x]["weights"], **got[y]["weights"]}
                cmp = ds.compare(got[x]["sequence"], got[y]["sequence"], par, weights, gradient(), doc["noise"])
                cmp["time_ratios_y_over_x"] = ds.time_ratios(got[x]["sequence"], got[y]["sequence"])
                cmp["est_us_by_trials"] = {x: got[x]["est_us_by_trials"], y: got[y]["est_us_by_trials"]}
                entry[pair] = cmp
                pairs[pair].append(cmp)
        entry["replays"] = {f"{r['name']}@{env}": ds.reproduced(r["sequence"], rep["proposed"]) | {
            "error": rep.get("error"), "seconds": rep.get("seconds")}
            for r in got.values() if r for env, rep in (r.get("replays") or {}).items()}
        # A live replay measured the run's own candidates again with the pipeline: the same schedules both ways.
        entry["live_remeasured_over_recorded"] = {
            f"{r['name']}@{env}": ds.time_ratios(r["sequence"], [{**b, "run_secs": b["live_run_secs"]} for b in
                                                                 rep["proposed"] if b.get("live_run_secs")])
            for r in got.values() if r for env, rep in (r.get("replays") or {}).items() if env.endswith("-live")}
        per_seed[str(seed)] = entry
    rates = {}
    for pair, cmps in pairs.items():
        div = [c["first_divergence"] for c in cmps]
        rates[pair] = {"seeds": len(cmps), "first_divergence": div,
                       "explained_by": [c["explained_by"] for c in cmps],
                       "identical_batches": [sum(c["identical"]) for c in cmps],
                       "batches_compared": [c["batches_compared"] for c in cmps],
                       "shared_fraction_mean": [round(sum(c["shared_fraction"]) / len(c["shared_fraction"]), 3)
                                                if c["shared_fraction"] else None for c in cmps]}
    return {"parents": par, "per_seed": per_seed, "rates": rates}


def write(path: str, doc: dict) -> None:
    doc["analysis"] = analyse(doc)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mlp-small")
    p.add_argument("--target", default="cpu")
    p.add_argument("--seeds", default=None, help="comma-separated (default 0; with --replay-only, those in --out)")
    p.add_argument("--trials", type=int, default=48)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--strategy", default="evolutionary-lean", choices=("evolutionary-lean", "evolutionary"))
    p.add_argument("--measure-timeout", type=int, default=300, help="seconds per build and per measurement, all runs")
    p.add_argument("--run-timeout", type=float, default=3600)
    p.add_argument("--noise", type=float, default=0.05, help="relative gap under which two times count as tied")
    p.add_argument("--runs", default="a,b,c", help="which of the three runs to make per seed")
    p.add_argument("--merge", action="store_true", help="keep the runs already in --out (others are replaced)")
    p.add_argument("--merge-from", default=None, help="comma-separated JSONs of earlier calls whose runs to keep "
                   "(e.g. one call per run on a device with a time limit per call)")
    p.add_argument("--replay-only", action="store_true", help="make no run: replay and compare those in --out")
    p.add_argument("--no-replay", action="store_true")
    p.add_argument("--replay-envs", default="stock,workbench-live", help="which of REPLAYS' environments to run")
    p.add_argument("--replay-timeout", type=float, default=1800)
    p.add_argument("--home", default=None, help="workbench home for the runs (default: a temp folder)")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    import tvm

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    old = {}
    sources = ([args.out] if (args.merge or args.replay_only) and os.path.exists(args.out) else []) + \
        [x for x in (args.merge_from or "").split(",") if x]
    for path in sources:  # runs by name, a later file's replacing an earlier one's
        with open(path) as f:
            got = json.load(f)
        runs = {r["name"]: r for r in old.get("runs", []) + got.get("runs", [])}
        old = {**old, **got, "runs": list(runs.values()),
               "seeds": sorted(set(old.get("seeds", [])) | set(got.get("seeds", [])))}
    default = ",".join(map(str, old.get("seeds", []))) if args.replay_only else "0"
    seeds = [int(s) for s in (args.seeds or default).split(",") if s != ""]
    hw = wb.detect_hardware()
    doc = {"what": "identical draws (bench knob WORKBENCH_BENCH_SAME_DRAWS): stock (a), the workbench pipeline (b), "
                   "stock again (c) per seed; each run's measured schedules in order, replays, comparisons",
           "date": time.strftime("%Y-%m-%d %H:%M"), "machine": hw.describe(hw.default_target), "cores": hw.ncores,
           "host": platform.node(), "tvm": tvm.__version__, "argv": sys.argv[1:], "model": args.model,
           "target": args.target, "trials": args.trials, "batch": args.batch, "strategy": args.strategy,
           "measure_timeout_s": args.measure_timeout, "noise": args.noise, "configs": CONFIGS,
           "seeds": sorted(set(seeds) | set(old.get("seeds", []))), "runs": list(old.get("runs", []))}
    if args.replay_only:
        doc = {**old, "noise": args.noise}
    if doc["runs"]:
        write(args.out, doc)  # the replays read their run from --out
    home = args.home or tempfile.mkdtemp(prefix="wb-draws-")
    os.environ[SAME_DRAWS_ENV] = "1"  # this bench process only: the supervisor and its clients inherit it
    labels = [] if args.replay_only else [x.strip() for x in args.runs.split(",") if x.strip()]
    for seed in seeds:
        for label in labels:
            print(f"--- run {label} ({CONFIGS[label]}) seed {seed}, load {os.getloadavg()[0]:.1f}", flush=True)
            rec = tune_one(label, seed, args, home)
            doc["runs"] = [r for r in doc["runs"] if r["name"] != rec["name"]] + [rec]
            write(args.out, doc)
            print(f"    {rec['status']} in {rec['launch_to_end_s']} s (tuning {rec['tuning_s']} s), "
                  f"{len(rec['sequence'])} batches, est µs by trials {rec['est_us_by_trials']}", flush=True)
        if args.no_replay:
            continue
        for rec in [r for r in doc["runs"] if r["seed"] == seed and r.get("job") and r["sequence"]]:
            for env in [e for e in REPLAYS[rec["label"]] if e in args.replay_envs.split(",")]:
                if (rec.get("replays") or {}).get(env, {}).get("error", "none") is None:
                    continue  # replayed already (a merged or --replay-only call)
                print(f"--- replay {rec['name']} in the {env} environment", flush=True)
                rep = replay_one(args.out, rec["name"], env, args.replay_timeout)
                rec.setdefault("replays", {})[env] = rep
                write(args.out, doc)
                got = ds.reproduced(rec["sequence"], rep["proposed"])
                print(f"    {got['reproduced']} of {got['batches']} batches reproduced in {rep.get('seconds')} s"
                      + (f"; error {rep['error']}" if rep.get("error") else ""), flush=True)
    write(args.out, doc)
    print(json.dumps(doc["analysis"]["rates"], indent=1))
    for seed, entry in doc["analysis"]["per_seed"].items():
        for pair in ("a_vs_c", "a_vs_b"):
            if pair in entry:
                c = entry[pair]
                print(f"seed {seed} {pair}: first divergence {c['first_divergence']} of {c['batches_compared']}, "
                      f"explained by {c['explained_by']}, shared {c['shared_fraction']}")
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
