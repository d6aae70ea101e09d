"""`StreamingScheduler`: TVM's gradient-based task scheduling, with every batch reported as it is measured.

TVM's `GradientBased` scheduler sends every task's first batch before it joins any of them, so a
shard of 15 tasks reports nothing until all 15 first batches are searched, built and measured (minutes for a
model of many tasks). This scheduler joins each batch (measure callbacks
fire: database, cost model, progress event) before the next search starts, and picks by TVM's gradient rule
(`gradient_based.cc`: alpha x backward-window gain + (1 - alpha) x best / rounds, times the task's
weight), where a task with no history yet gets its first batch first, in the plan's order (costliest first).
A task's history starts from what is known of it (`prior`): a resumed shard's best record so far, so that it does
not spend a first batch on every task again (on a model of many small tasks, most of a raised budget); and where the
plan spends batches by worth (a GPU: `plan.budget.batches_by_worth`), its default schedule's measured time, so that
a costly task's second batch comes before a cheap task's first, as the plan said: the rule's best / rounds falls as
1 / k with a task's k-th batch, close to the plan's LATER_BATCH_WORTH, and a batch that does not beat the default
counts as one that did not improve (the model keeps the default there). Each task is held to what the user's
`trials_per_task` leaves it (TVM's cap counts this session's trials only). A task whose best has not improved for
`PATIENCE` batches in a row sits out while the shard sends `PATIENCE` batches to its other tasks, then competes
again; each further batch of it that does not improve doubles its next rest, up to `MAX_REST`, and one that improves
ends them. Only batches searched with a cost model that has learnt count as stalls (`warmup`: TVM's XGBoost model
scores at random below 100 samples): a random draw that finds nothing says little of the task's room, and a costly
task rested then hands its turns to cheaper ones (an H100 mlp run: the matmul holding 71 % of the time rested after
3 random batches still at its default). A stall need not be the end: a costly task's search can stand still for a
few batches and then find a faster kernel, so no task is shut out for good, while one with no room left costs the
shard ever fewer batches (the budget stays the shard's: when every task rests, the gradient rule picks among all).
The search inside a task is TVM's own.
"""
from __future__ import annotations

import math
import random

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.task_scheduler import PyTaskScheduler

from workbench.units import mean_seconds

PATIENCE = 3  # batches without a better best after which a task rests; its first rest: this many of the others' batches
MAX_REST = 4 * PATIENCE  # the longest rest: stalls taken while every task rests double it too, and must not end them
IMPROVED = 1e-3  # a best counts as better when it beats the last by more than this fraction (timing jitter)


def starting_points(best: dict[str, float], defaults_s: dict[str, float], by_worth: bool) -> dict[str, float]:
    """Each task's history start (s), by name: its best record (`best`, a resumed shard's); where batches go by worth,
    also its default schedule's time (`defaults_s`), the faster of the two where both are known."""
    if not by_worth:
        return dict(best)
    return {t: min(best.get(t, math.inf), defaults_s.get(t, math.inf)) for t in {*best, *defaults_s}}


def batch_best(results) -> float:
    """The fastest mean run time (s) of one batch's runner results; inf when none ran."""
    best = math.inf
    for r in results:
        if r.error_msg is None and r.run_secs:
            best = min(best, mean_seconds(r.run_secs))
    return best


def gradient(history: list[float], weight: float, alpha: float, window: int) -> float:
    """TVM's task gradient from a task's best latency after each of its batches (`gradient_based.cc`)."""
    n = len(history)
    best = history[-1]
    if not math.isfinite(best):
        return -1.0
    g1 = (history[n - 1 - window] - best) / window if n >= 1 + window else 0.0
    g2 = best / n
    return (alpha * g1 + (1 - alpha) * g2) * weight


def pick(live: list[int], history: list[list[float]], resting: list[int], weights: list[float], alpha: float,
         window: int, rng: random.Random) -> int:
    """The next task among `live` (indices): the first without a batch yet, in order; else, among the tasks that are
    not resting (`resting`: the others' batches each still has to wait; all live tasks when every one rests), the top
    gradient (ties: `rng`)."""
    fresh = [i for i in live if not history[i]]
    if fresh:
        return fresh[0]
    moving = [i for i in live if resting[i] <= 0] or live
    grads = {i: gradient(history[i], weights[i], alpha, window) for i in moving}
    top = max(grads.values())
    return rng.choice([i for i, g in grads.items() if g == top])


def stalled(previous: float, now: float) -> bool:
    """Whether a batch left a task's best where it was (`now` no better than `previous` by IMPROVED)."""
    return not now < previous * (1 - IMPROVED)


