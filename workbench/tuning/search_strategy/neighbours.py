"""`Neighbours`: a search strategy that, when its task's search stalls, measures the neighbours of the task's best
schedule (coordinate descent around it) on the run's own builders and runners.

TVM's in-tree post-optimisation (`meta_schedule.post_optimization`, Droplet) does a similar descent after tuning,
but with a LocalBuilder and LocalRunner of its own (it cannot use a run's RPC servers or slices) and with tile
factors replaced by powers of two, which breaks `SamplePerfectTile`'s product. Here a neighbour differs from the
best trace in one decision: a prime factor moved from one tile level to another (the product, the loop's extent,
kept; the innermost factor within the rule's limit), or another choice of a `SampleCategorical` (unroll depth,
vector width). Neighbours are replayed on the task, postprocessed, ranked by the run's cost model, and the best
unmeasured ones make one batch.
"""
from __future__ import annotations

import logging
import random
from typing import Any

from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy
from tvm_ffi import structural_hash

REPLAYED = 96  # neighbours replayed and scored per batch, at most: each replay costs milliseconds of a core
IMPROVED = 0.99  # a batch improved the best when it found a time below this share of it
logger = logging.getLogger("workbench.tuning.neighbours")


def _primes(n: int) -> set[int]:
    out, p = set(), 2
    while p * p <= n:
        while n % p == 0:
            out.add(p)
            n //= p
        p += 1
    return out | ({n} if n > 1 else set())


def neighbour_traces(trace: Any) -> list[Any]:
    """Every trace that differs from `trace` in one decision by one step (see the module's docstring)."""
    out = []
    for inst, decision in trace.decisions.items():
        kind = inst.kind.name
        if kind == "SamplePerfectTile":
            factors = [int(d) for d in decision]
            max_innermost = int(inst.attrs[1])
            for i, factor in enumerate(factors):
                for p in sorted(_primes(factor)):
                    for j in range(len(factors)):
                        if j == i:
                            continue
                        moved = list(factors)
                        moved[i] //= p
                        moved[j] *= p
                        if max_innermost > 0 and moved[-1] > max_innermost:
                            continue
                        out.append(trace.with_decision(inst, moved, remove_postproc=True))
        elif kind == "SampleCategorical":
            for k in range(len(inst.attrs[0])):
                if k != int(decision):
                    out.append(trace.with_decision(inst, k, remove_postproc=True))
    return out


def _record_mean(record: Any) -> float:
    return sum(float(s) for s in record.run_secs) / len(record.run_secs)


def _mean_s(result: Any) -> float | None:
    if result.error_msg is not None or not result.run_secs:
        return None
    return sum(float(s) for s in result.run_secs) / len(result.run_secs)


@derived_object
class Neighbours(PySearchStrategy):
    """The wrapped strategy, except that after a batch of it that did not improve the task's best time, the next
    batch is the best schedule's neighbours; while neighbours improve it, the descent goes on from the new best,
    otherwise the wrapped strategy takes the next batch. Neighbour batches count in the wrapped strategy's budget
    (it is told their results), and their schedules are kept out of its later batches, so none is measured twice."""

    def __init__(self, inner: Any, seed: int = 0) -> None:
        self.inner_given = inner
        self.inner = ms.search_strategy.SearchStrategy.create(inner) if isinstance(inner, str) else inner
        self.seed = seed
        self.rng = random.Random(seed)
        self.context = None
        self.postprocs: list = []
        self.database = None
        self.cost_model = None
        self.per_batch = 0
        self.left = 0
        self.best = float("inf")
        self.due = False
        self.active: Any = None
        self.seen: set[int] = set()  # structural hashes of every schedule measured for the task
        self.offered: set[int] = set()  # those the neighbour batches measured

    def _initialize_with_tune_context(self, context) -> None:
        self.context = context
        self.postprocs = list(context.space_generator.postprocs or [])
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        self.database, self.cost_model = database, cost_model
        self.per_batch, self.left = num_trials_per_iter, max_trials
        best = self._best_record()
        self.best = _record_mean(best) if best is not None else float("inf")
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def _best_record(self) -> Any:
        mod = self.context.mod
        if self.database is None or not self.database.has_workload(mod):
            return None
        top = self.database.get_top_k(self.database.commit_workload(mod), 1)
        return top[0] if top else None

    def _neighbour_batch(self) -> list:
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        from workbench.tuning.transfer import reapply

        best = self._best_record()
        if best is None:
            return []
        traces = neighbour_traces(best.trace)
        self.rng.shuffle(traces)
        schedules, hashes = [], set()
        for trace in traces:
            if len(schedules) >= REPLAYED:
                break
            sch = reapply(trace, self.context.mod, self.postprocs)
            if sch is None:
                continue
            h = structural_hash(sch.mod)
            if h in self.seen or h in hashes:
                continue
            hashes.add(h)
            schedules.append(sch)
        candidates = [ms.MeasureCandidate(s, ArgInfo.from_entry_func(s.mod, remove_preproc=True))
                      for s in schedules]
        if self.cost_model is not None and len(candidates) > self.per_batch:
            scores = self.cost_model.predict(self.context, candidates)
            order = sorted(range(len(candidates)), key=lambda i: -float(scores[i]))
            candidates = [candidates[i] for i in order]
        batch = candidates[:min(self.per_batch, self.left)]
        logger.info("%s: %d neighbours of the best (%.4g ms) measured, of %d replayed", self.context.task_name,
                    len(batch), self.best * 1e3, len(candidates))
        return batch

    def generate_measure_candidates(self):
        if self.left <= 0:
            return None
        if self.due:
            self.due = False
            batch = self._neighbour_batch()
            if batch:
                self.active = "neighbours"
                self.offered |= {structural_hash(c.sch.mod) for c in batch}
                return batch
        self.active = self.inner
        candidates = self.inner.generate_measure_candidates()
        if candidates is None or not self.offered:
            return candidates
        return [c for c in candidates if structural_hash(c.sch.mod) not in self.offered]

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.inner.notify_runner_results(measure_candidates, results)  # counts every batch in its budget
        self.left -= len(results)
        self.seen |= {structural_hash(c.sch.mod) for c in measure_candidates}
        times = [t for t in (_mean_s(r) for r in results) if t is not None]
        improved = bool(times) and min(times) < self.best * IMPROVED
        self.best = min([self.best, *times])
        # a search batch that stalled hands over to the descent; a descent goes on while it improves
        self.due = improved if self.active == "neighbours" else not improved

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def clone(self) -> Neighbours:
        inner = self.inner.clone() if not isinstance(self.inner_given, str) else self.inner_given
        return Neighbours(inner, self.seed)
