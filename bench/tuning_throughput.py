"""Tuning throughput: stock MetaSchedule versus the workbench, side by side in one invocation.

    python -m bench.tuning_throughput --model mlp --trials 64 --configs stock,1x1@100,2x2@50

`stock` is MetaSchedule's own tune_relax recipe in one process: the extracted tasks, stock
`LocalBuilder` (fresh workers every batch) and `LocalRunner` on the whole device. A config
`KxS@P` is the workbench with K shard clients, S RPC servers, each server on a P% slice.
K may exceed the model's task count: the extra shards are seeded search replicas of its costliest
tasks (`workbench.plan.tasks.plan_shards`). `KxS@P/Ngpu` places the S servers round-robin on the first
N GPUs (one MPS daemon each), for scaling runs on multi-GPU hosts. Workbench configs draw each task's
first batch as the plan's `auto` does (TVM's evolution on CUDA, at random on CPUs:
`workbench.tuning.search_strategy.random_first_round.RandomFirstRound`); a `+evo` or `+rand` suffix
forces one or the other; a `+batch` suffix measures each batch over one RPC session per server
(`workbench/tuning/runner/batch.py`, the product's default runner; it now times a candidate far behind by one call,
`HopelessCut`, which results labelled `+batch` before that change did not; `+batch-full` times every candidate
fully; without either suffix a config measures as stock's `RPCRunner` does, one session per candidate); builds are
waited for as the product's `auto` builder does (a straggling build cut on CUDA,
`workbench.tuning.builder.persistent.StragglerCut`; results from before that default waited for every build); a
`+cut` suffix cuts stragglers on every target and `+wait` waits for every build; `+lean` searches with the lean
evolution, `+few` with the lean evolution from 16 initial samples and `+nbr` with the evolution and neighbours after
a stalled batch (`--strategy`); a `+dask` suffix runs the shard clients on a Dask LocalCluster (`--cluster local`: a
worker process per shard, the cores split between them). Every config gets the same model, trial budget, batch size,
cost model and seed.

For each config it reports trials per second, wall time, the final model latency (compiled with
the run's database and timed on the whole device), mean CPU/GPU utilisation while tuning, where
the clients' time went, and the time until the model first reached the stock run's final latency
(within 3%): at checkpoints through the run, the records committed so far (databases are
append-only, and batch events give their times) are compiled and timed on the whole device.
Results go to bench/results/<name>.json; on a GPU also h200_summary.json style keys.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

import numpy as np

import workbench as wb
from workbench.hardware import TargetSpec, resolve_target
from workbench.results.sweep import infer_at

HERE = os.path.dirname(os.path.abspath(__file__))

CONFIG_RE = re.compile(r"^(\d+)x(\d+)@(\d+)(?:/(\d+)gpu)?(\+evo|\+rand)?(\+batch(?:-full)?)?(\+cut|\+wait)?"
                       r"(\+lean|\+few|\+nbr)?(\+dask)?$")
BATCH_RUNNERS = {"+batch": "rpc-batch", "+batch-full": "rpc-batch-full"}
TOLERANCE = 1.03


def parse_config(text: str) -> dict:
    if text == "stock":
        return {"name": "stock", "shards": 1, "servers": 1, "slice": 100, "runner": "local", "builder": "local",
                "first_round": "evolutionary", "gpus": 1, "strategy": "evolutionary"}
    m = CONFIG_RE.match(text)
    if not m:
        raise SystemExit(f"bad config {text!r}: use stock or "
                         "KxS@P[/Ngpu][+evo|+rand][+batch][+cut|+wait][+lean|+few|+nbr]"
                         "[+dask], e.g. 2x2@50 or 4x8@50/2gpu (+batch-full: rpc-batch timing every candidate fully)")
    k, s, p = map(int, m.groups()[:3])
    return {"name": text, "shards": k, "servers": s, "slice": p, "runner": BATCH_RUNNERS.get(m.group(6), "rpc"),
            "builder": {"+cut": "persistent-cut", "+wait": "persistent"}.get(m.group(7), "auto"),
            "first_round": {"+evo": "evolutionary", "+rand": "random"}.get(m.group(5), "auto"),
            "gpus": int(m.group(4) or 1),
            "strategy": {"+lean": "evolutionary-lean", "+few": "evolutionary-lean-few",
                         "+nbr": "evolutionary-neighbours"}.get(m.group(8), "evolutionary"),
            "cluster": "local" if m.group(9) else None}


def tuning_window(events: list[dict]) -> tuple[float, float]:
    """From the run's start (servers and clients starting included) to its last tuning client's end."""
    start = min(e["t"] for e in events if e["kind"] == "run_started")
    end = max(e["t"] for e in events if e["kind"] in ("shard_finished", "shard_failed"))
    return start, end


def steady_rate(events: list[dict], group_s: float = 5.0) -> float | None:
    """Trials per second after the first reported batches (start-up and warm-up round excluded).

    MetaSchedule reports the warm-up round's batches together, so every batch reported within
    `group_s` of the first counts as start-up: its trials were measured before that moment."""
    batches = sorted((e["t"], e["batch_size"]) for e in events if e["kind"] == "batch")
    if not batches:
        return None
    later = [(t, n) for t, n in batches if t > batches[0][0] + group_s]
    if not later:
        return None
    return round(sum(n for _, n in later) / (later[-1][0] - batches[0][0]), 4)


def batch_intervals(events: list[dict]) -> list[float]:
    """Seconds between consecutive batches of one shard, over every shard: one batch's search, build and
    measurement while the host is shared, without the start-up and without the tail of a shard left alone
    (which the whole-run rates mix in; 2026-12-02 one stuck build decided those)."""
    by: dict[int, list[float]] = {}
    for e in events:
        if e["kind"] == "batch":
            by.setdefault(e["shard"], []).append(e["t"])
    ordered = [sorted(ts) for ts in by.values()]
    return [round(b - a, 2) for ts in ordered for a, b in zip(ts, ts[1:])]


def utilisation(events: list[dict], t0: float, t1: float) -> dict:
    tel = [e for e in events if e["kind"] == "telemetry" and t0 <= e["t"] <= t1]
    cpu = [e["cpu_percent"] for e in tel]
    gpu = [g["sm_util"] for e in tel for g in e.get("gpus", []) if g.get("sm_util") is not None]
    src = {g.get("sm_util_source") for e in tel for g in e.get("gpus", [])}
    return {"cpu_util_mean": round(float(np.mean(cpu)), 1) if cpu else None,
            "gpu_util_mean": round(float(np.mean(gpu)), 1) if gpu else None,
            "gpu_util_source": ",".join(sorted(s for s in src if s)) or None}


def phase_breakdown(events: list[dict]) -> dict:
    """Client-side time by MetaSchedule phase, summed over shards, plus client start-up (by phase where the
    client reports it) and when the last RPC server registered (seconds into the run)."""
    out: dict[str, float] = {}
    planned = {e["shard"]: e["t"] for e in events if e["kind"] == "shard_planned"}
    for e in events:
        if e["kind"] == "shard_started":
            out["client_startup"] = out.get("client_startup", 0.0) + e["t"] - planned.get(e["shard"], e["t"])
            for k, v in (e.get("startup_s") or {}).items():
                if k != "total":
                    out[f"client_startup/{k}"] = out.get(f"client_startup/{k}", 0.0) + v
        if e["kind"] == "shard_finished":
            for k, v in (e.get("profile_s") or {}).items():
                if "/" not in k or k.startswith("EvoSearch/Evolve/Mutation") or k.startswith("EvoSearch/Sample"):
                    out[k] = out.get(k, 0.0) + v
    started = next((e["t"] for e in events if e["kind"] == "run_started"), None)
    ready = [e["t"] for e in events if e["kind"] == "server_ready" and isinstance(e.get("server"), int)]
    if started is not None and ready:
        out["servers_ready_at"] = max(ready) - started
    return {k: round(v, 2) for k, v in sorted(out.items())}


def checkpoint_dbs(run: wb.Run, tuned_at: int, times: list[float], out_root: str) -> list[str]:
    """For each time, a database with the records each shard had committed by then: the records its client put there
    from the tuning memory before its first trial (`memory_seeded.json`, first in the file), then its trials."""
    from workbench.runs.memory import seeded

    events = run.event_list()
    stage = os.path.join(run.dir, "stages", str(tuned_at))
    shards = sorted(int(d.split("-")[1]) for d in os.listdir(stage) if re.fullmatch(r"shard-\d+", d))
    seeds = {s: sum(seeded(os.path.join(stage, f"shard-{s}")).values()) for s in shards}  # first in each file
    paths = []
    for i, t in enumerate(times):
        shard_dirs = []
        for s in shards:
            done = [e["shard_trials"] for e in events if e["kind"] == "batch" and e["shard"] == s
                    and e["tuned_at"] == tuned_at and e["t"] <= t]
            src = os.path.join(stage, f"shard-{s}")
            n = (max(done) if done else 0) + seeds[s]
            d = os.path.join(out_root, f"cp{i}", f"shard-{s}")
            os.makedirs(d, exist_ok=True)
            shutil.copy(os.path.join(src, "database_workload.json"), d)
            with open(os.path.join(src, "database_tuning_record.json")) as f:
                lines = f.readlines()[:n]
            with open(os.path.join(d, "database_tuning_record.json"), "w") as f:
                f.writelines(lines)
            shard_dirs.append(d)
        paths.append(shard_dirs)
    return paths


def evaluate_checkpoints(run: wb.Run, target: TargetSpec, n: int, work: str) -> list[dict]:
    """Compile the model from the records committed at n evenly spaced times; time each on the whole device."""
    from workbench.models.load import load_model
    from workbench.results.compile import compile_with_database, merge_databases

    events = run.event_list()
    t0, _ = tuning_window(events)
    batch_times = sorted({e["t"] for e in events if e["kind"] == "batch"})
    picks = sorted({round((len(batch_times) - 1) * (i + 1) / n) for i in range(n)}) if batch_times else []
    times = [batch_times[i] + 0.01 for i in picks]
    model = load_model(run.spec.model, run.spec.input_shape)
    tvm_target = target.build()
    libs = {}
    for i, shard_dirs in enumerate(checkpoint_dbs(run, run.spec.slices[0], times, work)):
        merged = merge_databases(shard_dirs, os.path.join(work, f"cp{i}", "merged"))
        if merged.records:
            libs[str(i)] = compile_with_database(model.mod, tvm_target, merged.path, os.path.join(work, f"cp{i}.so"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}
    rows = infer_at(work, 100, libs, model, target, None, env) if libs else []
    by = {r["name"]: r for r in rows}
    return [{"t_s": round(times[i] - t0, 1), "latency_ms": by[str(i)]["latency_ms_median"] if str(i) in by else None}
            for i in range(len(times))]


def warm_intrinsics(target_kind: str, home: str) -> float:
    """Parse the target's tensor intrinsics into <home>/cache before any timed run, in a subprocess.

    A machine pays this once (~20 s on the H200 host); later workbench clients load the cache. Without
    it the first workbench config of a bench would carry that one-time cost and the others would not."""
    t0 = time.time()
    code = ("import sys; from workbench.tuning.intrinsics import load_family; "
            "print(load_family(sys.argv[1], sys.argv[2]))")
    subprocess.run([sys.executable, "-c", code, target_kind, os.path.join(home, "cache")], check=True)
    return round(time.time() - t0, 1)


def run_config(cfg: dict, args, home: str, seed: int) -> dict:
    spec = wb.TuneSpec(model=args.model, target=args.target, slices=(cfg["slice"],), servers=cfg["servers"],
                       shards=cfg["shards"], trials=args.trials, trials_per_batch=args.batch, seed=seed,
                       strategy=cfg["strategy"], cluster=cfg.get("cluster"),
                       sweep_slices=(100,), cost_model=args.cost_model, measure_timeout_s=args.measure_timeout,
                       gpus=tuple(range(cfg["gpus"])) if wb.detect_hardware().gpus else None,
                       builder_workers=None if cfg["name"] == "stock" else args.builder_workers)
    t_start = time.time()
    run = wb.tune(spec, home=home, runner=cfg["runner"], builder=cfg["builder"], first_round=cfg["first_round"])
    status = run.wait(timeout=args.run_timeout)
    if status not in ("done", "partial"):
        run.stop()
        return {**cfg, "seed": seed, "status": status, "message": run.message, "run": run.id}
    events = run.event_list()
    t0, t1 = tuning_window(events)
    started = min(e["t"] for e in events if e["kind"] == "run_started")
    trials = sum(e.get("shard_trials", 0) for e in events if e["kind"] == "shard_finished")
    sweep = run.sweep
    final = sweep[sweep.inferred_at == 100].iloc[0]
    servers = [e for e in events if e["kind"] == "server_ready"]
    out = {**cfg, "seed": seed, "status": status, "run": run.id, "trials": trials, "wall_s": round(t1 - t0, 1),
           "launch_to_end_s": round(time.time() - t_start, 1), "trials_per_s": round(trials / (t1 - t0), 4),
           "steady_trials_per_s": steady_rate(events),
           "batch_interval_s_median": round(float(np.median(gaps)), 2) if (gaps := batch_intervals(events)) else None,
           "batch_intervals_s": gaps,
           "first_batch_s": round(min(e["t"] for e in events if e["kind"] == "batch") - started, 1),
           "final_latency_ms": float(final.latency_ms_median), "final_latency_iqr_ms": float(final.latency_ms_iqr),
           "server_sm_counts": [e.get("sm_count") for e in servers],
           "slice_applied": all(e.get("slice_applied", False) for e in servers) if servers else cfg["slice"] == 100,
           "first_round": run.plan.options.first_round,  # "auto" as the plan resolved it
           "builder": run.plan.options.builder,
           "phases_s": phase_breakdown(events), **utilisation(events, t0, t1)}
    if args.checkpoints:
        target = run.plan.target
        out["checkpoints"] = evaluate_checkpoints(run, target, args.checkpoints,
                                                  os.path.join(home, "checkpoints", run.id))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mlp-small")
    p.add_argument("--target", default="auto")
    p.add_argument("--trials", type=int, default=32)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", default=None,
                   help="comma-separated seeds: every config runs once per seed (seed by seed), each compared with "
                        "the stock run of its seed; the summary keys are then medians over seeds")
    p.add_argument("--cost-model", default="xgb")
    p.add_argument("--configs", default="stock,1x1@100,2x2@50")
    p.add_argument("--checkpoints", type=int, default=4, help="compiled checkpoints per run (0: skip)")
    p.add_argument("--measure-timeout", type=int, default=60)
    p.add_argument("--builder-workers", type=int, default=None,
                   help="builder processes per workbench client (default: the client's share of the cores)")
    p.add_argument("--run-timeout", type=float, default=3000)
    p.add_argument("--home", default=None, help="workbench home for the runs (default: a temp folder)")
    p.add_argument("--name", default=None, help="result file name (default: <host kind>_<model>)")
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    args = p.parse_args()

    import tempfile

    import tvm

    home = args.home or tempfile.mkdtemp(prefix="wb-bench-")
    hw = wb.detect_hardware()
    configs = [parse_config(c.strip()) for c in args.configs.split(",")]
    rows: list[dict] = []
    name = args.name or f"{'gpu' if hw.gpus else 'cpu'}_{args.model}"
    path = os.path.join(args.out_dir, f"{name}.json")
    os.makedirs(args.out_dir, exist_ok=True)
    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [args.seed]
    kind = resolve_target(args.target, hw)
    warmed_s = warm_intrinsics(kind, home) if any(c["name"] != "stock" for c in configs) else None
    for seed in seeds:
        for cfg in configs:
            print(f"--- {cfg['name']} seed {seed}", flush=True)
            rows.append(run_config(cfg, args, home, seed))
            print(json.dumps({k: v for k, v in rows[-1].items() if k not in ("phases_s", "checkpoints")}), flush=True)
            result = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": hw.describe(hw.default_target),
                      "cores": hw.ncores, "host": platform.node(), "tvm": tvm.__version__, "model": args.model,
                      "trials": args.trials, "batch": args.batch, "seed": seeds[0], "seeds": seeds,
                      "cost_model": args.cost_model, "builder_workers": args.builder_workers,
                      "intrinsics_cache_warmed_s": warmed_s,
                      "configs": rows, **compare_seeds(rows)}
            with open(path, "w") as f:  # after every config, so a cut-off run still leaves its numbers
                json.dump(result, f, indent=1, default=str)
    print_table(result)
    print(f"\nwritten {path}")


def time_to(checkpoints: list[dict] | None, latency: float) -> float | None:
    for cp in checkpoints or []:
        if cp["latency_ms"] is not None and cp["latency_ms"] <= latency * TOLERANCE:
            return cp["t_s"]
    return None


def time_held(checkpoints: list[dict] | None, latency: float) -> float | None:
    """The first checkpoint from which every later one is within TOLERANCE of `latency` (`time_to` takes the first
    that is: with a checkpoint after every batch on a noisy host, one lucky timing can pass before the model holds)."""
    held = None
    for cp in checkpoints or []:
        if cp["latency_ms"] is not None and cp["latency_ms"] <= latency * TOLERANCE:
            held = cp["t_s"] if held is None else held
        else:
            held = None
    return held


def compare(rows: list[dict]) -> dict:
    """Ratios of each workbench config over stock, and the best config by trials per second."""
    stock = next((r for r in rows if r["name"] == "stock" and r.get("status") in ("done", "partial")), None)
    ok = [r for r in rows if r["name"] != "stock" and r.get("status") in ("done", "partial")]
    if stock is None or not ok:
        return {}
    ref = stock["final_latency_ms"]
    t_stock = time_to(stock.get("checkpoints"), ref) or stock["wall_s"]
    for r in rows:
        if r.get("status") not in ("done", "partial"):
            continue
        r["trials_per_s_ratio"] = round(r["trials_per_s"] / stock["trials_per_s"], 3)
        r["final_latency_ratio"] = round(r["final_latency_ms"] / ref, 4)
        t = time_to(r.get("checkpoints"), ref)
        r["time_to_stock_latency_s"] = t
        r["time_to_same_latency_reduction"] = None if t is None else round(1 - t / t_stock, 3)
    best = max(ok, key=lambda r: r["trials_per_s"])
    return {"stock_time_to_final_s": t_stock, "best_config": best["name"],
            "trials_per_s_ratio": best["trials_per_s_ratio"],
            "time_to_same_latency_reduction": best["time_to_same_latency_reduction"],
            "final_latency_ratio": best["final_latency_ratio"]}


def compare_seeds(rows: list[dict]) -> dict:
    """`compare` within each seed; over several seeds, each config's medians (and how often it reached
    stock's latency), the best config by median trials/s ratio, and its medians as the summary keys."""
    by_seed: dict[int, list[dict]] = {}
    for r in rows:
        by_seed.setdefault(r.get("seed", 0), []).append(r)
    results = {seed: compare(group) for seed, group in by_seed.items()}
    if len(by_seed) == 1:
        return next(iter(results.values()))
    per: dict[str, dict] = {}
    for name in dict.fromkeys(r["name"] for r in rows if r["name"] != "stock"):
        done = [r for r in rows if r["name"] == name and "trials_per_s_ratio" in r]
        if not done:
            continue
        reductions = [r["time_to_same_latency_reduction"] or 0.0 for r in done]
        per[name] = {"seeds": len(done),
                     "trials_per_s_ratio": round(float(np.median([r["trials_per_s_ratio"] for r in done])), 3),
                     "final_latency_ratio": round(float(np.median([r["final_latency_ratio"] for r in done])), 4),
                     "time_to_same_latency_reduction": round(float(np.median(reductions)), 3),
                     "reached_stock_latency": sum(r["time_to_same_latency_reduction"] is not None for r in done)}
    if not per:
        return {}
    best = max(per, key=lambda n: per[n]["trials_per_s_ratio"])
    return {"per_config_median": per, "best_config": best,
            **{k: per[best][k] for k in ("trials_per_s_ratio", "time_to_same_latency_reduction",
                                         "final_latency_ratio")}}


def print_table(result: dict) -> None:
    cols = ("name", "seed", "trials", "wall_s", "first_batch_s", "trials_per_s", "steady_trials_per_s",
            "batch_interval_s_median", "trials_per_s_ratio", "final_latency_ms",
            "final_latency_ratio", "time_to_stock_latency_s", "cpu_util_mean", "gpu_util_mean")
    print("\n" + " | ".join(cols))
    for r in result["configs"]:
        print(" | ".join(str(r.get(c, r.get("status") if c == "trials" else "")) for c in cols))
    for k in ("best_config", "trials_per_s_ratio", "time_to_same_latency_reduction", "final_latency_ratio"):
        if k in result:
            print(f"{k}: {result[k]}")


if __name__ == "__main__":
    main()
