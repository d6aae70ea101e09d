"""Time to quality: stock MetaSchedule with its budget, then each workbench config for stock's wall time.

    python -m bench.anytime --model mlp --target cuda --stock-trials 64 --configs 1x1@100+batch \
        --seeds 0,1,2 --seed-index-only 0 --out bench/results/h200_anytime.json --merge

Per seed, stock (tuning_throughput's `stock`: LocalBuilder + LocalRunner) runs its budget; its wall is run
start (`run_started`) to its last measured batch. Each workbench config then gets `--budget-factor` x that
budget and `Run.finish()` at stock's wall after its own `run_started`. For each run, the model the product
would have built from the records committed by evenly spaced batch times (merged, floored, compiled) is
timed beside the untuned build on the whole device. Per seed: equal_time_latency_ratio (workbench at
stock's wall / stock's final), time_to_stock_latency_ratio (first checkpoint within 3 % of stock's final /
stock's time to its own final; 1.0 when never reached), time_to_stock_latency_held_ratio (the same from the first
checkpoint after which every one is within 3 %: with many checkpoints on a noisy host, one lucky timing can pass
first; `--checkpoints 0`, the default, takes one after every batch: with fewer, a ratio measures where the
checkpoints fell as much as the search), best_ms_at_300s (null for a run
under 300 s); then medians over the file's seeds, best_config by median equal-time ratio. `--part` runs stock, the
workbench or the warm runs alone (`--merge`: against the file's stock of the seed). If stock skips a task or fails,
the workbench is compared with the untuned build and PyTorch only. torch_eager_fp32_ms: the same layers in
PyTorch eager fp32 (TF32 off), random weights, CUDA events, median of 200 after warm-up (GPU only).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from multiprocessing import get_context

import numpy as np

import workbench as wb
from bench import anytime_warm as warm
from bench.anytime_torch import torch_eager
from bench.first_batch import first_tuned_batch_after_server, first_tuned_batch_steps
from bench.tuning_throughput import TOLERANCE, checkpoint_dbs, parse_config, time_held, time_to, warm_intrinsics
from workbench.hardware import TargetSpec, resolve_target

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # the repository root: `python -m bench.anytime` runs from it

AT_S = 300.0  # best_ms_at_300s: seconds after pressing Tune
OK = ("done", "partial")


# -- one run and its checkpoints ------------------------------------------------------------------
_CACHE: dict = {}


def _compile_checkpoint(job: dict) -> str:
    """Merge a checkpoint's shard databases, floor them by the measured defaults, compile (a pool worker)."""
    from workbench.models.load import load_model
    from workbench.plan.tasks import extract_tasks
    from workbench.results.compile import compile_with_database, floored_database, merge_databases

    key = (job["model"], json.dumps(job["target"]))
    if key not in _CACHE:
        target = TargetSpec.from_dict(job["target"]).build()
        model = load_model(job["model"], job["input_shape"])
        _CACHE[key] = (model, target, extract_tasks(model.mod, target))
    model, target, tasks = _CACHE[key]
    merged = merge_databases(job["shards"], os.path.join(job["dir"], "merged"))
    best = os.path.join(job["dir"], "best")
    floored_database(merged.path, best, tasks, target, job["defaults"])
    return compile_with_database(model.mod, target, best, job["dir"] + ".so")


