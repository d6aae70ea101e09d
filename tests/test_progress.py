"""The run's progress as the engine reports it (Run.overall, Run.progress, Run.events, Run.results_table): a total
fixed at the start, a rate and an ETA from the batches with finishing included, no epoch floats, readable headers.

Fast: hand-written event logs (the real event dataclasses) and fake run folders (tests/fake_engine.py)."""
from __future__ import annotations

import re

import pandas as pd
import pytest
from fake_engine import FINISH_S, hold_back_slice, make_run

import workbench
from workbench.plan.plan import Plan
from workbench.runs import event_types as ev
from workbench.runs.progress import (
    FINISH_GUESS_BASE_S,
    FINISH_GUESS_PER_TASK_S,
    FIRST_BATCH_GUESS_S,
    GUESS_S_PER_TRIAL_CPU,
    overall,
    shard_progress,
)
from workbench.spec import TuneSpec

SPEC = TuneSpec(model="mlp-small", slices=(50, 100), servers=1, shards=2, trials=16, trials_per_batch=4)
PLAN = Plan.from_dict({"target": {"kind": "cpu"}, "budget": {"trials": 16, "batch": 4, "tuned": ["a", "b"]},
                      "shards": [{"index": 0, "tasks": ["a"], "trials": 8, "cost": 1.0},
                                 {"index": 1, "tasks": ["b"], "trials": 8, "cost": 1.0}],
                      "tasks": [{"name": n, "weight": 1, "flops": 1.0, "bytes": 0.0} for n in "ab"]})
GUESS_S = FINISH_GUESS_BASE_S + 2 * FINISH_GUESS_PER_TASK_S  # finishing one slice of a 2-task model, guessed


def _tuning(stage: int, t0: float, batches: list[float]) -> list[ev.Event]:
    """Slice `stage` tuning from t0: two shards of 8 trials, a batch of 4 each at every time in `batches`."""
    out: list[ev.Event] = [ev.Phase(t=t0, phase="tuning", tuned_at=stage)]
    for shard in (0, 1):
        out.append(ev.ShardPlanned(t=t0, shard=shard, tuned_at=stage, tasks=["a"], shard_trial_budget=8))
        out.append(ev.ShardStarted(t=t0, shard=shard, tuned_at=stage, tasks=["a"], shard_trial_budget=8))
    for i, t in enumerate(batches, 1):
        out += [ev.Batch(t=t, shard=shard, tuned_at=stage, task="a", batch_size=4, shard_trials=4 * i,
                         shard_trial_budget=8, est_shard_us=10.0 / i, shard_tasks_measured=1, shard_tasks=1)
                for shard in (0, 1)]
    return out


def _finishing(stage: int, t0: float, seconds: float) -> list[ev.Event]:
    """Slice `stage` finished from t0: merged, compiled, verified and timed `seconds` later."""
    return [*(ev.ShardFinished(t=t0, shard=s, tuned_at=stage, shard_trials=8) for s in (0, 1)),
            ev.Phase(t=t0, phase="merging", tuned_at=stage), ev.Merged(t=t0, tuned_at=stage),
            ev.Phase(t=t0 + 1, phase="compiling", tuned_at=stage), ev.Compiled(t=t0 + 2, tuned_at=stage),
            ev.Phase(t=t0 + 3, phase="verifying", tuned_at=stage), ev.Verified(t=t0 + 4, tuned_at=stage),
            ev.Timed(t=t0 + seconds, tuned_at=stage, tuned_ms=1.0, untuned_ms=2.0, speedup=2.0)]


START = [ev.RunStarted(t=0.0, run_id="x"), ev.Phase(t=0.0, phase="servers")]


def test_rate_and_eta_come_from_the_batches_and_count_down_between_them():
    events = START + _tuning(50, 0.0, [10.0])  # 8 trials in the first 10 s of tuning
    o = overall(events, PLAN, SPEC, "running", now=10.0)
    assert (o.done, o.total) == (8, 32) and o.rate == pytest.approx(0.8)
    # 24 trials left at 0.8/s, then finishing both slices (guessed: no slice of the run has finished yet)
    assert o.eta_s == pytest.approx(24 / 0.8 + 2 * GUESS_S) and o.finish_basis == "guess"
    assert "guessed" in o.note and "0.8 trials/s" in o.note and o.phase == "tuning" and o.tuned_at == 50
    later = overall(events, PLAN, SPEC, "running", now=15.0)
    assert later.eta_s == pytest.approx(o.eta_s - 5) and later.total == o.total  # no rise between batches
    assert "ETA" in later.describe() and "8/32 trials" in later.describe()
    # the per-shard ETA counts down between batches too (it rose with the clock before)
    etas = [shard_progress(events, ended=False, now=now).eta_s.iloc[0] for now in (10.0, 12.0, 14.0)]
    assert etas == [10.0, 8.0, 6.0]
    first = overall(START + _tuning(50, 0.0, []), PLAN, SPEC, "running", now=5.0)
    # before the first batch the ETA is a guess (the clients' start, then the trials), said to be one
    guess = FIRST_BATCH_GUESS_S + 32 * GUESS_S_PER_TRIAL_CPU - 5.0 + 2 * GUESS_S
    assert first.rate is None and first.guessed and first.eta_s == pytest.approx(guess)
    assert "a guess until the first batch" in first.describe() and "no batch measured yet" in first.note


