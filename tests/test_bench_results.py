"""The committed H200 numbers are what bench/report.py makes of the committed experiment folders.

The numbers are checked, not the prose: rebuilding into a temporary folder gives the committed
h200_summary.json values and h200_slice_matrix.csv rows (within float round-off)."""
from __future__ import annotations

import csv
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys

import pytest

from support import bench_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
FOLDER = re.compile(r"^\d{4}-\d{2}-\d{2}-(h200|h200x2|cpu)-[a-z0-9][a-z0-9.@+-]*$")
MATRIX_COLUMNS = ["model", "tuned_at", "inferred_at", "latency_ms_median", "latency_ms_iqr",  # issue 19's
                  "trials_per_stage"]  # the run's budget per tuning slice: studies at two budgets never mix
ANYTIME_KEYS = ["model", "seeds", "stock_wall_s", "stock_final_ms", "equal_time_latency_ratio",
                "time_to_stock_latency_ratio", "torch_eager_fp32_ms", "best_ms_at_300s", "best_config"]  # issue 16


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "report.py"), "--out", str(out)],
                   check=True, capture_output=True, timeout=120)
    return out


def load_json(folder, name="h200_summary.json"):
    with open(os.path.join(folder, name)) as f:
        return json.load(f)


def load_csv(folder, name="h200_slice_matrix.csv"):
    with open(os.path.join(folder, name), newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def assert_same(committed, rebuilt, path="summary"):
    """Equal keys, lengths and strings; numbers equal within float round-off."""
    if isinstance(committed, dict):
        assert isinstance(rebuilt, dict) and set(rebuilt) == set(committed), path
        for k in committed:
            assert_same(committed[k], rebuilt[k], f"{path}/{k}")
    elif isinstance(committed, list):
        assert isinstance(rebuilt, list) and len(rebuilt) == len(committed), path
        for i, (a, b) in enumerate(zip(committed, rebuilt)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(committed, float) and not isinstance(committed, bool):
        assert isinstance(rebuilt, (int, float)) and math.isclose(committed, rebuilt, rel_tol=1e-9, abs_tol=1e-12), path
    else:
        assert rebuilt == committed, path


def test_rebuilt_summary_has_the_committed_numbers(rebuilt):
    assert_same(load_json(RESULTS), load_json(rebuilt))


def test_rebuilt_slice_matrix_has_the_committed_rows(rebuilt):
    (cols, committed), (rcols, rows) = load_csv(RESULTS), load_csv(rebuilt)
    assert cols == rcols == MATRIX_COLUMNS
    assert [(r["model"], r["tuned_at"], r["inferred_at"]) for r in rows] == \
           [(r["model"], r["tuned_at"], r["inferred_at"]) for r in committed]
    for a, b in zip(committed, rows):
        for k in MATRIX_COLUMNS[3:]:
            assert math.isclose(float(a[k]), float(b[k]), rel_tol=1e-12), (a, k)


@pytest.mark.parametrize("key", ["trials_per_s_ratio", "time_to_same_latency_reduction", "final_latency_ratio",
                                 "best_config", "model", "seed", "goal_met", "equal_time_latency_ratio",
                                 "time_to_stock_latency_ratio", "torch_eager_fp32_ms"])
def test_summary_keeps_the_keys_reviewers_read(key):
    summary = load_json(RESULTS)
    assert summary[key] is not None
    if key == "time_to_same_latency_reduction":
        assert 0.0 <= summary[key] <= 1.0


def test_h200_anytime_keeps_the_keys_the_issue_names():
    doc = load_json(RESULTS, "h200_anytime.json")
    assert doc["models"]
    for entry in doc["models"]:
        for key in ANYTIME_KEYS:
            assert key in entry, (entry.get("model"), key)


def test_every_anytime_block_is_the_medians_of_h200_anytime():
    """Each anytime folder's block (the report's own recomputation from the checkpoints) agrees with the medians
    bench/anytime.py wrote, the bound of a run stopped before stock's wall included."""
    summary = load_json(RESULTS)
    folders = [d for d in sorted(os.listdir(RESULTS)) if os.path.exists(os.path.join(RESULTS, d, "experiment.json"))
               and load_json(os.path.join(RESULTS, d), "experiment.json")["table"] == "anytime"]
    assert len(folders) >= 2  # mlp and a many-task model
    for folder in folders:
        manifest = load_json(os.path.join(RESULTS, folder), "experiment.json")
        entry = next(m for m in load_json(RESULTS, manifest["file"])["models"] if m["model"] == manifest["model"])
        block = summary[folder]
        assert block["config"] == entry["best_config"], folder
        for key in ("equal_time_latency_ratio", "equal_time_latency_ratio_upper_bound", "time_to_stock_latency_ratio"):
            if entry.get(key) is None:
                assert block["medians"][key] is None, (folder, key)
            else:
                assert block["medians"][key] == pytest.approx(entry[key], rel=1e-3), (folder, key)


def test_headline_is_the_equal_time_medians_of_h200_anytime():
    """The report recomputes the ratios from each seed's checkpoints; bench/anytime.py wrote its own medians."""
    summary = load_json(RESULTS)
    folder = summary["source"].split(":")[0]
    manifest = load_json(os.path.join(RESULTS, folder), "experiment.json")
    assert manifest["table"] == "anytime" and "headline" in manifest["summary"]
    doc = load_json(RESULTS, manifest["file"])
    entry = next(m for m in doc["models"] if m["model"] == summary["model"])
    assert summary["best_config"] == entry["best_config"] and summary["seed"] == entry["seeds"]
    for key in ("equal_time_latency_ratio", "time_to_stock_latency_ratio", "best_ms_at_300s", "torch_eager_fp32_ms"):
        assert summary[key] == pytest.approx(entry[key], rel=1e-3), key
    assert summary["final_latency_ratio"] == summary["equal_time_latency_ratio"]
    reduction = 1 - entry["time_to_stock_latency_ratio"]
    assert summary["time_to_same_latency_reduction"] == pytest.approx(reduction, abs=1e-4)
    raws = [entry["raw"][str(s)] for s in entry["seeds"]]
    runs = [(raw["stock"], raw["configs"][entry["best_config"]]) for raw in raws]
    trials = statistics.median(w["trials"] / st["trials"] for st, w in runs)  # in stock's wall time
    assert summary["trials_per_s_ratio"] == pytest.approx(trials, abs=1e-3)
    assert summary["time_to_same_latency_reached"] == all(w["reached_stock_latency"] for _, w in runs)
    assert summary["trials"] == entry["stock_trials"] and summary["batch"] == entry["batch"]
    assert summary["date"] == folder[:10] == doc["date"][:10] and summary["tvm"] == doc["tvm"]
    goal = summary["goal"]
    met = (summary["equal_time_latency_ratio"] <= goal["equal_time_latency_ratio_max"],
           summary["time_to_stock_latency_ratio"] <= goal["time_to_stock_latency_ratio_max"])
    assert summary["goal_met"] == all(met)
    assert summary[folder]["per_seed"].keys() == {str(s) for s in entry["seeds"]}


def test_equal_trials_bests_stay_under_their_folders():
    summary = load_json(RESULTS)
    blocks = {k: v["best"] for k, v in summary.items() if isinstance(v, dict) and "best" in v}
    assert blocks
    for folder, b in blocks.items():
        assert b["measured_at"].startswith("equal trials"), folder
        rows = [r for r in summary["runs"] if r["experiment"] == folder and "failed" not in r]
        assert any(r["config"] == b["config"] and r["trials_per_s_ratio"] == b["trials_per_s_ratio"]
                   and r["final_latency_ratio"] == b["final_latency_ratio"] for r in rows), folder


UNDER_WAY = {"bert-layer:8": "2026-12-02: 25 % at 320 trials, 100 % at 320 and at 960 (1.26x, where the search stops); "
                             "its 50 % run stopped at 275 trials; the study's second model is now resnet18:16"}


def test_slice_matrix_has_the_columns_and_models_the_issue_names():
    """Every tuned model is swept at the issue's six slices; each model has one budget tuned at 25, 50 and 100 %
    (a study under way, as mlp:1024 at 320 trials on 2026-12-02, may still lack a tuning slice), except a model
    whose study is under way at every budget (UNDER_WAY: it must have two tuning slices, at one budget or two)."""
    cols, rows = load_csv(RESULTS)
    assert cols == MATRIX_COLUMNS
    assert all(r["trials_per_stage"].isdigit() for r in rows)
    for model in {r["model"] for r in rows}:
        mine = [r for r in rows if r["model"] == model]
        budgets = {r["trials_per_stage"] for r in mine}
        tuned = {b: {int(r["tuned_at"]) for r in mine if r["trials_per_stage"] == b} for b in budgets}
        if model in UNDER_WAY:
            assert len(set().union(*tuned.values())) >= 2, (model, tuned)
        else:
            assert any(at == {25, 50, 100} for at in tuned.values()), (model, tuned)
        for b, at in tuned.items():
            for t in at:
                swept = {int(r["inferred_at"]) for r in mine if r["trials_per_stage"] == b and int(r["tuned_at"]) == t}
                assert swept >= {10, 20, 30, 50, 70, 100}, (model, b, t)
    assert {r["model"] for r in rows} == {"mlp", "resnet18-small", "mlp:1024", "bert-layer:8",
                                           "resnet18:16"}  # named by its batch


def test_each_committed_finding_is_what_its_folders_data_give(tmp_path):
    """finding.json of every slice-study folder, recomputed from the folder's committed CSVs: same verdict, same
    recommended tuning slice, same best tuning slice per inference slice (a changed rule or CSV shows here)."""
    slice_study = bench_module("slice_study")
    folders = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(RESULTS, "*", "finding.json")))
    assert folders
    verdicts = {}
    for folder in folders:
        copy = tmp_path / os.path.basename(folder)
        copy.mkdir()
        for path in glob.glob(os.path.join(folder, "*.csv")):
            with open(path, "rb") as src:
                (copy / os.path.basename(path)).write_bytes(src.read())
        again = slice_study.find(str(copy))["models"]
        committed = load_json(folder, "finding.json")["models"]
        assert again.keys() == committed.keys(), folder
        for model, mine in committed.items():
            theirs = again[model]
            assert (theirs["verdict"], theirs["recommendation"]["tuned_at"]) == \
                   (mine["verdict"], mine["recommendation"]["tuned_at"]), (folder, model)
            assert [r["best_tuned_at"] for r in theirs["per_inference_slice"]] == \
                   [r["best_tuned_at"] for r in mine["per_inference_slice"]], (folder, model)
            verdicts[(os.path.basename(folder), model)] = (mine["verdict"], mine["recommendation"]["tuned_at"])
    # issue 19's two slice-sensitive models, each at the budget where tuning won at every tuning slice
    assert verdicts[("2026-12-02-h200-mlp1024-slice-study-320-trials", "mlp:1024")] == ("refuted", 100)
    assert verdicts[("2026-12-03-h200-resnet18-16-slice-study-640-trials", "resnet18:16")] == ("reproduced", 50)