def checkpoint_series(run: wb.Run, stop_s: float | None, n: int, work: str) -> dict:
    """The floored model at n evenly spaced batch times (n <= 0: after every batch) up to `stop_s` after run start
    (all: None), and, for a run whose shards started from the tuning memory, when they started (its model before any
    trial), timed with the untuned build in one inference process on the whole device."""
    from workbench.models.load import load_model
    from workbench.results.compile import compile_with_database
    from workbench.results.finish import measured_defaults
    from workbench.results.sweep import infer_at

    events = run.event_list()
    t0 = min(e["t"] for e in events if e["kind"] == "run_started")
    stage = run.spec.slices[0]
    batches = [e for e in events if e["kind"] == "batch" and e["tuned_at"] == stage
               and (stop_s is None or e["t"] - t0 <= stop_s)]
    times_all = sorted({e["t"] for e in batches})
    picks = list(range(len(times_all))) if n <= 0 or n >= len(times_all) else \
        sorted({round((len(times_all) - 1) * (i + 1) / n) for i in range(n)})
    times = [times_all[i] + 0.01 for i in picks]
    first_start: dict[int, float] = {}  # each shard's first start (a resumed shard starts again)
    for e in events:
        if e["kind"] == "shard_started" and e["tuned_at"] == stage:
            first_start.setdefault(e["shard"], e["t"])
    if any(e["kind"] == "shard_started" and e.get("memory_records") for e in events):  # warm: before any trial
        times = sorted({max(first_start.values()) + 0.01, *times})
    target = run.plan.target
    model = load_model(run.spec.model, run.spec.input_shape)
    untuned = run.folder.untuned_lib
    if not os.path.exists(untuned):  # the run failed before its stage finished
        os.makedirs(work, exist_ok=True)
        untuned = compile_with_database(model.mod, target.build(), None, os.path.join(work, "untuned.so"))
    defaults = measured_defaults(run.dir, stage)
    jobs = [{"model": run.spec.model, "input_shape": run.spec.input_shape, "target": target.to_dict(),
             "shards": dirs, "dir": os.path.join(work, f"cp{i}"), "defaults": defaults}
            for i, dirs in enumerate(checkpoint_dbs(run, stage, times, work))]
    workers = max(1, min(len(jobs), (os.cpu_count() or 2) // 2, 8))
    t_compile = time.time()
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) if workers > 1 else nullcontext() as pool:
        paths = list((pool.map if pool else map)(_compile_checkpoint, jobs))  # 2 cores: no spawned TVM
    libs = {"untuned": untuned, **{str(i): p for i, p in enumerate(paths)}}
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}
    by = {r["name"]: r for r in infer_at(work, 100, libs, model, target, None, env, reference=untuned)}

    cps = [{"t_s": round(t - t0, 1), "trials": trials_by(batches, t), "latency_ms": by[str(i)]["latency_ms_median"],
            "iqr_ms": by[str(i)]["latency_ms_iqr"], "match": by[str(i)].get("match")} for i, t in enumerate(times)]
    return {"untuned_ms": by["untuned"]["latency_ms_median"], "untuned_iqr_ms": by["untuned"]["latency_ms_iqr"],
            "checkpoints": cps, "checkpoint_compile_s": round(time.time() - t_compile, 1)}


def trials_by(batches: list[dict], t: float) -> int:
    """Trials measured by time `t`, summed over shards (each shard's `shard_trials` is cumulative)."""
    return sum(max([e["shard_trials"] for e in batches if e["shard"] == s and e["t"] <= t], default=0)
               for s in {e["shard"] for e in batches})


