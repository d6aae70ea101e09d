# Kept as the script that made this folder's results (moved here from bench/): evidence, not maintained; its paths and imports are as they were then, and it may need updating to run.
"""Are the design spaces the same whichever way the tensor intrinsics are registered? (issue 16, step 1d)

A stock client imports `tvm.s_tir.tensor_intrin` whole; a workbench client registers its target's family
from a JSON cache (`workbench.intrinsics.load_family`). This generates each task's design spaces for the
H200's CUDA target (no GPU needed) in a fresh process each way, and compares the traces, schedule rules,
postprocessors and mutator probabilities, byte for byte.

    python bench/design_space_check.py --model mlp --out bench/results/<folder>/design_spaces.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def spaces(mode: str, model: str, cache: str, work: str) -> dict:
    """In this process: every task's design spaces and the space generator's parts, as text."""
    from tvm.s_tir import meta_schedule as ms

    from workbench.hardware import TargetSpec
    from workbench.models.load import load_model
    from workbench.plan.tasks import extract_tasks

    target = TargetSpec("cuda", "sm_90", 16).build()
    if mode == "workbench":
        from workbench.tuning.intrinsics import load_family

        load_family("cuda", cache)
    tasks = extract_tasks(load_model(model, None).mod, target)
    contexts, _ = ms.relax_integration.extracted_tasks_to_tune_contexts(
        tasks, work_dir=work, space="post-order-apply", strategy="evolutionary", num_threads=2, seed=0)
    out = {}
    for ctx in contexts:
        gen = ctx.space_generator
        out[ctx.task_name] = {"traces": [str(s.trace) for s in ctx.generate_design_space()],
                              "rules": [f"{type(r).__name__}:{r}" for r in gen.sch_rules],
                              "postprocs": [type(p).__name__ for p in gen.postprocs],
                              "mutators": sorted(f"{type(m).__name__}:{p}" for m, p in gen.mutator_probs.items())}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mlp")
    p.add_argument("--out", required=True)
    p.add_argument("--_mode", choices=("stock", "workbench"))
    p.add_argument("--_cache")
    args = p.parse_args()
    if args._mode:  # the child: print its spaces as JSON
        print(json.dumps(spaces(args._mode, args.model, args._cache, tempfile.mkdtemp(prefix="wb-ds-"))))
        return
    cache = tempfile.mkdtemp(prefix="wb-ds-cache-")
    got, seconds = {}, {}
    for mode in ("workbench", "workbench", "stock"):  # the first workbench run fills the cache, the second reads it
        t0 = time.time()
        out = subprocess.run([sys.executable, __file__, "--model", args.model, "--out", args.out, "--_mode", mode,
                              "--_cache", cache], capture_output=True, text=True, check=True)
        got[mode] = json.loads(out.stdout.strip().splitlines()[-1])
        seconds.setdefault(mode, []).append(round(time.time() - t0, 1))
    tasks = sorted(got["stock"])
    same = {t: {part: got["stock"][t][part] == got["workbench"].get(t, {}).get(part)
                for part in ("traces", "rules", "postprocs", "mutators")} for t in tasks}
    doc = {"model": args.model, "target": "cuda sm_90 (nvidia/nvidia-h100 tag), generated without a GPU",
           "tasks": tasks, "spaces_per_task": {t: len(got["stock"][t]["traces"]) for t in tasks},
           "identical": same, "all_identical": all(all(v.values()) for v in same.values()),
           "process_seconds": seconds, "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count()}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps({k: v for k, v in doc.items() if k != "identical"}, indent=1))


if __name__ == "__main__":
    main()
