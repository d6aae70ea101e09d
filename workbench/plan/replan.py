"""Planning by measured time: the tasks to tune and the shards, chosen again once every default is timed.

The launcher plans by an estimate (FLOPs x weight), since nothing can be timed before the run's processes start.
The first stage's clients time every task's default schedule before any trial (a few seconds after a server is
ready); the supervisor then makes the plan again by those times (`by_measured`) and the clients tune what it says.
A resumed or raised run keeps the measured times (`PlannedTask.default_us`), so it is planned the same way; where the
tuning memory holds every task's default time, the launcher plans by those at once (`by_measured` too) and the
supervisor has nothing to re-plan.
"""
from __future__ import annotations

import dataclasses

from workbench.plan.budget import Budget, cost_model_note, plan_budget
from workbench.plan.plan import Plan, PlannedTask
from workbench.plan.tasks import Shard, TaskInfo, measured, plan_shards
from workbench.spec import TuneSpec


def shard_plan(tasks: list[TaskInfo], spec: TuneSpec, kind: str, keep: int = 0) -> tuple[Budget, list[Shard]]:
    """The budget's choice among `tasks` (ranked by their `cost`) and the shards that tune it."""
    budget = plan_budget(tasks, spec, target=kind, keep=keep)
    return budget, shards_for(budget, tasks, spec)


def shards_for(budget: Budget, tasks: list[TaskInfo], spec: TuneSpec) -> list[Shard]:
    """The shards that tune what `budget` chose among `tasks`; the tasks it leaves on their default are timed there."""
    by_name = {t.name: t for t in tasks}
    return plan_shards([by_name[n] for n in budget.tuned], spec.shards, budget.trials, per_task=budget.batch,
                       defaults=[by_name[n] for n in budget.default])


def rows(tasks: list[TaskInfo], budget: Budget) -> tuple[PlannedTask, ...]:
    """The plan's task rows: each task with whether `budget` tunes it."""
    tuned = set(budget.tuned)
    return tuple(PlannedTask.of(t, t.name in tuned) for t in tasks)


@dataclasses.dataclass(frozen=True)
class Replanned:
    """What planning by measured time changed, for the `replanned` event and the tests."""

    plan: Plan
    estimate_share: float | None  # the share of the measured time the estimate's plan tuned
    untimed: tuple[str, ...]  # tasks whose default could not be timed (ranked by their scaled estimate)


def by_measured(plan: Plan, spec: TuneSpec, defaults_us: dict[str, float | None]) -> Replanned:
    """`plan` made again by the tasks' measured default times (µs, by task name; None: not timed), `timed`. Without
    any time, the estimate's plan stands, `timed`, with a note saying why."""
    tasks, untimed = measured([t.info for t in plan.tasks], defaults_us)
    if len(untimed) == len(tasks):
        note = "no task's default schedule could be timed: the plan stays ranked by the estimate"
        return Replanned(plan.replace(timed=True, notes=(*plan.notes, note)), None, tuple(untimed))
    total = sum(t.cost for t in tasks) or 1.0
    was = set(plan.tuned)
    estimate_share = round(sum(t.cost for t in tasks if t.name in was) / total, 4)
    budget, shards = shard_plan(tasks, spec, plan.target.kind)
    old_note = cost_model_note(spec, [s.trials for s in plan.shards])
    new_note = cost_model_note(spec, [s.trials for s in shards])
    notes = tuple(n for n in plan.notes if n != old_note) + ((new_note,) if new_note else ())
    return Replanned(plan.replace(tasks=rows(tasks, budget), budget=budget, shards=tuple(shards), notes=notes,
                                  timed=True), estimate_share, tuple(untimed))