def test_results_are_named_by_date_and_what_was_run():
    folders = [d for d in sorted(os.listdir(RESULTS)) if os.path.isdir(os.path.join(RESULTS, d))]
    assert folders and all(FOLDER.match(d) for d in folders), folders
    for d in folders:
        with open(os.path.join(RESULTS, d, "README.md")) as f:
            assert f.readline().startswith("# "), d
    assert not glob.glob(os.path.join(RESULTS, "**", "*.jsonl"), recursive=True), "event logs are kept as .jsonl.gz"

    def keys(x):
        if isinstance(x, dict):
            for k, v in x.items():
                yield k
                yield from keys(v)
        elif isinstance(x, list):
            for v in x:
                yield from keys(v)

    summary = load_json(RESULTS)
    named = [k for k in keys(summary) if re.search(r"session|call\d", k)]
    assert not named, f"summary keys named after the order of the work: {named}"
    text = json.dumps(summary)
    assert not re.search(r"session \d|session\d|call\d_", text)


UNTUNED_COLUMNS = ["model", "inferred_at", "latency_ms_median", "latency_ms_iqr"]  # issue 19


def test_rebuilt_untuned_sweep_is_the_committed_one(rebuilt):
    """No committed folder has an untuned sweep yet: the file is its header alone, rebuilt the same."""
    (cols, committed), (rcols, rows) = load_csv(RESULTS, "h200_slice_untuned.csv"), \
        load_csv(rebuilt, "h200_slice_untuned.csv")
    assert cols == rcols == UNTUNED_COLUMNS and rows == committed


