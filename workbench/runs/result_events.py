"""The events of a stage's ending and of sweeps: finish asked, stage skipped, merged, compiled, verified, timed,
and the sweep's points. Part of the event schema that `runs.event_types` declares (and exports): the same base
classes, the same rules."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.runs.event_base import Event, SliceEvent, _dict, _list


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
class ReferencesBuilt(Event):
    """The references a finish needs, built while the first stage tuned (`results.prebuild`): {name: seconds}."""
    KIND = "references_built"
    builds: dict[str, float] = _dict()
    seconds: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Merged(SliceEvent):
    KIND = "merged"
    records: int = 0
    workloads: int = 0
    path: str = ""


@dataclass(frozen=True, kw_only=True)
class Compiled(SliceEvent):
    """The stage's model compiled; `choices`: per task {task, default_us, best_us, kept}; `from_memory`: {task:
    records} of the tasks the run measured no record of, given the tuning memory's best (`finish.from_memory`)."""
    KIND = "compiled"
    path: str = ""
    seconds: float = 0.0
    tasks_tuned: int = 0
    tasks_total: int = 0
    untuned_tasks: list[str] = _list()
    kept_tuned: list[str] = _list()
    kept_default: list[str] = _list()
    choices: list[dict[str, Any]] = _list()
    from_memory: dict[str, int] = _dict()
    # seconds: "tasks_loaded" (or "tasks_extracted"), "waited_for_references", "untuned", "float32", "tuned"
    steps_s: dict[str, float] = _dict()
    # the references already built when the finish came to them: ahead (`prebuild`), or by an earlier stage or session
    references_ready: list[str] = _list()
    references_note: str = ""  # why the references were not all built ahead, where they were to be


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
