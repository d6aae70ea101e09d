"""What a trial budget buys: which tasks get tuned, how many trials each slice measures, and why.

`trials` is what gets measured per tuning slice (give or take one batch). A model with more tasks than
the budget has batches for is tuned where its time goes: its tasks ranked by their share of the model's run time,
the costliest tuned, the rest left on their default schedule. Before any process starts that share is estimated
(FLOPs x weight; bytes for data movement); once the first stage has timed every task's default schedule, before
any trial, the run is planned again by the measured time (default time x weight: `plan.replan`), because the
estimate can be far off (a detector's estimate-ranked plan tuned 12 % of its measured time). The plan says so.
Where the tuning memory holds every task's default time (timed by earlier runs here), the launcher plans by those.

On CUDA a batch goes where it is worth most: a costly task's second or third batch before a cheap task's first,
since a task's later batches save less than its first (`LATER_BATCH_WORTH`, measured on a GPU: docs/benchmarks.md).
Elsewhere (CPUs, where no such data exist) every tuned task gets a batch before any gets a second.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import asdict, dataclass

from workbench.plan.tasks import TaskInfo, check_shards
from workbench.spec import SpecError, TuneSpec

SELECTION = "estimated cost (FLOPs x weight; bytes for data movement)"
MEASURED = "measured time (default schedule's time x weight)"
# A task's k-th batch (k = 1, 2, 3, 4): the share of its first batch's saving it adds, as measured over GPU searches
# with at least k batches (docs/benchmarks.md); beyond the fourth (not measured) taken to fall as 1 / k.
LATER_BATCH_WORTH = (1.0, 0.55, 0.4, 0.25)


def batches_by_worth(target_kind: str | None) -> bool:
    """Whether a run on `target_kind` spends its batches by worth (the plan's choice of tasks, and the clients' order of
    batches: `tuning.task_scheduler.streaming`): on CUDA, where LATER_BATCH_WORTH was measured."""
    return target_kind == "cuda"


def batch_worth(k: int) -> float:
    """What a task's k-th batch (k >= 1) is worth, as a share of its first's."""
    return LATER_BATCH_WORTH[k - 1] if k <= len(LATER_BATCH_WORTH) else 1.0 / k


XGB_WARMUP = 100  # TVM's XGBModel scores candidates at random until it holds this many samples (num_warmup_samples)


def cost_model_note(spec: TuneSpec, shard_trials: list[int]) -> str | None:
    """What the plan says when shards measure too few trials for their XGBoost cost model to leave its random
    warm-up (each shard client has its own model, and a fresh one): None when every shard's search is guided by it."""
    if spec.cost_model != "xgb" or spec.strategy == "replay-trace":
        return None
    low = [t for t in shard_trials if t < XGB_WARMUP]
    if not low:
        return None
    each = f"{min(low)}-{max(low)} each" if min(low) != max(low) else f"{low[0]}" + (" each" if len(low) > 1 else "")
    which = f"{len(low)} of {len(shard_trials)} shards measure" if len(shard_trials) > 1 else "the shard measures"
    fix = "more trials, or fewer shards," if len(shard_trials) > 1 else "more trials"
    return (f"{which} fewer than {XGB_WARMUP} trials ({each}): TVM's XGBoost cost model scores candidates at random "
            f"until its client has measured {XGB_WARMUP}, so that search is not guided by it ({fix} would let it "
            "guide)")


@dataclass(frozen=True)
class Budget:
    """The plan's budget of one tuning slice."""

    trials: int  # measured per tuning slice (the last batch of one shard may run over by less than a batch)
    batch: int  # candidates per measured batch
    batch_asked: int  # the batch size asked for (larger than `batch` when the budget is below a batch per shard)
    trials_per_task: int | None  # cap per task, when the user thinks per task
    tuned: tuple[str, ...]  # tasks that get tuned, costliest first
    default: tuple[str, ...]  # tasks left on their default schedule (outside the budget)
    tuned_cost_share: float | None  # the tuned tasks' share of the model's cost as `selection` ranks it
    asked: int | None  # the trials the user gave (None: derived)
    selection: str = SELECTION
    later_batches: tuple[float, ...] | None = None  # LATER_BATCH_WORTH where batches go by worth, else None

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(tuned=list(self.tuned), default=list(self.default), tasks_total=len(self.tuned) + len(self.default),
                 tasks_tuned=len(self.tuned), tasks_default=len(self.default),
                 later_batches=list(self.later_batches) if self.later_batches else None)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Budget:
        """What `to_dict` wrote (its counts are derived, so they are not read back)."""
        later = d.get("later_batches")
        return cls(trials=int(d["trials"]), batch=int(d["batch"]), batch_asked=int(d.get("batch_asked", d["batch"])),
                   trials_per_task=d.get("trials_per_task"), tuned=tuple(d.get("tuned") or ()),
                   default=tuple(d.get("default") or ()), tuned_cost_share=d.get("tuned_cost_share"),
                   asked=d.get("asked"), selection=d.get("selection", SELECTION),
                   later_batches=tuple(later) if later else None)

    @property
    def tasks_tuned(self) -> int:
        return len(self.tuned)

    @property
    def tasks_default(self) -> int:
        return len(self.default)

    @property
    def tasks_total(self) -> int:
        return len(self.tuned) + len(self.default)


