"""`FromRelated`: a search strategy whose task's first batch re-applies schedules found elsewhere
(`tuning.transfer`), then hands over to the strategy it wraps."""
from __future__ import annotations

from typing import Any

from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy
from tvm_ffi import structural_hash


@derived_object
class FromRelated(PySearchStrategy):
    """The wrapped strategy, except that a task with no record yet first measures the traces `traces` holds for its
    workload ({workload hash: traces}, `transfer.related_traces`), re-applied to its shapes: one batch of those that
    re-apply, distinct. The wrapped strategy is told their results (they count in its budget, and an evolution then
    starts from the best of them in the database); a task with records (seeded from the memory, or resumed) skips
    the shortcut. As with `RandomFirstRound`, the batch's schedules are kept out of the wrapped strategy's later
    batches, so that none is measured twice."""

    def __init__(self, inner: Any, traces: dict[str, list[Any]]) -> None:
        self.inner_given = inner
        self.inner = ms.search_strategy.SearchStrategy.create(inner) if isinstance(inner, str) else inner
        self.traces = traces
        self.mod = None
        self.postprocs: list = []
        self.pending: list = []
        self.active = None
        self.offered: set[int] = set()  # structural hashes of the re-applied batch's schedules

    def _initialize_with_tune_context(self, context) -> None:
        self.mod = context.mod
        self.postprocs = list(context.space_generator.postprocs or [])
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        from workbench.runs.memory import workload_hash
        from workbench.tuning.transfer import reapply

        measured = database is not None and database.has_workload(self.mod) and \
            len(database.get_top_k(database.commit_workload(self.mod), 1)) > 0
        self.pending = []
        if not measured and max_trials > 0:
            for trace in self.traces.get(workload_hash(self.mod), []):
                sch = reapply(trace, self.mod, self.postprocs)
                if sch is not None and structural_hash(sch.mod) not in {structural_hash(s.mod) for s in self.pending}:
                    self.pending.append(sch)
                if len(self.pending) >= min(num_trials_per_iter, max_trials):
                    break
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def generate_measure_candidates(self):
        if self.pending:
            from tvm.s_tir.meta_schedule.arg_info import ArgInfo

            batch, self.pending = self.pending, []
            self.active = "related"
            self.offered = {structural_hash(s.mod) for s in batch}
            return [ms.MeasureCandidate(s, ArgInfo.from_entry_func(s.mod, remove_preproc=True)) for s in batch]
        self.active = self.inner
        candidates = self.inner.generate_measure_candidates()
        if candidates is None or not self.offered:
            return candidates
        return [c for c in candidates if structural_hash(c.sch.mod) not in self.offered]

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.inner.notify_runner_results(measure_candidates, results)  # counts the batch in its budget

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def clone(self) -> FromRelated:
        return FromRelated(self.inner.clone(), self.traces)
