# Kept as the script that made this folder's results (moved here from bench/): evidence, not maintained; its paths and imports are as they were then, and it may need updating to run.
"""Where a build batch's time goes: 16 candidates of a model's tasks, built in-process step by step,
then through `PersistentBuilder` three times (warm pool), with each export kind.

    python bench/builder_profile.py --model mlp --target cuda --workers 16
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def candidates(model: str, target_kind: str, n: int):
    import logging

    from tvm.s_tir import meta_schedule as ms

    from workbench.hardware import TargetSpec, detect, target_spec
    from workbench.tuning.intrinsics import load_family
    from workbench.models.load import load_model
    from workbench.plan.tasks import extract_tasks

    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    spec: TargetSpec = target_spec(target_kind, detect())
    target = spec.build()
    load_family(spec.kind, tempfile.mkdtemp())
    tasks = extract_tasks(load_model(model, None).mod, target)
    ctxs, _ = ms.relax_integration.extracted_tasks_to_tune_contexts(
        tasks, work_dir=tempfile.mkdtemp(), space="post-order-apply", strategy="replay-trace", num_threads=4, seed=0)
    out = []
    for ctx in ctxs:
        spaces = ctx.generate_design_space()
        ctx.pre_tuning(max_trials=n, num_trials_per_iter=n, design_spaces=spaces)
        out += [ms.builder.BuilderInput(c.sch.mod, target) for c in ctx.search_strategy.generate_measure_candidates()]
    return out[:n]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp")
    p.add_argument("--target", default="cuda")
    p.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("-n", type=int, default=16)
    args = p.parse_args()
    from tvm.s_tir.meta_schedule.builder.local_builder import default_export

    from workbench.tuning.plugins import PersistentBuilder, build_candidate, export_so

    inputs = candidates(args.model, args.target, args.n)
    report: dict = {"candidates": len(inputs), "workers": args.workers}
    steps = {"build": [], "export_so": [], "export_tar": []}
    for b in inputs[:3]:
        t = time.time(); mod = build_candidate(b.mod, b.target, None); steps["build"].append(time.time() - t)
        t = time.time(); export_so(mod); steps["export_so"].append(time.time() - t)
        t = time.time(); default_export(mod); steps["export_tar"].append(time.time() - t)
    report["in_process_s"] = {k: [round(x, 2) for x in v] for k, v in steps.items()}
    for name, export in (("so", export_so), ("tar", None)):  # None: the stock tar export
        builder = PersistentBuilder(args.workers, f_export=export)
        t = time.time(); builder.prewarm(); [f.result() for f in builder._warm]
        rounds = [round(time.time() - t, 2)]
        for _ in range(3):
            t = time.time(); res = builder.build(inputs); rounds.append(round(time.time() - t, 2))
        report[f"pool_{name}_s"] = {"prewarm": rounds[0], "batches": rounds[1:],
                                    "errors": sum(1 for r in res if r.error_msg)}
        builder.shutdown()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