def test_untuned_rows_come_from_slice_matrix_folders(tmp_path):
    """A slice-matrix folder's *.untuned.csv (bench/slice_study.py sweep) becomes h200_slice_untuned.csv's rows, its
    *.sweep.csv stays h200_slice_matrix.csv's, neither read as the other."""
    report = bench_module("report")

    folder = tmp_path / "results" / "2026-12-01-cpu-study"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("# a study\n")
    (folder / "experiment.json").write_text('{"table": "slice-matrix"}')
    (folder / "r1.sweep.csv").write_text("model,tuned_at,inferred_at,latency_ms_median,latency_ms_iqr,cores\n"
                                         "mlp:1024,25,50,0.5,0.01,[0]\n")
    (folder / "r1.untuned.csv").write_text("model,inferred_at,latency_ms_median,latency_ms_iqr\nmlp:1024,50,0.9,0.02\n")
    report.write_matrices(report.load(str(tmp_path / "results")), str(tmp_path))
    cols, rows = load_csv(tmp_path)
    assert cols == MATRIX_COLUMNS and [r["tuned_at"] for r in rows] == ["25"]
    cols, rows = load_csv(tmp_path, "h200_slice_untuned.csv")
    assert cols == UNTUNED_COLUMNS and rows == [{"model": "mlp:1024", "inferred_at": "50", "latency_ms_median": "0.9",
                                                 "latency_ms_iqr": "0.02"}]


