"""What bench/results/h200_summary.json holds, computed from the experiments that bench/report.py read.

An experiment's manifest says what it adds ("summary"), each under a key that names the folder
(its date, machine and what was run) or the one named here:
- "headline": the top-level keys: an "anytime" experiment's medians over seeds at equal time (issue 16's
  goals, `anytime_headline`), or a "bench" experiment's best config (most goals met, then trials/s);
- "anytime": {"<folder>": the anytime experiment's medians and, per seed, stock and the workbench at
  stock's wall time};
- "best": {"<folder>": {"best": that config's ratios}}, measured at equal trials;
- "rows": {"<folder>": {"<config> seed <s>": the row's times and ratios}};
- {"seeds": CONFIG}: "seeds", that config's medians over seeds (the bench's `compare_seeds`);
- {"one_client": CONFIG}: "one_client", that config's row;
- {"paired": CONFIG}: {"<folder>": medians over seeds, and per seed what the config's run did: per-task
  bests against stock's, idle CPU time, its first round}, with stock's run-to-run spread alone on one GPU;
- "scaling": "scaling", the folder's scaling table.
Across experiments: final latency by how first batches were drawn, search quality per task, goal status.
"Alone" rows are those the bench compared itself (table "bench") in folders marked "alone": the
one-GPU machine with nothing else running.
"""
from __future__ import annotations

import statistics

from bench.experiments import Experiment, device_kind, machine_text, run_events
from bench.tuning_throughput import compare_seeds

GOAL = {"trials_per_s_ratio": 5.0, "time_to_same_latency_reduction": 0.75, "final_latency_ratio_max": 1.03}
EQUAL_TIME_GOAL = {"equal_time_latency_ratio_max": 0.8, "time_to_stock_latency_ratio_max": 0.25}  # issue 16
TOLERANCE = 1.03
ROW_KEYS = ("wall_s", "first_batch_s", "trials_per_s", "trials_per_s_ratio", "final_latency_ms", "final_latency_ratio",
            "time_to_same_latency_reduction", "cpu_util_mean", "gpu_util_mean")
RATIOS = ("trials_per_s_ratio", "time_to_same_latency_reduction", "final_latency_ratio")


def goals_met(r: dict) -> int:
    """How many of the three goals one row meets (reduction None: it never reached stock's latency)."""
    return sum([(r.get("trials_per_s_ratio") or 0) >= GOAL["trials_per_s_ratio"],
                (r.get("time_to_same_latency_reduction") or 0) >= GOAL["time_to_same_latency_reduction"],
                r.get("final_latency_ratio") is not None
                and r["final_latency_ratio"] <= GOAL["final_latency_ratio_max"]])


def workbench_rows(rows: list[dict]) -> list[dict]:
    """The rows that are neither stock nor failed."""
    return [r for r in rows if "failed" not in r and r["config"] != "stock"]


def best(rows: list[dict]) -> dict:
    """The workbench row that meets the most goals, then has the most trials/s."""
    return max(workbench_rows(rows), key=lambda r: (goals_met(r), r["trials_per_s"]))


def label(r: dict) -> str:
    """A row's name in the summary: '<config> seed <s>'."""
    return f"{r['config']} seed {r.get('seed', 0)}"


def seed_medians(rows: list[dict], config: str) -> dict:
    """The bench's medians over seeds (`compare_seeds`, over the rows as compared) for `config`, and each seed's
    ratios."""
    mine = [r for r in rows if r["config"] == config]
    pairs = [{**r, "name": r["config"]} for r in rows if r["config"] in ("stock", config) and "failed" not in r]
    medians = compare_seeds(pairs)["per_config_median"][config]
    return {"config": config, "seed_list": [r["seed"] for r in mine], **medians,
            "per_seed": {str(r["seed"]): {k: r[k] for k in RATIOS} for r in mine}}


def task_bests(ev: list[dict]) -> dict[str, dict]:
    """Per task, tuned on the whole GPU: the best measured us, the batches of each shard, each shard's first best."""
    out: dict[str, dict] = {}
    for e in ev:
        if e["kind"] != "batch" or e.get("tuned_at", 100) != 100:
            continue
        lat = [x for x in e["latest_us"] if x]
        t = out.setdefault(e["task"], {"best_us": float("inf"), "batches": {}, "first_batch_us": {}})
        t["best_us"] = min([t["best_us"], *lat])
        t["batches"][e["shard"]] = t["batches"].get(e["shard"], 0) + 1
        t["first_batch_us"].setdefault(e["shard"], min(lat) if lat else None)
    return out


