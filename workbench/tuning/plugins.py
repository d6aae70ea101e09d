"""MetaSchedule plug-ins: a builder whose workers live across batches, a .so export, a progress callback.

Stock `LocalBuilder` starts fresh worker processes for every batch, and each pays the ~20 s import
of TVM's tensor intrinsics (notes, section 8). `PersistentBuilder` keeps one pool for the whole
tune, and its workers build without that import: candidates arrive as IR that is already
tensorized, so lowering them never looks an intrinsic up. Exporting a linked `.so` moves the g++
link from the (serial) RPC server into the (parallel) builder workers.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from tvm.ir.utils import derived_object
from tvm_ffi import structural_hash
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.builder.local_builder import _serialize_params, _worker_func
from tvm.s_tir.meta_schedule.runner import PyRunner
from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy
from tvm.support.popen_pool import PopenPoolExecutor, kill_child_processes

from workbench.runs.event_types import Batch


def export_so(rt_mod) -> str:
    """Export a built candidate as a linked shared library (no linking needed where it is loaded)."""
    path = os.path.join(tempfile.mkdtemp(prefix="wb-build-"), "tvm_tmp_mod.so")
    rt_mod.export_library(path)
    return path


def build_candidate(mod, target, _params):
    """MetaSchedule's `default_build`, minus its `import tvm.s_tir.tensor_intrin` (~20 s per worker)."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return tvm_build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target=target)


def warm_worker() -> None:
    """Pay the one-time imports when the worker starts, not inside the first build's timeout."""
    import tvm.driver  # noqa: F401


def _hold(seconds: float) -> None:
    time.sleep(seconds)


def _timed_build(args: tuple) -> tuple[str, float]:
    t0 = time.perf_counter()
    path = _worker_func(*args)
    return path, time.perf_counter() - t0


def _remove_artifact(future: concurrent.futures.Future) -> None:
    """Done-callback of a dropped straggler: nothing will load what it built."""
    try:
        path, _ = future.result()
    except Exception:  # noqa: BLE001 - it failed or timed out: nothing to remove
        return
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)


DROPPED = "dropped as a straggler"  # in the build error of a candidate the cut gave up on


@dataclass(frozen=True)
class StragglerCut:
    """When a batch stops waiting for its slowest candidates.

    NVRTC compiles most CUDA candidates in 1-2 s, but an evolved one now and then takes 15-55 s, and
    the whole batch waits for it (the H200 runs of 2026-11-29 and -30). Once every candidate has started
    and at least `after` of the batch is built, the rest get `factor` times the median build of the
    finished ones (at least `min_s`); a candidate still building then is reported as a build error
    and finishes in the background on its worker, which then builds again."""
    factor: float = 4.0
    min_s: float = 5.0
    after: float = 0.5