def describe(budget: Budget | dict) -> str:
    """One line for the CLI and the panel, from a plan's `budget`."""
    if isinstance(budget, Budget):
        budget = budget.to_dict()
    default, n = budget["tasks_default"], budget["tasks_total"]
    share = budget.get("tuned_cost_share")
    of = "the measured time" if budget.get("selection") == MEASURED else "the estimated cost"
    covers = f" ({share:.0%} of {of})" if share is not None and default else ""
    rest = f"; the other {default} keep their default schedule" if default else ""
    cap = f", at most {budget['trials_per_task']} per task" if budget.get("trials_per_task") else ""
    asked = budget.get("batch_asked", budget["batch"])
    smaller = f" (not {asked}: the budget is below a batch per shard)" if budget["batch"] < asked else ""
    batches = budget["trials"] // budget["batch"]
    spread = bool(budget.get("later_batches")) and bool(default) and batches > budget["tasks_tuned"]
    worth = " (the costliest tasks' later batches before the cheapest tasks' first)" if spread else ""
    return (f"tuning {budget['tasks_tuned']} of {n} tasks{covers} with {budget['trials']} trials per slice in "
            f"batches of {budget['batch']}{smaller}{cap}{worth}{rest}")


def tasks_worth_a_batch(ranked: list[TaskInfo], batches: int, most_each: int | None = None) -> int:
    """How many of `ranked` (costliest first) get a batch when each of `batches` goes to the task where it is worth
    most: a task's k-th batch is worth its cost x `batch_worth(k)`. `most_each`: the batches a task may have (its
    trials_per_task)."""
    heap = [(-t.cost, i, 1) for i, t in enumerate(ranked)]  # (minus worth, rank, which batch of the task)
    heapq.heapify(heap)
    tuned = 0
    for _ in range(batches):
        if not heap:
            break
        _, i, k = heapq.heappop(heap)
        tuned += k == 1  # first batches leave the heap in rank order: the tuned tasks are a prefix of `ranked`
        if most_each is None or k < most_each:
            heapq.heappush(heap, (-ranked[i].cost * batch_worth(k + 1), i, k + 1))
    return tuned


def plan_budget(tasks: list[TaskInfo], spec: TuneSpec, target: str | None = None, keep: int = 0) -> Budget:
    """Choose the tasks to tune and the trials to measure; SpecError when the budget buys nothing useful.

    `target`: the target's kind ("cuda": batches go by worth); `keep`: tune at least this many (a raised run's tuned
    tasks, which hold records), where the budget has a batch for each."""
    if not tasks:
        raise SpecError("model", "the model has no tunable task")
    ranked = sorted(tasks, key=lambda t: (-t.cost, t.name))
    n = len(ranked)
    per_task = spec.trials_per_task
    trials = spec.slice_trials(n)
    if trials < spec.shards:
        raise SpecError("trials", f"must be at least the number of shards ({spec.shards}): the smallest useful "
                                  f"budget is one trial per shard, {spec.shards} trials; got {trials}")
    asked = min(spec.trials_per_batch, per_task) if per_task else spec.trials_per_batch
    batch = min(asked, trials // spec.shards)  # a budget below a batch per shard measures smaller batches
    check_shards(spec.shards, n, trials, batch)
    by_worth = batches_by_worth(target)
    if by_worth:  # at least a task per shard, as a batch per task gives
        most_each = math.ceil(per_task / batch) if per_task else None
        n_tuned = max(tasks_worth_a_batch(ranked, trials // batch, most_each), spec.shards)
        n_tuned = min(n, trials // batch, max(n_tuned, keep))
    else:
        n_tuned = min(n, trials // batch)
    if per_task:
        n_tuned = max(n_tuned, min(n, -(-trials // per_task)))
    tuned, default = ranked[:n_tuned], ranked[n_tuned:]
    total_cost = sum(t.cost for t in ranked) or 1.0
    selection = MEASURED if all(t.default_us is not None for t in ranked) else SELECTION
    return Budget(trials=trials, batch=batch, batch_asked=asked, trials_per_task=per_task,
                  tuned=tuple(t.name for t in tuned), default=tuple(t.name for t in default),
                  tuned_cost_share=round(sum(t.cost for t in tuned) / total_cost, 4), asked=spec.trials,
                  selection=selection, later_batches=LATER_BATCH_WORTH if by_worth else None)
