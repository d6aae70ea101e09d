"""The event schema's base: `Event` (every event's `t` and `source`), `SliceEvent` and `ShardEvent` (an event of one
slice, or one shard at one slice), `Unknown`, and the registry `KINDS` that each subclass with a KIND joins. The kinds
themselves are in `runs.event_types` (which exports all of this) and `runs.result_events`."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Literal, get_args

PhaseName = Literal["servers", "tuning", "merging", "compiling", "verifying", "sweeping"]
PHASES: tuple[str, ...] = get_args(PhaseName)
RunStatus = Literal["done", "partial", "failed", "stopped"]  # how a run ends (run_finished's status)
TERMINAL: tuple[str, ...] = get_args(RunStatus)
KINDS: dict[str, type[Event]] = {}


_list: Any = partial(field, default_factory=list)  # a field whose default is a new list (dict) per event
_dict: Any = partial(field, default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Event:
    """What every event has: `t` (unix seconds) and `source` (its writer), both stamped by EventWriter."""
    KIND: ClassVar[str] = ""
    LEGACY: ClassVar[dict[str, str]] = {}  # a field's name in logs written before it said its scope -> today's
    t: float = 0.0
    source: str = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.KIND:
            KINDS[cls.KIND] = cls

    @property
    def kind(self) -> str:
        return self.KIND


@dataclass(frozen=True, kw_only=True)
class Unknown(Event):
    """A line of a kind this schema does not know, or one that does not fit its kind: kept as it was read."""
    raw: dict[str, Any] = _dict()

    @property
    def kind(self) -> str:
        return str(self.raw.get("kind", ""))


@dataclass(frozen=True, kw_only=True)
class SliceEvent(Event):
    """An event of one tuning slice (a stage of the run): its line starts `slice <tuned_at> %: `."""
    tuned_at: int


@dataclass(frozen=True, kw_only=True)
class ShardEvent(SliceEvent):
    """An event of one shard's tuning client at one slice."""
    shard: int