@derived_object
class PersistentBuilder(PyBuilder):
    """LocalBuilder semantics with one long-lived worker pool (and, with `cut`, no waiting for stragglers)."""

    def __init__(self, max_workers: int, timeout_sec: float = 60.0, f_export: Callable | None = export_so,
                 maximum_process_uses: int = 500, cut: StragglerCut | None = None,
                 f_build: Callable = build_candidate) -> None:
        super().__init__()
        self.max_workers = max_workers
        self.timeout_sec = timeout_sec
        self.f_export = f_export
        self.f_build = f_build
        self.cut = cut
        self.timings: dict[str, tuple[float, float]] = {}  # artifact -> (its build s, its batch's wall s)
        self.pool = PopenPoolExecutor(max_workers=max_workers, timeout=timeout_sec, initializer=warm_worker,
                                      maximum_process_uses=maximum_process_uses)

    def prewarm(self) -> None:
        """Start every worker now (in the background), so their imports overlap the client's start-up.

        Each warm-up task holds its worker briefly, so that every pool thread takes one."""
        self._warm = [self.pool.submit(_hold, 1.0) for _ in range(self.max_workers)]

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        args = [(self.f_build, self.f_export, b.mod, b.target, _serialize_params(b.params)) for b in build_inputs]
        t0 = time.perf_counter()
        futures = [self.pool.submit(_timed_build, a) for a in args]
        dropped = self._wait(futures) if self.cut else {}
        results: list[BuilderResult] = []
        built: dict[str, float] = {}
        for i, future in enumerate(futures):
            if i in dropped and not future.done():
                future.add_done_callback(_remove_artifact)
                results.append(BuilderResult(None, dropped[i]))
                continue
            try:
                path, seconds = future.result()
            except TimeoutError:
                results.append(BuilderResult(None, f"PersistentBuilder: timeout after {self.timeout_sec} s"))
            except Exception as err:  # noqa: BLE001 - the candidate's error, as LocalBuilder reports it
                results.append(BuilderResult(None, f"PersistentBuilder: exception\n{err}"))
            else:
                built[path] = seconds
                results.append(BuilderResult(path, None))
        wall = time.perf_counter() - t0  # every kept candidate is built (or failed) by now
        self.timings.update({path: (seconds, wall) for path, seconds in built.items()})
        return results

    def batch_timings(self, builder_results) -> dict:
        """Build timings of one measured batch, by its artifacts (each built candidate's seconds, None where
        it failed or was dropped; the batch's wall; how many stragglers were dropped). Forgets them."""
        got = [self.timings.pop(r.artifact_path, None) if r.artifact_path else None for r in builder_results]
        each = [None if g is None else round(g[0], 3) for g in got]
        walls = [g[1] for g in got if g is not None]
        return {"build_s": round(max(walls, default=0.0), 3), "build_max_s": max((x for x in each if x is not None), default=0.0),
                "build_each_s": each,
                "build_dropped": sum(bool(r.error_msg and DROPPED in r.error_msg) for r in builder_results)}

    def _wait(self, futures: list[concurrent.futures.Future]) -> dict[int, str]:
        """Wait as `self.cut` says; the indices of the candidates given up on, with their error messages."""
        cut, n = self.cut, len(futures)
        enough = max(n - self.max_workers, math.ceil(cut.after * n), 1)  # every one started, `after` of them done
        pending = set(futures)
        while len(futures) - len(pending) < enough and pending:
            _, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
        finished = [f.result()[1] for f in futures if f not in pending and f.exception() is None]
        if not pending or not finished:
            return {}
        median = statistics.median(finished)
        grace = max(cut.min_s, cut.factor * median)
        _, pending = concurrent.futures.wait(pending, timeout=grace)
        return {i: f"PersistentBuilder: {DROPPED}: still building {grace:.1f} s after {enough} of the "
                   f"batch's {n} candidates were built (median {median:.1f} s each)"
                for i, f in enumerate(futures) if f in pending}

    def shutdown(self) -> None:
        """Stop the pool now, killing a dropped straggler that is still building.

        TVM's own shutdown closes each worker's pipe first, which blocks until that worker's build returns:
        a shard whose last batch dropped a straggler ended up to the build timeout late (16 s on the H200,
        2026-12-02). Killed first, the workers' pipes close at once."""
        for worker in list(self.pool._worker_map.values()):  # noqa: SLF001 - TVM exposes no other handle
            proc = worker._proc  # noqa: SLF001
            if proc is not None and proc.poll() is None:
                kill_child_processes(proc.pid)  # each child on its own: one gone already stops nothing
                with contextlib.suppress(OSError):
                    proc.kill()
        self.pool._threadpool.shutdown(wait=True)  # noqa: SLF001 - each killed worker's thread cleans it up first
        self.pool.shutdown()


