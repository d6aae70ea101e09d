"""`Plan`: what a run will do, decided before any process starts, frozen.

The launcher makes it (`orchestrate.launch.plan_run`), the run folder's owner writes it as plan.json and reads it
back (`runs.store.RunDir.write_plan` / `read_plan`), and every process of the run and every view reads it typed.
Its JSON is the file format of plan.json; `from_dict` reads what `to_dict` writes, older folders' plans included.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workbench.hardware import TargetSpec
from workbench.options import ENGINE, EngineOptions
from workbench.plan.budget import Budget
from workbench.plan.tasks import Shard, TaskInfo


@dataclass(frozen=True)
class PlannedTask:
    """One of the model's tuning tasks as the plan sees it: its estimate and whether it gets tuned."""

    name: str
    weight: int
    flops: float
    bytes: float
    cost: float  # what ranked it: its measured time in the model (default_us x weight) once timed, else the estimate
    plan: str  # "tune" | "default" (outside the budget)
    default_us: float | None = None  # its default schedule's time, once the first stage timed it (else estimated)
    known_us: float | None = None  # its best time in the tuning memory, where the memory knows it

    @property
    def info(self) -> TaskInfo:
        return TaskInfo(self.name, self.weight, self.flops, self.bytes, self.default_us, self.known_us)

    @classmethod
    def of(cls, task: TaskInfo, tuned: bool) -> PlannedTask:
        return cls(task.name, task.weight, task.flops, task.bytes, task.cost, "tune" if tuned else "default",
                   task.default_us, task.known_us)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PlannedTask:
        us, known = d.get("default_us"), d.get("known_us")
        info = TaskInfo(d["name"], int(d["weight"]), float(d["flops"]), float(d["bytes"]),
                        None if us is None else float(us), None if known is None else float(known))
        return cls(info.name, info.weight, info.flops, info.bytes, float(d.get("cost", info.cost)),
                   str(d.get("plan", "tune")), info.default_us, info.known_us)


@dataclass(frozen=True)
class Plan:
    """A run's plan: the target compiled for, the tasks and the budget's choice among them, the shards, how the
    engine tunes (`options`, resolved for the target), the GPUs of local servers, the model's input, and the notes
    the user is shown before the run starts."""

    target: TargetSpec
    tasks: tuple[PlannedTask, ...]
    budget: Budget
    shards: tuple[Shard, ...]
    options: EngineOptions = field(default_factory=EngineOptions)
    gpus: tuple[int, ...] = ()
    input_shape: tuple[int, ...] = ()
    dtype: str = "float32"
    notes: tuple[str, ...] = ()
    tracker_servers: Mapping[str, Any] | None = None  # what a `--tracker` run's servers said of themselves
    baseline: Mapping[str, Any] | None = None  # what the user would run instead (`results.baseline.Baseline`)
    # Whether the plan was made by the first stage's measured default times (`plan.replan.by_measured`): the launcher
    # plans by estimate and the supervisor replaces that plan once, before any trial; or, where the tuning memory
    # holds every task's default time (`memory.known_defaults`), the launcher plans by those at once.
    timed: bool = False
    # The default times the tuning memory holds for the tasks, by slice (µs by task; the launcher's
    # `memory.known_defaults` of each slice's library): that stage's clients take these and do not time them again.
    known_defaults: Mapping[int, Mapping[str, float]] = field(default_factory=dict)

    @property
    def trials(self) -> int:
        """The budget per tuning slice."""
        return self.budget.trials

    @property
    def tuned(self) -> tuple[str, ...]:
        return self.budget.tuned

    def replace(self, **changes: Any) -> Plan:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """plan.json's layout: the engine options at the top level, as the clients and older runs read them."""
        return {"target": self.target.to_dict(), "tasks": [dataclasses.asdict(t) for t in self.tasks],
                "budget": self.budget.to_dict(), "shards": [s.to_dict() for s in self.shards],
                **self.options.to_dict(), "gpus": list(self.gpus), "input_shape": list(self.input_shape),
                "dtype": self.dtype, "notes": list(self.notes),
                **({"tracker_servers": dict(self.tracker_servers)} if self.tracker_servers else {}),
                **({"baseline": dict(self.baseline)} if self.baseline else {}), "timed": self.timed,
                **({"known_defaults": {str(s): dict(d) for s, d in self.known_defaults.items()}}
                   if self.known_defaults else {})}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Plan:
        target = TargetSpec.from_dict(d["target"])
        options = EngineOptions.given(**{name: d.get(name) for name in ENGINE}).resolved(target.kind)
        return cls(target=target, tasks=tuple(PlannedTask.from_dict(t) for t in d.get("tasks") or ()),
                   budget=Budget.from_dict(d["budget"]),
                   shards=tuple(Shard.from_dict(s) for s in d.get("shards") or ()),
                   options=options, gpus=tuple(int(g) for g in d.get("gpus") or ()),
                   input_shape=tuple(int(x) for x in d.get("input_shape") or ()), dtype=str(d.get("dtype", "float32")),
                   notes=tuple(str(n) for n in d.get("notes") or ()), tracker_servers=d.get("tracker_servers") or None,
                   baseline=d.get("baseline") or None, timed=bool(d.get("timed", False)),
                   known_defaults={int(s): {str(k): float(v) for k, v in known.items()}
                                   for s, known in (d.get("known_defaults") or {}).items()})