def test_the_whole_run_bar_moves_before_the_first_batch_and_is_full_when_every_trial_is_in():
    """One batch per shard: the bar follows the expected rate between batches instead of sitting at 0 % and jumping;
    it never draws more than the batches in flight, and is full at 16/16 trials while finishing is left."""
    spec = SPEC.replace(slices=(100,))
    tuning = START + _tuning(100, 0.0, [])
    drawn = [overall(tuning, PLAN, spec, "running", now=t).drawn for t in (0.0, 1.0, 2.0, 60.0)]
    assert drawn[0] == 0.0 and 0 < drawn[1] < drawn[2] <= 8 / 16  # two shards of one batch of 4 in flight
    assert drawn[3] == pytest.approx(8 / 16)
    batched = overall(START + _tuning(100, 0.0, [10.0, 20.0]), PLAN, spec, "running", now=21.0)
    assert (batched.done, batched.total) == (16, 16) and batched.drawn == 1.0 and batched.phase == "tuning"


def test_eta_includes_finishing_measured_on_the_runs_own_slices_and_the_rate_skips_the_gaps():
    events = START + _tuning(50, 0.0, [10.0, 20.0]) + _finishing(50, 20.0, 30.0) + _tuning(100, 51.0, [61.0])
    o = overall(events, PLAN, SPEC, "running", now=61.0)
    # 16 trials in 20 s at 50 %, 8 in 10 s at 100 %: the 31 s spent finishing slice 50 is not tuning time
    assert o.rate == pytest.approx(24 / 30) and o.done == 24 and o.total == 32
    assert o.finish_s == 30.0 and o.finish_basis == "measured" and "measured on slice 50%" in o.note
    assert o.eta_s == pytest.approx(8 / 0.8 + 30.0)  # the last 8 trials, then finishing slice 100 as slice 50 did
    assert o.steps_done == 4 and o.steps_total == 8 and 0 < o.fraction < 1
    finishing = events + [*(ev.ShardFinished(t=71.0, shard=s, tuned_at=100, shard_trials=8) for s in (0, 1)),
                          ev.Phase(t=71.0, phase="merging", tuned_at=100)]
    o = overall(finishing, PLAN, SPEC, "running", now=81.0)
    assert o.phase == "merging" and o.done == o.total == 32 and o.eta_s == pytest.approx(30.0 - 10.0)
    done = overall(finishing + _finishing(100, 71.0, 30.0)[2:], PLAN, SPEC, "done", now=200.0)
    assert done.ended and done.eta_s == 0.0 and done.fraction == 1.0 and done.steps_done == 8


def test_finish_ends_the_trials_but_not_the_finishing_and_a_sweep_is_counted():
    events = START + _tuning(50, 0.0, [10.0]) + [ev.FinishRequested(t=12.0)]
    o = overall(events, PLAN, SPEC, "running", now=12.0)
    assert o.eta_s == pytest.approx(GUESS_S) and "Finish was asked for" in o.note  # slice 100 will not be tuned
    swept = SPEC.replace(sweep_slices=(25, 50, 100))
    o = overall(START + _tuning(50, 0.0, [10.0]), PLAN, swept, "running", now=10.0)
    assert o.eta_s == pytest.approx(24 / 0.8 + 2 * GUESS_S + 2 * 3 * 5.0) and "the sweep" in o.note


