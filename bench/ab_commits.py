"""Two commits of the workbench side by side in one invocation: `tuning_throughput.py` from each.

For every seed the bench runs once from a worktree of OLD and once from one of NEW (which goes first
alternates by seed, so a slow start of the machine does not favour one side), with the same arguments.
Each side imports its own `workbench` (PYTHONPATH points at its worktree; the runs' subprocesses
inherit it). The result holds both sides' rows and, per config, NEW over OLD per seed and the median.

    python bench/ab_commits.py OLD NEW --seeds 0,1,2 --out bench/results/X.json -- --model mlp --trials 32 ...
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
KEYS = ("trials_per_s", "wall_s", "first_batch_s", "final_latency_ms")


def worktree(commit: str, root: str) -> str:
    path = os.path.join(root, commit)
    subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", path, commit], check=True,
                   capture_output=True, text=True)
    return path


def run_side(tree: str, seed: int, bench_args: list[str], out_dir: str, name: str) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": tree + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, os.path.join(tree, "bench", "tuning_throughput.py"), *bench_args, "--seed", str(seed),
           "--name", name, "--out-dir", out_dir]
    subprocess.run(cmd, cwd=tree, env=env, check=True)
    with open(os.path.join(out_dir, name + ".json")) as f:
        return json.load(f)["configs"]


def compare(rows: dict[str, dict[int, list[dict]]]) -> dict:
    """Per config: NEW over OLD for each seed and key, and the median over seeds."""
    out: dict[str, dict] = {}
    old_rows = {(r["name"], s): r for s, rs in rows["old"].items() for r in rs}
    for seed, rs in rows["new"].items():
        for r in rs:
            o = old_rows.get((r["name"], seed))
            if not o or r.get("status") != "done" or o.get("status") != "done":
                continue
            c = out.setdefault(r["name"], {k: {} for k in KEYS})
            for k in KEYS:
                if r.get(k) and o.get(k):
                    c[k][str(seed)] = round(r[k] / o[k], 3)
    for c in out.values():
        for k in KEYS:
            c[k]["median"] = round(statistics.median(c[k].values()), 3) if c[k] else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", required=True)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    bench_args = argv[cut + 1:]  # after --: arguments of tuning_throughput.py
    seeds = [int(s) for s in args.seeds.split(",")]
    sha = {side: subprocess.run(["git", "-C", REPO, "rev-parse", "--short", c], check=True, capture_output=True,
                                text=True).stdout.strip() for side, c in (("old", args.old), ("new", args.new))}
    rows: dict[str, dict[int, list[dict]]] = {"old": {}, "new": {}}
    with tempfile.TemporaryDirectory(prefix="wb-ab-") as root:
        trees = {side: worktree(sha[side], root) for side in ("old", "new")}
        try:
            for i, seed in enumerate(seeds):
                for side in (("old", "new") if i % 2 == 0 else ("new", "old")):
                    rows[side][seed] = run_side(trees[side], seed, bench_args, root, f"{side}_s{seed}")
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", tree], capture_output=True)
    result = {"date": time.strftime("%Y-%m-%d %H:%M"), "old": sha["old"], "new": sha["new"], "seeds": seeds,
              "bench_args": bench_args, "new_over_old": compare(rows),
              "rows": {side: {str(s): r for s, r in by_seed.items()} for side, by_seed in rows.items()}}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result["new_over_old"], indent=1))


if __name__ == "__main__":
    main()
