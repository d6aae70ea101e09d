"""Tables for people: the event log with local times, the results with readable headers, each budget's model.

`Run.events` and `Run.results_table()` build on these; code that needs the raw values reads `Run.event_list()`
(unix seconds in `t`) and `Run.results` (results.json's field names).
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from workbench.noise import fmt_timing, versus, within_noise
from workbench.runs.events import is_raise
from workbench.units import time_unit

# results.json field -> the header people read (in this order); the panel and the CLI show these columns
RESULT_HEADERS: dict[str, str] = {
    "tuned_at": "tuned at (%)",
    "tuned_ms": "latency (median ± IQR)",
    "vs_baseline": "vs baseline",
    "baseline": "baseline",
    "baseline_ms": "baseline latency (median ± IQR)",
    "untuned_ms": "untuned latency (median ± IQR)",
    "speedup": "speedup vs untuned",
    "verdict": "verdict",
    "kept": "model kept",
    "match": "outputs match",
    "trials_measured": "trials measured",
    "tasks_tuned": "tasks searched",  # with a measured record; "tasks kept on default" says which the model left
    "kept_default": "tasks kept on default",
    "tasks_total": "tasks",
    "busy_cores": "other processes' cores while timing",
    "timed_on": "timed on",  # shown only for a run whose stages were timed on a tracker's server
}
SPREAD = {"tuned_ms": "tuned_iqr_ms", "untuned_ms": "untuned_iqr_ms", "baseline_ms": "baseline_iqr_ms"}  # and IQR
# The times that pick a view's unit: the model's, as the panel's other views (tasks, shards, sweep) show it; the
# baseline's time is shown in that unit, so a slow baseline does not put one view in ms while the others read us.
MODEL_TIMES = ("tuned_ms", "untuned_ms")


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
    if "vs_baseline" in out:
        said = df["vs_baseline_verdict"] if "vs_baseline_verdict" in df else [None] * len(df)
        out["vs_baseline"] = [versus(r, v) for r, v in zip(df["vs_baseline"], said)]
    if "baseline" in out:
        out["baseline"] = [b if isinstance(b, str) else "none" for b in out["baseline"]]
    unit = time_unit([v * 1e3 for col in MODEL_TIMES if col in df for v in df[col] if v is not None])  # one for all
    for col, iqr in SPREAD.items():
        if col in out:
            spreads = df[iqr] if iqr in df else [None] * len(df)
            out[col] = [fmt_timing(m, i if i == i else None, unit=unit) if m is not None and m == m else "-"
                        for m, i in zip(df[col], spreads)]
    return out.rename(columns=RESULT_HEADERS)


BUDGET_COLUMNS = ["trials", "tuned_at", "tuned_ms", "tuned_iqr_ms", "untuned_ms", "speedup", "gain", "gain_verdict"]


def budget_history(events: list[dict[str, Any]]) -> pd.DataFrame:
    """The model each budget ended with, per tuning slice: the run's first budget, then each raise (`resume
    --trials`). `trials` per tuning slice, the `timed` event's tuned and untuned ms, and against the previous budget's
    model at that slice `gain` (its time over this one's) and `gain_verdict` (faster, slower or within noise)."""
    trials, rows = None, {}
    for e in events:
        if e["kind"] == "run_started" and trials is None:
            trials = e["spec"].get("trials")
        elif is_raise(e):
            trials = e["trials"]
        elif e["kind"] == "timed":
            rows[(trials, e["tuned_at"])] = {"trials": trials, **{k: e.get(k) for k in BUDGET_COLUMNS[1:6]}}
    out = []
    for tuned_at in sorted({at for _, at in rows}):
        prev = None
        for row in [r for (_, at), r in rows.items() if at == tuned_at]:  # in the order the budgets came
            gain = verdict = None
            if prev is not None:
                gain = prev["tuned_ms"] / row["tuned_ms"]
                same = within_noise(prev["tuned_ms"], prev["tuned_iqr_ms"], row["tuned_ms"], row["tuned_iqr_ms"])
                verdict = "within noise" if same else "faster" if gain > 1 else "slower"
            out.append({**row, "gain": gain, "gain_verdict": verdict})
            prev = row
    return pd.DataFrame(out, columns=BUDGET_COLUMNS)


def budget_line(history: pd.DataFrame) -> str:
    """'Tuned on, at 100 %: 320 -> 640 -> 960 trials, 819.9 -> 731.0 -> 729.7 us; the last raise changed it within
    the timing noise (1.00x)', a clause per tuning slice; '' for a run never raised."""
    parts = []
    for tuned_at, part in history.groupby("tuned_at", sort=True):
        if len(part) < 2:
            continue
        last = part.iloc[-1]
        budgets = " -> ".join("-" if t is None or t != t else str(int(t)) for t in part["trials"])
        unit = time_unit([m * 1e3 for m in part["tuned_ms"]])  # the results table's unit for these times
        times = " -> ".join(fmt_timing(m, short=True, unit=unit) for m in part["tuned_ms"])
        gain, verdict = last["gain"], last["gain_verdict"]
        said = (f"made it {gain:.2f}x faster" if verdict == "faster" else f"made it {1 / gain:.2f}x slower"
                if verdict == "slower" else f"changed it within the timing noise ({gain:.2f}x)")
        parts.append(f"at {tuned_at} %: {budgets} trials, {times} {unit}; the last raise {said}")
    return ("Tuned on, " + "; ".join(parts)) if parts else ""


# TVM's profiler scopes (the `shard_finished` events' profile_s) -> the phase people read; the rest of its Total
# (setting tasks up, the database, the workbench's own callback) is "other"
PROFILE_PHASES: dict[str, tuple[str, ...]] = {
    "search: initial population": ("EvoSearch/SampleInitPopulation",),
    "search: evolution": ("EvoSearch/Evolve/Mutation", "EvoSearch/Evolve/Misc", "EvoSearch/PickBestFromDatabase",
                          "EvoSearch/PickWithEpsGreedy"),
    "search: cost model scores": ("EvoSearch/Evolve/PredictNormalizedScore",),
    "build": ("SendToBuilder",),
    "measure": ("SendToRunner", "JoinRunnerFutures"),
    "cost model update": ("MeasureCallback/UpdateCostModel",),
}
TIME_COLUMNS = ["tuned_at", "phase", "seconds", "share"]


def time_spent(events: list[dict[str, Any]]) -> pd.DataFrame:
    """Where each tuning slice's shard clients spent their tuning, by phase, summed over its shards and every
    session of the run (TVM's profiler, as each `shard_finished` event reports it); `share` of the profiler's
    total. Empty until a shard has finished."""
    profiles: dict[int, list[dict[str, float]]] = {}
    for e in events:
        if e["kind"] == "shard_finished" and e.get("profile_s"):
            profiles.setdefault(e["tuned_at"], []).append(e["profile_s"])
    rows = []
    for tuned_at, stage in sorted(profiles.items()):
        total = sum(p.get("Total", 0.0) for p in stage)
        if total <= 0:
            continue
        spent = {phase: sum(p.get(k, 0.0) for p in stage for k in keys) for phase, keys in PROFILE_PHASES.items()}
        spent["other"] = max(0.0, total - sum(spent.values()))
        rows += [{"tuned_at": tuned_at, "phase": phase, "seconds": round(s, 2), "share": s / total}
                 for phase, s in spent.items()]
    return pd.DataFrame(rows, columns=TIME_COLUMNS)


def time_line(spent: pd.DataFrame) -> str:
    """'at 100 %: search 81 % (initial population 29 %, evolution 35 %, cost model scores 17 %), build 15 %, measure
    2 %, ... of 2154 s of tuning in all clients', a clause per tuning slice (a search phase under 0.5 % left out
    of the brackets); '' when no shard has finished."""
    parts = []
    for tuned_at, stage in spent.groupby("tuned_at", sort=True):
        share = dict(zip(stage["phase"], stage["share"]))
        search = {p.split(": ")[1]: s for p, s in share.items() if p.startswith("search: ")}
        rest = ", ".join(f"{p} {100 * s:.0f} %" for p, s in share.items() if not p.startswith("search: "))
        inner = ", ".join(f"{p} {100 * s:.0f} %" for p, s in search.items() if s >= 0.005)  # none at 0 %
        inner = f" ({inner})" if inner else ""
        parts.append(f"at {tuned_at} %: search {100 * sum(search.values()):.0f} %{inner}, {rest} of "
                     f"{stage['seconds'].sum():.0f} s of tuning in all clients")
    return "; ".join(parts)
