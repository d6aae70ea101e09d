"""Pure pandas helpers behind the panel: the tuning-slice recommendation, bounded series, text formats.

Nothing here touches widgets, files or processes, so everything is easy to test on hand-made frames.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from .engine import fmt_seconds, fmt_us, time_unit  # noqa: F401 - the panel's names for them

SWEEP_COLUMNS = ("tuned_at", "inferred_at", "latency_ms_median")


@dataclass(frozen=True)
class Recommendation:
    """Which slice to tune at so that the tuned model is never far from the best one, whatever it runs on."""

    tuned_at: int
    worst_slowdown: float
    worst_inferred_at: int
    slowdown: pd.DataFrame  # tuned_at x inferred_at: latency / best latency at that inferred_at
    worst: pd.Series  # tuned_at -> worst slowdown across the inference slices
    sentence: str


def slowdown_matrix(sweep: pd.DataFrame) -> pd.DataFrame:
    """tuned_at x inferred_at table of latency divided by the best latency (over all tuned_at) per inferred_at."""
    missing = [c for c in SWEEP_COLUMNS if c not in sweep.columns]
    if missing:
        raise ValueError(f"sweep table lacks column(s) {', '.join(missing)}")
    df = sweep.dropna(subset=list(SWEEP_COLUMNS))
    if not len(df):
        return pd.DataFrame()
    m = df.pivot_table(index="tuned_at", columns="inferred_at", values="latency_ms_median", aggfunc="median")
    m = m.sort_index().sort_index(axis=1)
    return m / m.min(axis=0)


def recommend_tuning_slice(sweep: pd.DataFrame) -> Recommendation | None:
    """The tuned_at whose worst-case slowdown across inference slices is smallest (None without data).

    Only inference slices measured for every tuned model are compared, so that a model is not favoured
    for having fewer measurements. Ties go to the smaller mean slowdown, then to the smaller slice.
    """
    ratio = slowdown_matrix(sweep)
    if ratio.empty:
        return None
    complete = ratio.dropna(axis=1, how="any")
    basis = complete if complete.shape[1] else ratio
    worst = basis.max(axis=1, skipna=True)
    mean = basis.mean(axis=1, skipna=True)
    order = sorted(worst.index, key=lambda t: (round(float(worst[t]), 9), float(mean[t]), t))
    best = order[0]
    worst_at = int(basis.loc[best].idxmax())
    lo, hi = int(min(basis.columns)), int(max(basis.columns))
    span = f"{lo}%" if lo == hi else f"{lo}-{hi}%"
    others = [t for t in order[1:]]
    tail = ""
    if others:
        runner_up = others[0]
        tail = f"; the next best, tuned at {int(runner_up)}%, is up to {float(worst[runner_up]):.2f}x slower"
    sentence = (f"Tune at {int(best)}%: on every inference slice from {span} its model is at most "
                f"{float(worst[best]):.2f}x slower than the best model for that slice (worst at {worst_at}%)"
                f"{tail}.")
    return Recommendation(int(best), float(worst[best]), worst_at, ratio, worst, sentence)


def downsample(df: pd.DataFrame, max_points: int) -> pd.DataFrame:
    """At most `max_points` rows, evenly spaced, always keeping the first and the last row."""
    n = len(df)
    if n <= max(max_points, 1):
        return df
    if max_points < 2:
        return df.tail(1)
    step = math.ceil((n - 1) / (max_points - 1))
    idx = list(range(0, n - 1, step)) + [n - 1]
    return df.iloc[idx]


def phase_spans(phases: pd.DataFrame, t0: float, now: float) -> list[dict]:
    """Consecutive phase events -> [{'phase', 'label', 'x0', 'x1'}] in seconds since `t0`.

    Each phase lasts until the next one starts; the last one until `now`.
    """
    if phases is None or not len(phases):
        return []
    rows = phases.sort_values("t", kind="stable").to_dict("records")
    spans = []
    for i, row in enumerate(rows):
        end = rows[i + 1]["t"] if i + 1 < len(rows) else now
        at = row.get("tuned_at")
        has_at = at is not None and not (isinstance(at, float) and math.isnan(at))
        label = f"{row['phase']} {int(at)}%" if has_at else str(row["phase"])
        spans.append({"phase": row["phase"], "label": label, "x0": row["t"] - t0, "x1": max(end, row["t"]) - t0})
    return spans