def rest_after(stale: int, patience: int = PATIENCE) -> int:
    """The other tasks' batches a task sits out after its `stale`-th batch in a row without a better best: none
    before `patience`, then `patience`, doubled by each further stalled batch, at most `MAX_REST` (a task with no
    room left costs the shard ever fewer batches; one that stalled for a while still gets its turns back)."""
    return 0 if stale < patience else min(patience * 2 ** (stale - patience), MAX_REST)


class Turns:
    """Whose batch is next, without TVM: each task's best after each of its batches, its stalls and its rests. The
    scheduler feeds it; a test can drive it with made-up bests."""

    def __init__(self, starts: list[list[float]], weights: list[float], alpha: float = 0.2, window: int = 3,
                 rng: random.Random | None = None, warmup: int = 0, samples: int = 0) -> None:
        """`starts`: per task, its history's start ([] or [its prior best, s]); `warmup`: the samples the cost model
        must hold before its batches' stalls count; `samples`: those it holds already (taught before the first)."""
        self.history = [list(h) for h in starts]  # per task: its best latency (s) after each joined batch
        self.weights, self.alpha, self.window = weights, alpha, window
        self.rng = rng or random.Random(0)
        self.warmup, self.samples = warmup, samples
        self.stale = [0] * len(starts)  # per task: its batches in a row that left its best where it was
        self.resting = [0] * len(starts)  # per task: the other tasks' batches it still sits out (`rest_after`)

    def pick(self, live: list[int]) -> int:
        """The next task among `live` (`pick`); the others' rests count it."""
        task = pick(live, self.history, self.resting, self.weights, self.alpha, self.window, self.rng)
        self.resting = [r if i == task else r - 1 for i, r in enumerate(self.resting)]
        return task

    def joined(self, task: int, best_s: float, learned: int = 0) -> None:
        """A batch of `task` came back, its fastest run `best_s` (inf: none ran); the cost model learns `learned` of
        its candidates (the built ones). It counts as a stall only if the model held `warmup` samples when it chose."""
        previous = self.history[task][-1] if self.history[task] else math.inf
        now = min(previous, best_s)
        informed, self.samples = self.samples >= self.warmup, self.samples + learned
        if not stalled(previous, now):
            self.stale[task] = 0
        elif informed:
            self.stale[task] += 1
        self.resting[task] = rest_after(self.stale[task])
        self.history[task].append(now)


@derived_object
class StreamingScheduler(PyTaskScheduler):
    """See the module docstring. `seed` breaks ties between equal gradients (-1: unseeded)."""

    def __init__(self, alpha: float = 0.2, window_size: int = 3, seed: int = -1,
                 prior: dict[str, float] | None = None, done: dict[str, int] | None = None,
                 cap: int | None = None, warmup: int = 0, learned: int = 0) -> None:
        """`prior`: each task's start (s), by task name (`starting_points`);
        `done`: the trials each task has there; `cap`: trials per task in all, those included (None: no cap). A task
        is sent no batch once its trials reach the cap (its last batch may pass it, as TVM's own cap lets it).
        `warmup`: the samples the cost model needs before it scores (0: stalls always count); `learned`: the samples
        it was taught before the first batch."""
        super().__init__()
        self.warmup, self.learned = warmup, learned
        self.prior = dict(prior or {})
        self.done, self.cap = dict(done or {}), cap
        self.left: list[float] = []  # per task: the trials the cap still allows
        self.alpha = alpha
        self.window = window_size
        self.rng = random.Random(None if seed < 0 else seed)
        self.turns: Turns | None = None
        self.sent: int | None = None  # the task whose batch is out (sent to the runner, not joined)

    def next_task_id(self) -> int:
        tasks = self._outer().tasks_
        if self.turns is None:
            self.turns = Turns([[self.prior[t.ctx.task_name]] if t.ctx.task_name in self.prior else [] for t in tasks],
                               [float(t.task_weight) for t in tasks], self.alpha, self.window, self.rng,
                               self.warmup, self.learned)
            self.left = [math.inf if self.cap is None else self.cap - self.done.get(t.ctx.task_name, 0) for t in tasks]
        if self.sent is not None:
            task, self.sent = self.sent, None
            if tasks[task].runner_futures is not None:  # None: its search ended and it was terminated
                built = sum(r.error_msg is None for r in tasks[task].builder_results or [])  # the cost model learns
                results = self.join_running_task(task)  # these only (TVM's UpdateCostModel); the join clears them
                self.turns.joined(task, batch_best(results), built)
                self.left[task] -= len(results)
        live = [i for i, t in enumerate(tasks) if not t.is_terminated and self.left[i] > 0]
        if not live:
            return -1
        self.sent = self.turns.pick(live)
        return self.sent