@derived_object
class ServersFirstRunner(PyRunner):
    """Runs `inner` once `wait()` has returned: the client searches and builds its first batch while the
    RPC servers start (13 s on the H200 host), and only measuring waits for them."""

    def __init__(self, inner, wait: Callable[[], None]) -> None:
        super().__init__()
        self.inner = inner
        self.wait = wait
        self.ready = False

    def run(self, runner_inputs):
        if not self.ready:
            self.wait()
            self.ready = True
        return self.inner.run(runner_inputs)


def make_builder(kind: str, workers: int, timeout_sec: float):
    """'persistent' (workbench), 'persistent-cut' (that, not waiting for stragglers: `StragglerCut`) or 'local'
    (stock LocalBuilder, a fresh pool per batch)."""
    if kind == "local":
        return ms.builder.LocalBuilder(max_workers=workers, timeout_sec=timeout_sec)
    return PersistentBuilder(max_workers=workers, timeout_sec=timeout_sec,
                             cut=StragglerCut() if kind == "persistent-cut" else None)


@derived_object
class RandomFirstRound(PySearchStrategy):
    """TVM's EvolutionarySearch, except a task's first batch, while nothing of it is measured, is random.

    Until the XGB cost model holds 100 measurements (`num_warmup_samples`) it scores candidates with
    uniform noise, so evolving 512 schedules for 4 generations against that score (~10-15 s of CPU per
    batch on the H200 host) ends in a random pick anyway. The first batch is drawn the way
    `ReplayTrace` draws (fresh random decisions, same postprocessors); the evolutionary search is told
    its results and runs every later batch unchanged. A task with records (a resume) skips the shortcut.
    The evolution keeps out of its batches only what it picked itself, so the random batch's schedules
    (which it sees again among the database's best) are dropped from its batches here: no schedule is
    measured twice, as with TVM's evolution alone (tests/test_first_round.py).
    """

    def __init__(self, **evolutionary_kwargs) -> None:
        self.kwargs = evolutionary_kwargs
        self.evo = ms.search_strategy.EvolutionarySearch(**evolutionary_kwargs)
        self.replay = ms.search_strategy.ReplayTrace()
        self.mod = None
        self.first_pending = False
        self.active = None
        self.drawn: set[int] = set()  # structural hashes of the random batch's schedules

    def _initialize_with_tune_context(self, context) -> None:
        self.mod = context.mod
        self.evo._initialize_with_tune_context(context)
        self.replay._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        measured = database is not None and database.has_workload(self.mod) and \
            len(database.get_top_k(database.commit_workload(self.mod), 1)) > 0
        self.first_pending = not measured and max_trials > 0
        if self.first_pending:
            self.replay.pre_tuning(min(num_trials_per_iter, max_trials), num_trials_per_iter, design_spaces,
                                   database, cost_model)
        self.evo.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def generate_measure_candidates(self):
        if self.first_pending:
            candidates = self.replay.generate_measure_candidates()
            if candidates is not None:
                self.active = self.replay
                return candidates
            self.first_pending = False
        self.active = self.evo
        candidates = self.evo.generate_measure_candidates()
        if candidates is None or not self.drawn:
            return candidates
        return [c for c in candidates if structural_hash(c.sch.mod) not in self.drawn]

    def notify_runner_results(self, measure_candidates, results) -> None:
        if self.active is self.replay:
            self.replay.notify_runner_results(measure_candidates, results)
            self.first_pending = False
            self.drawn = {structural_hash(c.sch.mod) for c in measure_candidates}
        self.evo.notify_runner_results(measure_candidates, results)  # counts the random batch in its budget

    def post_tuning(self) -> None:
        self.evo.post_tuning()

    def clone(self) -> "RandomFirstRound":
        return RandomFirstRound(**self.kwargs)


# "evolutionary-lean": TVM's evolution with a quarter of its population (512) and half its generations (4).
# Each trial costs the H200 host ~8.6 CPU-s of search (bench/results/2026-12-01-h200-mlp-anytime), and XGB
# scores at random for its first 100 samples, so most of that buys nothing early on. A lead of issue 16:
# not yet measured for model quality on the H200, so not a default.
LEAN_SEARCH = {"population_size": 128, "genetic_num_iters": 2}


