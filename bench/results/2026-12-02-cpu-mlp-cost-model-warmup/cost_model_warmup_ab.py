# Kept as the script that made this folder's results (moved here from bench/): evidence, not maintained; its paths and imports are as they were then, and it may need updating to run.
"""CPU A/B of the XGBoost cost model's warm-up: TVM's 100 samples of random scores against one batch (16), paired seeds.

mlp (128x768, 2 tasks), 96 trials in batches of 16, TVM's evolution and round-robin task order, LocalBuilder and
LocalRunner, one process; prints each run as it ends and writes them all to --out (the model: its tasks' best mean run
times, weighted).
    python bench/cost_model_warmup_ab.py --out bench/results/2026-12-02-cpu-mlp-cost-model-warmup/runs.json
"""
from __future__ import annotations

import argparse
import json
import logging
import random
import tempfile
import time

import numpy as np


def one_run(tasks, target, seed: int, warmup: int, trials: int = 96, batch: int = 16) -> dict:
    from tvm.s_tir import meta_schedule as ms

    random.seed(seed)
    np.random.seed(seed)  # XGBModel's random scores use numpy's global generator
    with tempfile.TemporaryDirectory() as wd:
        ctxs, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(tasks, wd, strategy="evolutionary",
                                                                              num_threads=2, seed=seed)
        db = ms.database.JSONDatabase(work_dir=wd)
        t0 = time.time()
        ms.tune_tasks(tasks=ctxs, task_weights=weights, work_dir=wd, max_trials_global=trials,
                      num_trials_per_iter=batch, builder=ms.builder.LocalBuilder(max_workers=2),
                      runner=ms.runner.LocalRunner(), database=db,
                      cost_model=ms.cost_model.XGBModel(num_warmup_samples=warmup, num_tuning_cores=2),
                      task_scheduler=ms.task_scheduler.RoundRobin())
        best = {}
        for ctx in ctxs:
            top = db.get_top_k(db.commit_workload(ctx.mod), 1)
            best[ctx.task_name] = float(np.mean([float(x) for x in top[0].run_secs])) * 1e6
        model = sum(best[c.task_name] * float(w) for c, w in zip(ctxs, weights))
        return {"seed": seed, "warmup": warmup, "model_us": round(model, 2), "best_us": best,
                "s": round(time.time() - t0)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    from workbench.hardware import detect, target_spec
    from workbench.models.load import load_model
    from workbench.plan.tasks import extract_tasks

    target = target_spec("cpu", detect()).build()
    tasks = extract_tasks(load_model("mlp").mod, target)
    runs = []
    for seed in (0, 1, 2):
        for warmup in (100, 16):
            runs.append(one_run(tasks, target, seed, warmup))
            print(json.dumps(runs[-1]), flush=True)
    with open(args.out, "w") as f:
        json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
