"""The event schema: one frozen dataclass per kind of event in a run's log, each with its KIND.

Field names say their scope: `task_trials` (one task's trials measured so far), `shard_trials` (a shard's),
`shard_trial_budget` (what a shard may measure). A class's LEGACY maps the names that logs written before
had (events.parse reads those logs). events.py writes, reads and describes events. The base classes are in
event_base.py, a stage's ending and sweeps in result_events.py; this module exports them all, so that every kind is
imported (and registered in KINDS) from here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.runs.event_base import (  # noqa: F401 - the schema's one import path
    KINDS,
    PHASES,
    TERMINAL,
    Event,
    PhaseName,
    RunStatus,
    ShardEvent,
    SliceEvent,
    Unknown,
    _dict,
    _list,
)
from workbench.runs.result_events import (  # noqa: F401 - the schema's one import path
    Compiled,
    FinishRequested,
    Merged,
    ReferencesBuilt,
    StageSkipped,
    SweepFinished,
    SweepPoint,
    SweepStarted,
    Timed,
    Verified,
)


@dataclass(frozen=True, kw_only=True)
class Launched(Event):
    """A supervisor began, its first event (a run opened now must not take an older run_finished as its end)."""
    KIND = "launched"
    resume: bool = False
    trials: int | None = None  # a resume that raised the budget per tuning slice: to this many trials
    pid: int | None = None  # the supervisor's


@dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    KIND = "run_started"
    run_id: str = ""
    pid: int | None = None
    spec: dict[str, Any] = _dict()
    target: dict[str, Any] = _dict()
    resume: bool = False


@dataclass(frozen=True, kw_only=True)
class Phase(Event):
    KIND = "phase"
    phase: PhaseName
    tuned_at: int | None = None

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"phase {self.phase!r} is none of {', '.join(PHASES)}")


@dataclass(frozen=True, kw_only=True)
class HardwareFound(Event):
    KIND = "hardware"
    target: str = ""
    device: str = ""
    ncores: int | None = None
    gpu_note: str = ""


@dataclass(frozen=True, kw_only=True)
class MpsStatus(Event):
    """An MPS control daemon started, or why not (one per GPU; `gpu` is None for a sweep's own daemon)."""
    KIND = "mps"
    started: bool
    reason: str = ""
    pipe_dir: str = ""
    gpu: int | None = None


@dataclass(frozen=True, kw_only=True)
class ServerReady(SliceEvent):
    """An RPC server registered under its slice (`server` "external": the user's own, behind `tracker`)."""
    KIND = "server_ready"
    server: int | str
    slice_applied: bool = False
    reason: str = ""
    slice_percent: int | None = None
    slicing: str | None = None  # "mps" | "cores" | "none"
    cores: list[int] = _list()
    port: int | None = None
    host: str | None = None
    gpu: int | None = None
    pid: int | None = None
    affinity: list[int] | None = None
    sm_count: int | None = None
    device_name: str | None = None
    mps_percentage: str | None = None  # as the server saw CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
    sessions: str | None = None  # "persistent" | "spawn"
    tracker: str | None = None


@dataclass(frozen=True, kw_only=True)
class ShardPlanned(ShardEvent):
    KIND = "shard_planned"
    LEGACY = {"trials_budget": "shard_trial_budget"}
    tasks: list[str] = _list()
    shard_trial_budget: int = 0
    cost: float | None = None
    replica: int = 0


@dataclass(frozen=True, kw_only=True)
class DefaultsTimed(ShardEvent):
    """Default schedules timed on the servers: us per task (None: not timed, see `errors`), one event per chunk;
    `left`: the shard's tasks still to be timed after this chunk (0: its last). `remembered`: the chunk's times are
    the tuning memory's (`memory.known_defaults`: an earlier run of this TVM timed them at this target, device and
    slice), not timed again. `steps_s`: where the chunk's seconds went (schedule, build, measure: a first chunk's
    measure also waits for the servers)."""
    KIND = "defaults"
    defaults_us: dict[str, float | None] = _dict()
    errors: dict[str, str] = _dict()
    seconds: float = 0.0
    steps_s: dict[str, float] = _dict()
    left: int = 0
    remembered: bool = False


@dataclass(frozen=True, kw_only=True)
class Replanned(SliceEvent):
    """The run planned again by the defaults the first stage timed (`plan.replan`), before any trial: plan.json
    now holds that plan, and the shard_planned events after this one say each shard's new share."""
    KIND = "replanned"
    plan_line: str = ""  # the new plan's line (`plan.budget.describe`)
    tuned: list[str] = _list()
    tuned_share: float | None = None  # the tuned tasks' share of the measured time
    estimate_share: float | None = None  # what the estimate's plan would have tuned of it
    untimed: list[str] = _list()  # tasks whose default could not be timed
    waited_s: float = 0.0  # from the stage's start to the last default timed


@dataclass(frozen=True, kw_only=True)
class IntrinsicsLoaded(ShardEvent):
    """A client registered the target's tensor intrinsics; `loaded_from`: cache, parsed, ..."""
    KIND = "intrinsics"
    LEGACY = {"source": "loaded_from"}  # it was written over the writer's `source`
    loaded_from: str = ""
    count: int = 0
    family: str | None = None
    parsed: int = 0
    seconds: float = 0.0


@dataclass(frozen=True, kw_only=True)
class ShardStarted(ShardEvent):
    KIND = "shard_started"
    LEGACY = {"trials_budget": "shard_trial_budget", "trials_resumed": "shard_trials_resumed"}
    tasks: list[str] = _list()
    shard_trial_budget: int = 0
    shard_trials_resumed: int = 0  # already in the shard's database (a resumed run)
    cost_model_records: int = 0  # of those, what the shard's XGBoost cost model learned before its first batch
    cost_model_sibling_records: int = 0  # and what it learned of the stage's other shards' and the memory's records
    memory_records: dict[str, int] = _dict()  # by task: the tuning memory's best records it started from
    memory_note: str = ""  # why the memory was not read, where it could not be
    pid: int | None = None
    seed: int | None = None
    replica: int = 0
    startup_s: dict[str, float] = _dict()  # seconds by start-up phase, and "total"
    related_traces: dict[str, int] = _dict()  # by task: schedules found elsewhere its first batch re-applies
    tasks_extracted: str = ""  # why the client extracted the model's tasks ("": it loaded the run's task file)
    same_draws: bool = False  # the bench knob client.SAME_DRAWS_ENV: one search thread, numpy seeded


@dataclass(frozen=True, kw_only=True)
class ShardFinished(ShardEvent):
    KIND = "shard_finished"
    LEGACY = {"trials_done": "shard_trials"}
    shard_trials: int = 0
    exit_code: int | None = None
    note: str = ""
    profile_s: dict[str, float] = _dict()


@dataclass(frozen=True, kw_only=True)
class ShardFailed(ShardEvent):
    KIND = "shard_failed"
    exit_code: int | None = None
    log_tail: str = ""
    log: str = ""


@dataclass(frozen=True, kw_only=True)
class ServerLost(SliceEvent):
    """A server died while others measure on."""
    KIND = "server_lost"
    server: str
    exit_code: int | None = None
    servers_left: int = 0
    log_tail: str = ""
    log: str = ""


@dataclass(frozen=True, kw_only=True)
class ClusterReady(Event):
    """The Dask cluster the shard clients run on; `workers`: {worker, host, nthreads, pid, tvm} each; `chosen`: how a
    local one was sized."""
    KIND = "cluster"
    address: str = ""
    local: bool = False
    dashboard: str = ""
    workers: list[dict[str, Any]] = _list()
    chosen: str = ""


@dataclass(frozen=True, kw_only=True)
class ShardPlaced(ShardEvent):
    """A shard's client started on a Dask worker (`attempt` 0, then one more each time its worker was lost)."""
    KIND = "shard_placed"
    worker: str
    host: str = ""
    pid: int | None = None  # the client's, on that host
    attempt: int = 0


@dataclass(frozen=True, kw_only=True)
class WorkerLost(ShardEvent):
    """The Dask worker running a shard's client was lost; the shard restarts elsewhere from the records received."""
    KIND = "worker_lost"
    worker: str
    attempt: int = 0  # the attempt that was lost
    records_kept: int = 0
    restarted: bool = True
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class TaskSkipped(ShardEvent):
    """A task whose design space cannot be generated."""
    KIND = "task_skipped"
    task: str
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class TaskSearchFailed(ShardEvent):
    """A task whose search raised: it measures no more, keeps what it measured, and the shard's other tasks go on."""
    KIND = "task_search_failed"
    task: str
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class Batch(ShardEvent):
    """One measured batch of a task. `build_errors`/`run_errors`: the task's so far; `build_*`: this batch's
    build timings (a persistent builder's only)."""
    KIND = "batch"
    LEGACY = {"trials_done": "task_trials", "trials_budget": "shard_trial_budget", "shard_trials_done": "shard_trials"}
    task: str
    task_id: int = 0
    weight: float = 1.0
    flop: float = 0.0
    batch_size: int = 0
    task_trials: int = 0
    shard_trials: int = 0
    shard_trial_budget: int = 0
    latest_us: list[float | None] = _list()
    best_us: float | None = None
    best_gflops: float | None = None
    build_errors: int = 0
    run_errors: int = 0
    errors: list[str] = _list()
    est_shard_us: float | None = None  # the shard's tasks: sum of weight x best
    shard_tasks_measured: int = 0
    shard_tasks: int = 0
    build_s: float | None = None
    build_max_s: float | None = None
    build_each_s: list[float | None] | None = None
    build_dropped: int | None = None
    timed_once: int | None = None  # candidates timed by their first call alone (runner rpc-batch's HopelessCut)
    # search_s, measure_s: None without a PersistentBuilder (the stock configuration)
    search_s: float | None = None  # from the shard's last batch event (its start, for its first) to this build
    measure_s: float | None = None  # from this build's end to this event: the servers' timing, the records' commit
    # and the cost model's update (TVM's callbacks run before this event's)


@dataclass(frozen=True, kw_only=True)
class Telemetry(Event):
    """One ~1 Hz sample; `gpus`: per GPU {index, sm_util, sm_util_source, busy_percent, mem_used_mb, ...}."""
    KIND = "telemetry"
    cpu_percent: float
    mem_percent: float
    gpus: list[dict[str, Any]] = _list()
    gpu_note: str = ""


@dataclass(frozen=True, kw_only=True)
class Error(Event):
    KIND = "error"
    message: str
    where: str = ""
    traceback: str = ""


@dataclass(frozen=True, kw_only=True)
class RunFinished(Event):
    KIND = "run_finished"
    status: RunStatus
    message: str = ""


# what Run.errors() and the panel list
FAILURES = (Error, ShardFailed, ServerLost, WorkerLost, TaskSkipped, TaskSearchFailed)
