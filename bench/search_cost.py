"""What one batch's search costs, by search strategy: the seconds a client spends choosing a task's first batch of
candidates (no build, no measurement), on this host's cores.

    python -m bench.search_cost --model resnet18:16 --precision fp32 --arch sm_90 --out search_cost.json

The task is the model's costliest by MetaSchedule's estimate (FLOPs x weight) unless `--task` names one. Each
strategy (`workbench.tuning.search_strategy.create`, as a client makes it) gets a fresh tune context, an empty
database and an untrained XGB cost model (what every task's first batch meets), and is timed choosing `--batch`
candidates, `--repeats` times with seeds 0, 1, ...; the JSON holds every timing (with the phases of TVM's profiler)
and the medians. A later batch also scores its population with a trained model (feature extraction and prediction
per candidate), so the first batch is a lower bound on the search's cost per batch. No GPU is needed: the CUDA
target is built from `--arch`.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

STRATEGIES = "evolutionary,evolutionary-lean,replay-trace"


def costliest(tasks: list, name: str | None):
    """The task named `name`, else the one with the most FLOPs x weight."""
    from workbench.plan.tasks import task_info

    if name:
        return next(t for t in tasks if t.task_name == name)
    return max(tasks, key=lambda t: task_info(t).flops * float(t.weight))


def one_batch(task, strategy: str, batch: int, threads: int, seed: int) -> dict:
    """Seconds to choose one batch of `batch` candidates for `task` with a fresh `strategy`."""
    from tvm.s_tir import meta_schedule as ms

    from workbench.tuning import cost_model as cost_models
    from workbench.tuning import search_strategy as strategies

    with tempfile.TemporaryDirectory() as work:
        (ctx,), _ = ms.relax_integration.extracted_tasks_to_tune_contexts(
            [task], work_dir=work, space="post-order-apply", strategy=strategies.create(strategy),
            num_threads=threads, seed=seed)
        t0 = time.perf_counter()
        spaces = ctx.generate_design_space()
        t1 = time.perf_counter()
        with ms.Profiler() as profiler:  # TVM's own timed scopes of the search (EvoSearch/...)
            ctx.pre_tuning(max_trials=batch, num_trials_per_iter=batch, design_spaces=spaces,
                           database=ms.database.MemoryDatabase(), cost_model=cost_models.create("xgb", threads))
            candidates = ctx.generate_measure_candidates() or []
        t2 = time.perf_counter()
        ctx.post_tuning()
    phases = {k: round(float(v), 2) for k, v in profiler.get().items() if float(v) >= 0.01}
    return {"seed": seed, "design_space_s": round(t1 - t0, 2), "search_s": round(t2 - t1, 2),
            "candidates": len(candidates), "phases_s": phases}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.search_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18:16", help="a sample, optionally :batch")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "fp16"))
    parser.add_argument("--arch", default="sm_90", help="the CUDA architecture searched for ('' for this CPU)")
    parser.add_argument("--task", default=None, help="a task's name (default: the costliest by estimate)")
    parser.add_argument("--strategies", default=STRATEGIES)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)

    from bench.h200_vs_pytorch import model_input
    from workbench.hardware import TargetSpec
    from workbench.models.load import load_model
    from workbench.plan.tasks import extract_tasks

    spec = TargetSpec("cuda", args.arch, args.threads) if args.arch else TargetSpec("cpu", "", args.threads)
    target = spec.build()
    if spec.kind == "cuda" and args.precision == "fp16":
        from workbench.tuning.intrinsics import load_family

        load_family("cuda", tempfile.mkdtemp(prefix="intrinsics-"))
    key, _, shape = model_input(args.model)
    task = costliest(extract_tasks(load_model(key, shape, args.precision).mod, target), args.task)
    print(f"{args.model} {args.precision}: task {task.task_name} (weight {task.weight}), "
          f"{args.threads} threads, batches of {args.batch}", flush=True)
    rows: dict[str, dict] = {}
    out = {"model": args.model, "precision": args.precision, "target": str(target.kind), "arch": args.arch,
           "task": task.task_name, "threads": args.threads, "batch": args.batch, "host_cores": os.cpu_count(),
           "strategies": rows}
    for strategy in args.strategies.split(","):
        runs = [one_batch(task, strategy, args.batch, args.threads, seed) for seed in range(args.repeats)]
        rows[strategy] = {"median_search_s": statistics.median(r["search_s"] for r in runs), "runs": runs}
        print(f"  {strategy}: {rows[strategy]['median_search_s']} s ({runs})", flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")  # each strategy as it is timed


if __name__ == "__main__":
    main()
