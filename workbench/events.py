"""The event log: one JSON object per line in runs/<id>/events.jsonl.

Written by the supervisor, the tuning clients and the telemetry sampler (each line is one
O_APPEND write, so writers in several processes do not interleave); read by `Run`.

Every event has `t` (unix seconds), `kind` and `source`. Kinds and their extra fields:

- launched: resume (written by the launcher the moment it starts a supervisor)
- run_started: spec, run_id, target, pid, resume
- phase: phase (servers|tuning|merging|compiling|verifying|sweeping), tuned_at
- hardware: target, device, ncores, gpu_note
- mps: gpu, started, reason, pipe_dir (one per GPU's MPS control daemon)
- server_ready: server, tuned_at, slice_percent, slice_applied, reason, sm_count, cores, port
- shard_planned: shard, tuned_at, tasks, trials_budget, cost, replica
- defaults: shard, tuned_at, defaults_us ({task: us of its default schedule, or null}), errors, seconds
- shard_started / shard_finished: shard, tuned_at, pid, startup_s (seconds by start-up phase) | exit_code,
  trials_done, note
- shard_failed: shard, tuned_at, exit_code, log_tail
- server_lost: server, tuned_at, exit_code, servers_left, log_tail (measuring goes on on the others)
- task_skipped: shard, task, reason (a task whose design space cannot be generated)
- batch: shard, tuned_at, task, task_id, weight, flop, batch_size, trials_done (the task's),
  trials_budget (the shard's), shard_trials_done, latest_us (list), best_us, best_gflops,
  build_errors, run_errors, est_shard_us, shard_tasks_measured, shard_tasks, build_s, build_each_s
- finish_requested (Run.finish) / stage_skipped: tuned_at, reason (a slice not tuned after a finish)
- merged: tuned_at, records, workloads, path
- compiled: tuned_at, tasks_tuned, tasks_total, kept_tuned, kept_default, choices (per task: default_us,
  best_us, kept) / verified: match, max_abs_err / timed: tuned_ms, untuned_ms, their IQRs, verdict, kept
- sweep_point: tuned_at, inferred_at, latency_ms_median, latency_ms_iqr, sm_count, slice_applied
- telemetry: cpu_percent, mem_percent, gpus (list of {index, sm_util, mem_used_mb, ...}), gpu_note
- error: message, where
- sweep_started / sweep_finished: slices | status, message (a background sweep)
- run_finished: status (done|partial|failed|stopped), message
"""
from __future__ import annotations

import errno
import json
import os
import time
from typing import Any

EVENTS_FILE = "events.jsonl"
TERMINAL = ("done", "partial", "failed", "stopped")
EVENT_START = b'{"t":'  # every line starts so (see EventWriter.emit)


class EventWriter:
    """Appends events to a run's log; safe to use from several processes at once."""

    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.source = source

    def emit(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"t": round(time.time(), 3), "kind": kind, "source": self.source, **fields}
        line = (json.dumps(event, default=_json_default, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            written = os.write(fd, line)
        finally:
            os.close(fd)
        if written < len(line):  # only a full disk cuts a regular file's write short
            raise OSError(errno.ENOSPC, f"No space left on device: event {kind!r} cut short", self.path)
        return event


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


class EventReader:
    """Reads new complete lines from an event log, remembering its offset."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self._partial = b""

    def read_new(self) -> list[dict[str, Any]]:
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
                event = _decode(line)
                if event is not None:
                    events.append(event)
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