def search_quality(rows: list[dict], results: str) -> dict:
    """Per-task bests of every 64-trial run tuned on the whole GPU with evolved first batches whose event log
    is committed, by how the search was split: stock, one client, one task per client, replicas (more
    clients than tasks)."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("first_round") != "evolutionary" or r.get("trials") != 64:
            continue
        if r["config"] != "stock" and "@100" not in r["config"]:
            continue
        ev = run_events(results, r["run"])
        if ev is None:
            continue
        shards = len([e for e in ev if e["kind"] == "shard_planned" and e.get("tuned_at", 100) == 100])
        ntasks = len({t for e in ev if e["kind"] == "shard_planned" for t in e["tasks"]})
        layout = ("stock" if r["config"] == "stock" else "one client" if shards == 1
                  else "replicas" if shards > ntasks else "one task per client")
        groups.setdefault(layout, []).append({"run": r["run"], "final_us": r["final_latency_ms"] * 1000,
                                              "tasks": task_bests(ev)})
    out: dict = {}
    for layout, runs in groups.items():
        tasks = sorted({t for g in runs for t in g["tasks"]})
        out[layout] = {"runs": len(runs), "run_ids": [g["run"] for g in runs],
                       "final_us": sorted(round(g["final_us"], 1) for g in runs),
                       "final_over_sum_of_task_bests": sorted(
                           round(g["final_us"] / sum(t["best_us"] for t in g["tasks"].values()), 3) for g in runs),
                       **{t: {"best_us": sorted(round(g["tasks"][t]["best_us"], 1) for g in runs if t in g["tasks"]),
                              "first_batch_best_us": sorted(round(x, 1) for g in runs if t in g["tasks"]
                                                            for x in g["tasks"][t]["first_batch_us"].values() if x),
                              "batches_per_shard": sorted({n for g in runs if t in g["tasks"]
                                                           for n in g["tasks"][t]["batches"].values()})}
                          for t in tasks}}
    return out


def cpu_idle(ev: list[dict]) -> dict:
    """From a run's 1 s telemetry until its clients finished: idle machine-seconds (sum of (1 - busy) x
    interval) and the windows where under half the cores were busy."""
    t0 = ev[0]["t"]
    end = max(e["t"] for e in ev if e["kind"] == "shard_finished") - t0
    tel = [(e["t"] - t0, e["cpu_percent"]) for e in ev if e["kind"] == "telemetry" and e["t"] - t0 <= end]
    idle, windows, cur = 0.0, [], None
    for (t, busy), (t_next, _) in zip(tel, tel[1:] + [(end, 0.0)]):
        idle += (1 - busy / 100) * (t_next - t)
        if busy < 50:
            cur = [cur[0] if cur else t, t_next]
        elif cur:
            windows.append(cur)
            cur = None
    windows += [cur] if cur else []
    return {"end_s": round(end, 1), "idle_s": round(idle, 1), "busy_s": round(end - idle, 1),
            "half_idle_windows": [[round(a, 1), round(b, 1)] for a, b in windows]}


def first_round(row: dict, ev: list[dict]) -> dict:
    """A run's first batch: its build (wall, slowest and median candidate), when the first server registered,
    and the client's seconds in SendToRunner (where it would have waited for the server)."""
    first = next(e for e in ev if e["kind"] == "batch")
    each = [x for x in first["build_each_s"] if x is not None]
    ready = min(e["t"] for e in ev if e["kind"] == "server_ready") - ev[0]["t"]
    return {"build_wall_s": round(first["build_s"], 1), "build_max_s": round(max(each), 1),
            "build_median_s": round(statistics.median(each), 1), "server_ready_s": round(ready, 1),
            "send_to_runner_s": (row.get("phases_s") or {}).get("SendToRunner")}


