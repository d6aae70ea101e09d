"""`RandomFirstRound`: TVM's evolutionary search with a task's first batch drawn at random."""
from __future__ import annotations

from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy
from tvm_ffi import structural_hash


@derived_object
class RandomFirstRound(PySearchStrategy):
    """TVM's EvolutionarySearch, except a task's first batch, while nothing of it is measured, is random.

    Until the XGB cost model holds 100 measurements (`num_warmup_samples`) it scores candidates with
    uniform noise, so evolving 512 schedules for 4 generations against that score (seconds of CPU per
    batch) ends in a random pick anyway. The first batch is drawn the way
    `ReplayTrace` draws (fresh random decisions, same postprocessors); the evolutionary search is told
    its results and runs every later batch unchanged. A task with records (a resume) skips the shortcut.
    The evolution keeps out of its batches only what it picked itself, so the random batch's schedules
    (which it sees again among the database's best) are dropped from its batches here: no schedule is
    measured twice, as with TVM's evolution alone (tests/test_first_round.py).
    """

    def __init__(self, **evolutionary_kwargs) -> None:
        self.kwargs = evolutionary_kwargs
        self.evo = ms.search_strategy.EvolutionarySearch(**evolutionary_kwargs)
        self.replay = ms.search_strategy.ReplayTrace()
        self.mod = None
        self.first_pending = False
        self.active = None
        self.drawn: set[int] = set()  # structural hashes of the random batch's schedules

    def _initialize_with_tune_context(self, context) -> None:
        self.mod = context.mod
        self.evo._initialize_with_tune_context(context)
        self.replay._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        measured = database is not None and database.has_workload(self.mod) and \
            len(database.get_top_k(database.commit_workload(self.mod), 1)) > 0
        self.first_pending = not measured and max_trials > 0
        if self.first_pending:
            self.replay.pre_tuning(min(num_trials_per_iter, max_trials), num_trials_per_iter, design_spaces,
                                   database, cost_model)
        self.evo.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def generate_measure_candidates(self):
        if self.first_pending:
            candidates = self.replay.generate_measure_candidates()
            if candidates is not None:
                self.active = self.replay
                return candidates
            self.first_pending = False
        self.active = self.evo
        candidates = self.evo.generate_measure_candidates()
        if candidates is None or not self.drawn:
            return candidates
        return [c for c in candidates if structural_hash(c.sch.mod) not in self.drawn]

    def notify_runner_results(self, measure_candidates, results) -> None:
        if self.active is self.replay:
            self.replay.notify_runner_results(measure_candidates, results)
            self.first_pending = False
            self.drawn = {structural_hash(c.sch.mod) for c in measure_candidates}
        self.evo.notify_runner_results(measure_candidates, results)  # counts the random batch in its budget

    def post_tuning(self) -> None:
        self.evo.post_tuning()

    def clone(self) -> RandomFirstRound:
        return RandomFirstRound(**self.kwargs)
