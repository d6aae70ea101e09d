"""`Guarded`: a task whose search raises stops there, instead of ending its shard's other tasks with it."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy

from workbench.errors import last_line


@derived_object
class Guarded(PySearchStrategy):
    """The wrapped strategy, except that an exception from its search ends the task, not the shard.

    TVM's task loop calls each task's strategy in turn, so one task's failing search (a MetaSchedule check failing
    on a schedule it replays) used to exit the client and stop every task of the shard. Here the task answers "no
    more candidates", which TVM's loop takes as the task being done; what it measured stays in the database, so
    the finisher still uses its best. `on_failure(task, reason)` is told once per task."""

    def __init__(self, inner: Any, on_failure: Callable[[str, str], None]) -> None:
        self.inner_given = inner
        self.inner = ms.search_strategy.SearchStrategy.create(inner) if isinstance(inner, str) else inner
        self.on_failure = on_failure
        self.task = ""
        self.failed = False

    def _initialize_with_tune_context(self, context) -> None:
        self.task = str(context.task_name)
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def generate_measure_candidates(self):
        if self.failed:
            return None
        try:
            return self.inner.generate_measure_candidates()
        except Exception as err:  # noqa: BLE001 - any failure of this task's search: the task stops, not the shard
            self.failed = True
            self.on_failure(self.task, last_line(err))
            return None

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.inner.notify_runner_results(measure_candidates, results)

    def post_tuning(self) -> None:
        try:
            self.inner.post_tuning()
        except Exception:  # noqa: BLE001 - a failed search's clean-up may fail as it did; already reported
            if not self.failed:
                raise

    def clone(self) -> Guarded:
        inner = self.inner.clone() if not isinstance(self.inner_given, str) else self.inner_given
        return Guarded(inner, self.on_failure)
