"""Task extraction and cost-balanced sharding of a model's tuning tasks."""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from .spec import SpecError


@dataclass(frozen=True)
class TaskInfo:
    name: str
    weight: int
    flops: float
    bytes: float

    @property
    def cost(self) -> float:
        """Estimated cost: FLOPs x weight; data-movement tasks (0 FLOPs) count their bytes."""
        return self.weight * max(self.flops, self.bytes / 4.0, 1.0)


MAX_REPLICAS = 8  # search replicas per task, when there are more shards than tasks


@dataclass(frozen=True)
class Shard:
    """A client's share: its tasks and trials. `replica` > 0 marks an extra, independently seeded
    search of tasks that another shard also tunes (more clients than tasks)."""

    index: int
    tasks: tuple[str, ...]
    trials: int
    cost: float
    replica: int = 0

    def to_dict(self) -> dict:
        return {"index": self.index, "tasks": list(self.tasks), "trials": self.trials, "cost": self.cost,
                "replica": self.replica}

    @classmethod
    def from_dict(cls, d: dict) -> "Shard":
        return cls(int(d["index"]), tuple(d["tasks"]), int(d["trials"]), float(d["cost"]), int(d.get("replica", 0)))


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
    nbytes = 0.0
    for f in func.functions.values():
        for buf in getattr(f, "buffer_map", {}).values():
            n = 1
            for dim in buf.shape:
                n *= int(dim) if hasattr(dim, "value") or isinstance(dim, int) else 1
            nbytes += n * (int(buf.dtype.bits) // 8 if hasattr(buf.dtype, "bits") else 4)
    return TaskInfo(task.task_name, int(task.weight), flops, nbytes)


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


def plan_shards(tasks: list[TaskInfo], k: int, trials: int, per_task: int = 1) -> list[Shard]:
    """Split the tasks into k shards, then the trial budget by cost share.

    Up to one shard per task: greedy longest-processing-time bins. Beyond that, the costliest tasks
    (by cost per replica) get search replicas, one shard each: a replica is its own seeded search of
    the task with a share of its trials, and merging keeps the best record of all replicas. That
    lets more clients than tasks work at once (a 2-task model on 16 cores).

    Every shard gets at least `per_task` trials per task (one measured batch each): MetaSchedule stops
    at a shard's budget even in its first round, so a smaller share would leave tasks untuned (seen on
    the H200 with ResNet-18 in 8 shards). The total grows to those floors when `trials` is below them."""
    n, batch = len(tasks), max(1, per_task)
    most = max(n, min(MAX_REPLICAS * n, trials // batch))
    if not 1 <= k <= most:
        raise SpecError("shards", f"must be from 1 to {most}, got {k}: up to the model's task count ({n}), "
                                  f"and beyond it search replicas of its tasks, each with at least one batch "
                                  f"({batch} trials) of the {trials} and at most {MAX_REPLICAS} per task")
    if k > len(tasks):
        return _replica_shards(tasks, k, trials, per_task)
    bins: list[tuple[float, int, list[TaskInfo]]] = [(0.0, i, []) for i in range(k)]
    heapq.heapify(bins)
    for task in sorted(tasks, key=lambda t: (-t.cost, t.name)):
        cost, i, members = heapq.heappop(bins)
        members.append(task)
        heapq.heappush(bins, (cost + task.cost, i, members))
    ordered = sorted(bins, key=lambda b: b[1])
    budgets = split_budget(trials, [b[0] for b in ordered], [max(1, per_task * len(b[2])) for b in ordered])
    return [Shard(i, tuple(sorted(t.name for t in members)), budget, cost)
            for (cost, i, members), budget in zip(ordered, budgets)]


def _replica_shards(tasks: list[TaskInfo], k: int, trials: int, per_task: int) -> list[Shard]:
    """One shard per (task, replica); replicas go one at a time to the task with the most cost per replica."""
    ordered = sorted(tasks, key=lambda t: (-t.cost, t.name))
    replicas = {t.name: 1 for t in ordered}
    for _ in range(k - len(tasks)):
        top = max(ordered, key=lambda t: t.cost / replicas[t.name])  # ties: the first, i.e. costlier by order
        replicas[top.name] += 1
    units = [(t, r) for t in ordered for r in range(replicas[t.name])]
    costs = [t.cost / replicas[t.name] for t, _ in units]
    budgets = split_budget(trials, costs, [max(1, per_task)] * len(units))
    return [Shard(i, (t.name,), budget, cost, replica=r)
            for i, ((t, r), budget, cost) in enumerate(zip(units, budgets, costs))]
