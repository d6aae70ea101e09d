"""The data behind the live charts, one row per event: the model's estimated latency per batch (`best_curve`), the
telemetry samples (`telemetry_table`) and the phases (`phase_table`).

Pure functions of a run's typed events; `Run.best_curve()`, `Run.telemetry()` and `Run.phases()` call them, and the
panel draws its live figure from what they return (`widgets.figures`).
"""
from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from workbench.runs.event_types import Batch, Event, Phase, ShardPlanned, Telemetry


def best_curve(events: Iterable[Event]) -> pd.DataFrame:
    """Per batch: trials so far (whole stage) and the model's estimated latency; see `Run.best_curve`.

    `est_model_us` sums, over the stage's tasks measured so far, weight x the best latency any shard found: search
    replicas of one task count once. `complete` is False until every shard the stage planned has reported a batch."""
    events = list(events)
    best: dict[tuple[int, str], float] = {}
    weight: dict[tuple[int, str], float] = {}
    trials: dict[tuple[int, int], int] = {}
    planned: dict[int, set[int]] = {}
    for e in events:
        if isinstance(e, ShardPlanned):
            planned.setdefault(e.tuned_at, set()).add(e.shard)
    rows = []
    for e in events:
        if not isinstance(e, Batch):
            continue
        stage, task = e.tuned_at, (e.tuned_at, e.task)
        if e.best_us is not None:
            best[task] = min(e.best_us, best.get(task, e.best_us))
            weight[task] = e.weight
        trials[(stage, e.shard)] = e.shard_trials
        reported = {k[1] for k in trials if k[0] == stage}
        rows.append({"t": e.t, "tuned_at": stage, "shard": e.shard, "task": e.task,
                     "task_trials": e.task_trials, "best_us": e.best_us,
                     "trials": sum(v for k, v in trials.items() if k[0] == stage),
                     "est_model_us": round(sum(weight[k] * v for k, v in best.items() if k[0] == stage), 3),
                     "shards_reported": len(reported),
                     "complete": reported >= planned.get(stage, set())})
    return pd.DataFrame(rows)


def telemetry_table(events: Iterable[Event]) -> pd.DataFrame:
    """One row per telemetry sample: `t`, cpu_percent, mem_percent, gpu_note, and per GPU `gpu<i>_sm_util` and
    `gpu<i>_mem_used_mb`."""
    rows = []
    for e in events:
        if not isinstance(e, Telemetry):
            continue
        row = {"t": e.t, "cpu_percent": e.cpu_percent, "mem_percent": e.mem_percent, "gpu_note": e.gpu_note}
        for g in e.gpus:
            row[f"gpu{g['index']}_sm_util"] = g.get("sm_util")
            row[f"gpu{g['index']}_mem_used_mb"] = g.get("mem_used_mb")
        rows.append(row)
    return pd.DataFrame(rows)


def phase_table(events: Iterable[Event]) -> pd.DataFrame:
    """One row per phase the run entered: `t`, phase, tuned_at."""
    return pd.DataFrame([{"t": e.t, "phase": e.phase, "tuned_at": e.tuned_at} for e in events if isinstance(e, Phase)])