def run_one(cfg: dict, args: argparse.Namespace, home: str, seed: int, trials: int, stop_s: float | None,
            fresh: bool = True) -> dict:
    """Run one config; with `stop_s`, `Run.finish()` that many seconds after its `run_started` event. `fresh`: the
    home's tuning memory is not read (a cold run; seeds and configs share the home)."""
    spec = wb.TuneSpec(**warm.model_spec(args.model), target=args.target, slices=(cfg["slice"],), fresh=fresh,
                       servers=cfg["servers"],
                       shards=cfg["shards"], trials=trials, trials_per_batch=args.batch, seed=seed,
                       strategy=cfg["strategy"],
                       cost_model=args.cost_model, measure_timeout_s=args.measure_timeout,
                       gpus=tuple(range(cfg["gpus"])) if wb.detect_hardware().gpus else None)
    if args.attach:  # a finished run of this config (e.g. after a crash in the bench's own post-processing)
        run = wb.open_run(args.attach, home)
    else:
        run = wb.tune(spec, home=home, runner=cfg["runner"], builder=cfg["builder"], first_round=cfg["first_round"])
    t0, finished_at, deadline = None, None, time.time() + args.run_timeout
    while stop_s is not None and not run.finished and time.time() < deadline:
        if t0 is None:
            t0 = next((e["t"] for e in run.event_list("run_started")), None)
        if t0 is not None and time.time() >= t0 + stop_s:
            try:
                run.finish()
                finished_at = round(time.time() - t0, 1)
            except wb.SpecError:
                pass  # it ended on its own just now
            break
        time.sleep(0.1)
    status = run.wait(timeout=max(1.0, deadline - time.time()))
    if status not in (*OK, "failed", "stopped"):
        run.stop()
    events = run.event_list()
    t0 = min(e["t"] for e in events if e["kind"] == "run_started")
    batches = [e for e in events if e["kind"] == "batch" and (stop_s is None or e["t"] - t0 <= stop_s)]
    res = run.results.to_dict("records")
    first_batch = first_tuned_batch_after_server(events)
    out = {"config": cfg["name"], "first_tuned_batch_after_server_s": first_batch,
           "first_tuned_batch_steps_s": first_tuned_batch_steps(events), "run": run.id, "status": status,
           "builder": run.plan.options.builder,
           "message": run.message, "trials_asked": trials,
           "trials": sum(e.get("batch_size", 0) for e in batches), "stop_s": stop_s, "finish_called_s": finished_at,
           "wall_s": round(max(e["t"] for e in batches) - t0, 1) if batches else None,
           "product_final_ms": res[0]["tuned_ms"] if res else None,
           "skipped_tasks": [{"task": e["task"], "reason": e.get("reason")} for e in events
                             if e["kind"] == "task_skipped"],
           "failed_searches": [{"task": e["task"], "reason": e.get("reason")} for e in events
                               if e["kind"] == "task_search_failed"]}
    if batches or os.path.exists(run.folder.untuned_lib):
        out.update(checkpoint_series(run, stop_s, args.checkpoints, os.path.join(home, "checkpoints", run.id)))
    span = out["span_s"] = stop_s if finished_at is not None else out["wall_s"]
    cps = out.get("checkpoints") or []
    at = [c["latency_ms"] for c in cps if c["t_s"] <= AT_S]
    out["best_ms_at_300s"] = None if span is None or span < AT_S else min(at, default=out.get("untuned_ms"))
    out["latest_ms"] = cps[-1]["latency_ms"] if cps else out.get("untuned_ms")  # at the stop: the last checkpoint
    return out


# -- ratios and medians -----------------------------------------------------------------------------
def stock_problem(stock: dict | None) -> str | None:
    """Why stock cannot be the reference, or None."""
    if stock is None:
        return "stock not run (--no-stock)"
    if stock["status"] not in OK or stock.get("latest_ms") is None or stock.get("wall_s") is None:
        return f"stock run {stock['status']}: {stock.get('message') or 'no measured batch'}"
    skipped = stock["skipped_tasks"]
    return None if not skipped else (
        f"stock's design space failed for {', '.join(t['task'] for t in skipped)} ({skipped[0]['reason']}): stock "
        "MetaSchedule's tune_relax aborts on that; compared with the untuned build and PyTorch only")


def score_seed(raw: dict) -> None:
    """Per-seed ratios, written into the raw entries from their own numbers."""
    stock = raw.get("stock")
    if stock and not stock_problem(stock):
        stock["final_ms"] = stock["latest_ms"]
        stock["time_to_final_s"] = time_to(stock["checkpoints"], stock["final_ms"])
    for r in raw["configs"].values():
        r["untuned_speedup"] = None if not r.get("latest_ms") else round(r["untuned_ms"] / r["latest_ms"], 4)
        if stock and not stock_problem(stock) and r.get("latest_ms") is not None:
            ratio = round(r["latest_ms"] / stock["final_ms"], 4)
            short = r.get("stop_s") is not None and stock.get("wall_s") is not None and r["stop_s"] < stock["wall_s"]
            # cut short (--stop-s): records only accumulate, so the ratio at the stop bounds the one at stock's wall
            r["equal_time_latency_ratio"] = None if short else ratio
            r["equal_time_latency_ratio_upper_bound"] = ratio if short else None
            t = time_to(r.get("checkpoints"), stock["final_ms"])
            r["time_to_stock_latency_s"], r["reached_stock_latency"] = t, t is not None
            r["time_to_stock_latency_ratio"] = (None if short else 1.0) if t is None else round(
                t / stock["time_to_final_s"], 4)
            held = time_held(r.get("checkpoints"), stock["final_ms"])
            r["time_to_stock_latency_held_s"] = held
            r["time_to_stock_latency_held_ratio"] = (None if short else 1.0) if held is None else round(
                held / stock["time_to_final_s"], 4)


    warm.score(raw, stock if stock and not stock_problem(stock) else None, time_to)


