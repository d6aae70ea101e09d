# Kept as part of the scripts that made this folder's results (same_draws.py imports it; moved here from bench/): evidence, not maintained; its paths and imports are as they were then, and it may need updating to run.
"""Compare two tuning runs' proposal sequences: where they part, and whether what was measured explains it.

A sequence is a run's measured batches in order, as `bench/same_draws.py` records them from the run's
database: per batch the task, and per candidate the structural hash of its schedule and its run_secs
(`FAILED_S` or above where it failed, as the database stores a failure). Pure functions, no TVM.

With draws made reproducible (the `WORKBENCH_BENCH_SAME_DRAWS` knob), a seeded search proposes the same
batch whenever it reads the same inputs. Before a task's batch it reads (1) which task the scheduler
picks, from each task's best time so far (`workbench.task_scheduler.gradient`), and (2) the task's best
measured records in rank order, the evolution's parents (`parents` of them: population_size x
init_measured_ratio; failed records are never parents). The untrained XGB model (below 100 samples) scores
at random and reads no measurement. So when two runs part at batch k while every earlier batch was the
same, either one of those inputs differed at some batch <= k (a measurement decided it: two candidates
whose times flipped order, a task pick that flipped, a candidate that failed in one run only), or
something other than the measurements reached the search.
"""
from __future__ import annotations

import math

FAILED_S = 1e9  # a run_secs mean at or above this is a failed candidate (the database stores 1e10)


def mean_s(run_secs: list[float] | None) -> float | None:
    """A candidate's mean time in seconds; None where it failed."""
    if not run_secs:
        return None
    m = sum(run_secs) / len(run_secs)
    return None if m >= FAILED_S else m


def identical(x: dict, y: dict) -> bool:
    """The same task and the same schedules in the same order."""
    return x["task"] == y["task"] and x["hashes"] == y["hashes"]


def shared_fraction(x: dict, y: dict) -> float:
    """The fraction of schedules two batches have in common (0 when their tasks differ)."""
    if x["task"] != y["task"]:
        return 0.0
    return len(set(x["hashes"]) & set(y["hashes"])) / max(len(x["hashes"]), len(y["hashes"]), 1)


def first_divergence(xs: list[dict], ys: list[dict]) -> int | None:
    """The index of the first batch that differs; None when the common length is the same throughout."""
    return next((i for i, (x, y) in enumerate(zip(xs, ys)) if not identical(x, y)), None)


def records_before(seq: list[dict], k: int, task: str) -> list[tuple[str, float | None]]:
    """(hash, mean seconds or None) of `task`'s candidates measured in batches 0..k-1, in commit order."""
    return [(h, mean_s(s)) for b in seq[:k] if b["task"] == task for h, s in zip(b["hashes"], b["run_secs"])]


def ranking(records: list[tuple[str, float | None]], parents: int) -> list[str]:
    """The best `parents` valid records by mean time (ties in commit order), as the evolution reads them."""
    valid = [(t, i, h) for i, (h, t) in enumerate(records) if t is not None]
    return [h for _, _, h in sorted(valid)[:parents]]


def histories(seq: list[dict], k: int) -> dict[str, list[float]]:
    """Each task's best time after each of its batches 0..k-1 (inf until one ran), the scheduler's history."""
    out: dict[str, list[float]] = {}
    for b in seq[:k]:
        best = min((t for t in map(mean_s, b["run_secs"]) if t is not None), default=math.inf)
        h = out.setdefault(b["task"], [])
        h.append(min(h[-1] if h else math.inf, best))
    return out


def _rel_gap(a: float, b: float) -> float:
    return abs(a - b) / min(a, b) if min(a, b) > 0 else math.inf


def flipped_pairs(rx: list[str], ry: list[str], tx: dict[str, float], ty: dict[str, float]) -> list[dict]:
    """Pairs of records that two rankings order differently, each with how far apart its two times were in
    each run (relative gap) and each candidate's time ratio between the runs (y over x)."""
    pos_y = {h: i for i, h in enumerate(ry)}
    out = []
    for i, p in enumerate(rx):
        for q in rx[i + 1:]:
            if p in pos_y and q in pos_y and pos_y[p] > pos_y[q]:
                out.append({"pair": [p, q], "gap_x": round(_rel_gap(tx[p], tx[q]), 4),
                            "gap_y": round(_rel_gap(ty[p], ty[q]), 4),
                            "ratio_y_over_x": [round(ty[p] / tx[p], 4), round(ty[q] / tx[q], 4)]})
    return out


