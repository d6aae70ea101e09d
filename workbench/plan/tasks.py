"""Task extraction and cost-balanced sharding of a model's tuning tasks."""
from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass

from workbench.spec import SpecError


@dataclass(frozen=True)
class TaskInfo:
    name: str
    weight: int
    flops: float
    bytes: float
    default_us: float | None = None  # its default schedule's measured time, once timed (`measured`)
    known_us: float | None = None  # its best time in the tuning memory, where the memory knows it: what it runs at

    @property
    def estimate(self) -> float:
        """Estimated cost: FLOPs x weight; data-movement tasks (0 FLOPs) count their bytes."""
        return self.weight * max(self.flops, self.bytes / 4.0, 1.0)

    @property
    def cost(self) -> float:
        """What ranks and balances the task: its measured time in the model once timed (default time x weight, or
        the memory's best known time where it is faster: the task runs that schedule from the start), else the
        estimate. A list of tasks is ranked by one or the other, never a mix (`measured`)."""
        if self.default_us is None:
            return self.estimate
        return self.weight * min(self.default_us, self.known_us if self.known_us is not None else self.default_us)


def measured(tasks: list[TaskInfo], defaults_us: dict[str, float | None]) -> tuple[list[TaskInfo], list[str]]:
    """`tasks` costed by their measured default time (µs), and the names of those that were not timed: each of these
    is given its estimate scaled by the timed tasks' median time per unit of estimate, so that one list is never
    ranked by a mix of both. Without any timed task, the tasks as they were."""
    timed = [t for t in tasks if defaults_us.get(t.name) is not None]
    if not timed:
        return list(tasks), [t.name for t in tasks]
    per_unit = sorted(defaults_us[t.name] / (t.estimate / t.weight) for t in timed)  # type: ignore[operator]
    scale = per_unit[len(per_unit) // 2]
    out, untimed = [], []
    for t in tasks:
        us = defaults_us.get(t.name)
        if us is None:
            untimed.append(t.name)
            us = scale * t.estimate / t.weight
        out.append(dataclasses.replace(t, default_us=float(us)))
    return out, untimed


MAX_REPLICAS = 8  # search replicas per task, when there are more shards than tasks


@dataclass(frozen=True)
class Shard:
    """A client's share: its tasks and trials. `replica` > 0 marks an extra, independently seeded
    search of tasks that another shard also tunes (more clients than tasks). `measure` names tasks the
    plan leaves on their default schedule: the client times those defaults only, for the results."""

    index: int
    tasks: tuple[str, ...]
    trials: int
    cost: float
    replica: int = 0
    measure: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"index": self.index, "tasks": list(self.tasks), "trials": self.trials, "cost": self.cost,
                "replica": self.replica, "measure": list(self.measure)}

    @classmethod
    def from_dict(cls, d: dict) -> Shard:
        return cls(int(d["index"]), tuple(d["tasks"]), int(d["trials"]), float(d["cost"]), int(d.get("replica", 0)),
                   tuple(d.get("measure", ())))


def prepare_for_tuning(mod, target):
    """Legalize and fuse the way `compile_relax` does, so database keys match at compile time."""
    import tvm
    from tvm import relax

    try:
        dispatch = list(relax.pipeline.library_dispatch_passes(target))
    except (ValueError, AttributeError):
        dispatch = []
    seq = tvm.transform.Sequential([*dispatch, relax.transform.LegalizeOps(),
                                    relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(),
                                    relax.transform.FuseOps(), relax.transform.FuseTIR()])
    with target, tvm.transform.PassContext(opt_level=3):
        return seq(mod)


def extract_tasks(mod, target) -> list:
    """MetaSchedule's extracted tasks of a prepared model, sorted by name (every process agrees)."""
    from tvm.s_tir import meta_schedule as ms

    tasks = ms.relax_integration.extract_tasks(prepare_for_tuning(mod, target), target)
    return sorted(tasks, key=lambda t: t.task_name)


def task_info(task) -> TaskInfo:
    from tvm.s_tir.analysis import estimate_tir_flops

    func = task.dispatched[0]
    try:
        flops = float(estimate_tir_flops(func))
    except Exception:  # noqa: BLE001 - some data-movement functions cannot be estimated
        flops = 0.0
    return TaskInfo(task.task_name, int(task.weight), flops, _argument_bytes(func))


def _argument_bytes(mod) -> float:
    """The bytes of a task's arguments (inputs and outputs), from MetaSchedule's ArgInfo: TIR's PrimFunc keeps its
    buffers in its parameters' types (no buffer_map), and ArgInfo reads them; a dimension that is not a number
    counts as 1."""
    import numpy as np
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    total = 0.0
    for f in mod.functions.values():
        try:
            args = ArgInfo.from_prim_func(f)
        except Exception:  # noqa: BLE001 - not a PrimFunc of buffers: no bytes to count
            continue
        for a in args:
            n = 1
            for dim in getattr(a, "shape", ()):
                n *= dim if isinstance(dim, int) else 1
            total += n * np.dtype(str(a.dtype)).itemsize
    return total


def split_budget(total: int, shares: list[float], floors: list[int]) -> list[int]:
    """Largest-remainder split of `total` by `shares`, each part at least its floor."""
    budget = max(total, sum(floors))
    s = sum(shares) or 1.0
    raw = [budget * x / s for x in shares]
    parts = [max(f, int(r)) for r, f in zip(raw, floors)]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - int(raw[i]), reverse=True)
    i = 0
    while sum(parts) < budget:
        parts[order[i % len(order)]] += 1
        i += 1
    while sum(parts) > budget:
        j = max((k for k in range(len(parts)) if parts[k] > floors[k]), key=lambda k: parts[k] - raw[k])
        parts[j] -= 1
    return parts


