"""Pure pandas helpers behind the panel: bounded series, phase spans, text formats; the tuning-slice
recommendation is the engine's (`workbench.results.recommend`, shared with the CLI), named here for the panel.

Nothing here touches widgets, files or processes, so everything is easy to test on hand-made frames.
"""
from __future__ import annotations

import math

import pandas as pd

from workbench import (  # noqa: F401 - the panel's names
    Recommendation,
    fmt_ratio,
    fmt_seconds,
    fmt_share,
    fmt_us,
    recommend_tuning_slice,
    slowdown_matrix,
    time_unit,
)


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
