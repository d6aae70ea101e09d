"""The committed H200 tables are what the committed summary script makes of the committed device logs."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
FILES = ("H200.md", "h200_summary.json", "h200_slice_matrix.csv")


def test_summary_rebuilds_the_committed_h200_results(tmp_path):
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "summarize_h200.py"), "--out", str(tmp_path)],
                   check=True, capture_output=True, timeout=120)
    for name in FILES:
        with open(os.path.join(RESULTS, name)) as committed, open(tmp_path / name) as rebuilt:
            assert rebuilt.read() == committed.read(), f"{name} differs from what bench/summarize_h200.py makes"


@pytest.mark.parametrize("key", ["trials_per_s_ratio", "time_to_same_latency_reduction", "final_latency_ratio",
                                 "best_config", "model"])
def test_summary_keeps_the_keys_reviewers_read(key):
    with open(os.path.join(RESULTS, "h200_summary.json")) as f:
        summary = json.load(f)
    assert summary[key] is not None
    if key == "time_to_same_latency_reduction":
        assert 0.0 <= summary[key] <= 1.0


def test_slice_matrix_has_the_columns_and_models_the_issue_names():
    import csv

    with open(os.path.join(RESULTS, "h200_slice_matrix.csv"), newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames == ["model", "tuned_at", "inferred_at", "latency_ms_median", "latency_ms_iqr"]
    for model in {r["model"] for r in rows}:
        mine = [r for r in rows if r["model"] == model]
        assert {int(r["tuned_at"]) for r in mine} == {25, 50, 100}
        assert {int(r["inferred_at"]) for r in mine} >= {10, 20, 30, 50, 70, 100}
    assert len({r["model"] for r in rows}) >= 2
