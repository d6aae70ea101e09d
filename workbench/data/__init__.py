"""Sample data that ships with the package: what the workbench measured on an NVIDIA H200 (under CUDA MPS), for the
notebooks to show beside what this machine measures. Written from the repository's `bench/results/` by
`python -m workbench.data.build`; read here, so an installed workbench needs no source checkout.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

import pandas as pd


def _file(name: str):
    return resources.files(__package__).joinpath(name)


def h200_slice_matrix() -> pd.DataFrame:
    """Every committed H200 sweep point: model, trials_per_stage, tuned_at, inferred_at, latency_ms_median, ...
    (one matrix per model and trial budget)."""
    with _file("h200_slice_matrix.csv").open() as f:
        return pd.read_csv(f)


def h200_slice_untuned() -> pd.DataFrame:
    """TVM's untuned build of each model timed at each slice on the H200."""
    with _file("h200_slice_untuned.csv").open() as f:
        return pd.read_csv(f)


@lru_cache(maxsize=1)
def _runs() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(_file("h200_runs.json").read_text()))


def h200_runs() -> pd.DataFrame:
    """Where each committed H200 matrix came from: per run its model, experiment folder, machine, date, trials per
    tuning slice and per batch, the slices it tuned at, each stage's tuned / untuned ms at its own slice, and the
    finding its folder's study wrote for the model ('' where none)."""
    rows = [{"model": r["model"], "folder": r["folder"], "machine": r["machine"], "date": r["date"],
             "trials per tuning slice": r["trials"], "trials per batch": r["trials_per_batch"],
             "tuned at (%)": r["slices"],
             "tuned / untuned ms at its own slice": {t["tuned_at"]: f"{t['tuned_ms']:.4f} / {t['untuned_ms']:.4f}"
                                                     for t in r["timed"]},
             "finding": r["finding"]} for r in _runs()]
    return pd.DataFrame(rows)


def h200_stage_timings(model: str, trials: int) -> pd.DataFrame:
    """The stages of the committed runs of `model` at `trials` per tuning slice, each timed at its own slice
    (tuned_at, tuned_ms, tuned_iqr_ms, untuned_ms, untuned_iqr_ms)."""
    rows = [t for r in _runs() if r["model"] == model and r["trials"] == trials for t in r["timed"]]
    return pd.DataFrame(rows)


def h200_time_spent() -> pd.DataFrame:
    """Where ResNet-18 at a batch of 16 spent its tuning on the whole H200, 640 trials (`Run.time_spent()`'s
    columns: tuned_at, phase, seconds, share)."""
    with _file("h200_time_spent.csv").open() as f:
        return pd.read_csv(f)
