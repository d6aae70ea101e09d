"""Cost-model plug-ins: what scores candidates before they are measured.

`create(kind, threads)` takes a name of `workbench.options.COST_MODELS` or a MetaSchedule cost model (returned as it
is); `warm` teaches one a stage's records."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.options import COST_MODELS, check


def create(kind: Any, threads: int = 1) -> Any:
    """TVM's XGBoost model on `threads` cores ('xgb'), or TVM's random scores ('random', by name)."""
    if not isinstance(kind, str):
        return kind
    check("cost_model", kind, COST_MODELS)
    if kind == "random":
        return kind
    from tvm.s_tir import meta_schedule as ms

    return ms.cost_model.CostModel.create("xgb", num_tuning_cores=threads)


def warm(cost_model, database, contexts, siblings: Sequence[str] = ()) -> tuple[int, int]:
    """Teach a fresh cost model the stage's records before the first batch: the shard's own, then those in its
    sibling shards' databases (`siblings`: their folders), as the one model of an unsharded tune would hold them.
    Returns how many it learned of each.

    `tune_tasks` starts its cost model empty, and TVM's XGBoost model predicts at random until it holds 100 samples:
    a raised budget would search its first batches as if nothing had been measured."""
    from tvm.s_tir import meta_schedule as ms
    from tvm_ffi import structural_hash

    own = sum(_learn(cost_model, ctx, database, ctx.mod) for ctx in contexts if database.has_workload(ctx.mod))
    other = 0
    for folder in siblings if contexts else ():  # a sibling's tasks are learned under this shard's target
        try:  # read as it is now: a sibling that is writing a line may leave it torn; it is skipped then
            db = ms.database.JSONDatabase(work_dir=folder, allow_missing=False)
            mods = {structural_hash(r.workload.mod): r.workload.mod for r in db.get_all_tuning_records()}
        except Exception:  # noqa: BLE001 - no database yet, or one cut mid-write
            continue
        for mod in mods.values():
            ctx = ms.TuneContext(mod=mod, target=contexts[0].target, num_threads=contexts[0].num_threads)
            other += _learn(cost_model, ctx, db, mod)
    return own, other


def _learn(cost_model, ctx, database, mod) -> int:
    """Update `cost_model` with the valid records of `mod` in `database`, under `ctx` (its group); how many."""
    from tvm.s_tir import meta_schedule as ms

    records = database.get_top_k(database.commit_workload(mod), 100000)
    try:
        cost_model.update(ctx, [r.as_measure_candidate() for r in records],
                          [ms.runner.RunnerResult(run_secs=r.run_secs, error_msg=None) for r in records])
    except Exception:  # noqa: BLE001 - a record it cannot replay: the search goes on, as TVM's would, without
        return 0
    return len(records)
