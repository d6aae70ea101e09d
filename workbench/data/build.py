"""Write the package's sample data from the repository's committed H200 evidence (`bench/results/`), so that an
installed workbench (no source checkout) shows it too: `python -m workbench.data.build` from a checkout.

What it copies, and from where:
- h200_slice_matrix.csv, h200_slice_untuned.csv: as committed under bench/results/;
- h200_runs.json: per committed slice-matrix run, its model, folder, machine (the folder README's "Machine:" line),
  date, budget (the run's spec), each stage's `timed` tuned/untuned timings, and the folder's finding per model;
- h200_time_spent.csv: where ResNet-18 at a batch of 16 spent its tuning on the whole H200 (its event log's
  shard profiles, `runs.tables.time_spent`); which run's log, bench/results/package-data.json says.
"""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from workbench.runs.events import since_last_raise
from workbench.runs.tables import time_spent

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parents[1] / "bench" / "results"
CHOSEN = RESULTS / "package-data.json"  # which committed evidence is copied (run folders are named by date)
TIMED_KEYS = ("tuned_at", "tuned_ms", "tuned_iqr_ms", "untuned_ms", "untuned_iqr_ms")


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def committed_runs(results: Path = RESULTS) -> list[dict]:
    """Each committed slice-matrix run, as h200_runs.json holds it."""
    runs = []
    for manifest in sorted(results.glob("*/experiment.json")):
        folder = manifest.parent
        if json.loads(manifest.read_text()).get("table") != "slice-matrix":
            continue
        machine = next((line.split("`")[1] for line in (folder / "README.md").read_text().splitlines()
                        if line.startswith("Machine:") and "`" in line), folder.name.split("-")[3])
        found = folder / "finding.json"
        findings = {m: f["finding"] for m, f in json.loads(found.read_text())["models"].items()} \
            if found.exists() else {}
        for sweep_csv in sorted(folder.glob("*.sweep.csv")):
            run_id = sweep_csv.name.split(".")[0]
            events = since_last_raise(_events(folder / f"{run_id}.jsonl.gz"))  # a raised run was timed again
            spec = next(e["spec"] for e in reversed(events) if e["kind"] == "run_started")
            model = sweep_csv.read_text().splitlines()[1].split(",")[0]
            runs.append({"model": model, "folder": folder.name, "machine": machine, "date": folder.name[:10],
                         "trials": spec["trials"], "trials_per_batch": spec["trials_per_batch"],
                         "slices": spec["slices"], "finding": findings.get(model, ""),
                         "timed": [{k: e[k] for k in TIMED_KEYS} for e in events if e["kind"] == "timed"]})
    return runs


def main() -> None:
    for name in ("h200_slice_matrix.csv", "h200_slice_untuned.csv"):
        shutil.copyfile(RESULTS / name, HERE / name)
    (HERE / "h200_runs.json").write_text(json.dumps(committed_runs(), indent=1) + "\n")
    log = json.loads(CHOSEN.read_text())["time_spent_log"]
    time_spent(_events(RESULTS / log)).to_csv(HERE / "h200_time_spent.csv", index=False)
    print(f"wrote the sample data under {HERE}")


if __name__ == "__main__":
    main()
