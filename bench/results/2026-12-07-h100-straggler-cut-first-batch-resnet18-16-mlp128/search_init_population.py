"""Where a CUDA first batch's search goes, and what fewer initial samples would save (no GPU needed).

    cd bench/results/2026-12-07-h100-straggler-cut-first-batch-resnet18-16-mlp128
    PYTHONPATH=../../.. python search_init_population.py --seeds 0,1 --out search_init_population.json

resnet18 at batch 16, fp32, its costliest task by estimate, sm_90, one batch of 16 chosen with an untrained XGB model
(what every task's first batch meets), `bench.search_cost.one_batch` on this host's cores. TVM's EvolutionarySearch
samples its initial population in rounds of `population_size` random schedules until `init_min_unmeasured` (50) of
them pass the GPU checks, so its cost follows that minimum and the share of valid samples, not the population: the
lean evolution (a quarter of the population) samples as long as TVM's. Each variant is timed with TVM's profiler
phases: TVM's, the lean one, and each with `init_min_unmeasured` = the batch (16).
"""
from __future__ import annotations

import argparse
import json
import os

VARIANTS = {
    "evolutionary": {},
    "evolutionary-lean": {"population_size": 128, "genetic_num_iters": 2},
    "evolutionary, init 16": {"init_min_unmeasured": 16},
    "evolutionary-lean, init 16": {"population_size": 128, "genetic_num_iters": 2, "init_min_unmeasured": 16},
}


def main() -> None:
    from tvm.s_tir import meta_schedule as ms

    from bench.h200_vs_pytorch import model_input
    from bench.search_cost import costliest, one_batch
    from workbench.hardware import TargetSpec
    from workbench.models.load import load_model
    from workbench.plan.tasks import extract_tasks

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    target = TargetSpec("cuda", "sm_90", args.threads).build()
    key, _, shape = model_input("resnet18:16")
    task = costliest(extract_tasks(load_model(key, shape, "fp32").mod, target), None)
    runs = {name: [] for name in VARIANTS}
    for seed in (int(s) for s in args.seeds.split(",")):
        for name, kwargs in VARIANTS.items():
            r = one_batch(task, ms.search_strategy.EvolutionarySearch(**kwargs), 16, args.threads, seed)
            runs[name].append(r)
            print(name, seed, r["search_s"], r["phases_s"], flush=True)
    with open(args.out, "w") as f:
        json.dump({"task": task.task_name, "threads": args.threads, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
