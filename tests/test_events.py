"""The event schema: events written as dataclasses and read back, the checks on emit, old logs' field names."""
from __future__ import annotations

import glob
import gzip
import json
import os

import pytest

from workbench.runs import event_types as ev
from workbench.runs.events import EventReader, EventWriter, describe, parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_events_are_written_as_their_dataclasses_and_read_back(tmp_path):
    path = str(tmp_path / "events.jsonl")
    writer = EventWriter(path, "test")
    batch = ev.Batch(shard=0, tuned_at=50, task="a", task_trials=4, shard_trials=6, shard_trial_budget=8, best_us=2.0)
    line = writer.emit(batch)
    assert list(line)[:3] == ["t", "kind", "source"] and line["kind"] == "batch" and line["source"] == "test"
    with open(path, "ab") as f:  # a line in an old name, a kind nobody knows, a torn line
        f.write(b'{"t": 1.5, "kind": "shard_finished", "source": "old", "shard": 0, "tuned_at": 50, "trials_done": 6, '
                b'"exit_code": 0}\n{"t": 1.0, "kind": "no_such_kind", "x": 1}\n'
                b'{"t": 2.0, "kind": "merged", "tuned_at": 50')
    reader = EventReader(path)
    got, finished, unknown = reader.read_new()  # the torn last line waits for the rest of its write
    assert got.shard_trials == 6 and got.task_trials == 4 and got.t == line["t"] and got.source == "test"
    assert isinstance(finished, ev.ShardFinished) and finished.shard_trials == 6
    assert isinstance(unknown, ev.Unknown) and unknown.kind == "no_such_kind"
    with open(path) as f:
        assert "shard_trials" in f.readline()  # what the writer wrote: today's names
    assert describe(got) == "slice 50 %: shard 0    6/8 a: best 2.00 us, shard estimate -"


def test_emit_refuses_what_the_schema_does_not_know(tmp_path):
    writer = EventWriter(str(tmp_path / "events.jsonl"), "test")
    with pytest.raises(TypeError):
        writer.emit("merged")  # a kind's name is not an event
    with pytest.raises(TypeError):
        ev.Merged(tuned_at=50, trials=3)  # a field the schema does not declare
    with pytest.raises(TypeError):
        writer.emit(ev.Merged(tuned_at=50), records=3)
    with pytest.raises(TypeError):
        writer.emit(ev.Unknown(kind="no_such_kind"))
    with pytest.raises(ValueError):
        ev.Phase(phase="planning")  # only the phases the engine goes through
    assert not os.path.exists(tmp_path / "events.jsonl")


def test_committed_logs_read_as_known_events_in_todays_names():
    paths = glob.glob(os.path.join(ROOT, "bench", "results", "**", "*.jsonl*"), recursive=True)
    assert paths
    for path in paths:
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
            events = [parse(json.loads(line)) for line in f if line.strip()]
        assert not [e.kind for e in events if isinstance(e, ev.Unknown)], path
        assert all(describe(e) for e in events)
        for e in events:
            if isinstance(e, ev.Batch):  # trials_done, shard_trials_done and trials_budget, by their scoped names
                assert 0 < e.task_trials <= e.shard_trials and e.shard_trial_budget > 0, (path, e)


def test_timings_read_from_older_logs_have_no_busy_reading_and_say_their_spread():
    """Lines written before `busy_cores` and `stands_for` existed read with their defaults; the lines a person
    reads give each latency its IQR, and warn only where a busy machine was measured."""
    old = parse({"t": 1.0, "kind": "timed", "source": "supervisor", "tuned_at": 50, "tuned_ms": 0.412,
                 "tuned_iqr_ms": 0.01, "untuned_ms": 0.5, "untuned_iqr_ms": 0.02, "speedup": 1.21, "verdict": "faster"})
    assert isinstance(old, ev.Timed) and old.busy_cores is None
    assert describe(old) == "slice 50 %: model 412 us ± 10 (IQR); 1.21x faster than TVM untuned (500 us)"
    point = parse({"t": 1.0, "kind": "sweep_point", "tuned_at": 50, "inferred_at": 30, "latency_ms_median": 33.4,
                   "latency_ms_iqr": 0.2})
    assert isinstance(point, ev.SweepPoint) and point.stands_for == [] and "busy" not in describe(point)
    busy = ev.Timed(tuned_at=50, tuned_ms=194.5, untuned_ms=200.0, speedup=1.03, busy_cores=1.3)
    assert describe(busy).endswith("; machine busy while timing: other processes used 1.3 cores; numbers may be noisy")
