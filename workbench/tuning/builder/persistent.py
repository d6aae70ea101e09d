"""`PersistentBuilder`: stock LocalBuilder's semantics with one worker pool for the whole tune.

Stock `LocalBuilder` starts fresh worker processes for every batch, and each pays the import of TVM's tensor
intrinsics (tens of seconds; notes, section 8). `PersistentBuilder` keeps one pool for the whole tune, and its
workers build without that import: candidates arrive as IR that is already tensorized, so lowering them never looks
an intrinsic up. Exporting a linked `.so` moves the g++ link from the (serial) RPC server into the (parallel) builder
workers. With a `StragglerCut`, a batch stops waiting for its slowest builds.
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
from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.builder.local_builder import _serialize_params, _worker_func
from tvm.support.popen_pool import PopenPoolExecutor, kill_child_processes


def export_so(rt_mod) -> str:
    """Export a built candidate as a linked shared library (no linking needed where it is loaded)."""
    path = os.path.join(tempfile.mkdtemp(prefix="wb-build-"), "tvm_tmp_mod.so")
    rt_mod.export_library(path)
    return path


def build_candidate(mod, target, _params, config: dict | None = None):
    """MetaSchedule's `default_build`, minus its `import tvm.s_tir.tensor_intrin` (~20 s per worker); `config`:
    TIR pass settings (`intrinsics.pass_config`), none by default, as stock builds."""
    import tvm
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    if not config:
        return tvm_build(mod, target=target)
    with tvm.transform.PassContext(config=config):
        return tvm_build(mod, target=target)


def warm_worker() -> None:
    """Pay the one-time imports when the worker starts, not inside the first build's timeout."""
    import tvm.driver  # noqa: F401 - imported for its one-time cost, not for a name


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

    NVRTC compiles most CUDA candidates in a second or two, but an evolved one now and then takes ten or more
    times as long, and the whole batch waits for it. Once every candidate has started
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
        self.started: float | None = None  # when the latest build() began (unix s)
        self.timings: dict[str, tuple[float, float]] = {}  # artifact -> (its build s, its batch's wall s)
        self.pool = PopenPoolExecutor(max_workers=max_workers, timeout=timeout_sec, initializer=warm_worker,
                                      maximum_process_uses=maximum_process_uses)

    def prewarm(self) -> None:
        """Start every worker now (in the background), so their imports overlap the client's start-up.

        Each warm-up task holds its worker briefly, so that every pool thread takes one."""
        self._warm = [self.pool.submit(_hold, 1.0) for _ in range(self.max_workers)]

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        args = [(self.f_build, self.f_export, b.mod, b.target, _serialize_params(b.params)) for b in build_inputs]
        t0, self.started = time.perf_counter(), time.time()
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
        it failed or was dropped; the batch's wall; how many stragglers were dropped; `build_started`: when the
        latest build began, unix s: this batch's, the scheduler joining each batch before it builds the next).
        Forgets them."""
        got = [self.timings.pop(r.artifact_path, None) if r.artifact_path else None for r in builder_results]
        each = [None if g is None else round(g[0], 3) for g in got]
        walls = [g[1] for g in got if g is not None]
        return {"build_s": round(max(walls, default=0.0), 3),
                "build_started": self.started,
                "build_max_s": max((x for x in each if x is not None), default=0.0), "build_each_s": each,
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
        a shard whose last batch dropped a straggler would end up to the build timeout late. Killed first, the
        workers' pipes close at once."""
        for worker in list(self.pool._worker_map.values()):  # TVM exposes no other handle
            proc = worker._proc
            if proc is not None and proc.poll() is None:
                kill_child_processes(proc.pid)  # each child on its own: one gone already stops nothing
                with contextlib.suppress(OSError):
                    proc.kill()
        self.pool._threadpool.shutdown(wait=True)  # each killed worker's thread cleans it up first
        self.pool.shutdown()