def split_batches(trials: int, shares: list[float], floors: list[int], batch: int) -> list[int]:
    """Split `trials` by `shares` in whole batches (each part at least `floors` batches); the remainder
    below one batch goes to the largest share, so only that shard's last batch can run over."""
    parts = [b * batch for b in split_budget(trials // batch, shares, floors)]
    parts[max(range(len(shares)), key=lambda i: shares[i])] += trials - sum(parts)
    return parts


def max_shards(n_tasks: int, trials: int, batch: int) -> int:
    """Up to one shard per task, beyond that search replicas that each measure a batch of their own."""
    return max(n_tasks, min(MAX_REPLICAS * n_tasks, trials // batch))


def check_shards(k: int, n_tasks: int, trials: int, batch: int) -> None:
    most = max_shards(n_tasks, trials, batch)
    if not 1 <= k <= most:
        raise SpecError("shards", f"must be from 1 to {most}, got {k}: up to the model's task count ({n_tasks}), "
                                  f"and beyond it search replicas of its tasks, each with at least one batch "
                                  f"({batch} trials) of the {trials} and at most {MAX_REPLICAS} per task")


def plan_shards(tasks: list[TaskInfo], k: int, trials: int, per_task: int = 1,
                defaults: list[TaskInfo] | tuple = ()) -> list[Shard]:
    """Split the tasks to tune into k shards, then the trial budget by cost share, in whole batches.

    Up to one shard per task: greedy longest-processing-time bins. Beyond that, the costliest tasks
    (by cost per replica) get search replicas, one shard each: a replica is its own seeded search of
    the task with a share of its trials, and merging keeps the best record of all replicas. That
    lets more clients than tasks work at once (a 2-task model on 16 cores).

    Every shard gets at least one batch (`per_task` trials) per task: MetaSchedule stops at a shard's
    budget even in its first round, so a smaller share would leave tasks untuned. `trials` must cover
    those floors (`budget.plan_budget` chooses the tasks so that it does). `defaults` (tasks left on
    their default schedule) are spread over the first replicas' shards, whose clients time them."""
    n, batch = len(tasks), max(1, per_task)
    check_shards(k, n, trials, batch)  # beyond n shards, that ensures a batch per replica
    if k > n:
        shards = _replica_shards(tasks, k, trials, batch)
    else:
        bins: list[tuple[float, int, list[TaskInfo]]] = [(0.0, i, []) for i in range(k)]
        heapq.heapify(bins)
        for task in sorted(tasks, key=lambda t: (-t.cost, t.name)):
            cost, i, members = heapq.heappop(bins)
            members.append(task)
            heapq.heappush(bins, (cost + task.cost, i, members))
        ordered = sorted(bins, key=lambda b: b[1])
        if trials < batch * n:
            raise SpecError("trials", f"{trials} trials cannot give each of the {n} tasks a batch of {batch}")
        budgets = split_batches(trials, [b[0] for b in ordered], [len(b[2]) for b in ordered], batch)
        shards = [Shard(i, tuple(t.name for t in members), budget, cost)  # costliest first: tuned first
                  for (cost, i, members), budget in zip(ordered, budgets)]
    return _spread_defaults(shards, list(defaults))


def raised_shards(old: list[Shard], new: list[Shard], more: int, batch: int) -> list[Shard]:
    """`new` (the raised budget's shards, same indices, each holding its `old` tasks) with each shard's budget its
    old one plus a share of the `more` trials by cost, in whole batches, at least a batch per task it gains.

    A shard's budget counts its records of every session, so splitting the whole raised budget anew would leave a
    shard that had spent over its cost share (many small tasks' first batches) with almost nothing new for its
    costly ones."""
    had = {s.index: s for s in old}
    gained = [len(set(s.tasks) - set(had[s.index].tasks)) for s in new]
    extra = split_batches(more, [s.cost for s in new], gained, batch)
    return [dataclasses.replace(s, trials=had[s.index].trials + e) for s, e in zip(new, extra)]


def _spread_defaults(shards: list[Shard], defaults: list[TaskInfo]) -> list[Shard]:
    """Hand the default-schedule tasks to the non-replica shards, fewest first, costliest task first."""
    owners = [s for s in shards if s.replica == 0]
    extra: dict[int, list[str]] = {s.index: [] for s in owners}
    for task in sorted(defaults, key=lambda t: (-t.cost, t.name)):
        least = min(owners, key=lambda s: (len(s.tasks) + len(extra[s.index]), s.index))
        extra[least.index].append(task.name)
    return [dataclasses.replace(s, measure=tuple(sorted(extra.get(s.index, [])))) for s in shards]


def _replica_shards(tasks: list[TaskInfo], k: int, trials: int, batch: int) -> list[Shard]:
    """One shard per (task, replica); replicas go one at a time to the task with the most cost per replica."""
    ordered = sorted(tasks, key=lambda t: (-t.cost, t.name))
    replicas = {t.name: 1 for t in ordered}
    for _ in range(k - len(tasks)):
        top = max(ordered, key=lambda t: t.cost / replicas[t.name])  # ties: the first, i.e. costlier by order
        replicas[top.name] += 1
    units = [(t, r) for t in ordered for r in range(replicas[t.name])]
    costs = [t.cost / replicas[t.name] for t, _ in units]
    budgets = split_batches(trials, costs, [1] * len(units), batch)
    return [Shard(i, (t.name,), budget, cost, replica=r)
            for i, ((t, r), budget, cost) in enumerate(zip(units, budgets, costs))]
