"""Build bench/results/H200.md, h200_summary.json, h200_slice_matrix.csv and h200_slice_untuned.csv from the
experiment folders.

    python -m bench.report [--results DIR] [--out DIR]

Each folder `YYYY-MM-DD-<machine>-<what was run>/` under bench/results is one experiment: its
README.md says by hand what was run and what it shows; an experiment.json, where the folder makes a
table, says which ("table") and what the folder adds to the summary ("summary", see
bench/report_summary.py). Nothing is measured anew: the builder reads bench JSONs, lane logs, sweep
CSVs and the runs' event logs (`<run>.jsonl.gz`). Tables:
- "bench": bench/tuning_throughput.py JSONs; each of "groups" is compared with its own stock as the
  bench does (`compare`). "cut_off" rows come from a run's event log and sweep (its bench row was cut
  off); "latency_reference" compares a group without stock with another group's stock, latency only.
- "bench-events": bench JSONs whose time metrics are recomputed from the event logs with one
  definition ("checkpoints_from_tuning_phase": files whose checkpoints were timed from that phase).
- "lane-logs": the result lines bench/tuning_throughput.py printed (its JSONs did not come back).
  These two are compared with the experiment's stock here (`compare_steady`), steady rates included.
- "scaling": one bench JSON on one GPU ("one_gpu") and one run's event log on more ("more_gpus").
- "slice-matrix": the folder's *.sweep.csv, the rows of h200_slice_matrix.csv (with the run's trials per tuning
  slice), and its *.untuned.csv (the untuned
  build's sweep, bench/slice_study.py), the rows of h200_slice_untuned.csv (header only while no folder has one).
- "anytime": one model's entry ("model") of a bench/anytime.py JSON ("file", under the results folder):
  per seed, stock with its budget, then each workbench config finished at stock's wall time (equal time);
  the ratios are recomputed here from the runs' checkpoints (`anytime_row`).
A new experiment: the device call's files in a new dated folder, *.jsonl and *.log gzip-compressed
(`gzip -n`), a README.md (what command, which machine, what it shows) and, where it makes a table,
an experiment.json; then run this and commit the four files it rewrites.
"""
from __future__ import annotations

import argparse
import csv
import glob
import gzip
import json
import os
import re

from bench.experiments import Experiment, run_events
from bench.tuning_throughput import compare, steady_rate, time_to, tuning_window

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
FOLDER = re.compile(r"^(\d{4}-\d{2}-\d{2})-([a-z0-9]+)-(.+)$")
TOLERANCE = 1.03
MATRIX_COLUMNS = ["model", "tuned_at", "inferred_at", "latency_ms_median", "latency_ms_iqr", "trials_per_stage"]
UNTUNED_COLUMNS = ["model", "inferred_at", "latency_ms_median", "latency_ms_iqr"]


def stem(name: str) -> str:
    """A file's name without its suffixes: seed1.bench.json -> seed1."""
    return name.split(".")[0]


def bench_row(experiment: str, r: dict) -> dict:
    """One config of a bench JSON (after `compare`) as a row of the tables."""
    head = {"experiment": experiment, "file": r["file"], "config": r["name"], "run": r.get("run")}
    if r.get("status") not in ("done", "partial"):
        return {**head, "failed": (r.get("message") or r.get("status", "")).splitlines()[-1][:160]}
    keys = ("trials", "wall_s", "first_batch_s", "trials_per_s", "steady_trials_per_s")
    ratio = r.get("final_latency_ratio")
    return {**head, "seed": r.get("seed", 0), **{k: r[k] for k in keys},
            "final_latency_ms": round(r["final_latency_ms"], 5), "checkpoints": r.get("checkpoints") or [],
            **{k: r.get(k) for k in ("server_sm_counts", "cpu_util_mean", "gpu_util_mean")},
            "first_round": r.get("first_round", "evolutionary"), "runner": r.get("runner"),
            "phases_s": r.get("phases_s"), "trials_per_s_ratio": r.get("trials_per_s_ratio"),
            "final_latency_ratio": None if ratio is None else round(ratio, 3), "steady_ratio": None,
            **{k: r.get(k) for k in ("time_to_stock_latency_s", "time_to_same_latency_reduction")}}


