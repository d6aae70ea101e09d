"""A MetaSchedule runner that measures a batch over one RPC session per server (runner "rpc-batch").

Stock `RPCRunner` opens a session per candidate: a tracker request, a connection and a hand-shake
with the server, in a pool job of its own. Here each batch is split into one contiguous chunk per
server, and a pool job measures its chunk over one session (upload, load, allocate, time, remove per
candidate). A candidate that breaks the session is recorded as failed and the job opens a fresh
session for the rest of its chunk. A chunk's time limit is the per-candidate limit times its length.

With a `HopelessCut` (the default), each candidate after a chunk's first is first called once: one whose call takes
`factor` times the best timed before it in its chunk, on its server (and at least `floor_s`) keeps that call's time
as its measurement and is not timed again. A cold batch holds candidates thousands of times slower than its best
(0.8-2.1 s a call against 0.56 ms, in resnet18's first batch on the H200), and the evaluator calls each 4 times (a
warm-up and 3); MetaSchedule needs only to know they are far behind.
"""
from __future__ import annotations

import math
import os
import time
import traceback
from dataclasses import dataclass

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.runner import PyRunner, PyRunnerFuture, RunnerInput, RunnerResult
from tvm.s_tir.meta_schedule.runner.config import EvaluatorConfig, RPCConfig
from tvm.support.popen_pool import PopenPoolExecutor


@dataclass(frozen=True)
class HopelessCut:
    """When one call is measurement enough: a first call `factor` times the chunk's best so far and `floor_s` long.

    The floor keeps a first call's one-time costs (loading the module on the device) from counting against a fast
    candidate, and leaves the candidates that cost little to time fully timed."""
    factor: float = 10.0
    floor_s: float = 0.05

    def at(self, best_s: float) -> float:
        """The first call's time above which a candidate is timed by it alone (inf before any candidate is timed)."""
        return max(self.factor * best_s, self.floor_s) if math.isfinite(best_s) else math.inf


def _one_call(mod, device, args) -> float:
    """One call of the candidate, timed from here (the device synchronised before and after)."""
    f = mod.get_function(mod.entry_name)
    device.sync()
    t0 = time.perf_counter()
    f(*args)
    device.sync()
    return time.perf_counter() - t0


Timed = tuple[list[float] | None, str | None, bool]  # costs (s), error, timed by its first call alone


def _measure_chunk(rpc_config: RPCConfig, evaluator: EvaluatorConfig, device_type: str,
                   items: list[tuple[str, tuple]], cut: HopelessCut | None = None) -> list[Timed]:
    """In a pool worker: time each (artifact, args_info) of one chunk over as few sessions as possible."""
    from tvm.s_tir.meta_schedule.runner.rpc_runner import default_alloc_argument, default_run_evaluator

    out: list[Timed] = []
    best = math.inf  # the chunk's fastest fully timed candidate (s)
    session = device = None
    for n, (artifact, args_info) in enumerate(items):
        remote = f"wb{os.getpid()}_{n}_{os.path.basename(artifact)}"  # a fresh name: dlopen caches by path
        try:
            if session is None:
                session = rpc_config.connect_server()
                device = session.device(device_type, 0)
            session.upload(artifact, remote)
            mod = session.load_module(remote)
            args = default_alloc_argument(session, device, args_info, 1)
            first = _one_call(mod, device, args[0]) if cut is not None and math.isfinite(best) else None
            once = first is not None and first > cut.at(best)
            if once:
                costs = [first]
            else:
                costs = [float(c) for c in default_run_evaluator(session, mod, device, evaluator, args)]
                best = min(best, sum(costs) / len(costs))
            del mod, args
            session.remove(remote)
            out.append((costs, None, once))
        except Exception:  # noqa: BLE001 - recorded for this candidate; the rest get a fresh session
            out.append((None, "SessionBatchRunner: an exception occurred\n" + traceback.format_exc(), False))
            session = device = None
    return out


@derived_object
class _ChunkItemFuture(PyRunnerFuture):
    def __init__(self, chunk, index: int, limit_s: float) -> None:
        super().__init__()
        self.chunk = chunk
        self.index = index
        self.limit_s = limit_s

    def done(self) -> bool:
        return self.chunk.done()

    def result(self) -> RunnerResult:
        try:
            costs, error, _ = self.chunk.result()[self.index]
        except TimeoutError:
            return RunnerResult(None, f"SessionBatchRunner: timeout, the chunk was killed after {self.limit_s:.0f} s")
        except Exception as err:  # noqa: BLE001 - the worker died: every candidate of its chunk failed
            return RunnerResult(None, f"SessionBatchRunner: an exception occurred\n{err}")
        return RunnerResult(costs, error)


@derived_object
class SessionBatchRunner(PyRunner):
    """RPC measurement with one session per server per batch (see the module docstring)."""

    def __init__(self, rpc_config: RPCConfig, evaluator_config: EvaluatorConfig, servers: int,
                 max_batch: int, cut: HopelessCut | None = None) -> None:
        super().__init__()
        self.cut = cut
        self._sent: dict[str, tuple] = {}  # artifact path -> (its chunk's future, its index there)
        self._done_at_last_run: set[str] = set()
        self.servers = max(1, servers)
        self.per_candidate_s = float(rpc_config.session_timeout_sec)
        chunk = -(-max_batch // self.servers)
        self.rpc_config = RPCConfig(rpc_config.tracker_host, rpc_config.tracker_port, rpc_config.tracker_key,
                                    rpc_config.session_priority, self.per_candidate_s * chunk)
        self.evaluator_config = evaluator_config
        self.pool = PopenPoolExecutor(max_workers=self.servers, timeout=self.per_candidate_s * chunk + 10)

    def run(self, runner_inputs: list[RunnerInput]) -> list[_ChunkItemFuture]:
        # Candidates no callback asked for (default schedules) are forgotten a batch late: a scheduler may send the
        # next batch before the measure callbacks of the one before have run.
        self._sent = {k: v for k, v in self._sent.items() if k not in self._done_at_last_run}
        self._done_at_last_run = {k for k, v in self._sent.items() if v[0].done()}
        n = len(runner_inputs)
        size = -(-n // self.servers) if n else 1
        futures: list[_ChunkItemFuture] = []
        for start in range(0, n, size):
            part = runner_inputs[start:start + size]
            items = [(str(r.artifact_path), tuple(a.as_json() for a in r.args_info)) for r in part]
            chunk = self.pool.submit(_measure_chunk, self.rpc_config, self.evaluator_config,
                                     str(part[0].device_type), items, self.cut)
            futures += [_ChunkItemFuture(chunk, i, self.per_candidate_s * len(part)) for i in range(len(part))]
            self._sent.update({path: (chunk, i) for i, (path, _) in enumerate(items)})
        return futures

    def batch_timings(self, builder_results) -> dict:
        """How many of a measured batch's candidates were timed by their first call alone (`HopelessCut`), by their
        artifacts. Forgets them."""
        once = 0
        for r in builder_results:
            chunk, i = self._sent.pop(str(r.artifact_path), (None, 0)) if r.artifact_path else (None, 0)
            if chunk is not None and chunk.done() and chunk.exception() is None:
                once += bool(chunk.result()[i][2])
        return {"timed_once": once}
