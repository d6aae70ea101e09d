"""How far a run has got: one row per shard (`shard_progress`) and one figure for the whole run (`overall`).

Pure functions of a run's typed events, its plan and its spec; `Run.progress()` and `Run.overall()` call them,
so the CLI and the panel show the same numbers. Times in the tables are local datetimes or seconds.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from workbench.plan.plan import Plan
from workbench.runs.event_types import (
    TERMINAL,
    Batch,
    Compiled,
    Event,
    FinishRequested,
    Launched,
    Merged,
    Phase,
    RunStarted,
    ShardFailed,
    ShardFinished,
    ShardPlanned,
    ShardStarted,
    StageSkipped,
    SweepPoint,
    Timed,
    Verified,
)
from workbench.spec import TuneSpec
from workbench.units import fmt_rate, fmt_seconds

RATE_WINDOW_S = 300.0  # the trials/s rate is measured over the last 5 minutes of tuning
FINISH_STEPS = (Merged, Compiled, Verified, Timed)  # a slice's finishing steps: one unit of overall progress each
FINISH_GUESS_BASE_S, FINISH_GUESS_PER_TASK_S = 10.0, 2.0  # before a slice of the run has finished: 10 s + 2 s a task
SWEEP_POINT_GUESS_S = 5.0  # one sweep point (a model timed at a slice) before one was measured
# Before a slice's first batch lands: its clients' start (intrinsics, servers, each task's default timed, the first
# search) and then the trials, guessed per target from the sample models on the 2-core box and an H200 host
# (docs/benchmarks.md: 1.6 mlp trials/s on 16 cores); the ETA says it is a guess until a batch gives a rate.
FIRST_BATCH_GUESS_S = 20.0
GUESS_S_PER_TRIAL = {"cuda": 1.0}
GUESS_S_PER_TRIAL_CPU = 0.5


def local_time(t: float | None) -> pd.Timestamp:
    """Unix seconds as a local (naive) datetime, as run ids and `Run.summary()['started']` are; NaT for None."""
    return pd.NaT if t is None else pd.Timestamp.fromtimestamp(t)


@dataclass(frozen=True)
class Overall:
    """The whole run's progress, with a total fixed at the start.

    done / total: trials measured / to be measured over all tuning slices (total: the plan's trials per slice x
    the tuning slices; each shard counts up to its budget). steps_done / steps_total: finishing steps (merge,
    compile, verify, time: 4 per slice). rate: trials/s over the last RATE_WINDOW_S of tuning (None before the
    first batch). eta_s: seconds left, tuning, finishing (and the run's own sweep) included; 0 once the run is
    done, None while unknown or when it ended otherwise. phase: what the run does now (starting, servers, tuning,
    merging, compiling, verifying, sweeping) or how it ended. tuned_at: the slice it works on. finish_s: the
    estimated seconds to finish one slice, `finish_basis` "measured" (on this run's slices) or "guess".
    note: how the ETA was made, in words (the panel's tooltip).
    """
    done: int
    total: int
    steps_done: int
    steps_total: int
    rate: float | None
    eta_s: float | None
    phase: str
    tuned_at: int | None
    finish_s: float
    finish_basis: str
    note: str
    ended: bool
    drawn: float = 0.0  # what the whole-run bar draws: see `bar_fraction`
    guessed: bool = False  # the ETA is the guess made before any batch landed (no rate measured yet)

    def __repr__(self) -> str:
        return f"<Overall {self.describe()}>"

    def _repr_html_(self) -> str:
        import html

        tip = html.escape(self.note, quote=True)
        return f"<div title='{tip}'><b>whole run</b>: {html.escape(self.describe())}</div>"

    @property
    def fraction(self) -> float:
        """Share of the run's work done (a trial and a finishing step count one each); 1 once the run is done."""
        if self.ended and self.phase in ("done", "partial"):
            return 1.0
        units = self.total + self.steps_total
        return min(1.0, (min(self.done, self.total) + self.steps_done) / units) if units else 0.0

    def describe(self) -> str:
        """One line: '64/128 trials · tuning @50% · 2.1 trials/s · ETA 1 min 05 s'."""
        words = [f"{self.done}/{self.total} trials"]
        words.append(self.phase + (f" @{self.tuned_at}%" if self.tuned_at is not None and not self.ended else ""))
        if self.rate:
            words.append(fmt_rate(self.rate))
        if not self.ended:
            guess = " (a guess until the first batch)" if self.guessed else ""
            words.append(f"ETA {fmt_seconds(self.eta_s)}{guess}" if self.eta_s is not None else
                         "ETA after the first batch")
        return " · ".join(words)


def shard_progress(events: list[Event], ended: bool, now: float | None = None) -> pd.DataFrame:
    """One row per (tuned_at, shard): trials done and budgeted, tasks and tasks measured, the shard's best estimate
    (`est_shard_us`), state (planned, running, finished, failed, or stopped: the run ended before the shard did),
    `started` / `last_batch` (local datetimes), elapsed seconds and, while running, the ETA (counting down from
    the shard's rate at its last batch)."""
    now = time.time() if now is None else now
    rows: dict[tuple[int, int], dict[str, Any]] = {}
    for e in events:
        if not isinstance(e, (ShardPlanned, ShardStarted, Batch, ShardFinished, ShardFailed)):
            continue
        key = (e.tuned_at, e.shard)
        row = rows.setdefault(key, {"tuned_at": key[0], "shard": key[1], "state": "planned", "trials_done": 0,
                                    "trials_budget": getattr(e, "shard_trial_budget", 0), "tasks": 0,
                                    "tasks_measured": 0, "t_start": None, "t_last": None, "est_shard_us": None,
                                    "build_errors": 0, "run_errors": 0})
        if isinstance(e, ShardPlanned):
            row["tasks"] = len(e.tasks)
            row["trials_budget"] = e.shard_trial_budget
        elif isinstance(e, ShardStarted):  # a resumed shard starts a new session: its clock starts again
            row["state"], row["t_start"], row["t_end"] = "running", e.t, None
            row["trials_done"] = max(row["trials_done"], e.shard_trials_resumed)
            row["_resumed"] = e.shard_trials_resumed
        elif isinstance(e, Batch):
            row["trials_done"] = e.shard_trials
            row["t_last"] = e.t
            row["est_shard_us"] = e.est_shard_us
            row["tasks_measured"] = e.shard_tasks_measured
            row.setdefault("_errs", {})[e.task] = (e.build_errors, e.run_errors)
        elif isinstance(e, ShardFinished):
            row["state"], row["t_end"] = "finished", e.t
            row["trials_done"] = max(row["trials_done"], e.shard_trials)
        else:
            row["state"] = "failed"
            row["error"] = e.log_tail[-500:]
    out = []
    for row in rows.values():
        if ended and row["state"] in ("running", "planned"):
            row["state"] = "stopped"  # the run ended first: the shard's bar freezes where it was
        errs = row.pop("_errs", {})
        row["build_errors"] = sum(b for b, _ in errs.values())
        row["run_errors"] = sum(r for _, r in errs.values())
        t_start, t_last, t_end = row.pop("t_start"), row.pop("t_last"), row.pop("t_end", None)
        row["started"], row["last_batch"] = local_time(t_start), local_time(t_last)
        running = row["state"] == "running"
        end = now if running else (t_end if t_end is not None else t_last)
        elapsed = max(0.0, end - t_start) if t_start is not None and end is not None else 0.0
        row["elapsed_s"] = round(elapsed, 1)  # of the shard's latest session (a resume's, after a resume)
        done, budget = row["trials_done"], row["trials_budget"]
        this_session = done - row.pop("_resumed", 0)
        eta = None
        if running and this_session > 0 and t_start is not None and t_last is not None and t_last >= t_start:
            # the rate at the last batch, over this session's trials; the ETA counts down between batches
            eta = max(0.0, (t_last - t_start) / this_session * max(0, budget - done) - (now - t_last))
        row["eta_s"] = None if eta is None else round(eta, 1)
        out.append(row)
    df = pd.DataFrame(out)
    return df.sort_values(["tuned_at", "shard"]).reset_index(drop=True) if len(df) else df


@dataclass
class _Tally:
    """What `overall` gathers from the events in one pass."""
    budgets: dict[tuple[int, int], int] = field(default_factory=dict)  # (tuned_at, shard) -> its trial budget
    done: dict[tuple[int, int], int] = field(default_factory=dict)  # (tuned_at, shard) -> trials measured
    starts: dict[tuple[int, int], float] = field(default_factory=dict)  # (session, tuned_at) -> its first shard start
    batches: dict[tuple[int, int], list[tuple[float, int]]] = field(default_factory=dict)  # -> (t, trials) a batch
    steps: set[tuple[int, str]] = field(default_factory=set)  # (tuned_at, kind) of the finishing steps done
    merging: dict[int, float] = field(default_factory=dict)  # tuned_at -> when its finishing began
    verifying: dict[int, float] = field(default_factory=dict)
    finish_s: dict[int, float] = field(default_factory=dict)  # tuned_at -> seconds from merging to timed
    time_s: list[float] = field(default_factory=list)  # seconds to verify and time one build (half of verifying)
    skipped: set[int] = field(default_factory=set)
    tuned: set[int] = field(default_factory=set)  # slices whose shards started
    sweep_points: int = 0
    sweep_t: float | None = None
    phase: str = "starting"
    tuned_at: int | None = None
    finish_asked: bool = False
    t0: float | None = None  # when the run (or its latest session) started
    tuning_t: float | None = None  # when the latest tuning phase began


def _tally(events: list[Event]) -> _Tally:
    k = _Tally()
    session = 0
    for e in events:
        if isinstance(e, (Launched, RunStarted)):
            k.finish_asked = False
            session += isinstance(e, RunStarted)
            k.t0 = e.t
        elif isinstance(e, FinishRequested):
            k.finish_asked = True
        elif isinstance(e, ShardPlanned):
            k.budgets[(e.tuned_at, e.shard)] = e.shard_trial_budget
        elif isinstance(e, ShardStarted):
            k.starts.setdefault((session, e.tuned_at), e.t)
            k.tuned.add(e.tuned_at)
            key = (e.tuned_at, e.shard)
            k.done[key] = max(k.done.get(key, 0), e.shard_trials_resumed)
        elif isinstance(e, (Batch, ShardFinished)):
            key = (e.tuned_at, e.shard)
            k.done[key] = max(k.done.get(key, 0), e.shard_trials)
            if isinstance(e, Batch):
                k.batches.setdefault((session, e.tuned_at), []).append((e.t, e.batch_size))
        elif isinstance(e, Phase):
            k.phase, k.tuned_at = e.phase, e.tuned_at
            if e.phase == "tuning":
                k.tuning_t = e.t
            if e.phase == "merging" and e.tuned_at is not None:
                k.merging[e.tuned_at] = e.t
            elif e.phase == "verifying" and e.tuned_at is not None:
                k.verifying[e.tuned_at] = e.t
            elif e.phase == "sweeping":
                k.sweep_t, k.sweep_points = e.t, 0
        elif isinstance(e, StageSkipped):
            k.skipped.add(e.tuned_at)
        elif isinstance(e, SweepPoint):
            k.sweep_points += 1
        if isinstance(e, FINISH_STEPS):
            k.steps.add((e.tuned_at, e.KIND))
            if isinstance(e, Timed) and e.tuned_at in k.merging:
                k.finish_s[e.tuned_at] = e.t - k.merging[e.tuned_at]
                if e.tuned_at in k.verifying:
                    k.time_s.append((e.t - k.verifying[e.tuned_at]) / 2)
    return k


def _rate(k: _Tally) -> tuple[float | None, float]:
    """Trials/s over the last RATE_WINDOW_S of tuning time (the gaps between slices left out), and that span."""
    spans = sorted(((k.starts[key], b[-1][0], b) for key, b in k.batches.items() if key in k.starts and b),
                   key=lambda s: s[1])
    left, trials, span = RATE_WINDOW_S, 0, 0.0
    for start, end, batches in reversed(spans):
        cut = max(start, end - left)
        trials += sum(n for t, n in batches if t > cut or cut == start)
        span += end - cut
        left -= end - cut
        if left <= 0:
            break
    return (trials / span if trials and span > 0 else None), span


def overall(events: list[Event], plan: Plan | None, spec: TuneSpec, status: str, now: float | None = None) -> Overall:
    """The run's overall progress (see `Overall`); `status` is `Run.status`, `now` the clock (default: time.time())."""
    now = time.time() if now is None else now
    k = _tally(events)
    slices = list(spec.slices)
    per_slice = (sum(s.trials for s in plan.shards) if plan else 0) or spec.trials
    total = per_slice * len(slices)
    done = min(total, sum(min(d, k.budgets.get(key, d)) for key, d in k.done.items()))
    rate, span = _rate(k)
    n_tasks = (len(plan.tasks) if plan else 0) or 1
    if k.finish_s:
        finish_s, basis = sum(k.finish_s.values()) / len(k.finish_s), "measured"
        finish_note = (f"finishing a slice (merge, compile, verify, time) takes ~{fmt_seconds(finish_s)}, as measured "
                       f"on slice {', '.join(f'{s}%' for s in k.finish_s)} of this run")
    else:
        finish_s, basis = FINISH_GUESS_BASE_S + FINISH_GUESS_PER_TASK_S * n_tasks, "guess"
        finish_note = (f"finishing a slice (merge, compile, verify, time) is guessed at {fmt_seconds(finish_s)} "
                       f"({FINISH_GUESS_BASE_S:.0f} s + {FINISH_GUESS_PER_TASK_S:.0f} s x {n_tasks} tasks) until this "
                       "run has finished one")
    rate_note = (f"rate {fmt_rate(rate)}, measured over the last {fmt_seconds(span)} of tuning" if rate else
                 "no batch measured yet, so no rate")
    ended = status in TERMINAL or status == "crashed"
    steps = dict(done=done, total=total, steps_done=len(k.steps), steps_total=len(FINISH_STEPS) * len(slices),
                 rate=rate, finish_s=round(finish_s, 1), finish_basis=basis)
    if ended:
        early = " (finished early: later slices skipped)" if k.skipped else ""
        return Overall(**steps, eta_s=0.0 if status in ("done", "partial") else None, phase=status, tuned_at=None,
                       note=f"the run ended {status}{early}; {rate_note}", ended=True,
                       drawn=1.0 if status in ("done", "partial") else done / total if total else 0.0)
    trials_left = 0 if k.finish_asked else total - done
    tune_s: float | None = 0.0
    last = max((b[-1][0] for b in k.batches.values() if b), default=None)
    guessed = bool(trials_left) and not rate
    s_per_trial = 1 / rate if rate else GUESS_S_PER_TRIAL.get(plan.target.kind if plan else "", GUESS_S_PER_TRIAL_CPU)
    if trials_left:
        tune_s = trials_left * s_per_trial
        if rate and k.phase == "tuning" and last is not None:
            tune_s = max(0.0, tune_s - (now - last))  # counts down between batches
        elif guessed:  # no batch yet: the clients' start, then the trials, counting down from the run's start
            tune_s = max(0.0, FIRST_BATCH_GUESS_S + tune_s - (now - (k.t0 if k.t0 is not None else now)))
            rate_note = (f"no batch measured yet: the ETA guesses {fmt_seconds(FIRST_BATCH_GUESS_S)} for the clients "
                         f"to start and {s_per_trial:.2g} s per trial until the first batch gives a rate")
    will_finish = [s for s in slices if s not in k.skipped and (s, Timed.KIND) not in k.steps
                   and (not k.finish_asked or s in k.tuned)]
    finish_left = sum(max(0.0, finish_s - (now - k.merging[s])) if s in k.merging else finish_s for s in will_finish)
    sweep_left, sweep_note = 0.0, ""
    if spec.sweep_slices:
        point_s = ((now - k.sweep_t) / k.sweep_points if k.sweep_points and k.sweep_t else
                   sum(k.time_s) / len(k.time_s) if k.time_s else SWEEP_POINT_GUESS_S)
        stages = len([s for s in slices if s not in k.skipped and (not k.finish_asked or s in k.tuned)])
        sweep_left = max(0, stages * len(spec.sweep_slices) - k.sweep_points) * point_s
        sweep_note = (f"; then the sweep: {len(spec.sweep_slices)} slices x {stages} models at "
                      f"~{fmt_seconds(point_s)} each")
    eta = None if tune_s is None else round(tune_s + finish_left + sweep_left, 1)
    in_flight = (plan.budget.batch * max(1, len(plan.shards))) if plan else spec.trials_per_batch
    since = max((t for t in (last, k.tuning_t) if t is not None), default=None) if k.phase == "tuning" else None
    drawn = bar_fraction(done, total, k.finish_asked, s_per_trial, now, since, in_flight)
    asked = "Finish was asked for: no more trials; " if k.finish_asked else ""
    note = (f"ETA = {asked}trials left / rate + finishing {len(will_finish)} slice(s)"
            f"{' + the sweep' if sweep_note else ''}; {rate_note}; {finish_note}{sweep_note}")
    return Overall(**steps, eta_s=eta, phase=k.phase, tuned_at=k.tuned_at, note=note, ended=False, drawn=drawn,
                   guessed=guessed)


def bar_fraction(done: int, total: int, finish_asked: bool, s_per_trial: float, now: float, since: float | None,
                 in_flight: int) -> float:
    """What the whole-run bar draws: the trials' share of the budget, moving between batches as the rate expects
    (at most the batch in flight of every shard past the trials measured, and never full before they are), and full
    once every trial is in (or Finish was asked for) while the text says what finishing is left. So a run of one
    batch per shard moves from its first second instead of sitting at 0 % and jumping to 100 %."""
    if not total or finish_asked or done >= total:
        return 1.0
    expected = done  # between tuning phases (`since` None) the bar stays at the trials measured
    if since is not None and s_per_trial > 0:
        expected = min(done + in_flight, done + max(0.0, now - since) / s_per_trial)
    return min(0.99, max(done, expected) / total)
