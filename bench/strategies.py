"""Search strategies compared at equal trials, paired by seed: which one finds the faster model for the same budget.

    python -m bench.strategies --model mlp --target cpu --trials 96 \\
        --strategies evolutionary,evolutionary-neighbours --seeds 0,1,2 --out bench/results/cpu_strategies.json

Per seed, each strategy tunes the model from nothing (`fresh`) with the same seed and trial budget, one run after
the other; then the runs' kept models (what `Run.model()` exports: the tuned build, or the untuned one where tuning
did not pay) are timed side by side in this process (`bench.side_by_side`: interleaved rounds, CUDA events on a GPU,
wall clock on a CPU). Each seed's entry holds every strategy's median, wall and trials, and the sign test of each
strategy against the first (`paired`: its verdict, median ratio, rounds won). `summary` gives, per strategy, the
median over seeds of its time as a share of the first's (below 1: faster) and how many seeds it won conclusively.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import workbench as wb
from bench.h200_vs_pytorch import model_input
from bench.side_by_side import ROUNDS, Contender, cpu_timer, cuda_timer, interleaved, summary


def tune(model: str, target: str, trials: int, strategy: str, seed: int, home: str, per_batch: int = 16
         ) -> tuple[wb.Run, dict]:
    key, _, shape = model_input(model)
    t0 = time.time()
    run = wb.tune(wb.TuneSpec(model=key, input_shape=shape, target=target, trials=trials, strategy=strategy,
                              trials_per_batch=per_batch, seed=seed, fresh=True), home=home)
    status = run.wait(timeout=7200)
    row = run.results.to_dict("records")[-1] if run.results.shape[0] else {}
    return run, {"status": status, "run": run.id, "wall_s": round(time.time() - t0, 1),
                 "trials": int(row.get("trials_measured") or 0), "kept": row.get("kept")}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.strategies", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="mlp", help="a sample model with an optional batch (resnet18:1)")
    parser.add_argument("--target", default="cpu")
    parser.add_argument("--trials", type=int, default=96)
    parser.add_argument("--per-batch", type=int, default=16, help="trials per batch (TuneSpec.trials_per_batch)")
    parser.add_argument("--strategies", default="evolutionary,evolutionary-neighbours")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--home", default=os.environ.get("WORKBENCH_HOME", "/tmp/bench-strategies-home"))
    parser.add_argument("--out", required=True, help="the JSON to write (other models' entries are kept)")
    args = parser.parse_args()
    import torch

    strategies = args.strategies.split(",")
    device = "cuda" if args.target == "cuda" else "cpu"
    x = torch.randn(*model_input(args.model)[2], device=device)
    out = Path(args.out)
    kept = json.loads(out.read_text()) if out.exists() else {}
    seeds = []
    for seed in (int(s) for s in args.seeds.split(",")):
        runs, entry = {}, {"seed": seed}
        for strategy in strategies:
            runs[strategy], entry[strategy] = tune(args.model, args.target, args.trials, strategy, seed, args.home,
                                                        args.per_batch)
            print(json.dumps({strategy: entry[strategy]}), flush=True)
        contenders = {s: Contender(r.model(), x) for s, r in runs.items() if r.results.shape[0]}
        times = interleaved(contenders, cuda_timer if device == "cuda" else cpu_timer, args.rounds)
        for strategy in strategies[1:]:
            got = summary(times, strategy, strategies[0]) if strategy in times else {}
            entry[strategy] |= {"ms": got.get(f"{strategy}_ms"), "paired": got.get("paired")}
        entry[strategies[0]]["ms"] = statistics.median(times[strategies[0]]) if strategies[0] in times else None
        entry["rounds_ms"] = {s: [round(t, 5) for t in ts] for s, ts in times.items()}
        seeds.append(entry)
        print(json.dumps(entry), flush=True)
    shares = {s: [e[s]["paired"]["ratio"] for e in seeds if e[s].get("paired")] for s in strategies[1:]}
    won = {s: sum(1 for e in seeds if (e[s].get("paired") or {}).get("verdict") == "faster") for s in strategies[1:]}
    key = f"{args.model}@{args.target}:{args.trials}/{args.per_batch}"
    kept[key] = {"model": args.model, "target": args.target, "trials": args.trials, "per_batch": args.per_batch,
                 "strategies": strategies,
                 "against": strategies[0], "seeds": seeds,
                 "summary": {s: {"median_ratio": statistics.median(shares[s]) if shares[s] else None,
                                 "seeds_faster": won[s], "seeds": len(seeds)} for s in strategies[1:]},
                 "timed": f"side by side after the runs of a seed, {args.rounds} interleaved rounds"}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(kept, indent=1) + "\n")
    print(json.dumps(kept[key]["summary"]), flush=True)


if __name__ == "__main__":
    main()