def med(values: list) -> float | None:
    """Median of the values given (None left out), to 5 significant digits; None when none is given."""
    vals = [v for v in values if v is not None]
    return float(f"{np.median(vals):.5g}") if vals else None


def summarize(entry: dict) -> None:
    """The entry's summary keys from its raw seeds: medians per config, best_config and its medians."""
    raws = entry["raw"]
    for raw in raws.values():
        score_seed(raw)
    stocks = [r["stock"] for r in raws.values() if r.get("stock")]
    problems = sorted({p for s in [r.get("stock") for r in raws.values()] if (p := stock_problem(s))})
    names = list(dict.fromkeys(n for r in raws.values() for n in r["configs"]))
    per = {}
    for n in names:
        rows = [r["configs"][n] for r in raws.values() if n in r["configs"]]
        keys = ("equal_time_latency_ratio", "equal_time_latency_ratio_upper_bound", "time_to_stock_latency_ratio",
                "time_to_stock_latency_held_ratio", "best_ms_at_300s", "latest_ms", "untuned_speedup")
        per[n] = {"seeds": len(rows), **{k: med([r.get(k) for r in rows]) for k in keys},
                  "reached_stock_latency": sum(bool(r.get("reached_stock_latency")) for r in rows)}
    rank = "latest_ms" if problems else "equal_time_latency_ratio"
    if not problems and all(per[n][rank] is None for n in names):
        rank = "equal_time_latency_ratio_upper_bound"  # every config was cut short by --stop-s
    ranked = [n for n in names if per[n][rank] is not None]
    best = min(ranked, key=lambda n: per[n][rank]) if ranked else None
    notes = [n for n in entry.get("notes", []) if n.startswith("torch_eager")] + problems
    for seed, raw in sorted(raws.items()):
        for r in [raw.get("stock"), *raw["configs"].values()]:
            if r and r.get("best_ms_at_300s") is None and r.get("span_s") is not None:
                notes.append(f"seed {seed} {r['config']}: best_ms_at_300s null, the run was {r['span_s']} s (< 300 s)")
            if r and r.get("equal_time_latency_ratio_upper_bound") is not None:
                notes.append(f"seed {seed} {r['config']}: stopped at {r['stop_s']} s (--stop-s), before stock's wall "
                             f"{raw['stock']['wall_s']} s: equal_time_latency_ratio <= "
                             f"{r['equal_time_latency_ratio_upper_bound']} (its model at the stop)")
            elif r and r.get("reached_stock_latency") is False:
                notes.append(f"seed {seed} {r['config']}: never within 3 % of stock's final by stock's wall; "
                             "time_to_stock_latency_ratio counts as 1.0")
    seeds = sorted(int(s) for s in raws)
    entry.update({"seeds": seeds, "stock_wall_s": med([s.get("wall_s") for s in stocks]),
                  "stock_final_ms": None if problems else med([s.get("final_ms") for s in stocks]),
                  "stock_time_to_final_s": None if problems else med([s.get("time_to_final_s") for s in stocks]),
                  "untuned_ms": med([r.get("untuned_ms") for raw in raws.values()
                                     for r in [raw.get("stock"), *raw["configs"].values()] if r]),
                  "torch_eager_fp32_ms": med([r.get("torch_eager_fp32_ms") for r in raws.values()]),
                  "best_config": best, "stock_best_ms_at_300s": med([s.get("best_ms_at_300s") for s in stocks]),
                  "stock_problem": problems[0] if problems else None, "per_config": per, "notes": notes,
                  **{k: per[best][k] if best else None for k in (
                      "equal_time_latency_ratio", "equal_time_latency_ratio_upper_bound", "time_to_stock_latency_ratio",
                      "time_to_stock_latency_held_ratio", "best_ms_at_300s")}})
    best_rows = [r["configs"][best] for r in raws.values() if best in r["configs"]] if best else []
    warm_names = [n for r in raws.values() for n in r.get("warm_configs", {})]
    warm_name = best if best in warm_names else next(iter(warm_names), None)  # warm runs may lack the cold runs' best
    warm_rows = [r["warm_configs"][warm_name] for r in raws.values() if warm_name in r.get("warm_configs", {})]
    entry["first_tuned_batch_after_server_s"] = med([r.get("first_tuned_batch_after_server_s") for r in best_rows])
    if warm_rows:
        entry["warm_time_to_stock_latency_ratio"] = med([r.get("warm_time_to_stock_latency_ratio") for r in warm_rows])
        entry["warm_first_ms"] = med([r.get("warm_first_ms") for r in warm_rows])
        entry["warm_first_better_than_untuned"] = sum(bool(r.get("warm_first_better_than_untuned")) for r in warm_rows)
    if problems:  # no stock reference: the workbench against the untuned build and PyTorch
        entry["equal_time_latency_ratio"] = entry["time_to_stock_latency_ratio"] = None
        entry["time_to_stock_latency_held_ratio"] = None
        entry["workbench_latest_ms"] = per[best]["latest_ms"] if best else None
        entry["untuned_speedup"] = per[best]["untuned_speedup"] if best else None


