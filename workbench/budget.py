"""What a trial budget buys: which tasks get tuned, how many trials each slice measures, and why.

`trials` is what gets measured per tuning slice (give or take one batch). A model with more tasks than
the budget has batches for is tuned where its time goes: its tasks ranked by their estimated share of
the model's run time (FLOPs x weight; bytes for data movement), the costliest tuned, the rest left on
their default schedule. The plan says so before anything starts.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from .shards import TaskInfo, check_shards
from .spec import SpecError, TuneSpec

SELECTION = "estimated cost (FLOPs x weight; bytes for data movement)"


@dataclass(frozen=True)
class Budget:
    """The plan's budget of one tuning slice."""

    trials: int  # measured per tuning slice (the last batch of one shard may run over by less than a batch)
    batch: int  # candidates per measured batch
    batch_asked: int  # the batch size asked for (larger than `batch` when the budget is below a batch per shard)
    trials_per_task: int | None  # cap per task, when the user thinks per task
    tuned: tuple[str, ...]  # tasks that get tuned, costliest first
    default: tuple[str, ...]  # tasks left on their default schedule (outside the budget)
    tuned_cost_share: float  # the tuned tasks' share of the model's estimated cost
    asked: int | None  # the trials the user gave (None: derived)
    selection: str = SELECTION

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(tuned=list(self.tuned), default=list(self.default), tasks_total=len(self.tuned) + len(self.default),
                 tasks_tuned=len(self.tuned), tasks_default=len(self.default))
        return d


def describe(budget: dict) -> str:
    """One line for the CLI and the panel, from a plan's `budget`."""
    default, n = budget["tasks_default"], budget["tasks_total"]
    share = budget.get("tuned_cost_share")
    cost = f": {100 * (1 - share):.0f} % of the estimated cost" if share is not None else ""
    rest = f"; the other {default} keep their default schedule (outside the budget{cost})" if default else ""
    cap = f", at most {budget['trials_per_task']} per task" if budget.get("trials_per_task") else ""
    asked = budget.get("batch_asked", budget["batch"])
    smaller = f" (not {asked}: the budget is below a batch per shard)" if budget["batch"] < asked else ""
    return (f"tuning {budget['tasks_tuned']} of {n} tasks with {budget['trials']} trials per slice in batches of "
            f"{budget['batch']}{smaller}{cap}{rest}")


def plan_budget(tasks: list[TaskInfo], spec: TuneSpec) -> Budget:
    """Choose the tasks to tune and the trials to measure; SpecError when the budget buys nothing useful."""
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
    n_tuned = min(n, trials // batch)
    if per_task:
        n_tuned = max(n_tuned, min(n, -(-trials // per_task)))
    tuned, default = ranked[:n_tuned], ranked[n_tuned:]
    total_cost = sum(t.cost for t in ranked) or 1.0
    return Budget(trials=trials, batch=batch, batch_asked=asked, trials_per_task=per_task, tuned=tuple(t.name for t in tuned),
                  default=tuple(t.name for t in default),
                  tuned_cost_share=round(sum(t.cost for t in tuned) / total_cost, 4), asked=spec.trials)