def paired(e: Experiment, config: str, alone_stocks: list[float], results: str) -> dict:
    """Stock and `config` paired per seed: the medians, and per seed what the config's run did."""
    wb = [r for r in e.rows if r["config"] == config]
    stock = {r["seed"]: r for r in e.rows if r["config"] == "stock"}
    cv = statistics.stdev(alone_stocks) / statistics.mean(alone_stocks)
    tasks = []
    for r in wb:
        s, w = task_bests(run_events(results, stock[r["seed"]]["run"])), task_bests(run_events(results, r["run"]))
        tasks += [{"seed": r["seed"], "task": t, "stock_us": round(s[t]["best_us"], 1),
                   "stock_batches": sum(s[t]["batches"].values()), "one_client_us": round(w[t]["best_us"], 1),
                   "one_client_batches": sum(w[t]["batches"].values()),
                   "ratio": round(w[t]["best_us"] / s[t]["best_us"], 2)} for t in sorted(s)]
    return {**seed_medians(e.rows, config), "source": f"{e.name}: {e.title}",
            "stock_final_latency_ms": {str(k): v["final_latency_ms"] for k, v in sorted(stock.items())},
            "wall_s": {str(r["seed"]): r["wall_s"] for r in wb},
            "wall_s_needed_for_5x": {
                r["seed"]: round(r["trials"] / (GOAL["trials_per_s_ratio"] * stock[r["seed"]]["trials_per_s"]), 1)
                for r in wb},
            "stock_final_latency_cv_one_gpu": round(cv, 3),
            "runs_per_arm_to_see_3pct": round(2 * (1.96 + 0.84) ** 2 * (cv / (TOLERANCE - 1)) ** 2),
            "candidates_dropped_as_stragglers": sum(x.get("build_dropped") or 0 for r in wb
                                                    for x in run_events(results, r["run"]) if x["kind"] == "batch"),
            "per_task": tasks, "cpu_idle": {str(r["seed"]): cpu_idle(run_events(results, r["run"])) for r in wb},
            "first_round": {str(r["seed"]): first_round(r, run_events(results, r["run"])) for r in wb}}


def goal_status(alone: list[dict], rows: list[dict], quality: dict, equal_time: tuple[str, dict] | None) -> dict:
    """Each goal on its own: issue 16's at equal time (the headline anytime experiment's medians over seeds), then
    the older ones at equal trials, alone on one GPU (and which runs met them); then those three in one run."""
    wb_alone = workbench_rows(alone)
    top = max(wb_alone, key=lambda r: r.get("trials_per_s_ratio") or 0)
    reached = [r for r in workbench_rows(rows)
               if (r.get("time_to_same_latency_reduction") or 0) >= GOAL["time_to_same_latency_reduction"]]
    stock_us = statistics.median(quality["stock"]["final_us"])
    out = {}
    if equal_time:
        name, block = equal_time
        for key, bound in (("equal_time_latency_ratio", EQUAL_TIME_GOAL["equal_time_latency_ratio_max"]),
                           ("time_to_stock_latency_ratio", EQUAL_TIME_GOAL["time_to_stock_latency_ratio_max"])):
            median = block["medians"][key]
            out[key] = {"met": median <= bound, "median": median, "max": bound, "experiment": name,
                        "config": block["config"], "per_seed": {k: r[key] for k, r in block["per_seed"].items()}}
    return {**out, "trials_per_s_ratio": {
                "met_alone_on_one_gpu": any((r.get("trials_per_s_ratio") or 0) >= GOAL["trials_per_s_ratio"]
                                            for r in wb_alone),
                "best": top["trials_per_s_ratio"], "best_config": top["config"], "best_experiment": top["experiment"],
                "evolved_first_alone": {f"{r['experiment']} {label(r)}": r["trials_per_s_ratio"]
                                        for r in wb_alone if r["first_round"] == "evolutionary"}},
            "time_to_same_latency_reduction": {
                "met_alone_on_one_gpu": any(r in wb_alone for r in reached),
                "runs_that_reached_75pct": [f"{r['experiment']} {label(r)}: {r['time_to_same_latency_reduction']}"
                                            for r in reached]},
            "final_latency_ratio": {
                "met_alone_on_one_gpu": any(r.get("final_latency_ratio") is not None
                                            and r["final_latency_ratio"] <= GOAL["final_latency_ratio_max"]
                                            for r in wb_alone),
                "median_ratio_by_layout": {k: round(statistics.median(v["final_us"]) / stock_us, 2)
                                           for k, v in quality.items() if k != "stock"},
                "at_5x_alone": sorted(r["final_latency_ratio"] for r in wb_alone
                                      if (r.get("trials_per_s_ratio") or 0) >= GOAL["trials_per_s_ratio"])},
            "all_three_in_one_run": any(goals_met(r) == 3 for r in workbench_rows(rows))}