def cut_off_row(e: Experiment, results: str, cut: dict, stock: dict) -> dict:
    """A run whose bench row was cut off (after tuning, while its checkpoints compiled): wall time and
    final latency from its event log and sweep, against its group's stock."""
    ev = run_events(results, cut["run"])
    t0, t1 = tuning_window(ev)
    trials = sum(x.get("shard_trials", 0) for x in ev if x["kind"] == "shard_finished")
    with open(os.path.join(e.path, f"{cut['run']}.sweep.csv")) as f:
        latency = float(next(r for r in csv.DictReader(f) if r["inferred_at"] == "100")["latency_ms_median"])
    rate = trials / (t1 - t0)
    return {"experiment": e.name, "file": stem(cut["file"]), "config": cut["config"], "run": cut["run"], "seed": 0,
            "trials": trials, "wall_s": round(t1 - t0, 1),
            "first_batch_s": round(min(x["t"] for x in ev if x["kind"] == "batch") - t0, 1),
            "trials_per_s": round(rate, 4), "steady_trials_per_s": steady_rate(ev),
            "final_latency_ms": round(latency, 5),
            "checkpoints": [], "first_round": cut["first_round"], "runner": "rpc",
            "server_sm_counts": [x.get("sm_count") for x in ev if x["kind"] == "server_ready"],
            "trials_per_s_ratio": round(rate / stock["trials_per_s"], 3),
            "final_latency_ratio": round(latency / stock["final_latency_ms"], 3), "steady_ratio": None,
            "time_to_stock_latency_s": None, "time_to_same_latency_reduction": None,
            "note": "bench row cut off by the call limit while its checkpoints compiled: no checkpoints"}


def bench_table(e: Experiment, results: str) -> None:
    """Rows of a "bench" experiment: each group compared with its own stock (`compare`)."""
    stocks: dict[str, dict | None] = {}
    for files in e.manifest["groups"]:
        configs = []
        for name in files:
            data = load_json(e.path, name)
            e.meta = e.meta or {k: v for k, v in data.items() if k != "configs"}
            configs += [{**r, "file": stem(name)} for r in data["configs"]]
        if any(r["name"] == "stock" for r in configs):
            compare(configs)
        group = [bench_row(e.name, r) for r in configs]
        stock = next((r for r in group if r["config"] == "stock" and "failed" not in r), None)
        group += [cut_off_row(e, results, c, stock) for c in e.manifest.get("cut_off", []) if c["file"] in files]
        stocks.update(dict.fromkeys(files, stock))
        e.rows += group
    for name, ref in e.manifest.get("latency_reference", {}).items():
        for r in e.rows:
            if r["file"] == stem(name) and "failed" not in r:
                r["trials_per_s_ratio"] = None  # another lane and call than its stock: trials/s are not comparable
                r["final_latency_ratio"] = round(r["final_latency_ms"] / stocks[ref]["final_latency_ms"], 3)
                r["note"] = f"latency ratio against {ref}'s stock (another call and lane)"


