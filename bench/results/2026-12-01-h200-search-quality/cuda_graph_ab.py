# Kept as the script that made this folder's results (moved here from bench/): evidence, not maintained; its paths and imports are as they were then, and it may need updating to run.
"""CUDA graphs in the compiled model: the same build with Relax's CUDA-graph capture off and on, timed side by side.

    python bench/cuda_graph_ab.py --model mlp --out bench/results/<dated folder>/cuda_graph_ab.json [--db DIR]

Compiles the model's untuned build (DLight defaults) and, with `--db`, a tuned build from that database, each
without and with `relax.backend.use_cuda_graph`, checks the outputs against the untuned build and times every
library alternately (`--rounds` rounds of the product's inference worker on the whole GPU).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from workbench.hardware import detect, resolve_target, target_spec  # noqa: E402
from workbench.models.load import load_model  # noqa: E402
from workbench.results.compile import compile_with_database  # noqa: E402
from workbench.results.sweep import infer_at  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--db", help="a tuned database folder to compile as well")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    hw = detect()
    target = target_spec(resolve_target(args.target, hw), hw)
    model = load_model(args.model)
    work = tempfile.mkdtemp(prefix="wb-cuda-graph-")
    libs = {}
    for name, db in [("untuned", None), *([("tuned", args.db)] if args.db else [])]:
        for graph in (False, True):
            key = f"{name}{'+graph' if graph else ''}"
            libs[key] = compile_with_database(model.mod, target.build(), db, os.path.join(work, f"{key}.so"),
                                              cuda_graph=graph)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_MPS_")}
    rounds: dict[str, list[float]] = {k: [] for k in libs}
    checks = {}
    for i in range(args.rounds):
        order = dict(reversed(libs.items())) if i % 2 else libs  # alternate the order against drift
        for row in infer_at(work, 100, order, model, target, None, env, reference=libs["untuned"]):
            rounds[row["name"]].append(row["latency_ms_median"])
            checks[row["name"]] = {k: row.get(k) for k in ("match", "max_abs_err", "output_range", "input")}
    medians = {k: statistics.median(v) for k, v in rounds.items()}
    result = {"model": args.model, "target": target.kind, "rounds_ms": rounds, "median_ms": medians,
              "checks": checks,
              "graph_over_plain": {k: round(medians[f"{k}+graph"] / medians[k], 4) for k in libs if "+" not in k}}
    print(json.dumps(result, indent=1))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