def test_each_matrix_row_carries_its_runs_trial_budget(tmp_path):
    """trials_per_stage comes from the run's event log: its spec's trials, or (a budget by default or per task) what
    the plan gave the first tuning slice's shards; a run whose log stayed on the device leaves it empty."""
    import gzip

    report = bench_module("report")
    folder = tmp_path / "results" / "2026-12-01-cpu-study"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("# a study\n")
    (folder / "experiment.json").write_text('{"table": "slice-matrix"}')
    for run, trials in (("r1", 320), ("r2", None), ("r3", "no log")):
        (folder / f"{run}.sweep.csv").write_text("model,tuned_at,inferred_at,latency_ms_median,latency_ms_iqr\n"
                                                 f"m,25,50,0.5,0.01\n")
        if trials == "no log":
            continue
        events = [{"kind": "run_started", "spec": {"trials": trials}}] + [
            {"kind": "shard_planned", "tuned_at": at, "shard": i, "shard_trial_budget": 48}
            for at in (25, 50) for i in range(2)]
        with gzip.open(folder / f"{run}.jsonl.gz", "wt") as f:
            f.write("".join(json.dumps(e) + "\n" for e in events))
    report.write_matrices(report.load(str(tmp_path / "results")), str(tmp_path))
    _, rows = load_csv(tmp_path)
    assert [r["trials_per_stage"] for r in rows] == ["320", "96", ""]


def test_the_batch_yields_are_what_the_committed_logs_give(tmp_path):
    """`bench/results/2026-12-02-h200-batch-yields/yields.json` (the budget rule's data) recomputes from the
    committed H200 event logs; each later batch adds less than the first, and the k-th batch's share of the first's
    saving, over the searches with at least k batches, is `LATER_BATCH_WORTH`'s within 0.1."""
    from workbench.plan.budget import LATER_BATCH_WORTH

    yields = bench_module("batch_yields")
    out = tmp_path / "yields.json"
    yields.main(["--out", str(out)])
    committed = os.path.join(RESULTS, "2026-12-02-h200-batch-yields", "yields.json")
    with open(committed) as f, open(out) as g:
        assert json.load(f) == json.load(g)
    for row in json.load(open(out))["by_slice"]["all"]:
        saved = row["mean_saved"]
        gains = [b - a for a, b in zip([0.0] + saved, saved)]
        assert all(g < gains[0] for g in gains[1:]), row
        k = row["batches"]
        assert k == 1 or abs(gains[-1] / gains[0] - LATER_BATCH_WORTH[k - 1]) < 0.1, row