def median_of(rows: list[dict], key: str) -> float | None:
    """The median of `key` over the rows that have it (None left out); None when none has it."""
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def anytime_block(e: Experiment) -> dict:
    """An anytime experiment's config with the lowest median equal-time ratio: its medians over seeds and each
    seed's row."""
    rows = e.anytime["seeds"]
    by = {c: [r for r in rows if r["config"] == c] for c in dict.fromkeys(r["config"] for r in rows)}
    rank = next(k for k in ("equal_time_latency_ratio", "equal_time_latency_ratio_upper_bound")
                if any(median_of(rs, k) is not None for rs in by.values()))  # the bound: every run cut short
    config = min((c for c in by if median_of(by[c], rank) is not None), key=lambda c: median_of(by[c], rank))
    mine = by[config]
    keys = ("equal_time_latency_ratio", "equal_time_latency_ratio_upper_bound", "time_to_stock_latency_ratio",
            "trials_ratio", "stock_wall_s",
            "stock_final_ms", "latency_ms", "best_ms_at_300s", "stock_best_ms_at_300s", "torch_eager_fp32_ms")

    def rnd(key: str, x: float | None) -> float | None:
        """Ratios to 4 decimals, milliseconds to 5 significant digits (as bench/anytime.py keeps its medians)."""
        if x is None or isinstance(x, bool) or not ("_ratio" in key or "_ms" in key):
            return x
        return round(x, 4) if "_ratio" in key else float(f"{x:.5g}")

    at = ("equal time: the workbench finished at stock's wall time" if rank == "equal_time_latency_ratio" else
          "before equal time: the workbench was stopped before stock's wall time (device time), so its ratio at the "
          "stop is an upper bound of the one at stock's wall (equal_time_latency_ratio_upper_bound)")
    return {"measured_at": at, "config": config,
            "seed_list": [r["seed"] for r in mine],
            "reached_stock_latency": sum(bool(r["reached_stock_latency"]) for r in mine),
            "medians": {k: rnd(k, median_of(mine, k)) for k in keys},
            "per_seed": {str(r["seed"]): {k: rnd(k, v) for k, v in r.items()} for r in mine}}


def verdict(value: float, bound: float) -> str:
    """'met (0.251 under)' or 'missed by 0.467' against an upper bound."""
    return f"met ({bound - value:.3f} under)" if value <= bound else f"missed by {value - bound:.3f}"


def anytime_headline(e: Experiment, block: dict) -> dict:
    """The top-level keys from an anytime experiment: its best config's medians over seeds at equal time."""
    m, entry, med = e.meta, e.anytime["entry"], block["medians"]
    eq, tt = med["equal_time_latency_ratio"], med["time_to_stock_latency_ratio"]
    g_eq, g_tt = EQUAL_TIME_GOAL["equal_time_latency_ratio_max"], EQUAL_TIME_GOAL["time_to_stock_latency_ratio_max"]
    met = {"equal_time_latency_ratio_max": eq <= g_eq, "time_to_stock_latency_ratio_max": tt <= g_tt}
    seeds = block["seed_list"]
    at_300 = [s for s, r in block["per_seed"].items() if r["best_ms_at_300s"] is not None]
    short = [f"seed {s} ran {r['span_s']} s" for s, r in block["per_seed"].items() if r["best_ms_at_300s"] is None]
    note = (f"Measured at equal time ({e.name}, bench/anytime.py): per seed, stock ran its {entry['stock_trials']} "
            f"trials, then {block['config']} was finished at stock's wall time (median {med['stock_wall_s']} s); "
            f"every value is the median over seeds {', '.join(map(str, seeds))}. final_latency_ratio = "
            f"equal_time_latency_ratio {eq:.3f}, the workbench's model at stock's wall time over stock's final: goal "
            f"<= {g_eq} {verdict(eq, g_eq)}. time_to_stock_latency_ratio {tt:.3f}, the time until within "
            f"{TOLERANCE - 1:.0%} of "
            f"stock's final over stock's time to its final: goal <= {g_tt} {verdict(tt, g_tt)} "
            f"({block['reached_stock_latency']} of {len(seeds)} seeds reached it; time_to_same_latency_reduction = "
            f"1 - it). trials_per_s_ratio: the workbench's trials by stock's wall time over stock's. best_ms_at_300s: "
            f"median over seeds {', '.join(at_300)}" + (f" ({'; '.join(short)}: under 300 s)" if short else "")
            + ". goal's trials_per_s_ratio, time_to_same_latency_reduction and final_latency_ratio_max are the "
            "older goals at equal trials (goal_status); the folders' 'best' and 'rows' blocks are measured at "
            "equal trials.")
    return {"model": e.manifest["model"], "model_shapes": e.manifest.get("model_shapes"),
            "machine": f"{device_kind(e)} ({m['machine']}, {m['cores']} cores)", "tvm": m["tvm"],
            "date": m["date"][:10], "trials": entry["stock_trials"], "batch": entry["batch"], "seed": seeds,
            "source": f"{e.name}: {e.title}", "best_config": block["config"],
            "trials_per_s_ratio": round(med["trials_ratio"], 3), "time_to_same_latency_reduction": round(1 - tt, 4),
            "time_to_same_latency_reached": block["reached_stock_latency"] == len(seeds),
            "final_latency_ratio": eq, "goal": {**GOAL, **EQUAL_TIME_GOAL}, "goal_met": all(met.values()),
            "goals_met": met, "note": note, "equal_time_latency_ratio": eq, "time_to_stock_latency_ratio": tt,
            "best_ms_at_300s": med["best_ms_at_300s"], "torch_eager_fp32_ms": med["torch_eager_fp32_ms"]}


