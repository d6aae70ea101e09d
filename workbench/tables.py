"""Tables for people: the event log with local times, the results with readable headers.

`Run.events` and `Run.results_table()` build on these; code that needs the raw values reads `Run.event_list()`
(unix seconds in `t`) and `Run.results` (results.json's field names).
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from .noise import fmt_timing
from .units import time_unit

# results.json field -> the header people read (in this order); the panel and the CLI show these columns
RESULT_HEADERS: dict[str, str] = {
    "tuned_at": "tuned at (%)",
    "tuned_ms": "latency (median ± IQR)",
    "untuned_ms": "untuned latency (median ± IQR)",
    "speedup": "speedup vs untuned",
    "verdict": "verdict",
    "kept": "model kept",
    "match": "outputs match",
    "trials_measured": "trials measured",
    "tasks_tuned": "tasks tuned",
    "kept_default": "tasks kept on default",
    "tasks_total": "tasks",
    "busy_cores": "other processes' cores while timing",
    "timed_on": "timed on",  # shown only for a run whose stages were timed on a tracker's server
}
SPREAD = {"tuned_ms": "tuned_iqr_ms", "untuned_ms": "untuned_iqr_ms"}  # latency column -> its IQR column


def events_table(events: list[dict[str, Any]]) -> pd.DataFrame:
    """The events (as `Run.event_list()` gives them) with `time` (local datetime) and `since_start_s` (seconds
    since the run's first event) in place of the unix seconds `t`; then kind, source and every field."""
    if not events:
        return pd.DataFrame(columns=["time", "since_start_s", "kind", "source"])
    df = pd.DataFrame(events)
    t = pd.to_numeric(df.pop("t"), errors="coerce")
    start = t.min()
    df.insert(0, "time", [pd.Timestamp.fromtimestamp(v) if v == v else pd.NaT for v in t])
    df.insert(1, "since_start_s", (t - start).round(3))
    return df


def _match(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else "inconclusive"


def results_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per tuning slice, RESULT_HEADERS' columns under their readable names (those the rows have)."""
    df = pd.DataFrame(rows)
    here = "timed_on" not in df or (df["timed_on"].isna() | (df["timed_on"] == "this host")).all()
    cols = [c for c in RESULT_HEADERS if c in df and not (c == "timed_on" and here)]
    out = df[cols].copy()
    if "match" in out:
        out["match"] = [_match(v) for v in out["match"].tolist()]
    unit = time_unit([v * 1e3 for col in SPREAD if col in df for v in df[col] if v is not None])  # one for all
    for col, iqr in SPREAD.items():
        if col in out:
            spreads = df[iqr] if iqr in df else [None] * len(df)
            out[col] = [fmt_timing(m, i if i == i else None, unit=unit) if m is not None and m == m else "-"
                        for m, i in zip(df[col], spreads)]
    return out.rename(columns=RESULT_HEADERS)