def test_the_total_stays_fixed_when_the_next_slice_starts(tmp_path, sleeper):
    run_id = make_run(str(tmp_path), finished=False, live_pid=sleeper.pid)  # slice 50 done, 100 tuning
    release = hold_back_slice(str(tmp_path), run_id, 100)
    run = workbench.open_run(run_id, str(tmp_path))
    before = run.overall()
    assert run.progress().trials_budget.sum() == 8  # the shards planned so far: slice 50's only
    assert (before.done, before.total) == (8, 16) and before.phase == "verifying"
    assert before.finish_s == FINISH_S and before.finish_basis == "measured"  # slice 50's merge -> timed
    release()
    after = run.overall()
    assert (after.done, after.total) == (16, 16) and after.phase == "tuning" and after.tuned_at == 100
    assert after.eta_s == FINISH_S  # all trials measured: slice 100's finishing is what is left


def _epoch_like(df: pd.DataFrame) -> list[str]:
    """Columns holding numbers that look like unix seconds (2001 .. 2286)."""
    num = df.select_dtypes("number")
    return [c for c in num if ((num[c] > 1e9) & (num[c] < 1e10)).any()]


def test_tables_have_local_times_and_readable_headers(tmp_path):
    run = workbench.open_run(make_run(str(tmp_path)), str(tmp_path))
    progress, events = run.progress(), run.events
    assert not _epoch_like(progress) and not _epoch_like(events)
    assert pd.api.types.is_datetime64_any_dtype(progress.started) and progress.last_batch.notna().all()
    assert list(events.columns[:4]) == ["time", "since_start_s", "kind", "source"]
    assert pd.api.types.is_datetime64_any_dtype(events.time) and events.since_start_s.iloc[0] == 0.0
    assert events.time.iloc[0].floor("s") == run.summary()["started"]  # local time, as the summary's
    assert all(isinstance(e["t"], float) and e["t"] > 1e9 for e in run.event_list())  # the raw seconds, for code
    table = run.results_table()
    assert list(table.columns) == ["tuned at (%)", "latency (median ± IQR)", "untuned latency (median ± IQR)",
                                   "speedup vs untuned", "outputs match", "tasks searched", "tasks kept on default",
                                   "tasks"]
    shown = [*table["latency (median ± IQR)"], *table["untuned latency (median ± IQR)"]]
    assert len({v.split()[1] for v in shown}) == 1 and all(" ± " not in v or "(IQR)" in v for v in shown), shown
    assert table["outputs match"].tolist() == ["yes", "yes"] and "tuned_ms" in run.results  # raw fields stay


def test_a_resumed_shard_is_timed_from_its_new_start():
    """Seen on the H200 (2026-12-02): a shard resumed with nothing left to measure showed -9552 s elapsed (its last
    batch was from the first session); a resumed shard's ETA counted the earlier session's trials in its rate."""
    first = _tuning(50, 0.0, [10.0, 20.0]) + [ev.ShardFinished(t=20.0, shard=s, tuned_at=50, shard_trials=8)
                                              for s in (0, 1)]
    resumed = [ev.ShardPlanned(t=1000.0, shard=0, tuned_at=50, tasks=["a"], shard_trial_budget=8),
               ev.ShardStarted(t=1000.0, shard=0, tuned_at=50, tasks=["a"], shard_trial_budget=8,
                               shard_trials_resumed=8),
               ev.ShardFinished(t=1003.0, shard=0, tuned_at=50, shard_trials=8),
               ev.ShardPlanned(t=1000.0, shard=1, tuned_at=50, tasks=["a"], shard_trial_budget=16),
               ev.ShardStarted(t=1000.0, shard=1, tuned_at=50, tasks=["a"], shard_trial_budget=16,
                               shard_trials_resumed=8),
               ev.Batch(t=1040.0, shard=1, tuned_at=50, task="a", batch_size=4, shard_trials=12,
                        shard_trial_budget=16, est_shard_us=1.0, shard_tasks_measured=1, shard_tasks=1)]
    df = shard_progress(START + first + resumed, ended=False, now=1050.0).set_index("shard")
    assert df.loc[0, "state"] == "finished" and df.loc[0, "elapsed_s"] == 3.0
    assert df.loc[1, "elapsed_s"] == 50.0 and df.loc[1, "trials_done"] == 12
    assert df.loc[1, "eta_s"] == 30.0  # 4 trials in 40 s this session: the last 4 take 40 s, 10 of them gone


