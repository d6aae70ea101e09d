"""`Budgeted`: a shard's search strategy held to the shard's trial budget exactly."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy


@dataclass
class ShardBudget:
    """The trials a shard may still send, shared by its tasks' strategies (None: not set yet, no limit)."""

    left: int | None = None


@derived_object
class Budgeted(PySearchStrategy):
    """The wrapped strategy, its batches cut to what the shard's budget has left.

    TVM's task loop stops sending once the trials sent reach the global budget, so it holds the budget exactly only
    while every batch is `num_trials_per_iter` long. A shorter batch (a first batch of related schedules, a batch of
    neighbours, an evolution's batch less the schedules another round measured) shifts the later ones, and the last
    batch passes the budget (8 trials asked, 10 measured). Every clone of one shard's strategy shares `budget`, and a
    batch is counted when it is generated: TVM generates one batch at a time, so the count is exact whether or not
    batches are joined before the next is generated."""

    def __init__(self, inner: Any, budget: ShardBudget) -> None:
        self.inner_given = inner
        self.inner = ms.search_strategy.SearchStrategy.create(inner) if isinstance(inner, str) else inner
        self.budget = budget

    def _initialize_with_tune_context(self, context) -> None:
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def generate_measure_candidates(self):
        left = self.budget.left
        if left is not None and left <= 0:
            return None
        candidates = self.inner.generate_measure_candidates()
        if candidates is None or left is None:
            return candidates
        candidates = list(candidates)[:left]
        self.budget.left = left - len(candidates)
        return candidates

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.inner.notify_runner_results(measure_candidates, results)

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def clone(self) -> Budgeted:
        inner = self.inner.clone() if not isinstance(self.inner_given, str) else self.inner_given
        return Budgeted(inner, self.budget)
