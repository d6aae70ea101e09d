"""A run's sweep as tables: its tuned models' latency per (tuned_at, inferred_at), the untuned build at each swept
slice, and the tuned-at x inferred-at matrix. `Run.sweep`, `Run.sweep_untuned()` and `Run.slice_matrix()` call these.

Which points stand is decided here only: the latest point wins, also over an older one at a slice that a later
point stands for (a CPU's slices of one core count run on the same cores), and points from before the budget was
last raised are left out, since they timed models that are gone.
"""
from __future__ import annotations

import os
from collections.abc import Iterable

import pandas as pd

from workbench.runs import store
from workbench.runs.event_types import Event, Launched, SweepPoint
from workbench.runs.events import as_dict, since_last_raise

COLUMNS = ["model", "tuned_at", "inferred_at", "latency_ms_median", "latency_ms_iqr", "latency_ms_q1",
           "latency_ms_q3", "sm_count", "cores",
           "slice_applied", "slicing", "reason", "stands_for", "busy_cores"]


def sweep_table(events: Iterable[Event], folder: store.RunDir) -> pd.DataFrame:
    """The points that stand, one row per (tuned_at, inferred_at) in that order, from the run's launched and
    sweep_point events; a folder written without sweep events reads as its sweep.csv, if any."""
    events = [e for e in events if isinstance(e, (Launched, SweepPoint))]  # a raise is a launch
    current = since_last_raise([as_dict(e) for e in events])
    points = [{c: e[c] for c in COLUMNS} for e in current if e["kind"] == SweepPoint.KIND]
    if not points:
        swept = any(isinstance(e, SweepPoint) for e in events)
        path = folder.file(store.SWEEP_FILE)
        return pd.read_csv(path) if not swept and os.path.exists(path) else pd.DataFrame(columns=COLUMNS)
    last = {(p["tuned_at"], s): i for i, p in enumerate(points) for s in p["stands_for"] or [p["inferred_at"]]}
    points = [p for i, p in enumerate(points) if last.get((p["tuned_at"], p["inferred_at"]), i) == i]
    df = pd.DataFrame(points).drop_duplicates(["tuned_at", "inferred_at"], keep="last")
    return df.sort_values(["tuned_at", "inferred_at"]).reset_index(drop=True)


def untuned_table(folder: store.RunDir) -> pd.DataFrame:
    """The untuned build timed at each swept slice (sweep_untuned.csv); empty, with its columns, before a sweep."""
    path = folder.file(store.SWEEP_UNTUNED_FILE)
    return pd.read_csv(path) if os.path.exists(path) else pd.DataFrame(columns=list(store.UNTUNED_COLUMNS))


def slice_matrix(sweep: pd.DataFrame) -> pd.DataFrame:
    """tuned_at x inferred_at table of median latency (ms), from `sweep_table`'s rows."""
    if not len(sweep):
        return sweep
    return sweep.pivot_table(index="tuned_at", columns="inferred_at", values="latency_ms_median")