def headline(e: Experiment) -> dict:
    """The top-level keys: the experiment's best config against its stock, and what ran."""
    top = best(e.rows)
    reached = top["time_to_same_latency_reduction"] is not None
    m = e.meta
    note = (f"best_config meets the most goals of {e.name}'s configs, then has the most trials/s."
            + ("" if reached else " It never reached stock's final latency within 3 % (time_to_same_latency_reduction "
                                  "0.0: no reduction is claimed).")
            + " The other keys say what the other experiments measured (each folder's README.md says how).")
    return {"model": m["model"], "model_shapes": e.manifest.get("model_shapes"), "machine": machine_text(e),
            "tvm": m["tvm"], "date": e.date, "trials": m["trials"], "batch": m["batch"], "seed": m["seed"],
            "source": f"{e.name}: {e.title}", "best_config": top["config"],
            "trials_per_s_ratio": top["trials_per_s_ratio"],
            "time_to_same_latency_reduction": top["time_to_same_latency_reduction"] if reached else 0.0,
            "time_to_same_latency_reached": reached, "final_latency_ratio": top["final_latency_ratio"],
            "goal": GOAL, "goal_met": goals_met(top) == 3, "note": note}


def summarize(experiments: list[Experiment], results: str) -> dict:
    """h200_summary.json: the headline, what each experiment adds (its manifest's "summary"), and the
    analyses across experiments."""
    h200 = [e for e in experiments if e.machine.startswith("h200")]
    rows = [r for e in h200 for r in e.rows]
    bench = [r for e in h200 if e.manifest.get("table") == "bench" for r in e.rows if "failed" not in r]
    alone = [r for e in h200 if e.manifest.get("alone") and e.manifest.get("table") == "bench" for r in e.rows
             if "failed" not in r]
    at_full = [r for r in bench if r["config"] == "stock" or "@100" in r["config"]]  # tuned on the whole GPU
    head = next(e for e in h200 if "headline" in e.views)
    anytime = {e.name: anytime_block(e) for e in h200 if e.anytime}
    out = anytime_headline(head, anytime[head.name]) if head.anytime else headline(head)
    quality = search_quality(at_full, results)
    by_round = {k: sorted(r["final_latency_ms"] for r in at_full if r["first_round"] == k)
                for k in ("random", "evolutionary")}
    blocks: dict = {}
    for e in h200:
        v, block = e.views, {}
        if "seeds" in v:
            out["seeds"] = {**seed_medians(e.rows, v["seeds"]), "experiment": e.name}
        if "one_client" in v:
            one = next(r for r in e.rows if r["config"] == v["one_client"])
            out["one_client"] = {k: one.get(k) for k in ("config", "seed", "experiment", "file", "wall_s",
                                                         "trials_per_s_ratio", "final_latency_ratio",
                                                         "time_to_stock_latency_s", "time_to_same_latency_reduction")}
        if "scaling" in v:
            blocks["scaling"] = {**e.scaling, "experiment": e.name}
        if "paired" in v:
            stock_ms = [r["final_latency_ms"] for r in alone if r["config"] == "stock"]
            block.update(paired(e, v["paired"], stock_ms, results))
        if "rows" in v:
            block.update({label(r): {k: r.get(k) for k in ROW_KEYS} for r in e.rows if "failed" not in r})
        if "best" in v:
            block["best"] = {"measured_at": "equal trials: every config ran stock's trial budget",
                             **{k: best(e.rows)[k] for k in ("config", *RATIOS)}}
        if "anytime" in v:
            block.update(anytime[e.name])
        if block:
            blocks[e.name] = block
    out.update({"first_round_latency_ms_at_100": by_round,
                "goal_status": goal_status(alone, rows, quality,
                                           (head.name, anytime[head.name]) if head.anytime else None),
                "search_quality": quality,
                **blocks, "slice_matrix_rows": sum(len(e.matrix) for e in h200), "runs": rows})
    return out