def log_line(seed: int, raw: dict) -> str:
    """The seed's one-line account (printed and kept in the file)."""
    s = raw.get("stock") or {}
    parts = [f"seed {seed}: stock {s.get('wall_s')} s -> {s.get('latest_ms')} ms (untuned {s.get('untuned_ms')})"]
    for n, r in raw["configs"].items():
        parts.append(f"{n} at {r.get('stop_s')} s -> {r.get('latest_ms')} ms, ratio {r.get('equal_time_latency_ratio')}"
                     f", time-to-stock {r.get('time_to_stock_latency_s')} s ({r.get('time_to_stock_latency_ratio')})")
    return "; ".join(parts) + f"; torch {raw.get('torch_eager_fp32_ms')} ms"


def write(path: str, doc: dict) -> None:
    """Write atomically, after every run: a call cut off still leaves the runs before."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1, default=str)
    os.replace(path + ".tmp", path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag, kind, default, text in (
            ("--model", str, "mlp", None), ("--target", str, "auto", "auto, cpu (llvm) or cuda"),
            ("--stock-trials", int, 64, None), ("--batch", int, 16, "trials per batch, stock and workbench"),
            ("--budget-factor", int, 50, "workbench budget: this x stock's trials"),
            ("--configs", str, "1x1@100+batch", "workbench configs (tuning_throughput's KxS@P[+...])"),
            ("--seeds", str, "0,1,2", None), ("--seed-index-only", int, None, "run only the N-th of --seeds"),
            ("--wall-s", float, 300.0, "workbench time when there is no stock wall"),
            ("--stop-s", float, None, "stop the workbench by this time even before stock's wall (short device time)"),
            ("--checkpoints", int, 0, "models timed per run (0: one after every batch, the time-to ratios' "
             "resolution; fewer save device time)"),
            ("--cost-model", str, "xgb", None), ("--measure-timeout", int, 60, None),
            ("--run-timeout", float, 3000.0, None), ("--home", str, None, "workbench home (default: a temp folder)"),
            ("--attach", str, None, "measure this finished run (under --home) instead of starting one"),
            ("--warm-from", str, None, "also run each config warm, after the memory learnt this (bench/anytime_warm)"),
            ("--warm-trials", int, 256, "the --warm-from run's trials"),
            ("--out", str, os.path.join(HERE, "results", "h200_anytime.json"), None)):
        p.add_argument(flag, type=kind, default=default, help=text)
    p.add_argument("--part", choices=("both", "stock", "workbench", "warm"), default="both",
                   help="stock or workbench alone (with --merge: the workbench uses the file's stock of its seed); "
                        "warm: only the --warm-from runs, against the file's stock")
    p.add_argument("--no-stock", action="store_true", help="no stock run (one known to fail); the workbench "
                                                           "runs --wall-s and is compared with untuned and torch")
    p.add_argument("--merge", action="store_true", help="add/update these seeds in --out, keep the rest")
    args = p.parse_args()
    args.target = {"llvm": "cpu"}.get(args.target, args.target)

    import tvm

    hw = wb.detect_hardware()
    kind = resolve_target(args.target, hw)
    home = args.home or tempfile.mkdtemp(prefix="wb-anytime-")
    configs = [parse_config(c.strip()) for c in args.configs.split(",")]
    if any(c["name"] == "stock" for c in configs):
        raise SystemExit("--configs lists workbench configs; stock always runs first (--part, --no-stock)")
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.part == "warm" and not args.warm_from:
        raise SystemExit("--part warm runs the --warm-from runs: give --warm-from")
    if args.seed_index_only is not None:
        seeds = [seeds[args.seed_index_only]]
    with open(args.out if args.merge and os.path.exists(args.out) else os.devnull) as f:
        doc = json.loads(f.read() or '{"models": []}')
    doc.update({"date": time.strftime("%Y-%m-%d %H:%M"), "machine": hw.describe(hw.default_target),
                "cores": hw.ncores, "host": platform.node(), "tvm": tvm.__version__, "tolerance": TOLERANCE})
    if not any(m["model"] == args.model for m in doc["models"]):
        doc["models"].append({"model": args.model, "raw": {}})
    entry = next(m for m in doc["models"] if m["model"] == args.model)
    entry.update({"target": kind, "stock_trials": args.stock_trials, "batch": args.batch,
                  "workbench_trials": args.budget_factor * args.stock_trials, "checkpoints": args.checkpoints})
    torch_ms, torch_note = torch_eager(args.model, kind) if ":" not in args.model else (
        None, "torch_eager_fp32_ms: timed at the model's default input only")
    entry["notes"] = [torch_note] if torch_note else []
    warmed = warm_intrinsics(kind, home) if args.part != "stock" else None
    for seed in seeds:
        raw = entry["raw"].setdefault(str(seed), {"stock": None, "configs": {}})
        raw["torch_eager_fp32_ms"] = torch_ms if torch_ms is not None else raw.get("torch_eager_fp32_ms")
        raw["intrinsics_cache_warmed_s"] = warmed
        if args.no_stock:
            raw["stock"] = None
        elif args.part not in ("workbench", "warm"):  # a new stock: the seed's old workbench runs no longer pair
            print(f"--- stock seed {seed}", flush=True)
            raw["stock"], raw["configs"] = run_one(parse_config("stock"), args, home, seed, args.stock_trials, None), {}
            summarize(entry)
            write(args.out, doc)
        elif raw["stock"] is None:
            raise SystemExit(f"no stock run of seed {seed} in {args.out}: run --part stock first (with --merge)")
        stock = raw["stock"]
        stop_s = stock["wall_s"] if stock and stock.get("wall_s") else args.wall_s
        stop_s = stop_s if args.stop_s is None else min(stop_s, args.stop_s)
        for cfg in configs if args.part in ("both", "workbench") else []:
            print(f"--- {cfg['name']} seed {seed}, stopped at {stop_s} s", flush=True)
            trials = args.budget_factor * args.stock_trials
            raw["configs"][cfg["name"]] = run_one(cfg, args, home, seed, trials, stop_s)
            summarize(entry)
            write(args.out, doc)
        if args.warm_from and args.part != "stock":
            if not warm.taught(home):  # the file's warm_from may be another call's home, on another machine
                entry["warm_from"] = warm.teach(args, warm.home_of(home), configs[0]["slice"])
                print(f"--- warm home taught: {entry['warm_from']}", flush=True)
                write(args.out, doc)
            raw["warm_from_run"] = entry["warm_from"]["run"]  # the teaching run this seed's memory started from
            for cfg in configs:
                print(f"--- {cfg['name']} warm seed {seed}, stopped at {stop_s} s", flush=True)
                raw.setdefault("warm_configs", {})[cfg["name"]] = run_one(
                    cfg, args, warm.home_of(home), seed, args.budget_factor * args.stock_trials, stop_s, fresh=False)
                summarize(entry)
                write(args.out, doc)
        summarize(entry)
        raw["log"] = log_line(seed, raw)
        print(raw["log"], flush=True)
    summarize(entry)
    write(args.out, doc)
    print(json.dumps({k: v for k, v in entry.items() if k != "raw"}, indent=1, default=str))
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