def bench_events_table(e: Experiment, results: str) -> None:
    """Rows of a "bench-events" experiment: time metrics recomputed from each run's event log."""
    for name in e.manifest["files"]:
        for r in (x for x in load_json(e.path, name)["configs"] if x.get("status") == "done"):
            ev = run_events(results, r["run"])
            t0, t1 = tuning_window(ev)
            tuning = min(x["t"] for x in ev if x["kind"] == "phase" and x["phase"] == "tuning")
            offset = tuning - t0 if name in e.manifest.get("checkpoints_from_tuning_phase", []) else 0.0
            e.rows.append({"experiment": e.name, "file": stem(name), "config": r["name"], "run": r["run"],
                           "trials": r["trials"], "wall_s": round(t1 - t0, 1),
                           "first_batch_s": round(min(x["t"] for x in ev if x["kind"] == "batch") - t0, 1),
                           "trials_per_s": round(r["trials"] / (t1 - t0), 4), "steady_trials_per_s": steady_rate(ev),
                           "final_latency_ms": round(r["final_latency_ms"], 5),
                           "checkpoints": [{"t_s": round(c["t_s"] + offset, 1), "latency_ms": c["latency_ms"]}
                                           for c in r.get("checkpoints") or [] if c.get("latency_ms") is not None],
                           "server_sm_counts": r.get("server_sm_counts")})
    compare_steady(e.rows)


def lane_logs_table(e: Experiment, _results: str) -> None:
    """Rows of a "lane-logs" experiment: the result lines the bench printed into each lane's log."""
    for name in e.manifest["files"]:
        with gzip.open(os.path.join(e.path, name), "rt") as f:
            printed = [json.loads(line) for line in f if line.startswith('{"name"')]
        for r in printed:
            head = {"experiment": e.name, "file": stem(name), "config": r["name"], "run": r.get("run")}
            if r.get("status") != "done":
                e.rows.append({**head, "failed": r.get("message", "").splitlines()[-1][:160]})
                continue
            keys = ("trials", "wall_s", "first_batch_s", "trials_per_s", "steady_trials_per_s")
            e.rows.append({**head, **{k: r[k] for k in keys}, "final_latency_ms": round(r["final_latency_ms"], 5),
                           "checkpoints": [], **{k: r.get(k) for k in ("server_sm_counts", "cpu_util_mean",
                                                                        "gpu_util_mean")}})
    compare_steady(e.rows)


def compare_steady(rows: list[dict]) -> None:
    """Ratios against the rows' stock, steady rates included; time to stock's final latency (within 3 %)
    from the checkpoints, or the wall time where a run without checkpoints ended there; reduction
    against stock's wall time."""
    ok = [r for r in rows if "failed" not in r]
    stock = next(r for r in ok if r["config"] == "stock")
    ref = stock["final_latency_ms"]
    for r in ok:
        r["trials_per_s_ratio"] = round(r["trials_per_s"] / stock["trials_per_s"], 3)
        r["steady_ratio"] = round(r["steady_trials_per_s"] / stock["steady_trials_per_s"], 3)
        r["final_latency_ratio"] = round(r["final_latency_ms"] / ref, 3)
        reached = [c["t_s"] for c in r["checkpoints"] if c["latency_ms"] <= ref * TOLERANCE]
        if not r["checkpoints"] and r["final_latency_ms"] <= ref * TOLERANCE:
            reached = [r["wall_s"]]  # no checkpoints: at the end at the latest
        r["time_to_stock_latency_s"] = min(reached) if reached else None
        r["time_to_same_latency_reduction"] = round(1 - min(reached) / stock["wall_s"], 3) if reached else None


