"""The warm half of `bench.anytime`: the workbench tuned again after the tuning memory has learnt a related run.

    python -m bench.anytime --model resnet18:16 --warm-from resnet18:1 --warm-trials 256 ...

`--warm-from` names what the memory holds before the measured runs: `same` (the model itself), a sample model, or
`model:batch` (its full input at that batch). That run is tuned once, fresh, in a home of its own (`<home>/warm`),
with `--warm-trials` trials at the first config's slice; each seed's configs are then run again in that home, not
fresh (they read its memory), with the cold runs' stop. Per seed: `warm_time_to_stock_latency_ratio` (the warm run's
time to within 3 % of stock's final over stock's time to its final; 1.0 when never), `warm_first_ms` (its model at
its first checkpoint: when its shards start, from the memory's records alone, before any trial) beside the untuned
build. Each warm run's records join that home's memory too, so a later seed's warm run also holds the earlier seeds'
warm runs: `warm_from` says so.
"""
from __future__ import annotations

import argparse
import os
import time

import workbench as wb


def model_spec(name: str) -> dict:
    """'resnet18:16' -> {"model": "resnet18", "input_shape": (16, 3, 224, 224)}; 'mlp' -> {"model": "mlp"}."""
    if ":" not in name:
        return {"model": name}
    from bench.h200_vs_pytorch import model_input

    key, _, shape = model_input(name)
    return {"model": key, "input_shape": shape}


def teach(args: argparse.Namespace, home: str, slice_percent: int) -> dict:
    """Tune `--warm-from` once, fresh, into the warm home's memory; what it was, for the file."""
    source = args.model if args.warm_from == "same" else args.warm_from
    spec = wb.TuneSpec(**model_spec(source), target=args.target, slices=(slice_percent,), trials=args.warm_trials,
                       trials_per_batch=args.batch, cost_model=args.cost_model, fresh=True)
    t0 = time.time()
    run = wb.tune(spec, home=home)
    status = run.wait(timeout=args.run_timeout)
    rows = run.results.to_dict("records")
    return {"warm_from": source, "run": run.id, "status": status, "trials": int(rows[0]["trials_measured"])
            if rows else 0, "wall_s": round(time.time() - t0, 1), "slice": slice_percent}


def score(raw: dict, stock: dict | None, time_to) -> None:
    """The seed's warm ratios, written into its warm entries (stock: the seed's scored stock run, or None)."""
    for r in raw.get("warm_configs", {}).values():
        r["warm_first_ms"] = (r.get("checkpoints") or [{}])[0].get("latency_ms")
        r["warm_first_better_than_untuned"] = None if r["warm_first_ms"] is None or r.get("untuned_ms") is None \
            else r["warm_first_ms"] < r["untuned_ms"]
        if not stock or stock.get("final_ms") is None or not stock.get("time_to_final_s"):
            continue
        t = time_to(r.get("checkpoints"), stock["final_ms"])
        r["warm_time_to_stock_latency_s"] = t
        r["warm_time_to_stock_latency_ratio"] = 1.0 if t is None else round(t / stock["time_to_final_s"], 4)


def home_of(home: str) -> str:
    return os.path.join(home, "warm")


def taught(home: str) -> bool:
    """Whether the warm home under `home` already holds a run (its memory learnt from it)."""
    runs = os.path.join(home_of(home), "runs")
    return os.path.isdir(runs) and any(os.scandir(runs))
