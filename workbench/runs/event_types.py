"""The event schema: one frozen dataclass per kind of event in a run's log, each with its KIND.

Field names say their scope: `task_trials` (one task's trials measured so far), `shard_trials` (a shard's),
`shard_trial_budget` (what a shard may measure). A class's LEGACY maps the names that logs written before
had (events.parse reads those logs). events.py writes, reads and describes events.
"""
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
    """Default schedules timed on the servers: us per task (None: not timed, see `errors`)."""
    KIND = "defaults"
    defaults_us: dict[str, float | None] = _dict()
    errors: dict[str, str] = _dict()
    seconds: float = 0.0


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


@dataclass(frozen=True, kw_only=True)
class FinishRequested(Event):
    """Run.finish asked the supervisor to end tuning now; the supervisor records it."""
    KIND = "finish_requested"


@dataclass(frozen=True, kw_only=True)
class StageSkipped(SliceEvent):
    """A slice not tuned (after a finish)."""
    KIND = "stage_skipped"
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class Merged(SliceEvent):
    KIND = "merged"
    records: int = 0
    workloads: int = 0
    path: str = ""


@dataclass(frozen=True, kw_only=True)
class Compiled(SliceEvent):
    """The stage's model compiled; `choices`: per task {task, default_us, best_us, kept}."""
    KIND = "compiled"
    path: str = ""
    seconds: float = 0.0
    tasks_tuned: int = 0
    tasks_total: int = 0
    untuned_tasks: list[str] = _list()
    kept_tuned: list[str] = _list()
    kept_default: list[str] = _list()
    choices: list[dict[str, Any]] = _list()


@dataclass(frozen=True, kw_only=True)
class Verified(SliceEvent):
    """The tuned build's outputs against the untuned build's (an fp16 run's: the float32 build's, at float16
    tolerances: `against`), on `input` (the first seeded input whose outputs vary); `match` None: inconclusive
    (constant or near-zero outputs), said in `match_note`."""
    KIND = "verified"
    against: str = "untuned build"
    match: bool | None = None
    max_abs_err: float | None = None
    rel_err: float | None = None
    finite: bool | None = None
    input: str = ""
    output_range: list[float] = _list()
    match_note: str = ""


@dataclass(frozen=True, kw_only=True)
class Timed(SliceEvent):
    """Tuned and untuned builds timed; `verdict`: faster, slower or within noise; `kept`: tuned or untuned;
    `busy_cores`: the most other processes kept busy on average while either was timed (None: not measured);
    `server`: the tracker's server they were timed on (a `--tracker` run), else empty: here, at the slice."""
    KIND = "timed"
    tuned_ms: float
    untuned_ms: float
    speedup: float
    tuned_iqr_ms: float = 0.0
    untuned_iqr_ms: float = 0.0
    verdict: str = ""
    kept: str = "tuned"
    sm_count: int | None = None
    records: int = 0
    tuned_repeats: int | None = None
    untuned_repeats: int | None = None
    busy_cores: float | None = None
    server: str = ""
    baseline: str | None = None  # what the user would run instead, as people read it; None: no baseline
    baseline_ms: float | None = None
    baseline_iqr_ms: float | None = None
    vs_baseline: float | None = None  # the baseline's time over the kept model's (above 1: the model is faster)
    vs_baseline_verdict: str | None = None  # faster, slower or within noise (the paired test)
    baseline_match: bool | None = None
    baseline_note: str = ""


@dataclass(frozen=True, kw_only=True)
class SweepPoint(Event):
    """The model tuned at `tuned_at` timed on the slice `inferred_at`; on a CPU that point also stands for the
    other requested slices of the same core count (`stands_for`, all of them; empty in older logs: just
    `inferred_at`). `busy_cores`: what other processes kept busy on average while it was timed."""
    KIND = "sweep_point"
    tuned_at: int
    inferred_at: int
    latency_ms_median: float
    latency_ms_iqr: float = 0.0
    latency_ms_q1: float | None = None  # the quartiles, for error bars that need not be symmetric (None: older logs)
    latency_ms_q3: float | None = None
    model: str = ""
    sm_count: int | None = None
    cores: list[int] | None = None
    slice_applied: bool | None = None
    slicing: str | None = None
    reason: str = ""
    stands_for: list[int] = _list()
    busy_cores: float | None = None


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
class SweepStarted(Event):
    """A background sweep (Run.start_sweep)."""
    KIND = "sweep_started"
    slices: list[int] = _list()
    pid: int | None = None


@dataclass(frozen=True, kw_only=True)
class SweepFinished(Event):
    KIND = "sweep_finished"
    status: str
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class RunFinished(Event):
    KIND = "run_finished"
    status: RunStatus
    message: str = ""


FAILURES = (Error, ShardFailed, ServerLost, WorkerLost, TaskSkipped)  # what Run.errors() and the panel list