def scaling_table(e: Experiment, results: str) -> None:
    """One bench config on one GPU against one run on more GPUs (cut off or not: trials/s counts what
    was measured until its last batch)."""
    data = load_json(e.path, e.manifest["one_gpu"])
    one = data["configs"][0]
    ev = run_events(results, e.manifest["more_gpus"])
    start = next(x for x in ev if x["kind"] == "run_started")
    spec, batches = start["spec"], [x for x in ev if x["kind"] == "batch"]
    t_last = max(x["t"] for x in batches) - start["t"]
    done, rate1 = sum(x["batch_size"] for x in batches), one["trials_per_s"]
    finished = sum(1 for x in ev if x["kind"] == "shard_finished")
    shards = sum(1 for x in ev if x["kind"] == "shard_planned")
    tel = [x["cpu_percent"] for x in ev if x["kind"] == "telemetry"]
    rate2, gpus = done / t_last, len(spec["gpus"])
    e.scaling = {"model": data["model"], "trials_budget": data["trials"], "batch": data["batch"],
                 "one_gpu": {"config": one["name"], "cores": data["cores"], "trials": one["trials"],
                             "wall_s": one["wall_s"], "trials_per_s": rate1, "cpu_util_mean": one["cpu_util_mean"]},
                 "two_gpus": {"config": f"{spec['shards']}x{spec['servers']}@{spec['slices'][0]}/{gpus}gpu",
                              "cores": start["target"]["num_cores"], "trials": done, "wall_s": round(t_last, 1),
                              "trials_per_s": round(rate2, 4), "cpu_util_mean": round(sum(tel) / len(tel), 1),
                              "note": f"cut off by the call's time limit: {finished} of {shards} shards had finished; "
                                      "trials/s counts what was measured until the last batch"},
                 "speedup": round(rate2 / rate1, 3), "fraction_of_linear": round(rate2 / (gpus * rate1), 3),
                 "goal_fraction_of_linear": e.manifest["goal_fraction_of_linear"]}


def matrix_table(e: Experiment, results: str) -> None:
    """Latency of every tuned model at every inference slice, from the folder's sweep CSVs, each row with its run's
    trial budget per tuning slice (from the run's event log), so that studies of one model at two budgets never mix."""
    for path in sorted(glob.glob(os.path.join(e.path, "*.sweep.csv"))):
        events = run_events(results, os.path.basename(path).split(".")[0], e.path) or []
        # the last start's: a run resumed with a raised budget (`resume --trials`) was swept again at that budget
        trials = next((ev["spec"]["trials"] for ev in reversed(events) if ev["kind"] == "run_started"), None)
        if trials is None:  # a budget by default or per task: what the plan gave the first tuning slice's shards
            planned = [ev for ev in events if ev["kind"] == "shard_planned"]
            first = [ev for ev in planned if ev.get("tuned_at") == planned[0].get("tuned_at")] if planned else []
            trials = sum(ev["shard_trial_budget"] for ev in first) or None
        with open(path, newline="") as f:
            e.matrix += [dict(r, trials_per_stage=trials) for r in csv.DictReader(f)]
    for path in sorted(glob.glob(os.path.join(e.path, "*.untuned.csv"))):
        with open(path, newline="") as f:
            e.untuned += list(csv.DictReader(f))


def anytime_row(seed: str, raw: dict, config: str, torch_ms: float | None) -> dict:
    """One seed of one config at equal time, from the runs' checkpoints: the workbench's last checkpoint (at
    stock's wall) over stock's last (its final); its first checkpoint within 3 % of stock's final over stock's
    own time to its final (1.0 when never reached, as bench/anytime.py counts it)."""
    stock, r = raw["stock"], raw["configs"][config]
    ok = (stock is not None and stock.get("status") in ("done", "partial") and not stock.get("skipped_tasks")
          and stock.get("checkpoints") and r.get("checkpoints"))
    row = {"seed": int(seed), "config": config, "run": r["run"], "stock_run": stock and stock["run"],
           "stock_trials": stock and stock["trials"], "stock_wall_s": stock and stock["wall_s"],
           "trials": r["trials"], "span_s": r["span_s"], "best_ms_at_300s": r.get("best_ms_at_300s"),
           "stock_best_ms_at_300s": stock and stock.get("best_ms_at_300s"), "torch_eager_fp32_ms": torch_ms,
           "untuned_ms": r.get("untuned_ms"), "stock_final_ms": None, "latency_ms": None,
           "equal_time_latency_ratio": None, "equal_time_latency_ratio_upper_bound": None,
           "stock_time_to_final_s": None, "time_to_stock_latency_s": None,
           "time_to_stock_latency_ratio": None, "reached_stock_latency": None, "trials_ratio": None}
    if not ok:
        return row
    final, latest = stock["checkpoints"][-1]["latency_ms"], r["checkpoints"][-1]["latency_ms"]
    t_stock, t = time_to(stock["checkpoints"], final), time_to(r["checkpoints"], final)
    # stopped before stock's wall (bench/anytime.py --stop-s): the ratio at the stop only bounds the one at the wall
    short = r["span_s"] is not None and r["span_s"] < stock["wall_s"]
    return {**row, "stock_final_ms": final, "latency_ms": latest,
            "equal_time_latency_ratio": None if short else latest / final,
            "equal_time_latency_ratio_upper_bound": latest / final if short else None,
            "stock_time_to_final_s": t_stock, "time_to_stock_latency_s": t,
            "time_to_stock_latency_ratio": (None if short else 1.0) if t is None else t / t_stock,
            "reached_stock_latency": t is not None, "trials_ratio": None if short else r["trials"] / stock["trials"]}


