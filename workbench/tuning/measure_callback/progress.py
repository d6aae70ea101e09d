"""`ProgressCallback`: one `batch` event per measured batch, as soon as it is measured."""
from __future__ import annotations

import time
from collections.abc import Callable

from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from workbench.runs.event_types import Batch


def _costs(builder_results, runner_results) -> tuple[list[float | None], int, int, list[str]]:
    costs: list[float | None] = []
    build_err = run_err = 0
    errors: list[str] = []
    for br, rr in zip(builder_results, runner_results):
        if br.error_msg:
            build_err += 1
            costs.append(None)
            errors.append("build: " + br.error_msg.strip().splitlines()[-1][:200])
        elif rr.error_msg:
            run_err += 1
            costs.append(None)
            errors.append("run: " + rr.error_msg.strip().splitlines()[-1][:200])
        else:
            secs = [float(v) for v in rr.run_secs]
            costs.append(sum(secs) / len(secs))
    return costs, build_err, run_err, errors


@derived_object
class ProgressCallback(ms.measure_callback.PyMeasureCallback):
    """Emits one `batch` event per measured batch (after the defaults committed it to the database)."""

    def __init__(self, emit: Callable[[Batch], object], shard: int, tuned_at: int, shard_trial_budget: int,
                 trials_offset: dict[str, int] | None = None, best_offset: dict[str, float] | None = None,
                 builder: object | None = None, runner: object | None = None) -> None:
        self.emit = emit
        self.builder = builder  # a PersistentBuilder's timings of the batch go into its event
        self.runner = runner  # and a SessionBatchRunner's
        self.shard = shard
        self.tuned_at = tuned_at
        self.shard_trial_budget = shard_trial_budget
        self.trials: dict[str, int] = dict(trials_offset or {})
        self.best: dict[str, float] = dict(best_offset or {})
        self.weights: dict[str, float] = {}
        self.build_errors: dict[str, int] = {}
        self.run_errors: dict[str, int] = {}
        self.t0 = time.time()
        self.last = self.t0  # when the last batch's event went out (the client resets it as tuning starts)

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
        rec = task_scheduler.tasks_[task_id]
        name, flop = rec.ctx.task_name, float(rec.flop)
        self.weights[name] = float(rec.task_weight)
        costs, build_err, run_err, errors = _costs(builder_results, runner_results)
        ok = [c for c in costs if c is not None]
        if ok:
            self.best[name] = min(ok + ([self.best[name]] if name in self.best else []))
        self.trials[name] = self.trials.get(name, 0) + len(measure_candidates)
        self.build_errors[name] = self.build_errors.get(name, 0) + build_err
        self.run_errors[name] = self.run_errors.get(name, 0) + run_err
        best = self.best.get(name)
        est = sum(self.weights.get(n, 1.0) * b for n, b in self.best.items())
        timings = {k: v for part in (self.builder, self.runner) if hasattr(part, "batch_timings")
                   for k, v in part.batch_timings(builder_results).items()}
        started, now = timings.pop("build_started", None), time.time()
        if started is not None:  # the scheduler joins each batch before the next search: the gaps are sequential
            timings["search_s"] = round(started - self.last, 3)
            timings["measure_s"] = round(max(0.0, now - started - timings.get("build_s", 0.0)), 3)
        self.emit(Batch(shard=self.shard, tuned_at=self.tuned_at, task=name, task_id=int(task_id),
                        weight=self.weights[name], flop=flop, batch_size=len(measure_candidates),
                        task_trials=self.trials[name], shard_trial_budget=self.shard_trial_budget,
                        shard_trials=sum(self.trials.values()),
                        latest_us=[None if c is None else round(c * 1e6, 3) for c in costs],
                        best_us=None if best is None else round(best * 1e6, 3),
                        best_gflops=None if not best else round(flop / best / 1e9, 3),
                        build_errors=self.build_errors[name], run_errors=self.run_errors[name],
                        errors=errors[:2], est_shard_us=round(est * 1e6, 3),
                        shard_tasks_measured=len(self.best), shard_tasks=len(task_scheduler.tasks_), **timings))
        self.last = time.time()
