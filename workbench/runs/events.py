"""The event log: one JSON object per line in runs/<id>/events.jsonl, written and read as typed events.

Every line has `t` (unix seconds), `kind` and `source` (its writer), then the fields of its kind's dataclass
(workbench/event_types.py, the schema). Written by the supervisor, the tuning clients, the telemetry sampler,
sweeps and Run (each line is one O_APPEND write, so writers in several processes do not interleave); read by
`Run` and the finisher. `describe(event)` is the line a person reads of an event.
"""
from __future__ import annotations

import dataclasses
import errno
import json
import os
import time
from typing import Any

from workbench.noise import NO_TUNED_SCHEDULE, busy_warning, fmt_timing, is_busy, versus
from workbench.runs.event_types import (
    KINDS,
    Batch,
    ClusterReady,
    Compiled,
    DefaultsTimed,
    Error,
    Event,
    FinishRequested,
    HardwareFound,
    IntrinsicsLoaded,
    Launched,
    Merged,
    MpsStatus,
    Phase,
    ReferencesBuilt,
    Replanned,
    RunFinished,
    RunStarted,
    ServerLost,
    ServerReady,
    ShardFailed,
    ShardFinished,
    ShardPlaced,
    ShardPlanned,
    ShardStarted,
    SliceEvent,
    StageSkipped,
    SweepFinished,
    SweepPoint,
    SweepStarted,
    TaskSearchFailed,
    TaskSkipped,
    Telemetry,
    Timed,
    Unknown,
    Verified,
    WorkerLost,
)
from workbench.units import fmt_us, time_unit

EVENTS_FILE = "events.jsonl"
EVENT_START = b'{"t":'  # every line starts so (see EventWriter.emit)


class EventWriter:
    """Appends events to a run's log; safe to use from several processes at once."""

    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.source = source

    def emit(self, event: Event) -> dict[str, Any]:
        """Append `event`, stamped with the time and this writer's source; returns the line's object."""
        if not isinstance(event, Event) or not event.KIND:
            raise TypeError(f"emit takes one event of a known kind, not {event!r}")
        record = {**as_dict(event), "t": round(time.time(), 3), "source": self.source}
        _append(self.path, (json.dumps(record, default=_json_default, separators=(",", ":")) + "\n").encode(),
                event.kind)
        return record


def _append(path: str, line: bytes, what: str) -> None:
    """One O_APPEND write of one whole line (writers in several processes never interleave within a line)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        written = os.write(fd, line)
    finally:
        os.close(fd)
    if written < len(line):  # only a full disk cuts a regular file's write short
        raise OSError(errno.ENOSPC, f"No space left on device: event {what!r} cut short", path)


def append_lines(path: str, text: str) -> int:
    """Append event lines written elsewhere (a client on a Dask worker), already stamped, each one write; how many."""
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        _append(path, (line + "\n").encode(), "relayed")
    return len(lines)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


class EventReader:
    """Reads the new complete lines of an event log as events, remembering its offset."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self._partial = b""

    def read_new(self) -> list[Event]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()  # an incomplete last line waits for the next read
        events = []
        for line in lines:
            if line.strip():
                record = _decode(line)
                if record is not None:
                    events.append(parse(record))
        return events


def _decode(line: bytes) -> dict[str, Any] | None:
    """One event line; a line glued to the torn end of a write cut short (killed writer, full disk) keeps
    its event. None when nothing whole is left."""
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        pass
    start = line.find(EVENT_START, 1)
    while start > 0:
        try:
            return json.loads(line[start:])
        except json.JSONDecodeError:
            start = line.find(EVENT_START, start + 1)
    return None


# -- events and their JSON objects ----------------------------------------------------------------------

_NAMES: dict[type, tuple[str, ...]] = {}


def _names(cls: type[Event]) -> tuple[str, ...]:
    """The class's field names, `t` and `source` first."""
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def as_dict(event: Event) -> dict[str, Any]:
    """The event as its log line holds it: t, kind, source, then its fields."""
    if isinstance(event, Unknown):
        return dict(event.raw)
    out = {"t": event.t, "kind": event.KIND, "source": event.source}
    out.update((name, getattr(event, name)) for name in _names(type(event))[2:])
    return out