def test_each_budget_shows_its_model_and_what_the_raise_gained():
    """`Run.budgets()` / `budget_line`: the models of the first budget and of each raise, per tuning slice, and the
    last raise's gain with its noise (the H200's bert-layer:8 at 100 %: 320 -> 640 -> 960 trials, 2026-12-02)."""
    from workbench.runs.events import as_dict
    from workbench.runs.tables import budget_history, budget_line

    def timed(t, at, ms, iqr):
        return ev.Timed(t=t, tuned_at=at, tuned_ms=ms, tuned_iqr_ms=iqr, untuned_ms=0.919, speedup=0.919 / ms)

    events = [ev.Launched(t=0.0), ev.RunStarted(t=0.0, run_id="x", spec={"trials": 320}),
              timed(1.0, 25, 2.313, 0.001), timed(2.0, 100, 0.8199, 0.002),
              ev.Launched(t=3.0, resume=True, trials=640), ev.RunStarted(t=3.0, run_id="x", spec={"trials": 640}),
              timed(4.0, 100, 0.7310, 0.0005),
              ev.Launched(t=5.0, resume=True, trials=960), ev.RunStarted(t=5.0, run_id="x", spec={"trials": 960}),
              timed(6.0, 100, 0.7297, 0.0017)]
    df = budget_history([as_dict(e) for e in events])
    assert list(zip(df.trials, df.tuned_at)) == [(320, 25), (320, 100), (640, 100), (960, 100)]
    assert df.gain.iloc[2] == pytest.approx(0.8199 / 0.7310) and df.gain_verdict.iloc[2] == "faster"
    assert df.gain_verdict.iloc[3] == "within noise"  # 1.3 us apart, IQR 1.7 us
    assert budget_line(df) == ("Tuned on, at 100 %: 320 -> 640 -> 960 trials, 820 -> 731 -> 730 us; "
                               "the last raise changed it within the timing noise (1.00x)")  # 25 %: not raised
    assert budget_line(df.iloc[:3]).endswith("the last raise made it 1.12x faster")
    slower = budget_history([as_dict(e) for e in events[:3] + [timed(2.0, 100, 0.7310, 0.0005)] + events[4:6]
                             + [timed(4.0, 100, 0.8199, 0.002)]])
    assert budget_line(slower).endswith("the last raise made it 1.12x slower")
    assert budget_line(df[df.trials == 320]) == ""


def test_what_a_run_waits_for_follows_its_real_start(cheap_done_run):
    """Replayed event by event, a real run's log says each step before its first batch, in order, then nothing."""
    from workbench.runs.waiting import KINDS, waiting_for

    events = cheap_done_run.typed_events(*KINDS)
    said = [waiting_for(events[:i], events[i - 1].t + 2.0) for i in range(1, len(events) + 1)]
    steps = [s.split(":")[0].split(" (")[0] for s in said if s]
    order = ["starting the servers and the tuning clients", "the tuning clients are starting",
             "timing the default schedules", "preparing the search",
             "searching, building and measuring the first batch"]
    seen = [o for o in order if o in steps]
    assert seen[-2:] == order[-2:] and "timing the default schedules" in seen, said  # the last two steps, in order
    assert [order.index(s) for s in steps if s in order] == sorted(order.index(s) for s in steps if s in order)
    assert all(re.search(r"\(\d+ s\)$", s) for s in said if s), said  # how long the step has lasted
    assert said[-1] == "" and cheap_done_run.waiting_for() == ""  # measured: nothing to wait for


def test_a_shard_timing_its_defaults_in_chunks_is_timing_until_its_last() -> None:
    """A shard of more tasks than a batch times its defaults in several events: until the one with nothing left, the
    run is still timing defaults, not preparing the search."""
    from workbench.runs.event_types import DefaultsTimed, ShardPlanned
    from workbench.runs.waiting import waiting_for

    planned = [ShardPlanned(t=1.0, source="supervisor", shard=s, tuned_at=100, tasks=[f"t{s}"]) for s in (0, 1)]
    chunk = DefaultsTimed(t=5.0, source="shard-0@100", shard=0, tuned_at=100, defaults_us={"a": 3.0, "b": 4.0}, left=5)
    said = waiting_for([*planned, chunk], 7.0)
    assert said == "timing the default schedules: 0 of 2 shards done, 2 tasks timed (2 s)", said
    last = [DefaultsTimed(t=6.0, source=f"shard-{s}@100", shard=s, tuned_at=100, defaults_us={f"c{s}": 1.0})
            for s in (0, 1)]
    assert waiting_for([*planned, chunk, *last], 9.0) == "preparing the search (design spaces, cost model) (3 s)"
    replica = ShardPlanned(t=1.0, source="supervisor", shard=2, tuned_at=100, tasks=["t0"], replica=1)
    said = waiting_for([*planned, replica, chunk, *last], 9.0)  # a replica times no default: none is awaited from it
    assert said == "preparing the search (design spaces, cost model) (3 s)", said