def inputs_at(xs: list[dict], ys: list[dict], j: int, parents: int, weights: dict[str, float],
              gradient, alpha: float = 0.2, window: int = 3) -> dict:
    """What the search read before batch j in each run, and how it differed (`gradient`: the scheduler's
    rule, `workbench.task_scheduler.gradient`, passed in so that this module needs no TVM)."""
    out: dict = {"batch": j, "task_x": xs[j]["task"], "task_y": ys[j]["task"]}
    hx, hy = histories(xs, j), histories(ys, j)
    tasks = [t for t in dict.fromkeys(b["task"] for b in xs[:j]) if t in hx and t in hy]
    out["pick_differs"] = xs[j]["task"] != ys[j]["task"]
    if out["pick_differs"]:
        gx = {t: gradient(hx[t], weights.get(t, 1.0), alpha, window) for t in tasks}
        gy = {t: gradient(hy[t], weights.get(t, 1.0), alpha, window) for t in tasks}
        a, b = xs[j]["task"], ys[j]["task"]
        out["gradients_x"], out["gradients_y"] = gx, gy
        out["pick_gap"] = [round(_rel_gap(gx[a], gx[b]), 4) if a in gx and b in gx else None,
                           round(_rel_gap(gy[a], gy[b]), 4) if a in gy and b in gy else None]
        return out
    task = xs[j]["task"]
    recx, recy = records_before(xs, j, task), records_before(ys, j, task)
    validity = [h for (h, t), (_, u) in zip(recx, recy) if (t is None) != (u is None)]
    rx, ry = ranking(recx, parents), ranking(recy, parents)
    out["validity_differs"] = validity
    out["ranking_differs"] = rx != ry
    if rx != ry:
        tx = {h: t for h, t in recx if t is not None}
        ty = {h: t for h, t in recy if t is not None}
        out["flips"] = flipped_pairs(rx, ry, tx, ty)
        out["parent_sets_differ"] = set(rx) != set(ry)
    return out


def differs(inputs: dict) -> bool:
    return inputs["pick_differs"] or bool(inputs.get("validity_differs")) or inputs.get("ranking_differs", False)


def explain(inputs: dict, noise: float) -> str:
    """One word for what made the inputs differ: "tie" when every flipped order was between times within
    `noise` of each other in both runs (or the flipped task pick between gradients that close), else
    "gap" (a time moved by more than noise), "validity" (a candidate failed in one run only)."""
    if inputs["pick_differs"]:
        gaps = inputs.get("pick_gap") or [None]
        return "tie" if all(g is not None and g <= noise for g in gaps) else "gap"
    if inputs.get("validity_differs"):
        return "validity"
    flips = inputs.get("flips") or []
    if flips and all(max(f["gap_x"], f["gap_y"]) <= noise for f in flips):
        return "tie"
    return "gap"


def compare(xs: list[dict], ys: list[dict], parents: int, weights: dict[str, float], gradient,
            noise: float = 0.05) -> dict:
    """Where two sequences part, the fraction of shared schedules per batch, and what explains the parting."""
    n = min(len(xs), len(ys))
    k = first_divergence(xs, ys)
    out = {"batches_compared": n, "first_divergence": k,
           "shared_fraction": [round(shared_fraction(x, y), 3) for x, y in zip(xs, ys)],
           "identical": [identical(x, y) for x, y in zip(xs, ys)]}
    if k is None:
        out["explained_by"] = None
        return out
    read = [inputs_at(xs, ys, j, parents, weights, gradient) for j in range(k + 1)]
    first = next((r for r in read if differs(r)), None)
    out["first_input_difference"] = first
    if first is None:
        out["explained_by"] = "nothing measured"  # the search read the same inputs and still parted
    else:
        out["explained_by"] = explain(first, noise)
    return out


def time_ratios(xs: list[dict], ys: list[dict]) -> dict:
    """Per-candidate time ratios (y over x) over the schedules both runs measured validly, and per task the
    rank correlation of their times (what the search reads: a uniform factor changes no order)."""
    from candidate_timing import spearman

    tx = {h: (b["task"], mean_s(s)) for b in xs for h, s in zip(b["hashes"], b["run_secs"])}
    ty = {h: mean_s(s) for b in ys for h, s in zip(b["hashes"], b["run_secs"])}  # None: failed or not measured
    both = [(task, t, ty[h]) for h, (task, t) in tx.items() if h in ty and t is not None and ty[h] is not None]
    ratios = sorted(u / t for _, t, u in both)
    if not ratios:
        return {"n": 0}
    q = lambda f: round(ratios[min(len(ratios) - 1, int(f * len(ratios)))], 4)  # noqa: E731
    rho = {}
    for task in dict.fromkeys(task for task, _, _ in both):
        pairs = [(t, u) for k, t, u in both if k == task]
        r = spearman([t for t, _ in pairs], [u for _, u in pairs])
        rho[task] = {"n": len(pairs), "spearman": None if r is None else round(r, 3)}
    return {"n": len(ratios), "median": q(0.5), "p10": q(0.1), "p90": q(0.9),
            "within_5pct": round(sum(abs(r - 1) <= 0.05 for r in ratios) / len(ratios), 3), "per_task": rho}


def reproduced(recorded: list[dict], replayed: list[dict]) -> dict:
    """How far a replay (the search fed a run's own measurements) proposed what the run measured."""
    k = first_divergence(recorded, replayed)
    n = min(len(recorded), len(replayed))
    return {"batches": len(recorded), "replayed": len(replayed), "reproduced": n if k is None else k,
            "all": k is None and n == len(recorded)}  # a cut-off run's replay proposes one batch more