def make_strategy(name: str, first_round: str):
    """The search strategy a client tunes with: TVM's (by name), its lean variant, or either evolution with a
    random first round."""
    kwargs = LEAN_SEARCH if name == "evolutionary-lean" else {}
    if name.startswith("evolutionary") and first_round == "random":
        return RandomFirstRound(**kwargs)
    return ms.search_strategy.EvolutionarySearch(**kwargs) if kwargs else name


def _costs(builder_results, runner_results) -> tuple[list[float | None], int, int, list[str]]:
    costs: list[float | None] = []
    build_err = run_err = 0
    errors: list[str] = []
    for br, rr in zip(builder_results, runner_results):
        if br.error_msg:
            build_err += 1
            costs.append(None)
            errors.append("build: " + br.error_msg.strip().splitlines()[-1][:200])
        elif rr.error_msg:
            run_err += 1
            costs.append(None)
            errors.append("run: " + rr.error_msg.strip().splitlines()[-1][:200])
        else:
            secs = [float(v) for v in rr.run_secs]
            costs.append(sum(secs) / len(secs))
    return costs, build_err, run_err, errors


@derived_object
class ProgressCallback(ms.measure_callback.PyMeasureCallback):
    """Emits one `batch` event per measured batch (after the defaults committed it to the database)."""

    def __init__(self, emit: Callable[[Batch], object], shard: int, tuned_at: int, shard_trial_budget: int,
                 trials_offset: dict[str, int] | None = None, best_offset: dict[str, float] | None = None,
                 builder: object | None = None) -> None:
        self.emit = emit
        self.builder = builder  # a PersistentBuilder's timings of the batch go into its event
        self.shard = shard
        self.tuned_at = tuned_at
        self.shard_trial_budget = shard_trial_budget
        self.trials: dict[str, int] = dict(trials_offset or {})
        self.best: dict[str, float] = dict(best_offset or {})
        self.weights: dict[str, float] = {}
        self.build_errors: dict[str, int] = {}
        self.run_errors: dict[str, int] = {}
        self.t0 = time.time()

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
        rec = task_scheduler.tasks_[task_id]
        name, flop = rec.ctx.task_name, float(rec.flop)
        self.weights[name] = float(rec.task_weight)
        costs, build_err, run_err, errors = _costs(builder_results, runner_results)
        ok = [c for c in costs if c is not None]
        if ok:
            self.best[name] = min(ok + ([self.best[name]] if name in self.best else []))
        self.trials[name] = self.trials.get(name, 0) + len(measure_candidates)
        self.build_errors[name] = self.build_errors.get(name, 0) + build_err
        self.run_errors[name] = self.run_errors.get(name, 0) + run_err
        best = self.best.get(name)
        est = sum(self.weights.get(n, 1.0) * b for n, b in self.best.items())
        self.emit(Batch(shard=self.shard, tuned_at=self.tuned_at, task=name, task_id=int(task_id),
                        weight=self.weights[name], flop=flop, batch_size=len(measure_candidates),
                        task_trials=self.trials[name], shard_trial_budget=self.shard_trial_budget,
                        shard_trials=sum(self.trials.values()),
                        latest_us=[None if c is None else round(c * 1e6, 3) for c in costs],
                        best_us=None if best is None else round(best * 1e6, 3),
                        best_gflops=None if not best else round(flop / best / 1e9, 3),
                        build_errors=self.build_errors[name], run_errors=self.run_errors[name],
                        errors=errors[:2], est_shard_us=round(est * 1e6, 3),
                        shard_tasks_measured=len(self.best), shard_tasks=len(task_scheduler.tasks_),
                        **(self.builder.batch_timings(builder_results) if hasattr(self.builder, "batch_timings")
                           else {})))
