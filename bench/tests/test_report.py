"""bench.report: a slice-matrix folder's CSVs become the report's h200_slice_matrix.csv and h200_slice_untuned.csv
rows, each with its run's trial budget (folders the tests write; no committed results read)."""
from __future__ import annotations

import csv
import json
import os

from bench import report

MATRIX_COLUMNS = ["model", "tuned_at", "inferred_at", "latency_ms_median", "latency_ms_iqr",  # issue 19's
                  "trials_per_stage"]  # the run's budget per tuning slice: studies at two budgets never mix
UNTUNED_COLUMNS = ["model", "inferred_at", "latency_ms_median", "latency_ms_iqr"]  # issue 19


def load_csv(folder, name="h200_slice_matrix.csv"):
    with open(os.path.join(folder, name), newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def test_untuned_rows_come_from_slice_matrix_folders(tmp_path):
    """A slice-matrix folder's *.untuned.csv (bench/slice_study.py sweep) becomes h200_slice_untuned.csv's rows, its
    *.sweep.csv stays h200_slice_matrix.csv's, neither read as the other."""
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

    folder = tmp_path / "results" / "2026-12-01-cpu-study"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("# a study\n")
    (folder / "experiment.json").write_text('{"table": "slice-matrix"}')
    for run, trials in (("r1", 320), ("r2", None), ("r3", "no log")):
        (folder / f"{run}.sweep.csv").write_text("model,tuned_at,inferred_at,latency_ms_median,latency_ms_iqr\n"
                                                 "m,25,50,0.5,0.01\n")
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