def anytime_table(e: Experiment, results: str) -> None:
    """Rows of an "anytime" experiment: every seed and config of the model's entry in the bench/anytime.py JSON."""
    doc = load_json(results, e.manifest["file"])
    entry = next(m for m in doc["models"] if m["model"] == e.manifest["model"])
    e.meta = {k: v for k, v in doc.items() if k != "models"}
    e.anytime = {"entry": entry, "seeds": [anytime_row(seed, raw, name, raw.get("torch_eager_fp32_ms"))
                                           for seed, raw in sorted(entry["raw"].items(), key=lambda x: int(x[0]))
                                           for name in raw["configs"]]}


TABLES = {"bench": bench_table, "bench-events": bench_events_table, "lane-logs": lane_logs_table,
          "scaling": scaling_table, "slice-matrix": matrix_table, "anytime": anytime_table}


def load_json(folder: str, name: str) -> dict:
    """A JSON file of an experiment folder."""
    with open(os.path.join(folder, name)) as f:
        return json.load(f)


def load(results: str) -> list[Experiment]:
    """Every dated experiment folder, newest first, with its table's rows."""
    out = []
    for name in sorted(os.listdir(results), reverse=True):
        m = FOLDER.match(name)
        if not m or not os.path.isdir(os.path.join(results, name)):
            continue
        path = os.path.join(results, name)
        manifest = load_json(path, "experiment.json") if os.path.exists(os.path.join(path, "experiment.json")) else {}
        with open(os.path.join(path, "README.md")) as f:
            first, _, rest = f.read().partition("\n")
        e = Experiment(path, name, m.group(1), m.group(2), manifest, title=first.lstrip("# ").strip(),
                       lead=rest.split("\n## ")[0].strip())
        if "table" in manifest:
            TABLES[manifest["table"]](e, results)
        out.append(e)
    return out


def write_matrices(experiments: list[Experiment], out: str) -> None:
    """h200_slice_matrix.csv (tuned models) and h200_slice_untuned.csv (the untuned build), oldest folder first."""
    for name, columns, rows in (("h200_slice_matrix.csv", MATRIX_COLUMNS, [r for e in reversed(experiments)
                                                                           for r in e.matrix]),
                                ("h200_slice_untuned.csv", UNTUNED_COLUMNS, [r for e in reversed(experiments)
                                                                             for r in e.untuned])):
        with open(os.path.join(out, name), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)


def main(results: str = RESULTS, out: str = RESULTS) -> None:
    """Read every experiment under `results`; write the four report files into `out`."""
    from bench.report_markdown import markdown
    from bench.report_summary import summarize

    experiments = load(results)
    summary = summarize(experiments, results)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "h200_summary.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
        f.write("\n")
    write_matrices(experiments, out)
    with open(os.path.join(out, "H200.md"), "w") as f:
        f.write(markdown(experiments, summary))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=RESULTS, help="the folder of experiment folders")
    parser.add_argument("--out", default=RESULTS, help="where H200.md, h200_summary.json and the slice CSVs go")
    args = parser.parse_args()
    main(args.results, args.out)
