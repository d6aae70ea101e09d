"""Schedules found elsewhere, re-applied to a task as its first batch: the same workload's best records measured
at another slice (a run's earlier stage, another slice's tuning memory), and the best records of similar workloads
(the same blocks, operand kinds and ranks, other shapes) from this target's memory.

A trace names blocks and loops, not shapes, so it replays on another shape; only its tile sizes may not fit. Where a
`SamplePerfectTile` decision does not multiply out to the loop's new extent it is drawn afresh (as MetaSchedule's
`SamplePerfectTile` mutator would), and a trace that still does not apply, or that a postprocessor rejects, is
dropped. What re-applies is measured like any candidate, on this run's servers, and counts as this run's trials: a
record's time at another slice or shape is never taken for this task's.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from typing import Any

OFFERED_PER_TASK = 2  # traces offered per trial of the first batch: some do not re-apply


def _records(folder: str) -> list:
    from tvm.s_tir import meta_schedule as ms

    from workbench.runs.memory import startable

    if not os.path.exists(os.path.join(folder, "database_tuning_record.json")):
        return []
    db = ms.database.JSONDatabase(work_dir=folder, allow_missing=False)
    return [r for r in db.get_all_tuning_records() if startable(r)]


def _mean(record) -> float:
    return sum(float(s) for s in record.run_secs) / len(record.run_secs)


def related_traces(tasks: Iterable, same: Iterable[str], similar: Iterable[str], per_task: int
                   ) -> dict[str, list[Any]]:
    """{task name: traces to re-apply, best first}, for MetaSchedule's extracted `tasks`: from the databases in
    `same` (other slices: the same workload's records), then from those in `similar` (this slice's memory: other
    workloads of the same signature, taken in turn, each best first); at most `per_task` each. A database that cannot
    be read is skipped (the memory's own refusal says why)."""
    from workbench.runs.memory import signature, workload_hash

    tasks = list(tasks)
    by_hash: dict[str, list] = {}
    for folder in same:
        try:
            records = _records(folder)
        except Exception:  # noqa: BLE001 - another TVM's or damaged: nothing to take from it
            continue
        for r in records:
            by_hash.setdefault(workload_hash(r.workload.mod), []).append(r)
    by_signature: dict[str, dict[str, list]] = {}
    for folder in similar:
        try:
            records = _records(folder)
        except Exception:  # noqa: BLE001
            continue
        for r in records:
            by_signature.setdefault(json.dumps(signature(r.workload.mod)), {}).setdefault(workload_hash(r.workload.mod),
                                                                               []).append(r)
    out: dict[str, list] = {}
    for task in tasks:
        mod, own = task.dispatched[0], workload_hash(task.dispatched[0])
        traces = [r.trace for r in sorted(by_hash.get(own, []), key=_mean)]
        like = by_signature.get(json.dumps(signature(mod)), {})
        others = [sorted(rs, key=_mean) for h, rs in like.items() if h != own]
        for rank in range(max((len(rs) for rs in others), default=0)):
            traces += [rs[rank].trace for rs in others if rank < len(rs)]
        if traces:
            out[task.task_name] = traces[:per_task]
    return out


def reapply(trace, mod, postprocs, seed: int | None = None):
    """`trace` replayed on `mod` (tile sizes that do not fit drawn afresh), postprocessed: a Schedule, or None."""
    from tvm.s_tir import Schedule

    sch = Schedule(mod, seed=seed if seed and seed > 0 else None)

    def fitting(inst, inputs, _attrs, decision):
        if inst.kind.name == "SamplePerfectTile" and decision is not None:
            extent = sch.get(inputs[0]).extent
            if not hasattr(extent, "value") or math.prod(int(d) for d in decision) != int(extent.value):
                return None  # drawn afresh for this shape
        return decision

    try:
        trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=fitting)
        # The mark MetaSchedule puts before postprocessing: the measured record's trace keeps it, so that the
        # evolution, replaying the record from the database without its postprocessing, can postprocess it again.
        # Without it, a CUDA record's RewriteCooperativeFetch steps replay too and the postprocessor then fails
        # the whole search ("Cannot find annotation key: meta_schedule.cooperative_fetch").
        sch.enter_postproc()
        if not all(p.apply(sch) for p in postprocs):
            return None
    except Exception:  # noqa: BLE001 - a trace that does not fit this workload
        return None
    return sch