def _renamed(cls: type[Event], fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` with the class's old names (LEGACY) given today's, where today's is not there already (an old
    name that is also a field, intrinsics' `source`, keeps its value there too)."""
    if not any(old in fields for old in cls.LEGACY):
        return fields
    out = dict(fields)
    for old, new in cls.LEGACY.items():
        if old in fields and new not in fields:
            out[new] = out.pop(old) if old not in _names(cls) else fields[old]
    return out


def parse(d: dict[str, Any]) -> Event:
    """The typed event of a log line (a JSON object). Old field names are mapped, fields it does not know are
    ignored and missing optional ones get their defaults; a line that fits no kind comes back as Unknown."""
    cls = KINDS.get(d.get("kind"))  # type: ignore[arg-type]
    if cls is not None:
        names = _names(cls)
        try:
            return cls(**{k: v for k, v in _renamed(cls, d).items() if k in names})
        except (TypeError, ValueError):
            pass
    return Unknown(t=d.get("t", 0.0), source=str(d.get("source", "")), raw=d)


def is_raise(event: dict[str, Any]) -> bool:
    """A log line that raised the run's budget per tuning slice (`resume --trials`)."""
    return event.get("kind") == "launched" and bool(event.get("trials"))


def since_last_raise(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The log lines from the run's last raise on (all of them for a run never raised): the current budget's
    timings and sweep; earlier ones timed models that are gone."""
    raised = [i for i, e in enumerate(events) if is_raise(e)]
    return events[raised[-1]:] if raised else events


# -- the line a person reads ---------------------------------------------------------------------------

def timed_line(e: Timed, at: str = "") -> str:
    """A stage's timing: the model it kept, against the baseline first, then against TVM's untuned build; every time
    of the line in the model's unit (`tables.MODEL_TIMES`)."""
    kept_ms, kept_iqr = (e.untuned_ms, e.untuned_iqr_ms) if e.kept == "untuned" else (e.tuned_ms, e.tuned_iqr_ms)
    unit = time_unit([v * 1e3 for v in (kept_ms, e.tuned_ms, e.untuned_ms) if v is not None])  # the model's
    line = f"{at}model {fmt_timing(kept_ms, kept_iqr, unit=unit)}"
    if e.baseline_ms is not None:
        line += (f": {versus(e.vs_baseline, e.vs_baseline_verdict, e.baseline)} "
                 f"({fmt_timing(e.baseline_ms, unit=unit)})")
    elif e.baseline:
        line += f": {e.baseline} not timed ({e.baseline_note})"
    if e.verdict == NO_TUNED_SCHEDULE:
        line += "; no tuned schedule beat the defaults, so the model is TVM's untuned build"
    elif e.verdict == "slower":
        line += (f"; TVM's tuned build ({fmt_timing(e.tuned_ms, unit=unit)}) timed slower than its untuned one, so "
                 "the untuned build is kept")
    else:
        line += f"; {versus(e.speedup, e.verdict, 'TVM untuned')} ({fmt_timing(e.untuned_ms, unit=unit)})"
    line += f", on the server under {e.server}" if e.server else ""
    return line + (f"; {busy_warning(e.busy_cores)}" if is_busy(e.busy_cores) else "")


def describe(e: Event) -> str:
    """One line for a person: the CLI's progress lines, the panel's status and error list (failures are worded
    here only), the bench."""
    at = f"slice {e.tuned_at} %: " if isinstance(e, (SliceEvent, Phase)) and e.tuned_at is not None else ""
    match e:
        case Batch():
            errors = f", {e.build_errors}+{e.run_errors} errors" if e.build_errors or e.run_errors else ""
            return (f"{at}shard {e.shard} {e.shard_trials:>4}/{e.shard_trial_budget} {e.task}: best "
                    f"{fmt_us(e.best_us)}, shard estimate {fmt_us(e.est_shard_us)}{errors}")
        case ShardFailed():
            last = (e.log_tail or "").strip().splitlines()[-1:] or [""]
            return f"{at}shard {e.shard} FAILED (exit {e.exit_code}): {last[0]}"
        case ServerLost():
            return f"{at}{e.server} DIED (exit {e.exit_code}): measuring goes on on {e.servers_left} server(s)"
        case TaskSkipped():
            return f"{at}shard {e.shard}: task {e.task} skipped: {e.reason}"
        case TaskSearchFailed():
            return (f"{at}shard {e.shard}: task {e.task}'s search FAILED (it keeps what it measured; the shard "
                    f"goes on): {e.reason}")
        case WorkerLost():
            then = (f"restarted from the {e.records_kept} records received" if e.restarted
                    else f"not restarted ({e.message})")
            return f"{at}shard {e.shard}: worker {e.worker} LOST; {then}"
        case ShardPlaced():
            again = f" (attempt {e.attempt + 1})" if e.attempt else ""
            return f"{at}shard {e.shard} runs on worker {e.worker}{again}"
        case ClusterReady():
            threads = sum(int(w.get("nthreads") or 0) for w in e.workers)
            chosen = f": {e.chosen}" if e.chosen else ""
            return f"cluster {e.address}: {len(e.workers)} workers, {threads} threads{chosen}"
        case Error():
            return f"ERROR in {e.where}: {e.message}"
        case ServerReady():
            got = (f"{e.sm_count} SMs" + (f" of {e.device_name}" if e.device_name else "") if e.sm_count
                   else f"cores {e.affinity}" if e.affinity else "")
            applied = "" if e.slice_applied else f" NOT SLICED ({e.reason})"
            if e.server == "external":
                said = f" ({e.reason})" if e.slice_applied else ""
                return f"{at}servers behind tracker {e.tracker} ready{': ' + got if got else ''}{said}{applied}"
            return f"{at}server {e.server} ready on {e.host or ''}:{'' if e.port is None else e.port} {got}{applied}"
        case ShardPlanned():
            return f"{at}shard {e.shard} planned: {len(e.tasks)} tasks, {e.shard_trial_budget} trials"
        case ShardStarted():
            took = f", started in {e.startup_s['total']:.1f} s" if e.startup_s.get("total") is not None else ""
            known = (f"; {len(e.memory_records)} started from the tuning memory's {sum(e.memory_records.values())} "
                     f"best records" if e.memory_records else "") + (f"; {e.memory_note}" if e.memory_note else "")
            related = (f"; {len(e.related_traces)} tasks start from schedules found at another slice or shape"
                       if e.related_traces else "")
            return f"{at}shard {e.shard}: {len(e.tasks)} tasks, {e.shard_trial_budget} trials{took}{known}{related}"
        case ShardFinished():
            return f"{at}shard {e.shard} finished: {e.shard_trials} trials"
        case DefaultsTimed():
            timed = {t: us for t, us in e.defaults_us.items() if us is not None}
            slowest = max(timed, key=timed.__getitem__, default=None)
            worst = f", slowest {slowest} {fmt_us(timed[slowest])}" if slowest else ""
            failed = f", {len(e.errors)} not timed" if e.errors else ""
            how = "known from the tuning memory (earlier runs timed them)" if e.remembered else \
                f"timed in {e.seconds:.1f} s"
            return f"{at}shard {e.shard}: default schedules of {len(timed)} tasks {how}{worst}{failed}"
        case Replanned():
            was = (f"; the estimate alone would have tuned {e.estimate_share:.0%} of it"
                   if e.estimate_share is not None and e.estimate_share != e.tuned_share else "")
            untimed = f"; {len(e.untimed)} tasks not timed, ranked by their estimate" if e.untimed else ""
            return f"{at}planned by measured time: {e.plan_line}{was}{untimed}"
        case IntrinsicsLoaded():
            return f"{at}shard {e.shard}: {e.count} tensor intrinsics ({e.loaded_from}, {e.seconds} s)"
        case Phase():
            return f"{at}phase: {e.phase}"
        case StageSkipped():
            return f"{at}not tuned: {e.reason}"
        case Merged():
            return f"{at}merged {e.records} records of {e.workloads} workloads"
        case Compiled():
            kept = f"; {len(e.kept_default)} keep their default schedule, which was faster" if e.kept_default else ""
            took = f" in {e.seconds:.1f} s" if e.seconds else ""
            said = [f"{' and '.join(e.references_ready)} already built"] if e.references_ready else []
            ahead = f" ({'; '.join(said + ([e.references_note] if e.references_note else []))})" \
                if said or e.references_note else ""
            return f"{at}compiled{took}{ahead}: tuned records for {len(e.kept_tuned)} of {e.tasks_total} tasks{kept}"
        case ReferencesBuilt():
            built = ", ".join(f"{name} in {s:.1f} s" for name, s in e.builds.items()) or "nothing left to build"
            return f"reference builds compiled while tuning: {built}"
        case Verified():
            err = "n/a" if e.max_abs_err is None else f"{e.max_abs_err:.2e}"
            span = f", outputs {e.output_range[0]:.3g} to {e.output_range[1]:.3g}" if len(e.output_range) == 2 else ""
            if e.match is None and e.match_note:
                return f"{at}outputs not compared: {e.match_note}"
            return f"{at}outputs match {e.against}: {e.match} (max abs err {err}{span})"
        case Timed():
            return timed_line(e, at)
        case SweepPoint():
            stands = [p for p in e.stands_for if p != e.inferred_at]
            also = f" (stands for {', '.join(map(str, e.stands_for))}%: the same cores)" if stands else ""
            busy = f"; {busy_warning(e.busy_cores)}" if is_busy(e.busy_cores) else ""
            return (f"sweep: tuned at {e.tuned_at}%, inferred at {e.inferred_at}%{also}: "
                    f"{fmt_timing(e.latency_ms_median, e.latency_ms_iqr)}{busy}")
        case Launched():
            more = f", the budget raised to {e.trials} trials per tuning slice" if e.trials else ""
            return "supervisor launched" + (" to resume" if e.resume else "") + more
        case RunStarted():
            return f"run {e.run_id} started (target {e.target.get('kind')})"
        case HardwareFound():
            return f"hardware: {e.device}"
        case MpsStatus():
            return "MPS daemon started" if e.started else f"MPS unavailable: {e.reason}"
        case FinishRequested():
            return "finish requested: tuning ends now; the best records so far are compiled, verified and timed"
        case Telemetry():
            return f"telemetry: CPU {e.cpu_percent:.0f} %, memory {e.mem_percent:.0f} %"
        case SweepStarted():
            return f"sweep started: slices {', '.join(map(str, e.slices))}"
        case SweepFinished() | RunFinished():
            what = "sweep" if isinstance(e, SweepFinished) else "run"
            return f"{what} finished: {e.status}" + (f" ({e.message})" if e.message else "")
    return f"{e.kind} event"
