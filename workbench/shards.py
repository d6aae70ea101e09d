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


@dataclass(frozen=True)
class Shard:
    index: int
    tasks: tuple[str, ...]
    trials: int
    cost: float

    def to_dict(self) -> dict:
        return {"index": self.index, "tasks": list(self.tasks), "trials": self.trials, "cost": self.cost}

    @classmethod
    def from_dict(cls, d: dict) -> "Shard":
        return cls(int(d["index"]), tuple(d["tasks"]), int(d["trials"]), float(d["cost"]))


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
    """Greedy longest-processing-time split into k shards, then the trial budget by cost share.

    Every shard gets at least `per_task` trials per task (one measured batch each): MetaSchedule stops
    at a shard's budget even in its first round, so a smaller share would leave tasks untuned (seen on
    the H200 with ResNet-18 in 8 shards). The total grows to those floors when `trials` is below them."""
    if k > len(tasks):
        raise SpecError("shards", f"must be from 1 to the model's task count ({len(tasks)}), got {k}")
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
