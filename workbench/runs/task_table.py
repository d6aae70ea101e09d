"""The per-task view of a run: what the plan chose, each task's default and best times, its share of
the model's time, its trials and what the compiled model runs for it. Built from the plan and events."""
from __future__ import annotations

import math
from typing import Any

import pandas as pd

from workbench.plan.plan import Plan
from workbench.runs.event_types import (
    Batch,
    Compiled,
    DefaultsTimed,
    Event,
    ShardPlanned,
    ShardStarted,
    TaskSearchFailed,
    TaskSkipped,
)

COLUMNS = ["tuned_at", "task", "state", "weight", "share", "default_us", "best_us", "trials", "kept", "reason"]
SORTS = {"share": False, "default_us": False, "best_us": False, "trials": False, "state": True, "task": True}


def task_table(plan: Plan | None, events: list[Event], slices: tuple[int, ...]) -> pd.DataFrame:
    """One row per (tuning slice, task), costliest share first; see `Run.tasks`."""
    tasks = plan.tasks if plan else ()
    if not tasks:
        return pd.DataFrame(columns=COLUMNS)
    stages = sorted({e.tuned_at for e in events if isinstance(e, ShardPlanned)}) or list(slices[:1])
    per: dict[tuple[int, str], dict[str, Any]] = {}
    first = slices[0] if slices else None  # the plan's known times are the first slice's library's
    for stage in stages:
        for t in tasks:
            out = t.plan == "default"
            per[(stage, t.name)] = {
                "tuned_at": stage, "task": t.name, "state": "default" if out else "planned",
                "weight": t.weight, "share": math.nan, "default_us": math.nan,
                "best_us": t.known_us if t.known_us is not None and stage == first else math.nan, "trials": 0,
                "kept": None, "reason": "outside the budget: keeps its default schedule" if out else ""}
    trials: dict[tuple[int, str, int], int] = {}
    failed: dict[tuple[int, str], str] = {}
    for e in events:
        key = (e.tuned_at, e.task) if isinstance(e, (Batch, TaskSkipped, TaskSearchFailed)) else None
        if isinstance(e, DefaultsTimed):
            for name, us in e.defaults_us.items():
                row = per.get((e.tuned_at, name))
                if row is not None and us is not None:
                    row["default_us"] = us
                elif row is not None and e.errors.get(name):
                    row["reason"] = row["reason"] or f"default not timed: {e.errors[name]}"
        elif isinstance(e, Batch) and key in per:
            row = per[key]
            if e.best_us is not None:
                row["best_us"] = e.best_us if math.isnan(row["best_us"]) else min(row["best_us"], e.best_us)
            trials[(*key, e.shard)] = e.task_trials
            row["state"] = "tuning"
        elif isinstance(e, ShardStarted):
            if e.memory_note:  # its client could not read the memory: nothing of it runs unless the finisher adds it
                for name in e.tasks:
                    row = per.get((e.tuned_at, name))
                    if row is not None and row["state"] == "planned":
                        row["best_us"] = math.nan
            for name, n in e.memory_records.items():
                row = per.get((e.tuned_at, name))
                if row is not None and not row["reason"]:
                    row["reason"] = f"started from the tuning memory's best ({n} records)"
        elif isinstance(e, TaskSkipped) and key in per:
            per[key].update(state="skipped", reason=e.reason)
        elif isinstance(e, TaskSearchFailed) and key in per:
            failed[key] = e.reason
        elif isinstance(e, Compiled):
            for c in e.choices:
                row = per.get((e.tuned_at, c["task"]))
                if row is None:
                    continue
                row["kept"] = c["kept"]
                if c["best_us"] is not None and math.isnan(row["best_us"]):  # a record it did not measure: memory's
                    row["best_us"] = c["best_us"]
                if row["state"] in ("tuning", "planned"):
                    row["state"] = "tuned" if c["best_us"] is not None else row["state"]
                if c["task"] in e.from_memory and c["kept"] == "tuned":  # no record of this run's: the memory's
                    row.update(state="tuned", reason="runs the tuning memory's best schedule")
                if c["kept"] == "default" and c["best_us"] is not None:
                    row["reason"] = (f"its default ({c['default_us']:.1f} us) beat the best tuned "
                                     f"({c['best_us']:.1f} us): keeps the default")
    for (stage, task, _), n in trials.items():
        per[(stage, task)]["trials"] += n
    for key, why in failed.items():  # said last, so that what the finish chose for the task follows it
        row = per[key]
        row["reason"] = f"its search failed after {row['trials']} trials ({why})" + (
            f"; {row['reason']}" if row["reason"] else "")
    df = pd.DataFrame(list(per.values()), columns=COLUMNS)
    known = {t.name: t.known_us for t in tasks if t.known_us is not None}  # counted at the time they run at, as
    # the plan ranks them (the memory's best, where it beats the default), at the slice whose library it is
    for stage, part in df.groupby("tuned_at"):
        time_us = part["default_us"].clip(upper=part["task"].map(known if stage == first else {})) * part["weight"]
        total = time_us.sum(skipna=True)
        if total > 0:
            df.loc[part.index, "share"] = (time_us / total).round(4)
    return df.sort_values(["tuned_at", "share", "weight"], ascending=[True, False, False],
                          na_position="last", kind="stable").reset_index(drop=True)
