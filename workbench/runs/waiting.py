"""What a run is waiting for before its first measured batch, from its events: the step it is in and for how long,
so that the panel can say it instead of only "waiting". The steps, in order: servers starting, clients starting
(tasks, tensor intrinsics), default schedules being timed, the plan by measured time, search spaces and cost
model, the first batch being searched, built and measured."""
from __future__ import annotations

from workbench.runs.event_types import (
    Batch,
    DefaultsTimed,
    Event,
    IntrinsicsLoaded,
    Launched,
    Replanned,
    ServerReady,
    ShardPlanned,
    ShardStarted,
)

KINDS = (Launched, ServerReady, ShardPlanned, IntrinsicsLoaded, DefaultsTimed, Replanned, ShardStarted, Batch)


def waiting_for(events: list[Event], now: float, stage: int | None = None) -> str:
    """One line for the current stage (the last one a shard was planned at, or `stage`), '' once it has measured a
    batch or before it started: 'timing the default schedules: 1 of 2 shards done (8 s)'."""
    if not events:
        return ""
    planned = [e for e in events if isinstance(e, ShardPlanned)]
    stage = stage if stage is not None else (planned[-1].tuned_at if planned else None)
    if stage is None:
        return f"starting the run ({now - events[0].t:.0f} s)"
    mine = [e for e in events if getattr(e, "tuned_at", stage) == stage and not isinstance(e, Launched)]
    if any(isinstance(e, Batch) for e in mine):
        return ""
    shards = {e.shard for e in mine if isinstance(e, ShardPlanned)}

    def ago(*kinds: type[Event]) -> str:
        last = max((e.t for e in mine if isinstance(e, kinds)), default=min(e.t for e in mine))
        return f"({now - last:.0f} s)"

    started = {e.shard for e in mine if isinstance(e, ShardStarted)}
    if started:
        return (f"searching, building and measuring the first batch: {len(started)} of {len(shards)} shards "
                f"searching {ago(ShardStarted)}")
    timing = [e for e in mine if isinstance(e, DefaultsTimed)]
    timed = {e.shard for e in timing if e.left == 0}  # a shard times its defaults in chunks: done at its last
    timers = {e.shard for e in mine if isinstance(e, ShardPlanned) and not e.replica}  # a replica times none
    if any(isinstance(e, Replanned) for e in mine) or (timers and timed >= timers):
        return f"preparing the search (design spaces, cost model) {ago(Replanned, DefaultsTimed)}"
    if timing:
        tasks = sum(len(e.defaults_us) for e in timing)
        return (f"timing the default schedules: {len(timed)} of {len(timers)} shards done, {tasks} "
                f"task{'s' if tasks != 1 else ''} timed {ago(DefaultsTimed)}")
    if any(isinstance(e, IntrinsicsLoaded) for e in mine):
        return f"timing the default schedules {ago(IntrinsicsLoaded)}"
    if any(isinstance(e, ServerReady) for e in mine):
        return f"the tuning clients are starting: the model's tasks, tensor intrinsics {ago(ServerReady)}"
    return f"starting the servers and the tuning clients {ago()}"
